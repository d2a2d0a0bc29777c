-- rate: counts one request of a principal in its one-minute window, on the
-- server's clock.
-- KEYS: 1 the principal's counters. ARGV: 1 requests per minute.
-- Returns 0, or the milliseconds to wait when over the limit.
local P, limit = KEYS[1], tonumber(ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local start = tonumber(redis.call('HGET', P, 'rw') or '0')
if now - start >= 60000 then
  redis.call('HSET', P, 'rw', now, 'rn', 1)
  return 0
end
if redis.call('HINCRBY', P, 'rn', 1) > limit then return 60000 - (now - start) end
return 0
