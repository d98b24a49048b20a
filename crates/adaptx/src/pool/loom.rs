//! Loom model tests of the permit engine.
//!
//! Built only under `--cfg adaptx_loom`, where [`crate::sync`] hands the
//! engine loom's `Arc`, `Mutex` and atomics, so loom explores the
//! interleavings of the state word, the queue lock and the waiter nodes:
//!
//! ```text
//! RUSTFLAGS="--cfg adaptx_loom" cargo test -p adaptx --lib --release loom
//! ```
//!
//! Waiting threads use [`block_on`] below, whose waker unparks a parked loom
//! thread: a lost wake-up shows up as a deadlock that loom reports. (loom's
//! own `loom::future::block_on` needs loom's `futures` feature, which the
//! crate does not enable.)

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::Arc as StdArc;
use std::task::{Context, Poll, Wake, Waker};

use ::loom::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize};
use ::loom::thread;

use super::{Admission, GRANTED, PART_WAITERS, Pool, Refused, TryFail, WAITERS, Waiter};
use crate::sync::{Arc, Ordering, lock, loom_model as model};

/// A waker that unparks a loom thread.
struct Unpark(thread::Thread);

impl Wake for Unpark {
    fn wake(self: StdArc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &StdArc<Self>) {
        self.0.unpark();
    }
}

/// Drives `fut` to completion on the current loom thread, parking between
/// polls. The future is polled again after every unpark, so a spurious
/// wake-up is harmless; a missing one deadlocks the model.
fn block_on<F: Future>(fut: F) -> F::Output {
    let waker = Waker::from(StdArc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        thread::park();
    }
}

/// The accounting invariant and the `WAITERS` invariant of a quiescent pool.
fn assert_quiescent(pool: &Pool) {
    let s = pool.state.load(Ordering::Acquire);
    let (limit, in_flight, _) = pool.snapshot();
    assert_eq!(pool.available() + in_flight - pool.debt(), limit);
    let queued = !lock(&pool.queue).waiters.is_empty();
    assert_eq!(s & WAITERS != 0, queued, "WAITERS bit vs queue");
    if queued {
        assert!(in_flight >= limit);
    }
}

/// Queues an acquirer on a full pool from the current thread; the returned
/// node is then waited on or cancelled.
fn enqueue(pool: &Pool) -> Arc<Waiter> {
    let mut node = None;
    let r = pool.poll_acquire(&mut node, &mut Context::from_waker(Waker::noop()));
    assert!(r.is_pending(), "the pool must be full: {r:?}");
    node.expect("a pending acquirer has a node")
}

/// Waits on an already queued node (or acquires afresh if `node` is `None`).
fn wait(pool: &Pool, mut node: Option<Arc<Waiter>>) -> Result<Admission, Refused> {
    block_on(poll_fn(|cx| pool.poll_acquire(&mut node, cx)))
}

/// Two threads race `try_acquire`/`release` on a pool of one: never both
/// hold a permit, and every permit comes back.
#[test]
fn loom_try_acquire_limit_one_is_exclusive() {
    model(|| {
        let pool = Arc::new(Pool::new(1));
        let holders = Arc::new(AtomicUsize::new(0));
        let ths: Vec<_> = (0..2)
            .map(|_| {
                let (pool, holders) = (pool.clone(), holders.clone());
                thread::spawn(move || {
                    let mut got = 0;
                    for _ in 0..2 {
                        if pool.try_acquire().is_ok() {
                            let prev = holders.fetch_add(1, Ordering::SeqCst);
                            assert_eq!(prev, 0, "two holders on a limit of 1");
                            holders.fetch_sub(1, Ordering::SeqCst);
                            pool.release();
                            got += 1;
                        }
                    }
                    got
                })
            })
            .collect();
        let got: usize = ths
            .into_iter()
            .map(|t| t.join().expect("thread panicked"))
            .sum();
        assert!(got >= 1, "someone must get the free permit");
        assert_eq!(pool.in_flight(), 0);
        assert_eq!(pool.available(), 1);
        assert_quiescent(&pool);
    });
}

/// Releases race with a shrink below `in_flight`: the debt is paid exactly
/// (each release retires one permit while there is debt) and the invariant
/// holds at the end.
#[test]
fn loom_release_races_shrink() {
    model(|| {
        let pool = Arc::new(Pool::new(3));
        for _ in 0..3 {
            pool.try_acquire().expect("free permit");
        }
        let releasers: Vec<_> = (0..2)
            .map(|_| {
                let pool = pool.clone();
                thread::spawn(move || pool.release())
            })
            .collect();
        let shrink = {
            let pool = pool.clone();
            thread::spawn(move || pool.set_limit(1))
        };
        assert_eq!(shrink.join().expect("shrink panicked"), 3);
        for t in releasers {
            t.join().expect("release panicked");
        }
        assert_eq!(pool.snapshot(), (1, 1, false));
        assert_eq!((pool.available(), pool.debt()), (0, 0));
        assert_quiescent(&pool);
        assert_eq!(pool.try_acquire(), Err(TryFail::NoCapacity));
        pool.release();
        assert_eq!((pool.available(), pool.in_flight()), (1, 0));
    });
}

