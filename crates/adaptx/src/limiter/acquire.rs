//! Futures that wait for a permit or for the drain, and a minimal `block_on`
//! for the blocking forms.

use std::fmt;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc as StdArc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use super::permit::{Holder, Permit};
use crate::error::AcquireError;
use crate::pool::{Admission, Class, Pool, Refused, Waiter};
use crate::sync::Arc;

/// The future returned by [`Limiter::acquire`](crate::Limiter::acquire)
/// and [`Limiter::acquire_as`](crate::Limiter::acquire_as).
///
/// # Cancel safety
///
/// Dropping it gives up the place in line and returns any permit that was
/// handed to it but not yet seen.
///
/// # Examples
///
/// ```
/// use adaptx::Limiter;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let limiter = Limiter::new();
/// let permit = limiter.acquire().await?; // `Acquire<'_>`
/// permit.success();
/// let owned = limiter.acquire_owned().await?; // `Acquire<'static>`: movable into a task
/// owned.success();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct Acquire<'a> {
    holder: Option<Holder<'a>>,
    node: Option<Arc<Waiter>>,
    polled: bool,
    class: Class,
    /// The queue deadline's timer, then the reject delay's.
    #[cfg(feature = "tokio")]
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// A refusal held back by the reject delay.
    #[cfg(feature = "tokio")]
    delayed: Option<Refused>,
}

impl fmt::Debug for Acquire<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acquire")
            .field("class", &self.class)
            .field("queued", &self.node.is_some())
            .finish()
    }
}

impl<'a> Acquire<'a> {
    pub(crate) fn new(holder: Holder<'a>, class: Class) -> Self {
        Self {
            holder: Some(holder),
            node: None,
            polled: false,
            class,
            #[cfg(feature = "tokio")]
            timer: None,
            #[cfg(feature = "tokio")]
            delayed: None,
        }
    }

    /// Polls the pool, and the queue deadline's timer while queued.
    #[inline]
    fn poll_pool(&mut self, cx: &mut Context<'_>) -> Poll<Result<Admission, Refused>> {
        let Some(holder) = self.holder.as_ref() else {
            panic!("`Acquire` polled after completion");
        };
        let pool = holder.pool();
        // Fast path: a free permit on the first poll, with no queue work.
        if self.node.is_none() && !self.polled {
            self.polled = true;
            if let Ok(a) = pool.try_acquire_as(self.class.slot) {
                return Poll::Ready(Ok(a));
            }
        }
        self.polled = true;
        let r = pool.poll_acquire_as(&mut self.node, cx, self.class);
        #[cfg(feature = "tokio")]
        if r.is_pending() {
            if let Some(node) = self.node.as_ref() {
                if self.timer.is_none()
                    && node.deadline() != u64::MAX
                    && tokio::runtime::Handle::try_current().is_ok()
                {
                    let left = node.deadline().saturating_sub(holder.now());
                    self.timer = Some(Box::pin(tokio::time::sleep(
                        std::time::Duration::from_nanos(left),
                    )));
                }
                if let Some(t) = self.timer.as_mut() {
                    if t.as_mut().poll(cx).is_ready() {
                        self.timer = None;
                        pool.time_out(node);
                        // Granted meanwhile, or timed out: either way settled.
                        return pool.poll_acquire_as(&mut self.node, cx, self.class);
                    }
                }
            }
        }
        r
    }

    /// Holds a refusal back for the reject delay, if one is set and fewer
    /// than [`MAX_DELAYED_REJECTIONS`](crate::MAX_DELAYED_REJECTIONS) are held back now.
    #[cfg(feature = "tokio")]
    fn delay(&mut self, why: Refused) -> bool {
        let Some(holder) = self.holder.as_ref() else {
            return false;
        };
        if why == Refused::Closed || tokio::runtime::Handle::try_current().is_err() {
            return false;
        }
        let Some(delay) = holder.reject_delay_slot() else {
            return false;
        };
        self.timer = Some(Box::pin(tokio::time::sleep(delay)));
        self.delayed = Some(why);
        true
    }
}

