//! The rate limiter's statistics snapshot.

use crate::mode::Mode;

/// A snapshot of a rate limiter's counters, from
/// [`RateLimiter::stats`](crate::RateLimiter::stats) or
/// [`KeyedRateLimiter::stats`](crate::KeyedRateLimiter::stats).
///
/// Counters run from construction and are never reset (mizu reset its
/// counters on every tick). Each field is read separately, so a snapshot
/// taken under load is not one instant; `in_flight` is never negative.
///
/// # Examples
///
/// ```
/// use adaptx::RateLimiter;
///
/// let limiter = RateLimiter::builder().initial_rate(50).build()?;
/// limiter.try_acquire().unwrap().success();
/// let s = limiter.stats();
/// assert_eq!((s.rate, s.admitted, s.successes, s.in_flight), (50, 1, 1, 0));
/// # Ok::<(), adaptx::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct RateStats {
    /// The current rate, requests per second.
    pub rate: u64,
    /// The configured floor of the rate.
    pub min_rate: u64,
    /// The configured ceiling of the rate.
    pub max_rate: u64,
    /// Requests admitted: `completed + dropped + in_flight`.
    pub admitted: u64,
    /// Admitted requests whose permit is still held.
    pub in_flight: u64,
    /// Requests completed with an outcome: `successes + failures`.
    pub completed: u64,
    /// Requests recorded as successes.
    pub successes: u64,
    /// Requests recorded as failures.
    pub failures: u64,
    /// Permits dropped without an outcome (no feedback).
    pub dropped: u64,
    /// Requests rejected for want of a token.
    pub rejected: u64,
    /// Adjustments that raised the rate.
    pub increases: u64,
    /// Adjustments that lowered the rate.
    pub decreases: u64,
    /// The admission mode (see [`Mode`]).
    pub mode: Mode,
    /// Requests admitted with an empty bucket because the mode is
    /// [`Mode::Shadow`] or [`Mode::Bypass`]: the rejections
    /// [`Mode::Enforce`] would have made. Counted in `admitted`, never in
    /// `rejected`.
    pub would_reject: u64,
}
