//! The error of building a fleet limiter.

use std::fmt;

use adaptx::ConfigError;

/// Why [`FleetRateLimiterBuilder::build`](crate::FleetRateLimiterBuilder::build)
/// failed.
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

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config(e) => e.fmt(f),
            Self::NoRuntime => f.write_str("fleet rate limiter built outside a tokio runtime"),
            Self::Redis(e) => write!(f, "redis client: {e}"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Config(e) => Some(e),
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
