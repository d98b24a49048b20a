//! Every builder option at an arbitrary value: `build` either names an
//! invalid option or returns a limiter whose invariants hold. Never panics.
#![no_main]

use std::time::Duration;

use adaptx::{Algorithm, Limiter, MAX_LIMIT_BOUND, MAX_SAMPLE_WINDOW, ManualClock};
use adaptx_fuzz::check;
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input {
    algorithm: u8,
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

/// The options `build` must reject, by the documented ranges.
fn invalid(i: &Input) -> Vec<&'static str> {
    let unit = |x: f64| x > 0.0 && x <= 1.0;
    let closed = |x: f64| (0.0..=1.0).contains(&x);
    let lim = |n: usize| (1..=MAX_LIMIT_BOUND).contains(&n);
    [
        ("initial_limit", lim(i.initial)),
        ("min_limit", lim(i.min)),
        (
            "max_limit",
            lim(i.max) && !(lim(i.min) && i.max < i.min),
        ),
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

fuzz_target!(|i: Input| {
    let algorithm =
        [Algorithm::Aimd, Algorithm::Vegas, Algorithm::Gradient][usize::from(i.algorithm % 3)];
    let mut b = Limiter::builder()
        .algorithm(algorithm)
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
    let bad = invalid(&i);
    match b.build() {
        Err(e) => assert!(bad.contains(&e.field()), "{e} not in {bad:?}"),
        Ok(l) => {
            assert!(bad.is_empty(), "built despite invalid {bad:?}");
            let (min, max) = (i.min, i.max);
            assert_eq!(l.limit(), i.initial.clamp(min, max));
            assert_eq!(l.algorithm(), algorithm.to_string());
            check(&l, min, max, 0, [0; 3]);
            let p = l.try_acquire().expect("a fresh limiter admits one");
            check(&l, min, max, 1, [0; 3]);
            p.success();
            check(&l, min, max, 0, [1, 0, 0]);
        }
    }
});
