-- enrol: uses up an approver's enrolment link and stores the passkey it
-- registered, in one step: a link registers at most one passkey.
-- KEYS: 1 the enrolment link, 2 the approver's passkeys.
-- ARGV: 1 credential id (base64url), 2 credential JSON, 3 sign count.
-- Returns 1, 0 if the link is not live, or -1 if the passkey is enrolled
-- already (the link stays live).
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HEXISTS', KEYS[2], 'c:' .. ARGV[1]) == 1 then return -1 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[2], 'c:' .. ARGV[1], ARGV[2], 's:' .. ARGV[1], ARGV[3])
return 1
