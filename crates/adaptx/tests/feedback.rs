//! Honest feedback: what the control law is handed is what happened.
//!
//! One test per defect of issue 8, each named after it:
//!
//! 1. a window's summary is exact under concurrent completions;
//! 2. one decrease per overload episode (failures of operations admitted
//!    before the last decrease do not cut again), for every law;
//! 3. no decrease without overload evidence (latency noise at low
//!    concurrency);
//! 4. accounting (the rate permit clamps its latency like the limiter's).
//!
//! Everything runs on a [`ManualClock`]; randomness is a seeded splitmix64.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use adaptx::{
    Algorithm, ControlLaw, Limiter, ManualClock, OwnedPermit, RateLimiter, WindowSummary,
};

mod common;
use common::{MS, SplitMix};

// ---------------------------------------------------------------------------
// 1. A window's summary must be exact.
// ---------------------------------------------------------------------------

/// What a spy law saw of every window, in atomics so that the test can read
/// it while the limiter owns the law.
#[derive(Debug, Default)]
struct Seen {
    windows: AtomicU64,
    samples: AtomicU64,
    failures: AtomicU64,
    /// Windows whose mean or minimum was not exactly the one latency used,
    /// or whose slowest success was not it within a histogram bucket.
    inexact: AtomicU64,
}

/// A law that holds the limit and checks every window against the one
/// latency the test records.
#[derive(Debug)]
struct Spy {
    latency_nanos: f64,
    seen: Arc<Seen>,
}

impl ControlLaw for Spy {
    fn name(&self) -> &'static str {
        "spy"
    }

    fn next_limit(&mut self, limit: usize, w: &WindowSummary) -> usize {
        self.seen.windows.fetch_add(1, Ordering::Relaxed);
        self.seen.samples.fetch_add(w.samples, Ordering::Relaxed);
        self.seen
            .failures
            .fetch_add(w.failures + w.stale_failures, Ordering::Relaxed);
        if w.mean_rtt_nanos != self.latency_nanos || w.min_rtt_nanos != self.latency_nanos {
            self.seen.inexact.fetch_add(1, Ordering::Relaxed);
        }
        // The slowest success, from the latency histograms: within a
        // bucket (0.8 %); none where every sample failed.
        let max = if w.samples > w.failures + w.stale_failures {
            (w.max_ok_rtt_nanos / self.latency_nanos - 1.0).abs() <= 1.0 / 128.0
        } else {
            w.max_ok_rtt_nanos == 0.0
        };
        if !max {
            self.seen.inexact.fetch_add(1, Ordering::Relaxed);
        }
        limit
    }
}

