-- synced: records what an editable message shows now, as "version|what".
-- A mark for something it already shows, or from an older read of the
-- operation than the one it shows, is refused: a slow worker never
-- overwrites a message with an older state.
-- KEYS: the prelude's (1–10).
-- ARGV: 5 job id, 6 mark ('' forgets). Returns 1 if it changed.
-- A mark is "status/approvals" (approval's sync). It never goes back: a
-- worker holding an older read of the operation (approved) must not edit
-- a message already showing a later state (succeeded) back to it.
if redis.call('EXISTS', O) == 0 then return 0 end
local f = 'sy:' .. ARGV[5]
if ARGV[6] == '' then redis.call('HDEL', O, f) return 1 end
local cur = get(f)
if cur then
  local cv, cw = string.match(cur, '^(%d+)|(.*)$')
  local nv, nw = string.match(ARGV[6], '^(%d+)|(.*)$')
  if cw == nw or (cv and nv and tonumber(cv) > tonumber(nv)) then return 0 end
end
redis.call('HSET', O, f, ARGV[6])
return 1
