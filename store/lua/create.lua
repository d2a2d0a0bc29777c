-- create: prepare stores a new draft, counted against the principal's
-- quotas, rate limit and idempotency key in the same step.
-- KEYS: the prelude's (1–10), 11 the idempotency binding (only when the
--   call has an idempotency key).
-- ARGV: 5 keys' lifetime (ms), 6 expires_at (ms), 7 requests per minute,
--   8 max drafts, 9 max stored bytes, 10 bytes of this operation,
--   11 the shard's counters key prefix (countersKeyPrefix), 12 payload
--   hash, 13 event, 14 doc, 15 input, 16 preview or ''.
-- Discovers (PW): the counters of the principals whose operations' keys
--   have expired, named by the gone index's members ("principal|bytes|op
--   key"), as ARGV[11] .. principal — same slot because the prefix carries
--   the shard tag of the gone index (KEYS[8]).
-- Returns {'created'} | {'rate', wait ms} | {'bound', op key, payload hash}
--   | {'quota', name, limit} | {'exists'}.
local wait = window('rw', 'rn', ARGV[7])
if wait then return {'rate', wait} end
local IK = KEYS[11]
if IK then
  local b = redis.call('GET', IK)
  if b then
    local op, hash = string.match(b, '^([^|]+)|(.*)$')
    if op == KEY then return {'created'} end -- our own retried call
    return {'bound', op, hash}
  end
end
if redis.call('EXISTS', O) == 1 then
  if get('tx') == TX then return {'created'} end
  return {'exists'}
end

-- Release the bytes of operations whose keys have expired since.
for _, m in ipairs(redis.call('ZRANGEBYSCORE', G, '-inf', NOW, 'LIMIT', 0, 32)) do
  local who, n = string.match(m, '^([^|]+)|(%d+)|')
  if who then
    local PW = ARGV[11] .. who
    redis.call('HINCRBY', PW, 'nb', -tonumber(n))
  end
  redis.call('ZREM', G, m)
end

local size = tonumber(ARGV[10])
if num(redis.call('HGET', P, 'nd')) >= tonumber(ARGV[8]) then return {'quota', 'max_drafts', ARGV[8]} end
if num(redis.call('HGET', P, 'nb')) + size > tonumber(ARGV[9]) then return {'quota', 'max_stored_bytes', ARGV[9]} end

-- One HSET with every field, the first event of the trail included (what
-- log() would append to an empty trail).
local fields = {'d', ARGV[14], 'in', ARGV[15], 'st', 'draft', 'x', ARGV[6],
  'u', NOW, 'v', 1, 'ph', ARGV[12], 'tx', TX, 'sz', size, 'ev', ARGV[13]}
if ARGV[16] ~= '' then fields[#fields + 1] = 'pv'; fields[#fields + 1] = ARGV[16] end
if IK then
  fields[#fields + 1] = 'ik'; fields[#fields + 1] = IK
  redis.call('SET', IK, KEY .. '|' .. ARGV[12], 'PX', ARGV[5])
end
redis.call('HSET', O, unpack(fields))
redis.call('XADD', A, '*', 'k', KEY, 'h', ARGV[12], 'e', ARGV[13])
redis.call('PEXPIRE', O, ARGV[5]) -- the binding above has its own life; no trail list to expire
redis.call('ZADD', PI, NOW, KEY)
redis.call('ZADD', D, ARGV[6], MEMBER)
count('nd', 1)
count('nb', size)
return {'created'}
