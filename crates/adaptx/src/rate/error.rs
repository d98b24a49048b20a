//! The rejection of a rate-limited request.

use std::fmt;
use std::time::Duration;

/// A request was rejected: its bucket holds less than one token.
///
/// Carries the exact time until the bucket holds one token at the current
/// rate, and that rate. The wait is computed from the bucket's state,
/// rounded up to the nanosecond, so retrying after it succeeds unless the
/// rate falls or another request takes the token first.
///
/// # Examples
///
/// ```
/// use adaptx::{ManualClock, RateLimiter};
/// use std::time::Duration;
///
/// let limiter = RateLimiter::builder()
///     .initial_rate(10)
///     .burst(1)
///     .clock(ManualClock::new())
///     .build()?;
/// let _first = limiter.try_acquire()?;
/// let limited = limiter.try_acquire().unwrap_err();
/// assert_eq!(limited.retry_after(), Duration::from_millis(100));
/// assert_eq!(limited.retry_after_secs(), 1);
/// assert_eq!(limited.rate(), 10);
/// assert_eq!(limited.to_string(), "rate limited, retry after 100ms");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RateLimited {
    retry_after: Duration,
    rate: u64,
}

impl RateLimited {
    /// A rejection: one token is due in `retry_after` at `rate` requests
    /// per second. For limiters built on this crate's types (a fleet's).
    pub fn new(retry_after: Duration, rate: u64) -> Self {
        Self { retry_after, rate }
    }

    /// Time until the bucket holds one token at the current rate.
    pub fn retry_after(&self) -> Duration {
        self.retry_after
    }

    /// [`retry_after`](RateLimited::retry_after) in whole seconds, rounded up
    /// and at least 1: the value of an HTTP `Retry-After` header.
    pub fn retry_after_secs(&self) -> u64 {
        let d = self.retry_after;
        (d.as_secs() + u64::from(d.subsec_nanos() > 0)).max(1)
    }

    /// The rate (requests per second) in force at the rejection.
    pub fn rate(&self) -> u64 {
        self.rate
    }
}

impl fmt::Display for RateLimited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rate limited, retry after {:?}", self.retry_after)
    }
}

impl std::error::Error for RateLimited {}