/// A waiter parks while the only permit is released: it gets the permit
/// (no lost wake-up, which loom would report as a deadlock).
#[test]
fn loom_waiter_races_release() {
    model(|| {
        let pool = Arc::new(Pool::new(1));
        pool.try_acquire().expect("free permit");
        let waiter = {
            let pool = pool.clone();
            thread::spawn(move || {
                let a = wait(&pool, None).expect("not closed");
                assert_eq!(a.limit, 1);
                pool.release();
            })
        };
        let releaser = {
            let pool = pool.clone();
            thread::spawn(move || pool.release())
        };
        releaser.join().expect("releaser panicked");
        waiter.join().expect("waiter panicked");
        assert_eq!(pool.in_flight(), 0);
        assert_eq!(pool.available(), 1);
        assert_quiescent(&pool);
    });
}

/// A queued waiter is granted by a racing growth of the limit while it
/// re-registers its waker.
#[test]
fn loom_waiter_races_growth() {
    model(|| {
        let pool = Arc::new(Pool::new(1));
        pool.try_acquire().expect("free permit");
        let node = enqueue(&pool);
        let waiter = {
            let pool = pool.clone();
            thread::spawn(move || {
                let a = wait(&pool, Some(node)).expect("not closed");
                assert_eq!(
                    a,
                    Admission {
                        limit: 2,
                        in_flight: 1
                    }
                );
                pool.release();
            })
        };
        let grower = {
            let pool = pool.clone();
            thread::spawn(move || pool.set_limit(2))
        };
        assert_eq!(grower.join().expect("grower panicked"), 1);
        waiter.join().expect("waiter panicked");
        pool.release();
        assert_eq!(pool.snapshot(), (2, 0, false));
        assert_quiescent(&pool);
    });
}

/// A barging `try_acquire` races with a parking acquirer and a release: the
/// permit goes to one of them, the other eventually gets it, none is lost.
#[test]
fn loom_barging_try_acquire_races_waiter() {
    model(|| {
        let pool = Arc::new(Pool::new(1));
        pool.try_acquire().expect("free permit");
        let waiter = {
            let pool = pool.clone();
            thread::spawn(move || {
                wait(&pool, None).expect("not closed");
                pool.release();
            })
        };
        let barger = {
            let pool = pool.clone();
            thread::spawn(move || {
                if pool.try_acquire().is_ok() {
                    pool.release();
                }
            })
        };
        pool.release();
        barger.join().expect("barger panicked");
        waiter.join().expect("waiter panicked");
        assert_eq!(pool.in_flight(), 0);
        assert_eq!(pool.available(), 1);
        assert_quiescent(&pool);
    });
}

/// `close` races with `try_acquire`. Close and admission are linearized: an
/// acquire either fails with `Closed` or happened before the close, and the
/// drain completes only once that permit is released — with everything its
/// holder did visible. The holder's writes are `Relaxed`, so only the
/// release → drain synchronization can make loom's drain thread see them;
/// without it loom would let the drain read the stale values.
#[test]
fn loom_close_races_try_acquire() {
    model(|| {
        let pool = Arc::new(Pool::new(1));
        let data = Arc::new(AtomicU32::new(0));
        let holding = Arc::new(AtomicBool::new(false));
        let worker = {
            let (pool, data, holding) = (pool.clone(), data.clone(), holding.clone());
            thread::spawn(move || match pool.try_acquire() {
                Ok(_) => {
                    holding.store(true, Ordering::Relaxed);
                    data.store(1, Ordering::Relaxed);
                    holding.store(false, Ordering::Relaxed);
                    pool.release();
                    true
                }
                Err(e) => {
                    assert_eq!(e, TryFail::Closed);
                    false
                }
            })
        };
        let closed_first = pool.close();
        assert!(closed_first);
        // After close returns, no admission can succeed.
        assert_eq!(pool.try_acquire(), Err(TryFail::Closed));
        let mut id = None;
        block_on(poll_fn(|cx| pool.poll_drained(&mut id, cx)));
        if let Some(id) = id {
            pool.forget_drain(id);
        }
        assert!(!holding.load(Ordering::Relaxed), "drained while held");
        assert_eq!(pool.in_flight(), 0);
        let seen = data.load(Ordering::Relaxed);
        let admitted = worker.join().expect("worker panicked");
        assert_eq!(
            seen,
            u32::from(admitted),
            "drained before the holder's work"
        );
        assert_eq!(pool.try_acquire(), Err(TryFail::Closed));
        assert_quiescent(&pool);
    });
}

