//! Run-time control under concurrent load: worker threads admit (by
//! `try_acquire` and blocking `acquire`), hold and release permits, and
//! close windows on a shared manual clock, while a controller thread keeps
//! switching the mode, reconfiguring the bounds, the law and the window,
//! and forcing and releasing the limit.
//!
//! At the end: nothing is in flight, `total == success + failures +
//! dropped`, every attempt is either admitted or rejected (`total +
//! rejected == attempts`), and, back in enforce mode with no forced limit,
//! exactly `limit` permits can be taken. A lost permit or a missed wake-up
//! shows as a worker stuck in `acquire`: the deadlock guard then closes the
//! limiter, which fails the test instead of hanging it.
//!
//! Each thread draws its choices from a splitmix64 seeded by its index (the
//! interleaving is up to the scheduler).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use adaptx::{Algorithm, Limiter, ManualClock, Mode, Outcome};

mod common;
use common::SplitMix;

const WORKERS: u64 = 6;
const OPS: u64 = 20_000;
const DEADLINE: Duration = Duration::from_secs(60);

#[test]
fn stress_runtime_transitions_lose_no_permit() {
    let clock = ManualClock::new();
    let limiter = Limiter::builder()
        .algorithm(Algorithm::Aimd)
        .initial_limit(4)
        .min_limit(1)
        .max_limit(24)
        .warmup_samples(0)
        .seed(11)
        .sample_window(Duration::from_millis(10))
        .clock(clock.clone())
        .build()
        .expect("valid");
    let attempts = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));

    let workers: Vec<_> = (0..WORKERS)
        .map(|i| {
            let (limiter, clock, attempts) = (limiter.clone(), clock.clone(), attempts.clone());
            thread::spawn(move || {
                let mut rng = SplitMix::new(i);
                let mut held = Vec::new();
                for _ in 0..OPS {
                    match rng.below(10) {
                        0..=3 => {
                            attempts.fetch_add(1, Ordering::Relaxed);
                            if let Ok(p) = limiter.try_acquire_owned() {
                                held.push(p);
                            }
                        }
                        4 => {
                            // Wait holding nothing, so the permits that
                            // can free this waiter are not its own.
                            held.clear();
                            attempts.fetch_add(1, Ordering::Relaxed);
                            if let Ok(p) = limiter.acquire_blocking() {
                                p.success();
                            }
                        }
                        5..=8 if !held.is_empty() => {
                            let p = held.swap_remove(rng.below(held.len() as u64) as usize);
                            clock.advance(Duration::from_millis(rng.below(4)));
                            match rng.below(3) {
                                0 => p.record(Outcome::Failure),
                                1 => p.success(),
                                _ => drop(p),
                            }
                        }
                        _ => held.clear(),
                    }
                    if held.len() > 4 {
                        held.clear();
                    }
                }
            })
        })
        .collect();

    let controller = {
        let (limiter, done) = (limiter.clone(), done.clone());
        thread::spawn(move || {
            let mut rng = SplitMix::new(99);
            let mut changes = 0u64;
            while !done.load(Ordering::Acquire) {
                match rng.below(7) {
                    0 => {
                        let m = [Mode::Enforce, Mode::Shadow, Mode::Bypass][rng.below(3) as usize];
                        limiter.set_mode(m);
                    }
                    1 => {
                        let min = 1 + rng.below(6) as usize;
                        let max = min + rng.below(20) as usize;
                        limiter
                            .reconfigure(|b| b.min_limit(min).max_limit(max))
                            .expect("valid bounds");
                    }
                    2 => {
                        limiter
                            .force_limit(1 + rng.below(12) as usize)
                            .expect("valid limit");
                    }
                    3 => {
                        limiter.release_forced_limit();
                    }
                    4 => {
                        let a = [Algorithm::Aimd, Algorithm::Vegas, Algorithm::Ceiling]
                            [rng.below(3) as usize];
                        limiter.reconfigure(|b| b.algorithm(a)).expect("valid law");
                    }
                    5 => {
                        let ms = 1 + rng.below(20);
                        limiter
                            .reconfigure(|b| b.sample_window(Duration::from_millis(ms)))
                            .expect("valid window");
                    }
                    _ => {
                        // A refused change in the middle of the traffic.
                        assert!(limiter.reconfigure(|b| b.min_limit(0)).is_err());
                    }
                }
                changes += 1;
                thread::yield_now();
            }
            changes
        })
    };

    // The deadlock guard.
    let guard = {
        let (limiter, done) = (limiter.clone(), done.clone());
        thread::spawn(move || {
            let start = Instant::now();
            while !done.load(Ordering::Acquire) {
                if start.elapsed() > DEADLINE {
                    limiter.close();
                    return true;
                }
                thread::sleep(Duration::from_millis(20));
            }
            false
        })
    };

    for w in workers {
        w.join().expect("worker");
    }
    done.store(true, Ordering::Release);
    let changes = controller.join().expect("controller");
    assert!(
        !guard.join().expect("guard"),
        "a worker was stuck: a permit was lost or a wake-up missed"
    );
    assert!(changes > 0);

    let s = limiter.stats();
    assert_eq!(s.in_flight, 0);
    assert_eq!(s.total, s.success + s.failures + s.dropped);
    assert_eq!(s.total + s.rejected, attempts.load(Ordering::Relaxed));
    assert!(s.would_reject <= s.total);
    limiter.set_mode(Mode::Enforce);
    limiter.release_forced_limit();
    let limit = limiter.limit();
    assert_eq!((limiter.available(), limiter.debt()), (limit, 0));
    let all: Vec<_> = (0..limit)
        .map(|_| limiter.try_acquire().expect("every permit is back"))
        .collect();
    assert!(limiter.try_acquire().is_err(), "and not one more");
    drop(all);
}
