-- settle: an operator records the outcome of an operation left executing
-- by a process that died after its claim.
-- ARGV: 5 succeeded|failed, 6 error JSON or '', 7 event, 8 retention (ms).
-- Returns {'done'} | {'status', current status} | {'missing'}.
local st = get('st')
if not st then return {'missing'} end
if st == ARGV[5] and get('tx') == TX then return {'done'} end
if st ~= 'executing' then return {'status', st} end
if ARGV[6] ~= '' then redis.call('HSET', O, 'er', ARGV[6]) end
changed()
log(ARGV[7])
finish(st, ARGV[5], ARGV[8])
publish()
return {'done'}
