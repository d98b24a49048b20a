//! RAII permits.

use std::fmt;
use std::ops::Deref;
use std::time::Duration;

use super::{Ending, Inner};
use crate::clock;
use crate::pool::Admission;
use crate::sync::Arc;

/// How an admitted operation went, as far as capacity is concerned.
///
/// Report [`Failure`](Outcome::Failure) for signs of overload (timeouts,
/// 503s, connection resets); errors that say nothing about the backend's
/// capacity (a 404, a validation error) are better reported as
/// [`Success`](Outcome::Success) or recorded without a sample.
///
/// # Examples
///
/// ```
/// use adaptx::{Limiter, Outcome};
///
/// let limiter = Limiter::new();
/// let status = 503;
/// limiter.try_acquire()?.record(Outcome::from_success(status != 503));
/// assert_eq!(limiter.stats().failures, 1);
/// # Ok::<(), adaptx::TryAcquireError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Outcome {
    /// The operation succeeded.
    Success,
    /// The operation failed in a way that signals overload.
    Failure,
}

impl Outcome {
    /// `Success` if `ok`, else `Failure`.
    pub fn from_success(ok: bool) -> Self {
        if ok { Self::Success } else { Self::Failure }
    }

    /// Whether this is [`Outcome::Success`].
    pub fn is_success(self) -> bool {
        matches!(self, Self::Success)
    }
}

/// A borrowed or shared handle to the limiter's state.
pub(crate) enum Holder<'a> {
    Borrowed(&'a Inner),
    Owned(Arc<Inner>),
    /// An owned permit's handle after the permit's drop gave it to the
    /// thread's spare slot; nothing reads it again.
    Spent,
}

impl Deref for Holder<'_> {
    type Target = Inner;

    #[inline]
    fn deref(&self) -> &Inner {
        match self {
            Holder::Borrowed(i) => i,
            Holder::Owned(i) => i,
            Holder::Spent => unreachable!("a permit's limiter is read after the permit's drop"),
        }
    }
}

/// An admitted operation's slot in the limiter.
///
/// Record how the operation went by consuming the permit —
/// [`success`](Permit::success), [`failure`](Permit::failure),
/// [`record`](Permit::record) (latency measured from admission),
/// [`record_with_latency`](Permit::record_with_latency) or
/// [`record_skipped`](Permit::record_skipped). Because each consumes the
/// permit, an outcome is recorded at most once. A recorded latency above
/// [`MAX_SAMPLE_LATENCY`](crate::MAX_SAMPLE_LATENCY) (about 4.9 hours) counts as that.
///
/// The completion that finds the sample window over runs the control law and
/// the limit-change hook synchronously, before the permit is released (at
/// most once per window; a few microseconds). A panic in a law or a hook is
/// caught there and never reaches the caller.
///
/// **Dropping a permit without recording an outcome** releases the slot and
/// counts the operation as *dropped* in [`Stats`](crate::Stats): it feeds no
/// latency and no outcome to the control law. This is what happens when a
/// request future is cancelled (a client disconnect): the limiter learns
/// nothing from an operation whose end it did not see.
///
/// `Permit<'static>` ([`OwnedPermit`]) holds a handle to the limiter and can
/// be moved into a spawned task.
///
/// # Examples
///
/// ```
/// use adaptx::{Limiter, ManualClock, Outcome};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let limiter = Limiter::builder().clock(clock.clone()).build()?;
/// let permit = limiter.try_acquire()?;
/// assert_eq!(limiter.in_flight(), 1);
/// clock.advance(Duration::from_millis(12));
/// permit.record(Outcome::Success); // latency 12 ms, measured from admission
/// assert_eq!(limiter.in_flight(), 0);
/// let max = limiter.stats().max_latency; // from a histogram: within 1 %
/// assert!(max > Duration::from_millis(11) && max <= Duration::from_millis(12));
///
/// drop(limiter.try_acquire()?); // no outcome: counted as dropped
/// assert_eq!(limiter.stats().dropped, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "dropping a permit releases it at once and records no outcome"]
pub struct Permit<'a> {
    holder: Holder<'a>,
    admission: Admission,
    start: u64,
    /// The decrease epoch at admission.
    epoch: u64,
    /// The partition the permit counts against.
    slot: u8,
    done: bool,
}

