-- lease_take: takes a short exclusive lease for token, or renews it when
-- token holds it already (a retried take whose reply was lost reads as
-- taken).
-- KEYS: 1 lease, 2 (optional) the operation hash it leases work on, read
--   in the same step once the lease is held.
-- ARGV: 1 token, 2 ttl (ms).
-- Returns {1, 0} when held by token after the call, {1, 0, the operation's
-- HGETALL} with KEYS[2]; else {0, ms the other holder keeps it}.
local cur = redis.call('GET', KEYS[1])
if not cur then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
elseif cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
else
  return {0, redis.call('PTTL', KEYS[1])}
end
if KEYS[2] then return {1, 0, redis.call('HGETALL', KEYS[2])} end
return {1, 0}
