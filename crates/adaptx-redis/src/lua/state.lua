-- adaptx-redis: the state every script shares (prepended to each script).
--
-- KEYS[1]  the limiter's hash `{adaptx:<name>}:s`
-- ARGV[1]  seed rate (tokens/s): the caller's last known fleet rate
-- ARGV[2]  burst (tokens); 0 = one second of the rate
-- ARGV[3]  key TTL (ms), renewed on every write
-- ARGV[4]  adjustment interval (us)
--
-- Time is the server's (`TIME`), in microseconds since 2020-01-01, made
-- monotonic per key: now = max(TIME, stored now), so a clock stepped back
-- (a failover to another host) never mints tokens. Times are doubles, exact
-- for integers below 2^53 us (285 years) and written with 17 significant
-- digits, so they round-trip through the hash bit for bit.
--
-- A missing hash (first use, expiry, a failover that lost it) is seeded
-- with the caller's rate, epoch 0, and an EMPTY bucket (tat = now + tau):
-- re-seeding never hands out a burst.
local key = KEYS[1]
local seed_rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local ttl_ms = tonumber(ARGV[3])
local interval_us = tonumber(ARGV[4])

local function fmt(x)
  return string.format('%.17g', x)
end
-- Microseconds per token at rate r.
local function emission(r)
  return 1000000 / r
end
-- The bucket's depth in microseconds: `burst` tokens, or one second.
local function tau(r)
  if burst > 0 then
    return burst * emission(r)
  end
  return 1000000
end

local clock = redis.call('TIME')
local now = (tonumber(clock[1]) - 1577836800) * 1000000 + tonumber(clock[2])
local st = redis.call('HMGET', key, 'rate', 'tat', 'now', 'win', 'ep')
local rate = tonumber(st[1])
local tat, win, ep
local fresh = false
if rate == nil then
  fresh = true
  rate = seed_rate
  tat = now + tau(rate)
  win = now
  ep = 0
else
  tat = tonumber(st[2])
  win = tonumber(st[4])
  ep = tonumber(st[5])
  local last = tonumber(st[3])
  if last > now then
    now = last
  end
end

local function save()
  redis.call('HSET', key, 'rate', fmt(rate), 'tat', fmt(tat), 'now', fmt(now),
    'win', fmt(win), 'ep', fmt(ep))
  redis.call('PEXPIRE', key, ttl_ms)
end
