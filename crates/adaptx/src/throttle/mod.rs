//! Client-side adaptive throttling: [`Throttle`] (the rule and its
//! builder), `window.rs` (the lock-free sliding window of counts).

mod window;

use std::fmt;
use std::time::Duration;

use crate::clock::{AnyClock, Clock, duration_nanos};
use crate::error::{ConfigError, closed_closed, open_closed};
use crate::rng::{GOLDEN_GAMMA, splitmix64, unit};
use crate::sync::{AtomicU64, Ordering};
use window::{CountWindow, SLICES};

/// The SRE book's window: requests and accepts of the last two minutes.
pub const DEFAULT_THROTTLE_WINDOW: Duration = Duration::from_secs(120);
/// The SRE book's `K`: requests let through per accepted one before the
/// client sheds.
pub const DEFAULT_THROTTLE_K: f64 = 2.0;

/// The probability of refusing a request locally, after `requests`
/// attempted and `accepts` accepted in the window:
/// `min(max_probability, max(0, (requests − k·accepts) / (requests + 1)) ^ (1 / aggression))`.
///
/// Pure, for checking a configuration by hand; [`Throttle`] applies it to
/// its window.
///
/// # Examples
///
/// The SRE book's rule (`k = 2`) and Envoy's (`k = 1 / 0.95`, capped at 0.8):
///
/// ```
/// use adaptx::throttle_probability;
///
/// let p = throttle_probability(100, 40, 2.0, 1.0, 1.0);
/// assert!((p - 0.1980).abs() < 1e-4);
/// assert_eq!(throttle_probability(100, 50, 2.0, 1.0, 1.0), 0.0);
/// let envoy = throttle_probability(100, 80, 1.0 / 0.95, 1.0, 0.8);
/// assert!((envoy - 0.1563).abs() < 1e-4);
/// ```
pub fn throttle_probability(
    requests: u64,
    accepts: u64,
    k: f64,
    aggression: f64,
    max_probability: f64,
) -> f64 {
    let n = requests as f64;
    let excess = (n - k * accepts as f64) / (n + 1.0);
    if excess.is_nan() || excess <= 0.0 {
        return 0.0;
    }
    excess.powf(1.0 / aggression).min(max_probability)
}

/// A request refused locally by a [`Throttle`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Throttled {
    probability: f64,
}

impl Throttled {
    /// The probability of refusal in force when this request was refused.
    pub fn probability(&self) -> f64 {
        self.probability
    }
}

impl fmt::Display for Throttled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "throttled locally: the backend refused too many recent requests \
             (refusing with probability {:.3})",
            self.probability
        )
    }
}

impl std::error::Error for Throttled {}

/// A snapshot of a [`Throttle`].
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct ThrottleStats {
    /// Requests counted in the window (sent or refused locally).
    pub requests: u64,
    /// Of those, accepted by the backend.
    pub accepts: u64,
    /// The probability a request would be refused now.
    pub probability: f64,
    /// Requests admitted since the throttle was built.
    pub admitted: u64,
    /// Requests refused locally since the throttle was built.
    pub throttled: u64,
}

