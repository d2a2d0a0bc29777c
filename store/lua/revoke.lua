-- revoke: ends an allowance at once, recorded on its allowance.grant
-- operation.
-- KEYS: the prelude's (1–10), 11 the principal's allowances.
-- ARGV: 5 event. Returns {'revoked'} | {'done'} (before) | {'missing'}.
if redis.call('EXISTS', O) == 0 then return {'missing'} end
local AL = KEYS[11]
if redis.call('HGET', AL, KEY .. ':r') then
  if get('tx') == TX then return {'revoked'} end
  return {'done'}
end
redis.call('HSET', AL, KEY .. ':r', NOW)
redis.call('HSET', O, 'rv', NOW)
changed()
log(ARGV[5])
publish()
return {'revoked'}
