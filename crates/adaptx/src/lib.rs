#![doc = include_str!("../../../README.md")]
#![forbid(unsafe_code)]

mod clock;
mod control;
mod defaults;
mod error;
mod histogram;
mod law;
mod limiter;
pub mod observe;
mod pool;
mod rate;
mod stats;
mod sync;
mod window;

#[cfg(feature = "tokio")]
pub use clock::TokioClock;
pub use clock::{Clock, ManualClock, SystemClock};
pub use defaults::*;
pub use error::{
    AcquireError, AcquireTimeoutError, ConfigError, DrainTimeoutError, ExecuteError, PanicError,
    TryAcquireError, TryExecuteError,
};
pub use law::{
    Aimd, BASELINE_EXPIRY_WINDOWS, BASELINE_MATCH, BASELINE_PROBE_DROP, BASELINE_PROBE_HALVINGS,
    BASELINE_PROBE_INTERVAL, BASELINE_PROBE_JITTER, BASELINE_PROBE_RATIO, BASELINE_PROBE_WINDOWS,
    CEILING_DEFAULT_TOLERANCE, Ceiling, ControlLaw, GRADIENT_QUEUE_BOUND, Gradient, LawState,
    Vegas, WindowSummary,
};
pub use limiter::{
    Acquire, Algorithm, Builder, Controller, Drained, LimitChangeHook, Limiter, Outcome,
    OwnedPermit, Permit,
};
pub use observe::LimitChange;
pub use pool::{
    Class, DEFAULT_PARTITION, DEFAULT_RESERVE, MAX_PARTITIONED_LIMIT, MAX_PARTITIONS, Partitions,
    QueueOrder, QueuePolicy, UnknownPartition,
};
pub use rate::{
    DEFAULT_ADJUST_INTERVAL, DEFAULT_ERROR_THRESHOLD, DEFAULT_INITIAL_RATE, DEFAULT_KEY_TTL,
    DEFAULT_MAX_KEYS, DEFAULT_MAX_RATE, DEFAULT_MIN_RATE, DEFAULT_RATE_TARGET_LATENCY,
    IntervalSummary, KeyedRateLimiter, MAX_ADJUST_INTERVAL, MAX_RATE_BOUND, RateLaw, RateLimited,
    RateLimiter, RateLimiterBuilder, RatePermit, RateSettings, RateStats,
};
pub use stats::Stats;
