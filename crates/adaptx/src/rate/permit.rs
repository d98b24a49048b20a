//! The permit an admitted request carries to its completion.

use std::fmt;
use std::time::Duration;

use super::engine::{End, Lane};
use crate::clock::{duration_nanos, sample_nanos};
use crate::limiter::Outcome;
use crate::sync::Arc;

/// An admitted request of a [`RateLimiter`](crate::RateLimiter) or
/// [`KeyedRateLimiter`](crate::KeyedRateLimiter).
///
/// The token is spent at admission; the permit carries the request's
/// feedback to the controller. Record how the request went by consuming the
/// permit — [`success`](RatePermit::success),
/// [`failure`](RatePermit::failure), [`record`](RatePermit::record) (latency
/// measured from admission on the limiter's clock) or
/// [`record_with_latency`](RatePermit::record_with_latency). The request
/// counts toward its adjustment interval when it *completes*, so a hung
/// backend, whose requests never complete, never looks fast.
///
/// **Dropping a permit without recording** counts the request as *dropped*
/// in [`RateStats`](crate::RateStats) and feeds nothing to the controller.
///
/// A permit owns a handle to its limiter and can be moved into a spawned
/// task. It does not hold a concurrency slot: dropping it early does not let
/// another request in.
///
/// # Examples
///
/// ```
/// use adaptx::RateLimiter;
///
/// let limiter = RateLimiter::builder().build()?;
/// let permit = limiter.try_acquire()?;
/// assert_eq!(permit.rate_at_admission(), 100);
/// assert_eq!(permit.remaining(), 99);
/// permit.success();
/// assert_eq!(limiter.stats().successes, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "dropping a rate permit records no outcome"]
pub struct RatePermit {
    /// `None` once the permit has ended.
    lane: Option<Arc<Lane>>,
    start: u64,
    rate: u64,
    remaining: u64,
}

impl fmt::Debug for RatePermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RatePermit")
            .field("rate_at_admission", &self.rate)
            .field("remaining", &self.remaining)
            .field("elapsed", &self.elapsed())
            .finish()
    }
}

impl RatePermit {
    pub(crate) fn new(lane: Arc<Lane>, start: u64, rate: u64, remaining: u64) -> Self {
        Self {
            lane: Some(lane),
            start,
            rate,
            remaining,
        }
    }

    /// The rate (requests per second) in force when this request was
    /// admitted.
    pub fn rate_at_admission(&self) -> u64 {
        self.rate
    }

    /// Whole tokens left in the bucket just after this admission (for an
    /// `X-RateLimit-Remaining` header).
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Time since admission, on the limiter's clock.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.now().saturating_sub(self.start))
    }

    /// Records a success, with the latency measured from admission.
    #[inline(always)]
    pub fn success(self) {
        self.record(Outcome::Success);
    }

    /// Records a failure, with the latency measured from admission.
    pub fn failure(self) {
        self.record(Outcome::Failure);
    }

    /// Records `outcome`, with the latency measured from admission.
    #[inline(always)]
    pub fn record(mut self, outcome: Outcome) {
        let now = self.now();
        self.end(outcome, sample_nanos(now.saturating_sub(self.start)), now);
    }

    /// Records `outcome` with a latency the caller measured. A latency above
    /// [`MAX_SAMPLE_LATENCY`](crate::MAX_SAMPLE_LATENCY) (about 4.9 hours)
    /// counts as that, as for [`Permit`](crate::Permit), so the interval's
    /// latency sum cannot wrap.
    pub fn record_with_latency(mut self, outcome: Outcome, latency: Duration) {
        let now = self.now();
        self.end(outcome, sample_nanos(duration_nanos(latency)), now);
    }

    /// The limiter's clock.
    #[inline]
    fn now(&self) -> u64 {
        self.lane
            .as_ref()
            .map_or(self.start, |lane| lane.core.now())
    }

    #[inline(always)]
    fn end(&mut self, outcome: Outcome, latency: u64, now: u64) {
        if let Some(lane) = self.lane.take() {
            let success = outcome.is_success();
            Lane::finish(
                lane,
                End::Recorded {
                    success,
                    latency,
                    now,
                },
            );
        }
    }
}

impl Drop for RatePermit {
    #[inline]
    fn drop(&mut self) {
        if let Some(lane) = self.lane.take() {
            dropped(lane);
        }
    }
}

/// A permit dropped without an outcome (kept out of line, so that a
/// recorded permit's drop is a test of `None`).
#[cold]
#[inline(never)]
fn dropped(lane: Arc<Lane>) {
    Lane::finish(lane, End::Dropped);
}
