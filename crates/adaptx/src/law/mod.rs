//! Control laws: pure functions from a window summary to the next limit.
//!
//! A law never reads a clock, sleeps, allocates or locks. The limiter hands it
//! a [`WindowSummary`] once per sample window, together with the live limit,
//! and applies jitter and the `[min, max]` clamp to what the law returns.

use std::fmt;
use std::time::Duration;

use crate::clock::duration_nanos;
use crate::error::ConfigError;

mod aimd;
mod baseline;
mod ceiling;
mod gradient;
mod state;
mod vegas;

pub use aimd::Aimd;
pub use baseline::{
    BASELINE_EXPIRY_WINDOWS, BASELINE_MATCH, BASELINE_PROBE_DROP, BASELINE_PROBE_HALVINGS,
    BASELINE_PROBE_INTERVAL, BASELINE_PROBE_JITTER, BASELINE_PROBE_RATIO, BASELINE_PROBE_WINDOWS,
};
pub use ceiling::{CEILING_DEFAULT_TOLERANCE, Ceiling};
pub use gradient::{GRADIENT_QUEUE_BOUND, Gradient};
pub use state::LawState;
pub use vegas::Vegas;

/// What happened during one sample window, as a control law sees it.
///
/// Latencies are `f64` nanoseconds so that the arithmetic of the laws is the
/// same IEEE-754 arithmetic as the reference implementation.
///
/// The limiter builds one per window. To test a law of your own, build one
/// with the checked [`WindowSummary::new`] and the `with_*` methods; the
/// fields stay public to read and to set. New signals may be added as fields
/// (the struct is `#[non_exhaustive]`), which is why it has no struct
/// literal outside this crate: a summary built by `new` gets the new fields'
/// neutral values, so a new signal is not a breaking change.
///
/// # Examples
///
/// ```
/// use adaptx::{Aimd, ControlLaw, WindowSummary};
/// use std::time::Duration;
///
/// // A busy second: 200 completions of 10 ms on average, 20 in flight at
/// // the peak, 3 of them fresh overload failures.
/// let window = WindowSummary::new(Duration::from_secs(1), 200, 3, 20, Duration::from_millis(10))?
///     .with_rtt_floor(Duration::from_millis(8));
/// assert_eq!(window.failures, 3);
/// assert_eq!(window.mean_rtt_nanos, 10e6);
/// assert_eq!(window.rtt_floor_nanos, Some(8e6));
///
/// // AIMD halves on fresh failures (its default decrease ratio is 0.5).
/// let mut aimd = Aimd::new(1.0, 0.5, 0.8)?;
/// assert_eq!(aimd.next_limit(20, &window), 10);
///
/// // The summary is checked: a window cannot fail more often than it completes.
/// let err = WindowSummary::new(Duration::from_secs(1), 2, 3, 1, Duration::ZERO).unwrap_err();
/// assert_eq!(err.to_string(), "invalid failures: 3 (allowed: 0 ..= samples (2))");
/// # Ok::<(), adaptx::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct WindowSummary {
    /// Nanoseconds from the start of the window to the completion that closed it.
    pub duration_nanos: u64,
    /// Completions that carried a latency sample (skipped samples are not counted).
    pub samples: u64,
    /// Of `samples`, the failures of operations admitted *after the last
    /// decrease* of the limit: fresh evidence of overload at the present
    /// limit. A law that decreases on failures should look only at these.
    pub failures: u64,
    /// Of `samples`, the failures of operations admitted *before the last
    /// decrease*: the overload that decrease already answered, still
    /// draining (TCP's recovery rule). Reacting to them again would cut the
    /// limit twice for one overload episode; the built-in laws neither
    /// decrease nor grow on a window that has only these.
    pub stale_failures: u64,
    /// The largest in-flight count seen at a sampled completion in this window,
    /// counting the completing operation itself.
    pub peak_in_flight: usize,
    /// Arithmetic mean latency of the window's samples, in nanoseconds.
    pub mean_rtt_nanos: f64,
    /// Arithmetic mean latency of the window's *successful* samples, in
    /// nanoseconds; 0 when the window had none. A fast overload rejection is
    /// not a service time: a delay law that reads
    /// [`mean_rtt_nanos`](WindowSummary::mean_rtt_nanos) sees the latency
    /// *fall* as rejections rise.
    pub mean_ok_rtt_nanos: f64,
    /// Smallest latency sample of the window, in nanoseconds.
    pub min_rtt_nanos: f64,
    /// Largest latency of the window's *successful* samples, in nanoseconds
    /// (the limiter reads it from its latency histogram: within 0.8 %, and
    /// never under the successes' mean); 0 when the window had none. How far
    /// a backend's successes reach toward the client's timeout tells a heavy
    /// tail the timeout cuts from calls a backend never answered.
    pub max_ok_rtt_nanos: f64,
    /// The long-term floor latency (RTT_min): the lowest window mean of
    /// successful samples seen so far, this window included, drifted toward
    /// the average by the min-latency decay; `None` before any window with a
    /// successful, non-zero sample.
    pub rtt_floor_nanos: Option<f64>,
    /// The smoothed (EMA) window mean latency *before* this window is folded in;
    /// `None` on the first evaluated window after construction or a reset.
    pub rtt_average_nanos: Option<f64>,
}