/// A permit that owns a handle to its limiter.
///
/// # Examples
///
/// ```
/// use adaptx::{Limiter, OwnedPermit};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let limiter = Limiter::new();
/// let permit: OwnedPermit = limiter.acquire_owned().await?;
/// tokio::spawn(async move {
///     // ... the work, in its own task ...
///     permit.success();
/// })
/// .await?;
/// assert_eq!(limiter.stats().success, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub type OwnedPermit = Permit<'static>;

impl fmt::Debug for Permit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("limit_at_admission", &self.admission.limit)
            .field("in_flight_at_admission", &self.admission.in_flight)
            .field("elapsed", &self.elapsed())
            .finish()
    }
}

impl<'a> Permit<'a> {
    #[inline]
    pub(crate) fn new(holder: Holder<'a>, admission: Admission, start: u64, slot: u8) -> Self {
        let epoch = holder.epoch();
        Self {
            holder,
            admission,
            start,
            epoch,
            slot,
            done: false,
        }
    }

    /// The live limit at the instant this permit was taken.
    pub fn limit_at_admission(&self) -> usize {
        self.admission.limit
    }

    /// Operations in flight at the instant this permit was taken, not
    /// counting this one.
    pub fn in_flight_at_admission(&self) -> usize {
        self.admission.in_flight
    }

    pub(crate) fn holder_algorithm(&self) -> &'static str {
        self.holder.names.current()
    }

    /// Time since admission (or since [`restart`](Permit::restart)), on
    /// the limiter's clock.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.holder.now().saturating_sub(self.start))
    }

    /// Restarts the latency measurement: [`record`](Permit::record),
    /// [`success`](Permit::success), [`failure`](Permit::failure) and
    /// [`elapsed`](Permit::elapsed) measure from now instead of from
    /// admission.
    ///
    /// For a permit taken ahead of its work — a client that reserves a
    /// permit in tower's `poll_ready` and may hold the ready service for long
    /// before `call`, or a pool of pre-admitted slots: the time the permit
    /// sat unused is no latency of the backend's. The permit still belongs to
    /// the decrease epoch of its admission.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use adaptx::{Limiter, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::builder().clock(clock.clone()).build()?;
    /// let mut permit = limiter.try_acquire()?;
    /// clock.advance(Duration::from_secs(1)); // held, unused
    /// permit.restart();
    /// clock.advance(Duration::from_millis(5)); // the call
    /// assert_eq!(permit.elapsed(), Duration::from_millis(5));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn restart(&mut self) {
        self.start = self.holder.now();
    }

    /// Records a success with the latency measured from admission.
    #[inline]
    pub fn success(self) {
        self.record(Outcome::Success);
    }

    /// Records a failure with the latency measured from admission.
    #[inline]
    pub fn failure(self) {
        self.record(Outcome::Failure);
    }

    /// Records `outcome` with the latency measured from admission.
    #[inline]
    pub fn record(mut self, outcome: Outcome) {
        let now = self.holder.now();
        let nanos = clock::sample_nanos(now.saturating_sub(self.start));
        self.end(Ending::Sampled {
            outcome,
            nanos,
            now,
            epoch: self.epoch,
        });
    }

    /// Records `outcome` with a latency the caller measured.
    ///
    /// A zero latency is a real sample of zero (the reference treated it as
    /// "skip"); use [`record_skipped`](Permit::record_skipped) to skip.
    #[inline]
    pub fn record_with_latency(mut self, outcome: Outcome, latency: Duration) {
        let nanos = clock::sample_nanos(clock::duration_nanos(latency));
        let now = self.holder.now();
        self.end(Ending::Sampled {
            outcome,
            nanos,
            now,
            epoch: self.epoch,
        });
    }

    /// Records `outcome` in the success/failure totals without a latency
    /// sample: nothing reaches the control law, the window, the warmup count
    /// or the latency percentiles. For outliers such as cold starts.
    #[inline]
    pub fn record_skipped(mut self, outcome: Outcome) {
        self.end(Ending::Skipped(outcome));
    }

    #[inline]
    fn end(&mut self, ending: Ending) {
        self.done = true;
        self.holder.finish(ending, self.slot);
    }
}

impl Drop for Permit<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if !self.done {
            self.done = true;
            self.holder.finish_dropped(self.slot);
        }
        if let Holder::Owned(_) = self.holder {
            if let Holder::Owned(handle) = std::mem::replace(&mut self.holder, Holder::Spent) {
                super::spare::keep(handle);
            }
        }
    }
}
