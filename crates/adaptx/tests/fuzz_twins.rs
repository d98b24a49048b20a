//! Stable twins of the cargo-fuzz targets in `fuzz/`: the same input space,
//! drawn by proptest strategies instead of `arbitrary`, and the same
//! assertions, so CI exercises them without nightly or libFuzzer.
//!
//! * `builder`: every builder option at any value (limits of 0 and huge,
//!   NaN, infinities, negatives, zero and huge durations). `build` must
//!   either reject exactly an option outside its documented range, or return
//!   a limiter whose invariants hold; it must never panic.
//! * `ops`: random operation sequences (admit, record success / failure /
//!   explicit latency up to `Duration::MAX` / skipped, drop, clock advances
//!   up to `Duration::MAX`, close, reset) on a `ManualClock` limiter, with the
//!   invariants checked after every step.
//!
//! `check` is a copy of `fuzz/src/lib.rs`'s: keep the two in step.

use std::time::Duration;

use adaptx::{
    Algorithm, Limiter, MAX_LIMIT_BOUND, MAX_SAMPLE_WINDOW, ManualClock, Outcome, OwnedPermit,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

/// The limiter's invariants, given its expected bounds, how many permits
/// the caller holds, and the outcomes the caller recorded since the last
/// reset: `[successes, failures, dropped]`.
fn check(l: &Limiter, min: usize, max: usize, held: usize, ended: [u64; 3]) {
    let (limit, in_flight) = (l.limit(), l.in_flight());
    assert!(1 <= min && min <= limit && limit <= max && max <= MAX_LIMIT_BOUND);
    assert!(in_flight <= max, "in_flight {in_flight} > max {max}");
    assert_eq!(in_flight, held, "held permits != in_flight");
    assert_eq!(l.available() + in_flight - l.debt(), limit);
    let s = l.stats();
    assert_eq!([s.success, s.failures, s.dropped], ended, "{s:?}");
    assert_eq!(s.total, ended.iter().sum::<u64>() + held as u64, "{s:?}");
    let bounds = (s.limit, s.in_flight, s.min_limit, s.max_limit);
    assert_eq!(bounds, (limit, in_flight, min, max));
}

fn algorithm() -> impl Strategy<Value = Algorithm> {
    prop::sample::select(vec![Algorithm::Aimd, Algorithm::Vegas, Algorithm::Gradient])
}

fn limit() -> impl Strategy<Value = usize> {
    prop_oneof![
        30 => 1usize..=64,
        1 => Just(0),
        1 => Just(MAX_LIMIT_BOUND),
        1 => Just(MAX_LIMIT_BOUND + 1),
        1 => any::<usize>(),
    ]
}

/// Mostly in `[0, 1]`, plus every kind of float (NaN, ±inf, subnormal, huge).
fn float() -> impl Strategy<Value = f64> {
    prop_oneof![
        30 => 0.0..=1.0f64,
        2 => Just(1.0),
        1 => any::<f64>(),
        1 => prop::sample::select(vec![
            f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.5, 1.5, f64::MAX, f64::MIN_POSITIVE
        ]),
    ]
}

fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        30 => (1u64..=5_000).prop_map(Duration::from_micros),
        1 => Just(Duration::ZERO),
        1 => Just(Duration::MAX),
        1 => prop::sample::select(vec![MAX_SAMPLE_WINDOW, MAX_SAMPLE_WINDOW + Duration::from_nanos(1)]),
        1 => (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
    ]
}

#[derive(Debug, Clone)]
struct Input {
    algorithm: Algorithm,
    initial: usize,
    min: usize,
    max: usize,
    smoothing: f64,
    increase_rate: f64,
    decrease_ratio: f64,
    utilization: f64,
    target_latency: Duration,
    tolerance: f64,
    sample_window: Duration,
    warmup: u64,
    min_latency_decay: f64,
    jitter: f64,
    seed: Option<u64>,
    op_name: Option<String>,
    manual_clock: bool,
    hook: bool,
}

