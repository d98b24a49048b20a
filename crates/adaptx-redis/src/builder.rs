//! The fleet limiter's builder: every option, validated.

use std::time::Duration;

use adaptx::{ConfigError, RateLimiterBuilder, RateSettings};

use crate::defaults::*;
use crate::{BuildError, FleetRateLimiter};

/// Builds a [`FleetRateLimiter`].
///
/// The rate law and its options (initial, min and max rate, target
/// latency, error threshold, adjustment interval, burst) are a local
/// limiter's: pass a [`RateLimiterBuilder`] to
/// [`rate`](FleetRateLimiterBuilder::rate), and the fleet moves by the same
/// law with the same checks. The options below are the fleet's own;
/// [`build`](FleetRateLimiterBuilder::build) checks them all and names the
/// first bad one.
///
/// # Examples
///
/// ```
/// use adaptx::RateLimiter;
/// use adaptx_redis::FleetRateLimiter;
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let err = FleetRateLimiter::builder("redis://127.0.0.1:6379", "api")
///     .redis_timeout(Duration::ZERO)
///     .build()
///     .unwrap_err();
/// assert_eq!(err.to_string(), "invalid redis_timeout: 0ns (allowed: 1ms ..= 10s)");
///
/// let err = FleetRateLimiter::builder("redis://127.0.0.1:6379", "api")
///     .rate(RateLimiter::builder().min_rate(0))
///     .build()
///     .unwrap_err();
/// assert_eq!(err.to_string(), "invalid min_rate: 0 (allowed: 1 ..= 1000000000)");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until built"]
pub struct FleetRateLimiterBuilder {
    url: String,
    name: String,
    rate: RateLimiterBuilder,
    instance_id: Option<String>,
    redis_timeout: Duration,
    lease_window: Duration,
    max_lease: u64,
    report_period: Option<Duration>,
    backoff_min: Duration,
    backoff_max: Duration,
    expected_instances: u64,
    seed: Option<u64>,
}

/// The validated options.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) url: String,
    pub(crate) name: String,
    pub(crate) settings: RateSettings,
    /// The local limiter's options, for the fallback bucket.
    pub(crate) rate: RateLimiterBuilder,
    pub(crate) instance_id: String,
    pub(crate) redis_timeout: Duration,
    pub(crate) lease_window: Duration,
    pub(crate) max_lease: u64,
    pub(crate) report_period: Duration,
    pub(crate) backoff_min: Duration,
    pub(crate) backoff_max: Duration,
    pub(crate) expected_instances: u64,
    pub(crate) key_ttl: Duration,
    /// Members seen within this long count as live (three intervals).
    pub(crate) live_window: Duration,
    pub(crate) seed: u64,
}

fn within(
    field: &'static str,
    value: Duration,
    low: Duration,
    high: Duration,
    allowed: &'static str,
) -> Result<Duration, ConfigError> {
    if (low..=high).contains(&value) {
        Ok(value)
    } else {
        Err(ConfigError::new(field, value, allowed))
    }
}

impl FleetRateLimiterBuilder {
    pub(crate) fn new(url: &str, name: &str) -> Self {
        Self {
            url: url.to_owned(),
            name: name.to_owned(),
            rate: RateLimiterBuilder::new(),
            instance_id: None,
            redis_timeout: DEFAULT_REDIS_TIMEOUT,
            lease_window: DEFAULT_LEASE_WINDOW,
            max_lease: DEFAULT_MAX_LEASE,
            report_period: None,
            backoff_min: DEFAULT_BACKOFF_MIN,
            backoff_max: DEFAULT_BACKOFF_MAX,
            expected_instances: DEFAULT_EXPECTED_INSTANCES,
            seed: None,
        }
    }

    /// The rate law and its options, as for a local
    /// [`RateLimiter`](adaptx::RateLimiter): the initial rate seeds the
    /// fleet's rate the first time its key is created. Default
    /// [`RateLimiterBuilder::new`]. Its clock and keyed options are not
    /// used by the fleet (Redis's clock rules the budget), except by the
    /// local fallback bucket.
    pub fn rate(mut self, rate: RateLimiterBuilder) -> Self {
        self.rate = rate;
        self
    }

    /// This instance's name in the fleet's member set. Default: the
    /// process id and a random suffix. Allowed: 1 ..= 200 bytes.
    pub fn instance_id(mut self, id: impl Into<String>) -> Self {
        self.instance_id = Some(id.into());
        self
    }

    /// How long one Redis call may take; a slower or failed call sends the
    /// instance to its local share. Default [`DEFAULT_REDIS_TIMEOUT`]
    /// (25 ms). Allowed: 1 ms ..= 10 s.
    pub fn redis_timeout(mut self, timeout: Duration) -> Self {
        self.redis_timeout = timeout;
        self
    }

    /// The lease is sized to the tokens this instance takes in about this
    /// long. Default [`DEFAULT_LEASE_WINDOW`] (10 ms). Allowed:
    /// 100 µs ..= 1 s.
    pub fn lease_window(mut self, window: Duration) -> Self {
        self.lease_window = window;
        self
    }

    /// The largest lease, in tokens; 1 makes one round trip per request.
    /// Default [`DEFAULT_MAX_LEASE`] (256). Allowed: 1 ..= 1 000 000.
    pub fn max_lease(mut self, tokens: u64) -> Self {
        self.max_lease = tokens;
        self
    }

