//! The `metrics` feature's contracts (the table of `adaptx::observe`),
//! checked on a recorder of this file that keeps every value (the
//! `metrics-util` debugging recorder zeroes counters and gauges on each
//! snapshot) and counts registrations, with a manual clock.
#![cfg(feature = "metrics")]

mod common;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use adaptx::observe::*;
use adaptx::{ManualClock, Outcome, RateLimiter, TryAcquireError};
use common::{MS, Rig, WINDOW};
use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};

/// Values a histogram received: `(value, count)`.
#[derive(Debug, Default)]
struct Samples(Mutex<Vec<(f64, usize)>>);

impl HistogramFn for Samples {
    fn record(&self, value: f64) {
        self.record_many(value, 1);
    }

    fn record_many(&self, value: f64, count: usize) {
        self.0.lock().expect("samples").push((value, count));
    }
}

#[derive(Debug, Clone)]
enum Metric {
    Counter(Arc<AtomicU64>),
    Gauge(Arc<AtomicU64>),
    Histogram(Arc<Samples>),
}

/// `(name, labels)`.
type Id = (String, Vec<(String, String)>);

/// A recorder that keeps every value and counts registrations.
#[derive(Debug, Default)]
struct TestRecorder {
    metrics: Mutex<HashMap<Id, Metric>>,
    units: Mutex<HashMap<String, Option<Unit>>>,
    registrations: AtomicUsize,
}

impl TestRecorder {
    fn register(&self, key: &Key, make: impl FnOnce() -> Metric) -> Metric {
        self.registrations.fetch_add(1, Ordering::SeqCst);
        let labels = key
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        self.metrics
            .lock()
            .expect("metrics")
            .entry((key.name().to_owned(), labels))
            .or_insert_with(make)
            .clone()
    }

    fn get(&self, name: &str, limiter: &str) -> Option<Metric> {
        let id = (
            name.to_owned(),
            vec![(LABEL.to_owned(), limiter.to_owned())],
        );
        self.metrics.lock().expect("metrics").get(&id).cloned()
    }

    fn counter(&self, name: &str, limiter: &str) -> u64 {
        match self.get(name, limiter) {
            Some(Metric::Counter(c)) => c.load(Ordering::SeqCst),
            other => panic!("{name}{{limiter={limiter}}} is not a counter: {other:?}"),
        }
    }

    fn gauge(&self, name: &str, limiter: &str) -> f64 {
        match self.get(name, limiter) {
            Some(Metric::Gauge(g)) => f64::from_bits(g.load(Ordering::SeqCst)),
            other => panic!("{name}{{limiter={limiter}}} is not a gauge: {other:?}"),
        }
    }

    fn histogram(&self, name: &str, limiter: &str) -> Vec<(f64, usize)> {
        match self.get(name, limiter) {
            Some(Metric::Histogram(h)) => h.0.lock().expect("samples").clone(),
            other => panic!("{name}{{limiter={limiter}}} is not a histogram: {other:?}"),
        }
    }

    /// Every `(name, labels)` registered.
    fn ids(&self) -> BTreeSet<Id> {
        self.metrics
            .lock()
            .expect("metrics")
            .keys()
            .cloned()
            .collect()
    }

    fn describe(&self, key: KeyName, unit: Option<Unit>) {
        self.units
            .lock()
            .expect("units")
            .insert(key.as_str().to_owned(), unit);
    }
}

impl Recorder for TestRecorder {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, _: SharedString) {
        self.describe(key, unit);
    }

    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, _: SharedString) {
        self.describe(key, unit);
    }

    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, _: SharedString) {
        self.describe(key, unit);
    }

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        match self.register(key, || Metric::Counter(Arc::default())) {
            Metric::Counter(c) => Counter::from_arc(c),
            other => panic!("{key:?} registered as {other:?}"),
        }
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        match self.register(key, || Metric::Gauge(Arc::default())) {
            Metric::Gauge(g) => Gauge::from_arc(g),
            other => panic!("{key:?} registered as {other:?}"),
        }
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        match self.register(key, || Metric::Histogram(Arc::default())) {
            Metric::Histogram(h) => Histogram::from_arc(h),
            other => panic!("{key:?} registered as {other:?}"),
        }
    }
}

