//! The `metrics` feature: the handles a limiter reports through, registered
//! once when it is built.
//!
//! # Implementation details
//!
//! Nothing here runs on a success: the counters of outcomes and the latency
//! histogram are published when a window closes, from the window's own
//! striped counters and its frozen histogram, under the controller mutex
//! that the close already holds. A rejection and a dropped permit, which may
//! come when no window closes for a long time (a hung backend), increment
//! their counters at once through a handle registered at build time: one
//! call into the recorder, no lock of ours, no allocation of ours.

use std::sync::atomic::{AtomicU64, Ordering};

use ::metrics::{Counter, Gauge, Histogram, Unit, counter, gauge, histogram};

use super::names::*;
use crate::rate::RateStats;
use crate::window::Window;

/// A gauge, a counter or a histogram of limiter `$name`, registered with
/// the recorder in force now, described and labelled.
macro_rules! handle {
    ($kind:ident, $metric:expr, $help:expr, $name:expr) => {
        $kind!(description: $help, $metric, LABEL => $name.to_owned())
    };
    ($kind:ident, $metric:expr, $help:expr, $unit:expr, $name:expr) => {
        $kind!(description: $help, unit: $unit, $metric, LABEL => $name.to_owned())
    };
}

/// The handles of one [`Limiter`](crate::Limiter).
#[derive(Debug)]
pub(crate) struct LimiterMetrics {
    limit: Gauge,
    min_limit: Gauge,
    max_limit: Gauge,
    in_flight: Gauge,
    available: Gauge,
    successes: Counter,
    failures: Counter,
    dropped: Counter,
    rejected: Counter,
    increases: Counter,
    decreases: Counter,
    latency: Histogram,
    /// Successes and failures published so far (since build or reset).
    /// Written only under the controller mutex.
    published: [AtomicU64; 2],
    /// The in-flight and available counts the gauges show, packed (see
    /// [`pack`]): a storm of rejections at one occupancy sets them once.
    occupancy: AtomicU64,
}

/// `in_flight` and `available`, each at most `MAX_LIMIT_BOUND` (< 2³¹), in
/// one word.
fn pack(in_flight: usize, available: usize) -> u64 {
    ((in_flight as u64) << 32) | (available as u64 & u64::from(u32::MAX))
}

/// What a limiter's gauges show.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Levels {
    pub(crate) limit: usize,
    pub(crate) min_limit: usize,
    pub(crate) max_limit: usize,
    pub(crate) in_flight: usize,
    pub(crate) available: usize,
}

impl LimiterMetrics {
    /// Registers every handle of limiter `name` and sets the gauges.
    pub(crate) fn new(name: &str, levels: Levels) -> Self {
        let m = Self {
            limit: handle!(gauge, LIMITER_LIMIT, "The live concurrency limit.", name),
            min_limit: handle!(gauge, LIMITER_MIN_LIMIT, "The floor of the limit.", name),
            max_limit: handle!(gauge, LIMITER_MAX_LIMIT, "The ceiling of the limit.", name),
            in_flight: handle!(
                gauge,
                LIMITER_IN_FLIGHT,
                "Operations admitted and not finished, at the last window close or rejection.",
                name
            ),
            available: handle!(
                gauge,
                LIMITER_AVAILABLE,
                "Permits free, at the last window close or rejection.",
                name
            ),
            successes: handle!(
                counter,
                LIMITER_SUCCESSES,
                "Operations recorded as successes.",
                name
            ),
            failures: handle!(
                counter,
                LIMITER_FAILURES,
                "Operations recorded as failures.",
                name
            ),
            dropped: handle!(
                counter,
                LIMITER_DROPPED,
                "Permits released without an outcome.",
                name
            ),
            rejected: handle!(
                counter,
                LIMITER_REJECTED,
                "Admission attempts that ended without a permit.",
                name
            ),
            increases: handle!(
                counter,
                LIMITER_INCREASES,
                "Windows that raised the limit.",
                name
            ),
            decreases: handle!(
                counter,
                LIMITER_DECREASES,
                "Windows that lowered the limit.",
                name
            ),
            latency: handle!(
                histogram,
                LIMITER_LATENCY,
                "Latency of successful operations.",
                Unit::Seconds,
                name
            ),
            published: [AtomicU64::new(0), AtomicU64::new(0)],
            occupancy: AtomicU64::new(u64::MAX),
        };
        m.set_levels(levels);
        m
    }

    /// Sets every gauge.
    pub(crate) fn set_levels(&self, l: Levels) {
        self.limit.set(l.limit as f64);
        self.min_limit.set(l.min_limit as f64);
        self.max_limit.set(l.max_limit as f64);
        self.occupancy
            .store(pack(l.in_flight, l.available), Ordering::Relaxed);
        self.in_flight.set(l.in_flight as f64);
        self.available.set(l.available as f64);
    }

    /// Sets the in-flight and available gauges if they show other counts: a
    /// relaxed load when they do not. Two racing callers may leave the
    /// gauges one reading behind the cache; the next change or window close
    /// sets them again.
    #[inline]
    pub(crate) fn set_occupancy(&self, in_flight: usize, available: usize) {
        let packed = pack(in_flight, available);
        if self.occupancy.load(Ordering::Relaxed) != packed {
            self.occupancy.store(packed, Ordering::Relaxed);
            self.in_flight.set(in_flight as f64);
            self.available.set(available as f64);
        }
    }

