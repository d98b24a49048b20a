//! Named defaults and bounds of the adaptive rate limiter. The rates and the
//! thresholds are those of mizu's `adaptive` middleware (its `Simple()`
//! preset).

use std::time::Duration;

/// The rate, in requests per second, a rate limiter starts at.
pub const DEFAULT_INITIAL_RATE: u64 = 100;
/// The floor, in requests per second, the adaptive rate is never driven below.
pub const DEFAULT_MIN_RATE: u64 = 10;
/// The ceiling, in requests per second, the adaptive rate is never driven
/// above.
pub const DEFAULT_MAX_RATE: u64 = 1000;
/// The largest rate (requests per second) and burst (tokens) a rate limiter
/// accepts: one request per nanosecond. It keeps the bucket's fixed-point
/// token count (nano-tokens) within 64 bits.
pub const MAX_RATE_BOUND: u64 = 1_000_000_000;
/// The mean latency above which the rate limiter cuts its rate.
pub const DEFAULT_RATE_TARGET_LATENCY: Duration = Duration::from_millis(100);
/// The error rate (failures / completions) above which the rate limiter cuts
/// its rate.
pub const DEFAULT_ERROR_THRESHOLD: f64 = 0.1;
/// The interval over which completions are aggregated into one adjustment.
pub const DEFAULT_ADJUST_INTERVAL: Duration = Duration::from_secs(1);
/// The longest adjustment interval a rate limiter accepts.
pub const MAX_ADJUST_INTERVAL: Duration = Duration::from_secs(24 * 60 * 60);
/// How long a key of a keyed rate limiter may stay idle before it may be
/// evicted.
pub const DEFAULT_KEY_TTL: Duration = Duration::from_secs(60);
/// The most keys a keyed rate limiter tracks with a bucket of their own.
pub const DEFAULT_MAX_KEYS: usize = 10_000;