/// A queued waiter is cancelled while a release grants it the permit: the
/// permit is either handed on to the next waiter or returned, never lost.
#[test]
fn loom_cancel_races_grant() {
    model(|| {
        let pool = Arc::new(Pool::new(1));
        pool.try_acquire().expect("free permit");
        let first = enqueue(&pool);
        let second = enqueue(&pool);
        let releaser = {
            let pool = pool.clone();
            thread::spawn(move || pool.release())
        };
        let canceller = {
            let pool = pool.clone();
            let first = first.clone();
            thread::spawn(move || pool.cancel(&first))
        };
        let gave_back = canceller.join().expect("canceller panicked");
        releaser.join().expect("releaser panicked");
        // Whichever way the race went, the permit ends with the second
        // waiter: handed on by the cancel, or granted to it directly.
        assert_eq!(gave_back, first.state.load(Ordering::Acquire) == GRANTED);
        assert_eq!(second.state.load(Ordering::Acquire), GRANTED);
        assert_eq!(pool.in_flight(), 1);
        assert_quiescent(&pool);
        assert!(lock(&pool.queue).waiters.is_empty());
        assert!(pool.cancel(&second), "the granted permit is given back");
        assert_eq!((pool.in_flight(), pool.available()), (0, 1));
        assert_quiescent(&pool);
    });
}

/// The last queued waiter is cancelled while a release grants it: with no
/// one to hand on to, the permit goes back to the pool.
#[test]
fn loom_cancel_races_grant_last_waiter() {
    model(|| {
        let pool = Arc::new(Pool::new(1));
        pool.try_acquire().expect("free permit");
        let node = enqueue(&pool);
        let releaser = {
            let pool = pool.clone();
            thread::spawn(move || pool.release())
        };
        let gave_back = pool.cancel(&node);
        releaser.join().expect("releaser panicked");
        assert_eq!(gave_back, node.state.load(Ordering::Acquire) == GRANTED);
        assert_eq!((pool.in_flight(), pool.available()), (0, 1));
        assert_quiescent(&pool);
        assert!(lock(&pool.queue).waiters.is_empty());
    });
}

/// Close races with a parked waiter and a release: the waiter wakes with
/// the permit or with `Refused`, and the drain completes.
#[test]
fn loom_close_races_waiter() {
    model(|| {
        let pool = Arc::new(Pool::new(1));
        pool.try_acquire().expect("free permit");
        let node = enqueue(&pool);
        let waiter = {
            let pool = pool.clone();
            thread::spawn(move || match wait(&pool, Some(node)) {
                Ok(_) => {
                    pool.release();
                    true
                }
                Err(Refused::Closed) => false,
                Err(e) => panic!("unexpected {e:?}"),
            })
        };
        let releaser = {
            let pool = pool.clone();
            thread::spawn(move || pool.release())
        };
        assert!(pool.close());
        let mut id = None;
        block_on(poll_fn(|cx| pool.poll_drained(&mut id, cx)));
        assert_eq!(pool.in_flight(), 0);
        releaser.join().expect("releaser panicked");
        waiter.join().expect("waiter panicked");
        assert_eq!(pool.snapshot(), (1, 0, true));
        assert_quiescent(&pool);
    });
}

/// A pool of `limit` split into partitions `a` (slot 1) and `b` (slot 2),
/// half each, with reserve fraction `rho` (slot 0, `default`, has no share).
fn partitioned(limit: usize, rho: f64) -> Pool {
    let table = super::Partitions::new()
        .share("a", 0.5)
        .share("b", 0.5)
        .reserve(rho)
        .table(100)
        .expect("valid partitions");
    Pool::with(limit, super::Discipline::default(), Some(table), None)
}