    #[inline]
    pub(crate) fn rejected(&self) {
        self.rejected.increment(1);
    }

    #[inline]
    pub(crate) fn dropped(&self) {
        self.dropped.increment(1);
    }

    /// Counts one limit change.
    pub(crate) fn changed(&self, increase: bool) {
        if increase {
            self.increases.increment(1);
        } else {
            self.decreases.increment(1);
        }
    }

    /// Publishes a closed window: the outcome counters up to `totals`
    /// (successes, failures since build or reset) and the latencies of the
    /// window `w` just handed over. Under the controller mutex.
    pub(crate) fn window(&self, w: &Window, totals: [u64; 2]) {
        for ((published, total), counter) in self
            .published
            .iter()
            .zip(totals)
            .zip([&self.successes, &self.failures])
        {
            let before = published.swap(total, Ordering::Relaxed);
            counter.increment(total.saturating_sub(before));
        }
        w.closed_latencies(|nanos, count| {
            self.latency.record_many(
                nanos as f64 * 1e-9,
                usize::try_from(count).unwrap_or(usize::MAX),
            );
        });
    }

    /// After the limiter's counters were zeroed: later outcomes are
    /// published on top of what was, so the exported counters never go back.
    /// Under the controller mutex.
    pub(crate) fn reset(&self) {
        for p in &self.published {
            p.store(0, Ordering::Relaxed);
        }
    }
}

/// The handles of one [`RateLimiter`](crate::RateLimiter) or
/// [`KeyedRateLimiter`](crate::KeyedRateLimiter).
#[derive(Debug)]
pub(crate) struct RateMetrics {
    rate: Gauge,
    min_rate: Gauge,
    max_rate: Gauge,
    tokens: Gauge,
    admitted: Counter,
    limited: Counter,
    successes: Counter,
    failures: Counter,
    dropped: Counter,
    increases: Counter,
    decreases: Counter,
    /// When the tokens gauge is next set (clock nanoseconds).
    next_tokens: AtomicU64,
}

impl RateMetrics {
    /// Registers every handle of rate limiter `name`, rate `rate` within
    /// `[min, max]`.
    pub(crate) fn new(name: &str, rate: u64, min: u64, max: u64) -> Self {
        let m = Self {
            rate: handle!(
                gauge,
                RATE_LIMIT,
                "The live rate, requests per second.",
                name
            ),
            min_rate: handle!(
                gauge,
                RATE_MIN_LIMIT,
                "The floor of the rate, requests per second.",
                name
            ),
            max_rate: handle!(
                gauge,
                RATE_MAX_LIMIT,
                "The ceiling of the rate, requests per second.",
                name
            ),
            tokens: handle!(
                gauge,
                RATE_TOKENS,
                "Whole tokens left in the bucket after a recent admission (RateLimiter only).",
                name
            ),
            admitted: handle!(counter, RATE_ADMITTED, "Requests admitted.", name),
            limited: handle!(
                counter,
                RATE_LIMITED,
                "Requests rejected for want of a token.",
                name
            ),
            successes: handle!(
                counter,
                RATE_SUCCESSES,
                "Requests recorded as successes.",
                name
            ),
            failures: handle!(
                counter,
                RATE_FAILURES,
                "Requests recorded as failures.",
                name
            ),
            dropped: handle!(
                counter,
                RATE_DROPPED,
                "Permits dropped without an outcome.",
                name
            ),
            increases: handle!(
                counter,
                RATE_INCREASES,
                "Adjustments that raised the rate.",
                name
            ),
            decreases: handle!(
                counter,
                RATE_DECREASES,
                "Adjustments that lowered the rate.",
                name
            ),
            next_tokens: AtomicU64::new(0),
        };
        m.rate.set(rate as f64);
        m.min_rate.set(min as f64);
        m.max_rate.set(max as f64);
        m
    }

    /// Publishes an adjustment interval's close: the rate and the counters.
    /// The engine's counters only grow, so each is set to its total.
    pub(crate) fn interval(&self, s: &RateStats) {
        self.rate.set(s.rate as f64);
        for (counter, total) in [
            (&self.admitted, s.admitted),
            (&self.limited, s.rejected),
            (&self.successes, s.successes),
            (&self.failures, s.failures),
            (&self.dropped, s.dropped),
            (&self.increases, s.increases),
            (&self.decreases, s.decreases),
        ] {
            counter.absolute(total);
        }
    }

    /// Sets the tokens gauge to `tokens` at `now` if it was last set at
    /// least `every` nanoseconds ago: at most once per adjustment interval,
    /// one relaxed load otherwise. Concurrent callers may both set it; the
    /// gauge shows one of their readings.
    #[inline]
    pub(crate) fn tokens(&self, now: u64, every: u64, tokens: u64) {
        if now >= self.next_tokens.load(Ordering::Relaxed) {
            self.next_tokens
                .store(now.saturating_add(every), Ordering::Relaxed);
            self.tokens.set(tokens as f64);
        }
    }
}
