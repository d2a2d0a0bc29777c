-- lease_drop: releases a lease that token holds; another holder's lease
-- is left alone.
-- KEYS: 1 lease. ARGV: 1 token.
-- Returns {1, 0} when released, {0, 0} when nobody holds it, else {0, ms
-- the other holder keeps it}.
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return {1, 0}
end
if not cur then return {0, 0} end
return {0, redis.call('PTTL', KEYS[1])}
