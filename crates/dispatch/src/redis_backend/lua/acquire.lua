-- Selects an account among the ranked candidates and takes a slot on it, atomically.
-- The same rules as select.rs: bands of equal (tier, priority) best first; in the first band with
-- an eligible account, the least loaded one (share of the class limit in use, then total requests
-- in flight), the walk starting at a random offset and stopping at the first idle account or
-- after comparing 32 eligible accounts (select.rs's COMPARE_WINDOW; a test keeps the two equal).
-- Eligible: status usable, not cooling down for this kind of request, fewer unexpired leases than
-- the class limit, and none at all while its circuit breaker is half-open (the end of the breaker
-- it holds is past: one request, its probe, at a time). (Excluded accounts and limit 0 are filtered
-- out by the caller.)
--
-- ARGV: prefix, now, class, other class, image (1/0), lease expiry, seed (1..2^31-2),
--       lease id (a random token the caller chose, so that it can give the lease back when the
--       reply is lost), release count, then (sorted set, member) per release, the channel
--       announcing applied releases ('' for none) and the replica id it carries,
--       candidate count, then (account id, class limit, band number) per candidate, best first.
-- Reply: {'granted', candidate index (0-based)}, or when no candidate is eligible
--        {'none', 1 if one was only busy else 0, end of the earliest cooldown met or ''}.
local prefix = ARGV[1]
local now_text = ARGV[2]
local now = tonumber(now_text)
local class = ARGV[3]
local other = ARGV[4]
local image = ARGV[5] == '1'
local expires = ARGV[6]
local seed = tonumber(ARGV[7])
local lease = ARGV[8]

local at = 9
local releases = tonumber(ARGV[at])
for r = 0, releases - 1 do
  redis.call('ZREM', ARGV[at + 1 + 2 * r], ARGV[at + 2 + 2 * r])
end
at = at + 1 + 2 * releases
if releases > 0 and ARGV[at] ~= '' then
  -- pcall: a user the ACL denies the channel still gets its releases applied.
  redis.pcall('PUBLISH', ARGV[at], ARGV[at + 1])
end
at = at + 2
local count = tonumber(ARGV[at])
local first = at + 1

local function field(index, offset)
  return ARGV[first + 3 * index + offset]
end

local function lease_key(id, which)
  return prefix .. 'acct:' .. id .. ':lease:' .. which
end

-- Leases not yet expired (expired ones are ignored here and purged when the account is granted).
local function in_flight(id, which)
  return redis.call('ZCOUNT', lease_key(id, which), '(' .. now_text, '+inf')
end

-- End of the cooldown blocking this request (stored text and number), from HMGET ok ca ci.
local function blocked(health)
  local until_text, until_number = nil, nil
  local function consider(text)
    local value = text and tonumber(text)
    if value and value > now and (not until_number or value > until_number) then
      until_text, until_number = text, value
    end
  end
  consider(health[2])
  if image then
    consider(health[3])
  end
  return until_text, until_number
end

local compare_window = 32
local any_busy = false
local earliest_text, earliest = nil, nil
local start = 0
while start < count do
  local band = field(start, 2)
  local stop = start + 1
  while stop < count and field(stop, 2) == band do
    stop = stop + 1
  end
  local size = stop - start
  seed = (seed * 16807) % 2147483647
  local offset = seed % size
  local best, best_used, best_limit, best_total = nil, 0, 1, nil
  local compared = 0
  for step = 0, size - 1 do
    local index = start + (offset + step) % size
    local id = field(index, 0)
    local limit = tonumber(field(index, 1))
    local health = redis.call('HMGET', prefix .. 'acct:' .. id .. ':health', 'ok', 'ca', 'ci', 'cb')
    if health[1] ~= '0' then
      local until_text, until_number = blocked(health)
      if until_number then
        if not earliest or until_number < earliest then
          earliest_text, earliest = until_text, until_number
        end
      else
        local used = in_flight(id, class)
        -- The breaker's end counts only while it is the cooldown stored beside it: a replica of
        -- an older version, which writes no 'cb', may have replaced or cleared that cooldown.
        local breaker = health[4] == health[2] and tonumber(health[4]) or nil
        local probing = breaker and breaker <= now and (used + in_flight(id, other)) > 0
        if used >= limit or probing then
          any_busy = true
        else
          -- Total in flight, read only when it matters: to spot an idle account, or on a tie.
          local total = nil
          if used == 0 then
            total = in_flight(id, other)
            if total == 0 then
              best = index
              break
            end
          end
          local mine, theirs = used * best_limit, best_used * limit
          if not best or mine < theirs then
            best, best_used, best_limit, best_total = index, used, limit, total
          elseif mine == theirs then
            best_total = best_total or (best_used + in_flight(field(best, 0), other))
            total = total or (used + in_flight(id, other))
            if total < best_total then
              best, best_used, best_limit, best_total = index, used, limit, total
            end
          end
          compared = compared + 1
          if compared >= compare_window then
            break
          end
        end
      end
    end
  end
  if best then
    local id = field(best, 0)
    for _, which in ipairs({class, other}) do
      redis.call('ZREMRANGEBYSCORE', lease_key(id, which), '-inf', now_text)
    end
    redis.call('ZADD', lease_key(id, class), expires, lease)
    redis.call('SADD', prefix .. 'accounts', id)
    return {'granted', best}
  end
  start = stop
end
return {'none', any_busy and 1 or 0, earliest_text or ''}