/// Two partitions race `try_acquire`/`release` on a limit of 1 (greedy
/// sharing): never two held at once — the overshoot of Netflix
/// concurrency-limits #234, where both read "below the limit", cannot
/// happen — and every count comes back.
#[test]
fn loom_partitioned_admission_never_exceeds_the_limit() {
    model(|| {
        let pool = Arc::new(partitioned(1, 0.0));
        let holders = Arc::new(AtomicUsize::new(0));
        let ths: Vec<_> = (1..3u8)
            .map(|slot| {
                let (pool, holders) = (pool.clone(), holders.clone());
                thread::spawn(move || {
                    if pool.try_acquire_as(slot).is_ok() {
                        let prev = holders.fetch_add(1, Ordering::SeqCst);
                        assert_eq!(prev, 0, "two holders on a limit of 1");
                        holders.fetch_sub(1, Ordering::SeqCst);
                        pool.release_from(slot);
                    }
                })
            })
            .collect();
        for t in ths {
            t.join().expect("thread panicked");
        }
        let t = pool.table().expect("partitioned");
        assert_eq!((t.used(0), t.used(1), t.used(2)), (0, 0, 0));
        assert_eq!(pool.in_flight(), 0);
        assert_quiescent_partitioned(&pool);
    });
}

/// With full reservations (ρ = 1, R = (0, 1, 1)) and partition `a` holding
/// its one permit, `a` and `b` race for more: `b` always gets its reserved
/// permit, `a` never borrows it.
#[test]
fn loom_partitioned_reservation_is_never_lent() {
    model(|| {
        let pool = Arc::new(partitioned(2, 1.0));
        pool.try_acquire_as(1).expect("a's reservation");
        let a = {
            let pool = pool.clone();
            thread::spawn(move || pool.try_acquire_as(1).is_ok())
        };
        let b = {
            let pool = pool.clone();
            thread::spawn(move || pool.try_acquire_as(2).is_ok())
        };
        assert!(!a.join().expect("a panicked"), "a borrowed b's reservation");
        assert!(b.join().expect("b panicked"), "b refused its reservation");
    });
}

/// A waiter of partition `b` queues while `a` releases the only permit: the
/// waiter gets it (no lost wake-up between the table's count and the state
/// word's, which loom would report as a deadlock).
#[test]
fn loom_partitioned_waiter_races_release() {
    model(|| {
        let pool = Arc::new(partitioned(1, 0.0));
        pool.try_acquire_as(1).expect("free permit");
        let waiter = {
            let pool = pool.clone();
            thread::spawn(move || {
                let mut node = None;
                let class = super::Class {
                    slot: 2,
                    priority: 0,
                };
                block_on(poll_fn(|cx| pool.poll_acquire_as(&mut node, cx, class)))
                    .expect("not closed");
                pool.release_from(2);
            })
        };
        let releaser = {
            let pool = pool.clone();
            thread::spawn(move || pool.release_from(1))
        };
        releaser.join().expect("releaser panicked");
        waiter.join().expect("waiter panicked");
        assert_eq!(pool.in_flight(), 0);
        assert_quiescent_partitioned(&pool);
    });
}

/// A partitioned pool at rest: the table's counts sum to the state word's
/// in-flight count, `PART_WAITERS` is set exactly when someone is queued,
/// and `WAITERS` (which diverts the unpartitioned fast paths) always is.
fn assert_quiescent_partitioned(pool: &Pool) {
    let t = pool.table().expect("partitioned");
    let used: usize = (0..super::MAX_PARTITIONS).map(|j| t.used(j)).sum();
    assert_eq!(used, pool.in_flight());
    let s = pool.state.load(Ordering::Acquire);
    let queued = !lock(&pool.queue).waiters.is_empty();
    assert_eq!(s & PART_WAITERS != 0, queued, "PART_WAITERS bit vs queue");
    assert_ne!(s & WAITERS, 0, "a partitioned pool keeps WAITERS set");
}

// ---- admission above the limit (shadow and bypass mode, `over.rs`) ----

/// Releases every permit the pool counts.
fn release_all(pool: &Pool) {
    for _ in 0..pool.in_flight() {
        pool.release();
    }
}

/// Turning admission above the limit on grants the queued waiter while a
/// lock-free admission above the limit races the grant (it must take the
/// queue lock while `WAITERS` is set, or the grant's store of the stable
/// word would lose one of the two): both are counted exactly once.
#[test]
fn loom_over_switch_on_races_over_admission() {
    model(|| {
        let pool = Arc::new(Pool::new(1));
        pool.try_acquire().expect("free permit");
        let node = enqueue(&pool);
        let switch = {
            let pool = pool.clone();
            thread::spawn(move || pool.set_over_limit(true).wake_all())
        };
        let over = {
            let pool = pool.clone();
            thread::spawn(move || pool.try_acquire_over(0).is_ok())
        };
        switch.join().expect("switch panicked");
        let got = usize::from(over.join().expect("admission panicked"));
        wait(&pool, Some(node)).expect("granted by the switch");
        assert_eq!(pool.in_flight(), 2 + got);
        assert_eq!(pool.over_limit_admissions(), 1 + got as u64);
        assert_quiescent(&pool);
        release_all(&pool);
        assert_eq!((pool.in_flight(), pool.available()), (0, 1));
        assert_quiescent(&pool);
    });
}

