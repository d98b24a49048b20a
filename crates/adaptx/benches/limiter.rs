//! Hot-path benchmarks of the limiter against `tokio::sync::Semaphore`.
//!
//! Everything runs in one criterion binary so the ratios between groups are
//! measured on the same machine state:
//!
//! * `uncontended`: one thread, `try_acquire` + outcome versus the tokio
//!   semaphore's `try_acquire` + drop, with and without the two
//!   `Instant::now()` calls a caller needs to measure latency itself.
//! * `contended_2_threads`: the same operations from two threads pinned to
//!   CPUs 0 and 1 sharing one limiter / semaphore; the reported time is the
//!   wall time for both threads to finish `N` operations each, divided by `N`.
//! * `reads`: the one-load accessors.
//! * `window`: a completion that closes a window and runs the law, versus one
//!   that does not.
//! * `stats`: a snapshot with 10 000 samples in the current window.
//! * `acquire_async`: the async `acquire` future polled once (ready at once,
//!   a permit is free) with a no-op waker.
//! * `partitioned`: `try_acquire` + release of a limiter with partitions
//!   (critical 70 %, batch 30 %, the default partition empty) against the
//!   same on an unpartitioned limiter: the issue-12 bound is 1.3×.
//! * `keyed`: `KeyedRateLimiter::try_acquire` + drop for a key already in a
//!   table of 10 000 (`u64` keys and 32-byte `String` keys): the key table's
//!   hot path.
//! * `metrics` (with `--features metrics` only): the success path, a
//!   rejection (one thread and two) and a window close of a limiter that
//!   reports to Prometheus' recorder, against the same limiter built with
//!   no recorder in force (its handles do nothing). The cost of the feature
//!   compiled in but unused is the other groups run with and without
//!   `--features metrics`.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Once};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::{Duration, Instant};

use adaptx::{
    KeyedRateLimiter, Limiter, MAX_LIMIT_BOUND, MAX_RATE_BOUND, ManualClock, Outcome, Partitions,
    RateLimiter,
};
use criterion::{Criterion, criterion_group, criterion_main};
use tokio::sync::Semaphore;

const PERMITS: usize = 1000;

/// initial = max = 1000, no warmup, default (1 s, system clock) windows: the
/// peak in flight stays far below the limit, so AIMD holds it.
fn limiter() -> Limiter {
    Limiter::builder()
        .initial_limit(PERMITS)
        .max_limit(PERMITS)
        .warmup_samples(0)
        .build()
        .expect("valid configuration")
}

#[inline]
fn adaptx_success(l: &Limiter) {
    l.try_acquire().expect("a permit is free").success();
}

#[inline]
fn adaptx_skipped(l: &Limiter) {
    l.try_acquire()
        .expect("a permit is free")
        .record_skipped(Outcome::Success);
}

#[inline]
fn tokio_2_instants(sem: &Semaphore) {
    let t0 = Instant::now();
    let p = sem.try_acquire().expect("a permit is free");
    let t1 = Instant::now();
    black_box(t1 - t0);
    drop(p);
}

#[inline]
fn tokio_plain(sem: &Semaphore) {
    drop(sem.try_acquire().expect("a permit is free"));
}

fn uncontended(c: &mut Criterion) {
    let mut g = c.benchmark_group("uncontended");
    let l = limiter();
    let sem = Semaphore::new(PERMITS);
    g.bench_function("adaptx_try_acquire_success", |b| {
        b.iter(|| adaptx_success(black_box(&l)));
    });
    g.bench_function("tokio_semaphore_try_acquire_2_instants", |b| {
        b.iter(|| tokio_2_instants(black_box(&sem)));
    });
    g.bench_function("adaptx_skipped", |b| {
        b.iter(|| adaptx_skipped(black_box(&l)));
    });
    g.bench_function("tokio_semaphore_try_acquire", |b| {
        b.iter(|| tokio_plain(black_box(&sem)));
    });
    g.finish();
}

/// Pins the calling thread to CPU `cpu`; prints a note once if it cannot.
fn pin_to(cpu: usize) {
    static NOTE: Once = Once::new();
    let pinned = core_affinity::get_core_ids()
        .and_then(|ids| ids.into_iter().find(|c| c.id == cpu))
        .is_some_and(core_affinity::set_for_current);
    if !pinned {
        NOTE.call_once(|| {
            eprintln!("note: could not pin a benchmark thread to CPU {cpu}; running unpinned");
        });
    }
}

