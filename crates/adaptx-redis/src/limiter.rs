//! The [`FleetRateLimiter`] facade and the state its hot path shares with
//! the driver task.
//!
//! # Implementation details
//!
//! The hot path ([`try_acquire`](FleetRateLimiter::try_acquire) in fleet
//! mode) is lock-free and makes no round trip: it reads the mode (one
//! atomic byte) and takes a token from the lease pool with one CAS loop on
//! an `AtomicI64`. The pool may go below zero, down to minus one lease
//! (`credit`): a request that finds the pool empty while its next lease is
//! on the way is admitted on credit, and the next grant pays the debt
//! first. So a busy instance never stalls on a round trip, and the fleet
//! admits at most one lease per instance beyond its budget, once (not per
//! second): the debt is repaid before the pool is positive again. Below the
//! credit line the request is rejected with the last retry hint.
//!
//! When a take leaves the pool at or below the low-water mark (a quarter
//! of a lease), or is refused, the hot path sets `refill_wanted` and, on
//! its false → true edge only, wakes the driver (`Notify::notify_one`,
//! which takes tokio's waiter lock: once per lease, not per request).
//! The pool, its invariants (no token lost or admitted twice, at most one
//! lease of credit, a grant pays the debt first, the idle take-back never
//! takes an admitted token, no lost refill request) and their loom models
//! are in [`crate::pool`].
//!
//! Locks: `local` (a `std` mutex) holds the fallback bucket; it is taken
//! only in [`FleetMode::Local`] (to clone the bucket's handle) and by the
//! driver when it switches modes. The fallback bucket is a core
//! [`RateLimiter`], whose bucket is lock-free (one compare-and-swap per
//! admission).

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use adaptx::{RateLimited, RateLimiter};
use tokio::sync::Notify;

use crate::builder::Config;
use crate::driver::Driver;
use crate::pool::LeasePool;
use crate::stats::{Counters, FleetMode, FleetStats, add, get};
use crate::{BuildError, FleetPermit, FleetRateLimiterBuilder};

pub(crate) const FLEET: u8 = 0;
pub(crate) const LOCAL: u8 = 1;

/// The state the hot path shares with the driver task.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) mode: AtomicU8,
    /// The current lease's tokens (see [`LeasePool`] for its invariants).
    pub(crate) pool: LeasePool,
    pub(crate) wake: Notify,
    pub(crate) stop: AtomicBool,
    /// The fleet's rate, epoch and live instances, as last seen.
    pub(crate) rate: AtomicU64,
    pub(crate) epoch: AtomicU64,
    pub(crate) instances: AtomicU64,
    /// The wait a rejected request is told (µs).
    pub(crate) retry_hint_us: AtomicU64,
    pub(crate) local: Mutex<Option<RateLimiter>>,
    pub(crate) counters: Counters,
}

impl Shared {
    fn new(rate: u64, instances: u64) -> Self {
        Self {
            mode: AtomicU8::new(FLEET),
            pool: LeasePool::new(),
            wake: Notify::new(),
            stop: AtomicBool::new(false),
            rate: AtomicU64::new(rate),
            epoch: AtomicU64::new(0),
            instances: AtomicU64::new(instances),
            retry_hint_us: AtomicU64::new(1_000),
            local: Mutex::new(None),
            counters: Counters::default(),
        }
    }

    /// The fallback bucket (see the module docs for this lock).
    pub(crate) fn local(&self) -> MutexGuard<'_, Option<RateLimiter>> {
        // No code panics while holding it: a poisoned lock is used as is.
        self.local.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes one token from the lease pool (on credit down to minus one
    /// lease), waking the driver when the pool asks for a refill. Returns
    /// the tokens left (0 when in debt).
    #[inline]
    fn take(&self) -> Option<u64> {
        let take = self.pool.take();
        if take.wake {
            self.wake.notify_one();
        }
        take.left.map(|left| u64::try_from(left).unwrap_or(0))
    }
}

/// Stops the driver when the last handle is dropped.
#[derive(Debug)]
struct Inner {
    shared: Arc<Shared>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake.notify_one();
    }
}

