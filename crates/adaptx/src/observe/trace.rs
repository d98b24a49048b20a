//! The `tracing` feature: an event on every limit change, and one warning
//! per episode of a limit that sits at `min_limit`.

use std::sync::atomic::{AtomicU64, Ordering};

use super::LimitChange;

/// Windows in a row at `min_limit` after which the `tracing` feature logs
/// one warning (target `adaptx`, message `limit pinned at min_limit`). It is
/// logged once per episode: the next one needs the limit to leave
/// `min_limit` first, which is logged too (`limit left min_limit`, at
/// `INFO`). A limiter whose `min_limit` equals its `max_limit` never warns.
pub const MIN_LIMIT_WARN_WINDOWS: u64 = 10;

/// The target of every event.
const TARGET: &str = "adaptx";

/// What a window close changed about the episode at `min_limit`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Episode {
    /// Nothing to log.
    #[default]
    Quiet,
    /// The limit has sat at `min_limit` for this many windows: warn.
    Pinned(u64),
    /// The limit left `min_limit` after this many windows there, of an
    /// episode that was warned about.
    Released(u64),
}

/// An operator's change, as logged.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Operated {
    pub(crate) what: super::Operated,
    pub(crate) limit: usize,
    pub(crate) min_limit: usize,
    pub(crate) max_limit: usize,
    pub(crate) forced: Option<usize>,
}

/// The tracing state of one limiter.
#[derive(Debug)]
pub(crate) struct LimiterTrace {
    name: Box<str>,
    /// Windows in a row that closed at `min_limit`. Written only under the
    /// controller mutex.
    at_min: AtomicU64,
}

impl LimiterTrace {
    pub(crate) fn new(name: &str) -> Self {
        Self {
            name: name.into(),
            at_min: AtomicU64::new(0),
        }
    }

    /// Counts a window that closed with `limit` in `[min, max]`. Under the
    /// controller mutex.
    pub(crate) fn window(&self, limit: usize, min: usize, max: usize) -> Episode {
        if limit == min && min < max {
            let n = self.at_min.load(Ordering::Relaxed).saturating_add(1);
            self.at_min.store(n, Ordering::Relaxed);
            if n == MIN_LIMIT_WARN_WINDOWS {
                return Episode::Pinned(n);
            }
            return Episode::Quiet;
        }
        let n = self.at_min.swap(0, Ordering::Relaxed);
        if n >= MIN_LIMIT_WARN_WINDOWS {
            Episode::Released(n)
        } else {
            Episode::Quiet
        }
    }

    /// Forgets the episode in progress. Under the controller mutex.
    pub(crate) fn reset(&self) {
        self.at_min.store(0, Ordering::Relaxed);
    }

    /// The `limit changed` event.
    pub(crate) fn changed(&self, c: &LimitChange) {
        let w = &c.window;
        tracing::debug!(
            target: TARGET,
            limiter = &*self.name,
            law = c.law,
            old = c.old,
            new = c.new,
            samples = w.samples,
            failures = w.failures,
            stale_failures = w.stale_failures,
            peak_in_flight = w.peak_in_flight,
            mean_latency_ms = w.mean_rtt_nanos / 1e6,
            rtt_min_ms = w.rtt_floor_nanos.map(|ns| ns / 1e6),
            "limit changed"
        );
    }

    /// The event of an operator's change.
    pub(crate) fn operated(&self, o: &Operated) {
        let message = match o.what {
            super::Operated::Reconfigured => "limiter reconfigured",
            super::Operated::Forced => "limit forced",
            super::Operated::Released => "forced limit released",
        };
        tracing::info!(
            target: TARGET,
            limiter = &*self.name,
            limit = o.limit,
            min_limit = o.min_limit,
            max_limit = o.max_limit,
            forced = o.forced,
            "{message}"
        );
    }

    /// The episode's warning or its end.
    pub(crate) fn episode(&self, e: Episode, min_limit: usize) {
        match e {
            Episode::Quiet => {}
            Episode::Pinned(windows) => tracing::warn!(
                target: TARGET,
                limiter = &*self.name,
                min_limit,
                windows,
                "limit pinned at min_limit"
            ),
            Episode::Released(windows) => tracing::info!(
                target: TARGET,
                limiter = &*self.name,
                min_limit,
                windows,
                "limit left min_limit"
            ),
        }
    }
}
