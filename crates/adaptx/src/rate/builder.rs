//! The rate limiter builder: every option, validated.

use std::fmt;
use std::time::Duration;

use super::defaults::*;
use super::engine::Core;
use super::law::{RateAlgorithm, RateLaw, check_rate};
use super::{KeyedRateLimiter, RateLimiter};
use crate::clock::{AnyClock, Clock, duration_nanos};
use crate::error::ConfigError;
use crate::observe::DEFAULT_NAME;

/// Builds a [`RateLimiter`] or a [`KeyedRateLimiter`].
///
/// Rates are whole requests per second (`u64`); see
/// [`RateLimiter`]'s `# Algorithm` for why. Every option has mizu's default
/// (its `Simple()` preset); [`build`](RateLimiterBuilder::build) checks them
/// all and names the first bad one, so no configuration can lock every
/// request out: the rate is at least 1 per second and the bucket holds at
/// least one token.
///
/// # Examples
///
/// ```
/// use adaptx::{RateLimiter, RateLimiterBuilder};
/// use std::time::Duration;
///
/// let limiter = RateLimiterBuilder::conservative()
///     .adjust_interval(Duration::from_secs(5))
///     .build()?;
/// assert_eq!(limiter.current_rate(), 50);
///
/// // The initial rate is clamped into [min, max].
/// let limiter = RateLimiter::builder().initial_rate(5).min_rate(10).build()?;
/// assert_eq!(limiter.current_rate(), 10);
///
/// let err = RateLimiter::builder().min_rate(0).build().unwrap_err();
/// assert_eq!(err.field(), "min_rate");
/// assert_eq!(err.to_string(), "invalid min_rate: 0 (allowed: 1 ..= 1000000000)");
/// # Ok::<(), adaptx::ConfigError>(())
/// ```
#[derive(Clone)]
#[must_use = "a builder does nothing until built"]
pub struct RateLimiterBuilder {
    algorithm: RateAlgorithm,
    initial_rate: u64,
    min_rate: u64,
    max_rate: u64,
    target_latency: Duration,
    error_threshold: f64,
    adjust_interval: Duration,
    burst: Option<u64>,
    key_ttl: Duration,
    max_keys: usize,
    clock: Option<AnyClock>,
    name: Option<String>,
}

impl fmt::Debug for RateLimiterBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiterBuilder")
            .field("algorithm", &self.algorithm)
            .field("initial_rate", &self.initial_rate)
            .field("min_rate", &self.min_rate)
            .field("max_rate", &self.max_rate)
            .field("target_latency", &self.target_latency)
            .field("error_threshold", &self.error_threshold)
            .field("adjust_interval", &self.adjust_interval)
            .field("burst", &self.burst)
            .field("key_ttl", &self.key_ttl)
            .field("max_keys", &self.max_keys)
            .finish_non_exhaustive()
    }
}

impl Default for RateLimiterBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl RateLimiterBuilder {
    /// A builder with every option at its default: 100 requests/s within
    /// [10, 1000], 100 ms target latency, error threshold 0.1, 1 s interval.
    pub fn new() -> Self {
        Self {
            algorithm: RateAlgorithm::Mizu,
            initial_rate: DEFAULT_INITIAL_RATE,
            min_rate: DEFAULT_MIN_RATE,
            max_rate: DEFAULT_MAX_RATE,
            target_latency: DEFAULT_RATE_TARGET_LATENCY,
            error_threshold: DEFAULT_ERROR_THRESHOLD,
            adjust_interval: DEFAULT_ADJUST_INTERVAL,
            burst: None,
            key_ttl: DEFAULT_KEY_TTL,
            max_keys: DEFAULT_MAX_KEYS,
            clock: None,
            name: None,
        }
    }

    /// mizu's `Simple()` preset: 100 requests/s within [10, 1000], the
    /// defaults otherwise (the same as [`new`](RateLimiterBuilder::new)).
    pub fn simple() -> Self {
        Self::new().initial_rate(100).min_rate(10).max_rate(1000)
    }

    /// mizu's `HighThroughput()` preset: 1000 requests/s within
    /// [100, 10000], 50 ms target latency.
    pub fn high_throughput() -> Self {
        Self::new()
            .initial_rate(1000)
            .min_rate(100)
            .max_rate(10_000)
            .target_latency(Duration::from_millis(50))
    }

    /// mizu's `Conservative()` preset: 50 requests/s within [5, 200], 200 ms
    /// target latency, error threshold 0.05.
    pub fn conservative() -> Self {
        Self::new()
            .initial_rate(50)
            .min_rate(5)
            .max_rate(200)
            .target_latency(Duration::from_millis(200))
            .error_threshold(0.05)
    }