/// Four threads complete operations of exactly 1 ms each, while one of them
/// advances the clock so that 100 µs windows close constantly: the reported
/// race. One operation in `fail_every` fails (none for `None`), so failures
/// cross windows too. Returns the limiter and the successes and failures
/// the test itself recorded.
fn four_threads_one_latency(
    builder: adaptx::Builder,
    clock: &ManualClock,
    fail_every: Option<u64>,
) -> (Limiter, u64, u64) {
    let limiter = builder
        .sample_window(Duration::from_micros(100))
        .warmup_samples(0)
        .clock(clock.clone())
        .build()
        .expect("valid configuration");
    let ok = AtomicU64::new(0);
    let failed = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (limiter, clock, ok, failed) = (&limiter, clock, &ok, &failed);
            s.spawn(move || {
                for i in 0..40_000u64 {
                    if t == 0 && i % 2 == 0 {
                        clock.advance(Duration::from_micros(25));
                    }
                    let Ok(permit) = limiter.try_acquire() else {
                        continue;
                    };
                    if fail_every.is_some_and(|n| (i + t) % n == 0) {
                        permit.record_with_latency(adaptx::Outcome::Failure, MS);
                        failed.fetch_add(1, Ordering::Relaxed);
                    } else {
                        permit.record_with_latency(adaptx::Outcome::Success, MS);
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    (
        limiter,
        ok.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed),
    )
}

#[test]
fn window_summary_is_exact_under_concurrent_completions() {
    let seen = Arc::new(Seen::default());
    let clock = ManualClock::new();
    let builder = Limiter::builder()
        .law(Spy {
            latency_nanos: 1e6,
            seen: seen.clone(),
        })
        .initial_limit(64)
        .max_limit(64);
    let (limiter, ok, failed) = four_threads_one_latency(builder, &clock, Some(64));
    // Close the window in progress so that every sample has been handed over.
    clock.advance(Duration::from_secs(1));
    limiter
        .try_acquire()
        .expect("nothing is in flight")
        .record_with_latency(adaptx::Outcome::Success, MS);
    let windows = seen.windows.load(Ordering::Relaxed);
    assert!(windows > 1_000, "only {windows} windows closed");
    assert_eq!(
        seen.inexact.load(Ordering::Relaxed),
        0,
        "windows whose mean, minimum or slowest success was not the 1 ms every sample took"
    );
    // Every sample the test recorded reached the law exactly once.
    assert_eq!(seen.samples.load(Ordering::Relaxed), ok + failed + 1);
    assert_eq!(seen.failures.load(Ordering::Relaxed), failed);
    let s = limiter.stats();
    assert_eq!((s.success, s.failures), (ok + 1, failed));
}

#[test]
fn window_summary_is_exact_vegas_keeps_its_floor_and_its_limit() {
    // No failures here: Vegas must see a flat 1 ms and never cut.
    let clock = ManualClock::new();
    let builder = Limiter::builder()
        .algorithm(Algorithm::Vegas)
        .initial_limit(64)
        .max_limit(64);
    let (limiter, _, failed) = four_threads_one_latency(builder, &clock, None);
    assert_eq!(failed, 0);
    assert_eq!(limiter.min_latency_estimate(), Some(MS), "RTT_min moved");
    let s = limiter.stats();
    assert_eq!(s.decreases, 0, "Vegas cut on a flat 1 ms: {s:?}");
    assert_eq!(limiter.limit(), 64);
}

// ---------------------------------------------------------------------------
// 2. One decrease per overload episode.
// ---------------------------------------------------------------------------

/// A user's law with no notion of epochs: halve on any failure it is
/// shown, else hold. It counts the fresh and the stale failures it was told
/// of.
#[derive(Debug, Default)]
struct HalveOnFailure(Arc<[AtomicU64; 2]>);

impl ControlLaw for HalveOnFailure {
    fn name(&self) -> &'static str {
        "halve-on-failure"
    }

    fn next_limit(&mut self, limit: usize, w: &WindowSummary) -> usize {
        self.0[0].fetch_add(w.failures, Ordering::Relaxed);
        self.0[1].fetch_add(w.stale_failures, Ordering::Relaxed);
        if w.failures > 0 { limit / 2 } else { limit }
    }
}

fn with_law(b: adaptx::Builder, law: &str) -> adaptx::Builder {
    match law {
        "aimd" => b.algorithm(Algorithm::Aimd),
        "vegas" => b.algorithm(Algorithm::Vegas),
        "gradient" => b.algorithm(Algorithm::Gradient),
        _ => b.law(HalveOnFailure::default()),
    }
}

const LAWS: [&str; 4] = ["aimd", "vegas", "gradient", "user"];

/// Closes the window in progress with one extra success.
fn close_window(limiter: &Limiter, clock: &ManualClock) {
    clock.advance(Duration::from_secs(1));
    limiter
        .try_acquire_owned()
        .expect("a permit is free")
        .record_with_latency(adaptx::Outcome::Success, MS);
}

#[test]
fn one_decrease_per_overload_episode() {
    for law in LAWS {
        let clock = ManualClock::new();
        let limiter = with_law(Limiter::builder(), law)
            .initial_limit(26)
            .max_limit(26)
            .warmup_samples(0)
            .jitter(0.0)
            .clock(clock.clone())
            .build()
            .expect("valid configuration");
        // 25 operations are admitted at the limit; the backend then fails
        // them one window after another.
        let mut held: Vec<OwnedPermit> = (0..25)
            .map(|_| limiter.try_acquire_owned().expect("under the limit"))
            .collect();
        held.pop().expect("held").failure();
        close_window(&limiter, &clock);
        assert_eq!(limiter.limit(), 13, "{law}: the first failure cuts");
        for round in 0..4 {
            // Five more of the operations admitted before the cut fail.
            for _ in 0..5 {
                held.pop().expect("held").failure();
            }
            clock.advance(Duration::from_secs(1));
            // (A new operation cannot be admitted: 20 are still in flight
            // above the limit of 13, so the window closes on a failure.)
            held.pop().expect("held").failure();
            assert_eq!(
                limiter.limit(),
                13,
                "{law}: round {round}: stale failures cut again"
            );
        }
        assert_eq!(limiter.stats().decreases, 1, "{law}");
        // Drain the rest; the backend is healthy again.
        for p in held.drain(..) {
            p.success();
        }
        // A failure of an operation admitted after the cut is fresh: cut.
        let fresh = limiter.try_acquire_owned().expect("under the limit");
        clock.advance(Duration::from_secs(1));
        fresh.failure();
        assert_eq!(limiter.limit(), 6, "{law}: a fresh failure must cut");
        assert_eq!(limiter.stats().decreases, 2, "{law}");
    }
}

#[test]
fn one_decrease_per_overload_episode_summary_tells_fresh_from_stale() {
    let law = HalveOnFailure::default();
    let counts = law.0.clone();
    let clock = ManualClock::new();
    let limiter = Limiter::builder()
        .law(law)
        .initial_limit(8)
        .max_limit(8)
        .warmup_samples(0)
        .clock(clock.clone())
        .build()
        .expect("valid configuration");
    let mut old: Vec<OwnedPermit> = (0..6)
        .map(|_| limiter.try_acquire_owned().expect("free"))
        .collect();
    old.pop().expect("held").failure(); // window 1: fresh, cut 8 → 4
    close_window(&limiter, &clock);
    assert_eq!(limiter.limit(), 4);
    assert_eq!(counts[0].load(Ordering::Relaxed), 1);
    // Window 2: three stale failures.
    for _ in 0..3 {
        old.pop().expect("held").failure();
    }
    for p in old.drain(..) {
        p.success();
    }
    close_window(&limiter, &clock);
    assert_eq!(counts[0].load(Ordering::Relaxed), 1);
    assert_eq!(counts[1].load(Ordering::Relaxed), 3);
    assert_eq!(limiter.limit(), 4);
}

/// Delegates to a law and counts the windows it is run on, so that the test
/// knows where windows end without trusting the limiter's own bookkeeping.
#[derive(Debug)]
struct Observed {
    inner: Box<dyn ControlLaw>,
    closes: Arc<AtomicU64>,
}

impl Observed {
    /// The law named `law` (one of [`LAWS`]), observed.
    fn new(law: &str, closes: Arc<AtomicU64>) -> Self {
        let inner: Box<dyn ControlLaw> = match law {
            "aimd" => Box::new(adaptx::Aimd::default()),
            "vegas" => Box::new(adaptx::Vegas::default()),
            "gradient" => Box::new(adaptx::Gradient::default()),
            _ => Box::new(HalveOnFailure::default()),
        };
        Self { inner, closes }
    }
}

impl ControlLaw for Observed {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn next_limit(&mut self, limit: usize, w: &WindowSummary) -> usize {
        self.closes.fetch_add(1, Ordering::Relaxed);
        self.inner.next_limit(limit, w)
    }
}

/// The overload workloads the issue measured: a backend with a hard ceiling
/// of 20 concurrent operations, 60 closed-loop clients, and what exceeds the
/// ceiling fails after `reject_ms` (1: a fast rejection; 50: a dropped
/// request and a client timeout). The test tags every operation with the
/// number of decreases before its admission and checks, window by window,
/// that no decrease came from a window whose failures were all admitted
/// before the previous decrease. Returns (decreases, stale-only decreases).
fn overload_decreases(law: &str, reject_ms: u64, seed: u64) -> (usize, usize) {
    let clock = ManualClock::new();
    let closes = Arc::new(AtomicU64::new(0));
    let decreases = Arc::new(AtomicUsize::new(0));
    let d = decreases.clone();
    let limiter = Limiter::builder()
        .law(Observed::new(law, closes.clone()))
        .initial_limit(40)
        .max_limit(100)
        .sample_window(Duration::from_millis(100))
        .warmup_samples(0)
        .seed(seed)
        .on_limit_change(move |old, new| {
            if new < old {
                d.fetch_add(1, Ordering::Relaxed);
            }
        })
        .clock(clock.clone())
        .build()
        .expect("valid configuration");
    let ceiling = 20;
    let mut rng = SplitMix::new(seed);
    // (due, id, ok)
    let mut running: BinaryHeap<Reverse<(u64, usize, bool)>> = BinaryHeap::new();
    // (permit, decreases before its admission)
    let mut ops: Vec<Option<(OwnedPermit, usize)>> = Vec::new();
    let mut window_failure_tags: Vec<usize> = Vec::new();
    let mut stale_only = 0;
    let mut now = 0u64;
    for _ in 0..30_000u64 {
        now += 1;
        clock.advance(MS);
        while let Some(Reverse((at, id, ok))) = running.peek().copied() {
            if at > now {
                break;
            }
            running.pop();
            let (p, tag) = ops[id].take().expect("running");
            let (closes_before, decreases_before) = (
                closes.load(Ordering::Relaxed),
                decreases.load(Ordering::Relaxed),
            );
            if ok {
                p.success();
            } else {
                window_failure_tags.push(tag);
                p.failure();
            }
            if closes.load(Ordering::Relaxed) != closes_before {
                // This completion closed a window (and is part of it).
                let cut = decreases.load(Ordering::Relaxed) > decreases_before;
                let all_stale = !window_failure_tags.is_empty()
                    && window_failure_tags.iter().all(|&t| t < decreases_before);
                if cut && all_stale {
                    stale_only += 1;
                }
                window_failure_tags.clear();
            }
        }
        while running.len() < 60 {
            let Ok(p) = limiter.try_acquire_owned() else {
                break;
            };
            let busy = running.iter().filter(|r| r.0.2).count();
            let (dur, ok) = if busy >= ceiling {
                (reject_ms, false)
            } else {
                (rng.between(8, 12), true)
            };
            ops.push(Some((p, decreases.load(Ordering::Relaxed))));
            running.push(Reverse((now + dur, ops.len() - 1, ok)));
        }
    }
    (decreases.load(Ordering::Relaxed), stale_only)
}

#[test]
fn one_decrease_per_overload_episode_under_overload_workloads() {
    for law in LAWS {
        for (reject_ms, seed) in [(1, 1), (50, 2), (5, 3)] {
            let (total, stale_only) = overload_decreases(law, reject_ms, seed);
            assert!(total > 0, "{law}: the overload never cut the limit");
            assert_eq!(
                stale_only, 0,
                "{law}, rejections after {reject_ms} ms: {stale_only} of {total} decreases \
                 came from failures of operations admitted before the previous decrease"
            );
        }
    }
}

// ---------------------------------------------------------------------------
// 3. No decrease without overload evidence.
// ---------------------------------------------------------------------------

/// How light load arrives.
#[derive(Debug, Clone, Copy)]
enum Demand {
    /// Open loop: arrivals at this rate per second, Poisson.
    Poisson(f64),
    /// Closed loop: this many workers, each starting its next request as
    /// soon as the previous one completes.
    Workers(usize),
}

/// Requests under `demand`, each holding a permit for a latency uniform in
/// `[lo_ms, hi_ms)`, with no failures, for `minutes` of virtual time. A
/// request the limiter turns away fails the test. Returns the lowest limit
/// seen.
fn light_noisy_load(
    algorithm: Algorithm,
    start: usize,
    demand: Demand,
    (lo_ms, hi_ms): (u64, u64),
    minutes: u64,
    seed: u64,
) -> usize {
    let clock = ManualClock::new();
    let limiter = Limiter::builder()
        .algorithm(algorithm)
        .initial_limit(start)
        .max_limit(1_000)
        .seed(seed)
        .clock(clock.clone())
        .build()
        .expect("valid configuration");
    let mut rng = SplitMix::new(seed);
    let end = minutes * 60 * 1_000_000_000;
    let mut now = 0u64;
    // Pending events: (time, permit index or usize::MAX for an arrival).
    let mut events: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    let mut permits: Vec<Option<OwnedPermit>> = Vec::new();
    match demand {
        Demand::Poisson(_) => events.push(Reverse((0, usize::MAX))),
        Demand::Workers(n) => {
            for _ in 0..n {
                events.push(Reverse((0, usize::MAX)));
            }
        }
    }
    let mut lowest = limiter.limit();
    while let Some(Reverse((t, what))) = events.pop() {
        if t >= end {
            break;
        }
        clock.advance(Duration::from_nanos(t - now));
        now = t;
        let arrival = match (what, demand) {
            (usize::MAX, Demand::Poisson(rate)) => {
                events.push(Reverse((now + rng.exponential(1e9 / rate), usize::MAX)));
                true
            }
            (usize::MAX, Demand::Workers(_)) => true,
            (id, demand) => {
                permits[id].take().expect("running").success();
                // A worker starts its next request at once.
                matches!(demand, Demand::Workers(_))
            }
        };
        if arrival {
            // A request the limiter turns away is the harm this test is about.
            let permit = limiter.try_acquire_owned().unwrap_or_else(|_| {
                panic!(
                    "{algorithm:?} rejected light load at {now} ns: limit {}, in flight {}",
                    limiter.limit(),
                    limiter.in_flight()
                )
            });
            let latency = rng.between(lo_ms * 1_000_000, hi_ms * 1_000_000);
            permits.push(Some(permit));
            events.push(Reverse((now + latency, permits.len() - 1)));
        }
        lowest = lowest.min(limiter.limit());
    }
    lowest
}

#[test]
fn no_decrease_without_overload_evidence() {
    // The reported workload: one request in flight at 20 requests/s (one
    // worker, latency 20–80 ms, mean 50 ms), no failures, for ten virtual
    // minutes, from a limit of 20.
    for algorithm in [Algorithm::Aimd, Algorithm::Vegas, Algorithm::Gradient] {
        let lowest = light_noisy_load(algorithm, 20, Demand::Workers(1), (20, 80), 10, 1);
        assert!(
            lowest * 10 >= 20 * 8,
            "{algorithm:?} cut 20 → {lowest} on latency noise alone"
        );
    }
}

#[test]
fn no_decrease_without_overload_evidence_other_loads_and_limits() {
    for algorithm in [Algorithm::Aimd, Algorithm::Vegas, Algorithm::Gradient] {
        for (start, demand, lat, seed) in [
            (10, Demand::Workers(2), (10, 90), 2),
            (50, Demand::Workers(6), (5, 50), 3),
            (6, Demand::Workers(1), (30, 90), 4),
            (20, Demand::Poisson(20.0), (20, 80), 5),
            (40, Demand::Poisson(100.0), (10, 100), 6),
        ] {
            let lowest = light_noisy_load(algorithm, start, demand, lat, 10, seed);
            assert!(
                lowest * 10 >= start * 8,
                "{algorithm:?}: start {start}, {demand:?}, {lat:?} ms: cut to {lowest} \
                 on latency noise alone"
            );
        }
    }
}

// ---------------------------------------------------------------------------
// 4. Accounting.
// ---------------------------------------------------------------------------

#[test]
fn accounting_rate_permit_clamps_its_latency() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::builder()
        .initial_rate(100)
        .min_rate(10)
        .max_rate(1_000)
        .target_latency(Duration::from_millis(100))
        .clock(clock.clone())
        .build()
        .expect("valid configuration");
    // The limit binds (all 100 tokens taken); one operation took
    // `Duration::MAX`, the others 10 ms: the mean is far above the target.
    // (Unclamped, the sum wrapped to "1 ns less than the others" and the
    // fast mean raised the rate to 110.)
    let mut permits = Vec::new();
    while let Ok(p) = limiter.try_acquire() {
        permits.push(p);
    }
    assert!(permits.len() >= 100);
    permits
        .pop()
        .expect("admitted")
        .record_with_latency(adaptx::Outcome::Success, Duration::MAX);
    for p in permits {
        p.record_with_latency(adaptx::Outcome::Success, Duration::from_millis(10));
    }
    clock.advance(Duration::from_secs(1));
    let _ = limiter.try_acquire();
    assert_eq!(
        limiter.current_rate(),
        90,
        "a mean latency far above the target must cut the rate by 10 %"
    );
}
