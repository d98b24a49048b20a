//! Cancel safety of the limiter's futures, FIFO order of waiters, and the
//! `Send`/`Sync` bounds of the public types and futures.
//!
//! Futures are polled by hand (a no-op waker and `Pin`) where a test needs to
//! stop one at an exact point; async waits run on tokio's paused clock.

use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use adaptx::{
    Acquire, AcquireError, AcquireTimeoutError, Builder, ConfigError, Controller,
    DrainTimeoutError, Drained, ExecuteError, Limiter, ManualClock, OwnedPermit, PanicError,
    Permit, Stats, TryAcquireError, TryExecuteError,
};

fn poll_once<F: Future>(fut: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(Waker::noop()))
}

fn limiter(limit: usize) -> Limiter {
    Limiter::builder()
        .initial_limit(limit)
        .build()
        .expect("valid configuration")
}

/// Polling `acquire` once and dropping it loses no permit and leaks none.
#[test]
fn cancel_acquire_releases_permits() {
    let l = limiter(2);
    let held: Vec<_> = (0..2).map(|_| l.try_acquire().expect("free")).collect();
    {
        let mut a = pin!(l.acquire());
        let mut b = pin!(l.acquire_owned());
        assert!(poll_once(a.as_mut()).is_pending());
        assert!(poll_once(b.as_mut()).is_pending());
    }
    drop(held);
    assert_eq!((l.available(), l.in_flight(), l.debt()), (2, 0, 0));
    // Both permits can be taken again, and nothing is queued ahead.
    let again: Vec<_> = (0..2).map(|_| l.try_acquire().expect("free")).collect();
    assert_eq!(l.try_acquire().err(), Some(TryAcquireError::NoCapacity));
    drop(again);
    assert_eq!(l.stats().rejected, 3);
}

/// An `acquire` that is ready at its first poll and whose permit is then
/// dropped gives the permit back.
#[test]
fn acquire_ready_then_permit_dropped() {
    let l = limiter(1);
    let Poll::Ready(Ok(p)) = poll_once(pin!(l.acquire())) else {
        panic!("a free permit is taken at the first poll");
    };
    assert_eq!(l.in_flight(), 1);
    drop(p);
    assert_eq!((l.available(), l.in_flight()), (1, 0));
    assert_eq!(l.stats().dropped, 1);
}

/// A waiter that was handed a permit but is dropped before it is polled
/// again passes the permit on to the next waiter.
#[test]
fn granted_waiter_dropped_passes_permit_to_next() {
    let l = limiter(1);
    let held = l.try_acquire().expect("the only permit");
    let mut first = Box::pin(l.acquire());
    let mut second = pin!(l.acquire());
    assert!(poll_once(first.as_mut()).is_pending());
    assert!(poll_once(second.as_mut()).is_pending());
    held.success();
    // The permit now belongs to `first`, which has not seen it.
    assert_eq!(l.in_flight(), 1);
    assert_eq!(l.try_acquire().err(), Some(TryAcquireError::NoCapacity));
    drop(first);
    let Poll::Ready(Ok(p)) = poll_once(second.as_mut()) else {
        panic!("the second waiter gets the permit the first gave up");
    };
    assert_eq!(l.in_flight(), 1);
    p.success();
    assert_eq!((l.available(), l.in_flight()), (1, 0));
}

/// With nobody else waiting, the permit a dropped waiter was handed goes
/// back to the pool.
#[test]
fn granted_waiter_dropped_returns_permit_to_pool() {
    let l = limiter(1);
    let held = l.try_acquire().expect("the only permit");
    {
        let mut waiter = pin!(l.acquire_owned());
        assert!(poll_once(waiter.as_mut()).is_pending());
        held.success();
        assert_eq!(l.in_flight(), 1, "handed to the waiter");
    }
    assert_eq!((l.available(), l.in_flight()), (1, 0));
    assert!(l.try_acquire().is_ok());
}

/// Dropping a waiter in the middle of the line keeps the others' order.
#[test]
fn dropped_middle_waiter_keeps_order() {
    let l = limiter(1);
    let held = l.try_acquire().expect("the only permit");
    let mut a = pin!(l.acquire());
    let mut b = Box::pin(l.acquire());
    let mut c = pin!(l.acquire());
    assert!(poll_once(a.as_mut()).is_pending());
    assert!(poll_once(b.as_mut()).is_pending());
    assert!(poll_once(c.as_mut()).is_pending());
    drop(b);
    held.success();
    assert!(poll_once(c.as_mut()).is_pending(), "a is first");
    let Poll::Ready(Ok(pa)) = poll_once(a.as_mut()) else {
        panic!("a is served first");
    };
    pa.success();
    let Poll::Ready(Ok(pc)) = poll_once(c.as_mut()) else {
        panic!("then c; b left the line");
    };
    pc.success();
    assert_eq!((l.available(), l.in_flight()), (1, 0));
}

/// A waiting `acquire` woken by close ends with an error and holds nothing.
#[test]
fn waiting_acquire_closed_holds_nothing() {
    let l = limiter(1);
    let held = l.try_acquire().expect("the only permit");
    let mut waiter = pin!(l.acquire());
    assert!(poll_once(waiter.as_mut()).is_pending());
    l.close();
    assert!(matches!(poll_once(waiter.as_mut()), Poll::Ready(Err(_))));
    held.success();
    assert_eq!(l.in_flight(), 0);
}

