//! What a limiter tells the outside: the reason of each limit change, and,
//! with the `metrics` and `tracing` features, metrics and log events.
//!
//! # The reason of a limit change
//!
//! Every move of a [`Limiter`](crate::Limiter)'s limit comes with a
//! [`LimitChange`]: old and new limit, the law that decided, and the window
//! it judged (samples, fresh and stale failures, peak in-flight, mean
//! latency, RTT_min, the moving average). The hook of
//! [`Builder::on_limit_change_with`](crate::Builder::on_limit_change_with)
//! receives it; [`Stats`](crate::Stats) adds what the law has learned
//! ([`LawState`](crate::LawState)) and the controller's RTT_min and moving
//! average, so a user can see *why* the limit is where it is.
//!
//! # Metrics (feature `metrics`)
//!
//! Every limiter registers its metrics with the recorder of the
//! [`metrics`](https://docs.rs/metrics) facade that is in force when it is
//! **built** (install the recorder first; a limiter built before any
//! recorder reports nowhere), labelled `limiter="<name>"`: the name set with
//! [`Builder::name`](crate::Builder::name) or
//! [`RateLimiterBuilder::name`](crate::RateLimiterBuilder::name), default
//! [`DEFAULT_NAME`]. Give each limiter of a process its own name: two with
//! the same name share their series.
//!
//! | name | kind | what | updated |
//! |---|---|---|---|
//! | `adaptx_limiter_limit` | gauge | the live limit | at build, each window close, reset, run-time change |
//! | `adaptx_limiter_min_limit` | gauge | `min_limit` | at build, each window close, run-time change |
//! | `adaptx_limiter_max_limit` | gauge | `max_limit` | at build, each window close, run-time change |
//! | `adaptx_limiter_in_flight` | gauge | operations admitted, not finished | each window close, rejection and run-time change |
//! | `adaptx_limiter_available` | gauge | permits free | each window close, rejection and run-time change |
//! | `adaptx_limiter_successes_total` | counter | outcomes recorded as successes | each window close |
//! | `adaptx_limiter_failures_total` | counter | outcomes recorded as failures | each window close |
//! | `adaptx_limiter_dropped_total` | counter | permits released without an outcome | at once |
//! | `adaptx_limiter_rejected_total` | counter | admission attempts refused | at once |
//! | `adaptx_limiter_increases_total` | counter | windows that raised the limit | at once |
//! | `adaptx_limiter_decreases_total` | counter | windows that lowered the limit | at once |
//! | `adaptx_limiter_latency_seconds` | histogram | latency of successes (bucket midpoints, within 0.8 %) | each window close |
//! | `adaptx_rate_limit` | gauge | the live rate, requests/s | at build, each interval close |
//! | `adaptx_rate_min_limit` | gauge | `min_rate`, requests/s | at build |
//! | `adaptx_rate_max_limit` | gauge | `max_rate`, requests/s | at build |
//! | `adaptx_rate_tokens` | gauge | whole tokens left after an admission ([`RateLimiter`](crate::RateLimiter) only) | at most once per interval |
//! | `adaptx_rate_admitted_total` | counter | requests admitted | each interval close |
//! | `adaptx_rate_limited_total` | counter | requests refused for want of a token | each interval close |
//! | `adaptx_rate_successes_total` | counter | requests recorded as successes | each interval close |
//! | `adaptx_rate_failures_total` | counter | requests recorded as failures | each interval close |
//! | `adaptx_rate_dropped_total` | counter | permits dropped without an outcome | each interval close |
//! | `adaptx_rate_increases_total` | counter | adjustments that raised the rate | each interval close |
//! | `adaptx_rate_decreases_total` | counter | adjustments that lowered the rate | each interval close |
//!
//! The names are constants of this module (`LIMITER_LIMIT`, …, with the
//! feature) and carry Prometheus' `_total` and unit suffixes already, so an
//! exporter with or without its recommended naming shows them as written. Counters never go
//! back: [`Limiter::reset_stats`](crate::Limiter::reset_stats) zeroes
//! [`Stats`](crate::Stats), and the exported counters go on from where they
//! were. A keyed rate limiter has one bucket per key, too many series for a
//! gauge: it reports no tokens.
//!
//! ## Cost
//!
//! Without the feature none of this is compiled. With it, nothing runs on a
//! success: outcomes and latencies are published when a window closes (once
//! per sample window, under the lock the close already takes), from the
//! closed windows' totals, the limiter's striped counters and the frozen
//! histogram of the window just closed, read only over the buckets its
//! latencies span. Rejections and dropped permits, which may come while no
//! window closes, count at once through handles registered at build (a
//! rejection sets the occupancy gauges only when they changed). The hot
//! path takes no lock and allocates nothing of ours either way
//! (`tests/no_alloc.rs`, with Prometheus' recorder too).
//!
//! Measured in instructions (callgrind, 2026-12-01; feature off → on with no
//! recorder → on with Prometheus' recorder): `try_acquire` + success
//! 194 → 194 → 194 when no window closes; drop 82 → 89 → 102; rejection
//! 41 → 70 → 78; a window close 46 970 → 47 230 → 47 600. A window close
//! hands the window's latencies to the recorder as `(bucket midpoint,
//! count)` pairs, one call per non-empty bucket; what the recorder does
//! with them is its own: Prometheus' stores each sample (its `record_many`
//! records the value `count` times, in blocks it allocates), which costs
//! about 175 instructions per success at the close (291 → 467 per success
//! in windows of 1000). Drop the histogram with a filter layer
//! (`metrics_util::layers::FilterLayer`) where that matters.
//!
//! The price of publishing at the close is freshness: outcome counters and
//! the histogram lag by at most one window while operations complete, and
//! the window in progress when traffic stops is published by the next
//! completion that closes it. A rate limiter publishes when its adjustment
//! interval closes, which any admission attempt does.
//!
//! # Log events (feature `tracing`)
//!
//! All with target `adaptx` and the field `limiter` (the name):
//!
//! | level | message | fields | when |
//! |---|---|---|---|
//! | `DEBUG` | `limit changed` | `law`, `old`, `new`, `samples`, `failures` (fresh), `stale_failures`, `peak_in_flight`, `mean_latency_ms`, `rtt_min_ms` (absent before any success) | every limit change by a window |
//! | `WARN` | `limit pinned at min_limit` | `min_limit`, `windows` | after `MIN_LIMIT_WARN_WINDOWS` (10) windows in a row at `min_limit`, once per episode |
//! | `INFO` | `limit left min_limit` | `min_limit`, `windows` | the end of an episode that was warned about |
//! | `INFO` | `limiter reconfigured` | `limit`, `min_limit`, `max_limit`, `forced` (absent when none) | [`Limiter::reconfigure`](crate::Limiter::reconfigure) succeeded |
//! | `INFO` | `limit forced` | the same | [`Limiter::force_limit`](crate::Limiter::force_limit) |
//! | `INFO` | `forced limit released` | the same | [`Limiter::release_forced_limit`](crate::Limiter::release_forced_limit) released one |
//!
//! Events are emitted after the controller's lock is released, never under
//! it.

