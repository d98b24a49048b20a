//! Named defaults and bounds of the fleet limiter's own options (the rate
//! law's come from [`adaptx::RateLimiterBuilder`]).

use std::time::Duration;

/// How long one Redis call may take before the instance falls back to its
/// local share (the deadline Envoy's rate-limit filter uses is of this
/// order). Allowed: 1 ms ..= 10 s.
pub const DEFAULT_REDIS_TIMEOUT: Duration = Duration::from_millis(25);
/// A lease is about the tokens the instance uses in this long: Redis sees
/// one round trip per lease, so at most `1 / window` per second per busy
/// instance. Allowed: 100 µs ..= 1 s.
pub const DEFAULT_LEASE_WINDOW: Duration = Duration::from_millis(10);
/// The largest lease, in tokens. Allowed: 1 ..= 1 000 000.
pub const DEFAULT_MAX_LEASE: u64 = 256;
/// The longest time between two reports of an instance's feedback (the
/// default is a quarter of the adjustment interval, at most this).
pub const DEFAULT_MAX_REPORT_PERIOD: Duration = Duration::from_millis(250);
/// The first wait before probing Redis again after a failure; it doubles
/// (with ±20 % jitter) up to [`DEFAULT_BACKOFF_MAX`].
pub const DEFAULT_BACKOFF_MIN: Duration = Duration::from_millis(100);
/// The longest wait between two probes of an unreachable Redis.
pub const DEFAULT_BACKOFF_MAX: Duration = Duration::from_secs(5);
/// The fleet size an instance assumes before it has heard from Redis: its
/// fallback share is then `initial_rate / expected_instances`. Allowed:
/// 1 ..= 100 000.
pub const DEFAULT_EXPECTED_INSTANCES: u64 = 4;
/// The shortest TTL of the limiter's keys; it is at least ten adjustment
/// intervals, so abandoned limiters vanish.
pub const MIN_KEY_TTL: Duration = Duration::from_secs(60);
