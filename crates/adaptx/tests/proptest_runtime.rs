//! Property tests of run-time control: random sequences of admissions
//! (`try_acquire`, `acquire` left waiting), releases, window closes, mode
//! switches, reconfigurations (valid and invalid), forced limits and their
//! release, and `reset_stats`, on limiters with and without partitions.
//! Every waiting acquire is polled after each step, so a permit granted to
//! it is in the test's hands. After every step:
//!
//! * the permits the test holds are exactly `in_flight` (no permit lost or
//!   made twice by any transition);
//! * `available + in_flight − debt == limit`, and `available` is never
//!   above the limit;
//! * `min ≤ limit ≤ max` unless a limit is forced, and then `limit` is the
//!   forced value (the forced limit overrides the bounds);
//! * in shadow and bypass mode nobody waits and `try_acquire` succeeds on
//!   an open limiter; in enforce mode (unpartitioned) it succeeds exactly
//!   when a permit is free and nobody waits;
//! * `total == success + failures + dropped + in_flight`, and (unpartitioned)
//!   `rejected` and `would_reject` are the model's;
//! * a refused reconfiguration or forced limit changes nothing;
//!
//! and at the end, with everything dropped and the mode back to enforce,
//! exactly `limit` permits can be taken.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use adaptx::{
    Acquire, Algorithm, Class, Limiter, ManualClock, Mode, Outcome, OwnedPermit, Partitions,
};
use common::proptest_config as config;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    TryAcquire(usize),
    /// `acquire_owned_as`, kept waiting if it is not ready.
    Acquire(usize),
    /// Drop the waiting acquire at this index (modulo the number waiting).
    DropWaiter(usize),
    /// End the held permit at this index: an outcome, or a drop.
    Release(usize, Option<bool>),
    /// Advance the manual clock by this many milliseconds.
    Advance(u64),
    SetMode(Mode),
    /// `reconfigure` with these bounds (0 is invalid).
    Bounds(usize, usize),
    Law(Algorithm),
    Window(u64, bool),
    Force(usize),
    ReleaseForce,
    ResetStats,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0usize..3).prop_map(Op::TryAcquire),
        3 => (0usize..3).prop_map(Op::Acquire),
        1 => any::<usize>().prop_map(Op::DropWaiter),
        8 => (any::<usize>(), prop_oneof![Just(None), any::<bool>().prop_map(Some)])
            .prop_map(|(i, e)| Op::Release(i, e)),
        3 => (0u64..1_500).prop_map(Op::Advance),
        2 => prop_oneof![Just(Mode::Enforce), Just(Mode::Shadow), Just(Mode::Bypass)]
            .prop_map(Op::SetMode),
        2 => (0usize..12, 0usize..24).prop_map(|(a, b)| Op::Bounds(a, b)),
        1 => prop_oneof![
            Just(Algorithm::Aimd),
            Just(Algorithm::Vegas),
            Just(Algorithm::Gradient),
            Just(Algorithm::Ceiling)
        ]
        .prop_map(Op::Law),
        1 => (0u64..1_500, any::<bool>()).prop_map(|(ms, a)| Op::Window(ms, a)),
        2 => (0usize..30).prop_map(Op::Force),
        1 => Just(Op::ReleaseForce),
        1 => Just(Op::ResetStats),
    ]
}

/// The counters the test can predict exactly (unpartitioned).
#[derive(Debug, Default)]
struct Model {
    rejected: u64,
    would_reject: u64,
}

struct Harness {
    limiter: Limiter,
    clock: ManualClock,
    classes: Vec<Class>,
    partitioned: bool,
    held: Vec<OwnedPermit>,
    waiting: Vec<Pin<Box<Acquire<'static>>>>,
    model: Model,
}

fn poll<F: Future + ?Sized>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

