//! Adaptive concurrency limiting: a permit pool whose size a control law
//! moves once per sample window from the latency and the outcome of completed
//! work, so that it finds a backend's safe concurrency instead of making you
//! guess a number, and backs off the moment the backend shows overload.
//!
//! # Examples
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! use adaptx::{Limiter, Outcome};
//!
//! let limiter = Limiter::builder().initial_limit(2).max_limit(100).build()?;
//!
//! // Admit by hand: the permit measures the latency and records the outcome.
//! let permit = limiter.acquire().await?;
//! permit.record(Outcome::Success);
//!
//! // Or let the limiter run the operation: `Ok` is a success, `Err` and a
//! // panic are failures.
//! let n = limiter.execute(async |_ctl| Ok::<_, std::io::Error>(7)).await?;
//! assert_eq!(n, 7);
//! assert_eq!(limiter.stats().success, 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # The parts
//!
//! - [`Limiter`], built by [`Limiter::builder`] ([`Builder`]): admission
//!   ([`acquire`](Limiter::acquire), [`try_acquire`](Limiter::try_acquire),
//!   [`execute`](Limiter::execute), blocking variants), a [`Permit`] or
//!   [`OwnedPermit`] per admitted operation that records its [`Outcome`],
//!   [`Stats`], and a linearized close ([`Limiter::close_and_drain`]).
//! - Control laws: [`Algorithm`] picks a built-in one ([`Ceiling`], the
//!   default; [`Aimd`], [`Vegas`], [`Gradient`]); [`ControlLaw`] is the trait
//!   a law of your own implements, handed a [`WindowSummary`] per window.
//! - Queueing and partitions: [`QueuePolicy`] (bounded queue, timeouts,
//!   FIFO / LIFO / adaptive LIFO), [`Partitions`] and [`Class`] (shares of the
//!   limit, priorities).
//! - Adaptive rate limiting: [`RateLimiter`] and [`KeyedRateLimiter`], built
//!   by [`RateLimiterBuilder`], a token bucket whose rate a [`RateLaw`] moves
//!   once per interval from an [`IntervalSummary`].
//! - Time: every component reads a [`Clock`]; [`ManualClock`] makes tests
//!   deterministic.
//!
//! Every option is checked: a bad one is a [`ConfigError`] naming the
//! option, the value and the allowed range.
//!
//! # Feature flags
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `tokio` | yes | timed waits (`Limiter::acquire_timeout`, `Limiter::close_with_timeout`, queue timeouts woken by a timer) and `TokioClock` |
//! | `serde` | yes | `Serialize` for [`Stats`] and [`RateStats`] |
//!
//! Without `tokio` the crate is runtime-agnostic: `acquire` is a plain
//! future, and the blocking variants wait on a thread.
//!
//! The tower/axum middleware is in the `adaptx-tower` crate, a fleet-wide
//! adaptive rate on Redis in `adaptx-redis`, and a deterministic overload
//! simulator in `adaptx-sim`. The repository's README has the measured
//! numbers and the differences from the Go original.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod clock;
mod control;
mod defaults;
mod error;
mod histogram;
mod law;
mod limiter;
mod mode;
pub mod observe;
mod pool;
mod rate;
mod rng;
mod stats;
mod sync;
mod throttle;
mod window;

#[cfg(feature = "tokio")]
pub use clock::TokioClock;
pub use clock::{
    Clock, CoarseClock, MAX_COARSE_RESOLUTION, MIN_COARSE_RESOLUTION, ManualClock, SystemClock,
};
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
pub use mode::Mode;
pub use observe::LimitChange;
pub use pool::{
    Class, DEFAULT_PARTITION, DEFAULT_RESERVE, MAX_PARTITIONED_LIMIT, MAX_PARTITIONS, Partitions,
    QueueOrder, QueuePolicy, UnknownPartition,
};
pub use rate::{
    DEFAULT_ADJUST_INTERVAL, DEFAULT_ERROR_THRESHOLD, DEFAULT_INITIAL_RATE, DEFAULT_KEY_TTL,
    DEFAULT_MAX_KEYS, DEFAULT_MAX_RATE, DEFAULT_MIN_RATE, DEFAULT_RATE_TARGET_LATENCY,
    IntervalSummary, KeyedRateLimiter, MAX_ADJUST_INTERVAL, MAX_BYTES_PER_KEY, MAX_RATE_BOUND,
    RateAlgorithm, RateLaw, RateLawState, RateLimited, RateLimiter, RateLimiterBuilder, RatePermit,
    RateSettings, RateStats,
};
pub use stats::Stats;
pub use throttle::{
    DEFAULT_THROTTLE_K, DEFAULT_THROTTLE_WINDOW, Throttle, ThrottleBuilder, ThrottleStats,
    Throttled, throttle_probability,
};

/// The crate's `README.md`, whose examples run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct Readme;
