//! The reason a window moved the limit.

use std::fmt;
use std::time::Duration;

use crate::law::WindowSummary;

/// A move of a [`Limiter`](crate::Limiter)'s limit, with its reason: the law
/// that decided it and the window it judged.
///
/// Handed to the hook of
/// [`Builder::on_limit_change_with`](crate::Builder::on_limit_change_with),
/// and (with the `tracing` feature) the fields of the `limit changed` event.
/// `Display` writes one line for a log.
///
/// # Examples
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
/// use adaptx::{Algorithm, LimitChange, Limiter, ManualClock};
///
/// let changes: Arc<Mutex<Vec<LimitChange>>> = Arc::default();
/// let seen = changes.clone();
/// let clock = ManualClock::new();
/// let limiter = Limiter::builder()
///     .algorithm(Algorithm::Aimd)
///     .initial_limit(4)
///     .warmup_samples(0)
///     .clock(clock.clone())
///     .on_limit_change_with(move |c: &LimitChange| seen.lock().unwrap().push(*c))
///     .build()?;
///
/// // A failure ends the window: AIMD halves the limit.
/// let permit = limiter.try_acquire()?;
/// clock.advance(Duration::from_secs(1));
/// permit.failure();
///
/// let change = changes.lock().unwrap()[0];
/// assert_eq!((change.old, change.new, change.law), (4, 2, "aimd"));
/// assert_eq!((change.window.samples, change.window.failures), (1, 1));
/// assert!(!change.is_increase());
/// assert_eq!(change.mean_latency(), Duration::from_secs(1));
/// assert_eq!(
///     change.to_string(),
///     "limit 4 -> 2 (aimd: 1 samples, 1 fresh failures, mean latency 1s, rtt_min none)"
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct LimitChange {
    /// The limit before the window closed.
    pub old: usize,
    /// The limit from now on: what the law proposed, after jitter and the
    /// `[min_limit, max_limit]` clamp.
    pub new: usize,
    /// The name of the law that decided ([`ControlLaw::name`](crate::ControlLaw::name)).
    pub law: &'static str,
    /// The window the law judged: its samples, fresh and stale failures,
    /// peak in-flight, mean latency, RTT_min and the moving average.
    pub window: WindowSummary,
}

impl LimitChange {
    pub(crate) fn new(old: usize, new: usize, law: &'static str, window: WindowSummary) -> Self {
        Self {
            old,
            new,
            law,
            window,
        }
    }

    /// Whether the limit went up.
    pub fn is_increase(&self) -> bool {
        self.new > self.old
    }

    /// The mean latency of the window's samples (successes and failures).
    pub fn mean_latency(&self) -> Duration {
        nanos(self.window.mean_rtt_nanos)
    }

    /// The controller's RTT_min when the window closed; `None` before any
    /// window with a successful, non-zero sample.
    pub fn rtt_min(&self) -> Option<Duration> {
        self.window.rtt_floor_nanos.map(nanos)
    }
}

/// Nanoseconds as a `Duration` (`as` saturates; a negative or NaN reading,
/// which the limiter never makes, is zero).
fn nanos(ns: f64) -> Duration {
    Duration::from_nanos(ns as u64)
}

impl fmt::Display for LimitChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "limit {} -> {} ({}: {} samples, {} fresh failures, mean latency {:?}, rtt_min ",
            self.old,
            self.new,
            self.law,
            self.window.samples,
            self.window.failures,
            self.mean_latency(),
        )?;
        match self.rtt_min() {
            Some(d) => write!(f, "{d:?})"),
            None => f.write_str("none)"),
        }
    }
}
