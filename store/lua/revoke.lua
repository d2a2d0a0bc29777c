-- revoke: ends an allowance at once, recorded on its allowance.grant
-- operation. ARGV: 5 event. Returns {'revoked'} | {'done'} (before) | {'missing'}.
if redis.call('EXISTS', O) == 0 then return {'missing'} end
local AL = string.gsub(P, ':p:', ':al:', 1)
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
