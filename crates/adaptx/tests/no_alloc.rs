//! Proves that the limiter's hot path never touches the heap.
//!
//! A counting global allocator wraps [`System`]. Counting is armed per thread
//! (a const-initialized thread-local flag), only around the measured section,
//! so the test harness and other tests running on other threads cannot
//! disturb the count. The first few allocations or deallocations seen while
//! armed print their size and a backtrace, so a failure names its culprit.
//!
//! Measured: `try_acquire` with `success`, `failure`, `record_with_latency`,
//! `record_skipped` and drop; `try_acquire_owned`; rejections; `allow`,
//! `limit`, `in_flight`; completions that close a window and run the law
//! with the limit moving both ways; and the async `acquire` future, which
//! must complete on its first poll when a permit is free. The rate limiter's
//! admissions (global and keyed), rejections, completions and interval
//! closes that move the rate.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::backtrace::Backtrace;
use std::cell::Cell;
use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use adaptx::{Algorithm, Limiter, ManualClock, Outcome, RateLimiter, TryAcquireError};

/// Backtraces printed per thread at most (each one allocates, unarmed).
const MAX_REPORTS: u32 = 3;

thread_local! {
    /// Whether heap operations on this thread are counted.
    static ARMED: Cell<bool> = const { Cell::new(false) };
    /// Allocations (`alloc`, `alloc_zeroed`, `realloc`) while armed.
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
    /// Deallocations while armed.
    static FREES: Cell<u64> = const { Cell::new(0) };
    /// Backtraces printed so far.
    static REPORTS: Cell<u32> = const { Cell::new(0) };
}

/// Counts one heap operation if this thread is armed, and reports it.
fn note(what: &'static str, size: usize, counter: &'static std::thread::LocalKey<Cell<u64>>) {
    // `try_with`: the allocator also runs while thread-locals are torn down.
    let armed = ARMED.try_with(Cell::get).unwrap_or(false);
    if !armed {
        return;
    }
    let _ = counter.try_with(|c| c.set(c.get() + 1));
    let reports = REPORTS.try_with(Cell::get).unwrap_or(MAX_REPORTS);
    if reports < MAX_REPORTS {
        // Disarm while reporting: printing and capturing allocate.
        ARMED.with(|a| a.set(false));
        REPORTS.with(|r| r.set(reports + 1));
        eprintln!(
            "unexpected {what} of {size} bytes on the hot path:\n{}",
            Backtrace::force_capture()
        );
        ARMED.with(|a| a.set(true));
    }
}

/// [`System`], counting heap operations on armed threads.
struct Counting;

// SAFETY: every method forwards its arguments unchanged to `System`, which
// upholds the `GlobalAlloc` contract; the counting touches only
// const-initialized thread-locals and never allocates while armed.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note("allocation", layout.size(), &ALLOCS);
        // SAFETY: forwards the caller's layout, with the caller's guarantees,
        // to the system allocator.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note("zeroed allocation", layout.size(), &ALLOCS);
        // SAFETY: forwards the caller's layout, with the caller's guarantees,
        // to the system allocator.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note("reallocation", new_size, &ALLOCS);
        // SAFETY: forwards the caller's block, layout and size, with the
        // caller's guarantees, to the system allocator that allocated it.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note("deallocation", layout.size(), &FREES);
        // SAFETY: forwards the caller's block and layout, with the caller's
        // guarantees, to the system allocator that allocated it.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` with counting armed on this thread; returns `f`'s result and the
/// numbers of allocations and deallocations it performed.
fn counting<R>(f: impl FnOnce() -> R) -> (R, u64, u64) {
    ALLOCS.with(|c| c.set(0));
    FREES.with(|c| c.set(0));
    ARMED.with(|a| a.set(true));
    let r = f();
    ARMED.with(|a| a.set(false));
    (r, ALLOCS.with(Cell::get), FREES.with(Cell::get))
}

/// Asserts that `f` neither allocates nor frees.
fn assert_no_alloc<R>(what: &str, f: impl FnOnce() -> R) -> R {
    let (r, allocs, frees) = counting(f);
    assert_eq!(
        (allocs, frees),
        (0, 0),
        "{what}: {allocs} allocations and {frees} deallocations (backtraces above)"
    );
    r
}

