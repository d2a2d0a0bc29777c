-- limit: counts one attempt in a fixed window.
-- KEYS: 1 counter. ARGV: 1 window (ms). Returns {count, pttl}.
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {n, redis.call('PTTL', KEYS[1])}
