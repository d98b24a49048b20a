//! # Implementation details
//!
//! The adaptive rate limiter: a token bucket whose rate a controller moves
//! once per adjustment interval, after mizu's `adaptive` middleware. The
//! public story (the algorithm, its formulas and its source) is on
//! [`RateLimiter`]; the parts:
//!
//! | file | role |
//! |---|---|
//! | `bucket.rs` | the token bucket, in fixed-point nano-tokens: pure, handed the time and the rate |
//! | `law.rs` | [`RateLaw`]: the three adjustment rules, pure, handed one interval's [`IntervalSummary`] (public, so a fleet's limiter runs the same law) |
//! | `engine.rs` | `Core`: the atomic rate, cumulative counters, the CAS-claimed interval closer |
//! | `limiter.rs` | [`RateLimiter`]: the engine and one bucket behind a mutex |
//! | `keyed.rs`, `keyed/` | [`KeyedRateLimiter`]: the engine and a sharded table of buckets under keyed hashes, with TinyLFU admission and newcomer buckets |
//! | `permit.rs` | [`RatePermit`]: carries a request's outcome and latency to the engine |
//!
//! Nothing here runs in the background: a bucket is refilled when it is
//! used, and the interval is closed by the first admission or completion
//! that finds it over. Every time comes from the limiter's
//! [`Clock`](crate::Clock), read once per call, and no arithmetic can
//! overflow or divide by zero on any input the builder accepts.
//!
//! Bucket mutexes are held only for a few integer operations and never
//! across a call into user code, and no lock is held while another is
//! taken (a keyed bucket lives inside its shard's map, under the shard's
//! lock).
//! The locks are `std` ones (this module is not loom-checked); a poisoned
//! lock is used as is, since no code here panics while holding one.

mod bucket;
mod builder;
mod cubic;
mod defaults;
mod engine;
mod error;
mod keyed;
mod law;
mod limiter;
mod permit;
mod stats;

pub use builder::{RateLimiterBuilder, RateSettings};
pub use defaults::*;
pub use error::RateLimited;
pub use keyed::{KeyedRateLimiter, MAX_BYTES_PER_KEY};
pub use law::{IntervalSummary, RateAlgorithm, RateLaw, RateLawState};
pub use limiter::RateLimiter;
pub use permit::RatePermit;
pub use stats::RateStats;

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, ignoring poisoning (see the module docs).
#[inline]
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
