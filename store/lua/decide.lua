-- decide: one approver's approval or rejection of a pending operation.
-- KEYS: the prelude's (1–10).
-- ARGV: 5 approver, 6 decision JSON (carries the transition id as "tx"),
--   7 '1' approve / '0' reject, 8 required approvals, 9 link nonce hash or '',
--   10 payload hash the human saw, 11 event, 12 quorum event,
--   13 expire event, 14 retention (ms).
-- Returns {outcome, status after, the operation's hash after (HGETALL)};
-- outcomes as approval.DecideOutcome, or {'missing', ''}. The hash spares
-- the caller the read it makes next (the page shows the decision).
local function answer(outcome, status) return {outcome, status, redis.call('HGETALL', O)} end
local st = get('st')
if not st then return {'missing', ''} end
local who = ARGV[5]
local mine = get('a:' .. who)
if mine and cjson.decode(mine)['tx'] == TX then -- our own retried approval
  if st == 'pending_approval' then return answer('recorded', st) end
  return answer('approved', st)
end
if st == 'rejected' and get('tx') == TX then return answer('rejected', st) end
if st == 'pending_approval' and passed() then
  finish(st, 'expired', ARGV[14])
  changed()
  log(ARGV[13])
  publish()
  return answer('expired', 'expired')
end
if st ~= 'pending_approval' then return answer('not_pending', st) end
if get('ph') ~= ARGV[10] then return answer('hash_mismatch', st) end
if ARGV[9] ~= '' then
  local c = get('c:' .. ARGV[9])
  if not c then return answer('unknown_link', st) end
  c = cjson.decode(c)
  if c['w'] ~= who or c['r'] then return answer('unknown_link', st) end
end
if mine then return answer('already_decided', st) end
changed()
log(ARGV[11])
if ARGV[7] == '0' then
  redis.call('HSET', O, 'rj', ARGV[6])
  finish(st, 'rejected', ARGV[14])
  publish()
  return answer('rejected', 'rejected')
end
redis.call('HSET', O, 'a:' .. who, ARGV[6])
wake() -- update the messages ("1 of 2"), or run it
if redis.call('HINCRBY', O, 'na', 1) >= tonumber(ARGV[8]) then
  redis.call('HSET', O, 'st', 'approved')
  count('nq', 1)
  log(ARGV[12])
  publish()
  return answer('approved', 'approved')
end
publish()
return answer('recorded', 'pending_approval')
