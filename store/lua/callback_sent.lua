-- callback_sent: records that status change ARGV[5] (from 1) reached the
-- principal's status webhook. The cursor moves only to the next change, so
-- a late retry of an earlier one never skips a change; the attempt count
-- of the next change starts again. Not a change of the operation: no
-- version, no event.
-- KEYS: the prelude's (1–10).
-- ARGV: 5 the change's sequence number. Returns 1 when the cursor moved,
-- 0 when it was recorded before or the operation is gone.
if redis.call('EXISTS', O) == 0 then return 0 end
local seq = tonumber(ARGV[5])
if num(get('cb')) ~= seq - 1 then return 0 end
redis.call('HSET', O, 'cb', seq)
redis.call('HDEL', O, 'cn')
return 1
