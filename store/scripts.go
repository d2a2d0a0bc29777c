package store

import "github.com/redis/go-redis/v9"

// One Lua script per transition. Each checks the current status itself,
// so a transition is atomic and conditional: a repeated call is a no-op,
// never a second effect. Every script that changes an operation bumps its
// version, appends its audit event and publishes the key on
// changesChannel.
//
// Scripts on an operation take KEYS = opKeys(key):
//   KEYS[1] op  KEYS[2] events  KEYS[3] approvals  KEYS[4] deliveries
//   KEYS[5] caps  KEYS[6] synced
// and ARGV[1] = the operation key (for the publish).

// prelude is shared by the operation scripts.
const prelude = `
local function publish() redis.call('PUBLISH', '` + changesChannel + `', ARGV[1]) end
local function expire_all(ms)
  for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], ms) end
end
local function align(key)
  local t = redis.call('PTTL', KEYS[1])
  if t > 0 then redis.call('PEXPIRE', key, t) end
end
local function changed(now)
  redis.call('HSET', KEYS[1], 'updated_at', now)
  redis.call('HINCRBY', KEYS[1], 'version', 1)
end
local function expirable(st)
  return st == 'draft' or st == 'pending_approval' or st == 'approved'
end
`

// createScript stores a new draft.
// ARGV: 1 key, 2 ttl ms, 3 event JSON, 4… field, value pairs of the op hash.
// Returns 1 if created, 0 if the key exists.
var createScript = redis.NewScript(prelude + `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local fields = {}
for i = 4, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('RPUSH', KEYS[2], ARGV[3])
expire_all(ARGV[2])
publish()
return 1
`)

// sendScript moves draft → pending_approval with its jobs.
// ARGV: 1 key, 2 now ms, 3 new expires_at ms, 4 jobs JSON, 5 event JSON, 6 ttl ms.
// Returns the status before the call: "draft" when it moved, "expired" for
// a draft whose window passed (left for the expiry to record), "" if missing.
var sendScript = redis.NewScript(prelude + `
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return '' end
if st ~= 'draft' then return st end
if tonumber(ARGV[2]) >= tonumber(redis.call('HGET', KEYS[1], 'expires_at')) then return 'expired' end
redis.call('HSET', KEYS[1], 'status', 'pending_approval', 'expires_at', ARGV[3], 'sent_at', ARGV[2], 'jobs', ARGV[4])
changed(ARGV[2])
redis.call('RPUSH', KEYS[2], ARGV[5])
expire_all(ARGV[6])
publish()
return 'draft'
`)

// decideScript records one approver's decision.
// ARGV: 1 key, 2 now ms, 3 approver, 4 decision JSON, 5 "1" approve / "0"
// reject, 6 required, 7 nonce hash or "", 8 payload hash seen, 9 event
// JSON, 10 quorum event JSON, 11 expire event JSON, 12 retention ms.
// Returns {outcome, status after}; outcomes as approval.DecideOutcome.
var decideScript = redis.NewScript(prelude + `
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return {'missing', ''} end
local now = ARGV[2]
if st == 'pending_approval' and tonumber(now) >= tonumber(redis.call('HGET', KEYS[1], 'expires_at')) then
  redis.call('HSET', KEYS[1], 'status', 'expired')
  changed(now)
  redis.call('RPUSH', KEYS[2], ARGV[11])
  expire_all(ARGV[12])
  publish()
  return {'expired', 'expired'}
end
if st ~= 'pending_approval' then return {'not_pending', st} end
if redis.call('HGET', KEYS[1], 'payload_hash') ~= ARGV[8] then return {'hash_mismatch', st} end
if ARGV[7] ~= '' then
  local c = redis.call('HGET', KEYS[5], ARGV[7])
  if not c or cjson.decode(c)['approver'] ~= ARGV[3] then return {'unknown_link', st} end
end
if redis.call('HEXISTS', KEYS[3], ARGV[3]) == 1 then return {'already_decided', st} end
changed(now)
redis.call('RPUSH', KEYS[2], ARGV[9])
if ARGV[5] == '0' then
  redis.call('HSET', KEYS[1], 'status', 'rejected', 'rejection', ARGV[4])
  expire_all(ARGV[12])
  publish()
  return {'rejected', 'rejected'}
end
redis.call('HSET', KEYS[3], ARGV[3], ARGV[4])
align(KEYS[3])
if redis.call('HLEN', KEYS[3]) >= tonumber(ARGV[6]) then
  redis.call('HSET', KEYS[1], 'status', 'approved')
  redis.call('RPUSH', KEYS[2], ARGV[10])
  publish()
  return {'approved', 'approved'}
end
publish()
return {'recorded', 'pending_approval'}
`)

