//! Concurrency stress tests of the public API.
//!
//! Many tasks (or threads) share one [`Limiter`] whose sample windows close
//! every few operations (a [`ManualClock`] advanced by the workers), so the
//! limit grows and shrinks — with debt — while permits are held. Every
//! admission path is mixed in: `acquire`, `try_acquire`, `acquire_timeout`,
//! `execute`, `try_execute`, owned permits moved into other tasks, the
//! blocking forms, and every way a permit can end (success, failure, explicit
//! latency, skipped sample, dropped).
//!
//! The tests count what they hold and what they attempted, and check:
//!
//! * the permits held never exceed `max_limit`, nor does `in_flight`, and the
//!   limit stays within `[min_limit, max_limit]` at every sample;
//! * at the end nothing is in flight, there is no debt, every permit is
//!   free, `total == success + failures + dropped + in_flight`, and
//!   `rejected + total` equals the attempts the test made;
//! * close and drain then complete.
//!
//! Randomness comes from a per-task splitmix64 seeded from the task index,
//! and the limiter's jitter is seeded, so each run makes the same choices
//! (the interleaving is up to the scheduler).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use adaptx::{Algorithm, Limiter, ManualClock, Outcome, Permit};

mod common;
use common::SplitMix;

const MIN: usize = 1;
const MAX: usize = 40;
const TASKS: u64 = 64;
const OPS: u64 = 500;
const THREADS: u64 = 8;
/// After this long the deadlock guard closes the limiter, which wakes every
/// waiter with an error, so a lost permit fails the test instead of hanging
/// it.
const DEADLINE: Duration = Duration::from_secs(60);
const STUCK: &str = "closed by the deadlock guard: a permit was lost or a wake-up missed";

/// The concurrency past which the simulated backend slows down and fails,
/// for the async runs (64 tasks) and the thread run (8 threads).
const TASK_CAPACITY: u64 = 30;
const THREAD_CAPACITY: u64 = 6;

/// What the test shares between its workers.
struct Shared {
    limiter: Limiter,
    clock: ManualClock,
    /// Permits the test holds right now.
    held: AtomicUsize,
    /// The largest value `held` reached.
    peak: AtomicUsize,
    /// Admission attempts: every call that can admit or reject.
    attempts: AtomicU64,
    /// Outcomes the test recorded: successes, failures (sampled or not), and
    /// permits it dropped.
    ended: [AtomicU64; 3],
    /// Samples the watchdog took, and how many saw shrink debt.
    samples: AtomicU64,
    debt_seen: AtomicU64,
    done: AtomicBool,
    /// Whether latencies measured on the manual clock (often zero) may be
    /// recorded. Vegas holds its limit forever once its latency floor is
    /// zero, so its run reports explicit latencies only.
    clock_latency: bool,
    /// See [`TASK_CAPACITY`].
    capacity: u64,
}

impl Shared {
    fn new(algorithm: Algorithm, seed: u64, capacity: u64) -> Arc<Self> {
        let clock_latency = algorithm != Algorithm::Vegas;
        let clock = ManualClock::new();
        let limiter = Limiter::builder()
            .algorithm(algorithm)
            .clock(clock.clone())
            .sample_window(Duration::from_millis(1))
            .warmup_samples(0)
            .initial_limit(8)
            .min_limit(MIN)
            .max_limit(MAX)
            .target_latency(Duration::from_micros(400))
            .tolerance(0.3)
            .jitter(0.5)
            .seed(seed)
            .build()
            .expect("valid configuration");
        Arc::new(Self {
            limiter,
            clock,
            held: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            attempts: AtomicU64::new(0),
            ended: std::array::from_fn(|_| AtomicU64::new(0)),
            samples: AtomicU64::new(0),
            debt_seen: AtomicU64::new(0),
            done: AtomicBool::new(false),
            clock_latency,
            capacity,
        })
    }

