-- adaptx-redis: take a lease (GCRA over the fleet's rate), after returning
-- the unused tokens of the previous one.
--
-- ARGV[5]  want: tokens asked for (0 = peek)
-- ARGV[6]  refund: unused tokens of an expired lease, returned first
--
-- Grants g = min(want, available) (a partial grant: the lease). The bucket
-- holds at most tau of backlog: available = floor((tau - backlog) / T),
-- backlog = max(tat - now, 0), T = 1e6 / rate us. A grant moves tat by g*T;
-- a refund moves it back by refund*T, never below now (a refund to a fresh
-- key is dropped: those tokens belonged to the lost bucket).
-- The interval is marked binding when the ask was not filled or the grant
-- left less than one token.
--
-- Reply (integers): {granted, retry_after_us, rate, epoch, remaining}
local want = tonumber(ARGV[5])
local refund = tonumber(ARGV[6])
local T = emission(rate)
local depth = tau(rate)
if refund > 0 and not fresh then
  tat = math.max(tat - refund * T, now)
end
local backlog = math.max(tat - now, 0)
-- The 1e-9 absorbs rounding of an exact multiple of T, never a whole token.
local avail = math.floor((depth - backlog) / T + 1e-9)
if avail < 0 then
  avail = 0
end
local granted = math.min(want, avail)
local retry = 0
if granted > 0 then
  tat = math.max(tat, now) + granted * T
end
if want > 0 and (granted < want or avail - granted < 1) then
  redis.call('HSET', key, 'bnd', 1)
end
if granted == 0 and want > 0 then
  retry = math.max(math.ceil(backlog + T - depth), 1)
end
save()
return {granted, retry, rate, ep, avail - granted}