/// Runs `op` `iters` times on each of two threads pinned to CPUs 0 and 1,
/// released together by a start line they spin on (a parking
/// `std::sync::Barrier` wakes the first thread tens of microseconds late,
/// so short batches ran one thread after the other, uncontended: 2-thread
/// figures 4× apart between runs). Returns the wall time from the first
/// thread's start to the last thread's end.
fn two_threads<S: Sync>(shared: &S, iters: u64, op: fn(&S)) -> Duration {
    let barrier = AtomicUsize::new(2);
    let spans: Vec<(Instant, Instant)> = thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|cpu| {
                let barrier = &barrier;
                s.spawn(move || {
                    pin_to(cpu);
                    barrier.fetch_sub(1, Ordering::AcqRel);
                    while barrier.load(Ordering::Acquire) != 0 {
                        std::hint::spin_loop();
                    }
                    let start = Instant::now();
                    for _ in 0..iters {
                        op(black_box(shared));
                    }
                    (start, Instant::now())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("benchmark thread panicked"))
            .collect()
    });
    let start = spans.iter().map(|s| s.0).min().expect("two threads");
    let end = spans.iter().map(|s| s.1).max().expect("two threads");
    end - start
}

fn contended(c: &mut Criterion) {
    let mut g = c.benchmark_group("contended_2_threads");
    let l = Arc::new(limiter());
    let sem = Arc::new(Semaphore::new(PERMITS));
    g.bench_function("adaptx_try_acquire_success", |b| {
        b.iter_custom(|iters| two_threads(&*l, iters, adaptx_success));
    });
    g.bench_function("tokio_semaphore_try_acquire_2_instants", |b| {
        b.iter_custom(|iters| two_threads(&*sem, iters, tokio_2_instants));
    });
    g.bench_function("adaptx_skipped", |b| {
        b.iter_custom(|iters| two_threads(&*l, iters, adaptx_skipped));
    });
    g.bench_function("tokio_semaphore_try_acquire", |b| {
        b.iter_custom(|iters| two_threads(&*sem, iters, tokio_plain));
    });
    g.finish();
}

fn reads(c: &mut Criterion) {
    let mut g = c.benchmark_group("reads");
    let l = limiter();
    g.bench_function("allow", |b| b.iter(|| black_box(&l).allow()));
    g.bench_function("limit", |b| b.iter(|| black_box(&l).limit()));
    g.bench_function("in_flight", |b| b.iter(|| black_box(&l).in_flight()));
    g.finish();
}

/// A limiter on a manual clock with the default 1 s window.
fn manual(clock: &ManualClock) -> Limiter {
    Limiter::builder()
        .clock(clock.clone())
        .initial_limit(PERMITS)
        .max_limit(PERMITS)
        .warmup_samples(0)
        .build()
        .expect("valid configuration")
}

fn window(c: &mut Criterion) {
    const WINDOW: Duration = Duration::from_secs(1);
    const LATENCY: Duration = Duration::from_micros(500);
    let mut g = c.benchmark_group("window");

    // Every record finds the window over: it claims the window, runs the law
    // (AIMD holds the limit: peak 1 ≪ 1000) and rotates the histograms.
    let clock = ManualClock::new();
    let l = manual(&clock);
    g.bench_function("close_step", |b| {
        b.iter(|| {
            clock.advance(WINDOW);
            l.try_acquire()
                .expect("a permit is free")
                .record_with_latency(Outcome::Success, LATENCY);
        });
    });

    // As above, but the law moves the limit at every close (+1 per window:
    // with a tiny utilization a peak of 1 counts as saturated), so the close
    // also stores the new limit under the queue lock.
    let clock = ManualClock::new();
    let moving = Limiter::builder()
        .clock(clock.clone())
        .initial_limit(1)
        .max_limit(MAX_LIMIT_BOUND)
        .utilization(1e-12)
        .jitter(0.0)
        .warmup_samples(0)
        .build()
        .expect("valid configuration");
    g.bench_function("close_step_limit_moves", |b| {
        b.iter(|| {
            clock.advance(WINDOW);
            moving
                .try_acquire()
                .expect("a permit is free")
                .record_with_latency(Outcome::Success, LATENCY);
        });
        assert!(moving.limit() > 1, "the limit moved");
    });

    // Same work, but the clock does not move (the advance still costs its
    // CAS), so no record closes a window.
    let clock = ManualClock::new();
    let l = manual(&clock);
    g.bench_function("record_no_close", |b| {
        b.iter(|| {
            clock.advance(Duration::ZERO);
            l.try_acquire()
                .expect("a permit is free")
                .record_with_latency(Outcome::Success, LATENCY);
        });
    });
    g.finish();
}