    /// The law that moves the rate. Default [`RateAlgorithm::Mizu`].
    ///
    /// With [`RateAlgorithm::Cubic`] (the AWS SDKs' adaptive retry law) the
    /// rate does not limit until the first failure: from the first
    /// interval's close it is `max_rate`, so `initial_rate` holds only for
    /// the first interval; `target_latency` and `error_threshold` are
    /// checked but apply to [`RateAlgorithm::Mizu`] only.
    pub fn algorithm(mut self, algorithm: RateAlgorithm) -> Self {
        self.algorithm = algorithm;
        self
    }

    /// The rate, in requests per second, before any adjustment; clamped into
    /// `[min_rate, max_rate]`. Default [`DEFAULT_INITIAL_RATE`] (100).
    /// Allowed: 1 ..= [`MAX_RATE_BOUND`].
    pub fn initial_rate(mut self, rate: u64) -> Self {
        self.initial_rate = rate;
        self
    }

    /// The floor of the rate, in requests per second. Default
    /// [`DEFAULT_MIN_RATE`] (10). Allowed: 1 ..= [`MAX_RATE_BOUND`].
    pub fn min_rate(mut self, rate: u64) -> Self {
        self.min_rate = rate;
        self
    }

    /// The ceiling of the rate, in requests per second. Default
    /// [`DEFAULT_MAX_RATE`] (1000). Allowed: `min_rate` ..= [`MAX_RATE_BOUND`].
    pub fn max_rate(mut self, rate: u64) -> Self {
        self.max_rate = rate;
        self
    }

    /// The mean latency above which the rate is cut by 10 %; a mean below
    /// half of it lets the rate grow. Default 100 ms. Allowed: > 0.
    pub fn target_latency(mut self, latency: Duration) -> Self {
        self.target_latency = latency;
        self
    }

    /// The error rate (failures / completions in an interval) above which the
    /// rate is cut by 20 %; an error rate below half of it lets the rate
    /// grow. Default 0.1. Allowed: `0 < value <= 1` (1 turns the error rule
    /// off; 0 would forbid growth forever).
    pub fn error_threshold(mut self, threshold: f64) -> Self {
        self.error_threshold = threshold;
        self
    }

    /// How often the rate is adjusted, from the completions of the interval
    /// just ended. Default 1 s. Allowed: 1 ns ..= [`MAX_ADJUST_INTERVAL`]
    /// (24 h).
    pub fn adjust_interval(mut self, interval: Duration) -> Self {
        self.adjust_interval = interval;
        self
    }

    /// The bucket capacity, in tokens: the largest burst admitted at once.
    /// Default: one second of the current rate, so the capacity follows the
    /// rate (mizu's behaviour). Allowed: 1 ..= [`MAX_RATE_BOUND`].
    pub fn burst(mut self, tokens: u64) -> Self {
        self.burst = Some(tokens);
        self
    }

    /// Keyed limiters only: how long a key may stay unused before its bucket
    /// may be evicted. An evicted key comes back with a full bucket, so a
    /// TTL at least the bucket's refill time (`burst / rate`, 1 s by
    /// default) makes eviction invisible. Default [`DEFAULT_KEY_TTL`] (60 s).
    /// Allowed: > 0. Checked by [`build`](RateLimiterBuilder::build) too.
    pub fn key_ttl(mut self, ttl: Duration) -> Self {
        self.key_ttl = ttl;
        self
    }

    /// Keyed limiters only: the most keys tracked with a bucket of their
    /// own; further keys share one overflow bucket (see
    /// [`KeyedRateLimiter`]). Default [`DEFAULT_MAX_KEYS`] (10 000).
    /// Allowed: ≥ 1. Checked by [`build`](RateLimiterBuilder::build) too.
    pub fn max_keys(mut self, keys: usize) -> Self {
        self.max_keys = keys;
        self
    }

