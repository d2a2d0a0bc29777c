-- supersede: an approver's edit replaces a pending operation by a new
-- version, in one step: the original ends superseded, linked to the new
-- one, and the new one is stored sent (its jobs queued, its timers set),
-- approved already when the editor's approval makes its quorum.
-- KEYS: the prelude's (1–10), 11 the new version's hash (same shard).
-- ARGV: 5 new key, 6 editor, 7 changed fields (comma-separated),
--   8 superseded event, 9 retention (ms), 10 new doc, 11 new input,
--   12 new preview, 13 new payload hash, 14 new expires_at (ms),
--   15 new keys' lifetime (ms), 16 new bytes, 17 jobs JSON,
--   18 prepared event, 19 sent event, 20 editor's approval JSON or '',
--   21 approval event, 22 quorum event, 23 required, 24… timer pairs.
-- Returns {'superseded'} | {'decided'} | {'status', st} | {'missing'}.
local st = get('st')
if not st then return {'missing'} end
if st == 'superseded' and get('tx') == TX then return {'superseded'} end
if st ~= 'pending_approval' then return {'status', st} end
if passed() then return {'status', 'expired'} end
if get('a:' .. ARGV[6]) then return {'decided'} end

-- The original.
redis.call('HSET', O, 'sb', ARGV[5], 'sc', ARGV[7])
changed()
log(ARGV[8])
finish(st, 'superseded', ARGV[9])

-- The new version, sent.
local O2, NEW = KEYS[11], ARGV[5]
-- log2 is log() for the new version: its trail is a field of its hash.
local function log2(ev)
  local trail = redis.call('HGET', O2, 'ev')
  redis.call('HSET', O2, 'ev', trail and (trail .. '\n' .. ev) or ev)
  redis.call('XADD', A, '*', 'k', NEW, 'h', ARGV[13], 'e', ev)
end
redis.call('HSET', O2, 'd', ARGV[10], 'in', ARGV[11], 'st', 'pending_approval',
  'x', ARGV[14], 'u', NOW, 'v', 1, 'ph', ARGV[13], 'tx', TX, 'sz', ARGV[16], 'sa', NOW, 'j', ARGV[17])
if ARGV[12] ~= '' then redis.call('HSET', O2, 'pv', ARGV[12]) end
log2(ARGV[18])
log2(ARGV[19])
if ARGV[20] ~= '' then
  redis.call('HSET', O2, 'a:' .. ARGV[6], ARGV[20], 'na', 1)
  log2(ARGV[21])
  if tonumber(ARGV[23]) <= 1 then
    redis.call('HSET', O2, 'st', 'approved')
    log2(ARGV[22])
    count('nq', 1) -- approved, waiting for its claim
  end
end
redis.call('PEXPIRE', O2, ARGV[15])
redis.call('ZADD', PI, NOW, NEW)
redis.call('ZADD', D, ARGV[14], NEW .. '|' .. WHO)
for i = 24, #ARGV, 2 do redis.call('ZADD', T, ARGV[i + 1], NEW .. '|' .. WHO .. '|' .. ARGV[i]) end
count('np', 1)
count('nb', tonumber(ARGV[16]))
redis.call('XADD', Q, 'MAXLEN', '~', 100000, '*', 'o', NEW, 'p', WHO)
redis.call('PUBLISH', 'cs:changes', NEW)
publish()
return {'superseded'}