const N: usize = 10_000;
const LATENCY: Duration = Duration::from_micros(250);

#[test]
fn the_counter_sees_allocations() {
    // Expected allocations: no backtrace.
    REPORTS.with(|r| r.set(MAX_REPORTS));
    let (_, allocs, frees) = counting(|| drop(black_box(vec![1u8; 64])));
    assert_eq!((allocs, frees), (1, 1));
}

#[test]
fn the_counter_sees_the_library_allocate() {
    // A queued waiter is the one admission path that allocates (its queue
    // node): proof that the counter sees allocations made inside the crate.
    REPORTS.with(|r| r.set(MAX_REPORTS));
    let l = Limiter::builder()
        .initial_limit(1)
        .build()
        .expect("valid configuration");
    let held = l.try_acquire().expect("free");
    let mut cx = Context::from_waker(Waker::noop());
    let mut fut = pin!(l.acquire());
    let (pending, allocs, _) = counting(|| fut.as_mut().poll(&mut cx).is_pending());
    assert!(pending);
    assert!(allocs > 0, "the queued waiter's node was not counted");
    held.success();
    match fut.as_mut().poll(&mut cx) {
        Poll::Ready(Ok(p)) => p.success(),
        other => panic!("the released permit goes to the waiter: {other:?}"),
    }
}

#[test]
fn admission_and_completion_do_not_allocate() {
    // The default law (Ceiling, whose fresh failures close the window at
    // once) and the seed's AIMD.
    for algorithm in [Algorithm::default(), Algorithm::Aimd] {
        hot_path_does_not_allocate(algorithm);
    }
}

fn hot_path_does_not_allocate(algorithm: Algorithm) {
    // The default system clock and 1 s windows: a window may close mid-run,
    // which is part of what is measured.
    let l = Limiter::builder()
        .algorithm(algorithm)
        .initial_limit(1000)
        .max_limit(1000)
        .warmup_samples(0)
        .build()
        .expect("valid configuration");
    // Warm up every path once (first calls, lazy statics).
    l.try_acquire().expect("free").success();
    l.try_acquire().expect("free").failure();
    l.try_acquire()
        .expect("free")
        .record_with_latency(Outcome::Success, LATENCY);
    l.try_acquire()
        .expect("free")
        .record_skipped(Outcome::Success);
    drop(l.try_acquire().expect("free"));
    drop(l.try_acquire_owned().expect("free"));

    assert_no_alloc("try_acquire + success/failure", || {
        for i in 0..N {
            let p = l.try_acquire().expect("free");
            if i % 16 == 0 {
                p.failure()
            } else {
                p.success()
            }
        }
    });
    assert_no_alloc("try_acquire + record_with_latency", || {
        for _ in 0..N {
            l.try_acquire()
                .expect("free")
                .record_with_latency(Outcome::Success, LATENCY);
        }
    });
    assert_no_alloc("try_acquire + record_skipped", || {
        for i in 0..N {
            l.try_acquire()
                .expect("free")
                .record_skipped(Outcome::from_success(i % 2 == 0));
        }
    });
    assert_no_alloc("try_acquire + drop", || {
        for _ in 0..N {
            drop(l.try_acquire().expect("free"));
        }
    });
    assert_no_alloc("try_acquire_owned + success", || {
        for _ in 0..N {
            l.try_acquire_owned().expect("free").success();
        }
    });
    let reads = assert_no_alloc("allow / limit / in_flight", || {
        let mut acc = 0usize;
        for _ in 0..N {
            acc += usize::from(black_box(&l).allow());
            acc += black_box(&l).limit();
            acc += black_box(&l).in_flight();
        }
        acc
    });
    // Every read happened (allow() is true: nothing is in flight).
    assert_eq!(reads, N * (1 + l.limit()));

    let s = l.stats();
    assert_eq!(s.in_flight, 0);
    assert_eq!(s.dropped, N as u64 + 2);
}

