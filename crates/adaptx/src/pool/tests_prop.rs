//! White-box property tests of the permit engine.
//!
//! Random sequences of operations run against a [`Pool`] and against a
//! simple sequential model of what the engine must do. After every step the
//! pool's state word, its wait queue and every waiter's state must agree
//! with the model:
//!
//! * `available + in_flight − debt == limit`, and `available` / `debt` are
//!   the derived values of the model;
//! * the permits the test holds plus the permits granted to waiters that have
//!   not yet collected them equal `in_flight` (nothing lost or duplicated);
//! * waiters are granted in FIFO order, each woken exactly once, on the
//!   waker of its latest poll;
//! * no waiter is granted after close; a closed-out waiter sees the error;
//! * the `WAITERS` bit is set exactly while the queue is non-empty, implies
//!   `in_flight >= limit`, and `try_acquire` fails while it is set;
//! * a drain completes exactly when the pool is closed with nothing in
//!   flight, and a registered drain poller is woken when that happens.
//!
//! A second property also checks the admission snapshot ([`Admission`]) of
//! every grant against the documented meaning: the limit at the instant of
//! admission and the operations in flight then, *not counting* the admitted
//! one.

use std::collections::VecDeque;
use std::sync::Arc as StdArc;
use std::sync::atomic::{AtomicUsize, Ordering as StdOrdering};
use std::task::{Context, Poll, Wake, Waker};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

use super::{
    Admission, CANCELLED, CLOSED_OUT, GRANTED, Refused, TryFail, WAITERS, WAITING, Waiter,
};
use super::{Pool, in_flight_of, limit_of};
use crate::sync::{Arc, Ordering, lock};

/// A waker that counts its wakes.
#[derive(Debug, Default)]
struct CountWaker(AtomicUsize);

impl CountWaker {
    fn count(&self) -> usize {
        self.0.load(StdOrdering::SeqCst)
    }
}

impl Wake for CountWaker {
    fn wake(self: StdArc<Self>) {
        self.0.fetch_add(1, StdOrdering::SeqCst);
    }

    fn wake_by_ref(self: &StdArc<Self>) {
        self.0.fetch_add(1, StdOrdering::SeqCst);
    }
}

fn new_waker() -> (StdArc<CountWaker>, Waker) {
    let c = StdArc::new(CountWaker::default());
    let w = Waker::from(c.clone());
    (c, w)
}

/// One step of a generated sequence. Indices pick among the eligible items
/// modulo their number; a step with nothing eligible is a no-op.
#[derive(Debug, Clone)]
enum Op {
    TryAcquire,
    /// Return one of the permits the test holds (they are interchangeable).
    Release,
    SetLimit(usize),
    Enqueue,
    /// Poll an outstanding waiter again; `true` polls with a fresh waker.
    Poll(usize, bool),
    Cancel(usize),
    Close,
    PollDrained,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::TryAcquire),
        4 => Just(Op::Release),
        3 => (1usize..=64).prop_map(Op::SetLimit),
        4 => Just(Op::Enqueue),
        3 => (any::<usize>(), any::<bool>()).prop_map(|(i, f)| Op::Poll(i, f)),
        2 => any::<usize>().prop_map(Op::Cancel),
        1 => Just(Op::Close),
        1 => Just(Op::PollDrained),
    ]
}

/// What the model expects of one waiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// In the queue.
    Queued,
    /// Handed a permit (counted in `in_flight`) with this snapshot; not yet
    /// collected by a poll.
    Granted(Admission),
    /// Woken by close without a permit; not yet collected.
    ClosedOut,
}

struct Slot {
    node: Option<Arc<Waiter>>,
    expect: Expect,
    /// The waker of the latest poll, and the count it must show.
    waker: StdArc<CountWaker>,
    wakes: usize,
    /// Wakers of earlier polls, with the counts they must keep.
    old: Vec<(StdArc<CountWaker>, usize)>,
}

/// The sequential model of the engine.
struct Model {
    limit: usize,
    in_flight: usize,
    closed: bool,
    /// Permits collected by the test (from `try_acquire` or a ready poll).
    held: usize,
    /// Indices into `slots` of the queued waiters, oldest first.
    queue: VecDeque<usize>,
    /// Waiters that have a node (queued, granted or closed out).
    slots: Vec<Slot>,
    /// A drain registration and the count its waker must show (at least).
    drain: Option<(Option<u64>, StdArc<CountWaker>, Waker)>,
    drain_done: bool,
    check_admission: bool,
}

impl Model {
    fn new(limit: usize, check_admission: bool) -> Self {
        Self {
            limit,
            in_flight: 0,
            closed: false,
            held: 0,
            queue: VecDeque::new(),
            slots: Vec::new(),
            drain: None,
            drain_done: false,
            check_admission,
        }
    }