impl<'a> Future for Acquire<'a> {
    type Output = Result<Permit<'a>, AcquireError>;

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        #[cfg(feature = "tokio")]
        if let Some(why) = this.delayed {
            if let Some(t) = this.timer.as_mut() {
                if t.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
            }
            this.timer = None;
            this.delayed = None;
            if let Some(h) = this.holder.take() {
                h.reject_delay_done();
            }
            return Poll::Ready(Err(AcquireError::refused(why)));
        }
        match this.poll_pool(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(admission)) => {
                let Some(holder) = this.holder.take() else {
                    unreachable!("checked in poll_pool");
                };
                let now = holder.now();
                let slot = this.class.slot;
                Poll::Ready(Ok(Permit::new(holder, admission, now, slot)))
            }
            Poll::Ready(Err(why)) => {
                if let Some(h) = this.holder.as_ref() {
                    h.reject();
                }
                #[cfg(feature = "tokio")]
                if this.delay(why) {
                    // Poll the fresh timer once so it registers the waker.
                    return self.poll(cx);
                }
                this.holder = None;
                Poll::Ready(Err(AcquireError::refused(why)))
            }
        }
    }
}

impl Drop for Acquire<'_> {
    fn drop(&mut self) {
        let Some(holder) = self.holder.take() else {
            return;
        };
        #[cfg(feature = "tokio")]
        if self.delayed.is_some() {
            // The rejection was counted when it happened.
            holder.reject_delay_done();
            return;
        }
        // A permit handed over but never seen was admitted: it goes back to
        // the pool (or the next waiter) and counts as dropped, so `total`
        // never loses it. Any other started attempt that ends without a
        // permit is a rejection, whatever ended it.
        let granted = self
            .node
            .take()
            .is_some_and(|node| holder.pool().cancel(&node));
        if granted {
            holder.drop_unseen();
        } else if self.polled {
            holder.reject();
        }
    }
}

/// The future returned by [`Limiter::close_and_drain`](crate::Limiter::close_and_drain):
/// ready once the limiter is closed and nothing is in flight.
///
/// # Cancel safety
///
/// Cancel safe.
///
/// # Examples
///
/// ```
/// use adaptx::Limiter;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let limiter = Limiter::new();
/// let permit = limiter.try_acquire_owned()?;
/// let task = tokio::spawn(async move { permit.success() });
/// limiter.close_and_drain().await; // waits for the task's permit
/// assert_eq!(limiter.in_flight(), 0);
/// assert!(limiter.try_acquire().is_err());
/// # task.await?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct Drained<'a> {
    pool: &'a Pool,
    id: Option<u64>,
}

impl fmt::Debug for Drained<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Drained").finish_non_exhaustive()
    }
}

impl<'a> Drained<'a> {
    pub(crate) fn new(pool: &'a Pool) -> Self {
        Self { pool, id: None }
    }
}

impl Future for Drained<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let r = this.pool.poll_drained(&mut this.id, cx);
        if r.is_ready() {
            if let Some(id) = this.id.take() {
                this.pool.forget_drain(id);
            }
        }
        r
    }
}

impl Drop for Drained<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.pool.forget_drain(id);
        }
    }
}

struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: StdArc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &StdArc<Self>) {
        self.0.unpark();
    }
}

/// Runs `fut` on the current thread, parking between polls. `None` when
/// `timeout` (wall-clock) runs out first; the future is then dropped, which
/// for our futures is a clean cancellation.
pub(crate) fn block_on<F: Future>(fut: F, timeout: Option<Duration>) -> Option<F::Output> {
    let deadline = timeout.map(|t| Instant::now().checked_add(t));
    let waker = Waker::from(StdArc::new(ThreadWaker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return Some(v);
        }
        match deadline {
            None | Some(None) => thread::park(),
            Some(Some(at)) => {
                let now = Instant::now();
                if now >= at {
                    return None;
                }
                thread::park_timeout(at - now);
            }
        }
    }
}