impl WindowSummary {
    /// A window of `samples` completions that carried a latency, over
    /// `duration`, `failures` of them fresh overload failures, with
    /// `peak_in_flight` operations in flight at the busiest completion and a
    /// mean latency of `mean_rtt`.
    ///
    /// The other signals take the values of a plain window with these
    /// numbers: no stale failures; the successes' mean latency and the
    /// smallest sample both `mean_rtt` (the successes' mean is 0 when every
    /// sample failed); no RTT floor and no moving average yet, as on the
    /// first window. The `with_*` methods set them.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the field when the numbers cannot describe
    /// one window: `failures` above `samples`, or a `peak_in_flight` of 0
    /// with samples (the completing operation counts itself).
    pub fn new(
        duration: Duration,
        samples: u64,
        failures: u64,
        peak_in_flight: usize,
        mean_rtt: Duration,
    ) -> Result<Self, ConfigError> {
        if failures > samples {
            return Err(ConfigError::depending(
                "failures",
                failures,
                format!("0 ..= samples ({samples})"),
            ));
        }
        if samples > 0 && peak_in_flight == 0 {
            return Err(ConfigError::new(
                "peak_in_flight",
                peak_in_flight,
                "1 ..= usize::MAX when samples > 0",
            ));
        }
        let mean = duration_nanos(mean_rtt) as f64;
        Ok(Self {
            duration_nanos: duration_nanos(duration),
            samples,
            failures,
            stale_failures: 0,
            peak_in_flight,
            mean_rtt_nanos: mean,
            mean_ok_rtt_nanos: if samples > failures { mean } else { 0.0 },
            min_rtt_nanos: mean,
            max_ok_rtt_nanos: if samples > failures { mean } else { 0.0 },
            rtt_floor_nanos: None,
            rtt_average_nanos: None,
        })
    }

    /// The same window with `stale` failures of operations admitted before
    /// the last decrease, beside the fresh ones.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `stale_failures` when fresh and stale
    /// failures together exceed the samples.
    pub fn with_stale_failures(mut self, stale: u64) -> Result<Self, ConfigError> {
        let room = self.samples - self.failures;
        if stale > room {
            return Err(ConfigError::depending(
                "stale_failures",
                stale,
                format!("0 ..= samples - failures ({room})"),
            ));
        }
        self.stale_failures = stale;
        Ok(self)
    }

    /// The same window with `mean_ok_rtt` as the successes' mean latency.
    pub fn with_mean_ok_rtt(mut self, mean_ok_rtt: Duration) -> Self {
        self.mean_ok_rtt_nanos = duration_nanos(mean_ok_rtt) as f64;
        self
    }

