-- finish: executing → succeeded or failed, recorded by the claimer only.
-- When an operator settled the operation first (settle.lua), the
-- claimer's outcome arrives late: it is kept beside the settled one
-- (field lo) with its own audit event, and the terminal state stays.
-- KEYS: the prelude's (1–10).
-- ARGV: 5 claim token, 6 succeeded|failed, 7 result JSON or '',
--   8 error JSON or '', 9 event, 10 retention (ms), 11 late outcome JSON
--   or '', 12 late_outcome event or ''.
-- Returns {'done'} | {'late', status} | {'not_claimer', status}
--   | {'missing'}.
local st = get('st')
if not st then return {'missing'} end
if st == ARGV[6] and get('tx') == TX then return {'done'} end
if get('ct') == ARGV[5] and (st == 'succeeded' or st == 'failed') and ARGV[11] ~= '' then
  if get('lo') then return {'late', st} end -- recorded before (a retry)
  redis.call('HSET', O, 'lo', ARGV[11])
  changed()
  log(ARGV[12])
  wake() -- the messages and the status webhook hear it
  publish()
  return {'late', st}
end
if st ~= 'executing' or get('ct') ~= ARGV[5] then return {'not_claimer', st} end
if ARGV[7] ~= '' then redis.call('HSET', O, 'r', ARGV[7]) end
if ARGV[8] ~= '' then redis.call('HSET', O, 'er', ARGV[8]) end
changed()
log(ARGV[9])
finish(st, ARGV[6], ARGV[10])
publish()
return {'done'}
