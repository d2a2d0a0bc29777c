-- fire: moves the shard's due wake-ups onto its stream. Atomic, so that
-- replicas firing at the same moment never queue one twice.
-- KEYS: 1 timers, 2 stream. ARGV: 1 now (ms), 2 batch size.
-- Returns the number fired.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, m in ipairs(due) do
  redis.call('ZREM', KEYS[1], m)
  local op, who = string.match(m, '^([^|]+)|([^|]+)')
  if op then redis.call('XADD', KEYS[2], 'MAXLEN', '~', 100000, '*', 'o', op, 'p', who) end
end
return #due