/// A limiter named "db" (AIMD, 1 s windows, manual clock, limit 4 in
/// `[2, 8]`) whose metrics go to a fresh recorder.
fn rig() -> (Rig, TestRecorder) {
    let recorder = TestRecorder::default();
    let rig = metrics::with_local_recorder(&recorder, || {
        Rig::new(|b| b.name("db").initial_limit(4).min_limit(2).max_limit(8))
    });
    (rig, recorder)
}

fn ids(names: &[&str], limiter: &str) -> BTreeSet<Id> {
    names
        .iter()
        .map(|n| {
            (
                (*n).to_owned(),
                vec![("limiter".to_owned(), limiter.to_owned())],
            )
        })
        .collect()
}

#[test]
fn metrics_names_are_the_documented_ones() {
    // The table of `adaptx::observe` and of the README.
    assert_eq!(LABEL, "limiter");
    assert_eq!(
        LIMITER_METRICS,
        [
            "adaptx_limiter_limit",
            "adaptx_limiter_min_limit",
            "adaptx_limiter_max_limit",
            "adaptx_limiter_in_flight",
            "adaptx_limiter_available",
            "adaptx_limiter_successes_total",
            "adaptx_limiter_failures_total",
            "adaptx_limiter_dropped_total",
            "adaptx_limiter_rejected_total",
            "adaptx_limiter_increases_total",
            "adaptx_limiter_decreases_total",
            "adaptx_limiter_latency_seconds",
        ]
    );
    assert_eq!(
        RATE_METRICS,
        [
            "adaptx_rate_limit",
            "adaptx_rate_min_limit",
            "adaptx_rate_max_limit",
            "adaptx_rate_tokens",
            "adaptx_rate_admitted_total",
            "adaptx_rate_limited_total",
            "adaptx_rate_successes_total",
            "adaptx_rate_failures_total",
            "adaptx_rate_dropped_total",
            "adaptx_rate_increases_total",
            "adaptx_rate_decreases_total",
        ]
    );
}

#[test]
fn metrics_every_documented_name_is_registered_at_build_with_the_limiter_label() {
    let (rig, recorder) = rig();
    assert_eq!(recorder.ids(), ids(&LIMITER_METRICS, "db"));
    // The gauges hold the limiter's levels from the start.
    assert_eq!(recorder.gauge(LIMITER_LIMIT, "db"), 4.0);
    assert_eq!(recorder.gauge(LIMITER_MIN_LIMIT, "db"), 2.0);
    assert_eq!(recorder.gauge(LIMITER_MAX_LIMIT, "db"), 8.0);
    assert_eq!(recorder.gauge(LIMITER_IN_FLIGHT, "db"), 0.0);
    assert_eq!(recorder.gauge(LIMITER_AVAILABLE, "db"), 4.0);
    for counter in &LIMITER_METRICS[5..11] {
        assert_eq!(recorder.counter(counter, "db"), 0, "{counter}");
    }
    // The histogram is described in seconds.
    let units = recorder.units.lock().expect("units");
    assert_eq!(units.get(LIMITER_LATENCY), Some(&Some(Unit::Seconds)));
    drop(rig);
}

#[test]
fn metrics_default_name_is_the_label_of_an_unnamed_limiter() {
    let recorder = TestRecorder::default();
    let limiter = metrics::with_local_recorder(&recorder, || {
        adaptx::Limiter::builder().build().expect("valid")
    });
    assert_eq!(limiter.name(), DEFAULT_NAME);
    assert_eq!(recorder.ids(), ids(&LIMITER_METRICS, DEFAULT_NAME));
}