/// An adaptive rate limiter whose budget is shared by every instance on the
/// same Redis key, and whose rate moves with the whole fleet's feedback by
/// the local limiter's law.
///
/// `FleetRateLimiter` is a cheap handle: clones share one limiter. Built
/// with [`builder`](FleetRateLimiter::builder) inside a Tokio runtime, it
/// runs one driver task that talks to Redis; it stops when the last handle
/// is dropped. [`try_acquire`](FleetRateLimiter::try_acquire) never waits
/// and makes no round trip: it takes a token from the instance's *lease*.
///
/// # Algorithm
///
/// **Budget.** The fleet's bucket is a GCRA in Redis (a Lua script over
/// the server's `TIME`): emission interval `T = 1/r` for the fleet rate
/// `r`, depth `τ` = the configured burst in tokens, or one second. An
/// instance takes a *lease* of `K` tokens per round trip, `K` ≈ the tokens
/// it used in the last [`lease_window`](FleetRateLimiterBuilder::lease_window)
/// (10 ms), at most [`max_lease`](FleetRateLimiterBuilder::max_lease), and
/// starting at 1 — a partial grant `min(K, available)` when the bucket is
/// low. Unused tokens of a lease untouched for a report period are handed
/// back (the bucket's TAT moves back, never below now).
///
/// **Feedback and the law.** Each instance reports its completions since
/// its last report (successes, failures, latency sum), tagged with the
/// epoch it last saw, every [`report_period`](FleetRateLimiterBuilder::report_period);
/// Redis sums them per interval, and drops a batch more than one epoch old.
/// The first report at or past the interval's end claims the interval
/// (atomically, in the script: the epoch moves on), and its instance runs
/// the local limiter's [`RateLaw`](adaptx::RateLaw) on the fleet's sums and
/// writes the new rate, which Redis accepts only from the latest claimant.
/// The interval is *binding* when a lease was not filled in full or left
/// the bucket with less than a token.
///
/// **Fallback.** A Redis call that fails or takes longer than
/// [`redis_timeout`](FleetRateLimiterBuilder::redis_timeout) sends the
/// instance to a local [`RateLimiter`] at its *share* of the fleet's last
/// known rate: `r / N̂`, where `N̂` is the number of instances that reported
/// in the last three intervals (before any contact with Redis,
/// [`expected_instances`](FleetRateLimiterBuilder::expected_instances)).
/// The local bucket's rate range is the fleet's divided by `N̂`, so it never
/// exceeds the share, and its law keeps adapting to local feedback. The
/// driver probes Redis after 100 ms, doubling up to 5 s with ±20 % jitter
/// ([`reconnect_backoff`](FleetRateLimiterBuilder::reconnect_backoff)), and
/// rejoins on the first answer: the local bucket is dropped, the lease
/// restarts at one token, and the GCRA grants at most what the fleet's
/// bucket holds, so a rejoin makes no burst. A missing key (expired, or
/// lost with the server) is seeded with the instance's last known rate and
/// an empty bucket.
///
/// # Examples
///
/// ```no_run
/// use adaptx::RateLimiter;
/// use adaptx_redis::FleetRateLimiter;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// // Every instance of the service builds the same limiter: one budget of
/// // 500 requests/s for the fleet, moved by the fleet's errors and latency.
/// let limiter = FleetRateLimiter::builder("redis://10.0.0.5:6379", "checkout")
///     .rate(RateLimiter::builder().initial_rate(500).min_rate(50).max_rate(5000))
///     .build()?;
/// match limiter.try_acquire() {
///     Ok(permit) => permit.success(),
///     Err(limited) => println!("retry after {:?}", limited.retry_after()),
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct FleetRateLimiter {
    inner: Arc<Inner>,
}

impl fmt::Debug for FleetRateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetRateLimiter")
            .field("mode", &self.mode())
            .field("rate", &self.current_rate())
            .finish_non_exhaustive()
    }
}

impl FleetRateLimiter {
    /// A builder for the limiter named `name` (its Redis keys are
    /// `{adaptx:<name>}:s` and `{adaptx:<name>}:m`) on the Redis at `url`
    /// (`redis://host:port/db`).
    pub fn builder(url: &str, name: &str) -> FleetRateLimiterBuilder {
        FleetRateLimiterBuilder::new(url, name)
    }