#[test]
fn rejection_does_not_allocate() {
    let l = Limiter::builder()
        .initial_limit(1)
        .build()
        .expect("valid configuration");
    let held = l.try_acquire().expect("free");
    assert_eq!(l.try_acquire().err(), Some(TryAcquireError::NoCapacity));
    assert_no_alloc("rejected try_acquire", || {
        for _ in 0..N {
            assert!(l.try_acquire().is_err());
            assert!(!l.allow());
        }
    });
    held.success();
    l.close();
    assert_no_alloc("try_acquire after close", || {
        for _ in 0..N {
            assert_eq!(l.try_acquire().err(), Some(TryAcquireError::Closed));
        }
    });
}

/// Windows of saturated rounds: `b` (max limit 64, no warmup, no jitter)
/// on `clock` is warmed up with one full window (the first close takes the
/// control mutex, etc.), then runs `rounds` rounds without allocating: each
/// holds every permit, advances `step` and completes them all as
/// `ending(round)` says. Returns the limiter and the limit after each round.
fn saturated_rounds(
    what: &str,
    b: adaptx::Builder,
    clock: &ManualClock,
    rounds: usize,
    step: Duration,
    ending: impl Fn(usize) -> (Outcome, Duration),
) -> (Limiter, Vec<usize>) {
    const MAX: usize = 64;
    let l = b
        .clock(clock.clone())
        .max_limit(MAX)
        .warmup_samples(0)
        .jitter(0.0)
        .build()
        .expect("valid configuration");
    let mut held = Vec::with_capacity(MAX);
    held.push(l.try_acquire().expect("free"));
    clock.advance(Duration::from_secs(1));
    for p in held.drain(..) {
        p.record_with_latency(Outcome::Success, LATENCY);
    }
    let mut limits = Vec::with_capacity(rounds);
    assert_no_alloc(what, || {
        for round in 0..rounds {
            while let Ok(p) = l.try_acquire() {
                held.push(p);
            }
            clock.advance(step);
            let (outcome, latency) = ending(round);
            // The first completion finds the window over (or, adaptive,
            // old and full enough): it closes it and runs the law.
            for p in held.drain(..) {
                p.record_with_latency(outcome, latency);
            }
            limits.push(l.limit());
        }
    });
    assert_eq!(l.in_flight(), 0);
    drop(held);
    (l, limits)
}

#[test]
fn window_closes_do_not_allocate() {
    // Saturated, so the window's peak reaches the limit and AIMD grows it;
    // every fifth window fails and halves it.
    let clock = ManualClock::new();
    let b = Limiter::builder()
        .initial_limit(4)
        .sample_window(Duration::from_secs(1));
    let (l, limits) = saturated_rounds(
        "saturated windows closing, AIMD moving the limit",
        b,
        &clock,
        2_000,
        Duration::from_secs(1),
        |round| (Outcome::from_success(round % 5 != 4), LATENCY),
    );
    let s = l.stats();
    assert!(s.increases > 0 && s.decreases > 0, "the limit moved: {s:?}");
    assert!(limits.windows(2).any(|w| w[1] > w[0]));
    assert!(limits.windows(2).any(|w| w[1] < w[0]));
}

#[test]
fn adaptive_window_closes_and_baseline_probes_do_not_allocate() {
    // Vegas (with its baseline manager) on adaptive windows: each window
    // closes on its samples after 4 latencies, not on the 1 s sample
    // window; the latency doubles for a stretch, so Vegas cuts, re-probes
    // its floor and adopts it.
    let clock = ManualClock::new();
    let b = Limiter::builder()
        .algorithm(adaptx::Algorithm::Vegas)
        .initial_limit(8)
        .sample_window(Duration::from_secs(1))
        .sample_window_adaptive(4, 4.0);
    let (l, _) = saturated_rounds(
        "adaptive windows closing, Vegas probing its floor",
        b,
        &clock,
        2_000,
        4 * LATENCY,
        |round| {
            let slow = (200..800).contains(&round);
            (Outcome::Success, if slow { 2 * LATENCY } else { LATENCY })
        },
    );
    let s = l.stats();
    assert!(
        s.increases + s.decreases > 100,
        "windows closed early: {s:?}"
    );
}