    fn assert_admission(&self, got: Admission, want: Admission, what: &str) {
        if self.check_admission {
            assert_eq!(got, want, "admission snapshot of {what}");
        }
    }

    /// The model of a returned permit: handed to the oldest waiter when there
    /// is one and no debt, otherwise `in_flight -= 1`.
    fn give_back(&mut self) {
        assert!(self.in_flight > 0);
        if self.in_flight <= self.limit {
            if let Some(i) = self.queue.pop_front() {
                // The permit changes hands: `in_flight` is unchanged, and the
                // new holder's snapshot does not count itself.
                self.grant(
                    i,
                    Admission {
                        limit: self.limit,
                        in_flight: self.in_flight - 1,
                    },
                );
                return;
            }
        }
        self.in_flight -= 1;
    }

    fn grant(&mut self, i: usize, a: Admission) {
        let s = &mut self.slots[i];
        assert_eq!(s.expect, Expect::Queued);
        s.expect = Expect::Granted(a);
        s.wakes += 1;
    }

    fn granted_uncollected(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| matches!(s.expect, Expect::Granted(_)))
            .count()
    }

    fn step(&mut self, pool: &Pool, op: &Op) {
        match *op {
            Op::TryAcquire => {
                let got = pool.try_acquire();
                if self.closed {
                    assert_eq!(got, Err(TryFail::Closed));
                } else if self.in_flight >= self.limit {
                    // Also covers a non-empty queue: no barging.
                    assert_eq!(got, Err(TryFail::NoCapacity));
                } else {
                    assert!(self.queue.is_empty(), "free permit with waiters queued");
                    let a = got.expect("a free permit must be taken");
                    self.assert_admission(
                        a,
                        Admission {
                            limit: self.limit,
                            in_flight: self.in_flight,
                        },
                        "try_acquire",
                    );
                    self.in_flight += 1;
                    self.held += 1;
                }
            }
            Op::Release if self.held == 0 => {}
            Op::Release => {
                pool.release();
                self.held -= 1;
                self.give_back();
            }
            Op::SetLimit(n) => {
                let old = pool.set_limit(n);
                assert_eq!(old, self.limit, "set_limit returns the old limit");
                self.limit = n;
                while self.in_flight < self.limit {
                    let Some(i) = self.queue.pop_front() else {
                        break;
                    };
                    let a = Admission {
                        limit: self.limit,
                        in_flight: self.in_flight,
                    };
                    self.grant(i, a);
                    self.in_flight += 1;
                }
            }
            Op::Enqueue => {
                let (c, w) = new_waker();
                let mut node = None;
                let r = pool.poll_acquire(&mut node, &mut Context::from_waker(&w));
                if self.closed {
                    assert!(matches!(r, Poll::Ready(Err(Refused::Closed))), "{r:?}");
                    assert!(node.is_none());
                    assert_eq!(c.count(), 0);
                } else if self.in_flight < self.limit {
                    match r {
                        Poll::Ready(Ok(a)) => self.assert_admission(
                            a,
                            Admission {
                                limit: self.limit,
                                in_flight: self.in_flight,
                            },
                            "an immediate poll_acquire",
                        ),
                        other => panic!("free permit not taken: {other:?}"),
                    }
                    assert!(node.is_none());
                    assert_eq!(c.count(), 0);
                    self.in_flight += 1;
                    self.held += 1;
                } else {
                    assert!(r.is_pending(), "{r:?}");
                    assert!(node.is_some(), "a pending acquirer must get a node");
                    self.queue.push_back(self.slots.len());
                    self.slots.push(Slot {
                        node,
                        expect: Expect::Queued,
                        waker: c,
                        wakes: 0,
                        old: Vec::new(),
                    });
                }
            }
            Op::Poll(_, _) if self.slots.is_empty() => {}
            Op::Poll(i, fresh) => {
                let i = i % self.slots.len();
                let (waker, counter) = if fresh {
                    let (c, w) = new_waker();
                    (w, Some(c))
                } else {
                    (Waker::from(self.slots[i].waker.clone()), None)
                };
                let s = &mut self.slots[i];
                let r = pool.poll_acquire(&mut s.node, &mut Context::from_waker(&waker));
                match s.expect {
                    Expect::Queued => {
                        assert!(r.is_pending(), "queued waiter resolved: {r:?}");
                        assert!(s.node.is_some());
                        if let Some(c) = counter {
                            let old = std::mem::replace(&mut s.waker, c);
                            s.old.push((old, s.wakes));
                            s.wakes = 0;
                        }
                    }
                    Expect::Granted(want) => {
                        let Poll::Ready(Ok(a)) = r else {
                            panic!("granted waiter did not resolve: {r:?}");
                        };
                        assert!(s.node.is_none());
                        if self.check_admission {
                            assert_eq!(a, want, "admission snapshot of a granted waiter");
                        }
                        self.slots.remove(i);
                        self.fix_queue_after_remove(i);
                        self.held += 1;
                    }
                    Expect::ClosedOut => {
                        assert!(matches!(r, Poll::Ready(Err(Refused::Closed))), "{r:?}");
                        assert!(s.node.is_none());
                        self.slots.remove(i);
                        self.fix_queue_after_remove(i);
                    }
                }
            }
            Op::Cancel(_) if self.slots.is_empty() => {}
            Op::Cancel(i) => {
                let i = i % self.slots.len();
                let s = self.slots.remove(i);
                let node = s.node.as_ref().expect("outstanding slots have a node");
                let gave_back = pool.cancel(node);
                assert_eq!(
                    node.state.load(Ordering::Acquire),
                    match s.expect {
                        Expect::Queued => CANCELLED,
                        Expect::Granted(_) => GRANTED,
                        Expect::ClosedOut => CLOSED_OUT,
                    }
                );
                // The cancelled waiter's wakers keep their counts.
                assert_eq!(s.waker.count(), s.wakes);
                match s.expect {
                    Expect::Queued => {
                        assert!(!gave_back);
                        let pos = self
                            .queue
                            .iter()
                            .position(|&q| q == i)
                            .expect("queued slot is in the queue");
                        self.queue.remove(pos);
                        self.fix_queue_after_remove(i);
                    }
                    Expect::Granted(_) => {
                        assert!(gave_back, "a granted permit must be given back");
                        self.fix_queue_after_remove(i);
                        self.give_back();
                    }
                    Expect::ClosedOut => {
                        assert!(!gave_back);
                        self.fix_queue_after_remove(i);
                    }
                }
            }
            Op::Close => {
                let first = pool.close();
                assert_eq!(first, !self.closed, "close returns true once");
                self.closed = true;
                for i in std::mem::take(&mut self.queue) {
                    let s = &mut self.slots[i];
                    assert_eq!(s.expect, Expect::Queued);
                    s.expect = Expect::ClosedOut;
                    s.wakes += 1;
                }
            }
            Op::PollDrained => {
                let (id, c, w) = self.drain.take().unwrap_or_else(|| {
                    let (c, w) = new_waker();
                    (None, c, w)
                });
                let mut id = id;
                let r = pool.poll_drained(&mut id, &mut Context::from_waker(&w));
                let drained = self.closed && self.in_flight == 0;
                assert_eq!(r.is_ready(), drained, "drain readiness");
                if drained {
                    if let Some(id) = id {
                        pool.forget_drain(id);
                    }
                } else {
                    assert!(id.is_some(), "a pending drain registers");
                    self.drain = Some((id, c, w));
                }
            }
        }
        if let Some((_, c, _)) = &self.drain {
            if self.closed && self.in_flight == 0 {
                assert!(c.count() >= 1, "drain poller not woken");
                self.drain_done = true;
            } else {
                assert_eq!(c.count(), 0, "drain poller woken early");
            }
        }
    }

    fn fix_queue_after_remove(&mut self, removed: usize) {
        for q in &mut self.queue {
            assert_ne!(*q, removed);
            if *q > removed {
                *q -= 1;
            }
        }
    }

    /// Compares the pool with the model.
    fn check(&self, pool: &Pool) {
        let s = pool.state.load(Ordering::Acquire);
        let (limit, in_flight, closed) = pool.snapshot();
        assert_eq!(
            (limit, in_flight, closed),
            (self.limit, self.in_flight, self.closed),
            "(limit, in_flight, closed)"
        );
        assert_eq!((limit_of(s), in_flight_of(s)), (limit, in_flight));
        assert_eq!(pool.limit(), limit);
        assert_eq!(pool.in_flight(), in_flight);
        assert_eq!(pool.is_closed(), closed);
        let (available, debt) = (pool.available(), pool.debt());
        assert_eq!(available + in_flight - debt, limit, "accounting invariant");
        assert_eq!(available, limit.saturating_sub(in_flight));
        assert_eq!(debt, in_flight.saturating_sub(limit));
        // Nothing lost or duplicated.
        assert_eq!(
            self.held + self.granted_uncollected(),
            in_flight,
            "held + granted-uncollected == in_flight"
        );
        // WAITERS semantics.
        let waiters_bit = s & WAITERS != 0;
        assert_eq!(waiters_bit, !self.queue.is_empty(), "WAITERS bit");
        if waiters_bit {
            assert!(in_flight >= limit, "WAITERS set with a free permit");
            assert!(!closed, "WAITERS set on a closed pool");
        }
        {
            let q = lock(&pool.queue);
            let ids: Vec<_> = q.waiters.iter().map(Arc::as_ptr).collect();
            let want: Vec<_> = self
                .queue
                .iter()
                .map(|&i| {
                    let n = self.slots[i].node.as_ref().expect("queued slot has a node");
                    Arc::as_ptr(n)
                })
                .collect();
            assert_eq!(ids, want, "queue order (FIFO)");
        }
        for s in &self.slots {
            let node = s.node.as_ref().expect("outstanding slots have a node");
            let st = node.state.load(Ordering::Acquire);
            let want = match s.expect {
                Expect::Queued => WAITING,
                Expect::Granted(_) => GRANTED,
                Expect::ClosedOut => CLOSED_OUT,
            };
            assert_eq!(st, want, "waiter state");
            assert_eq!(s.waker.count(), s.wakes, "wakes of the latest waker");
            for (c, n) in &s.old {
                assert_eq!(c.count(), *n, "a replaced waker must not be woken");
            }
        }
    }

    /// Gives everything back and checks that nothing was lost.
    fn finish(&mut self, pool: &Pool) {
        while let Some(s) = self.slots.pop() {
            let node = s.node.as_ref().expect("outstanding slots have a node");
            let gave_back = pool.cancel(node);
            assert_eq!(gave_back, matches!(s.expect, Expect::Granted(_)));
        }
        for _ in 0..self.held {
            pool.release();
        }
        let (limit, in_flight, closed) = pool.snapshot();
        assert_eq!(in_flight, 0, "permits lost or duplicated");
        assert_eq!(limit, self.limit);
        assert_eq!(pool.available(), limit);
        assert_eq!(pool.debt(), 0);
        assert_eq!(pool.state.load(Ordering::Acquire) & WAITERS, 0);
        assert!(lock(&pool.queue).waiters.is_empty());
        if closed {
            let (c, w) = new_waker();
            let mut id = None;
            assert!(
                pool.poll_drained(&mut id, &mut Context::from_waker(&w))
                    .is_ready()
            );
            assert_eq!(c.count(), 0);
            if let Some((_, c, _)) = &self.drain {
                assert!(c.count() >= 1, "drain poller not woken");
            }
        } else {
            assert_eq!(pool.try_acquire().map(|a| a.in_flight), Ok(0));
            pool.release();
        }
    }
}

