-- Admits one request of an API key under its concurrency and requests-per-minute limits.
-- KEYS: permits in flight (scored by expiry), recent starts (scored by start).
-- ARGV: now, concurrency limit (-1: none), requests per minute (-1: none), permit expiry,
--       window in ms, the permit's token (chosen by the caller, so that it can give the permit
--       back even when the reply never reaches it), release count, then (sorted set, member) per
--       release, the channel announcing applied releases ('' for none) and the replica id it
--       carries.
-- Reply: {'ok', token} | {'concurrency'} | {'rate', start of the oldest request in the window}.
-- A refused request counts against nothing. Idle keys expire (Redis time, garbage collection
-- only: decisions use the caller's now).
local now_text = ARGV[1]
local now = tonumber(now_text)
local concurrency = tonumber(ARGV[2])
local rate = tonumber(ARGV[3])
local expires = ARGV[4]
local window = tonumber(ARGV[5])
local token = ARGV[6]
local releases = tonumber(ARGV[7])
for r = 0, releases - 1 do
  redis.call('ZREM', ARGV[8 + 2 * r], ARGV[9 + 2 * r])
end
local channel = ARGV[8 + 2 * releases]
if releases > 0 and channel ~= '' then
  -- pcall: a user the ACL denies the channel still gets its releases applied.
  redis.pcall('PUBLISH', channel, ARGV[9 + 2 * releases])
end
if concurrency >= 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_text)
  if redis.call('ZCARD', KEYS[1]) >= concurrency then
    return {'concurrency'}
  end
end
if rate >= 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
  if redis.call('ZCARD', KEYS[2]) >= rate then
    local oldest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
    return {'rate', oldest[2] or now_text}
  end
end
local grace = 60000
if rate >= 0 then
  redis.call('ZADD', KEYS[2], now_text, token)
  redis.call('PEXPIRE', KEYS[2], window + grace)
end
if concurrency >= 0 then
  redis.call('ZADD', KEYS[1], expires, token)
  -- The set lives as long as its furthest permit: another replica's may outlive this one
  -- (a longer timeout for large images, a configuration being rolled out).
  local furthest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  local until_ms = tonumber(furthest[2] or expires)
  redis.call('PEXPIRE', KEYS[1], math.max(until_ms - now, 0) + grace)
end
return {'ok', token}
