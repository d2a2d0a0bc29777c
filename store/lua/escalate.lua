-- escalate: adds approvers to a pending operation that nobody decided in
-- time, once, with their notification jobs.
-- KEYS: the prelude's (1–10).
-- ARGV: 5 escalation JSON {t, a}, 6 event, 7… pairs of job id, job JSON.
-- Returns {'escalated'} | {'done'} (escalated before) | {'status', st} | {'missing'}.
local st = get('st')
if not st then return {'missing'} end
if get('es') then
  if get('tx') == TX then return {'escalated'} end
  return {'done'}
end
if st ~= 'pending_approval' then return {'status', st} end
redis.call('HSET', O, 'es', ARGV[5])
for i = 7, #ARGV, 2 do redis.call('HSET', O, 'jb:' .. ARGV[i], ARGV[i + 1]) end
changed()
log(ARGV[6])
wake()
publish()
return {'escalated'}