fn stats(c: &mut Criterion) {
    let mut g = c.benchmark_group("stats");
    // The manual clock never moves, so all samples stay in the current window.
    let clock = ManualClock::new();
    let l = manual(&clock);
    for i in 0..10_000u64 {
        // Spread the samples over many buckets (1 µs .. ~10 ms).
        let latency = Duration::from_nanos(1_000 + i * i * 97 % 10_000_000);
        l.try_acquire()
            .expect("a permit is free")
            .record_with_latency(Outcome::Success, latency);
    }
    assert_eq!(l.stats().success, 10_000);
    g.bench_function("stats_after_10k_samples", |b| {
        b.iter(|| black_box(black_box(&l).stats()));
    });
    g.finish();
}

fn acquire_async(c: &mut Criterion) {
    let mut g = c.benchmark_group("acquire_async");
    let mut cx = Context::from_waker(Waker::noop());
    let l = limiter();
    let sem = Semaphore::new(PERMITS);
    g.bench_function("adaptx_acquire", |b| {
        b.iter(|| {
            let mut fut = pin!(black_box(&l).acquire());
            match fut.as_mut().poll(&mut cx) {
                Poll::Ready(Ok(p)) => p.success(),
                _ => unreachable!("a permit is free"),
            }
        });
    });
    g.bench_function("tokio_semaphore_acquire_2_instants", |b| {
        b.iter(|| {
            let t0 = Instant::now();
            let mut fut = pin!(black_box(&sem).acquire());
            match fut.as_mut().poll(&mut cx) {
                Poll::Ready(Ok(p)) => {
                    let t1 = Instant::now();
                    black_box(t1 - t0);
                    drop(p);
                }
                _ => unreachable!("a permit is free"),
            }
        });
    });
    g.bench_function("adaptx_acquire_drop", |b| {
        b.iter(|| {
            let mut fut = pin!(black_box(&l).acquire());
            match fut.as_mut().poll(&mut cx) {
                Poll::Ready(Ok(p)) => drop(p),
                _ => unreachable!("a permit is free"),
            }
        });
    });
    g.bench_function("tokio_semaphore_acquire", |b| {
        b.iter(|| {
            let mut fut = pin!(black_box(&sem).acquire());
            match fut.as_mut().poll(&mut cx) {
                Poll::Ready(Ok(p)) => drop(p),
                _ => unreachable!("a permit is free"),
            }
        });
    });
    g.finish();
}

/// The partitioned admission against the plain one, same limit and law.
fn partitioned(c: &mut Criterion) {
    let mut g = c.benchmark_group("partitioned");
    let plain = limiter();
    let parts = Limiter::builder()
        .initial_limit(PERMITS)
        .max_limit(PERMITS)
        .warmup_samples(0)
        .partitions(Partitions::new().share("critical", 0.7).share("batch", 0.3))
        .build()
        .expect("valid configuration");
    let critical = parts.class("critical").expect("a partition");
    g.bench_function("unpartitioned_try_acquire_success", |b| {
        b.iter(|| adaptx_success(black_box(&plain)));
    });
    g.bench_function("partitioned_try_acquire_success", |b| {
        b.iter(|| {
            black_box(&parts)
                .try_acquire_as(critical)
                .expect("a permit is free")
                .success();
        });
    });
    g.bench_function("unpartitioned_try_acquire_drop", |b| {
        b.iter(|| drop(black_box(&plain).try_acquire().expect("a permit is free")));
    });
    g.bench_function("partitioned_try_acquire_drop", |b| {
        b.iter(|| {
            drop(
                black_box(&parts)
                    .try_acquire_as(critical)
                    .expect("a permit is free"),
            );
        });
    });
    g.finish();
}

