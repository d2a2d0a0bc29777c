-- finish: executing → succeeded or failed, recorded by the claimer only.
-- ARGV: 5 claim token, 6 succeeded|failed, 7 result JSON or '',
--   8 error JSON or '', 9 event, 10 retention (ms).
-- Returns {'done'} | {'not_claimer', status} | {'missing'}.
local st = get('st')
if not st then return {'missing'} end
if st == ARGV[6] and get('tx') == TX then return {'done'} end
if st ~= 'executing' or get('ct') ~= ARGV[5] then return {'not_claimer', st} end
if ARGV[7] ~= '' then redis.call('HSET', O, 'r', ARGV[7]) end
if ARGV[8] ~= '' then redis.call('HSET', O, 'er', ARGV[8]) end
changed()
log(ARGV[9])
finish(st, ARGV[6], ARGV[10])
publish()
return {'done'}
