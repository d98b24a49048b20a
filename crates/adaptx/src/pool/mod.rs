//! The permit engine: a semaphore whose size can move.
//!
//! # Implementation details
//!
//! The whole admission state is one `AtomicU64`:
//!
//! | bits    | field       | meaning                                              |
//! |---------|-------------|------------------------------------------------------|
//! | 0..=30  | `in_flight` | permits held (admitted operations, and permits handed to a waiter that has not yet seen them) |
//! | 31..=61 | `limit`     | the live limit                                       |
//! | 62      | `CLOSED`    | the pool is closed: no admission ever again          |
//! | 63      | `WAITERS`   | the wait queue is not empty                          |
//!
//! The number of free permits and the shrink debt are *derived*, not stored:
//! `available = max(0, limit − in_flight)` and `debt = max(0, in_flight −
//! limit)`. The accounting invariant `available + in_flight − debt == limit`
//! therefore holds by construction, and no sequence of operations can lose or
//! duplicate a permit: admission is `in_flight += 1` only while `in_flight <
//! limit`, release is `in_flight −= 1` (which retires a permit while there is
//! debt), growing or shrinking is a store of `limit`.
//!
//! Because `CLOSED` and `in_flight` live in the same word, close and
//! admission are linearized: once a CAS has set `CLOSED`, no CAS can admit,
//! and a drain that observes `CLOSED` with `in_flight == 0` knows that no
//! operation is running or can start.
//!
//! ## Waiters
//!
//! Waiters queue in FIFO order in a mutex-protected `VecDeque`. The
//! `WAITERS` bit is set (under the queue lock) only while the queue is
//! non-empty, and only when `in_flight >= limit`; it is cleared under the lock
//! when the queue empties. While it is set, every path that could free a
//! permit (release, growth, close) takes the queue lock, so a free permit is
//! handed to the oldest waiter instead of to a barging `try_acquire`. Hence
//! the second invariant: **`WAITERS` set ⇒ `in_flight >= limit`**, and while
//! it is set only holders of the queue lock change the state word.
//!
//! A permit handed to a waiter is counted in `in_flight` at the moment it is
//! handed over; the waiter's node records the state word of the hand-over so
//! the admission snapshot is exact. A waiter that is dropped after being
//! granted gives its permit back through the ordinary release path.
//!
//! Wakers are always woken after the queue lock is released.
//!
//! ## Memory ordering
//!
//! Admission and release use `AcqRel` CASes on the state word. Admission
//! hands no data between threads; the ordering matters for drain, where a
//! release's `Release` pairs with the drain check's `Acquire` so that
//! everything the last operation did happens-before the drain's success.

use std::collections::VecDeque;
use std::task::{Context, Poll, Waker};

use crate::sync::{Arc, AtomicU8, AtomicU64, Mutex, Ordering, lock};

const COUNT_MASK: u64 = (1 << 31) - 1;
const LIMIT_SHIFT: u32 = 31;
const CLOSED: u64 = 1 << 62;
const WAITERS: u64 = 1 << 63;

/// The largest limit or in-flight count the state word can hold.
pub(crate) const MAX_PERMITS: usize = COUNT_MASK as usize;

#[inline]
fn in_flight_of(s: u64) -> usize {
    (s & COUNT_MASK) as usize
}

#[inline]
fn limit_of(s: u64) -> usize {
    ((s >> LIMIT_SHIFT) & COUNT_MASK) as usize
}

#[inline]
fn with_limit(s: u64, limit: usize) -> u64 {
    (s & !(COUNT_MASK << LIMIT_SHIFT)) | ((limit as u64 & COUNT_MASK) << LIMIT_SHIFT)
}

/// The state at the instant of an admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Admission {
    /// The live limit when the permit was taken.
    pub(crate) limit: usize,
    /// Operations in flight when the permit was taken, not counting this one.
    pub(crate) in_flight: usize,
}

impl Admission {
    fn of(prev: u64) -> Self {
        Self {
            limit: limit_of(prev),
            in_flight: in_flight_of(prev),
        }
    }
}

/// Why a non-blocking admission failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TryFail {
    Closed,
    NoCapacity,
}

/// The pool is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PoolClosed;

const WAITING: u8 = 0;
const GRANTED: u8 = 1;
const CLOSED_OUT: u8 = 2;
const CANCELLED: u8 = 3;

/// One queued acquirer.
#[derive(Debug)]
pub(crate) struct Waiter {
    state: AtomicU8,
    /// The state word just before the permit was handed over.
    granted_at: AtomicU64,
    waker: Mutex<Option<Waker>>,
}

