-- Stores an account's health if nobody changed it since it was read (compare-and-set).
-- KEYS[1]: health hash, KEYS[2]: set of known accounts.
-- ARGV: version read ('0' when none), health JSON, usable (1/0), end of the cooldown for every
--       request ('' when none), end of the image cooldown ('' when none), account id, end of the
--       open circuit breaker that is the cooldown for every request ('' when it is none), the id
--       of the outcome applied ('-' for none), how many applied ids are kept.
-- Reply: {1} when stored, or when the outcome of that id was applied already (a caller whose
--        reply was lost tells it again); {0, current version, current JSON} when the version
--        moved on.
local id = ARGV[8] or '-'
local ids = redis.call('HGET', KEYS[1], 'ids') or ''
if id ~= '-' then
  for seen in string.gmatch(ids, '[^,]+') do
    if seen == id then
      return {1}
    end
  end
end
local current = redis.call('HGET', KEYS[1], 'v') or '0'
if current ~= ARGV[1] then
  return {0, current, redis.call('HGET', KEYS[1], 'h') or ''}
end
redis.call('HSET', KEYS[1], 'v', tostring(tonumber(current) + 1), 'h', ARGV[2], 'ok', ARGV[3],
  'ca', ARGV[4], 'ci', ARGV[5], 'cb', ARGV[7] or '')
if id ~= '-' then
  local kept = {}
  for seen in string.gmatch(ids, '[^,]+') do
    kept[#kept + 1] = seen
  end
  kept[#kept + 1] = id
  local keep = tonumber(ARGV[9]) or 32
  local from = math.max(#kept - keep + 1, 1)
  redis.call('HSET', KEYS[1], 'ids', table.concat(kept, ',', from, #kept))
end
redis.call('SADD', KEYS[2], ARGV[6])
return {1}
