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
use crate::pool::{Pool, Waiter};
use crate::sync::Arc;

/// The future returned by [`Limiter::acquire`](crate::Limiter::acquire).
///
/// # Cancel safety
///
/// Dropping it gives up the place in line and returns any permit that was
/// handed to it but not yet seen.
#[must_use = "futures do nothing unless polled"]
pub struct Acquire<'a> {
    holder: Option<Holder<'a>>,
    node: Option<Arc<Waiter>>,
    polled: bool,
}

impl fmt::Debug for Acquire<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acquire")
            .field("queued", &self.node.is_some())
            .finish()
    }
}

impl<'a> Acquire<'a> {
    pub(crate) fn new(holder: Holder<'a>) -> Self {
        Self {
            holder: Some(holder),
            node: None,
            polled: false,
        }
    }
}

impl<'a> Future for Acquire<'a> {
    type Output = Result<Permit<'a>, AcquireError>;

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let Some(holder) = this.holder.as_ref() else {
            panic!("`Acquire` polled after completion");
        };
        this.polled = true;
        // Fast path: a free permit on the first poll, with no queue work.
        let polled = if this.node.is_none() {
            match holder.pool().try_acquire() {
                Ok(a) => Poll::Ready(Ok(a)),
                Err(_) => holder.pool().poll_acquire(&mut this.node, cx),
            }
        } else {
            holder.pool().poll_acquire(&mut this.node, cx)
        };
        match polled {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(admission)) => {
                let Some(holder) = this.holder.take() else {
                    unreachable!("checked above");
                };
                let now = holder.now();
                Poll::Ready(Ok(Permit::new(holder, admission, now)))
            }
            Poll::Ready(Err(_)) => {
                if let Some(h) = this.holder.take() {
                    h.reject();
                }
                Poll::Ready(Err(AcquireError::new()))
            }
        }
    }
}

impl Drop for Acquire<'_> {
    fn drop(&mut self) {
        let Some(holder) = self.holder.take() else {
            return;
        };
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
