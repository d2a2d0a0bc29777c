-- settle: an operator records the outcome of an operation left executing
-- by a process that died (or stopped) after its claim.
-- KEYS: the prelude's (1–10).
-- ARGV: 5 succeeded|failed, 6 error JSON or '', 7 event, 8 retention (ms),
--   9 'unknown' when the operator settles it as outcome unknown (allowed
--   while the claimer's lease is live), '' when they say what happened
--   (allowed only once the lease, field le, has passed on the store's own
--   clock: from then on no re-check of that claim succeeds, fence.lua).
-- Returns {'done'} | {'status', current status} | {'leased', 'executing',
--   ms the lease has left} | {'missing'}.
local st = get('st')
if not st then return {'missing'} end
if st == ARGV[5] and get('tx') == TX then return {'done'} end
if st ~= 'executing' then return {'status', st} end
if ARGV[9] ~= 'unknown' then
  local le = tonumber(get('le'))
  if le then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    if le > now then return {'leased', st, le - now} end
  end
end
if ARGV[6] ~= '' then redis.call('HSET', O, 'er', ARGV[6]) end
changed()
log(ARGV[7])
finish(st, ARGV[5], ARGV[8])
publish()
return {'done'}
