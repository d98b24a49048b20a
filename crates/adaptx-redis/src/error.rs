//! The error of building a fleet limiter.

use std::fmt;

use adaptx::ConfigError;

/// Why [`FleetRateLimiterBuilder::build`](crate::FleetRateLimiterBuilder::build)
/// failed.
///
/// # Examples
///
/// Both checks run before any connection is made:
///
/// ```
/// use adaptx::RateLimiter;
/// use adaptx_redis::{BuildError, FleetRateLimiter};
///
/// // Outside a tokio runtime there is nowhere to run the limiter's driver.
/// let err = FleetRateLimiter::builder("redis://127.0.0.1:6379", "api").build().unwrap_err();
/// assert!(matches!(err, BuildError::NoRuntime));
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let err = FleetRateLimiter::builder("redis://127.0.0.1:6379", "api")
///     .rate(RateLimiter::builder().min_rate(100).max_rate(10))
///     .build()
///     .unwrap_err();
/// match err {
///     BuildError::Config(e) => assert_eq!(e.field(), "max_rate"),
///     other => panic!("{other}"),
/// }
/// # });
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// An option out of its range (or a Redis URL that does not parse):
    /// names the option, the value and what is allowed.
    Config(ConfigError),
    /// `build` was called outside a Tokio runtime: the limiter's driver
    /// task needs one.
    NoRuntime,
    /// The Redis client refused its configuration.
    Redis(redis::RedisError),
}

/// Each cause is printed once: a configuration error is shown as itself
/// (this level adds nothing to it), and the Redis client's error is the
/// [`source`](std::error::Error::source) of a message that does not repeat
/// it.
impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config(e) => e.fmt(f),
            Self::NoRuntime => f.write_str("fleet rate limiter built outside a tokio runtime"),
            Self::Redis(_) => f.write_str("the redis client refused its configuration"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // Transparent: the Display above is the ConfigError's own.
            Self::Config(e) => e.source(),
            Self::Redis(e) => Some(e),
            Self::NoRuntime => None,
        }
    }
}

impl From<ConfigError> for BuildError {
    fn from(e: ConfigError) -> Self {
        Self::Config(e)
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    /// The error-chain convention: no level's `Display` repeats its
    /// `source()`.
    #[test]
    fn build_error_display_never_repeats_its_source() {
        let config = BuildError::from(ConfigError::new("max_lease", 0, "1 ..= 65536"));
        assert_eq!(
            config.to_string(),
            "invalid max_lease: 0 (allowed: 1 ..= 65536)"
        );
        assert!(config.source().is_none());

        let redis = BuildError::Redis(redis::RedisError::from((
            redis::ErrorKind::InvalidClientConfig,
            "bad url",
        )));
        let source = redis.source().expect("the client's error").to_string();
        assert_eq!(
            redis.to_string(),
            "the redis client refused its configuration"
        );
        assert!(source.contains("bad url"), "{source}");
        assert!(!redis.to_string().contains(&source));
    }
}
