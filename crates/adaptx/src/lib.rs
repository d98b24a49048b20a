#![doc = include_str!("../../../README.md")]
#![forbid(unsafe_code)]

mod clock;
mod defaults;
mod error;
mod histogram;
mod law;
mod limiter;
mod pool;
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
pub use law::{Aimd, ControlLaw, Gradient, Vegas, WindowSummary};
pub use limiter::{
    Acquire, Algorithm, Builder, Controller, Drained, LimitChangeHook, Limiter, Outcome,
    OwnedPermit, Permit,
};
pub use stats::Stats;
