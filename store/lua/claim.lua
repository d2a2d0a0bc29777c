-- claim: approved → executing, by exactly one worker. The token names the
-- claimer: a retried claim by its winner reads as won, never as lost.
-- ARGV: 5 claim token, 6 event, 7 expire event, 8 retention (ms).
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
count('nq', -1)
changed()
log(ARGV[6])
redis.call('ZREM', D, MEMBER)
redis.call('ZADD', X, NOW, MEMBER)
publish()
return {'won'}
