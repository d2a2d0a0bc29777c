-- claim: approved → executing, by exactly one worker. The token names the
-- claimer: a retried claim by its winner reads as won, never as lost.
-- KEYS: the prelude's (1–10).
-- ARGV: 5 claim token, 6 event, 7 expire event, 8 retention (ms),
--   9 execution lease (ms; '' or 0 for none): the claim holds until the
--   store's own clock (Redis TIME) passes it, renewed by fence.lua.
-- Returns {'won'} | {'lost', status} | {'expired'} | {'missing'}.
local st = get('st')
if not st then return {'missing'} end
if st == 'executing' and get('ct') == ARGV[5] then return {'won'} end
if st ~= 'approved' then return {'lost', st} end
if passed() then
  finish(st, 'expired', ARGV[8])
  changed()
  log(ARGV[7])
  publish()
  return {'expired'}
end
redis.call('HSET', O, 'st', 'executing', 'ct', ARGV[5], 'ca', NOW)
local lease = tonumber(ARGV[9])
if lease and lease > 0 then
  local t = redis.call('TIME')
  redis.call('HSET', O, 'le', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + lease)
end
count('nq', -1)
changed()
log(ARGV[6])
redis.call('ZREM', D, MEMBER)
redis.call('ZADD', X, NOW, MEMBER)
publish()
return {'won'}