    /// The same window with `min_rtt` as its smallest latency sample.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `min_rtt` when it is above the window's mean
    /// latency: no sample can be smaller than the smallest one.
    pub fn with_min_rtt(mut self, min_rtt: Duration) -> Result<Self, ConfigError> {
        let min = duration_nanos(min_rtt) as f64;
        if min > self.mean_rtt_nanos {
            return Err(ConfigError::depending(
                "min_rtt",
                min_rtt,
                format!("0 ..= mean_rtt ({}ns)", self.mean_rtt_nanos),
            ));
        }
        self.min_rtt_nanos = min;
        Ok(self)
    }

    /// The same window with `max_ok_rtt` as its successes' largest latency.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `max_ok_rtt` when the window has no success
    /// and `max_ok_rtt` is not zero, or when it is below the successes'
    /// mean latency: no success can be slower than the slowest one. Set the
    /// mean first ([`with_mean_ok_rtt`](WindowSummary::with_mean_ok_rtt)).
    pub fn with_max_ok_rtt(mut self, max_ok_rtt: Duration) -> Result<Self, ConfigError> {
        let max = duration_nanos(max_ok_rtt) as f64;
        if self.samples == self.failures && max > 0.0 {
            return Err(ConfigError::new(
                "max_ok_rtt",
                max_ok_rtt,
                "0 when the window has no success",
            ));
        }
        if max < self.mean_ok_rtt_nanos {
            return Err(ConfigError::depending(
                "max_ok_rtt",
                max_ok_rtt,
                format!("mean_ok_rtt ({}ns) ..", self.mean_ok_rtt_nanos),
            ));
        }
        self.max_ok_rtt_nanos = max;
        Ok(self)
    }

    /// The same window with `floor` as the long-term floor latency
    /// (RTT_min) the limiter has learned.
    pub fn with_rtt_floor(mut self, floor: Duration) -> Self {
        self.rtt_floor_nanos = Some(duration_nanos(floor) as f64);
        self
    }

    /// The same window with `average` as the smoothed mean latency of the
    /// windows before it.
    pub fn with_rtt_average(mut self, average: Duration) -> Self {
        self.rtt_average_nanos = Some(duration_nanos(average) as f64);
        self
    }
}

/// A control law: given the live limit and the summary of one sample window,
/// it returns the next limit.
///
/// The limiter calls [`next_limit`](ControlLaw::next_limit) at most once per
/// sample window, from the completion that closes the window, and never
/// concurrently. A law must be pure with respect to the outside world: no
/// clock reads, no locks, no allocation, no blocking. Its own state (AIMD's
/// increase credit, for example) lives in `self`.
///
/// The returned value is a proposal: the limiter withholds part of an increase
/// when jitter is configured and clamps the result into `[min_limit,
/// max_limit]`. Returning `limit` holds the limit.
///
/// # Examples
///
/// A law that grows by one on every clean window and halves on failures:
///
/// ```
/// use adaptx::{ControlLaw, WindowSummary};
///
/// #[derive(Debug)]
/// struct Simple;
///
/// impl ControlLaw for Simple {
///     fn name(&self) -> &'static str {
///         "simple"
///     }
///     fn next_limit(&mut self, limit: usize, window: &WindowSummary) -> usize {
///         if window.failures > 0 { limit / 2 } else { limit + 1 }
///     }
/// }
///
/// let limiter = adaptx::Limiter::builder().law(Simple).build().unwrap();
/// assert_eq!(limiter.stats().algorithm, "simple");
/// ```
pub trait ControlLaw: Send + fmt::Debug + 'static {
    /// A short, stable name shown in [`Stats::algorithm`](crate::Stats::algorithm).
    fn name(&self) -> &'static str;

    /// Returns the proposed limit for the next window.
    fn next_limit(&mut self, limit: usize, window: &WindowSummary) -> usize;

    /// Forgets all state, as after construction. Called by
    /// [`Limiter::reset_stats`](crate::Limiter::reset_stats).
    fn reset(&mut self) {}

    /// Seeds the law's own random draws, if it makes any (a reset keeps
    /// the seed). The limiter calls it when it takes the law — at build and
    /// on [`Limiter::reconfigure`](crate::Limiter::reconfigure) — with a seed
    /// derived from its own ([`Builder::seed`](crate::Builder::seed), random
    /// by default): the laws of limiters seeded alike draw alike, those of
    /// a fleet's limiters do not, so they do not probe or give room away in
    /// step. Default: nothing.
    fn seed(&mut self, seed: u64) {
        let _ = seed;
    }

    /// Whether the limiter should close the window at the first *fresh*
    /// overload failure — one of an operation admitted since the last
    /// decrease — instead of waiting for the window to end, so that the law
    /// can answer an overload at once: a probe above the backend's ceiling
    /// then costs one rejection instead of a window of them.
    ///
    /// Read once, when the limiter is built. Only fresh failures close a
    /// window early; a stale one (admitted before the last decrease: the
    /// overload that decrease already answered) is counted without taking any
    /// lock, as every completion is. A law that asks for this must decide on
    /// short windows: the one closed early may hold a single sample. Default
    /// `false`: the window runs its full length.
    fn reacts_to_first_failure(&self) -> bool {
        false
    }

    /// What the law has learned, shown in
    /// [`Stats::law_state`](crate::Stats::law_state) so a user can see why
    /// the limit is where it is. Called by
    /// [`Limiter::stats`](crate::Limiter::stats), under the controller's
    /// lock: it must be cheap. Default [`LawState::Unreported`].
    fn state(&self) -> LawState {
        LawState::Unreported
    }
}

