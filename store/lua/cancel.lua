-- cancel: a draft or pending operation is ended by its requester or an
-- operator.
-- KEYS: the prelude's (1–10).
-- ARGV: 5 event, 6 retention (ms), 7 draft retention (ms).
-- Returns {'canceled', status before} | {'status', current status} | {'missing'}.
local st = get('st')
if not st then return {'missing'} end
if st == 'canceled' and get('tx') == TX then return {'canceled', 'canceled'} end
if st ~= 'draft' and st ~= 'pending_approval' then return {'status', st} end
changed()
log(ARGV[5])
finish(st, 'canceled', ARGV[6], ARGV[7])
publish()
return {'canceled', st}