fn run(initial: usize, ops: &[Op], check_admission: bool) {
    let pool = Pool::new(initial);
    let mut m = Model::new(initial, check_admission);
    m.check(&pool);
    for op in ops {
        m.step(&pool, op);
        m.check(&pool);
    }
    m.finish(&pool);
}

fn config(cases: u32, seed: u64) -> Config {
    Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config(1024, 0x00ad_a971))]

    /// Accounting, FIFO, wake-up, close and drain semantics.
    #[test]
    fn pool_matches_model(initial in 1usize..=64, ops in prop::collection::vec(op(), 1..96)) {
        run(initial, &ops, false);
    }
}

proptest! {
    #![proptest_config(config(512, 0x00ad_a972))]

    /// As `pool_matches_model`, also checking every admission snapshot
    /// (`in_flight` not counting the admitted permit itself).
    #[test]
    fn pool_admission_snapshots_match_model(
        initial in 1usize..=8,
        ops in prop::collection::vec(op(), 1..64),
    ) {
        run(initial, &ops, true);
    }
}

/// Small limits with many waiters: the handover path dominates.
#[test]
fn handover_heavy_sequences() {
    let mut seed = 0x5eed_u64;
    for _ in 0..200 {
        let mut ops = Vec::new();
        for _ in 0..80 {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let r = (seed >> 33) as usize;
            ops.push(match r % 10 {
                0..=2 => Op::Enqueue,
                3..=5 => Op::Release,
                6 => Op::TryAcquire,
                7 => Op::Poll(r / 10, r % 3 == 0),
                8 => Op::Cancel(r / 10),
                _ => Op::SetLimit(1 + r / 10 % 3),
            });
        }
        run(1, &ops, false);
    }
}

/// The documented snapshot of a permit handed over by `release`: the limit
/// then and the operations in flight, not counting the admitted one.
#[test]
fn handover_admission_excludes_the_admitted_permit() {
    let pool = Pool::new(1);
    assert_eq!(
        pool.try_acquire(),
        Ok(Admission {
            limit: 1,
            in_flight: 0
        })
    );
    let (_, w) = new_waker();
    let mut node = None;
    assert!(
        pool.poll_acquire(&mut node, &mut Context::from_waker(&w))
            .is_pending()
    );
    pool.release();
    let r = pool.poll_acquire(&mut node, &mut Context::from_waker(&w));
    // The releaser is gone and the waiter is not counted: nothing else is in
    // flight, exactly as a `try_acquire` at that instant would have reported.
    assert!(
        matches!(
            r,
            Poll::Ready(Ok(Admission {
                limit: 1,
                in_flight: 0
            }))
        ),
        "{r:?}"
    );
    pool.release();
    assert_eq!(pool.in_flight(), 0);
}
