//! Small error types, one per operation.

use std::borrow::Cow;
use std::fmt;
use std::ops::Bound::{self, Excluded, Included};
use std::ops::RangeBounds;

use crate::pool::Refused;

/// A configuration value is out of its allowed range.
///
/// Returned by [`Builder::build`](crate::Builder::build), by
/// [`RateLimiterBuilder::build`](crate::RateLimiterBuilder::build) and by the
/// checked constructors (the built-in laws, [`RateLaw::mizu`](crate::RateLaw::mizu),
/// [`WindowSummary::new`](crate::WindowSummary::new)). It names the field,
/// the value given and the allowed range; where the range depends on another
/// option, the range names that option and its value.
///
/// # Examples
///
/// ```
/// use adaptx::{ConfigError, Limiter};
///
/// let err = Limiter::builder().min_limit(50).max_limit(10).build().unwrap_err();
/// assert_eq!(err.field(), "max_limit");
/// assert_eq!(err.value(), "10");
/// assert_eq!(err.allowed(), "min_limit (50) ..= 2147483647");
/// assert_eq!(
///     err.to_string(),
///     "invalid max_limit: 10 (allowed: min_limit (50) ..= 2147483647)"
/// );
///
/// // A crate that builds on this one checks its own options the same way.
/// let err = ConfigError::new("shards", 0, "1 ..= 64");
/// assert_eq!(err.to_string(), "invalid shards: 0 (allowed: 1 ..= 64)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    field: &'static str,
    value: String,
    allowed: Cow<'static, str>,
}

impl ConfigError {
    /// An error for option `field`, whose value `value` is outside
    /// `allowed` (in words, e.g. `"1 ..= 1000"`). For crates that build on
    /// this one and check options of their own the same way.
    pub fn new(field: &'static str, value: impl fmt::Debug, allowed: &'static str) -> Self {
        Self {
            field,
            value: format!("{value:?}"),
            allowed: Cow::Borrowed(allowed),
        }
    }

    /// The error of an upper bound `max_field` = `max` set below its lower
    /// bound `min_field` = `min`: the allowed range names the other option
    /// and its value, `min_field (min) ..= bound`. One rule for every
    /// builder with a `[min, max]` pair, so both say the same thing.
    pub(crate) fn below_min(
        max_field: &'static str,
        max: u64,
        min_field: &'static str,
        min: u64,
        bound: u64,
    ) -> Self {
        Self::depending(max_field, max, format!("{min_field} ({min}) ..= {bound}"))
    }

    /// An error for `field` = `value` whose allowed range depends on other
    /// values, spelled out in `allowed`.
    pub(crate) fn depending(field: &'static str, value: impl fmt::Debug, allowed: String) -> Self {
        Self {
            field,
            value: format!("{value:?}"),
            allowed: Cow::Owned(allowed),
        }
    }

    /// The name of the offending option, as named on the builder.
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// The rejected value, formatted with `Debug`.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// The allowed range, in words.
    pub fn allowed(&self) -> &str {
        &self.allowed
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid {}: {} (allowed: {})",
            self.field, self.value, self.allowed
        )
    }
}

impl std::error::Error for ConfigError {}

/// Checks that `value` lies within `(low, high)` bounds; NaN never does.
fn check(
    field: &'static str,
    value: f64,
    bounds: (Bound<f64>, Bound<f64>),
    allowed: &'static str,
) -> Result<f64, ConfigError> {
    if bounds.contains(&value) {
        Ok(value)
    } else {
        Err(ConfigError::new(field, value, allowed))
    }
}

/// Checks `low < value <= high`.
pub(crate) fn open_closed(
    field: &'static str,
    value: f64,
    low: f64,
    high: f64,
    allowed: &'static str,
) -> Result<f64, ConfigError> {
    check(field, value, (Excluded(low), Included(high)), allowed)
}

/// Checks `low < value < high`.
pub(crate) fn open_open(
    field: &'static str,
    value: f64,
    low: f64,
    high: f64,
    allowed: &'static str,
) -> Result<f64, ConfigError> {
    check(field, value, (Excluded(low), Excluded(high)), allowed)
}

/// Checks `low <= value <= high`.
pub(crate) fn closed_closed(
    field: &'static str,
    value: f64,
    low: f64,
    high: f64,
    allowed: &'static str,
) -> Result<f64, ConfigError> {
    check(field, value, (Included(low), Included(high)), allowed)
}

/// [`Limiter::acquire`](crate::Limiter::acquire) failed: the limiter is
/// closed, or the wait queue refused the request (full, timed out, or shed
/// for a higher-priority one; see [`QueuePolicy`](crate::QueuePolicy)).
///
/// # Examples
///
/// ```
/// use adaptx::Limiter;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let limiter = Limiter::new();
/// limiter.close();
/// let err = limiter.acquire().await.unwrap_err();
/// assert!(err.is_closed());
/// assert_eq!(err.to_string(), "limiter is closed");
/// # });
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcquireError(Refused);

