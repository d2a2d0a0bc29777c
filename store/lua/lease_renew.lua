-- lease_renew: extends a lease that token still holds; never takes a free
-- one.
-- KEYS: 1 lease. ARGV: 1 token, 2 ttl (ms).
-- Returns {1, 0} when renewed, {0, 0} when nobody holds it, else {0, ms
-- the other holder keeps it}.
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, 0}
end
if not cur then return {0, 0} end
return {0, redis.call('PTTL', KEYS[1])}