/// Client-side adaptive throttling: a client that sheds its own requests,
/// before they leave, once the backend has been refusing many of them.
///
/// The rule is the Google SRE book's (*Site Reliability Engineering*, ch. 21
/// "Handling Overload"), generalised as Envoy's admission control filter
/// does: over a sliding window, with `requests` attempted and `accepts`
/// accepted by the backend, a new request is refused locally with
/// probability ([`throttle_probability`])
///
/// ```text
/// p = min(max_probability, max(0, (requests − k·accepts) / (requests + 1)) ^ (1 / aggression))
/// ```
///
/// With the SRE defaults (`k = 2`, aggression 1, no cap) the client keeps
/// sending while the backend accepts at least half of its requests, and
/// beyond that lets through about `k` requests per accepted one, so the
/// backend keeps seeing enough traffic to show it has recovered, while most
/// of the load it would refuse never reaches it. Requests refused locally
/// count as requests (not accepts): the longer the backend refuses, the
/// more the client sheds. [`try_admit`](Throttle::try_admit) before
/// sending, [`record`](Throttle::record) the backend's answer;
/// `adaptx-tower`'s `AdaptiveThrottleLayer` wraps a client service with it.
///
/// Lock-free and allocation-free per call: the window is a ring of 30
/// atomic slices (each `window / 30` long), the random draw a SplitMix64
/// stream on an atomic counter (seeded: runs are reproducible with
/// [`ThrottleBuilder::seed`] and a [`ManualClock`](crate::ManualClock)).
/// Cheap to share: wrap it in an `Arc`.
///
/// # Examples
///
/// ```
/// use adaptx::{ManualClock, Throttle};
///
/// let clock = ManualClock::new();
/// let throttle = Throttle::builder().clock(clock.clone()).seed(7).build()?;
/// // The backend refuses everything: after a while most requests are shed
/// // locally, but about one in (k + 1) = 3 still goes out as a probe.
/// let mut sent = 0;
/// for _ in 0..1000 {
///     if throttle.try_admit().is_ok() {
///         sent += 1;
///         throttle.record(false);
///     }
/// }
/// assert!(sent < 100, "{sent}");
/// assert!(throttle.probability() > 0.9);
/// # Ok::<(), adaptx::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct Throttle {
    window: CountWindow,
    clock: AnyClock,
    k: f64,
    aggression: f64,
    max_probability: f64,
    min_requests: u64,
    rng: AtomicU64,
    admitted: AtomicU64,
    throttled: AtomicU64,
}

impl Throttle {
    /// A builder with the SRE book's defaults.
    pub fn builder() -> ThrottleBuilder {
        ThrottleBuilder::new()
    }

    /// The probability a request would be refused now.
    pub fn probability(&self) -> f64 {
        self.probability_at(self.clock.now_nanos())
    }

    fn probability_at(&self, now: u64) -> f64 {
        let (requests, accepts) = self.window.sums(now);
        if requests < self.min_requests {
            return 0.0;
        }
        throttle_probability(
            requests,
            accepts,
            self.k,
            self.aggression,
            self.max_probability,
        )
    }

    /// Decides whether to send a request: `Ok` to send it (then
    /// [`record`](Throttle::record) the backend's answer), or [`Throttled`]
    /// (the request is counted as one the backend did not accept; do not
    /// send it).
    ///
    /// # Errors
    ///
    /// [`Throttled`] when the draw falls under the current probability.
    pub fn try_admit(&self) -> Result<(), Throttled> {
        let now = self.clock.now_nanos();
        let probability = self.probability_at(now);
        if probability > 0.0 {
            let bits = splitmix64(self.rng.fetch_add(GOLDEN_GAMMA, Ordering::Relaxed));
            if unit(bits) < probability {
                self.window.record(now, false);
                self.throttled.fetch_add(1, Ordering::Relaxed);
                return Err(Throttled { probability });
            }
        }
        self.admitted.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Counts the answer to a request [`try_admit`](Throttle::try_admit)
    /// let through: `accepted` unless the backend refused it for overload
    /// (or did not answer). An answer that says nothing about the backend's
    /// capacity is best not recorded at all.
    pub fn record(&self, accepted: bool) {
        self.window.record(self.clock.now_nanos(), accepted);
    }

    /// A snapshot of the window and the counters.
    pub fn stats(&self) -> ThrottleStats {
        let now = self.clock.now_nanos();
        let (requests, accepts) = self.window.sums(now);
        ThrottleStats {
            requests,
            accepts,
            probability: self.probability_at(now),
            admitted: self.admitted.load(Ordering::Relaxed),
            throttled: self.throttled.load(Ordering::Relaxed),
        }
    }
}

/// Builds a [`Throttle`]; every option is checked by
/// [`build`](ThrottleBuilder::build), which names the first bad one.
///
/// # Examples
///
/// Envoy's admission control defaults: a 30 s window, success-rate
/// threshold 95 % (`k = 1 / 0.95`), refusal probability capped at 80 %:
///
/// ```
/// use adaptx::Throttle;
/// use std::time::Duration;
///
/// let throttle = Throttle::builder()
///     .window(Duration::from_secs(30))
///     .k(1.0 / 0.95)
///     .max_probability(0.8)
///     .build()?;
/// assert_eq!(throttle.probability(), 0.0);
///
/// let err = Throttle::builder().k(0.5).build().unwrap_err();
/// assert_eq!(err.to_string(), "invalid k: 0.5 (allowed: 1 ..= 1000)");
/// # Ok::<(), adaptx::ConfigError>(())
/// ```
#[derive(Clone)]
#[must_use = "a builder does nothing until built"]
pub struct ThrottleBuilder {
    window: Duration,
    k: f64,
    aggression: f64,
    max_probability: f64,
    min_rps: f64,
    seed: Option<u64>,
    clock: Option<AnyClock>,
}

impl fmt::Debug for ThrottleBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThrottleBuilder")
            .field("window", &self.window)
            .field("k", &self.k)
            .field("aggression", &self.aggression)
            .field("max_probability", &self.max_probability)
            .field("min_rps", &self.min_rps)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

impl Default for ThrottleBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl ThrottleBuilder {
    /// The SRE book's rule: a two-minute window, `k = 2`, aggression 1, no
    /// cap on the probability, no minimum traffic.
    pub fn new() -> Self {
        Self {
            window: DEFAULT_THROTTLE_WINDOW,
            k: DEFAULT_THROTTLE_K,
            aggression: 1.0,
            max_probability: 1.0,
            min_rps: 0.0,
            seed: None,
            clock: None,
        }
    }

