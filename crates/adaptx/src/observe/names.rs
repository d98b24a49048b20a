//! The names of the metrics (the `metrics` feature).

/// The label that names the limiter: its
/// [`Builder::name`](crate::Builder::name) or
/// [`RateLimiterBuilder::name`](crate::RateLimiterBuilder::name).
pub const LABEL: &str = "limiter";

/// Gauge: the live concurrency limit.
pub const LIMITER_LIMIT: &str = "adaptx_limiter_limit";
/// Gauge: the floor of the limit (`min_limit`).
pub const LIMITER_MIN_LIMIT: &str = "adaptx_limiter_min_limit";
/// Gauge: the ceiling of the limit (`max_limit`).
pub const LIMITER_MAX_LIMIT: &str = "adaptx_limiter_max_limit";
/// Gauge: operations admitted and not finished, at the last window close or
/// rejection.
pub const LIMITER_IN_FLIGHT: &str = "adaptx_limiter_in_flight";
/// Gauge: permits free, at the last window close or rejection.
pub const LIMITER_AVAILABLE: &str = "adaptx_limiter_available";
/// Counter: operations recorded as successes (skipped samples included).
pub const LIMITER_SUCCESSES: &str = "adaptx_limiter_successes_total";
/// Counter: operations recorded as failures (skipped samples and panics
/// included).
pub const LIMITER_FAILURES: &str = "adaptx_limiter_failures_total";
/// Counter: permits released without an outcome.
pub const LIMITER_DROPPED: &str = "adaptx_limiter_dropped_total";
/// Counter: admission attempts that ended without a permit.
pub const LIMITER_REJECTED: &str = "adaptx_limiter_rejected_total";
/// Counter: windows that raised the limit.
pub const LIMITER_INCREASES: &str = "adaptx_limiter_increases_total";
/// Counter: windows that lowered the limit.
pub const LIMITER_DECREASES: &str = "adaptx_limiter_decreases_total";
/// Histogram, seconds: the latency of successful operations.
pub const LIMITER_LATENCY: &str = "adaptx_limiter_latency_seconds";

/// Gauge: the live rate, requests per second.
pub const RATE_LIMIT: &str = "adaptx_rate_limit";
/// Gauge: the floor of the rate (`min_rate`), requests per second.
pub const RATE_MIN_LIMIT: &str = "adaptx_rate_min_limit";
/// Gauge: the ceiling of the rate (`max_rate`), requests per second.
pub const RATE_MAX_LIMIT: &str = "adaptx_rate_max_limit";
/// Gauge: whole tokens left in the bucket after a recent admission
/// ([`RateLimiter`](crate::RateLimiter) only).
pub const RATE_TOKENS: &str = "adaptx_rate_tokens";
/// Counter: requests admitted.
pub const RATE_ADMITTED: &str = "adaptx_rate_admitted_total";
/// Counter: requests rejected for want of a token.
pub const RATE_LIMITED: &str = "adaptx_rate_limited_total";
/// Counter: requests recorded as successes.
pub const RATE_SUCCESSES: &str = "adaptx_rate_successes_total";
/// Counter: requests recorded as failures.
pub const RATE_FAILURES: &str = "adaptx_rate_failures_total";
/// Counter: permits dropped without an outcome.
pub const RATE_DROPPED: &str = "adaptx_rate_dropped_total";
/// Counter: adjustments that raised the rate.
pub const RATE_INCREASES: &str = "adaptx_rate_increases_total";
/// Counter: adjustments that lowered the rate.
pub const RATE_DECREASES: &str = "adaptx_rate_decreases_total";

/// Every metric a [`Limiter`](crate::Limiter) registers.
pub const LIMITER_METRICS: [&str; 12] = [
    LIMITER_LIMIT,
    LIMITER_MIN_LIMIT,
    LIMITER_MAX_LIMIT,
    LIMITER_IN_FLIGHT,
    LIMITER_AVAILABLE,
    LIMITER_SUCCESSES,
    LIMITER_FAILURES,
    LIMITER_DROPPED,
    LIMITER_REJECTED,
    LIMITER_INCREASES,
    LIMITER_DECREASES,
    LIMITER_LATENCY,
];

/// Every metric a [`RateLimiter`](crate::RateLimiter) or
/// [`KeyedRateLimiter`](crate::KeyedRateLimiter) registers.
pub const RATE_METRICS: [&str; 11] = [
    RATE_LIMIT,
    RATE_MIN_LIMIT,
    RATE_MAX_LIMIT,
    RATE_TOKENS,
    RATE_ADMITTED,
    RATE_LIMITED,
    RATE_SUCCESSES,
    RATE_FAILURES,
    RATE_DROPPED,
    RATE_INCREASES,
    RATE_DECREASES,
];
