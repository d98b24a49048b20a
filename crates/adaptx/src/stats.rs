//! The statistics snapshot.

use std::time::Duration;

use crate::histogram::Counts;
use crate::law::LawState;
use crate::mode::Mode;

/// A snapshot of a limiter's counters and recent latencies, from
/// [`Limiter::stats`](crate::Limiter::stats).
///
/// Counters run from construction or the last
/// [`reset_stats`](crate::Limiter::reset_stats). The latency fields describe
/// recent *successful* operations: a fast rejection or a timeout says nothing
/// about how long the backend takes to serve. With the `serde` feature it
/// serializes with latencies as integer nanoseconds (the reference's JSON).
///
/// # Examples
///
/// ```
/// use adaptx::Limiter;
///
/// let limiter = Limiter::builder().initial_limit(5).build()?;
/// limiter.try_acquire()?.success();
/// let _held = limiter.try_acquire()?;
/// let s = limiter.stats();
/// assert_eq!((s.limit, s.in_flight, s.success), (5, 1, 1));
/// assert_eq!(s.total, s.success + s.failures + s.dropped + s.in_flight as u64);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Stats {
    /// The control law's name.
    pub algorithm: &'static str,
    /// The live limit.
    pub limit: usize,
    /// The configured floor.
    pub min_limit: usize,
    /// The configured ceiling.
    pub max_limit: usize,
    /// Operations admitted and not yet finished.
    pub in_flight: usize,
    /// Admitted operations: `success + failures + dropped + in_flight`.
    pub total: u64,
    /// Operations recorded as successes (skipped samples included).
    pub success: u64,
    /// Operations recorded as failures (skipped samples and panics included).
    pub failures: u64,
    /// Permits dropped without an outcome.
    pub dropped: u64,
    /// Admission attempts that ended without a permit: no capacity, closed,
    /// timed out, or a waiting acquire dropped.
    pub rejected: u64,
    /// Windows that raised the limit.
    pub increases: u64,
    /// Windows that lowered the limit.
    pub decreases: u64,
    /// Number of recent successful latency samples the latency fields summarize.
    pub latency_samples: u64,
    /// Mean of recent latency samples (not the controller's EMA).
    #[cfg_attr(
        feature = "serde",
        serde(rename = "avg_latency", serialize_with = "nanos")
    )]
    pub avg_latency: Duration,
    /// Smallest recent latency sample.
    #[cfg_attr(feature = "serde", serde(serialize_with = "nanos"))]
    pub min_latency: Duration,
    /// Largest recent latency sample.
    #[cfg_attr(feature = "serde", serde(serialize_with = "nanos"))]
    pub max_latency: Duration,
    /// Median of recent latency samples (lower nearest rank).
    #[cfg_attr(feature = "serde", serde(serialize_with = "nanos"))]
    pub p50_latency: Duration,
    /// 99th percentile of recent latency samples (lower nearest rank).
    #[cfg_attr(feature = "serde", serde(serialize_with = "nanos"))]
    pub p99_latency: Duration,
    /// The admission mode (see [`Mode`]).
    pub mode: Mode,
    /// Admissions above the limit that [`Mode::Shadow`] or [`Mode::Bypass`]
    /// let through: each one `try_acquire` would have rejected, or
    /// `acquire` made to wait, in [`Mode::Enforce`]. Counted in `total`
    /// like any admission, never in `rejected`.
    pub would_reject: u64,
    /// The limit forced by hand ([`Limiter::force_limit`](crate::Limiter::force_limit)),
    /// if any.
    pub forced_limit: Option<usize>,
    /// The controller's RTT_min: the lowest window mean of successes,
    /// drifting toward the average by the min-latency decay (what
    /// [`Limiter::min_latency_estimate`](crate::Limiter::min_latency_estimate)
    /// returns); `None` before any evaluated window.
    #[cfg_attr(feature = "serde", serde(serialize_with = "opt_nanos"))]
    pub rtt_min: Option<Duration>,
    /// The controller's moving (EMA) average of window mean latencies (what
    /// [`Limiter::smoothed_latency`](crate::Limiter::smoothed_latency)
    /// returns); `None` before any evaluated window.
    #[cfg_attr(feature = "serde", serde(serialize_with = "opt_nanos"))]
    pub rtt_average: Option<Duration>,
    /// What the control law has learned: with RTT_min and the average, the
    /// reason the limit is where it is.
    pub law_state: LawState,
}

#[cfg(feature = "serde")]
fn nanos<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

#[cfg(feature = "serde")]
fn opt_nanos<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => nanos(d, s),
        None => s.serialize_none(),
    }
}

impl Stats {
    /// `limits`: limit, min, max, in-flight. `counters`: total, success,
    /// failures, dropped, rejected, increases, decreases.
    pub(crate) fn new(
        algorithm: &'static str,
        limits: [usize; 4],
        counters: [u64; 7],
        latencies: &Counts,
    ) -> Self {
        let [limit, min_limit, max_limit, in_flight] = limits;
        let [
            total,
            success,
            failures,
            dropped,
            rejected,
            increases,
            decreases,
        ] = counters;
        let d = |v: Option<u64>| Duration::from_nanos(v.unwrap_or(0));
        let min = latencies.min();
        let max = latencies.max();
        // Bucket representatives keep the order of the buckets, so these are
        // ordered min <= p50 <= p99 <= max; the clamp only documents it.
        let clamp = |v: Option<u64>| v.map(|v| v.clamp(min.unwrap_or(0), max.unwrap_or(0)));
        Self {
            algorithm,
            limit,
            min_limit,
            max_limit,
            in_flight,
            total,
            success,
            failures,
            dropped,
            rejected,
            increases,
            decreases,
            latency_samples: latencies.count(),
            avg_latency: d(clamp(latencies.mean())),
            min_latency: d(min),
            max_latency: d(max),
            p50_latency: d(clamp(latencies.percentile(0.5))),
            p99_latency: d(clamp(latencies.percentile(0.99))),
            mode: Mode::Enforce,
            would_reject: 0,
            forced_limit: None,
            rtt_min: None,
            rtt_average: None,
            law_state: LawState::Unreported,
        }
    }
}
