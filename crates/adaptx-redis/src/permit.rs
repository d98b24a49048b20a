//! The permit an admitted request carries to its completion.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use adaptx::{Outcome, RatePermit};
use tokio::time::Instant;

use crate::limiter::Shared;
use crate::stats::add;

/// An admitted request of a [`FleetRateLimiter`](crate::FleetRateLimiter).
///
/// Record how the request went by consuming the permit
/// ([`success`](FleetPermit::success), [`failure`](FleetPermit::failure),
/// [`record`](FleetPermit::record)); the latency is measured from
/// admission. A fleet permit's outcome joins the instance's next report to
/// Redis, and so the fleet's interval; a permit from the local fallback
/// bucket feeds that bucket's own law. Dropping a permit without recording
/// gives no feedback (counted as dropped).
///
/// # Examples
///
/// ```no_run
/// use adaptx_redis::FleetRateLimiter;
///
/// # async fn call() -> Result<(), std::io::Error> { Ok(()) }
/// # async fn serve() -> Result<(), Box<dyn std::error::Error>> {
/// let limiter = FleetRateLimiter::builder("redis://10.0.0.5:6379", "checkout").build()?;
/// match limiter.try_acquire() {
///     Ok(permit) => match call().await {
///         Ok(()) => permit.success(),
///         Err(_) => permit.failure(), // the fleet's law sees it
///     },
///     Err(limited) => println!("429, Retry-After: {}", limited.retry_after_secs()),
/// }
/// # Ok(())
/// # }
/// ```
#[must_use = "dropping a fleet permit records no outcome"]
pub struct FleetPermit {
    shared: Arc<Shared>,
    local: Option<RatePermit>,
    start: Instant,
    rate: u64,
    remaining: u64,
    done: bool,
}

impl fmt::Debug for FleetPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetPermit")
            .field("local", &self.local.is_some())
            .field("rate_at_admission", &self.rate)
            .field("remaining", &self.remaining)
            .finish_non_exhaustive()
    }
}

impl FleetPermit {
    pub(crate) fn fleet(shared: Arc<Shared>, rate: u64, remaining: u64) -> Self {
        Self {
            shared,
            local: None,
            start: Instant::now(),
            rate,
            remaining,
            done: false,
        }
    }

    pub(crate) fn local(shared: Arc<Shared>, permit: RatePermit) -> Self {
        Self {
            shared,
            rate: permit.rate_at_admission(),
            remaining: permit.remaining(),
            local: Some(permit),
            start: Instant::now(),
            done: false,
        }
    }

    /// The rate (requests per second) in force at admission: the fleet's,
    /// or the local bucket's in fallback.
    pub fn rate_at_admission(&self) -> u64 {
        self.rate
    }

    /// Tokens left in this instance's lease (or local bucket) just after
    /// this admission.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Whether the local fallback bucket admitted this request.
    pub fn is_local(&self) -> bool {
        self.local.is_some()
    }

    /// Records a success.
    pub fn success(self) {
        self.record(Outcome::Success);
    }

    /// Records a failure.
    pub fn failure(self) {
        self.record(Outcome::Failure);
    }

    /// Records `outcome`, with the latency from admission.
    pub fn record(mut self, outcome: Outcome) {
        self.done = true;
        let c = &self.shared.counters;
        let ok = outcome.is_success();
        match self.local.take() {
            Some(permit) => {
                permit.record(outcome);
                add(
                    if ok {
                        &c.local_successes
                    } else {
                        &c.local_failures
                    },
                    1,
                );
            }
            None => {
                let us = u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX);
                // Latency first, then the count (Release): the reporter
                // reads the counts first (Acquire), so it never sees a
                // count without its latency.
                c.latency_sum_us.fetch_add(us, Ordering::Relaxed);
                let count = if ok { &c.successes } else { &c.failures };
                count.fetch_add(1, Ordering::Release);
            }
        }
    }
}

impl Drop for FleetPermit {
    fn drop(&mut self) {
        if !self.done {
            add(&self.shared.counters.dropped, 1);
        }
    }
}
