-- read: counts one request of the principal (as rate.lua) and returns the
-- operation, in one round trip. (Under out-of-memory the count is refused;
-- the store then reads without it.)
-- KEYS: 1 operation hash, 2 the principal's counters. ARGV: 1 requests per minute.
-- Returns {wait ms, flat field/value list}.
local P, limit = KEYS[2], tonumber(ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local start = tonumber(redis.call('HGET', P, 'rw') or '0')
if now - start >= 60000 then
  redis.call('HSET', P, 'rw', now, 'rn', 1)
elseif redis.call('HINCRBY', P, 'rn', 1) > limit then
  return {60000 - (now - start), {}}
end
return {0, redis.call('HGETALL', KEYS[1])}
