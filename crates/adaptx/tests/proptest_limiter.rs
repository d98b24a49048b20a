//! Property tests of the public [`Limiter`] API.
//!
//! Random sequences of admissions, releases (success, failure, explicit
//! latency, skipped sample, drop), abandoned acquires, manual-clock advances
//! (so windows close and the limit grows and shrinks), `close` and
//! `reset_stats` run against limiters with random bounds, warmup, jitter and
//! control law. The test keeps the permits it holds and a model of the
//! counters; after every step it checks:
//!
//! * `min ≤ limit ≤ max`, `in_flight ≤ max`, and
//!   `available + in_flight − debt == limit`;
//! * the permits the test holds are exactly `in_flight`;
//! * `try_acquire` succeeds exactly when the pool has a free permit and is
//!   open, with the admission snapshot of that instant;
//! * the statistics: `total == success + failures + dropped + in_flight`, and
//!   each counter equals the model's (rejections included);
//! * the limit moves only when a sampled completion closes a window (or on
//!   `reset_stats`), never after close, and each move counts as one increase
//!   or decrease;
//!
//! and at the end that dropping every permit leaves nothing in flight.

mod common;

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use adaptx::{Algorithm, Limiter, ManualClock, Outcome, OwnedPermit, TryAcquireError};
use common::proptest_config as config;
use proptest::prelude::*;

/// How a held permit ends.
#[derive(Debug, Clone, Copy)]
enum End {
    Success,
    Failure,
    Latency(bool, u64),
    Skipped(bool),
    Dropped,
}

#[derive(Debug, Clone)]
enum Op {
    /// `try_acquire_owned`.
    TryAcquire,
    /// `acquire_owned`, polled once and dropped if it is not ready.
    AcquireOnce,
    /// End the held permit at this index (modulo the number held).
    Release(usize, End),
    /// Advance the manual clock by this many microseconds.
    Advance(u64),
    Close,
    ResetStats,
}

fn end() -> impl Strategy<Value = End> {
    prop_oneof![
        3 => Just(End::Success),
        2 => Just(End::Failure),
        4 => (any::<bool>(), 0u64..5_000).prop_map(|(ok, us)| End::Latency(ok, us)),
        1 => any::<bool>().prop_map(End::Skipped),
        1 => Just(End::Dropped),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => Just(Op::TryAcquire),
        1 => Just(Op::AcquireOnce),
        7 => (any::<usize>(), end()).prop_map(|(i, e)| Op::Release(i, e)),
        3 => (0u64..2_500).prop_map(Op::Advance),
        1 => Just(Op::Close),
        1 => Just(Op::ResetStats),
    ]
}

#[derive(Debug, Clone)]
struct Setup {
    algorithm: Algorithm,
    min: usize,
    max: usize,
    initial: usize,
    warmup: u64,
    jitter: f64,
    seed: u64,
}

fn setup() -> impl Strategy<Value = Setup> {
    (
        prop_oneof![
            Just(Algorithm::Aimd),
            Just(Algorithm::Vegas),
            Just(Algorithm::Gradient)
        ],
        1usize..=4,
        4usize..=64,
        1usize..=64,
        0u64..=3,
        prop_oneof![Just(0.0), Just(0.5)],
        any::<u64>(),
    )
        .prop_map(
            |(algorithm, min, max, initial, warmup, jitter, seed)| Setup {
                algorithm,
                min,
                max,
                initial,
                warmup,
                jitter,
                seed,
            },
        )
}

/// The counters the test expects, since construction or the last reset.
#[derive(Debug, Default)]
struct Counts {
    success: u64,
    failures: u64,
    dropped: u64,
    rejected: u64,
    increases: u64,
    decreases: u64,
}

struct Harness {
    limiter: Limiter,
    clock: ManualClock,
    min: usize,
    max: usize,
    initial: usize,
    held: Vec<OwnedPermit>,
    closed: bool,
    counts: Counts,
}