    /// How far back requests and accepts are counted (in 30 slices).
    /// Default [`DEFAULT_THROTTLE_WINDOW`] (2 min). Allowed: 30 ms ..= 1 h.
    pub fn window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// Requests let through per accepted one before shedding: the SRE
    /// book's `K` (Envoy's `1 / sr_threshold`). Lower is more aggressive.
    /// Default [`DEFAULT_THROTTLE_K`] (2). Allowed: 1 ..= 1000.
    pub fn k(mut self, k: f64) -> Self {
        self.k = k;
        self
    }

    /// Envoy's aggression: the probability is raised to `1 / aggression`,
    /// so values above 1 shed more at a small excess. Default 1 (the SRE
    /// rule). Allowed: 1 ..= 100.
    pub fn aggression(mut self, aggression: f64) -> Self {
        self.aggression = aggression;
        self
    }

    /// The highest probability of refusal (Envoy's default is 0.8, so some
    /// traffic always probes). Default 1 (no cap). Allowed: 0 < p ≤ 1.
    pub fn max_probability(mut self, p: f64) -> Self {
        self.max_probability = p;
        self
    }

    /// No refusal while the window's average request rate is below this
    /// (Envoy's `rps_threshold`): a trickle of traffic is not enough
    /// evidence. Default 0. Allowed: 0 ..= 1e9 per second.
    pub fn min_rps(mut self, rps: f64) -> Self {
        self.min_rps = rps;
        self
    }

    /// The seed of the random draws (default: random), for reproducible
    /// runs.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// The clock the window runs on (default: [`SystemClock`](crate::SystemClock)).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(AnyClock::from(clock));
        self
    }

    /// Checks every option and builds the throttle.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first option out of its range.
    pub fn build(self) -> Result<Throttle, ConfigError> {
        if self.window < Duration::from_millis(30) || self.window > Duration::from_secs(3600) {
            return Err(ConfigError::new("window", self.window, "30ms ..= 1h"));
        }
        let k = closed_closed("k", self.k, 1.0, 1000.0, "1 ..= 1000")?;
        let aggression = closed_closed("aggression", self.aggression, 1.0, 100.0, "1 ..= 100")?;
        let max_probability = open_closed(
            "max_probability",
            self.max_probability,
            0.0,
            1.0,
            "0 < value <= 1",
        )?;
        let min_rps = closed_closed("min_rps", self.min_rps, 0.0, 1e9, "0 ..= 1e9")?;
        let window_nanos = duration_nanos(self.window);
        let clock = AnyClock::or_system(self.clock);
        Ok(Throttle {
            window: CountWindow::new(window_nanos / SLICES),
            clock,
            k,
            aggression,
            max_probability,
            min_requests: (min_rps * self.window.as_secs_f64()).ceil() as u64,
            rng: AtomicU64::new(self.seed.unwrap_or_else(|| fastrand::u64(..))),
            admitted: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
        })
    }
}
