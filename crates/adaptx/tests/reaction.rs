//! A law may ask the limiter to close the window at the first fresh overload
//! failure (`ControlLaw::reacts_to_first_failure`), and every law sees the
//! mean latency of the window's successes apart from its failures'.
//!
//! Everything runs on a [`ManualClock`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use adaptx::{Algorithm, Limiter, ManualClock, Outcome, OwnedPermit, WindowSummary};

mod common;
use common::Recorder;

const MS: Duration = Duration::from_millis(1);

fn limiter(react: bool, hold: bool) -> (Limiter, ManualClock, Arc<Mutex<Vec<WindowSummary>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let clock = ManualClock::new();
    let limiter = Limiter::builder()
        .law(Recorder {
            seen: seen.clone(),
            react,
            hold,
        })
        .initial_limit(10)
        .warmup_samples(0)
        .jitter(0.0)
        .sample_window(Duration::from_secs(1))
        .clock(clock.clone())
        .build()
        .expect("valid configuration");
    (limiter, clock, seen)
}

fn admit(limiter: &Limiter, n: usize) -> Vec<OwnedPermit> {
    (0..n)
        .map(|_| limiter.try_acquire_owned().expect("under the limit"))
        .collect()
}

#[test]
fn contract_reacts_to_first_failure_closes_the_window_at_once() {
    let (limiter, clock, seen) = limiter(true, false);
    let mut held = admit(&limiter, 5);
    clock.advance(10 * MS);
    held.pop().expect("held").success();
    held.pop().expect("held").success();
    clock.advance(10 * MS);
    held.pop().expect("held").failure();
    // 20 ms into a 1 s window: the law has already seen it and cut.
    let s = seen.lock().expect("not poisoned").clone();
    assert_eq!(s.len(), 1, "the fresh failure closes the window");
    assert_eq!(s[0].samples, 3);
    assert_eq!(s[0].failures, 1);
    assert_eq!(s[0].duration_nanos, 20_000_000);
    assert_eq!(limiter.limit(), 9);
    // The two still held were admitted before that decrease: their failures
    // are stale and close nothing.
    held.pop().expect("held").failure();
    held.pop().expect("held").failure();
    assert_eq!(seen.lock().expect("not poisoned").len(), 1);
    assert_eq!(limiter.limit(), 9);
    // A failure of an operation admitted after the decrease is fresh again.
    let p = limiter.try_acquire_owned().expect("under the limit");
    clock.advance(MS);
    p.failure();
    assert_eq!(seen.lock().expect("not poisoned").len(), 2);
    assert_eq!(limiter.limit(), 8);
    assert_eq!(limiter.stats().decreases, 2);
}

#[test]
fn reacts_to_first_failure_again_while_the_law_holds() {
    // A law that reads a failure as noise and holds keeps the epoch: the next
    // failure is fresh too and closes the next (short) window.
    let (limiter, clock, seen) = limiter(true, true);
    let mut held = admit(&limiter, 3);
    for _ in 0..3 {
        clock.advance(MS);
        held.pop().expect("held").failure();
    }
    let s = seen.lock().expect("not poisoned").clone();
    assert_eq!(s.len(), 3);
    assert!(s.iter().all(|w| w.samples == 1 && w.failures == 1));
    assert_eq!(limiter.limit(), 10);
}

#[test]
fn laws_that_do_not_ask_wait_for_the_window_to_end() {
    // The default, and the built-in laws: a failure 20 ms into a window is
    // judged when the window ends.
    let (limiter, clock, seen) = limiter(false, false);
    let held = admit(&limiter, 2);
    clock.advance(20 * MS);
    for p in held {
        p.failure();
    }
    assert!(seen.lock().expect("not poisoned").is_empty());
    clock.advance(Duration::from_secs(1));
    limiter.try_acquire_owned().expect("free").success();
    assert_eq!(seen.lock().expect("not poisoned").len(), 1);
    for a in [Algorithm::Aimd, Algorithm::Vegas, Algorithm::Gradient] {
        let clock = ManualClock::new();
        let l = Limiter::builder()
            .algorithm(a)
            .initial_limit(10)
            .warmup_samples(0)
            .clock(clock.clone())
            .build()
            .expect("valid configuration");
        let p = l.try_acquire_owned().expect("free");
        clock.advance(20 * MS);
        p.failure();
        assert_eq!(l.limit(), 10, "{a:?} decided before its window ended");
    }
}

#[test]
fn window_summary_mean_ok_rtt_leaves_fast_failures_out() {
    let (limiter, clock, seen) = limiter(false, true);
    // Two successes of 50 ms, two rejections of 2 ms.
    let held = admit(&limiter, 4);
    let mut it = held.into_iter();
    for (p, outcome, ms) in [
        (it.next(), Outcome::Success, 50),
        (it.next(), Outcome::Success, 50),
        (it.next(), Outcome::Failure, 2),
        (it.next(), Outcome::Failure, 2),
    ] {
        p.expect("held")
            .record_with_latency(outcome, Duration::from_millis(ms));
    }
    clock.advance(Duration::from_secs(1));
    limiter
        .try_acquire_owned()
        .expect("free")
        .record_with_latency(Outcome::Success, 50 * MS);
    let s = seen.lock().expect("not poisoned")[0];
    assert_eq!(s.samples, 5);
    assert_eq!(s.mean_ok_rtt_nanos, 50e6);
    assert_eq!(s.mean_rtt_nanos, (3.0 * 50e6 + 2.0 * 2e6) / 5.0);
    // A window of failures only: no success latency to report.
    let p = limiter.try_acquire_owned().expect("free");
    clock.advance(Duration::from_secs(1));
    p.record_with_latency(Outcome::Failure, 2 * MS);
    let s = seen.lock().expect("not poisoned")[1];
    assert_eq!((s.samples, s.mean_ok_rtt_nanos), (1, 0.0));
}

/// At `min_limit` no decrease can move the epoch, so every failure would
/// be fresh and close a window (a lock and a law run per failure, and a
/// fixed limit — `min_limit == max_limit` — would do it forever): there the
/// window runs its length.
#[test]
fn a_reacting_law_at_min_limit_does_not_close_a_window_per_failure() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let clock = ManualClock::new();
    let limiter = Limiter::builder()
        .law(Recorder {
            seen: seen.clone(),
            react: true,
            hold: false,
        })
        .initial_limit(10)
        .min_limit(10)
        .max_limit(10)
        .warmup_samples(0)
        .sample_window(Duration::from_secs(1))
        .clock(clock.clone())
        .build()
        .expect("valid configuration");
    for _ in 0..50 {
        let p = limiter.try_acquire_owned().expect("under the limit");
        clock.advance(MS);
        p.failure();
    }
    assert!(seen.lock().expect("not poisoned").is_empty());
    clock.advance(Duration::from_secs(1));
    limiter.try_acquire_owned().expect("free").failure();
    let s = seen.lock().expect("not poisoned").clone();
    assert_eq!(s.len(), 1, "one window, closed on time");
    assert_eq!(s[0].failures, 51);
    assert_eq!(limiter.limit(), 10);
}
