-- passkey: moves a passkey's sign count forward for one assertion. A
-- count that does not move forward is refused (a cloned authenticator,
-- or the same assertion twice), unless the authenticator keeps no count
-- (0 before and after), as many synced passkeys do.
-- KEYS: 1 the approver's passkeys. ARGV: 1 credential id (base64url),
-- 2 the assertion's sign count.
-- Returns 'used', 'regression' or 'unknown'.
local cur = redis.call('HGET', KEYS[1], 's:' .. ARGV[1])
if not cur then return 'unknown' end
local was, now = tonumber(cur), tonumber(ARGV[2])
if now <= was and (now ~= 0 or was ~= 0) then return 'regression' end
redis.call('HSET', KEYS[1], 's:' .. ARGV[1], now)
return 'used'