#[test]
fn ready_acquire_completes_on_first_poll_without_allocating() {
    let l = Limiter::builder()
        .initial_limit(1000)
        .max_limit(1000)
        .build()
        .expect("valid configuration");
    let mut cx = Context::from_waker(Waker::noop());
    // Warm up.
    match pin!(l.acquire()).poll(&mut cx) {
        Poll::Ready(Ok(p)) => p.success(),
        other => panic!("a free permit must be ready on the first poll: {other:?}"),
    }

    assert_no_alloc("acquire() polled once", || {
        for i in 0..N {
            let mut fut = pin!(l.acquire());
            match fut.as_mut().poll(&mut cx) {
                Poll::Ready(Ok(p)) if i % 2 == 0 => p.success(),
                Poll::Ready(Ok(p)) => drop(p),
                other => panic!("a free permit must be ready on the first poll: {other:?}"),
            }
        }
    });
    assert_no_alloc("acquire_owned() polled once", || {
        for _ in 0..N {
            let mut fut = pin!(l.acquire_owned());
            match fut.as_mut().poll(&mut cx) {
                Poll::Ready(Ok(p)) => p.success(),
                other => panic!("a free permit must be ready on the first poll: {other:?}"),
            }
        }
    });
    assert_eq!(l.in_flight(), 0);
}

#[test]
fn partitioned_admission_and_completion_do_not_allocate() {
    let l = Limiter::builder()
        .initial_limit(1000)
        .max_limit(1000)
        .warmup_samples(0)
        .partitions(
            adaptx::Partitions::new()
                .share("critical", 0.7)
                .share("batch", 0.3),
        )
        .build()
        .expect("valid configuration");
    let critical = l.class("critical").expect("a partition");
    let batch = l.class("batch").expect("a partition").with_priority(3);
    l.try_acquire_as(critical).expect("free").success();
    assert_no_alloc("partitioned try_acquire_as + success/drop", || {
        for _ in 0..N {
            l.try_acquire_as(critical).expect("free").success();
            drop(l.try_acquire_as(batch).expect("free"));
            l.try_acquire().expect("free").failure();
        }
    });
    assert_eq!(l.in_flight(), 0);
}

#[test]
fn shadow_admission_above_the_limit_does_not_allocate() {
    let l = Limiter::builder()
        .initial_limit(1)
        .warmup_samples(0)
        .build()
        .expect("valid configuration");
    let held = l.try_acquire().expect("free");
    l.set_mode(adaptx::Mode::Shadow);
    // Warm up the path once.
    l.try_acquire().expect("above the limit").success();
    assert_no_alloc("try_acquire above the limit + success + release", || {
        for _ in 0..N {
            l.try_acquire().expect("above the limit").success();
            assert!(l.allow());
        }
    });
    let waker = Waker::noop();
    let mut cx = Context::from_waker(waker);
    assert_no_alloc("acquire above the limit, ready at once", || {
        for _ in 0..N {
            let mut fut = pin!(l.acquire());
            match fut.as_mut().poll(&mut cx) {
                Poll::Ready(Ok(p)) => drop(p),
                other => panic!("shadow mode admits at once: {other:?}"),
            }
        }
    });
    drop(held);
    let s = l.stats();
    assert_eq!(
        (s.in_flight, s.would_reject, s.rejected),
        (0, 2 * N as u64 + 1, 0)
    );
}

/// With the `metrics` feature and a Prometheus recorder, whose counters and
/// gauges are atomics: admission, completion, rejection and a dropped
/// permit allocate nothing (the handles were registered at build).
#[cfg(feature = "metrics")]
#[test]
fn with_metrics_the_hot_path_does_not_allocate() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    // A manual clock that stays put, and a law that does not close a window
    // on a failure: no window closes (see the next test).
    let l = metrics::with_local_recorder(&recorder, || {
        Limiter::builder()
            .name("no-alloc")
            .algorithm(Algorithm::Aimd)
            .clock(ManualClock::new())
            .initial_limit(2)
            .build()
            .expect("valid configuration")
    });
    // Warm up every path once.
    l.try_acquire().expect("free").success();
    drop(l.try_acquire().expect("free"));
    assert_no_alloc("with metrics: try_acquire + success/failure/drop", || {
        for i in 0..N {
            let p = l.try_acquire().expect("free");
            match i % 3 {
                0 => p.success(),
                1 => p.failure(),
                _ => drop(p),
            }
        }
    });
    let held = [
        l.try_acquire().expect("free"),
        l.try_acquire().expect("free"),
    ];
    assert!(l.try_acquire().is_err());
    assert_no_alloc("with metrics: rejected try_acquire", || {
        for _ in 0..N {
            assert!(l.try_acquire().is_err());
        }
    });
    drop(held);
    let text = recorder.handle().render();
    assert!(
        text.contains("adaptx_limiter_rejected_total{limiter=\"no-alloc\"} 10001"),
        "{text}"
    );
}

