#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod builder;
mod defaults;
mod driver;
mod error;
mod limiter;
mod permit;
mod pool;
mod script;
mod stats;
mod sync;
#[cfg(feature = "tower")]
mod tower;

pub use builder::FleetRateLimiterBuilder;
pub use defaults::*;
pub use error::BuildError;
pub use limiter::FleetRateLimiter;
pub use permit::FleetPermit;
pub use stats::{FleetMode, FleetStats};