mod change;
#[cfg(feature = "metrics")]
mod metrics;
#[cfg(feature = "metrics")]
mod names;
#[cfg(feature = "tracing")]
mod trace;

pub use change::LimitChange;
#[cfg(feature = "metrics")]
pub use names::*;
#[cfg(feature = "tracing")]
pub use trace::MIN_LIMIT_WARN_WINDOWS;

use crate::control::Control;
use crate::pool::Pool;
use crate::rate::RateStats;
use crate::window::Window;

/// The name of a limiter built without one: the value of its `limiter`
/// label and of the `limiter` field of its log events.
pub const DEFAULT_NAME: &str = "default";

/// The points where a [`Limiter`](crate::Limiter) reports. Without the
/// `metrics` and `tracing` features it holds nothing and every method is
/// empty, so the calls compile to nothing.
#[derive(Debug)]
pub(crate) struct Observer {
    #[cfg(feature = "metrics")]
    metrics: metrics::LimiterMetrics,
    #[cfg(feature = "tracing")]
    trace: trace::LimiterTrace,
}

/// A window close, as the observer sees it: under the controller mutex,
/// after the hand-over and the law.
#[derive(Debug, Clone, Copy)]
// Each feature reads its own fields.
#[cfg_attr(not(all(feature = "metrics", feature = "tracing")), allow(dead_code))]
pub(crate) struct Closing<'a> {
    pub(crate) window: &'a Window,
    pub(crate) control: &'a Control,
    pub(crate) pool: &'a Pool,
    pub(crate) min_limit: usize,
    pub(crate) max_limit: usize,
    /// Whether the limiter adapts (it is not closed).
    pub(crate) adapting: bool,
}

/// What a window close leaves to report once the mutex is released.
#[derive(Debug, Clone, Copy, Default)]
#[must_use]
pub(crate) struct Note {
    #[cfg(feature = "tracing")]
    episode: trace::Episode,
}

impl Observer {
    /// The observer of limiter `name` over `pool`, whose limit lies in
    /// `[min_limit, max_limit]`.
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn new(name: &str, pool: &Pool, min_limit: usize, max_limit: usize) -> Self {
        Self {
            #[cfg(feature = "metrics")]
            metrics: metrics::LimiterMetrics::new(name, levels(pool, min_limit, max_limit)),
            #[cfg(feature = "tracing")]
            trace: trace::LimiterTrace::new(name),
        }
    }

    /// An admission attempt ended without a permit.
    #[inline]
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn rejected(&self, pool: &Pool) {
        #[cfg(feature = "metrics")]
        {
            self.metrics.rejected();
            let (limit, in_flight, _) = pool.snapshot();
            self.metrics
                .set_occupancy(in_flight, limit.saturating_sub(in_flight));
        }
    }

    /// A permit was released without an outcome.
    #[inline]
    pub(crate) fn dropped(&self) {
        #[cfg(feature = "metrics")]
        self.metrics.dropped();
    }

