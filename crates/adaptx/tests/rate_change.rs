//! Changing a live rate limiter: `set_rate`, `set_bounds`, `set_law`. The
//! state is kept (tokens, keys, what the law learned); a bad value is the
//! builder's error and changes nothing. Deterministic: a manual clock.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use adaptx::{ManualClock, Outcome, RateAlgorithm, RateLaw, RateLimiter};

const SEC: Duration = Duration::from_secs(1);

fn rig(initial: u64) -> (ManualClock, RateLimiter) {
    let clock = ManualClock::new();
    let l = RateLimiter::builder()
        .initial_rate(initial)
        .min_rate(10)
        .max_rate(1000)
        .clock(clock.clone())
        .build()
        .unwrap();
    (clock, l)
}

/// One interval in which every request is admitted and succeeds fast while
/// the bucket binds: mizu's law grows the rate by 10 %.
fn good_interval(clock: &ManualClock, l: &RateLimiter) -> u64 {
    while let Ok(p) = l.try_acquire() {
        p.record_with_latency(Outcome::Success, Duration::from_millis(1));
    }
    clock.advance(SEC);
    drop(l.try_acquire());
    l.current_rate()
}

#[test]
fn set_bounds_brings_the_rate_inside_and_the_law_keeps_to_them() {
    let (clock, l) = rig(100);
    l.set_bounds(10, 50).unwrap();
    assert_eq!(l.current_rate(), 50);
    assert_eq!((l.law().min_rate(), l.law().max_rate()), (10, 50));
    assert_eq!(
        good_interval(&clock, &l),
        50,
        "growth capped at the new max"
    );
    l.set_bounds(10, 2000).unwrap();
    assert_eq!(l.current_rate(), 50, "a wider range moves nothing");
    assert_eq!(good_interval(&clock, &l), 55);
    let s = l.stats();
    assert_eq!((s.min_rate, s.max_rate), (10, 2000));
}

#[test]
fn set_bounds_refuses_bad_values_and_changes_nothing() {
    let (_clock, l) = rig(100);
    let before = (l.current_rate(), l.law());
    let field = |r: Result<(), adaptx::ConfigError>| r.unwrap_err().field();
    assert_eq!(field(l.set_bounds(0, 50)), "min_rate");
    assert_eq!(field(l.set_bounds(60, 20)), "max_rate");
    assert_eq!(field(l.set_bounds(1, 2_000_000_000)), "max_rate");
    let e = l.set_bounds(60, 20).unwrap_err();
    assert_eq!(
        e.to_string(),
        RateLimiter::builder()
            .min_rate(60)
            .max_rate(20)
            .build()
            .unwrap_err()
            .to_string(),
        "the builder's error, word for word"
    );
    assert_eq!((l.current_rate(), l.law()), before);
}

#[test]
fn set_rate_keeps_the_tokens_and_refuses_a_rate_outside_the_bounds() {
    let clock = ManualClock::new();
    let l = RateLimiter::builder()
        .initial_rate(100)
        .burst(10)
        .clock(clock)
        .build()
        .unwrap();
    let held: Vec<_> = (0..4).map(|_| l.try_acquire().unwrap()).collect();
    l.set_rate(500).unwrap();
    assert_eq!(l.try_acquire().unwrap().remaining(), 5, "6 tokens kept");
    assert_eq!(l.set_rate(5_000).unwrap_err().field(), "rate");
    assert_eq!(l.set_rate(0).unwrap_err().field(), "rate");
    assert_eq!(l.current_rate(), 500);
    let s = l.stats();
    assert_eq!(
        (s.increases, s.decreases),
        (1, 0),
        "a change by hand counts"
    );
    drop(held);
}

/// Swapping mizu's law for AWS's: from the next close the new law decides
/// (Cubic, never throttled, does not limit: max_rate), and bounds changed
/// afterwards keep Cubic's memory.
#[test]
fn set_law_decides_from_the_next_interval() {
    let (clock, l) = rig(100);
    let cubic = RateLimiter::builder()
        .algorithm(RateAlgorithm::Cubic)
        .min_rate(10)
        .max_rate(1000)
        .settings()
        .unwrap()
        .law;
    l.set_law(cubic);
    assert_eq!(l.law(), RateLaw::cubic(10, 1000).unwrap());
    assert_eq!(l.current_rate(), 100, "nothing moves until the close");
    assert_eq!(good_interval(&clock, &l), 1000);
    // A throttle enables it: 0.7 × the rate in force (the measured send
    // rate is higher: the bucket's burst).
    for p in (0..50).map(|_| l.try_acquire().unwrap()) {
        p.record_with_latency(Outcome::Failure, Duration::from_millis(1));
    }
    clock.advance(SEC);
    drop(l.try_acquire());
    let cut = l.current_rate();
    assert!(cut < 1000, "{cut}");
    // New bounds keep what the law learned: still enabled, so a clean
    // interval follows the curve rather than jumping to max_rate.
    l.set_bounds(10, 5000).unwrap();
    assert!(good_interval(&clock, &l) < 5000);
}

