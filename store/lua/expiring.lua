-- expiring: counts the shard's pending operations whose approval window
-- ends before a time, for the gauge of approvals about to expire. Looks at
-- no more than a bounded number of entries of the due index (drafts and
-- approved operations are in it too, and are not counted).
-- KEYS: 1 due index. ARGV: 1 now (ms), 2 until (ms), 3 most entries to
--   look at, 4 the shard's operation key prefix (opKeyPrefix).
-- Discovers (O): the hash of each operation in that range, named by the
--   due index's members ("op key|principal") after ARGV[4] — same slot
--   because the prefix carries the shard tag of the due index (KEYS[1]).
-- Returns the count.
local D = KEYS[1]
local n = 0
for _, m in ipairs(redis.call('ZRANGEBYSCORE', D, ARGV[1], ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))) do
  local key = string.match(m, '^([^|]+)|')
  local O = key and ARGV[4] .. key
  if O and redis.call('HGET', O, 'st') == 'pending_approval' then n = n + 1 end
end
return n