impl Harness {
    fn new(partitioned: bool, initial: usize) -> Self {
        let clock = ManualClock::new();
        let mut b = Limiter::builder()
            .algorithm(Algorithm::Aimd)
            .initial_limit(initial)
            .min_limit(1)
            .max_limit(16)
            .warmup_samples(0)
            .jitter(0.0)
            .clock(clock.clone());
        if partitioned {
            b = b.partitions(Partitions::new().share("a", 0.4).share("b", 0.3));
        }
        let limiter = b.build().expect("valid");
        let classes = if partitioned {
            ["default", "a", "b"]
                .iter()
                .map(|n| limiter.class(n).expect("known"))
                .collect()
        } else {
            vec![Class::default(); 3]
        };
        Self {
            limiter,
            clock,
            classes,
            partitioned,
            held: Vec::new(),
            waiting: Vec::new(),
            model: Model::default(),
        }
    }

    /// Whether an unpartitioned admission now is above the limit.
    fn full(&self) -> bool {
        self.limiter.in_flight() >= self.limiter.limit() || self.limiter.waiting() > 0
    }

    fn step(&mut self, op: &Op) {
        let l = self.limiter.clone();
        match *op {
            Op::TryAcquire(c) => {
                let over = self.full();
                let free = !over;
                match l.try_acquire_owned_as(self.classes[c]) {
                    Ok(p) => {
                        if !self.partitioned {
                            assert!(free || l.mode() != Mode::Enforce);
                            self.model.would_reject += u64::from(over);
                        }
                        self.held.push(p);
                    }
                    Err(_) => {
                        if !self.partitioned {
                            assert!(over && l.mode() == Mode::Enforce);
                        }
                        self.model.rejected += 1;
                    }
                }
            }
            Op::Acquire(c) => {
                let over = self.full();
                let mut f = Box::pin(l.acquire_owned_as(self.classes[c]));
                match poll(f.as_mut()) {
                    Poll::Ready(Ok(p)) => {
                        self.model.would_reject += u64::from(over && !self.partitioned);
                        self.held.push(p);
                    }
                    Poll::Ready(Err(_)) => self.model.rejected += 1,
                    Poll::Pending => {
                        assert_eq!(l.mode(), Mode::Enforce, "no one waits over the limit");
                        self.waiting.push(f);
                    }
                }
            }
            Op::DropWaiter(i) => {
                if !self.waiting.is_empty() {
                    let i = i % self.waiting.len();
                    drop(self.waiting.swap_remove(i));
                    self.model.rejected += 1;
                }
            }
            Op::Release(i, outcome) => {
                if !self.held.is_empty() {
                    let i = i % self.held.len();
                    let p = self.held.swap_remove(i);
                    match outcome {
                        Some(ok) => p.record_with_latency(
                            Outcome::from_success(ok),
                            Duration::from_millis(5),
                        ),
                        None => drop(p),
                    }
                }
            }
            Op::Advance(ms) => self.clock.advance(Duration::from_millis(ms)),
            Op::SetMode(m) => {
                let granted = self.waiting.len() as u64;
                l.set_mode(m);
                if m != Mode::Enforce && !self.partitioned {
                    // Every waiter is granted above the limit.
                    self.model.would_reject += granted;
                }
            }
            Op::Bounds(min, max) => {
                let before = l.stats();
                let r = l.reconfigure(|b| b.min_limit(min).max_limit(max));
                if min == 0 || max == 0 || max < min {
                    let e = r.expect_err("0, or a max below the min, is out of range");
                    assert_eq!(e.field(), if min == 0 { "min_limit" } else { "max_limit" });
                    let after = l.stats();
                    assert_eq!(
                        (after.limit, after.min_limit, after.max_limit),
                        (before.limit, before.min_limit, before.max_limit),
                        "a refused change changes nothing"
                    );
                } else {
                    r.expect("valid");
                    let s = l.stats();
                    assert_eq!((s.min_limit, s.max_limit), (min, max));
                }
            }
            Op::Law(a) => {
                l.reconfigure(|b| b.algorithm(a)).expect("valid");
                assert_eq!(l.algorithm(), a.to_string());
            }
            Op::Window(ms, adaptive) => {
                let r = l.reconfigure(|b| {
                    let b = b.sample_window(Duration::from_millis(ms));
                    if adaptive {
                        b.sample_window_adaptive(2, 2.0)
                    } else {
                        b.sample_window_fixed()
                    }
                });
                assert_eq!(r.is_ok(), ms > 0);
            }
            Op::Force(n) => {
                let before = l.limit();
                match l.force_limit(n) {
                    Ok(()) => assert_eq!((l.limit(), l.forced_limit()), (n, Some(n))),
                    Err(e) => {
                        assert_eq!((n, e.field()), (0, "forced_limit"));
                        assert_eq!(l.limit(), before);
                    }
                }
            }
            Op::ReleaseForce => {
                l.release_forced_limit();
                assert_eq!(l.forced_limit(), None);
            }
            Op::ResetStats => {
                l.reset_stats();
                self.model = Model::default();
            }
        }
        self.settle();
    }