fn input() -> impl Strategy<Value = Input> {
    let limits = (algorithm(), limit(), limit(), limit());
    let floats = (
        float(),
        prop_oneof![float(), 0.0..=10.0f64],
        float(),
        float(),
        float(),
    );
    let unit = (float(), float(), duration(), duration());
    let name = prop::option::of(prop_oneof![1 => Just(String::new()), 3 => "[a-z]{1,8}"]);
    let rest = (
        any::<u64>(),
        any::<Option<u64>>(),
        name,
        any::<bool>(),
        any::<bool>(),
    );
    (limits, floats, unit, rest).prop_map(
        |(
            (algorithm, initial, min, max),
            (smoothing, increase_rate, decrease_ratio, utilization, tolerance),
            (min_latency_decay, jitter, target_latency, sample_window),
            (warmup, seed, op_name, manual_clock, hook),
        )| Input {
            algorithm,
            initial,
            min,
            max,
            smoothing,
            increase_rate,
            decrease_ratio,
            utilization,
            target_latency,
            tolerance,
            sample_window,
            warmup,
            min_latency_decay,
            jitter,
            seed,
            op_name,
            manual_clock,
            hook,
        },
    )
}

/// The options `build` must reject, by the documented ranges.
fn invalid(i: &Input) -> Vec<&'static str> {
    let unit = |x: f64| x > 0.0 && x <= 1.0;
    let closed = |x: f64| (0.0..=1.0).contains(&x);
    let lim = |n: usize| (1..=MAX_LIMIT_BOUND).contains(&n);
    [
        ("initial_limit", lim(i.initial)),
        ("min_limit", lim(i.min)),
        ("max_limit", lim(i.max) && !(lim(i.min) && i.max < i.min)),
        ("smoothing", unit(i.smoothing)),
        (
            "increase_rate",
            i.increase_rate > 0.0 && i.increase_rate <= f64::MAX,
        ),
        (
            "decrease_ratio",
            i.decrease_ratio > 0.0 && i.decrease_ratio < 1.0,
        ),
        ("utilization", unit(i.utilization)),
        ("target_latency", !i.target_latency.is_zero()),
        ("tolerance", unit(i.tolerance)),
        (
            "sample_window",
            !i.sample_window.is_zero() && i.sample_window <= MAX_SAMPLE_WINDOW,
        ),
        ("min_latency_decay", closed(i.min_latency_decay)),
        ("jitter", closed(i.jitter)),
        ("op_name", i.op_name.as_deref() != Some("")),
    ]
    .into_iter()
    .filter_map(|(field, ok)| (!ok).then_some(field))
    .collect()
}

fn run_builder(i: &Input) {
    let mut b = Limiter::builder()
        .algorithm(i.algorithm)
        .initial_limit(i.initial)
        .min_limit(i.min)
        .max_limit(i.max)
        .smoothing(i.smoothing)
        .increase_rate(i.increase_rate)
        .decrease_ratio(i.decrease_ratio)
        .utilization(i.utilization)
        .target_latency(i.target_latency)
        .tolerance(i.tolerance)
        .sample_window(i.sample_window)
        .warmup_samples(i.warmup)
        .min_latency_decay(i.min_latency_decay)
        .jitter(i.jitter);
    if let Some(seed) = i.seed {
        b = b.seed(seed);
    }
    if let Some(name) = i.op_name.clone() {
        b = b.op_name(name);
    }
    if i.manual_clock {
        b = b.clock(ManualClock::new());
    }
    if i.hook {
        b = b.on_limit_change(|_, _| {});
    }
    let bad = invalid(i);
    match b.build() {
        Err(e) => assert!(bad.contains(&e.field()), "{e} not in {bad:?}"),
        Ok(l) => {
            assert!(bad.is_empty(), "built despite invalid {bad:?}");
            let (min, max) = (i.min, i.max);
            assert_eq!(l.limit(), i.initial.clamp(min, max));
            assert_eq!(l.algorithm(), i.algorithm.to_string());
            check(&l, min, max, 0, [0; 3]);
            let p = l.try_acquire().expect("a fresh limiter admits one");
            check(&l, min, max, 1, [0; 3]);
            p.success();
            check(&l, min, max, 0, [1, 0, 0]);
        }
    }
}

#[derive(Debug, Clone)]
struct Setup {
    algorithm: Algorithm,
    min: usize,
    max: usize,
    initial: usize,
    warmup: u64,
    jitter: bool,
    window: Duration,
    seed: u64,
}