impl Waiter {
    fn new(waker: Waker) -> Self {
        Self {
            state: AtomicU8::new(WAITING),
            granted_at: AtomicU64::new(0),
            waker: Mutex::new(Some(waker)),
        }
    }

    /// Moves `WAITING → to`; on success returns the waker to wake.
    fn finish(&self, to: u8, granted_at: u64) -> Option<Option<Waker>> {
        if to == GRANTED {
            self.granted_at.store(granted_at, Ordering::Relaxed);
        }
        self.state
            .compare_exchange(WAITING, to, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| lock(&self.waker).take())
    }
}

/// Waiters granted a permit by a change of the limit, to be woken once the
/// caller holds no lock. Dropping it wakes them too, so none is ever lost.
#[derive(Debug)]
#[must_use = "granted waiters must be woken"]
pub(crate) struct Woken(Vec<Waker>);

impl Woken {
    /// Wakes every granted waiter.
    pub(crate) fn wake_all(self) {
        drop(self);
    }
}

impl Drop for Woken {
    fn drop(&mut self) {
        for w in self.0.drain(..) {
            w.wake();
        }
    }
}

#[derive(Debug, Default)]
struct Queue {
    waiters: VecDeque<Arc<Waiter>>,
    drain: Vec<(u64, Waker)>,
    next_drain_id: u64,
}

/// The permit engine. See the module documentation.
///
/// `repr(C)` and a boxed queue keep it two words, state first, so the limiter
/// can share the state word's cache line with its other hot fields.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Pool {
    state: AtomicU64,
    queue: Box<Mutex<Queue>>,
}

impl Pool {
    /// A pool with `limit` permits. `limit` must be at most [`MAX_PERMITS`].
    pub(crate) fn new(limit: usize) -> Self {
        debug_assert!(limit <= MAX_PERMITS);
        Self {
            state: AtomicU64::new(with_limit(0, limit)),
            queue: Box::new(Mutex::new(Queue::default())),
        }
    }

    /// The live limit.
    #[inline]
    pub(crate) fn limit(&self) -> usize {
        limit_of(self.state.load(Ordering::Acquire))
    }

    /// Permits held.
    #[inline]
    pub(crate) fn in_flight(&self) -> usize {
        in_flight_of(self.state.load(Ordering::Acquire))
    }

    /// Whether the pool is closed.
    #[inline]
    pub(crate) fn is_closed(&self) -> bool {
        self.state.load(Ordering::Acquire) & CLOSED != 0
    }

    /// `(limit, in_flight, closed)` from one load.
    #[inline]
    pub(crate) fn snapshot(&self) -> (usize, usize, bool) {
        let s = self.state.load(Ordering::Acquire);
        (limit_of(s), in_flight_of(s), s & CLOSED != 0)
    }

    /// Free permits now (a hint).
    #[inline]
    pub(crate) fn available(&self) -> usize {
        let s = self.state.load(Ordering::Acquire);
        limit_of(s).saturating_sub(in_flight_of(s))
    }

    /// Shrink debt now: permits that releases will retire.
    #[inline]
    pub(crate) fn debt(&self) -> usize {
        let s = self.state.load(Ordering::Acquire);
        in_flight_of(s).saturating_sub(limit_of(s))
    }

    /// Takes a permit if one is free and nobody is queued for it.
    #[inline]
    pub(crate) fn try_acquire(&self) -> Result<Admission, TryFail> {
        let mut s = self.state.load(Ordering::Acquire);
        loop {
            if s & CLOSED != 0 {
                return Err(TryFail::Closed);
            }
            // `WAITERS` implies `in_flight >= limit`, so this also keeps a
            // barging caller from overtaking queued waiters.
            if in_flight_of(s) >= limit_of(s) {
                return Err(TryFail::NoCapacity);
            }
            match self
                .state
                .compare_exchange_weak(s, s + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(prev) => return Ok(Admission::of(prev)),
                Err(actual) => s = actual,
            }
        }
    }