#[test]
fn keyed_changes_keep_the_keys() {
    let clock = ManualClock::new();
    let l = RateLimiter::builder()
        .initial_rate(100)
        .clock(clock)
        .build_keyed::<u32>()
        .unwrap();
    for key in 0..5 {
        for _ in 0..2 {
            l.try_acquire(&key).unwrap().success();
        }
    }
    assert_eq!(l.len(), 5);
    l.set_bounds(10, 50).unwrap();
    l.set_rate(20).unwrap();
    l.set_law(RateLaw::cubic(10, 50).unwrap());
    assert_eq!((l.len(), l.current_rate()), (5, 20));
    assert_eq!(l.set_rate(60).unwrap_err().field(), "rate");
}

/// Admissions and completions on two threads while a third changes bounds,
/// rate and law: nothing panics or deadlocks, every attempt is admitted or
/// rejected, and the rate ends inside the bounds last set.
#[test]
fn changes_under_concurrent_load_keep_the_accounting() {
    let clock = ManualClock::new();
    let l = Arc::new(
        RateLimiter::builder()
            .initial_rate(1000)
            .min_rate(1)
            .max_rate(100_000)
            .adjust_interval(Duration::from_millis(10))
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let workers: Vec<_> = (0..2)
        .map(|w| {
            let (l, clock) = (Arc::clone(&l), clock.clone());
            thread::spawn(move || {
                let mut attempts = 0u64;
                for i in 0..20_000u64 {
                    attempts += 1;
                    if let Ok(p) = l.try_acquire() {
                        p.record_with_latency(
                            Outcome::from_success((i + w) % 7 != 0),
                            Duration::from_millis(1),
                        );
                    }
                    if i % 100 == 0 {
                        clock.advance(Duration::from_millis(1));
                    }
                }
                attempts
            })
        })
        .collect();
    let changer = {
        let l = Arc::clone(&l);
        thread::spawn(move || {
            for i in 0..2_000u64 {
                let (min, max) = (1 + i % 50, 100 + (i * 37) % 5_000);
                l.set_bounds(min, max).unwrap();
                let _ = l.set_rate(min + i % (max - min + 1));
                if i % 500 == 0 {
                    l.set_law(RateLaw::cubic(min, max).unwrap());
                }
            }
            l.set_bounds(5, 500).unwrap();
        })
    };
    let attempts: u64 = workers.into_iter().map(|h| h.join().unwrap()).sum();
    changer.join().unwrap();
    let s = l.stats();
    assert_eq!(s.admitted + s.rejected, attempts);
    assert_eq!(s.in_flight, 0);
    assert_eq!(s.completed, s.admitted);
    assert!(
        (5..=500).contains(&l.current_rate()),
        "{}",
        l.current_rate()
    );
    clock.advance(SEC);
    drop(l.try_acquire());
    assert!((5..=500).contains(&l.current_rate()));
}

/// A clock that calls back into its own limiter (`stats()`, which takes the
/// control lock) on every reading once the limiter is set.
#[derive(Debug, Default, Clone)]
struct ReentrantClock(Arc<Reentrant>);

#[derive(Debug, Default)]
struct Reentrant {
    inner: ManualClock,
    limiter: std::sync::OnceLock<RateLimiter>,
    inside: std::sync::atomic::AtomicBool,
}

impl std::ops::Deref for ReentrantClock {
    type Target = Reentrant;

    fn deref(&self) -> &Reentrant {
        &self.0
    }
}

impl adaptx::Clock for ReentrantClock {
    fn now(&self) -> Duration {
        use std::sync::atomic::Ordering::SeqCst;
        if let Some(l) = self.limiter.get() {
            if !self.inside.swap(true, SeqCst) {
                let _ = l.stats();
                self.inside.store(false, SeqCst);
            }
        }
        self.inner.now()
    }
}

/// The rate module's contract: no lock is held across a call into user
/// code. Rate changes and interval closes read the clock before they take
/// the control lock, so a clock that calls back into the limiter neither
/// deadlocks nor panics.
#[test]
fn rate_changes_and_closes_call_no_user_clock_under_the_lock() {
    let (done, finished) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let clock = ReentrantClock::default();
        let l = RateLimiter::builder()
            .initial_rate(100)
            .adjust_interval(Duration::from_millis(10))
            .clock(clock.clone())
            .build()
            .expect("valid");
        clock.limiter.set(l.clone()).expect("set once");
        l.set_rate(200).expect("within bounds");
        l.set_bounds(10, 150).expect("valid bounds");
        l.set_law(RateLaw::cubic(10, 150).expect("valid law"));
        for _ in 0..3 {
            clock.inner.advance(Duration::from_millis(20));
            if let Ok(p) = l.try_acquire() {
                p.success();
            }
        }
        done.send(l.current_rate()).expect("receiver");
    });
    let rate = finished
        .recv_timeout(Duration::from_secs(10))
        .expect("a rate change or close deadlocked on the clock calling back");
    assert!((10..=150).contains(&rate), "{rate}");
}
