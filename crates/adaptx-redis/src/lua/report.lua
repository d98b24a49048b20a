-- adaptx-redis: add one instance's feedback, and close the interval if it
-- is over (the claim: a compare-and-set on the epoch, atomic because the
-- script is).
--
-- KEYS[2]  the members' sorted set `{adaptx:<name>}:m`
-- ARGV[5]  instance id
-- ARGV[6]  the epoch the instance last saw
-- ARGV[7]  successes, ARGV[8] failures, ARGV[9] latency sum (us): integers
-- ARGV[10] liveness window (us): members seen within it count as live
--
-- A batch tagged more than one epoch old is stale (a paused or partitioned
-- instance): dropped and reported. The first report at or past win +
-- interval claims the interval: it takes the interval's sums, resets them,
-- moves win to now and the epoch to ep + 1, and records `pend = ep + 1`;
-- the claimant runs the law and writes the rate with apply.lua, which
-- checks `pend`. Later reports see the new epoch: one law run per interval.
--
-- Reply (integers): {epoch, rate, live_members, stale, claimed, successes,
--                    failures, latency_sum_us, binding}
local members = KEYS[2]
local id = ARGV[5]
local seen = tonumber(ARGV[6])
local live_us = tonumber(ARGV[10])

redis.call('ZADD', members, fmt(now), id)
redis.call('ZREMRANGEBYSCORE', members, '-inf', '(' .. fmt(now - live_us))
local live = redis.call('ZCARD', members)
redis.call('PEXPIRE', members, ttl_ms)

local stale = 0
if seen + 1 < ep then
  stale = 1
else
  redis.call('HINCRBY', key, 'ok', ARGV[7])
  redis.call('HINCRBY', key, 'fail', ARGV[8])
  redis.call('HINCRBY', key, 'lat', ARGV[9])
end

local claimed, ok, fail, lat, bnd = 0, 0, 0, 0, 0
if now >= win + interval_us then
  local v = redis.call('HMGET', key, 'ok', 'fail', 'lat', 'bnd')
  ok = tonumber(v[1]) or 0
  fail = tonumber(v[2]) or 0
  lat = tonumber(v[3]) or 0
  bnd = tonumber(v[4]) or 0
  redis.call('HDEL', key, 'ok', 'fail', 'lat', 'bnd')
  win = now
  ep = ep + 1
  claimed = 1
  redis.call('HSET', key, 'pend', fmt(ep))
end
save()
return {ep, rate, live, stale, claimed, ok, fail, lat, bnd}