// moveScript is every other transition: cancel, expire, claim, finish,
// settle, stale. It moves from one of the listed statuses to the target.
// ARGV: 1 key, 2 now ms, 3 to, 4 from (comma-separated), 5 flags ("u":
// the window must not have passed, else record expired instead; "e": the
// window must have passed), 6 expire event JSON, 7 event JSON, 8 ttl ms
// (0 keeps it), 9 result JSON or "", 10 error JSON or "", 11 retention ms.
// Returns {status before, 1 if moved else 0}.
var moveScript = redis.NewScript(prelude + `
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return {'', 0} end
local ok = false
for f in string.gmatch(ARGV[4], '[^,]+') do
  if f == st then ok = true end
end
if not ok then return {st, 0} end
local now = tonumber(ARGV[2])
local passed = now >= tonumber(redis.call('HGET', KEYS[1], 'expires_at'))
if string.find(ARGV[5], 'e', 1, true) and not passed then return {st, 0} end
if string.find(ARGV[5], 'u', 1, true) and expirable(st) and passed then
  redis.call('HSET', KEYS[1], 'status', 'expired')
  changed(ARGV[2])
  redis.call('RPUSH', KEYS[2], ARGV[6])
  expire_all(ARGV[11])
  publish()
  return {st, 0}
end
redis.call('HSET', KEYS[1], 'status', ARGV[3])
if ARGV[9] ~= '' then redis.call('HSET', KEYS[1], 'result', ARGV[9]) end
if ARGV[10] ~= '' then redis.call('HSET', KEYS[1], 'error', ARGV[10]) end
changed(ARGV[2])
redis.call('RPUSH', KEYS[2], ARGV[7])
if tonumber(ARGV[8]) > 0 then expire_all(ARGV[8]) end
publish()
return {st, 1}
`)

// addCapScript stores an issued link while the operation is pending.
// ARGV: 1 key, 2 nonce hash, 3 capability JSON. Returns 1, or 0 if not pending.
var addCapScript = redis.NewScript(prelude + `
if redis.call('HGET', KEYS[1], 'status') ~= 'pending_approval' then return 0 end
redis.call('HSET', KEYS[5], ARGV[2], ARGV[3])
align(KEYS[5])
return 1
`)

// deliveryScript records a delivered job once.
// ARGV: 1 key, 2 job id, 3 delivery JSON, 4 event JSON, 5 now ms.
// Returns 1 if recorded, 0 if it already was (or the operation is gone).
var deliveryScript = redis.NewScript(prelude + `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HSETNX', KEYS[4], ARGV[2], ARGV[3]) == 0 then return 0 end
align(KEYS[4])
redis.call('RPUSH', KEYS[2], ARGV[4])
changed(ARGV[5])
publish()
return 1
`)

// syncedScript records what an editable message shows.
// ARGV: 1 key, 2 job id, 3 mark ("" forgets). Returns 1 if it changed.
var syncedScript = redis.NewScript(prelude + `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[3] == '' then redis.call('HDEL', KEYS[6], ARGV[2]) return 1 end
if redis.call('HGET', KEYS[6], ARGV[2]) == ARGV[3] then return 0 end
redis.call('HSET', KEYS[6], ARGV[2], ARGV[3])
align(KEYS[6])
return 1
`)

// undoneByScript links an operation to its undo if the link is still prev.
// ARGV: 1 key, 2 prev ("" for none), 3 undo key, 4 now ms. Returns 1 or 0.
var undoneByScript = redis.NewScript(prelude + `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local cur = redis.call('HGET', KEYS[1], 'undone_by') or ''
if cur ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'undone_by', ARGV[3])
changed(ARGV[4])
publish()
return 1
`)

// fireScript moves due timers onto the stream.
// KEYS: 1 timers, 2 stream. ARGV: 1 now ms, 2 batch size.
// Returns the number fired.
var fireScript = redis.NewScript(`
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, m in ipairs(due) do
  redis.call('ZREM', KEYS[1], m)
  local op = string.match(m, '^([^|]+)')
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', 100000, '*', 'op', op)
end
return #due
`)

// limitScript counts one attempt in a fixed window.
// KEYS: 1 counter. ARGV: 1 window ms. Returns {count, pttl}.
var limitScript = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {n, redis.call('PTTL', KEYS[1])}
`)
