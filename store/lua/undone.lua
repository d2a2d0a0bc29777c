-- undone: links a succeeded operation to the operation undoing it, if its
-- current link is still prev.
-- KEYS: the prelude's (1–10).
-- ARGV: 5 prev ('' for none), 6 undo key. Returns 1 or 0.
if redis.call('EXISTS', O) == 0 then return 0 end
if (get('ub') or '') ~= ARGV[5] then return 0 end
redis.call('HSET', O, 'ub', ARGV[6])
changed()
publish()
return 1