    /// Polls every waiting acquire: a granted one hands its permit over.
    fn settle(&mut self) {
        let mut still = Vec::new();
        for mut f in self.waiting.drain(..) {
            match poll(f.as_mut()) {
                Poll::Ready(Ok(p)) => self.held.push(p),
                Poll::Ready(Err(_)) => self.model.rejected += 1,
                Poll::Pending => still.push(f),
            }
        }
        self.waiting = still;
    }

    fn check(&self) {
        let l = &self.limiter;
        let s = l.stats();
        assert_eq!(s.in_flight, self.held.len(), "in flight = permits held");
        assert_eq!(l.available() + l.in_flight() - l.debt(), l.limit());
        assert!(l.available() <= l.limit());
        match s.forced_limit {
            Some(f) => assert_eq!(s.limit, f),
            None => assert!(
                (s.min_limit..=s.max_limit).contains(&s.limit),
                "{} not in [{}, {}]",
                s.limit,
                s.min_limit,
                s.max_limit
            ),
        }
        if s.mode != Mode::Enforce {
            assert!(self.waiting.is_empty() && l.waiting() == 0);
            assert!(l.allow());
        }
        assert_eq!(
            s.total,
            s.success + s.failures + s.dropped + s.in_flight as u64
        );
        if !self.partitioned {
            assert_eq!(
                (s.rejected, s.would_reject),
                (self.model.rejected, self.model.would_reject)
            );
        }
    }

    /// Drops everything; then exactly `limit` permits can be taken.
    fn finish(mut self) {
        self.waiting.clear();
        self.held.clear();
        let l = self.limiter.clone();
        assert_eq!(l.in_flight(), 0);
        l.set_mode(Mode::Enforce);
        let limit = l.limit();
        assert_eq!(l.available(), limit);
        // Take from every class in turn until all refuse: the partition rule
        // lets the classes together fill the limit exactly.
        let mut all = Vec::new();
        loop {
            let before = all.len();
            for &c in &self.classes {
                if let Ok(p) = l.try_acquire_owned_as(c) {
                    all.push(p);
                }
            }
            if all.len() == before {
                break;
            }
        }
        assert_eq!(all.len(), limit, "every permit is back, and no permit more");
        drop(all);
        assert_eq!(l.in_flight(), 0);
    }
}

proptest! {
    #![proptest_config(config(256, 0x5a_d0_77_11))]

    #[test]
    fn runtime_transitions_keep_every_invariant(
        partitioned in any::<bool>(),
        initial in 1usize..=16,
        ops in prop::collection::vec(op(), 1..120),
    ) {
        let mut h = Harness::new(partitioned, initial);
        h.check();
        for op in &ops {
            h.step(op);
            h.check();
        }
        h.finish();
    }
}