    fn attempt(&self) {
        self.attempts.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one outcome the test recorded: `Some(success)`, or `None` for
    /// a permit it dropped.
    fn ended(&self, how: Option<bool>) {
        let i = match how {
            Some(true) => 0,
            Some(false) => 1,
            None => 2,
        };
        self.ended[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Called right after the test obtains a permit.
    fn took(&self) {
        let now = self.held.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::Relaxed);
        assert!(now <= MAX, "the test holds {now} permits, max is {MAX}");
        self.sample();
    }

    /// Called right before the test gives a permit back.
    fn gives_back(&self) {
        let before = self.held.fetch_sub(1, Ordering::SeqCst);
        assert!(before > 0, "held count underflow");
    }

    /// The checks that hold at any instant.
    fn sample(&self) {
        let l = &self.limiter;
        let in_flight = l.in_flight();
        assert!(in_flight <= MAX, "in_flight {in_flight} > max {MAX}");
        let limit = l.limit();
        assert!((MIN..=MAX).contains(&limit), "limit {limit} out of bounds");
        let held = self.held.load(Ordering::SeqCst);
        assert!(held <= MAX, "held {held} > max {MAX}");
        if l.debt() > 0 {
            self.debt_seen.fetch_add(1, Ordering::Relaxed);
        }
        self.samples.fetch_add(1, Ordering::Relaxed);
    }

    /// Ends a permit the test holds, in a random way. Outcomes and explicit
    /// latencies follow a backend that degrades past `capacity` concurrent
    /// operations, so the limit climbs, overshoots and is cut.
    fn finish(&self, permit: Permit<'_>, rng: &mut SplitMix) {
        let over = (self.held.load(Ordering::SeqCst) as u64).saturating_sub(self.capacity);
        let latency = Duration::from_micros(200 + rng.below(20) + 40 * over);
        let fail = (over > 0 && rng.chance(30)) || rng.below(500) == 0;
        let outcome = Outcome::from_success(!fail);
        self.gives_back();
        match rng.below(20) {
            0..=11 => permit.record_with_latency(outcome, latency),
            12..=13 if self.clock_latency => permit.record(outcome),
            14 if self.clock_latency => {
                permit.success();
                return self.ended(Some(true));
            }
            12..=15 => permit.record_skipped(outcome),
            _ => {
                drop(permit);
                return self.ended(None);
            }
        }
        self.ended(Some(!fail));
    }

    /// The checks at quiescence.
    fn check_end(&self) {
        let l = &self.limiter;
        let s = l.stats();
        assert_eq!(self.held.load(Ordering::SeqCst), 0);
        assert_eq!(l.in_flight(), 0, "permits leaked: {s:?}");
        assert_eq!(l.debt(), 0, "debt left: {s:?}");
        assert_eq!(l.available(), l.limit(), "free permits != limit: {s:?}");
        assert_eq!(l.available() + l.in_flight() - l.debt(), l.limit());
        assert_eq!(s.in_flight, 0);
        // Compared with what the test itself counted, not with each other.
        let ended = |i: usize| self.ended[i].load(Ordering::Relaxed);
        assert_eq!((s.success, s.failures), (ended(0), ended(1)), "{s:?}");
        // A permit granted to an acquire that the test then abandoned (a
        // timeout) is dropped by the limiter, unseen by the test.
        assert!(s.dropped >= ended(2), "{s:?}");
        assert!((MIN..=MAX).contains(&s.limit), "{s:?}");
        assert_eq!(
            s.rejected + s.total,
            self.attempts.load(Ordering::Relaxed),
            "every attempt is admitted or rejected exactly once: {s:?}"
        );
        // The windows did move the limit both ways, so limits moved under
        // held permits.
        assert!(
            s.increases > 0 && s.decreases > 0,
            "limit never moved: {s:?}"
        );
        assert!(self.peak.load(Ordering::Relaxed) >= 1);
        assert!(l.allow());
        assert!(l.close());
        assert_eq!(l.in_flight(), 0);
        l.close_blocking(Duration::from_secs(5))
            .expect("nothing in flight: the drain completes");
        assert!(l.try_acquire().is_err());
        let after = l.stats();
        assert_eq!(after.rejected, s.rejected + 1);
    }
}

/// One async worker: `OPS` random operations, holding at most one permit of
/// its own at a time (so waiting never deadlocks).
async fn worker(sh: Arc<Shared>, id: u64) {
    let mut rng = SplitMix::new(id + 1);
    let l = &sh.limiter;
    for i in 0..OPS {
        if (i + id) % 8 == 0 {
            sh.clock
                .advance(Duration::from_micros(150 + rng.below(300)));
        }
        match rng.below(16) {
            0..=3 => {
                sh.attempt();
                if let Ok(p) = l.try_acquire() {
                    sh.took();
                    hold(&sh, p, &mut rng).await;
                }
            }
            4..=7 => {
                sh.attempt();
                let p = l.acquire().await.expect(STUCK);
                sh.took();
                hold(&sh, p, &mut rng).await;
            }
            8..=9 => {
                sh.attempt();
                let timeout = Duration::from_micros(rng.below(300));
                if let Ok(p) = l.acquire_timeout(timeout).await {
                    sh.took();
                    hold(&sh, p, &mut rng).await;
                }
            }
            10..=11 => {
                sh.attempt();
                let fail = rng.below(200) == 0;
                let yields = rng.below(3);
                let skip = !sh.clock_latency || rng.chance(10);
                let r = l
                    .execute(async |ctl| {
                        sh.took();
                        assert!(ctl.limit() <= MAX && ctl.in_flight() < MAX);
                        if skip {
                            ctl.skip_sample();
                        }
                        for _ in 0..yields {
                            tokio::task::yield_now().await;
                        }
                        sh.gives_back();
                        if fail { Err(()) } else { Ok(()) }
                    })
                    .await;
                assert!(!matches!(r, Err(adaptx::ExecuteError::Closed)), "{STUCK}");
                assert_eq!(r.is_err(), fail);
                sh.ended(Some(!fail));
            }
            12 => {
                sh.attempt();
                let fail = rng.below(200) == 0;
                let skip = !sh.clock_latency;
                let r = l
                    .try_execute(async |ctl| {
                        sh.took();
                        if skip {
                            ctl.skip_sample();
                        }
                        tokio::task::yield_now().await;
                        sh.gives_back();
                        if fail { Err(()) } else { Ok(()) }
                    })
                    .await;
                match r {
                    Ok(()) => sh.ended(Some(true)),
                    Err(adaptx::TryExecuteError::Failed(())) => sh.ended(Some(false)),
                    Err(_) => {}
                }
            }
            13 => {
                // An owned permit finished by another task.
                sh.attempt();
                if let Ok(p) = l.try_acquire_owned() {
                    sh.took();
                    let sh2 = sh.clone();
                    let seed = rng.next();
                    tokio::spawn(async move {
                        let mut rng = SplitMix::new(seed);
                        tokio::task::yield_now().await;
                        sh2.finish(p, &mut rng);
                    })
                    .await
                    .expect("owned-permit task");
                }
            }
            14 => {
                // An acquire abandoned while (possibly) queued.
                sh.attempt();
                let fut = l.acquire();
                let r = tokio::time::timeout(Duration::ZERO, fut).await;
                if let Ok(r) = r {
                    let p = r.expect(STUCK);
                    sh.took();
                    sh.finish(p, &mut rng);
                }
            }
            _ => {
                sh.sample();
                tokio::task::yield_now().await;
            }
        }
    }
}

/// Holds a permit for a random number of yields (so windows close and the
/// limit moves while it is held), then ends it.
async fn hold(sh: &Shared, p: Permit<'_>, rng: &mut SplitMix) {
    for _ in 0..rng.below(4) {
        tokio::task::yield_now().await;
        sh.sample();
    }
    if rng.chance(10) {
        sh.clock.advance(Duration::from_micros(rng.below(200)));
    }
    sh.finish(p, rng);
}

async fn run_async(algorithm: Algorithm, seed: u64) {
    let sh = Shared::new(algorithm, seed, TASK_CAPACITY);
    let watchdog = {
        let sh = sh.clone();
        tokio::spawn(async move {
            while !sh.done.load(Ordering::Relaxed) {
                sh.sample();
                tokio::task::yield_now().await;
            }
        })
    };
    let guard = {
        let sh = sh.clone();
        tokio::spawn(async move {
            tokio::time::sleep(DEADLINE).await;
            sh.limiter.close();
        })
    };
    let workers: Vec<_> = (0..TASKS)
        .map(|id| tokio::spawn(worker(sh.clone(), id)))
        .collect();
    for w in workers {
        w.await.expect("worker panicked");
    }
    guard.abort();
    assert!(!sh.limiter.is_closed(), "{STUCK}");
    sh.done.store(true, Ordering::Relaxed);
    watchdog.await.expect("watchdog panicked");
    let s = sh.limiter.stats();
    println!(
        "{algorithm:?}: {s:?}; samples {} (with debt {}), peak held {}",
        sh.samples.load(Ordering::Relaxed),
        sh.debt_seen.load(Ordering::Relaxed),
        sh.peak.load(Ordering::Relaxed),
    );
    sh.check_end();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stress_async_aimd() {
    run_async(Algorithm::Aimd, 11).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stress_async_vegas() {
    run_async(Algorithm::Vegas, 12).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stress_async_gradient() {
    run_async(Algorithm::Gradient, 13).await;
}

/// Plain threads with the blocking forms.
#[test]
fn stress_threads_blocking() {
    let sh = Shared::new(Algorithm::Aimd, 21, THREAD_CAPACITY);
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|scope| {
        let guard = {
            let sh = &*sh;
            scope.spawn(move || {
                let r = stopped.recv_timeout(DEADLINE);
                if matches!(r, Err(std::sync::mpsc::RecvTimeoutError::Timeout)) {
                    sh.limiter.close();
                }
            })
        };
        let mut workers = Vec::new();
        for id in 0..THREADS {
            let sh = &*sh;
            workers.push(scope.spawn(move || {
                let mut rng = SplitMix::new(100 + id);
                let l = &sh.limiter;
                for i in 0..OPS {
                    if (i + id) % 4 == 0 {
                        sh.clock
                            .advance(Duration::from_micros(150 + rng.below(300)));
                    }
                    let p = match rng.below(8) {
                        0..=3 => {
                            sh.attempt();
                            Some(l.acquire_blocking().expect(STUCK))
                        }
                        4..=5 => {
                            sh.attempt();
                            l.try_acquire().ok()
                        }
                        _ => {
                            sh.attempt();
                            let t = Duration::from_micros(rng.below(200));
                            l.acquire_blocking_timeout(t).ok()
                        }
                    };
                    if let Some(p) = p {
                        sh.took();
                        if rng.chance(30) {
                            std::thread::yield_now();
                        }
                        sh.finish(p, &mut rng);
                    } else {
                        sh.sample();
                    }
                }
            }));
        }
        let results: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
        drop(stop);
        guard.join().expect("guard");
        for r in results {
            if let Err(panic) = r {
                std::panic::resume_unwind(panic);
            }
        }
    });
    assert!(!sh.limiter.is_closed(), "{STUCK}");
    let s = sh.limiter.stats();
    println!(
        "threads: {s:?}; samples {} (with debt {}), peak held {}",
        sh.samples.load(Ordering::Relaxed),
        sh.debt_seen.load(Ordering::Relaxed),
        sh.peak.load(Ordering::Relaxed),
    );
    sh.check_end();
}
