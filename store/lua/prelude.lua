-- Shared by every script on one operation.
-- KEYS: 1 operation hash, 2 its events list, 3 the principal's counters,
--       4 the shard's stream, 5 timers, 6 due index, 7 executing index,
--       8 gone index, 9 the principal's operation index, 10 the shard's
--       audit chain.
--       A script may take more KEYS, from 11 on (its header lists them).
-- ARGV: 1 operation key, 2 principal, 3 transition id (a retried call
--       carries the same id and is recognised as already done), 4 now (ms).
-- Discovers (ik): the operation's idempotency binding, named by its field
--       ik (create.lua stores its KEYS[11] there) — same slot because
--       idemKey builds it with the operation's shard tag.
local O, E, P, Q, T, D, X, G, PI, A = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local KEY, WHO, TX, NOW = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local MEMBER = KEY .. '|' .. WHO

local function get(f) return redis.call('HGET', O, f) end
local function num(v) return tonumber(v) or 0 end

-- changed marks a change: a new version, and the id of the transition
-- that made it, so that its retry recognises itself. A change without an
-- id (a delivery recorded) keeps the last one: overwriting it would make
-- that transition's retry, after a lost reply, fail as if it never ran.
local function changed()
  redis.call('HSET', O, 'u', NOW)
  if TX ~= '' then redis.call('HSET', O, 'tx', TX) end
  redis.call('HINCRBY', O, 'v', 1)
end
-- log records an event in the operation's trail and, in the same step, in
-- its shard's audit chain: the order of the chain is the order of the
-- transitions, whichever replica made them. The trail is the field ev of
-- the operation's hash, its events one per line (compact JSON has no
-- newline): a list of its own would cost a key more than its events
-- (operations stored before kept it in the list E, which is still read).
local function log(ev)
  local trail = get('ev')
  redis.call('HSET', O, 'ev', trail and (trail .. '\n' .. ev) or ev)
  redis.call('XADD', A, '*', 'k', KEY, 'h', get('ph') or '', 'e', ev)
end
local function publish() redis.call('PUBLISH', 'cs:changes', KEY) end
local function wake() redis.call('XADD', Q, 'MAXLEN', '~', 100000, '*', 'o', KEY, 'p', WHO) end
local function count(f, n) redis.call('HINCRBY', P, f, n) end

-- live sets how long the operation's keys (and its idempotency binding) live.
local function live(ms)
  ms = tonumber(ms)
  if not ms or ms <= 0 then return end
  redis.call('PEXPIRE', O, ms)
  redis.call('PEXPIRE', E, ms)
  local ik = get('ik')
  if ik then redis.call('PEXPIRE', ik, ms) end
end

-- gone schedules the release of the operation's stored bytes for when its
-- keys expire, ms from now.
local function gone(ms)
  redis.call('ZADD', G, NOW + tonumber(ms), WHO .. '|' .. num(get('sz')) .. '|' .. KEY)
end

-- tomb drops the bulky input of a draft that ended unsent and releases its
-- bytes at once: nobody saw it, so there is nothing to keep.
local function tomb()
  count('nb', -num(get('sz')))
  redis.call('HDEL', O, 'in', 'pv')
  redis.call('HSET', O, 'sz', 0)
end

-- finish ends an operation that was in status st: releases its quota,
-- drops it from the indexes and sets how long it is kept. Drafts are kept
-- draft_ms, sent operations keep_ms.
local function finish(st, to, keep_ms, draft_ms)
  redis.call('HSET', O, 'st', to)
  redis.call('ZREM', D, MEMBER)
  if st == 'draft' then
    count('nd', -1)
    tomb()
    live(draft_ms)
  else
    count('np', -1)
    if st == 'approved' then count('nq', -1) end
    if st == 'executing' then redis.call('ZREM', X, MEMBER) end
    live(keep_ms)
    gone(keep_ms)
    wake() -- bring every message of it up to date
  end
end

-- expirable statuses end in expired when their window passes.
local function expirable(st) return st == 'draft' or st == 'pending_approval' or st == 'approved' end
local function passed() return NOW >= num(get('x')) end

-- window counts one call in a fixed one-minute window of counters wf/nf,
-- on the server's clock (shared by every replica); returns the
-- milliseconds to wait when over limit, else nil.
local function window(wf, nf, limit)
  limit = tonumber(limit)
  if not limit or limit <= 0 then return nil end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local start = num(redis.call('HGET', P, wf))
  if now - start >= 60000 then
    redis.call('HSET', P, wf, now, nf, 1)
    return nil
  end
  if redis.call('HINCRBY', P, nf, 1) > limit then return 60000 - (now - start) end
  return nil
end