impl AcquireError {
    pub(crate) fn refused(why: Refused) -> Self {
        Self(why)
    }

    /// The limiter is closed.
    pub fn is_closed(&self) -> bool {
        self.0 == Refused::Closed
    }

    /// The wait queue was full of requests of equal or higher priority.
    pub fn is_queue_full(&self) -> bool {
        self.0 == Refused::Full
    }

    /// The request waited its queue timeout without getting a permit.
    pub fn is_timeout(&self) -> bool {
        self.0 == Refused::TimedOut
    }

    /// A higher-priority request took the request's place in a full queue.
    pub fn is_shed(&self) -> bool {
        self.0 == Refused::Shed
    }
}

impl fmt::Display for AcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            Refused::Closed => "limiter is closed",
            Refused::Full => "wait queue is full",
            Refused::TimedOut => "timed out in the wait queue",
            Refused::Shed => "shed from the wait queue for a higher-priority request",
        })
    }
}

impl std::error::Error for AcquireError {}

/// [`Limiter::try_acquire`](crate::Limiter::try_acquire) found no permit.
///
/// # Examples
///
/// ```
/// use adaptx::{Limiter, TryAcquireError};
///
/// let limiter = Limiter::builder().initial_limit(1).build()?;
/// let held = limiter.try_acquire()?;
/// match limiter.try_acquire() {
///     Err(TryAcquireError::NoCapacity) => {} // shed, or answer 503
///     Err(TryAcquireError::Closed) => unreachable!("not closed"),
///     Err(other) => panic!("a newer refusal: {other}"), // the enum may grow
///     Ok(_) => unreachable!("the only permit is held"),
/// }
/// drop(held);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TryAcquireError {
    /// The limiter is closed.
    Closed,
    /// Every permit is held, or waiters are queued ahead.
    NoCapacity,
}

impl From<crate::pool::TryFail> for TryAcquireError {
    fn from(e: crate::pool::TryFail) -> Self {
        match e {
            crate::pool::TryFail::Closed => Self::Closed,
            crate::pool::TryFail::NoCapacity => Self::NoCapacity,
        }
    }
}

impl fmt::Display for TryAcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Closed => "limiter is closed",
            Self::NoCapacity => "no permit available",
        })
    }
}

impl std::error::Error for TryAcquireError {}

/// A timed acquisition failed.
///
/// # Examples
///
/// ```
/// use adaptx::{AcquireTimeoutError, Limiter};
/// use std::time::Duration;
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap().block_on(async {
/// let limiter = Limiter::builder().initial_limit(1).build()?;
/// let _held = limiter.try_acquire()?;
/// let err = limiter.acquire_timeout(Duration::from_millis(10)).await.unwrap_err();
/// assert_eq!(err, AcquireTimeoutError::Timeout);
/// assert_eq!(err.to_string(), "timed out waiting for a permit");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AcquireTimeoutError {
    /// The limiter is closed.
    Closed,
    /// No permit came free in time.
    Timeout,
    /// The wait queue refused the request: it was full, or a higher-priority
    /// request took its place (see [`QueuePolicy`](crate::QueuePolicy)).
    Rejected,
}

impl From<AcquireError> for AcquireTimeoutError {
    fn from(e: AcquireError) -> Self {
        match e.0 {
            Refused::Closed => Self::Closed,
            Refused::TimedOut => Self::Timeout,
            Refused::Full | Refused::Shed => Self::Rejected,
        }
    }
}

impl fmt::Display for AcquireTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Closed => "limiter is closed",
            Self::Timeout => "timed out waiting for a permit",
            Self::Rejected => "rejected by the wait queue",
        })
    }
}

impl std::error::Error for AcquireTimeoutError {}

/// The drain timed out with work still in flight. The limiter stays closed.
///
/// # Examples
///
/// ```
/// use adaptx::Limiter;
/// use std::time::Duration;
///
/// let limiter = Limiter::new();
/// let _busy = limiter.try_acquire()?; // never released in time
/// let err = limiter.close_blocking(Duration::from_millis(1)).unwrap_err();
/// assert_eq!(err.in_flight(), 1);
/// assert!(limiter.is_closed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainTimeoutError {
    in_flight: usize,
}

impl DrainTimeoutError {
    pub(crate) fn new(in_flight: usize) -> Self {
        Self { in_flight }
    }

    /// Operations still in flight when the time ran out.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }
}

impl fmt::Display for DrainTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "drain timed out with {} operation(s) in flight",
            self.in_flight
        )
    }
}

impl std::error::Error for DrainTimeoutError {}

/// An operation run by the limiter panicked. The permit was released and the
/// panic counted as a failure.
///
/// # Examples
///
/// ```
/// use adaptx::{ExecuteError, Limiter};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let limiter = Limiter::builder().op_name("load_user").build()?;
/// let result = limiter
///     .execute(async |_| -> Result<(), std::io::Error> { panic!("no such row") })
///     .await;
/// let Err(ExecuteError::Panicked(p)) = result else { unreachable!() };
/// assert_eq!((p.op(), p.message()), ("load_user", "no such row"));
/// assert_eq!(limiter.stats().failures, 1); // counted, permit released
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PanicError {
    op: std::sync::Arc<str>,
    message: String,
}

