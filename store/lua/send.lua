-- send: draft → pending_approval with its notification jobs; wakes the
-- workers in the same step, so no crash can leave it sent and unnotified.
-- KEYS: the prelude's (1–10), 11 the principal's allowances.
-- ARGV: 5 new expires_at (ms), 6 jobs JSON, 7 event, 8 keys' lifetime (ms),
--   9 max pending, 10 sends per minute, 11 expire event, 12 draft retention (ms),
--   13 requests per minute, 14 allowance id or '', 15 its amount,
--   16 the allowance's decision JSON, 17 its approval event, 18 the
--   approved event, 19… pairs of timer reason, due (ms): the reminders
--   and escalation of its route, scheduled in the same step.
-- With an allowance whose budget still holds, the budget is spent and the
-- operation is approved at once, in this step: replicas sending at once
-- never overspend it. Otherwise it goes to humans as usual.
-- Returns {'sent', hash} | {'status', current status, hash} | {'rate', wait ms}
--   | {'quota', name, limit} | {'missing'}; hash is the operation's
--   hash after the call (HGETALL), which the agent is answered with.
local function hash() return redis.call('HGETALL', O) end
local st = get('st')
if not st then return {'missing'} end
if st ~= 'draft' then
  if st == 'pending_approval' and get('tx') == TX then return {'sent', hash()} end
  return {'status', st, hash()}
end
if passed() then
  finish(st, 'expired', 0, ARGV[12])
  changed()
  log(ARGV[11])
  publish()
  return {'status', 'expired', hash()}
end
local wait = window('rw', 'rn', ARGV[13]) or window('sw', 'sn', ARGV[10])
if wait then return {'rate', wait} end
if num(redis.call('HGET', P, 'np')) >= tonumber(ARGV[9]) then return {'quota', 'max_pending', ARGV[9]} end
local spend = ARGV[14]
if spend ~= '' then
  local AL = KEYS[11]
  local c, s = redis.call('HGET', AL, spend .. ':c'), redis.call('HGET', AL, spend .. ':s')
  local amount = tonumber(ARGV[15])
  local ok = num(redis.call('HGET', AL, spend .. ':x')) > NOW and not redis.call('HGET', AL, spend .. ':r')
    and (not c or tonumber(c) >= 1) and (not s or tonumber(s) >= amount)
  if ok then
    if c then redis.call('HINCRBY', AL, spend .. ':c', -1) end
    if s then redis.call('HINCRBYFLOAT', AL, spend .. ':s', -amount) end
    redis.call('HSET', O, 'st', 'approved', 'x', ARGV[5], 'sa', NOW, 'j', '[]', 'al', spend,
      'a:allowance:' .. spend, ARGV[16], 'na', 1)
    changed()
    log(ARGV[7])
    log(ARGV[17])
    log(ARGV[18])
    count('nd', -1)
    count('np', 1)
    count('nq', 1) -- approved, waiting for its claim
    live(ARGV[8])
    redis.call('ZADD', D, ARGV[5], MEMBER)
    wake()
    publish()
    return {'sent', hash()}
  end
end
redis.call('HSET', O, 'st', 'pending_approval', 'x', ARGV[5], 'sa', NOW, 'j', ARGV[6])
changed()
log(ARGV[7])
count('nd', -1)
count('np', 1)
live(ARGV[8])
redis.call('ZADD', D, ARGV[5], MEMBER)
for i = 19, #ARGV, 2 do redis.call('ZADD', T, ARGV[i + 1], MEMBER .. '|' .. ARGV[i]) end
wake()
publish()
return {'sent', hash()}
