//! `Builder::sample_window_adaptive`: a window closes once it holds
//! `min_samples` samples and is `rtt_multiple` recent latencies old, with
//! the sample window as the upper bound.
//!
//! Everything runs on a [`ManualClock`]; a recording law shows which windows
//! closed, when and with how many samples.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use adaptx::{
    Limiter, MAX_WINDOW_MIN_SAMPLES, MAX_WINDOW_RTT_MULTIPLE, ManualClock, Outcome, WindowSummary,
};

mod common;
use common::Recorder;

use common::{MS, WINDOW};

struct Rig {
    clock: ManualClock,
    limiter: Limiter,
    seen: Arc<Mutex<Vec<WindowSummary>>>,
}

impl Rig {
    /// 1 s sample windows, adaptive with `min_samples` and `k`, limit 100.
    fn new(min_samples: u64, k: f64, react: bool) -> Self {
        let clock = ManualClock::new();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let limiter = Limiter::builder()
            .clock(clock.clone())
            .warmup_samples(0)
            .jitter(0.0)
            .initial_limit(100)
            .sample_window(WINDOW)
            .sample_window_adaptive(min_samples, k)
            .law(Recorder {
                seen: seen.clone(),
                react,
                hold: !react,
            })
            .build()
            .expect("valid configuration");
        Self {
            clock,
            limiter,
            seen,
        }
    }

    /// Records `n` outcomes of latency `latency` at the present time.
    fn record(&self, n: usize, outcome: Outcome, latency: Duration) {
        for _ in 0..n {
            self.limiter
                .try_acquire()
                .expect("a free permit")
                .record_with_latency(outcome, latency);
        }
    }

    fn windows(&self) -> Vec<WindowSummary> {
        self.seen.lock().expect("not poisoned").clone()
    }

    /// Closes a first, full window whose successes took `latency`: from then
    /// on the recent latency is `latency`. The next window starts now.
    fn learn(&self, latency: Duration) {
        self.record(1, Outcome::Success, latency);
        self.clock.advance(WINDOW);
        self.record(1, Outcome::Success, latency);
        assert_eq!(self.windows().len(), 1, "the first window is a full one");
    }
}

#[test]
fn adaptive_window_closes_after_n_samples_and_k_rtt_not_before_either() {
    // N = 4, k = 3, recent latency 5 ms: a window may close from 15 ms on,
    // with 4 samples.
    let rig = Rig::new(4, 3.0, false);
    rig.learn(5 * MS);

    // Enough samples, not old enough: 10 samples at 10 ms do not close it.
    rig.clock.advance(10 * MS);
    rig.record(10, Outcome::Success, 5 * MS);
    assert_eq!(rig.windows().len(), 1);
    // 14.999999 ms: still not.
    rig.clock.advance(5 * MS - Duration::from_nanos(1));
    rig.record(1, Outcome::Success, 5 * MS);
    assert_eq!(rig.windows().len(), 1);
    // 15 ms: the next sample closes it, 12 samples in 15 ms.
    rig.clock.advance(Duration::from_nanos(1));
    rig.record(1, Outcome::Success, 5 * MS);
    let w = rig.windows();
    assert_eq!(w.len(), 2);
    assert_eq!((w[1].samples, w[1].duration_nanos), (12, 15_000_000));

    // Old enough, not enough samples: 3 samples at 100 ms do not close it;
    // the fourth does.
    rig.clock.advance(100 * MS);
    rig.record(3, Outcome::Success, 5 * MS);
    assert_eq!(rig.windows().len(), 2);
    rig.record(1, Outcome::Success, 5 * MS);
    let w = rig.windows();
    assert_eq!(w.len(), 3);
    assert_eq!((w[2].samples, w[2].duration_nanos), (4, 100_000_000));
}

#[test]
fn adaptive_window_falls_back_to_the_sample_window() {
    let rig = Rig::new(4, 3.0, false);
    // No recent latency yet: 100 samples at 500 ms do not close the first
    // window; the sample window does.
    rig.clock.advance(500 * MS);
    rig.record(100, Outcome::Success, 5 * MS);
    assert_eq!(rig.windows().len(), 0);
    rig.clock.advance(500 * MS);
    rig.record(1, Outcome::Success, 5 * MS);
    assert_eq!(rig.windows().len(), 1);
    // Too few samples: 3 samples close the window only at 1 s.
    rig.clock.advance(500 * MS);
    rig.record(2, Outcome::Success, 5 * MS);
    rig.clock.advance(500 * MS - Duration::from_nanos(1));
    rig.record(1, Outcome::Success, 5 * MS);
    assert_eq!(rig.windows().len(), 1);
    rig.clock.advance(Duration::from_nanos(1));
    rig.record(1, Outcome::Success, 5 * MS);
    let w = rig.windows();
    assert_eq!(
        (w.len(), w[1].samples, w[1].duration_nanos),
        (2, 4, 1_000_000_000)
    );
}

