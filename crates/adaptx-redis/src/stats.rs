//! The fleet limiter's counters and their snapshot.

use std::sync::atomic::{AtomicU64, Ordering};

/// Where an instance takes its tokens from.
///
/// # Examples
///
/// ```no_run
/// use adaptx_redis::{FleetMode, FleetRateLimiter};
///
/// # async fn check() -> Result<(), adaptx_redis::BuildError> {
/// let limiter = FleetRateLimiter::builder("redis://10.0.0.5:6379", "checkout").build()?;
/// if limiter.mode() == FleetMode::Local {
///     eprintln!("redis unreachable: running at this instance's share");
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FleetMode {
    /// From leases on the fleet's budget in Redis.
    Fleet,
    /// From a local bucket at the instance's share of the last known fleet
    /// rate, while Redis is slow or unreachable.
    Local,
}

/// A snapshot of a [`FleetRateLimiter`](crate::FleetRateLimiter)'s counters.
///
/// Counters run from construction and are never reset; each is read
/// separately. Every transition between the fleet and the local bucket is
/// counted here and logged as a `tracing` event.
///
/// # Examples
///
/// ```no_run
/// use adaptx_redis::FleetRateLimiter;
///
/// # async fn check() -> Result<(), adaptx_redis::BuildError> {
/// let limiter = FleetRateLimiter::builder("redis://10.0.0.5:6379", "checkout").build()?;
/// let s = limiter.stats();
/// println!("{:?}: fleet {}/s over {} instances, {} admitted ({} locally)",
///     s.mode, s.fleet_rate, s.instances, s.admitted, s.admitted_local);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FleetStats {
    /// Where tokens come from now.
    pub mode: FleetMode,
    /// The fleet's rate (requests per second), as last seen from Redis.
    pub fleet_rate: u64,
    /// The local bucket's rate while in [`FleetMode::Local`].
    pub local_rate: Option<u64>,
    /// Live instances on the key (reported within three intervals), as last
    /// seen; before any contact, the configured expected fleet size.
    pub instances: u64,
    /// The fleet's epoch (number of closed intervals), as last seen.
    pub epoch: u64,
    /// The current lease size, in tokens.
    pub lease_size: u64,
    /// Requests admitted (fleet and local).
    pub admitted: u64,
    /// Of those, admitted by the local fallback bucket.
    pub admitted_local: u64,
    /// Requests rejected (fleet and local).
    pub rejected: u64,
    /// Requests recorded as successes.
    pub successes: u64,
    /// Requests recorded as failures.
    pub failures: u64,
    /// Permits dropped without an outcome.
    pub dropped: u64,
    /// Lease calls that reached Redis.
    pub leases: u64,
    /// Tokens granted by those calls.
    pub tokens_granted: u64,
    /// Unused tokens handed back to the fleet.
    pub tokens_returned: u64,
    /// Lease tokens abandoned when falling back (never used, never
    /// returned: the fleet is short of them until the bucket refills).
    pub tokens_abandoned: u64,
    /// Redis calls that failed with an error.
    pub redis_errors: u64,
    /// Redis calls that ran past the timeout.
    pub redis_timeouts: u64,
    /// Transitions from the fleet to the local bucket.
    pub fallbacks: u64,
    /// Transitions back from the local bucket to the fleet.
    pub rejoins: u64,
    /// Probes of Redis that failed while in the local bucket.
    pub failed_probes: u64,
    /// Feedback batches Redis dropped as too old.
    pub stale_reports: u64,
    /// Intervals this instance closed (ran the law for the fleet).
    pub intervals_closed: u64,
    /// Of those, the ones that raised the fleet's rate.
    pub increases: u64,
    /// Of those, the ones that lowered the fleet's rate.
    pub decreases: u64,
}

/// The cumulative counters behind [`FleetStats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) admitted: AtomicU64,
    pub(crate) admitted_local: AtomicU64,
    pub(crate) rejected: AtomicU64,
    /// Fleet-mode completions: reported to Redis as differences.
    pub(crate) successes: AtomicU64,
    pub(crate) failures: AtomicU64,
    pub(crate) latency_sum_us: AtomicU64,
    pub(crate) local_successes: AtomicU64,
    pub(crate) local_failures: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) leases: AtomicU64,
    pub(crate) tokens_granted: AtomicU64,
    pub(crate) tokens_returned: AtomicU64,
    pub(crate) tokens_abandoned: AtomicU64,
    pub(crate) redis_errors: AtomicU64,
    pub(crate) redis_timeouts: AtomicU64,
    pub(crate) fallbacks: AtomicU64,
    pub(crate) rejoins: AtomicU64,
    pub(crate) failed_probes: AtomicU64,
    pub(crate) stale_reports: AtomicU64,
    pub(crate) intervals_closed: AtomicU64,
    pub(crate) increases: AtomicU64,
    pub(crate) decreases: AtomicU64,
}

/// Adds `n` to a counter.
#[inline]
pub(crate) fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// Reads a counter.
#[inline]
pub(crate) fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Acquire)
}
