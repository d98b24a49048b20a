//! Running an operation under a permit, with panic safety.

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use super::{Limiter, Outcome, Permit};
use crate::error::{ExecuteError, PanicError, TryAcquireError, TryExecuteError};

/// What an operation run by [`Limiter::execute`] sees of the limiter.
///
/// The limit and in-flight count are those of the instant of admission, read
/// in the same atomic step that admitted the operation. Valid only during its
/// operation (it is lent, not given).
///
/// # Examples
///
/// ```
/// use adaptx::Limiter;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let limiter = Limiter::builder().initial_limit(4).build()?;
/// let answer = limiter
///     .execute(async |ctl| {
///         // As seen at admission, before this operation took its slot.
///         assert_eq!((ctl.limit(), ctl.in_flight()), (4, 0));
///         if ctl.in_flight() * 2 >= ctl.limit() {
///             ctl.skip_sample(); // a degraded answer says nothing about latency
///             return Ok::<_, std::io::Error>("cached");
///         }
///         Ok("fresh")
///     })
///     .await?;
/// assert_eq!(answer, "fresh");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct Controller {
    limit: usize,
    in_flight: usize,
    algorithm: &'static str,
    skip: AtomicBool,
}

impl Controller {
    /// The live limit when the operation was admitted.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Operations in flight when this one was admitted, not counting it.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// The control law's name.
    pub fn algorithm(&self) -> &'static str {
        self.algorithm
    }

    /// Keeps this operation's latency out of the feedback and the latency
    /// statistics; its outcome still counts in the success/failure totals.
    /// Idempotent.
    pub fn skip_sample(&self) {
        self.skip.store(true, Ordering::Relaxed);
    }

    /// Whether [`skip_sample`](Controller::skip_sample) was called.
    pub fn is_sample_skipped(&self) -> bool {
        self.skip.load(Ordering::Relaxed)
    }
}

pin_project! {
    /// Polls a future inside `catch_unwind`.
    struct CatchUnwind<F> {
        #[pin]
        inner: F,
    }
}

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Box<dyn Any + Send>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.project().inner;
        match catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Err(payload) => Poll::Ready(Err(payload)),
        }
    }
}

/// How a guarded run ended.
enum Ran<T, E> {
    Done(Result<T, E>),
    Panicked(Box<dyn Any + Send>),
}

/// Runs `f` under `permit`, catching panics, and records the outcome: `Ok` is
/// a success, `Err` and panics are failures. The latency is measured from
/// admission unless the operation skipped its sample.
async fn run<F, T, E>(permit: Permit<'_>, f: F) -> Ran<T, E>
where
    F: AsyncFnOnce(&Controller) -> Result<T, E>,
{
    let ctl = Controller {
        limit: permit.limit_at_admission(),
        in_flight: permit.in_flight_at_admission(),
        algorithm: permit.holder_algorithm(),
        skip: AtomicBool::new(false),
    };
    let ran = match catch_unwind(AssertUnwindSafe(|| f(&ctl))) {
        Ok(fut) => match (CatchUnwind { inner: fut }).await {
            Ok(r) => Ran::Done(r),
            Err(p) => Ran::Panicked(p),
        },
        Err(p) => Ran::Panicked(p),
    };
    let outcome = match &ran {
        Ran::Done(Ok(_)) => Outcome::Success,
        _ => Outcome::Failure,
    };
    if ctl.is_sample_skipped() {
        permit.record_skipped(outcome);
    } else {
        permit.record(outcome);
    }
    ran
}

impl Limiter {
    /// Waits for a permit, runs `f`, and records its outcome.
    ///
    /// `f` receives a [`Controller`] with the admission snapshot and a way to
    /// skip its latency sample. `Ok` counts as a success and `Err` as a
    /// failure, with the latency from admission to the end of `f`. A panic in
    /// `f` is caught: the permit is released, the panic counts as a failure,
    /// and the caller gets [`ExecuteError::Panicked`] with the operation name
    /// (the builder's [`op_name`](crate::Builder::op_name), by default
    /// `"adaptx::execute"`) and the panic message.
    ///
    /// # Errors
    ///
    /// [`ExecuteError::Closed`] if the limiter is closed before admission,
    /// [`ExecuteError::Rejected`] if its wait queue refuses the operation,
    /// [`ExecuteError::Failed`] with `f`'s error, [`ExecuteError::Panicked`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future while it waits is the same as dropping
    /// [`acquire`](Limiter::acquire); dropping it while `f` runs drops `f`'s
    /// future and releases the permit as *dropped* (no outcome recorded).
    ///
    /// # Examples
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let limiter = adaptx::Limiter::new();
    /// let v: Result<u32, adaptx::ExecuteError<std::io::Error>> = limiter
    ///     .execute(async |ctl| {
    ///         if ctl.in_flight() > ctl.limit() / 2 {
    ///             return Ok(1); // cheaper path near saturation
    ///         }
    ///         Ok(2)
    ///     })
    ///     .await;
    /// assert_eq!(v.unwrap(), 2);
    /// assert_eq!(limiter.stats().success, 1);
    /// # });
    /// ```
    pub async fn execute<F, T, E>(&self, f: F) -> Result<T, ExecuteError<E>>
    where
        F: AsyncFnOnce(&Controller) -> Result<T, E>,
    {
        let permit = self.acquire().await.map_err(|e| {
            if e.is_closed() {
                ExecuteError::Closed
            } else {
                ExecuteError::Rejected(e)
            }
        })?;
        match run(permit, f).await {
            Ran::Done(r) => r.map_err(ExecuteError::Failed),
            Ran::Panicked(p) => Err(ExecuteError::Panicked(PanicError::new(
                self.inner().execute_op.clone(),
                p,
            ))),
        }
    }

    /// Runs `f` only if a permit is free now; otherwise returns at once.
    ///
    /// As [`execute`](Limiter::execute) in every other respect; the panic
    /// operation name defaults to `"adaptx::try_execute"`.
    ///
    /// # Errors
    ///
    /// [`TryExecuteError::NoCapacity`] when no permit is free,
    /// [`TryExecuteError::Closed`] after close (both count as rejected),
    /// [`TryExecuteError::Failed`], [`TryExecuteError::Panicked`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future while `f` runs releases the permit as *dropped*.
    pub async fn try_execute<F, T, E>(&self, f: F) -> Result<T, TryExecuteError<E>>
    where
        F: AsyncFnOnce(&Controller) -> Result<T, E>,
    {
        let permit = self.try_acquire().map_err(|e| match e {
            TryAcquireError::Closed => TryExecuteError::Closed,
            TryAcquireError::NoCapacity => TryExecuteError::NoCapacity,
        })?;
        match run(permit, f).await {
            Ran::Done(r) => r.map_err(TryExecuteError::Failed),
            Ran::Panicked(p) => Err(TryExecuteError::Panicked(PanicError::new(
                self.inner().try_execute_op.clone(),
                p,
            ))),
        }
    }
}