impl Harness {
    fn new(s: &Setup) -> Self {
        let clock = ManualClock::new();
        let limiter = Limiter::builder()
            .algorithm(s.algorithm)
            .clock(clock.clone())
            .sample_window(Duration::from_millis(1))
            .min_limit(s.min)
            .max_limit(s.max)
            .initial_limit(s.initial)
            .warmup_samples(s.warmup)
            .target_latency(Duration::from_millis(1))
            .jitter(s.jitter)
            .seed(s.seed)
            .build()
            .expect("valid configuration");
        let initial = s.initial.clamp(s.min, s.max);
        assert_eq!(limiter.limit(), initial);
        Self {
            limiter,
            clock,
            min: s.min,
            max: s.max,
            initial,
            held: Vec::new(),
            closed: false,
            counts: Counts::default(),
        }
    }

    /// Takes a permit if the model says one is free; checks the error and
    /// the admission snapshot otherwise.
    fn try_acquire(&mut self) {
        let l = &self.limiter;
        let (limit, in_flight) = (l.limit(), l.in_flight());
        match l.try_acquire_owned() {
            Ok(p) => {
                assert!(!self.closed, "admitted after close");
                assert!(in_flight < limit, "admitted with no free permit");
                assert_eq!(p.limit_at_admission(), limit);
                assert_eq!(p.in_flight_at_admission(), in_flight);
                self.held.push(p);
            }
            Err(e) => {
                let want = if self.closed {
                    TryAcquireError::Closed
                } else {
                    assert!(in_flight >= limit, "rejected with a free permit");
                    TryAcquireError::NoCapacity
                };
                assert_eq!(e, want);
                self.counts.rejected += 1;
            }
        }
    }

    /// Polls one `acquire_owned` once; a pending acquirer is dropped (given
    /// up), which counts as a rejection.
    fn acquire_once(&mut self) {
        let l = &self.limiter;
        let (limit, in_flight) = (l.limit(), l.in_flight());
        let mut fut = pin!(l.acquire_owned());
        match fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(Ok(p)) => {
                assert!(!self.closed && in_flight < limit);
                assert_eq!(p.in_flight_at_admission(), in_flight);
                self.held.push(p);
            }
            Poll::Ready(Err(_)) => {
                assert!(self.closed);
                self.counts.rejected += 1;
            }
            Poll::Pending => {
                assert!(!self.closed && in_flight >= limit);
                self.counts.rejected += 1;
            }
        }
    }

    fn release(&mut self, i: usize, how: End) {
        if self.held.is_empty() {
            return;
        }
        let p = self.held.swap_remove(i % self.held.len());
        let before = self.limiter.limit();
        let sampled = match how {
            End::Success => {
                p.success();
                self.counts.success += 1;
                true
            }
            End::Failure => {
                p.failure();
                self.counts.failures += 1;
                true
            }
            End::Latency(ok, us) => {
                p.record_with_latency(Outcome::from_success(ok), Duration::from_micros(us));
                if ok {
                    self.counts.success += 1;
                } else {
                    self.counts.failures += 1;
                }
                true
            }
            End::Skipped(ok) => {
                p.record_skipped(Outcome::from_success(ok));
                if ok {
                    self.counts.success += 1;
                } else {
                    self.counts.failures += 1;
                }
                false
            }
            End::Dropped => {
                drop(p);
                self.counts.dropped += 1;
                false
            }
        };
        let after = self.limiter.limit();
        if after != before {
            assert!(sampled, "the limit moved on an unsampled completion");
            assert!(!self.closed, "the limit moved after close");
            if after > before {
                self.counts.increases += 1;
            } else {
                self.counts.decreases += 1;
            }
        }
    }

    fn step(&mut self, op: &Op) {
        let limit_before = self.limiter.limit();
        match *op {
            Op::TryAcquire => self.try_acquire(),
            Op::AcquireOnce => self.acquire_once(),
            Op::Release(i, how) => self.release(i, how),
            Op::Advance(us) => self.clock.advance(Duration::from_micros(us)),
            Op::Close => {
                assert_eq!(self.limiter.close(), !self.closed);
                self.closed = true;
                assert!(self.limiter.is_closed());
            }
            Op::ResetStats => {
                self.limiter.reset_stats();
                self.counts = Counts::default();
                let want = self.initial.max(self.held.len()).min(self.max);
                assert_eq!(self.limiter.limit(), want, "limit after reset_stats");
            }
        }
        if !matches!(op, Op::Release(..) | Op::ResetStats) {
            assert_eq!(self.limiter.limit(), limit_before, "limit moved on {op:?}");
        }
    }

    fn check(&self) {
        let l = &self.limiter;
        let (limit, in_flight) = (l.limit(), l.in_flight());
        assert!(
            (self.min..=self.max).contains(&limit),
            "limit {limit} outside [{}, {}]",
            self.min,
            self.max
        );
        assert!(in_flight <= self.max, "in_flight {in_flight} > max");
        assert_eq!(in_flight, self.held.len(), "held permits != in_flight");
        let (available, debt) = (l.available(), l.debt());
        assert_eq!(available + in_flight - debt, limit, "accounting invariant");
        assert_eq!(available, limit.saturating_sub(in_flight));
        assert_eq!(debt, in_flight.saturating_sub(limit));
        assert_eq!(l.allow(), !self.closed && in_flight < limit);
        assert_eq!(l.is_closed(), self.closed);

        let s = l.stats();
        let c = &self.counts;
        assert_eq!(
            s.total,
            c.success + c.failures + c.dropped + in_flight as u64,
            "total against the model: {s:?} vs {c:?}"
        );
        assert_eq!((s.limit, s.in_flight), (limit, in_flight));
        assert_eq!((s.min_limit, s.max_limit), (self.min, self.max));
        assert_eq!(
            (
                s.success,
                s.failures,
                s.dropped,
                s.rejected,
                s.increases,
                s.decreases
            ),
            (
                c.success,
                c.failures,
                c.dropped,
                c.rejected,
                c.increases,
                c.decreases
            ),
            "counters: {s:?} vs {c:?}"
        );
        assert!(s.min_latency <= s.p50_latency && s.p50_latency <= s.p99_latency);
        assert!(s.p99_latency <= s.max_latency);
    }

    fn finish(mut self) {
        let dropped_here = self.held.len() as u64;
        self.held.clear();
        let l = &self.limiter;
        assert_eq!(l.in_flight(), 0, "permits leaked");
        assert_eq!(l.debt(), 0);
        assert_eq!(l.available(), l.limit());
        let s = l.stats();
        let c = &self.counts;
        assert_eq!(
            (s.success, s.failures, s.dropped),
            (c.success, c.failures, c.dropped + dropped_here),
            "{s:?} vs {c:?}"
        );
        if self.closed {
            l.close_blocking(Duration::from_secs(1))
                .expect("a closed limiter with nothing in flight is drained");
        }
    }
}

