-- Purges expired leases and reads load and health of every known account.
-- ARGV: prefix, now, release count, then (sorted set, member) per release, the channel
--       announcing applied releases ('' for none) and the replica id it carries.
-- Reply: flat list of (account id, large in flight, standard in flight, health JSON or '').
local prefix = ARGV[1]
local now = ARGV[2]
local releases = tonumber(ARGV[3])
for r = 0, releases - 1 do
  redis.call('ZREM', ARGV[4 + 2 * r], ARGV[5 + 2 * r])
end
local channel = ARGV[4 + 2 * releases]
if releases > 0 and channel ~= '' then
  -- pcall: a user the ACL denies the channel still gets its releases applied.
  redis.pcall('PUBLISH', channel, ARGV[5 + 2 * releases])
end
local reply = {}
for _, id in ipairs(redis.call('SMEMBERS', prefix .. 'accounts')) do
  local base = prefix .. 'acct:' .. id
  reply[#reply + 1] = id
  for _, which in ipairs({'large', 'standard'}) do
    local key = base .. ':lease:' .. which
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
    reply[#reply + 1] = redis.call('ZCARD', key)
  end
  reply[#reply + 1] = redis.call('HGET', base .. ':health', 'h') or ''
end
return reply