/// A timed-out `acquire_timeout` leaves no waiter and no permit behind.
#[tokio::test(start_paused = true)]
async fn acquire_timeout_leaves_nothing_behind() {
    let l = limiter(1);
    let held = l.try_acquire().expect("the only permit");
    let t0 = tokio::time::Instant::now();
    assert_eq!(
        l.acquire_timeout(Duration::from_millis(10)).await.err(),
        Some(AcquireTimeoutError::Timeout)
    );
    assert_eq!(t0.elapsed(), Duration::from_millis(10));
    held.success();
    // A leftover waiter would have been handed this permit, and would make
    // try_acquire fail.
    assert_eq!((l.available(), l.in_flight()), (1, 0));
    let p = l.try_acquire().expect("nobody queued ahead");
    p.success();
    assert_eq!(l.stats().rejected, 1);
}

/// Dropping an `execute` future while the operation runs releases the
/// permit as dropped: no outcome, no latency sample.
#[test]
fn dropping_execute_mid_operation_releases_permit_as_dropped() {
    let clock = ManualClock::new();
    let l = Limiter::builder()
        .clock(clock.clone())
        .build()
        .expect("valid configuration");
    {
        let mut fut = pin!(l.execute(async |_c| {
            std::future::pending::<()>().await;
            Ok::<_, Infallible>(())
        }));
        assert!(poll_once(fut.as_mut()).is_pending());
        assert_eq!(l.in_flight(), 1, "the operation is running");
        clock.advance(Duration::from_millis(5));
    }
    assert_eq!((l.available(), l.in_flight()), (10, 0));
    let s = l.stats();
    assert_eq!((s.dropped, s.success, s.failures, s.rejected), (1, 0, 0, 0));
    assert_eq!(s.max_latency, Duration::ZERO, "no sample");

    // The same for try_execute.
    {
        let mut fut = pin!(l.try_execute(async |_c| {
            std::future::pending::<()>().await;
            Ok::<_, Infallible>(())
        }));
        assert!(poll_once(fut.as_mut()).is_pending());
        assert_eq!(l.in_flight(), 1);
    }
    assert_eq!(l.in_flight(), 0);
    assert_eq!(l.stats().dropped, 2);
}

/// Dropping a drain future stops waiting; the limiter stays closed, and a
/// later drain completes once the work is done.
#[tokio::test(start_paused = true)]
async fn dropping_drain_keeps_limiter_closed() {
    let l = limiter(1);
    let held = l.try_acquire().expect("the only permit");
    {
        let mut d = pin!(l.close_and_drain());
        assert!(poll_once(d.as_mut()).is_pending());
        let mut c = pin!(l.close_with_timeout(Duration::from_secs(1)));
        assert!(poll_once(c.as_mut()).is_pending());
    }
    assert!(l.is_closed());
    held.success();
    l.close_and_drain().await;
    assert_eq!(l.close_with_timeout(Duration::ZERO).await, Ok(()));
}

/// Waiters are served in the order they started waiting, and `try_acquire`
/// never overtakes them.
#[tokio::test(start_paused = true)]
async fn waiters_are_served_fifo() {
    let l = limiter(1);
    let held = l.try_acquire_owned().expect("the only permit");
    let order = Arc::new(Mutex::new(Vec::new()));
    let started = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for id in 0..5 {
        let (l, order, seen) = (l.clone(), order.clone(), started.clone());
        tasks.push(tokio::spawn(async move {
            seen.fetch_add(1, Ordering::SeqCst);
            // The first poll of `acquire` happens in the same task poll as
            // the increment above, so once it is seen this task is queued.
            let p = l.acquire().await.expect("not closed");
            order.lock().expect("not poisoned").push(id);
            tokio::time::sleep(Duration::from_millis(1)).await;
            p.success();
        }));
        while started.load(Ordering::SeqCst) <= id {
            tokio::task::yield_now().await;
        }
    }
    held.success();
    assert_eq!(
        l.try_acquire().err(),
        Some(TryAcquireError::NoCapacity),
        "the freed permit went to the first waiter"
    );
    for t in tasks {
        t.await.expect("no task panicked");
    }
    assert_eq!(*order.lock().expect("not poisoned"), vec![0, 1, 2, 3, 4]);
    assert_eq!((l.available(), l.in_flight()), (1, 0));
}

/// The public types and the futures of the async methods can cross threads.
#[test]
fn bounds() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>(_: &T) {}

    send_sync::<Limiter>();
    send_sync::<Permit<'_>>();
    send_sync::<OwnedPermit>();
    send_sync::<Stats>();
    send_sync::<Controller>();
    send_sync::<ManualClock>();
    send_sync::<ConfigError>();
    send_sync::<AcquireError>();
    send_sync::<TryAcquireError>();
    send_sync::<AcquireTimeoutError>();
    send_sync::<DrainTimeoutError>();
    send_sync::<PanicError>();
    send_sync::<ExecuteError<std::io::Error>>();
    send_sync::<TryExecuteError<std::io::Error>>();
    send_sync::<Acquire<'_>>();
    send_sync::<Drained<'_>>();
    fn send_only<T: Send>() {}
    send_only::<Builder>();

    let l = Limiter::new();
    let acquire = l.acquire();
    send(&acquire);
    let acquire_owned = l.acquire_owned();
    send(&acquire_owned);
    let timed = l.acquire_timeout(Duration::ZERO);
    send(&timed);
    let execute = l.execute(async |_c| Ok::<_, std::io::Error>(1));
    send(&execute);
    let try_execute = l.try_execute(async |_c| Ok::<_, std::io::Error>(1));
    send(&try_execute);
    let drained = l.close_and_drain();
    send(&drained);
    let close = l.close_with_timeout(Duration::ZERO);
    send(&close);
}