impl PanicError {
    pub(crate) fn new(op: std::sync::Arc<str>, payload: Box<dyn std::any::Any + Send>) -> Self {
        let message = if let Some(s) = payload.downcast_ref::<&'static str>() {
            (*s).to_owned()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "non-string panic payload".to_owned()
        };
        Self { op, message }
    }

    /// The operation name (see [`Builder::op_name`](crate::Builder::op_name)).
    pub fn op(&self) -> &str {
        &self.op
    }

    /// The panic message, or `"non-string panic payload"`.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for PanicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "panic in {}: {}", self.op, self.message)
    }
}

impl std::error::Error for PanicError {}

/// [`Limiter::execute`](crate::Limiter::execute) failed.
///
/// `Display` describes this level only; the cause (the operation's error,
/// the panic, the queue's refusal) is [`source`](std::error::Error::source).
///
/// # Examples
///
/// ```
/// use adaptx::{ExecuteError, Limiter};
/// use std::error::Error as _;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let limiter = Limiter::new();
/// let result = limiter
///     .execute(async |_| Err::<(), _>(std::io::Error::other("backend said no")))
///     .await;
/// match result {
///     Ok(()) => unreachable!(),
///     Err(ExecuteError::Failed(e)) => assert_eq!(e.to_string(), "backend said no"),
///     Err(ExecuteError::Closed) => println!("shutting down"),
///     Err(other) => println!("{other}"), // rejected, panicked, or a future variant
/// }
///
/// let err = limiter
///     .execute(async |_| Err::<(), _>(std::io::Error::other("backend said no")))
///     .await
///     .unwrap_err();
/// assert_eq!(err.to_string(), "operation failed");
/// assert_eq!(err.source().unwrap().to_string(), "backend said no");
/// # });
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum ExecuteError<E> {
    /// The limiter was closed before the operation was admitted.
    Closed,
    /// The wait queue refused the operation (full, timed out or shed): it
    /// did not run.
    Rejected(AcquireError),
    /// The operation returned an error (counted as a failure).
    Failed(E),
    /// The operation panicked (counted as a failure).
    Panicked(PanicError),
}

impl<E> ExecuteError<E> {
    /// The operation's own error, if that is what this is.
    pub fn into_failed(self) -> Option<E> {
        match self {
            Self::Failed(e) => Some(e),
            _ => None,
        }
    }
}

/// Describes this level only: the cause (the queue's refusal, the
/// operation's error, the panic) is [`source`](std::error::Error::source),
/// so an error reporter that walks the chain prints each once.
impl<E> fmt::Display for ExecuteError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Closed => "limiter is closed",
            Self::Rejected(_) => "rejected by the wait queue",
            Self::Failed(_) => "operation failed",
            Self::Panicked(_) => "operation panicked",
        })
    }
}

impl<E: std::error::Error + 'static> std::error::Error for ExecuteError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Rejected(e) => Some(e),
            Self::Failed(e) => Some(e),
            Self::Panicked(p) => Some(p),
            Self::Closed => None,
        }
    }
}

/// [`Limiter::try_execute`](crate::Limiter::try_execute) failed.
///
/// # Examples
///
/// ```
/// use adaptx::{Limiter, TryExecuteError};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let limiter = Limiter::builder().initial_limit(1).build()?;
/// let held = limiter.try_acquire()?;
/// let result = limiter.try_execute(async |_| Ok::<_, std::io::Error>(1)).await;
/// assert!(matches!(result, Err(TryExecuteError::NoCapacity))); // never waited
/// drop(held);
/// assert_eq!(limiter.try_execute(async |_| Ok::<_, std::io::Error>(1)).await?, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum TryExecuteError<E> {
    /// The limiter is closed.
    Closed,
    /// No permit was free; the operation did not run.
    NoCapacity,
    /// The operation returned an error (counted as a failure).
    Failed(E),
    /// The operation panicked (counted as a failure).
    Panicked(PanicError),
}

impl<E> TryExecuteError<E> {
    /// The operation's own error, if that is what this is.
    pub fn into_failed(self) -> Option<E> {
        match self {
            Self::Failed(e) => Some(e),
            _ => None,
        }
    }
}

/// Describes this level only, as [`ExecuteError`] does: the operation's
/// error or the panic is [`source`](std::error::Error::source).
impl<E> fmt::Display for TryExecuteError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Closed => "limiter is closed",
            Self::NoCapacity => "no permit available",
            Self::Failed(_) => "operation failed",
            Self::Panicked(_) => "operation panicked",
        })
    }
}

impl<E: std::error::Error + 'static> std::error::Error for TryExecuteError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Failed(e) => Some(e),
            Self::Panicked(p) => Some(p),
            _ => None,
        }
    }
}