#[test]
fn adaptive_window_is_capped_by_the_sample_window() {
    // k · RTT = 4 × 400 ms = 1.6 s > 1 s: the sample window wins.
    let rig = Rig::new(1, 4.0, false);
    rig.learn(400 * MS);
    rig.clock.advance(WINDOW - Duration::from_nanos(1));
    rig.record(5, Outcome::Success, 400 * MS);
    assert_eq!(rig.windows().len(), 1);
    rig.clock.advance(Duration::from_nanos(1));
    rig.record(1, Outcome::Success, 400 * MS);
    assert_eq!(rig.windows().len(), 2);
}

#[test]
fn adaptive_window_reads_the_previous_windows_mean_success_latency() {
    // Successes at 10 ms and fast failures at 1 ms: the recent latency is
    // 10 ms (the failures are no service time), so with k = 2 the next
    // window may close from 20 ms on.
    let rig = Rig::new(1, 2.0, false);
    rig.record(3, Outcome::Success, 10 * MS);
    rig.record(3, Outcome::Failure, MS);
    rig.clock.advance(WINDOW);
    rig.record(1, Outcome::Success, 10 * MS);
    assert_eq!(rig.windows().len(), 1);
    rig.clock.advance(20 * MS - Duration::from_nanos(1));
    rig.record(1, Outcome::Success, 10 * MS);
    assert_eq!(rig.windows().len(), 1);
    rig.clock.advance(Duration::from_nanos(1));
    // This window's successes took 30 ms on average ((10 + 50) / 2).
    rig.record(1, Outcome::Success, 50 * MS);
    assert_eq!(rig.windows().len(), 2);
    // Hence the next one closes from 60 ms on, not 20 ms.
    rig.clock.advance(59 * MS);
    rig.record(1, Outcome::Success, 10 * MS);
    assert_eq!(rig.windows().len(), 2);
    rig.clock.advance(MS);
    // This window's two successes took 10 ms: 20 ms windows again.
    rig.record(1, Outcome::Success, 10 * MS);
    assert_eq!(rig.windows().len(), 3);
    rig.clock.advance(20 * MS);
    rig.record(1, Outcome::Failure, MS);
    assert_eq!(rig.windows().len(), 4, "a window of one failure at 20 ms");
    // No success in it: the recent latency stays 10 ms, 20 ms windows.
    rig.clock.advance(20 * MS - Duration::from_nanos(1));
    rig.record(1, Outcome::Failure, MS);
    assert_eq!(rig.windows().len(), 4);
    rig.clock.advance(Duration::from_nanos(1));
    rig.record(1, Outcome::Failure, MS);
    assert_eq!(rig.windows().len(), 5);
}

#[test]
fn adaptive_window_keeps_the_early_close_at_a_fresh_failure() {
    // A law that reacts to the first fresh failure: the failure closes the
    // window at once, long before 4 samples and 3 × 5 ms.
    let rig = Rig::new(4, 3.0, true);
    rig.learn(5 * MS);
    rig.clock.advance(MS);
    rig.record(1, Outcome::Failure, MS);
    let w = rig.windows();
    assert_eq!((w.len(), w[1].samples, w[1].failures), (2, 1, 1));
    assert_eq!(rig.limiter.limit(), 99);
}

#[test]
fn adaptive_window_forgets_the_recent_latency_on_reset() {
    let rig = Rig::new(1, 3.0, false);
    rig.learn(5 * MS);
    rig.limiter.reset_stats();
    rig.seen.lock().expect("not poisoned").clear();
    // After the reset, windows run the full sample window until a window
    // with a success has closed.
    rig.clock.advance(100 * MS);
    rig.record(10, Outcome::Success, 5 * MS);
    assert_eq!(rig.windows().len(), 0);
    rig.clock.advance(900 * MS);
    rig.record(1, Outcome::Success, 5 * MS);
    assert_eq!(rig.windows().len(), 1);
}

#[test]
fn sample_window_adaptive_validates_min_samples_and_rtt_multiple() {
    let build = |n: u64, k: f64| Limiter::builder().sample_window_adaptive(n, k).build();
    for n in [0, MAX_WINDOW_MIN_SAMPLES + 1, u64::MAX] {
        let err = build(n, 4.0).expect_err("min_samples out of range");
        assert_eq!(err.field(), "sample_window_min_samples", "{n}");
        assert_eq!(
            err.to_string(),
            format!("invalid sample_window_min_samples: {n} (allowed: 1 ..= 1000000)")
        );
    }
    for k in [
        0.0,
        0.999,
        -1.0,
        MAX_WINDOW_RTT_MULTIPLE + 0.001,
        f64::NAN,
        f64::INFINITY,
    ] {
        let err = build(20, k).expect_err("rtt_multiple out of range");
        assert_eq!(err.field(), "sample_window_rtt_multiple", "{k}");
        assert!(
            err.to_string().ends_with("(allowed: 1 <= value <= 1000)"),
            "{err}"
        );
    }
    for (n, k) in [
        (1, 1.0),
        (MAX_WINDOW_MIN_SAMPLES, MAX_WINDOW_RTT_MULTIPLE),
        (20, 4.0),
    ] {
        assert!(build(n, k).is_ok(), "({n}, {k})");
    }
}
