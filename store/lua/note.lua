-- note: records an audit event on an operation without changing it (a
-- refused or verified step-up): in its trail and its shard's chain.
-- KEYS: the prelude's (1–10).
-- ARGV: 5 event. Returns 1, or 0 if the operation does not exist.
if not get('st') then return 0 end
log(ARGV[5])
return 1