fn setup() -> impl Strategy<Value = Setup> {
    let bounds = (algorithm(), 1usize..=8, 1usize..=300, 1usize..=300);
    let rest = (0u64..4, any::<bool>(), 1u64..=10_000_000, any::<u64>());
    (bounds, rest).prop_map(
        |((algorithm, min, max, initial), (warmup, jitter, window, seed))| Setup {
            algorithm,
            min,
            max: max.max(min),
            initial,
            warmup,
            jitter,
            window: Duration::from_nanos(window),
            seed,
        },
    )
}

#[derive(Debug, Clone)]
enum Op {
    TryAcquire,
    Success(usize),
    Failure(usize),
    Latency(usize, bool, Duration),
    Skipped(usize, bool),
    Drop(usize),
    Advance(Duration),
    Close,
    ResetStats,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => Just(Op::TryAcquire),
        3 => any::<usize>().prop_map(Op::Success),
        2 => any::<usize>().prop_map(Op::Failure),
        4 => (any::<usize>(), any::<bool>(), duration()).prop_map(|(i, ok, d)| Op::Latency(i, ok, d)),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(i, ok)| Op::Skipped(i, ok)),
        1 => any::<usize>().prop_map(Op::Drop),
        4 => duration().prop_map(Op::Advance),
        1 => Just(Op::Close),
        1 => Just(Op::ResetStats),
    ]
}

fn run_ops(s: &Setup, ops: &[Op]) {
    let clock = ManualClock::new();
    let (min, max) = (s.min, s.max);
    let l = Limiter::builder()
        .algorithm(s.algorithm)
        .clock(clock.clone())
        .min_limit(min)
        .max_limit(max)
        .initial_limit(s.initial)
        .warmup_samples(s.warmup)
        .jitter(if s.jitter { 0.5 } else { 0.0 })
        .sample_window(s.window)
        .target_latency(Duration::from_millis(1))
        .seed(s.seed)
        .build()
        .expect("valid configuration");
    let mut held: Vec<OwnedPermit> = Vec::new();
    // Successes, failures and drops recorded since the last reset.
    let mut ended = [0u64; 3];
    check(&l, min, max, 0, ended);
    for op in ops {
        let mut take = |i: usize| (!held.is_empty()).then(|| held.swap_remove(i % held.len()));
        match *op {
            Op::TryAcquire => held.extend(l.try_acquire_owned().ok()),
            Op::Success(i) => take(i).map_or((), |p| {
                p.success();
                ended[0] += 1;
            }),
            Op::Failure(i) => take(i).map_or((), |p| {
                p.failure();
                ended[1] += 1;
            }),
            Op::Latency(i, ok, d) => take(i).map_or((), |p| {
                p.record_with_latency(Outcome::from_success(ok), d);
                ended[usize::from(!ok)] += 1;
            }),
            Op::Skipped(i, ok) => take(i).map_or((), |p| {
                p.record_skipped(Outcome::from_success(ok));
                ended[usize::from(!ok)] += 1;
            }),
            Op::Drop(i) => take(i).map_or((), |p| {
                drop(p);
                ended[2] += 1;
            }),
            Op::Advance(d) => clock.advance(d),
            Op::Close => _ = l.close(),
            Op::ResetStats => {
                l.reset_stats();
                ended = [0; 3];
            }
        }
        check(&l, min, max, held.len(), ended);
    }
    ended[2] += held.len() as u64;
    held.clear();
    check(&l, min, max, 0, ended);
    assert_eq!((l.debt(), l.available()), (0, l.limit()));
}

fn config(seed: u64) -> Config {
    Config {
        cases: 256,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config(0xf022_b111))]

    #[test]
    fn builder_never_panics_and_valid_limiters_hold_invariants(i in input()) {
        run_builder(&i);
    }
}

proptest! {
    #![proptest_config(config(0xf022_0905))]

    #[test]
    fn operation_sequences_keep_the_invariants(
        s in setup(),
        ops in prop::collection::vec(op(), 0..100),
    ) {
        run_ops(&s, &ops);
    }
}