    /// Returns one permit: to the oldest waiter if there is one and no debt,
    /// otherwise to the pool (or retires it while there is debt).
    #[inline]
    pub(crate) fn release(&self) {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            if s & WAITERS != 0 {
                return self.release_slow();
            }
            debug_assert!(in_flight_of(s) > 0, "release without a permit");
            let next = s - 1;
            match self
                .state
                .compare_exchange_weak(s, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    if next & CLOSED != 0 && in_flight_of(next) == 0 {
                        self.notify_drained();
                    }
                    return;
                }
                Err(actual) => s = actual,
            }
        }
    }

    #[cold]
    fn release_slow(&self) {
        let mut wake = None;
        let mut drained = false;
        {
            let mut q = lock(&self.queue);
            let s = self.state.load(Ordering::Acquire);
            if s & WAITERS == 0 || in_flight_of(s) > limit_of(s) {
                // The queue emptied while we waited for the lock, or there is
                // debt to pay: a plain decrement. Without `WAITERS` other
                // threads may race, hence the CAS loop.
                drained = self.decrement(s);
            } else {
                // Hand the permit over: `in_flight` is unchanged.
                while let Some(w) = q.waiters.pop_front() {
                    // The snapshot excludes the releasing operation, which is over.
                    if let Some(waker) = w.finish(GRANTED, s - 1) {
                        wake = waker;
                        break;
                    }
                }
                if q.waiters.is_empty() {
                    let cleared = s & !WAITERS;
                    // Every waiter may have been cancelled: then the permit
                    // goes back to the pool.
                    let next = if wake.is_none() { cleared - 1 } else { cleared };
                    self.store_stable(s, next);
                }
            }
        }
        if drained {
            self.notify_drained();
        }
        if let Some(w) = wake {
            w.wake();
        }
    }

    /// CAS loop for `in_flight -= 1`; returns whether it drained a closed pool.
    fn decrement(&self, mut s: u64) -> bool {
        loop {
            let next = s - 1;
            match self
                .state
                .compare_exchange(s, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return next & CLOSED != 0 && in_flight_of(next) == 0,
                Err(actual) => s = actual,
            }
        }
    }

    /// Stores a new state word while `WAITERS` is set and the queue lock is
    /// held, when no other thread can change the word.
    fn store_stable(&self, expected: u64, next: u64) {
        let swapped =
            self.state
                .compare_exchange(expected, next, Ordering::AcqRel, Ordering::Acquire);
        debug_assert!(swapped.is_ok(), "state changed under the queue lock");
    }

    /// Polls for a permit. `node` holds this acquirer's queue entry between
    /// polls; it must start as `None` and be passed to [`Pool::cancel`] if
    /// the acquirer gives up while it is `Some`.
    pub(crate) fn poll_acquire(
        &self,
        node: &mut Option<Arc<Waiter>>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Admission, PoolClosed>> {
        if let Some(w) = node.as_ref() {
            let mut st = w.state.load(Ordering::Acquire);
            if st == WAITING {
                {
                    let mut slot = lock(&w.waker);
                    match slot.as_ref() {
                        Some(old) if old.will_wake(cx.waker()) => {}
                        _ => *slot = Some(cx.waker().clone()),
                    }
                }
                // Re-check after publishing the waker: a grant that raced
                // with the registration set the state first.
                st = w.state.load(Ordering::Acquire);
            }
            return match st {
                WAITING => Poll::Pending,
                GRANTED => {
                    let at = w.granted_at.load(Ordering::Relaxed);
                    *node = None;
                    Poll::Ready(Ok(Admission::of(at)))
                }
                _ => {
                    *node = None;
                    Poll::Ready(Err(PoolClosed))
                }
            };
        }

        match self.try_acquire() {
            Ok(a) => return Poll::Ready(Ok(a)),
            Err(TryFail::Closed) => return Poll::Ready(Err(PoolClosed)),
            Err(TryFail::NoCapacity) => {}
        }

        let mut q = lock(&self.queue);
        let mut s = self.state.load(Ordering::Acquire);
        loop {
            if s & CLOSED != 0 {
                return Poll::Ready(Err(PoolClosed));
            }
            if in_flight_of(s) < limit_of(s) {
                // A permit came free before we took the lock.
                match self
                    .state
                    .compare_exchange(s, s + 1, Ordering::AcqRel, Ordering::Acquire)
                {
                    Ok(prev) => return Poll::Ready(Ok(Admission::of(prev))),
                    Err(actual) => {
                        s = actual;
                        continue;
                    }
                }
            }
            if s & WAITERS != 0 {
                break;
            }
            match self
                .state
                .compare_exchange(s, s | WAITERS, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => break,
                Err(actual) => s = actual,
            }
        }
        let w = Arc::new(Waiter::new(cx.waker().clone()));
        q.waiters.push_back(w.clone());
        *node = Some(w);
        Poll::Pending
    }

    /// Withdraws a queued acquirer. Returns `true` if it held a granted
    /// permit, which this call has given back.
    pub(crate) fn cancel(&self, w: &Arc<Waiter>) -> bool {
        if w.finish(CANCELLED, 0).is_some() {
            let mut q = lock(&self.queue);
            if let Some(pos) = q.waiters.iter().position(|x| Arc::ptr_eq(x, w)) {
                q.waiters.remove(pos);
            }
            if q.waiters.is_empty() {
                let s = self.state.load(Ordering::Acquire);
                if s & WAITERS != 0 {
                    self.store_stable(s, s & !WAITERS);
                }
            }
            false
        } else if w.state.load(Ordering::Acquire) == GRANTED {
            self.release();
            true
        } else {
            false
        }
    }

    /// Sets the live limit (clamped to [`MAX_PERMITS`]); returns the old
    /// one. Growth hands new permits to queued waiters first; a shrink below
    /// `in_flight` becomes debt that releases pay. Wakes the waiters it
    /// granted before returning.
    #[cfg(test)]
    pub(crate) fn set_limit(&self, limit: usize) -> usize {
        let (old, woken) = self.set_limit_deferred(limit);
        woken.wake_all();
        old
    }

    /// [`set_limit`](Pool::set_limit) without the wake-ups: returns the old
    /// limit and the waiters granted a permit, for the caller to wake once it
    /// holds no lock (a woken task may run at once, on this thread, and take
    /// the caller's locks).
    pub(crate) fn set_limit_deferred(&self, limit: usize) -> (usize, Woken) {
        let limit = limit.min(MAX_PERMITS);
        let mut woken = Woken(Vec::new());
        let old;
        {
            let mut q = lock(&self.queue);
            let mut s = self.state.load(Ordering::Acquire);
            if s & WAITERS != 0 {
                // Stable under the lock: only we may change the word.
                old = limit_of(s);
                let mut next = with_limit(s, limit);
                while in_flight_of(next) < limit {
                    let Some(w) = q.waiters.pop_front() else {
                        break;
                    };
                    if let Some(waker) = w.finish(GRANTED, next) {
                        next += 1;
                        woken.0.extend(waker);
                    }
                }
                if q.waiters.is_empty() {
                    next &= !WAITERS;
                }
                self.store_stable(s, next);
            } else {
                loop {
                    match self.state.compare_exchange(
                        s,
                        with_limit(s, limit),
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        Ok(prev) => {
                            old = limit_of(prev);
                            break;
                        }
                        Err(actual) => s = actual,
                    }
                }
            }
        }
        (old, woken)
    }

    /// Closes the pool: no admission succeeds afterwards and every queued
    /// waiter wakes with [`PoolClosed`]. Returns `true` on the first call.
    pub(crate) fn close(&self) -> bool {
        let (first, waiters, drained) = {
            let mut q = lock(&self.queue);
            let prev = self.state.fetch_or(CLOSED, Ordering::AcqRel);
            if prev & WAITERS != 0 {
                self.state.fetch_and(!WAITERS, Ordering::AcqRel);
            }
            (
                prev & CLOSED == 0,
                std::mem::take(&mut q.waiters),
                in_flight_of(prev) == 0,
            )
        };
        for w in waiters {
            if let Some(Some(waker)) = w.finish(CLOSED_OUT, 0) {
                waker.wake();
            }
        }
        if drained {
            self.notify_drained();
        }
        first
    }

    /// Ready once the pool is closed and no permit is held. `id` keeps this
    /// poller's registration between polls; pass it to
    /// [`Pool::forget_drain`] when giving up.
    pub(crate) fn poll_drained(&self, id: &mut Option<u64>, cx: &mut Context<'_>) -> Poll<()> {
        if self.is_drained() {
            return Poll::Ready(());
        }
        let mut q = lock(&self.queue);
        if self.is_drained() {
            return Poll::Ready(());
        }
        match *id {
            Some(me) => {
                if let Some(entry) = q.drain.iter_mut().find(|(i, _)| *i == me) {
                    if !entry.1.will_wake(cx.waker()) {
                        entry.1 = cx.waker().clone();
                    }
                } else {
                    q.drain.push((me, cx.waker().clone()));
                }
            }
            None => {
                let me = q.next_drain_id;
                q.next_drain_id += 1;
                q.drain.push((me, cx.waker().clone()));
                *id = Some(me);
            }
        }
        Poll::Pending
    }

    /// Drops a drain registration.
    pub(crate) fn forget_drain(&self, id: u64) {
        lock(&self.queue).drain.retain(|(i, _)| *i != id);
    }

    fn is_drained(&self) -> bool {
        let s = self.state.load(Ordering::Acquire);
        s & CLOSED != 0 && in_flight_of(s) == 0
    }

    #[cold]
    fn notify_drained(&self) {
        let waiting = std::mem::take(&mut lock(&self.queue).drain);
        for (_, w) in waiting {
            w.wake();
        }
    }
}

