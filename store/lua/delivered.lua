-- delivered: records a delivered notification job once.
-- KEYS: the prelude's (1–10).
-- ARGV: 5 job id, 6 delivery JSON, 7 event. Returns {1, the operation's
-- hash after (HGETALL)}, or {0} if recorded before: the worker brings the
-- delivered message up to date from it instead of reading it again.
if redis.call('EXISTS', O) == 0 then return {0} end
if redis.call('HSETNX', O, 'dl:' .. ARGV[5], ARGV[6]) == 0 then return {0} end
changed()
log(ARGV[7])
publish()
return {1, redis.call('HGETALL', O)}
