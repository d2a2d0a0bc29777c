-- advance: moves a shard's audit chain head from what the sealer read to
-- what it sealed, if nobody moved it meanwhile, and drops the sealed raw
-- events.
-- KEYS: 1 head, 2 audit chain. ARGV: 1 expected head id ('' for none),
--   2 new id, 3 seq, 4 hash, 5 last checkpoint (ms), 6 since, 7 trim id
--   (the smallest id to keep).
-- Returns 1, or 0 if the head had moved.
if (redis.call('HGET', KEYS[1], 'id') or '') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'id', ARGV[2], 'seq', ARGV[3], 'hash', ARGV[4], 'cp', ARGV[5], 'since', ARGV[6])
redis.call('XTRIM', KEYS[2], 'MINID', ARGV[7])
return 1
