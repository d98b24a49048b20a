-- adaptx-redis: write the rate the claimant of an interval computed.
--
-- ARGV[5]  the epoch the claimant's report opened (its `pend`)
-- ARGV[6]  the new rate (tokens/s)
--
-- Applied only if that claim is still the latest (`pend` = ARGV[5]): a
-- claimant that was too slow, or whose key was lost meanwhile, writes
-- nothing.
--
-- Reply (integers): {applied, rate, epoch}
local claim = ARGV[5]
local applied = 0
if not fresh and redis.call('HGET', key, 'pend') == claim then
  rate = tonumber(ARGV[6])
  redis.call('HDEL', key, 'pend')
  applied = 1
end
save()
return {applied, rate, ep}
