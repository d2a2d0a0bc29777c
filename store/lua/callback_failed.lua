-- callback_failed: a status webhook did not acknowledge the next change;
-- counts the attempt, holds the operation's callback lease for the backoff
-- so no replica retries sooner, and schedules the retry in the timer set.
-- KEYS: the prelude's (1–10), 11 the operation's callback lease.
-- ARGV: 5 least wait (ms).
-- Returns {attempt, wait ms}, {0, 0} when the operation is gone.
if redis.call('EXISTS', O) == 0 then return {0, 0} end
local n = redis.call('HINCRBY', O, 'cn', 1)
local wait = math.max(math.min(1000 * 2 ^ math.min(n - 1, 9), 300000), tonumber(ARGV[5]))
redis.call('SET', KEYS[11], 'backoff', 'PX', wait)
redis.call('ZADD', T, NOW + wait, MEMBER .. '|callback')
return {n, wait}
