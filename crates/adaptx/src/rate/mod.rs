//! # Implementation details
//!
//! The adaptive rate limiter: a token bucket whose rate a controller moves
//! once per adjustment interval, after mizu's `adaptive` middleware. The
//! public story (the algorithm, its formulas and its source) is on
//! [`RateLimiter`]; the parts:
//!
//! | file | role |
//! |---|---|
//! | `bucket.rs` | the token clock's [`Segment`](bucket::Segment) and the bucket: one atomic word, GCRA on the token clock; pure arithmetic handed the level |
//! | `schedule.rs` | the current segment (rate, capacity, where the clock stands), published to lock-free readers |
//! | `law.rs` | [`RateLaw`]: the three adjustment rules, pure, handed one interval's [`IntervalSummary`] (public, so a fleet's limiter runs the same law) |
//! | `engine.rs` | `Core`: the schedule, the limiter's own bucket, per-lane counters and permit handles, the CAS-claimed interval closer, rate changes |
//! | `limiter.rs` | [`RateLimiter`]: the engine and its own bucket |
//! | `keyed.rs`, `keyed/` | [`KeyedRateLimiter`]: the engine and a sharded table of buckets under keyed hashes, with TinyLFU admission and newcomer buckets |
//! | `permit.rs` | [`RatePermit`]: carries a request's outcome and latency to the engine |
//!
//! Nothing here runs in the background: the token clock is read when a
//! bucket is used, and the interval is closed by the first admission or
//! completion that finds it over. Every time comes from the limiter's
//! [`Clock`](crate::Clock), read once per call, and no arithmetic can
//! overflow or divide by zero on any input the builder accepts.
//!
//! An admission and a completion take no lock: the bucket is one word
//! changed by compare-and-swap, the segment is read without waiting, the
//! counters are atomics. Locks remain off that path: the `control` lock
//! of the engine serializes the interval closer and the rate changers
//! (`set_rate`, `set_bounds`, `set_law`), and a keyed bucket lives in its
//! shard's table, under the shard's lock (its word is still changed by
//! compare-and-swap); no lock is held while another is taken, nor across a
//! call into user code. The engine's lock and atomics come from
//! [`crate::sync`], so loom checks them (`loom.rs`); the key table's locks
//! are `std` ones, and a poisoned lock is used as is, since no code here
//! panics while holding one.

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
mod schedule;
mod stats;

#[cfg(all(test, adaptx_loom))]
mod loom;

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
