//! Loom models of the rate limiter's lock-free parts: the bucket's word,
//! the token clock's segment, the interval closer.
//!
//! Built only under `--cfg adaptx_loom` (see `pool/loom.rs`):
//!
//! ```text
//! RUSTFLAGS="--cfg adaptx_loom" CARGO_TARGET_DIR=target/loom cargo test -p adaptx --lib --release loom
//! ```
//!
//! Time stands still inside each model (a [`ManualClock`] moved only
//! before the threads start), so the tokens a bucket holds are known
//! exactly and every interleaving must admit exactly that many.

use std::time::Duration;

use ::loom::thread;

/// Runs a model with no bound on preemptions: these models are small.
fn model<F>(f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    ::loom::model::Builder::new().check(f);
}
use crate::{ManualClock, Outcome, RateLimiter, RateLimiterBuilder};

const NEVER: Duration = Duration::from_secs(24 * 60 * 60);

fn limiter(builder: RateLimiterBuilder) -> (ManualClock, RateLimiter) {
    let clock = ManualClock::new();
    let l = builder.clock(clock.clone()).build().expect("valid");
    (clock, l)
}

/// Admissions from `n` attempts on `l`, the permits dropped.
fn admit(l: &RateLimiter, n: usize) -> usize {
    (0..n).filter(|_| l.try_acquire().is_ok()).count()
}

/// Two threads race for the last token: exactly one gets it.
#[test]
fn loom_admissions_race_for_the_last_token() {
    model(|| {
        let (_, l) = limiter(
            RateLimiter::builder()
                .initial_rate(10)
                .burst(1)
                .adjust_interval(NEVER),
        );
        let other = l.clone();
        let t = thread::spawn(move || admit(&other, 1));
        let here = admit(&l, 1);
        let there = t.join().expect("thread panicked");
        assert_eq!(here + there, 1, "one token, {here} + {there} admissions");
        assert_eq!(l.stats().admitted, 1);
        assert_eq!(l.stats().rejected, 1);
    });
}

/// A rate change races admissions on a bucket idle far past its capacity:
/// the change keeps the bucket's tokens (2, the old capacity) even though
/// the new capacity is 8, so the admissions get exactly 2 in every order.
#[test]
fn loom_rate_change_neither_mints_nor_loses_tokens() {
    model(|| {
        let (clock, l) = limiter(
            RateLimiter::builder()
                .initial_rate(2)
                .min_rate(1)
                .adjust_interval(NEVER),
        );
        clock.advance(Duration::from_secs(10)); // earned 20, holds 2
        let other = l.clone();
        let t = thread::spawn(move || other.set_rate(8).expect("valid rate"));
        let got = admit(&l, 3);
        t.join().expect("thread panicked");
        assert_eq!(got, 2, "the bucket held 2 tokens");
        assert_eq!(l.current_rate(), 8);
        assert_eq!(admit(&l, 1), 0, "and holds none after");
    });
}

/// Two admissions race, one of them closing the interval first; its law
/// raises the rate 4 → 5 and the capacity with it. The bucket was idle long
/// past its capacity, so the change clips it to the old capacity (a CAS on
/// its word) before the new one is published: 4 tokens in all, whatever
/// the order — never 5.
#[test]
fn loom_close_races_admission() {
    model(|| {
        let (clock, l) = limiter(
            RateLimiter::builder()
                .initial_rate(4)
                .min_rate(1)
                .adjust_interval(Duration::from_secs(1)),
        );
        // A binding interval of fast successes: the law will grow the rate.
        let permits: Vec<_> = (0..4).map(|_| l.try_acquire().expect("full")).collect();
        for p in permits {
            p.record_with_latency(Outcome::Success, Duration::from_millis(1));
        }
        clock.advance(Duration::from_secs(2)); // earned 8, holds 4
        let other = l.clone();
        let t = thread::spawn(move || admit(&other, 1));
        let here = admit(&l, 1);
        let there = t.join().expect("thread panicked");
        assert_eq!(here + there, 2);
        assert_eq!(l.current_rate(), 5);
        assert_eq!(admit(&l, 5), 2, "4 tokens in all");
    });
}

/// Two completions find the interval over at once: exactly one closes it,
/// so the law runs once on the interval (100 → 80), never twice (→ 64).
#[test]
fn loom_two_closers_race() {
    model(|| {
        let (clock, l) = limiter(
            RateLimiter::builder()
                .initial_rate(100)
                .adjust_interval(Duration::from_secs(1)),
        );
        let (a, b) = (
            l.try_acquire().expect("full"),
            l.try_acquire().expect("full"),
        );
        clock.advance(Duration::from_secs(1));
        let t = thread::spawn(move || a.record(Outcome::Failure));
        b.record(Outcome::Failure);
        t.join().expect("thread panicked");
        assert_eq!(l.current_rate(), 80);
        assert_eq!(l.stats().decreases, 1);
    });
}

/// Two threads record completions of permits admitted on one lane (one
/// permit handed to the other thread): whichever owns the lane's counters,
/// the other adds to the shared set, and both completions count — a thread
/// writing the owned set without owning it would lose one.
#[test]
fn loom_completions_on_one_lane_from_two_threads_both_count() {
    model(|| {
        let (_, l) = limiter(
            RateLimiter::builder()
                .initial_rate(10)
                .adjust_interval(NEVER),
        );
        let (a, b) = (
            l.try_acquire().expect("full"),
            l.try_acquire().expect("full"),
        );
        let t = thread::spawn(move || a.success());
        b.success();
        t.join().expect("thread panicked");
        let s = l.stats();
        assert_eq!((s.successes, s.in_flight), (2, 0));
    });
}

/// Two publications race one read: the read is one segment, never a mix of
/// two (every word of segment `k` is `k`). One publication alone cannot
/// tear a read (it writes the slot readers are not told to read); the
/// second one writes the slot the reader may be in, which the version
/// re-check and the fences must catch. Seen failing with the re-check
/// removed and with the writer's fence removed.
#[test]
fn loom_segment_read_is_never_torn_by_two_publications() {
    use super::bucket::Segment;
    use super::schedule::Schedule;
    let seg = |k: u64| Segment {
        start: k,
        base: k,
        rate: k,
        cap: k,
    };
    model(move || {
        let s = crate::sync::Arc::new(Schedule::new(seg(0)));
        let w = crate::sync::Arc::clone(&s);
        let t = thread::spawn(move || {
            let v = w.publish(0, seg(1));
            w.publish(v, seg(2));
        });
        let r = s.read();
        assert!(
            r.start == r.base && r.base == r.rate && r.rate == r.cap,
            "torn read {r:?}"
        );
        t.join().expect("writer panicked");
    });
}
