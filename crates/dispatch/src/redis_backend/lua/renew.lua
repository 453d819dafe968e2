-- Extends one lease unless it expired or was released.
-- KEYS[1]: the lease's sorted set. ARGV: now, new expiry, lease id.
-- Reply: 1 when renewed, 0 when the lease is gone.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZSCORE', KEYS[1], ARGV[3]) then
  redis.call('ZADD', KEYS[1], 'XX', ARGV[2], ARGV[3])
  return 1
end
return 0