    /// How often the instance reports its feedback (and heartbeat). Default:
    /// a quarter of the adjustment interval, at most 250 ms and at least
    /// 1 ms. Allowed: 1 ms ..= the adjustment interval.
    pub fn report_period(mut self, period: Duration) -> Self {
        self.report_period = Some(period);
        self
    }

    /// The waits between probes of an unreachable Redis: from `min`,
    /// doubling (±20 % jitter) up to `max`. Default 100 ms ..= 5 s.
    /// Allowed: 1 ms ≤ `min` ≤ `max` ≤ 10 min.
    pub fn reconnect_backoff(mut self, min: Duration, max: Duration) -> Self {
        self.backoff_min = min;
        self.backoff_max = max;
        self
    }

    /// The fleet size assumed before the instance has heard from Redis:
    /// its fallback share is then `initial_rate / expected_instances`.
    /// Default [`DEFAULT_EXPECTED_INSTANCES`] (4). Allowed: 1 ..= 100 000.
    pub fn expected_instances(mut self, n: u64) -> Self {
        self.expected_instances = n;
        self
    }

    /// The seed of the backoff jitter (default: random), for reproducible
    /// runs.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// The checked options.
    pub(crate) fn config(self) -> Result<Config, ConfigError> {
        let settings = self.rate.settings()?;
        // The fleet's claimant changes from one interval to the next, so a
        // law that remembers would remember only the intervals one instance
        // happened to claim.
        if !matches!(settings.law, adaptx::RateLaw::Mizu { .. }) {
            return Err(ConfigError::new(
                "algorithm",
                settings.law,
                "RateAlgorithm::Mizu (a fleet runs laws without memory)",
            ));
        }
        if self.name.is_empty() || self.name.len() > 200 {
            return Err(ConfigError::new("name", &self.name, "1 ..= 200 bytes"));
        }
        let instance_id = match self.instance_id {
            Some(id) if id.is_empty() || id.len() > 200 => {
                return Err(ConfigError::new("instance_id", id, "1 ..= 200 bytes"));
            }
            Some(id) => id,
            None => format!("{}-{:016x}", std::process::id(), fastrand::u64(..)),
        };
        let ms = Duration::from_millis;
        let redis_timeout = within(
            "redis_timeout",
            self.redis_timeout,
            ms(1),
            Duration::from_secs(10),
            "1ms ..= 10s",
        )?;
        let lease_window = within(
            "lease_window",
            self.lease_window,
            Duration::from_micros(100),
            Duration::from_secs(1),
            "100µs ..= 1s",
        )?;
        if !(1..=1_000_000).contains(&self.max_lease) {
            return Err(ConfigError::new(
                "max_lease",
                self.max_lease,
                "1 ..= 1000000",
            ));
        }
        let interval = settings.adjust_interval;
        let report_period = match self.report_period {
            Some(p) => within(
                "report_period",
                p,
                ms(1),
                interval.max(ms(1)),
                "1ms ..= adjust_interval",
            )?,
            None => (interval / 4).clamp(ms(1), DEFAULT_MAX_REPORT_PERIOD),
        };
        within(
            "reconnect_backoff.min",
            self.backoff_min,
            ms(1),
            Duration::from_secs(600),
            "1ms ..= 10min",
        )?;
        within(
            "reconnect_backoff.max",
            self.backoff_max,
            self.backoff_min,
            Duration::from_secs(600),
            "min ..= 10min",
        )?;
        if !(1..=100_000).contains(&self.expected_instances) {
            return Err(ConfigError::new(
                "expected_instances",
                self.expected_instances,
                "1 ..= 100000",
            ));
        }
        if redis::Client::open(self.url.as_str()).is_err() {
            return Err(ConfigError::new(
                "redis_url",
                &self.url,
                "a redis:// or unix:// URL",
            ));
        }
        Ok(Config {
            url: self.url,
            name: self.name,
            settings,
            rate: self.rate,
            instance_id,
            redis_timeout,
            lease_window,
            max_lease: self.max_lease,
            report_period,
            backoff_min: self.backoff_min,
            backoff_max: self.backoff_max,
            expected_instances: self.expected_instances,
            key_ttl: (interval * 10).max(MIN_KEY_TTL),
            live_window: (interval * 3).max(report_period * 3),
            seed: self.seed.unwrap_or_else(|| fastrand::u64(..)),
        })
    }

    /// Checks every option, and starts the limiter: its driver task is
    /// spawned on the current Tokio runtime, and connects to Redis in the
    /// background (an unreachable Redis at start is a fallback, not an
    /// error).
    ///
    /// # Errors
    ///
    /// [`BuildError::Config`] naming the first option out of its range;
    /// [`BuildError::NoRuntime`] outside a Tokio runtime.
    pub fn build(self) -> Result<FleetRateLimiter, BuildError> {
        let config = self.config()?;
        FleetRateLimiter::start(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use adaptx::{RateAlgorithm, RateLimiter};

    /// A law that remembers (CUBIC) would remember only the intervals one
    /// instance claimed: refused, naming the option.
    #[test]
    fn fleet_refuses_a_rate_law_with_memory() {
        let built = FleetRateLimiter::builder("redis://127.0.0.1:1", "cubic")
            .rate(RateLimiter::builder().algorithm(RateAlgorithm::Cubic))
            .build();
        match built {
            Err(BuildError::Config(e)) => assert_eq!(e.field(), "algorithm", "{e}"),
            other => panic!("expected a config error, got {other:?}"),
        }
    }
}
