-- stale: a pending operation whose target changed since prepare is failed
-- before anyone approves what cannot run.
-- KEYS: the prelude's (1–10).
-- ARGV: 5 error JSON, 6 event, 7 retention (ms).
-- Returns {'failed'} | {'status', current status} | {'missing'}.
local st = get('st')
if not st then return {'missing'} end
if st == 'failed' and get('tx') == TX then return {'failed'} end
if st ~= 'pending_approval' then return {'status', st} end
redis.call('HSET', O, 'er', ARGV[5])
changed()
log(ARGV[6])
finish(st, 'failed', ARGV[7])
publish()
return {'failed'}