/// `floor(limit · ratio)`: the multiplicative decrease shared by all laws.
#[inline]
pub(crate) fn decrease(limit: usize, ratio: f64) -> usize {
    (limit as f64 * ratio) as usize
}

/// The utilization gate shared by all laws: a window may grow the limit only
/// when its peak in-flight reached `ceil(limit · utilization)`.
#[inline]
pub(crate) fn utilized(limit: usize, peak_in_flight: usize, utilization: f64) -> bool {
    let need = (limit as f64 * utilization).ceil() as usize;
    peak_in_flight >= need
}

/// Whether a window used so little of the limit that its latency says
/// nothing about the limit: its peak in-flight stayed below half of it. A
/// latency rise then comes from the backend or the network, not from a queue
/// this limiter built, and cutting the limit would only turn the next burst
/// away. The delay laws hold on such a window (Netflix's concurrency-limits
/// Vegas and Gradient2 have the same "app-limited" rule).
#[inline]
pub(crate) fn app_limited(limit: usize, peak_in_flight: usize) -> bool {
    peak_in_flight.saturating_mul(2) < limit
}

/// A clean window (10 samples, no failures) for the laws' unit tests.
#[cfg(test)]
pub(crate) fn test_window(
    peak: usize,
    r: f64,
    floor: Option<f64>,
    avg: Option<f64>,
) -> WindowSummary {
    WindowSummary {
        duration_nanos: 1_000_000_000,
        samples: 10,
        failures: 0,
        stale_failures: 0,
        peak_in_flight: peak,
        mean_rtt_nanos: r,
        mean_ok_rtt_nanos: r,
        min_rtt_nanos: r,
        max_ok_rtt_nanos: r,
        rtt_floor_nanos: floor,
        rtt_average_nanos: avg,
    }
}

/// Runs `law` in closed loop for `windows` windows from limit `limit`: each
/// window saturates the limit in force at its start and the one set for it
/// (peak in-flight `max(previous, live)`: a cut drains through the next
/// window), has mean latency `r(i)` for window `i`, the limiter's RTT_min
/// `floor(i)` and a flat average. Returns the limit after each window.
#[cfg(test)]
pub(crate) fn drive(
    law: &mut dyn ControlLaw,
    mut limit: usize,
    windows: usize,
    r: impl Fn(usize) -> f64,
    floor: impl Fn(usize) -> f64,
) -> Vec<usize> {
    let mut prev = limit;
    (0..windows)
        .map(|i| {
            let w = test_window(prev.max(limit), r(i), Some(floor(i)), Some(r(i)));
            prev = limit;
            limit = law.next_limit(limit, &w).max(1);
            limit
        })
        .collect()
}