#[test]
fn metrics_handles_are_registered_once_at_build() {
    let (rig, recorder) = rig();
    let at_build = recorder.registrations.load(Ordering::SeqCst);
    assert_eq!(at_build, LIMITER_METRICS.len());
    // Every path that reports, with the recorder still in force: a handle
    // registered on the way would count here.
    metrics::with_local_recorder(&recorder, || {
        for _ in 0..3 {
            rig.record_idle(Outcome::Success, 5 * MS);
            rig.record_idle(Outcome::Failure, 5 * MS);
            rig.advance();
        }
        let held: Vec<_> = (0..4).map(|_| rig.limiter.try_acquire()).collect();
        assert!(rig.limiter.try_acquire().is_err());
        drop(held);
        rig.limiter.reset_stats();
    });
    assert!(recorder.counter(LIMITER_REJECTED, "db") >= 1);
    assert_eq!(recorder.registrations.load(Ordering::SeqCst), at_build);
}

#[test]
fn metrics_outcomes_and_latencies_are_published_when_the_window_closes() {
    let (rig, recorder) = rig();
    rig.record_idle(Outcome::Success, 10 * MS);
    rig.record_idle(Outcome::Success, 30 * MS);
    rig.record_idle(Outcome::Failure, 5 * MS);
    rig.limiter
        .try_acquire()
        .expect("free")
        .record_skipped(Outcome::Success);
    // Nothing is published on a completion that closes no window.
    assert_eq!(recorder.counter(LIMITER_SUCCESSES, "db"), 0);
    assert_eq!(recorder.counter(LIMITER_FAILURES, "db"), 0);
    assert!(recorder.histogram(LIMITER_LATENCY, "db").is_empty());

    // This completion closes the window: everything so far, and it, is
    // published; the skipped success counts, without a latency.
    rig.advance();
    rig.record_idle(Outcome::Success, 20 * MS);
    assert_eq!(recorder.counter(LIMITER_SUCCESSES, "db"), 4);
    assert_eq!(recorder.counter(LIMITER_FAILURES, "db"), 1);
    let mut latencies = recorder.histogram(LIMITER_LATENCY, "db");
    latencies.sort_by(|a, b| a.0.total_cmp(&b.0));
    let expected = [0.010, 0.020, 0.030];
    assert_eq!(latencies.len(), expected.len(), "{latencies:?}");
    for ((seconds, count), want) in latencies.iter().zip(expected) {
        assert_eq!(*count, 1);
        // Bucket midpoints: within 1/128 of the sample.
        assert!(
            (seconds - want).abs() <= want / 128.0,
            "{seconds} vs {want}"
        );
    }
    // The next window publishes only what it adds.
    rig.record_idle(Outcome::Failure, 5 * MS);
    rig.advance();
    rig.record_idle(Outcome::Success, 40 * MS);
    assert_eq!(recorder.counter(LIMITER_SUCCESSES, "db"), 5);
    assert_eq!(recorder.counter(LIMITER_FAILURES, "db"), 2);
    assert_eq!(recorder.histogram(LIMITER_LATENCY, "db").len(), 4);
}

#[test]
fn metrics_rejections_and_drops_count_at_once_and_refresh_occupancy() {
    let (rig, recorder) = rig();
    let held: Vec<_> = (0..3)
        .map(|_| rig.limiter.try_acquire().expect("free"))
        .collect();
    let last = rig.limiter.try_acquire().expect("free");
    assert!(matches!(
        rig.limiter.try_acquire(),
        Err(TryAcquireError::NoCapacity)
    ));
    // No window closed: the rejection counted, and the gauges show the
    // limiter full.
    assert_eq!(recorder.counter(LIMITER_REJECTED, "db"), 1);
    assert_eq!(recorder.gauge(LIMITER_IN_FLIGHT, "db"), 4.0);
    assert_eq!(recorder.gauge(LIMITER_AVAILABLE, "db"), 0.0);
    // Another rejection at the same occupancy leaves them; one at another
    // (a closed limiter refuses with room) sets them.
    assert!(rig.limiter.try_acquire().is_err());
    assert_eq!(recorder.gauge(LIMITER_IN_FLIGHT, "db"), 4.0);
    drop(last);
    assert_eq!(recorder.counter(LIMITER_DROPPED, "db"), 1);
    rig.limiter.close();
    assert!(matches!(
        rig.limiter.try_acquire(),
        Err(TryAcquireError::Closed)
    ));
    assert_eq!(recorder.gauge(LIMITER_IN_FLIGHT, "db"), 3.0);
    assert_eq!(recorder.gauge(LIMITER_AVAILABLE, "db"), 1.0);
    assert_eq!(recorder.counter(LIMITER_REJECTED, "db"), 3);
    drop(held);
    assert_eq!(recorder.counter(LIMITER_DROPPED, "db"), 4);
    assert_eq!(
        recorder.counter(LIMITER_REJECTED, "db"),
        rig.limiter.stats().rejected
    );
}

