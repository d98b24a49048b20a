//! Helpers shared by the integration tests: a limiter on a manual clock
//! with the permits a test holds, and small utilities.

#![allow(dead_code, unreachable_pub)] // each test crate uses a different subset

use std::future::Future;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use std::sync::{Arc, Mutex};

use adaptx::{
    Algorithm, Builder, ControlLaw, Limiter, ManualClock, Outcome, OwnedPermit, WindowSummary,
};

pub const MS: Duration = Duration::from_millis(1);
pub const WINDOW: Duration = Duration::from_secs(1);

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Warmup 0, jitter 0, 1 s windows, a manual clock, and the seed's law,
/// AIMD, whose arithmetic these tests check (the default law is Ceiling,
/// a documented difference: `new_applies_defaults`).
pub fn adapt_opts(clock: &ManualClock) -> Builder {
    Limiter::builder()
        .algorithm(Algorithm::Aimd)
        .clock(clock.clone())
        .warmup_samples(0)
        .jitter(0.0)
        .sample_window(WINDOW)
}

/// A limiter on a manual clock, with the permits a test holds.
pub struct Rig {
    pub clock: ManualClock,
    pub limiter: Limiter,
    pub held: Vec<OwnedPermit>,
}

impl Rig {
    pub fn new(configure: impl FnOnce(Builder) -> Builder) -> Self {
        let clock = ManualClock::new();
        let limiter = configure(adapt_opts(&clock))
            .build()
            .expect("valid configuration");
        Self {
            clock,
            limiter,
            held: Vec::new(),
        }
    }

    /// Takes every free permit: in-flight reaches the limit for real.
    pub fn saturate(&mut self) {
        while let Ok(p) = self.limiter.try_acquire_owned() {
            self.held.push(p);
        }
    }

    /// Records through a held permit while saturated, then refills.
    pub fn record_saturated(&mut self, outcome: Outcome, latency: Duration) {
        self.saturate();
        let p = self.held.pop().expect("a held permit");
        p.record_with_latency(outcome, latency);
        self.saturate();
    }

    /// Records through a fresh permit.
    pub fn record_idle(&self, outcome: Outcome, latency: Duration) {
        self.limiter
            .try_acquire()
            .expect("a free permit")
            .record_with_latency(outcome, latency);
    }

    pub fn advance(&self) {
        self.clock.advance(WINDOW);
    }

    /// A saturated window of two samples; the limit after it.
    pub fn saturated_window2(&mut self, first: Duration, second: Duration) -> usize {
        self.record_saturated(Outcome::Success, first);
        self.advance();
        self.record_saturated(Outcome::Success, second);
        self.limiter.limit()
    }

    pub fn saturated_window(&mut self, latency: Duration) -> usize {
        self.saturated_window2(latency, latency)
    }

    /// A window of unsaturated completions.
    pub fn idle_window(&self, outcome: Outcome, latency: Duration) -> usize {
        self.record_idle(outcome, latency);
        self.advance();
        self.record_idle(outcome, latency);
        self.limiter.limit()
    }
}

pub fn poll_once<F: Future>(fut: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(Waker::noop()))
}

/// `available + in_flight − debt == limit`, the permit accounting invariant.
pub fn assert_accounting(l: &Limiter) {
    assert_eq!(
        l.available() + l.in_flight() - l.debt(),
        l.limit(),
        "available {} in_flight {} debt {} limit {}",
        l.available(),
        l.in_flight(),
        l.debt(),
        l.limit()
    );
}

/// A small deterministic generator (64-bit LCG, top bits).
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
}

#[derive(Debug, PartialEq, Eq)]
pub struct Sentinel;

impl std::fmt::Display for Sentinel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("sentinel")
    }
}

impl std::error::Error for Sentinel {}

/// A tiny deterministic RNG (splitmix64).
pub struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xdead_beef_cafe_f00d)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in `lo..hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo)
    }

    /// True with probability `pct` %.
    pub fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }

    /// Exponential with mean `mean` (at least 1).
    pub fn exponential(&mut self, mean: f64) -> u64 {
        let u = ((self.next() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        ((-u.ln() * mean) as u64).max(1)
    }
}

/// Records every summary it is shown; on a window with fresh failures it
/// steps the limit down by one (or holds, if `hold`), else holds.
#[derive(Debug)]
pub struct Recorder {
    pub seen: Arc<Mutex<Vec<WindowSummary>>>,
    pub react: bool,
    pub hold: bool,
}

impl ControlLaw for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }

    fn next_limit(&mut self, limit: usize, w: &WindowSummary) -> usize {
        self.seen.lock().expect("not poisoned").push(*w);
        if w.failures > 0 && !self.hold {
            limit - 1
        } else {
            limit
        }
    }

    fn reacts_to_first_failure(&self) -> bool {
        self.react
    }
}

/// A proptest configuration: `cases` cases from the fixed `seed`, no
/// failure persistence (the seed reproduces a failure).
pub fn proptest_config(cases: u32, seed: u64) -> proptest::test_runner::Config {
    proptest::test_runner::Config {
        cases,
        rng_seed: proptest::test_runner::RngSeed::Fixed(seed),
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    }
}