/// An acquirer on a full pool races the switch to admission above the
/// limit: it is admitted either way — over the limit at once, or queued and
/// then granted by the switch — never left queued while the switch is on
/// (loom would report the lost wake-up as a deadlock).
#[test]
fn loom_over_switch_on_races_waiter() {
    model(|| {
        let pool = Arc::new(Pool::new(1));
        pool.try_acquire().expect("free permit");
        let waiter = {
            let pool = pool.clone();
            thread::spawn(move || wait(&pool, None).is_ok())
        };
        let switch = {
            let pool = pool.clone();
            thread::spawn(move || pool.set_over_limit(true).wake_all())
        };
        switch.join().expect("switch panicked");
        assert!(waiter.join().expect("waiter panicked"), "admitted");
        assert_eq!(pool.in_flight(), 2);
        assert_eq!(lock(&pool.queue).waiters.len(), 0);
        release_all(&pool);
        assert_quiescent(&pool);
    });
}

/// Turning admission above the limit off races a release of a permit held
/// above the limit and another admission above it: the permits above the
/// limit are debt that releases retire, and every count comes back.
#[test]
fn loom_over_switch_off_races_release_and_over_admission() {
    model(|| {
        let pool = Arc::new(Pool::new(1));
        pool.set_over_limit(true).wake_all();
        pool.try_acquire().expect("free permit");
        pool.try_acquire_over(0).expect("above the limit");
        let switch = {
            let pool = pool.clone();
            thread::spawn(move || pool.set_over_limit(false).wake_all())
        };
        let release = {
            let pool = pool.clone();
            thread::spawn(move || pool.release())
        };
        let over = {
            let pool = pool.clone();
            thread::spawn(move || pool.try_acquire_over(0).is_ok())
        };
        switch.join().expect("switch panicked");
        release.join().expect("release panicked");
        let got = usize::from(over.join().expect("admission panicked"));
        assert_eq!(pool.in_flight(), 1 + got);
        assert_eq!(pool.try_acquire_over(0), Err(TryFail::NoCapacity), "off");
        release_all(&pool);
        assert_eq!((pool.in_flight(), pool.available()), (0, 1));
        assert_quiescent(&pool);
    });
}

/// Partitioned: the switch to admission above the limit races a release
/// of the other partition while a waiter of the first queues: the waiter is
/// served (by the switch or by the release), and the table's counts and
/// the state word's stay equal.
#[test]
fn loom_over_partitioned_admission_races_release_and_waiter() {
    model(|| {
        let pool = Arc::new(partitioned(1, 0.0));
        pool.try_acquire_as(2).expect("free permit");
        let waiter = {
            let pool = pool.clone();
            thread::spawn(move || {
                let mut node = None;
                let class = super::Class {
                    slot: 1,
                    priority: 0,
                };
                block_on(poll_fn(|cx| pool.poll_acquire_as(&mut node, cx, class)))
                    .expect("not closed");
                pool.release_from(1);
            })
        };
        let switch = {
            let pool = pool.clone();
            thread::spawn(move || pool.set_over_limit(true).wake_all())
        };
        pool.release_from(2);
        switch.join().expect("switch panicked");
        waiter.join().expect("waiter panicked");
        assert_eq!(pool.in_flight(), 0);
        assert_quiescent_partitioned(&pool);
    });
}

/// Partitioned, admission above the limit on: two partitions admitted over
/// a full limit race a release: each admission is counted once in its
/// partition and once in the state word, and every count comes back.
#[test]
fn loom_over_partitioned_admissions_race_release() {
    model(|| {
        let pool = Arc::new(partitioned(1, 0.0));
        pool.set_over_limit(true).wake_all();
        pool.try_acquire_as(1).expect("free permit");
        let ths: Vec<_> = (1..3u8)
            .map(|slot| {
                let pool = pool.clone();
                thread::spawn(move || {
                    pool.try_acquire_as(slot).expect("admitted above the limit");
                    slot
                })
            })
            .collect();
        pool.release_from(1);
        let slots: Vec<u8> = ths
            .into_iter()
            .map(|t| t.join().expect("thread panicked"))
            .collect();
        assert_eq!(pool.in_flight(), 2);
        assert_quiescent_partitioned(&pool);
        for slot in slots {
            pool.release_from(slot);
        }
        assert_eq!(pool.in_flight(), 0);
        assert_quiescent_partitioned(&pool);
    });
}