    pub(crate) fn start(config: Config) -> Result<Self, BuildError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| BuildError::NoRuntime)?;
        let n = config.expected_instances;
        let shared = Arc::new(Shared::new(config.settings.initial_rate, n));
        let driver = Driver::new(Arc::clone(&shared), config)?;
        runtime.spawn(driver.run());
        Ok(Self {
            inner: Arc::new(Inner { shared }),
        })
    }

    /// Admits a request if the lease (or, in fallback, the local bucket)
    /// holds a token.
    ///
    /// # Errors
    ///
    /// [`RateLimited`] with the time until a token is expected, when the
    /// instance's lease is spent, its credit used and the fleet's bucket
    /// was empty at the last ask (or the local bucket is empty).
    pub fn try_acquire(&self) -> Result<FleetPermit, RateLimited> {
        let s = &self.inner.shared;
        if s.mode.load(Ordering::Acquire) == LOCAL {
            // Cloned out of the lock: the core limiter takes its own.
            let local = s.local().clone();
            if let Some(local) = local {
                return match local.try_acquire() {
                    Ok(permit) => {
                        add(&s.counters.admitted, 1);
                        add(&s.counters.admitted_local, 1);
                        Ok(FleetPermit::local(Arc::clone(s), permit))
                    }
                    Err(limited) => {
                        add(&s.counters.rejected, 1);
                        Err(limited)
                    }
                };
            }
            // Rejoined meanwhile: take from the lease.
        }
        let rate = s.rate.load(Ordering::Relaxed);
        match s.take() {
            Some(left) => {
                add(&s.counters.admitted, 1);
                Ok(FleetPermit::fleet(Arc::clone(s), rate, left))
            }
            None => {
                add(&s.counters.rejected, 1);
                let wait = Duration::from_micros(s.retry_hint_us.load(Ordering::Relaxed));
                Err(RateLimited::new(wait, rate))
            }
        }
    }

    /// The rate in force for this instance: the fleet's, or the local
    /// bucket's in fallback.
    pub fn current_rate(&self) -> u64 {
        let s = &self.inner.shared;
        let local = match s.mode.load(Ordering::Acquire) {
            LOCAL => s.local().as_ref().map(RateLimiter::current_rate),
            _ => None,
        };
        local.unwrap_or_else(|| s.rate.load(Ordering::Relaxed))
    }

    /// Where tokens come from now.
    pub fn mode(&self) -> FleetMode {
        mode_of(&self.inner.shared)
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> FleetStats {
        let s = &self.inner.shared;
        let c = &s.counters;
        let local_rate = s.local().as_ref().map(RateLimiter::current_rate);
        FleetStats {
            mode: mode_of(s),
            fleet_rate: s.rate.load(Ordering::Relaxed),
            local_rate: local_rate.filter(|_| mode_of(s) == FleetMode::Local),
            instances: s.instances.load(Ordering::Relaxed),
            epoch: s.epoch.load(Ordering::Relaxed),
            lease_size: s.pool.lease_size(),
            admitted: get(&c.admitted),
            admitted_local: get(&c.admitted_local),
            rejected: get(&c.rejected),
            successes: get(&c.successes) + get(&c.local_successes),
            failures: get(&c.failures) + get(&c.local_failures),
            dropped: get(&c.dropped),
            leases: get(&c.leases),
            tokens_granted: get(&c.tokens_granted),
            tokens_returned: get(&c.tokens_returned),
            tokens_abandoned: get(&c.tokens_abandoned),
            redis_errors: get(&c.redis_errors),
            redis_timeouts: get(&c.redis_timeouts),
            fallbacks: get(&c.fallbacks),
            rejoins: get(&c.rejoins),
            failed_probes: get(&c.failed_probes),
            stale_reports: get(&c.stale_reports),
            intervals_closed: get(&c.intervals_closed),
            increases: get(&c.increases),
            decreases: get(&c.decreases),
        }
    }
}

fn mode_of(s: &Shared) -> FleetMode {
    if s.mode.load(Ordering::Acquire) == LOCAL {
        FleetMode::Local
    } else {
        FleetMode::Fleet
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The handle and its permit are `Send + Sync` (shared across tasks,
    /// moved into spawned ones).
    #[test]
    fn bounds() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<FleetRateLimiter>();
        send_sync::<FleetPermit>();
        send_sync::<FleetStats>();
        send_sync::<FleetRateLimiterBuilder>();
    }
}
