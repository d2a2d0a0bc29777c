-- lease: takes, renews or releases a short exclusive lease held by token.
-- KEYS: 1 lease, 2 (optional, with 'take') the operation hash it leases
--   work on, read in the same step once the lease is taken.
-- ARGV: 1 'take'|'renew'|'drop', 2 token, 3 ttl (ms).
-- Returns {1, 0} when held by token after the call (dropped: released),
-- {1, 0, the operation's HGETALL} when taken (or taken before by token)
-- with KEYS[2],
-- else {0, ms the other holder keeps it}.
local cur = redis.call('GET', KEYS[1])
if ARGV[1] == 'take' and not cur then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  if KEYS[2] then return {1, 0, redis.call('HGETALL', KEYS[2])} end
  return {1, 0}
end
if cur == ARGV[2] then
  if ARGV[1] == 'drop' then redis.call('DEL', KEYS[1]) else redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
  -- a retried take (its reply was lost) reads as taken, with the hash too
  if ARGV[1] == 'take' and KEYS[2] then return {1, 0, redis.call('HGETALL', KEYS[2])} end
  return {1, 0}
end
if not cur then return {0, 0} end
return {0, redis.call('PTTL', KEYS[1])}