proptest! {
    #![proptest_config(config(192, 0x11_a1_7e_55))]

    #[test]
    fn limiter_invariants_hold(setup in setup(), ops in prop::collection::vec(op(), 1..112)) {
        let mut h = Harness::new(&setup);
        h.check();
        for op in &ops {
            h.step(op);
            h.check();
        }
        h.finish();
    }
}

/// Long saturated runs without close: many windows close, so the limit hits
/// both bounds.
#[test]
fn long_saturated_runs_stay_in_bounds() {
    let mut seed = 7u64;
    let mut next = move || {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        seed >> 33
    };
    for algorithm in [Algorithm::Aimd, Algorithm::Vegas, Algorithm::Gradient] {
        let setup = Setup {
            algorithm,
            min: 2,
            max: 12,
            initial: 4,
            warmup: 0,
            jitter: 0.0,
            seed: 1,
        };
        let mut h = Harness::new(&setup);
        let (mut saw_down, mut saw_max) = (false, false);
        for _ in 0..2_000 {
            let r = next();
            let op = match r % 8 {
                0..=3 => Op::TryAcquire,
                4..=5 => Op::Release(
                    r as usize,
                    if r % 97 == 0 {
                        End::Failure
                    } else {
                        End::Latency(true, 1_000 + r % 50)
                    },
                ),
                _ => Op::Advance(400),
            };
            let before = h.limiter.limit();
            h.step(&op);
            h.check();
            saw_down |= h.limiter.limit() < before;
            saw_max |= h.limiter.limit() == setup.max;
        }
        assert!(
            saw_max,
            "{algorithm:?} never reached max: {:?}",
            h.limiter.stats()
        );
        assert!(
            saw_down,
            "{algorithm:?} never cut the limit: {:?}",
            h.limiter.stats()
        );
        h.finish();
    }
}
