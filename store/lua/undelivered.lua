-- undelivered: a notification job failed; counts the attempt, holds the
-- job's lease for the backoff so no replica retries sooner, and schedules
-- the retry. The first attempts and then every tenth are audited.
-- KEYS: the prelude's (1–10), 11 the job's lease.
-- ARGV: 5 job id, 6 least wait (ms), 7 event whose "#attempt" and "#retry"
--   placeholders are filled in here.
-- Returns {attempt, wait ms}, or {0, 0} when the job is recorded as
-- delivered (a late attempt of a worker that was paused past its lease
-- while another delivered the job): nothing is recorded, the lease of
-- whoever holds it now is left alone, and no retry is scheduled.
if redis.call('HEXISTS', O, 'dl:' .. ARGV[5]) == 1 then return {0, 0} end
local n = redis.call('HINCRBY', O, 'n:' .. ARGV[5], 1)
local wait = math.max(math.min(1000 * 2 ^ math.min(n, 9), 300000), tonumber(ARGV[6]))
redis.call('SET', KEYS[11], 'backoff', 'PX', wait)
redis.call('ZADD', T, NOW + wait, MEMBER .. '|job:' .. ARGV[5])
if n <= 3 or n % 10 == 0 then
  local ev = string.gsub(ARGV[7], '"#attempt"', tostring(n))
  ev = string.gsub(ev, '"#retry"', tostring(math.floor(wait / 1000)))
  log(ev)
end
return {n, wait}