#[test]
fn metrics_limit_changes_move_the_limit_gauge_and_count_increases_and_decreases() {
    let (mut rig, recorder) = rig();
    // A saturated clean window: AIMD grows 4 -> 5.
    rig.record_saturated(Outcome::Success, 5 * MS);
    rig.advance();
    rig.record_saturated(Outcome::Success, 5 * MS);
    assert_eq!(rig.limiter.limit(), 5);
    assert_eq!(recorder.gauge(LIMITER_LIMIT, "db"), 5.0);
    assert_eq!(recorder.counter(LIMITER_INCREASES, "db"), 1);
    // A failure halves it: 5 -> 2 (floor at min_limit 2).
    rig.advance();
    rig.record_saturated(Outcome::Failure, 5 * MS);
    assert_eq!(rig.limiter.limit(), 2);
    assert_eq!(recorder.gauge(LIMITER_LIMIT, "db"), 2.0);
    assert_eq!(recorder.counter(LIMITER_DECREASES, "db"), 1);
    // In flight at the close: every permit the rig holds.
    assert_eq!(
        recorder.gauge(LIMITER_IN_FLIGHT, "db"),
        rig.limiter.in_flight() as f64
    );
    let stats = rig.limiter.stats();
    assert_eq!(
        (stats.increases, stats.decreases),
        (
            recorder.counter(LIMITER_INCREASES, "db"),
            recorder.counter(LIMITER_DECREASES, "db")
        )
    );
}

#[test]
fn metrics_counters_never_go_back_after_reset_stats() {
    let (rig, recorder) = rig();
    for _ in 0..3 {
        rig.record_idle(Outcome::Success, 5 * MS);
    }
    rig.advance();
    rig.record_idle(Outcome::Success, 5 * MS);
    assert_eq!(recorder.counter(LIMITER_SUCCESSES, "db"), 4);
    rig.limiter.reset_stats();
    assert_eq!(rig.limiter.stats().success, 0);
    assert_eq!(recorder.gauge(LIMITER_LIMIT, "db"), 4.0);
    // Two more successes after the reset: the exported counter goes on.
    rig.record_idle(Outcome::Success, 5 * MS);
    rig.advance();
    rig.record_idle(Outcome::Success, 5 * MS);
    assert_eq!(rig.limiter.stats().success, 2);
    assert_eq!(recorder.counter(LIMITER_SUCCESSES, "db"), 6);
}

