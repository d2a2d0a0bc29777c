-- remind: records reminder n of a pending operation, once, with the jobs
-- that re-notify the approvers who have not decided.
-- KEYS: the prelude's (1–10).
-- ARGV: 5 n, 6 event, 7… pairs of job id, job JSON.
-- Returns {'reminded'} | {'done'} (sent before) | {'status', st} | {'missing'}.
local st = get('st')
if not st then return {'missing'} end
local f = 'rm:' .. ARGV[5]
if get(f) then
  if get('tx') == TX then return {'reminded'} end
  return {'done'}
end
if st ~= 'pending_approval' then return {'status', st} end
redis.call('HSET', O, f, NOW)
for i = 7, #ARGV, 2 do redis.call('HSET', O, 'jb:' .. ARGV[i], ARGV[i + 1]) end
changed()
log(ARGV[6])
wake()
publish()
return {'reminded'}
