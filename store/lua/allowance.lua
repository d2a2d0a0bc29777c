-- allowance: activates an allowance, once.
-- KEYS: 1 the principal's allowances. ARGV: 1 id, 2 the allowance JSON,
--   3 its end (ms), 4 operations allowed or '', 5 sum allowed or ''.
--   Now is Redis's TIME, the clock every replica reads.
-- Returns 1 if activated now, 0 if it was before.
local AL, id = KEYS[1], ARGV[1]
if redis.call('HSETNX', AL, id, ARGV[2]) == 0 then return 0 end
redis.call('HSET', AL, id .. ':x', ARGV[3])
if ARGV[4] ~= '' then redis.call('HSET', AL, id .. ':c', ARGV[4]) end
if ARGV[5] ~= '' then redis.call('HSET', AL, id .. ':s', ARGV[5]) end
-- The hash lives a day past its last allowance.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local keep = tonumber(ARGV[3]) - now + 86400000
if redis.call('PTTL', AL) < keep then redis.call('PEXPIRE', AL, keep) end
return 1
