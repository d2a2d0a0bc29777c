-- sweep: expires the shard's operations whose window has passed, in one
-- step per batch, so that expiry costs what is due, not what is stored.
-- KEYS: 1 due index, 2 stream, 3 gone index, 4 audit chain.
-- ARGV: 1 now (ms), 2 batch size, 3 retention (ms), 4 draft retention
--   (ms), 5 expire event JSON (the same for every operation; it names no
--   operation), 6 the shard's operation key prefix (opKeyPrefix), 7 its
--   events list prefix (eventsKeyPrefix), 8 its counters prefix
--   (countersKeyPrefix).
-- Discovers (O, E, P): each due operation's hash and events list, and its
--   principal's counters, named by the due index's members ("op
--   key|principal") after the prefixes ARGV[6], ARGV[7], ARGV[8] — same
--   slot because the prefixes carry the shard tag of the due index
--   (KEYS[1]).
-- Discovers (ik): an operation's idempotency binding, named by its field
--   ik — same slot because idemKey builds it with the operation's shard tag.
-- Returns {key, payload hash, action, principal, status before, …} of the
-- operations it expired (the action for metrics: the doc's first field,
-- written by encodeDoc; the principal and the status before for the
-- status webhooks of expired drafts, which wake no worker).
local D, Q, G, A, NOW = KEYS[1], KEYS[2], KEYS[3], KEYS[4], tonumber(ARGV[1])
local out = {}
for _, m in ipairs(redis.call('ZRANGEBYSCORE', D, '-inf', NOW, 'LIMIT', 0, tonumber(ARGV[2]))) do
  redis.call('ZREM', D, m)
  local key, who = string.match(m, '^([^|]+)|(.+)$')
  local O, E, P = ARGV[6] .. key, ARGV[7] .. key, ARGV[8] .. who
  local st = redis.call('HGET', O, 'st')
  local x = tonumber(redis.call('HGET', O, 'x') or '')
  if (st == 'draft' or st == 'pending_approval' or st == 'approved') and x and NOW >= x then
    redis.call('HSET', O, 'st', 'expired', 'u', NOW, 'tx', 'sweep')
    redis.call('HINCRBY', O, 'v', 1)
    local trail = redis.call('HGET', O, 'ev') -- the trail, as prelude.lua's log()
    redis.call('HSET', O, 'ev', trail and (trail .. '\n' .. ARGV[5]) or ARGV[5])
    redis.call('XADD', A, '*', 'k', key, 'h', redis.call('HGET', O, 'ph') or '', 'e', ARGV[5])
    local keep = ARGV[3]
    if st == 'draft' then
      keep = ARGV[4]
      redis.call('HINCRBY', P, 'nd', -1)
      redis.call('HINCRBY', P, 'nb', -tonumber(redis.call('HGET', O, 'sz') or '0'))
      redis.call('HDEL', O, 'in', 'pv')
      redis.call('HSET', O, 'sz', 0)
    else
      redis.call('HINCRBY', P, 'np', -1)
      if st == 'approved' then redis.call('HINCRBY', P, 'nq', -1) end
      redis.call('ZADD', G, NOW + tonumber(keep), who .. '|' .. (redis.call('HGET', O, 'sz') or '0') .. '|' .. key)
      redis.call('XADD', Q, 'MAXLEN', '~', 100000, '*', 'o', key, 'p', who)
    end
    redis.call('PEXPIRE', O, keep)
    redis.call('PEXPIRE', E, keep)
    local ik = redis.call('HGET', O, 'ik')
    if ik then redis.call('PEXPIRE', ik, keep) end
    redis.call('PUBLISH', 'cs:changes', key)
    out[#out + 1] = key
    out[#out + 1] = redis.call('HGET', O, 'ph') or ''
    out[#out + 1] = string.match(redis.call('HGET', O, 'd') or '', '^{"a":"([^"]*)"') or ''
    out[#out + 1] = who
    out[#out + 1] = st
  end
end
return out
