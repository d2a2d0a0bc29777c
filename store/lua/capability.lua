-- capability: stores an issued link's nonce hash while the operation is
-- pending, so a link minted too late is never stored. Any earlier link of
-- the same approver through the same channel is marked replaced: an
-- approver never holds two live links per channel (a reminder's link
-- replaces the first).
-- KEYS: the prelude's (1–10).
-- ARGV: 5 nonce hash, 6 capability JSON, 7 approver, 8 channel.
-- Returns 1, or 0 if not pending.
if get('st') ~= 'pending_approval' then return 0 end
local all = redis.call('HGETALL', O)
for i = 1, #all, 2 do
  local f = all[i]
  if string.sub(f, 1, 2) == 'c:' and f ~= 'c:' .. ARGV[5] then
    local c = cjson.decode(all[i + 1])
    if c['w'] == ARGV[7] and c['c'] == ARGV[8] and not c['r'] then
      c['r'] = true
      redis.call('HSET', O, f, cjson.encode(c))
    end
  end
end
redis.call('HSET', O, 'c:' .. ARGV[5], ARGV[6])
return 1