    /// The limiter's name: the `limiter` label of its metrics (feature
    /// `metrics`; see [`observe`](crate::observe)). Give each limiter of a
    /// process its own. Default [`DEFAULT_NAME`](crate::observe::DEFAULT_NAME)
    /// (`"default"`). Must not be empty.
    ///
    /// # Examples
    ///
    /// ```
    /// let err = adaptx::RateLimiter::builder().name("").build().unwrap_err();
    /// assert_eq!(err.field(), "name");
    /// assert!(adaptx::RateLimiter::builder().name("api").build().is_ok());
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The time source. Default [`SystemClock`](crate::SystemClock); a
    /// [`CoarseClock`](crate::CoarseClock) makes every reading one atomic
    /// load.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(AnyClock::from(clock));
        self
    }

    /// Checks every option and builds a global rate limiter.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first option out of its range. The keyed
    /// options are checked too: a bad value is an error wherever it is.
    pub fn build(self) -> Result<RateLimiter, ConfigError> {
        let (core, _) = self.core()?;
        Ok(RateLimiter::from_core(core))
    }

    /// Checks every option and builds a keyed rate limiter: one bucket per
    /// key, one adaptive rate for all.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first option out of its range.
    pub fn build_keyed<K>(self) -> Result<KeyedRateLimiter<K>, ConfigError> {
        let (core, keys) = self.core()?;
        Ok(KeyedRateLimiter::from_core(core, keys.0, keys.1))
    }

    /// Checks every option and returns the validated settings a rate
    /// limiter is built from: its [`RateLaw`], its initial rate (clamped
    /// into the law's range), its adjustment interval and its burst.
    ///
    /// For limiters kept elsewhere that move their rate by the same law (a
    /// fleet's, on a shared store): they take their options from this
    /// builder, so every option and check of the local limiter is theirs.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first option out of its range, as
    /// [`build`](RateLimiterBuilder::build) would.
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptx::RateLimiter;
    /// use std::time::Duration;
    ///
    /// let s = RateLimiter::builder().initial_rate(5000).max_rate(2000).settings()?;
    /// assert_eq!(s.initial_rate, 2000);
    /// assert_eq!(s.law.max_rate(), 2000);
    /// assert_eq!(s.adjust_interval, Duration::from_secs(1));
    /// assert_eq!(s.burst, None);
    /// # Ok::<(), adaptx::ConfigError>(())
    /// ```
    pub fn settings(&self) -> Result<RateSettings, ConfigError> {
        let initial = check_rate("initial_rate", self.initial_rate)?;
        // Every option is checked whichever law uses it.
        let mizu = RateLaw::mizu(
            self.min_rate,
            self.max_rate,
            self.target_latency,
            self.error_threshold,
        )?;
        let law = match self.algorithm {
            RateAlgorithm::Mizu => mizu,
            RateAlgorithm::Cubic => RateLaw::cubic(self.min_rate, self.max_rate)?,
        };
        if self.adjust_interval.is_zero() || self.adjust_interval > MAX_ADJUST_INTERVAL {
            return Err(ConfigError::new(
                "adjust_interval",
                self.adjust_interval,
                "1ns ..= 24h",
            ));
        }
        let burst = self.burst.map(|b| check_rate("burst", b)).transpose()?;
        if self.key_ttl.is_zero() {
            return Err(ConfigError::new("key_ttl", self.key_ttl, "a duration > 0"));
        }
        if self.max_keys == 0 {
            return Err(ConfigError::new("max_keys", self.max_keys, "a count >= 1"));
        }
        if self.name.as_deref() == Some("") {
            return Err(ConfigError::new("name", "", "a non-empty name"));
        }
        Ok(RateSettings {
            law,
            initial_rate: initial.clamp(law.min_rate(), law.max_rate()),
            adjust_interval: self.adjust_interval,
            burst,
        })
    }

    /// The validated engine, and the keyed options (TTL in ns, max keys).
    fn core(self) -> Result<(Core, (u64, usize)), ConfigError> {
        let settings = self.settings()?;
        let clock = AnyClock::or_system(self.clock);
        let core = Core::new(
            clock,
            settings.initial_rate,
            duration_nanos(settings.adjust_interval),
            settings.law,
            settings.burst,
            self.name.as_deref().unwrap_or(DEFAULT_NAME),
        );
        Ok((core, (duration_nanos(self.key_ttl), self.max_keys)))
    }
}

/// The validated settings of a rate limiter, from
/// [`RateLimiterBuilder::settings`].
///
/// # Examples
///
/// ```
/// use adaptx::{IntervalSummary, RateLimiter};
/// use std::time::Duration;
///
/// let s = RateLimiter::builder().initial_rate(200).min_rate(20).max_rate(400).settings()?;
/// assert_eq!((s.initial_rate, s.law.min_rate(), s.law.max_rate()), (200, 20, 400));
/// // A fleet's limiter moves its rate by the same law.
/// let errors = IntervalSummary::new(100, 40, Duration::from_secs(1), true);
/// assert_eq!(s.law.next_rate(s.initial_rate, &errors), 160);
/// # Ok::<(), adaptx::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct RateSettings {
    /// The law that moves the rate once per interval.
    pub law: RateLaw,
    /// The rate before any adjustment, requests per second, within the
    /// law's `[min_rate, max_rate]`.
    pub initial_rate: u64,
    /// How often the rate is adjusted.
    pub adjust_interval: Duration,
    /// The bucket capacity in tokens, or `None` for one second of the
    /// current rate.
    pub burst: Option<u64>,
}