#[test]
fn metrics_rate_limiter_publishes_rate_counters_and_tokens() {
    let recorder = TestRecorder::default();
    let clock = ManualClock::new();
    let limiter = metrics::with_local_recorder(&recorder, || {
        RateLimiter::builder()
            .name("api")
            .initial_rate(100)
            .min_rate(10)
            .max_rate(1000)
            .clock(clock.clone())
            .build()
            .expect("valid")
    });
    assert_eq!(recorder.ids(), ids(&RATE_METRICS, "api"));
    assert_eq!(recorder.gauge(RATE_LIMIT, "api"), 100.0);
    assert_eq!(recorder.gauge(RATE_MIN_LIMIT, "api"), 10.0);
    assert_eq!(recorder.gauge(RATE_MAX_LIMIT, "api"), 1000.0);

    // The first admission sets the tokens gauge (99 left); the next ones,
    // within the interval, leave it alone.
    let permits: Vec<_> = (0..100)
        .map(|_| limiter.try_acquire().expect("a token"))
        .collect();
    assert_eq!(recorder.gauge(RATE_TOKENS, "api"), 99.0);
    assert!(limiter.try_acquire().is_err());
    // Half fail.
    clock.advance(50 * MS);
    for (i, p) in permits.into_iter().enumerate() {
        p.record(Outcome::from_success(i % 2 == 0));
    }
    // Nothing is published before the interval closes.
    assert_eq!(recorder.counter(RATE_ADMITTED, "api"), 0);

    // The interval closes on the next attempt: rate cut by 20 %, counters
    // published, tokens sampled again.
    clock.advance(WINDOW);
    let admitted = limiter.try_acquire().expect("refilled");
    assert_eq!(limiter.current_rate(), 80);
    assert_eq!(recorder.gauge(RATE_LIMIT, "api"), 80.0);
    assert_eq!(recorder.counter(RATE_ADMITTED, "api"), 100);
    assert_eq!(recorder.counter(RATE_LIMITED, "api"), 1);
    assert_eq!(recorder.counter(RATE_SUCCESSES, "api"), 50);
    assert_eq!(recorder.counter(RATE_FAILURES, "api"), 50);
    assert_eq!(recorder.counter(RATE_DECREASES, "api"), 1);
    assert_eq!(recorder.counter(RATE_INCREASES, "api"), 0);
    assert_eq!(
        recorder.gauge(RATE_TOKENS, "api"),
        admitted.remaining() as f64
    );
    drop(admitted);
    clock.advance(WINDOW);
    let _ = limiter.try_acquire();
    assert_eq!(recorder.counter(RATE_DROPPED, "api"), 1);
}

#[test]
fn metrics_keyed_rate_limiter_reports_everything_but_tokens() {
    let recorder = TestRecorder::default();
    let clock = ManualClock::new();
    let limiter = metrics::with_local_recorder(&recorder, || {
        RateLimiter::builder()
            .name("per-client")
            .initial_rate(2)
            .min_rate(1)
            .clock(clock.clone())
            .build_keyed::<u32>()
            .expect("valid")
    });
    assert_eq!(recorder.ids(), ids(&RATE_METRICS, "per-client"));
    // Key 7's first request comes from a newcomer bucket, the next two
    // from its own bucket of 2 tokens, the fourth is refused.
    for _ in 0..4 {
        let _ = limiter.try_acquire(&7);
    }
    clock.advance(Duration::from_secs(1));
    let _ = limiter.try_acquire(&8);
    assert_eq!(recorder.counter(RATE_ADMITTED, "per-client"), 3);
    assert_eq!(recorder.counter(RATE_LIMITED, "per-client"), 1);
    // One bucket per key: no tokens gauge is ever set.
    assert_eq!(recorder.gauge(RATE_TOKENS, "per-client"), 0.0);
}

#[test]
fn metrics_run_time_changes_move_the_level_gauges_at_once() {
    let (rig, recorder) = rig();
    let held = rig.limiter.try_acquire().expect("a permit");
    let levels = || {
        [
            LIMITER_LIMIT,
            LIMITER_MIN_LIMIT,
            LIMITER_MAX_LIMIT,
            LIMITER_IN_FLIGHT,
            LIMITER_AVAILABLE,
        ]
        .map(|name| recorder.gauge(name, "db"))
    };
    // No window closes in this test: every move below is the operator's.
    rig.limiter.force_limit(3).expect("valid");
    assert_eq!(levels(), [3.0, 2.0, 8.0, 1.0, 2.0]);
    rig.limiter
        .reconfigure(|b| b.min_limit(1).max_limit(6))
        .expect("valid");
    assert_eq!(levels(), [3.0, 1.0, 6.0, 1.0, 2.0]);
    // Released, the forced 3 stays; a reconfiguration that clamps it moves
    // the gauge with it.
    assert_eq!(rig.limiter.release_forced_limit(), Some(3));
    rig.limiter
        .reconfigure(|b| b.min_limit(1).max_limit(2))
        .expect("valid");
    assert_eq!(levels(), [2.0, 1.0, 2.0, 1.0, 1.0]);
    drop(held);
}