/// A recorder whose every metric is an atomic allocated at registration:
/// what our side of a window close allocates shows alone. (Prometheus'
/// histogram stores the samples it is handed in blocks it allocates: that
/// is the recorder's cost, at window closes only.)
#[cfg(feature = "metrics")]
#[derive(Debug, Default)]
struct AtomicRecorder;

#[cfg(feature = "metrics")]
#[derive(Debug, Default)]
struct Count(std::sync::atomic::AtomicU64);

#[cfg(feature = "metrics")]
impl metrics::HistogramFn for Count {
    fn record(&self, _: f64) {
        self.record_many(0.0, 1);
    }

    fn record_many(&self, _: f64, count: usize) {
        self.0
            .fetch_add(count as u64, std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(feature = "metrics")]
impl metrics::Recorder for AtomicRecorder {
    fn describe_counter(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }

    fn register_counter(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        metrics::Counter::from_arc(std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0)))
    }

    fn register_gauge(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::from_arc(std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0)))
    }

    fn register_histogram(
        &self,
        _: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        metrics::Histogram::from_arc(std::sync::Arc::new(Count::default()))
    }
}

/// With the `metrics` feature: window closes publish outcomes and
/// latencies without allocating (on a recorder that does not itself).
#[cfg(feature = "metrics")]
#[test]
fn with_metrics_window_closes_do_not_allocate() {
    let recorder = AtomicRecorder;
    let clock = ManualClock::new();
    let (l, _) = metrics::with_local_recorder(&recorder, || {
        saturated_rounds(
            "with metrics: saturated windows closing",
            Limiter::builder()
                .name("closes")
                .algorithm(Algorithm::Aimd)
                .initial_limit(4),
            &clock,
            2_000,
            Duration::from_secs(1),
            |round| (Outcome::from_success(round % 5 != 4), LATENCY),
        )
    });
    let s = l.stats();
    assert!(s.increases > 0 && s.decreases > 0, "the limit moved: {s:?}");
}

/// The adaptive rate limiter's hot path — admission (its own bucket and a
/// key's), completions of every kind, rejections — and interval closes that
/// move the rate allocate nothing.
#[test]
fn rate_limiter_admission_completion_and_close_do_not_allocate() {
    let clock = ManualClock::new();
    let b = RateLimiter::builder()
        .initial_rate(1000)
        .max_rate(100_000)
        .adjust_interval(Duration::from_millis(10))
        .clock(clock.clone());
    let l = b.clone().build().expect("valid configuration");
    let keyed = b.build_keyed::<String>().expect("valid configuration");
    // Warm up: first calls, the key's bucket, the first close.
    l.try_acquire().expect("free").success();
    // A key's second request gets it a bucket of its own.
    keyed.try_acquire("a").expect("free").success();
    keyed.try_acquire("a").expect("free").success();
    clock.advance(Duration::from_millis(10));
    drop(l.try_acquire());
    let (mut admitted, mut rejected) = (0, 0);
    assert_no_alloc("rate try_acquire + outcomes, rejections, closes", || {
        for i in 0..N {
            match l.try_acquire() {
                Ok(p) if i % 3 == 0 => p.failure(),
                Ok(p) if i % 3 == 1 => p.success(),
                Ok(p) => drop(p),
                Err(limited) => {
                    black_box(limited.retry_after());
                    rejected += 1;
                    continue;
                }
            }
            admitted += 1;
            match keyed.try_acquire("a") {
                Ok(p) => p.record_with_latency(Outcome::Success, LATENCY),
                Err(limited) => drop(black_box(limited)),
            }
            if i % 64 == 0 {
                clock.advance(Duration::from_millis(10));
            }
        }
    });
    let s = l.stats();
    assert!(
        admitted > 0 && rejected > 0,
        "{admitted} admitted, {rejected} rejected"
    );
    assert!(s.decreases > 0, "closes moved the rate: {s:?}");
}