#[cfg(all(test, not(adaptx_loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    #[derive(Default)]
    struct CountWaker(AtomicUsize);
    impl Wake for CountWaker {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn invariant(p: &Pool) {
        let (limit, in_flight, _) = p.snapshot();
        assert_eq!(p.available() + in_flight - p.debt(), limit);
    }

    #[test]
    fn shrink_records_debt_when_permits_held() {
        let p = Pool::new(4);
        for _ in 0..4 {
            p.try_acquire().unwrap();
        }
        p.set_limit(2);
        assert_eq!(p.debt(), 2);
        p.release();
        p.release();
        assert_eq!((p.debt(), p.available()), (0, 0));
        p.release();
        p.release();
        assert_eq!(p.available(), 2);
        invariant(&p);
    }

    #[test]
    fn growth_pays_down_debt_first() {
        let p = Pool::new(7);
        for _ in 0..7 {
            p.try_acquire().unwrap();
        }
        p.set_limit(4);
        assert_eq!(p.debt(), 3);
        p.set_limit(5);
        assert_eq!((p.debt(), p.available()), (2, 0));
        invariant(&p);
    }

    #[test]
    fn waiters_are_served_fifo_and_growth_grants() {
        let p = Pool::new(1);
        p.try_acquire().unwrap();
        let wk = std::sync::Arc::new(CountWaker::default());
        let waker = Waker::from(wk.clone());
        let mut cx = Context::from_waker(&waker);
        let mut a = None;
        let mut b = None;
        assert!(p.poll_acquire(&mut a, &mut cx).is_pending());
        assert!(p.poll_acquire(&mut b, &mut cx).is_pending());
        // try_acquire cannot barge.
        p.set_limit(2);
        assert_eq!(wk.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(matches!(
            p.poll_acquire(&mut a, &mut cx),
            Poll::Ready(Ok(_))
        ));
        assert!(p.poll_acquire(&mut b, &mut cx).is_pending());
        assert_eq!(p.try_acquire(), Err(TryFail::NoCapacity));
        p.release();
        assert!(matches!(
            p.poll_acquire(&mut b, &mut cx),
            Poll::Ready(Ok(Admission {
                limit: 2,
                in_flight: 1
            }))
        ));
        p.release();
        p.release();
        assert_eq!(p.in_flight(), 0);
        invariant(&p);
    }

    #[test]
    fn cancelled_granted_waiter_gives_permit_back() {
        let p = Pool::new(1);
        p.try_acquire().unwrap();
        let waker = Waker::from(std::sync::Arc::new(CountWaker::default()));
        let mut cx = Context::from_waker(&waker);
        let mut a = None;
        assert!(p.poll_acquire(&mut a, &mut cx).is_pending());
        p.release();
        let w = a.take().unwrap();
        assert!(p.cancel(&w));
        assert_eq!(p.in_flight(), 0);
        assert_eq!(p.available(), 1);
    }

    #[test]
    fn close_wakes_waiters_and_drains() {
        let p = Pool::new(1);
        p.try_acquire().unwrap();
        let wk = std::sync::Arc::new(CountWaker::default());
        let waker = Waker::from(wk.clone());
        let mut cx = Context::from_waker(&waker);
        let mut a = None;
        assert!(p.poll_acquire(&mut a, &mut cx).is_pending());
        let mut d = None;
        assert!(p.poll_drained(&mut d, &mut cx).is_pending());
        assert!(p.close());
        assert!(!p.close());
        assert!(matches!(
            p.poll_acquire(&mut a, &mut cx),
            Poll::Ready(Err(PoolClosed))
        ));
        assert_eq!(p.try_acquire(), Err(TryFail::Closed));
        p.release();
        assert!(p.poll_drained(&mut d, &mut cx).is_ready());
        assert_eq!(wk.0.load(std::sync::atomic::Ordering::SeqCst), 2);
    }
}

#[cfg(all(test, not(adaptx_loom)))]
mod tests_prop;

#[cfg(all(test, adaptx_loom))]
mod loom;
