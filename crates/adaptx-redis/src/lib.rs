//! One adaptive rate for a whole fleet: [`adaptx`]'s rate law over a budget
//! shared on Redis.
//!
//! A service runs on many instances that share one backend. A
//! [`FleetRateLimiter`] on every instance, all on the same Redis key, admits
//! at most the fleet's rate in total, and moves that rate once per interval
//! from the whole fleet's outcomes by the same [`RateLaw`](adaptx::RateLaw)
//! as a local [`RateLimiter`](adaptx::RateLimiter). Requests never wait on
//! Redis: each instance takes *leases* of tokens (one round trip per lease)
//! and reports its feedback in batches. When Redis is slow or down, each
//! instance falls back to a local bucket at its *share* of the last known
//! rate, never the fleet's whole rate, and rejoins without a burst.
//!
//! | piece | where |
//! |---|---|
//! | the facade, the lock-free lease pool | [`FleetRateLimiter`] |
//! | the Lua scripts (GCRA leases, feedback, the interval claim) | `src/lua/*.lua`, one copy each |
//! | the driver task (leases, reports, the law, fallback, rejoin) | `driver.rs` |
//! | the tower layer (feature `tower`) | [`AdaptiveRateLimitLayer`](adaptx_tower::AdaptiveRateLimitLayer) over a [`FleetRateLimiter`] |
//!
//! See the crate's README for the measured numbers.
#![forbid(unsafe_code)]

mod builder;
mod defaults;
mod driver;
mod error;
mod limiter;
mod permit;
mod script;
mod stats;
#[cfg(feature = "tower")]
mod tower;

pub use builder::FleetRateLimiterBuilder;
pub use defaults::*;
pub use error::BuildError;
pub use limiter::FleetRateLimiter;
pub use permit::FleetPermit;
pub use stats::{FleetMode, FleetStats};