    /// A window closed. Under the controller mutex.
    #[cfg_attr(
        not(any(feature = "metrics", feature = "tracing")),
        allow(unused_variables)
    )]
    pub(crate) fn window_closed(&self, c: Closing<'_>) -> Note {
        #[cfg(feature = "metrics")]
        {
            self.metrics
                .set_levels(levels(c.pool, c.min_limit, c.max_limit));
            let (success, failures) = c.control.closed_outcomes(c.window);
            self.metrics.window(c.window, [success, failures]);
        }
        Note {
            #[cfg(feature = "tracing")]
            episode: if c.adapting {
                self.trace.window(c.pool.limit(), c.min_limit, c.max_limit)
            } else {
                trace::Episode::Quiet
            },
        }
    }

    /// A window moved the limit, and then left `note`. After the controller
    /// mutex is released.
    #[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
    pub(crate) fn after_close(&self, change: Option<&LimitChange>, note: Note, min_limit: usize) {
        if let Some(c) = change {
            #[cfg(feature = "metrics")]
            self.metrics.changed(c.is_increase());
            #[cfg(feature = "tracing")]
            self.trace.changed(c);
        }
        #[cfg(feature = "tracing")]
        self.trace.episode(note.episode, min_limit);
    }

    /// An operator moved the limit or its bounds ([`Operated`]): the level
    /// gauges follow at once (not at the next window close) and an `INFO`
    /// event says what was done. Under the controller mutex, so the gauges
    /// are set in the order of the changes; the event is emitted by the
    /// returned [`Operation`] once the mutex is released.
    #[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
    pub(crate) fn operated(
        &self,
        what: Operated,
        pool: &Pool,
        min_limit: usize,
        max_limit: usize,
        forced: Option<usize>,
    ) -> Operation<'_> {
        #[cfg(feature = "metrics")]
        self.metrics.set_levels(levels(pool, min_limit, max_limit));
        Operation {
            #[cfg(feature = "tracing")]
            trace: &self.trace,
            #[cfg(feature = "tracing")]
            event: trace::Operated {
                what,
                limit: pool.limit(),
                min_limit,
                max_limit,
                forced,
            },
            #[cfg(not(feature = "tracing"))]
            _observer: std::marker::PhantomData,
        }
    }

    /// The limiter's counters and learning were reset. Under the controller
    /// mutex.
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn reset(&self, pool: &Pool, min_limit: usize, max_limit: usize) {
        #[cfg(feature = "metrics")]
        {
            self.metrics.reset();
            self.metrics.set_levels(levels(pool, min_limit, max_limit));
        }
        #[cfg(feature = "tracing")]
        self.trace.reset();
    }
}

/// A change an operator made on a live limiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operated {
    /// [`Limiter::reconfigure`](crate::Limiter::reconfigure).
    Reconfigured,
    /// [`Limiter::force_limit`](crate::Limiter::force_limit).
    Forced,
    /// [`Limiter::release_forced_limit`](crate::Limiter::release_forced_limit)
    /// (when a limit was forced).
    Released,
}

/// An operator's change still to be logged, after the controller mutex is
/// released: [`emit`](Operation::emit) it.
#[derive(Debug)]
#[must_use]
pub(crate) struct Operation<'a> {
    #[cfg(feature = "tracing")]
    trace: &'a trace::LimiterTrace,
    #[cfg(feature = "tracing")]
    event: trace::Operated,
    #[cfg(not(feature = "tracing"))]
    _observer: std::marker::PhantomData<&'a ()>,
}

impl Operation<'_> {
    /// Logs the change (feature `tracing`). Outside the controller mutex.
    pub(crate) fn emit(self) {
        #[cfg(feature = "tracing")]
        self.trace.operated(&self.event);
    }
}

#[cfg(feature = "metrics")]
fn levels(pool: &Pool, min_limit: usize, max_limit: usize) -> metrics::Levels {
    let (limit, in_flight, _) = pool.snapshot();
    metrics::Levels {
        limit,
        min_limit,
        max_limit,
        in_flight,
        available: limit.saturating_sub(in_flight),
    }
}

/// The points where a rate limiter reports (see [`Observer`]).
#[derive(Debug)]
pub(crate) struct RateObserver {
    #[cfg(feature = "metrics")]
    metrics: metrics::RateMetrics,
}

impl RateObserver {
    /// The observer of rate limiter `name`, at rate `rate` within
    /// `[min, max]`.
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn new(name: &str, rate: u64, min: u64, max: u64) -> Self {
        Self {
            #[cfg(feature = "metrics")]
            metrics: metrics::RateMetrics::new(name, rate, min, max),
        }
    }

    /// An adjustment interval closed; `stats` reads the engine's counters
    /// (called only when something reports them).
    #[inline]
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn interval(&self, stats: impl FnOnce() -> RateStats) {
        #[cfg(feature = "metrics")]
        self.metrics.interval(&stats());
    }

    /// An admission at `now` left `tokens` whole tokens in the bucket of a
    /// limiter adjusted every `interval` ns.
    #[inline]
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn tokens(&self, now: u64, interval: u64, tokens: u64) {
        #[cfg(feature = "metrics")]
        self.metrics.tokens(now, interval, tokens);
    }
}