/// A keyed limiter whose buckets never run dry (the largest rate and burst,
/// a clock that never moves), holding `keys` keys.
fn keyed_table<K: std::hash::Hash + Eq + Clone>(keys: &[K]) -> KeyedRateLimiter<K> {
    let l = RateLimiter::builder()
        .initial_rate(MAX_RATE_BOUND)
        .max_rate(MAX_RATE_BOUND)
        .burst(MAX_RATE_BOUND)
        .max_keys(keys.len())
        .clock(ManualClock::new())
        .build_keyed()
        .expect("valid configuration");
    for k in keys {
        // Twice: a table with an admission policy may want a key seen again.
        drop(l.try_acquire(k));
        drop(l.try_acquire(k));
    }
    assert_eq!(l.len(), keys.len());
    l
}

/// The hot path of the key table: a key it already holds.
fn keyed(c: &mut Criterion) {
    let mut g = c.benchmark_group("keyed");
    let ints: Vec<u64> = (0..10_000).collect();
    let l = keyed_table(&ints);
    g.bench_function("existing_u64_key_try_acquire_drop", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 7919) % 10_000;
            drop(black_box(&l).try_acquire(&ints[i]).expect("a token"));
        });
    });
    let strings: Vec<String> = (0..10_000).map(|i| format!("{i:0>32}")).collect();
    let l = keyed_table(&strings);
    g.bench_function("existing_32_byte_string_key_try_acquire_drop", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 7919) % 10_000;
            drop(
                black_box(&l)
                    .try_acquire(strings[i].as_str())
                    .expect("a token"),
            );
        });
    });
    g.finish();
}

#[cfg(feature = "metrics")]
#[inline]
fn adaptx_rejected(l: &Limiter) {
    assert!(l.try_acquire().is_err());
}

/// The `metrics` group: each operation on a limiter that reports to a
/// Prometheus recorder (`prometheus`) and on one built with no recorder in
/// force (`no_recorder`).
#[cfg(feature = "metrics")]
fn metrics_cost(c: &mut Criterion) {
    const WINDOW: Duration = Duration::from_secs(1);
    let mut g = c.benchmark_group("metrics");
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let with = |f: &dyn Fn() -> Limiter| metrics::with_local_recorder(&recorder, f);
    let full = || {
        Limiter::builder()
            .initial_limit(1)
            .build()
            .expect("valid configuration")
    };
    for (name, l) in [("no_recorder", limiter()), ("prometheus", with(&limiter))] {
        g.bench_function(format!("success_{name}"), |b| {
            b.iter(|| adaptx_success(black_box(&l)));
        });
        g.bench_function(format!("contended_success_{name}"), |b| {
            b.iter_custom(|iters| two_threads(&l, iters, adaptx_success));
        });
    }
    for (name, l) in [("no_recorder", full()), ("prometheus", with(&full))] {
        let _held = l.try_acquire().expect("a permit is free");
        g.bench_function(format!("reject_{name}"), |b| {
            b.iter(|| adaptx_rejected(black_box(&l)));
        });
        g.bench_function(format!("contended_reject_{name}"), |b| {
            b.iter_custom(|iters| two_threads(&l, iters, adaptx_rejected));
        });
    }
    for name in ["no_recorder", "prometheus"] {
        let clock = ManualClock::new();
        let l = if name == "prometheus" {
            with(&|| manual(&clock))
        } else {
            manual(&clock)
        };
        g.bench_function(format!("close_step_{name}"), |b| {
            b.iter(|| {
                clock.advance(WINDOW);
                l.try_acquire()
                    .expect("a permit is free")
                    .record_with_latency(Outcome::Success, Duration::from_micros(500));
            });
        });
    }
    // Drain what the histogram kept.
    recorder.handle().run_upkeep();
    g.finish();
}

#[cfg(not(feature = "metrics"))]
fn metrics_cost(_: &mut Criterion) {}

criterion_group!(
    benches,
    keyed,
    uncontended,
    contended,
    reads,
    window,
    stats,
    acquire_async,
    partitioned,
    metrics_cost
);
criterion_main!(benches);
