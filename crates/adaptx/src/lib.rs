#![doc = include_str!("../../../README.md")]
#![forbid(unsafe_code)]

mod clock;
mod control;
mod defaults;
mod error;
mod histogram;
mod law;
mod limiter;
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
    Aimd, CEILING_DEFAULT_TOLERANCE, Ceiling, ControlLaw, GRADIENT_QUEUE_BOUND, Gradient, Vegas,
    WindowSummary,
};
pub use limiter::{
    Acquire, Algorithm, Builder, Controller, Drained, LimitChangeHook, Limiter, Outcome,
    OwnedPermit, Permit,
};
pub use pool::{
    Class, DEFAULT_PARTITION, DEFAULT_RESERVE, MAX_PARTITIONED_LIMIT, MAX_PARTITIONS, Partitions,
    QueueOrder, QueuePolicy, UnknownPartition,
};
pub use rate::{
    DEFAULT_ADJUST_INTERVAL, DEFAULT_ERROR_THRESHOLD, DEFAULT_INITIAL_RATE, DEFAULT_KEY_TTL,
    DEFAULT_MAX_KEYS, DEFAULT_MAX_RATE, DEFAULT_MIN_RATE, DEFAULT_RATE_TARGET_LATENCY,
    KeyedRateLimiter, MAX_ADJUST_INTERVAL, MAX_RATE_BOUND, RateLimited, RateLimiter,
    RateLimiterBuilder, RatePermit, RateStats,
};
pub use stats::Stats;
