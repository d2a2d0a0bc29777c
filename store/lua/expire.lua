-- expire: an operation whose window has passed, found by a read.
-- KEYS: the prelude's (1–10).
-- ARGV: 5 event, 6 retention (ms), 7 draft retention (ms).
-- Returns {'expired', status before} | {'status', current status} | {'missing'}.
local st = get('st')
if not st then return {'missing'} end
if not expirable(st) or not passed() then return {'status', st} end
changed()
log(ARGV[5])
finish(st, 'expired', ARGV[6], ARGV[7])
publish()
return {'expired', st}
