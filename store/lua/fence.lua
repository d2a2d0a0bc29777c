-- fence: the executor's re-check right before an effect, and the renewal
-- of its execution lease, in one step. The claim is still this executor's
-- KEYS: the prelude's (1–10).
-- only while the operation is executing, its claim token is ARGV[5], and
-- its lease (field le, ms of the store's own clock, Redis TIME) has not
-- run out. A lease that ran out is never renewed: once it has passed, no
-- re-check of that claim succeeds again, so an operator who settles the
-- operation after the lease passed knows that no later effect can start.
-- ARGV: 5 claim token, 6 lease (ms).
-- Returns {'held', ms left} | {'lost', status} | {'expired', ms since}
--   | {'missing'}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local st = get('st')
if not st then return {'missing'} end
if st ~= 'executing' or get('ct') ~= ARGV[5] then return {'lost', st} end
local le = tonumber(get('le'))
if le and le <= now then return {'expired', now - le} end
redis.call('HSET', O, 'le', now + tonumber(ARGV[6]))
return {'held', tonumber(ARGV[6])}
