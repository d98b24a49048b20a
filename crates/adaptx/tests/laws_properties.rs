//! Properties of every built-in law over arbitrary window sequences: the
//! limit stays within the limiter's bounds, and no law grows the limit on a
//! window with fresh overload failures (Ceiling: failures beyond the
//! background rate it learned, which it never learns above 5 %, and past a
//! soft ceiling's onset beyond a budget of 2 % more).

use std::time::Duration;

use adaptx::{
    Aimd, Algorithm, Ceiling, ControlLaw, Gradient, IntervalSummary, Limiter, ManualClock, Outcome,
    RateLaw, Vegas, WindowSummary,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

fn window() -> impl Strategy<Value = WindowSummary> {
    (
        1u64..2_000,
        0u64..200,
        0u64..50,
        1usize..300,
        1.0f64..500.0,
        1u64..2_000,
    )
        .prop_map(|(ok, failures, stale, peak, rtt_ms, dur_ms)| {
            let samples = ok + failures + stale;
            let rtt = Duration::from_secs_f64(rtt_ms / 1e3);
            WindowSummary::new(Duration::from_millis(dur_ms), samples, failures, peak, rtt)
                .and_then(|w| w.with_stale_failures(stale))
                .and_then(|w| w.with_min_rtt(rtt.mul_f64(0.9)))
                .expect("a consistent window")
                .with_rtt_floor(rtt.mul_f64(0.8))
                .with_rtt_average(rtt)
        })
}

fn laws() -> Vec<Box<dyn ControlLaw>> {
    vec![
        Box::new(Aimd::default()),
        Box::new(Vegas::default()),
        Box::new(Gradient::default()),
        Box::new(Ceiling::default()),
    ]
}

proptest! {
    // Seeded: the same cases on every run.
    #![proptest_config(Config {
        cases: 256,
        rng_seed: RngSeed::Fixed(0xce11_1a9e),
        failure_persistence: None,
        ..Config::default()
    })]

    #[test]
    fn no_law_grows_on_a_window_of_fresh_overload(
        windows in proptest::collection::vec(window(), 1..60),
        start in 1usize..200,
    ) {
        for mut law in laws() {
            let mut limit = start;
            for w in &windows {
                let next = law.next_limit(limit, w).clamp(1, 1000);
                let overload = w.failures > 0
                    && (law.name() != "ceiling" || (w.failures >= 3 && 2 * w.failures > w.samples));
                if overload {
                    prop_assert!(
                        next <= limit,
                        "{} grew {limit} -> {next} on {w:?}",
                        law.name()
                    );
                }
                limit = next;
            }
        }
    }

    #[test]
    fn ceiling_limit_stays_within_bounds(
        outcomes in proptest::collection::vec((any::<bool>(), 1u64..200, 0u64..3), 1..400),
        min in 1usize..10,
        span in 0usize..100,
    ) {
        let max = min + span;
        let clock = ManualClock::new();
        let limiter = Limiter::builder()
            .algorithm(Algorithm::Ceiling)
            .min_limit(min)
            .max_limit(max)
            .initial_limit(min)
            .warmup_samples(0)
            .sample_window(Duration::from_millis(100))
            .clock(clock.clone())
            .build()
            .expect("valid configuration");
        let mut held = Vec::new();
        for (success, ms, hold) in outcomes {
            while let Ok(p) = limiter.try_acquire_owned() {
                held.push(p);
                if held.len() > 3 * max {
                    break;
                }
            }
            clock.advance(Duration::from_millis(ms));
            for _ in 0..=hold {
                if let Some(p) = held.pop() {
                    p.record(Outcome::from_success(success));
                }
            }
            let l = limiter.limit();
            prop_assert!((min..=max).contains(&l), "limit {l} outside [{min}, {max}]");
            prop_assert!(limiter.in_flight() <= max);
        }
    }
}

fn interval() -> impl Strategy<Value = IntervalSummary> {
    (
        0u64..5_000,
        0u64..5_000,
        0u64..10_000_000_000,
        any::<bool>(),
        0u64..5_000_000_000,
    )
        .prop_map(|(completed, failures, latency, binding, elapsed)| {
            IntervalSummary::new(
                completed,
                failures.min(completed),
                Duration::from_nanos(latency),
                binding,
            )
            .with_elapsed(Duration::from_nanos(elapsed))
        })
}

proptest! {
    /// Every rate law, stepped through any sequence of intervals, keeps the
    /// rate in `[min_rate, max_rate]` and never raises it on an interval
    /// with overload: Cubic on any failure (a throttle), mizu's law on an
    /// error rate of at least half its threshold (below that it counts the
    /// errors as background, by design).
    #[test]
    fn rate_laws_stay_in_bounds_and_never_grow_on_a_failure(
        min in 1u64..200,
        span in 0u64..5_000,
        start in 0u64..10_000,
        intervals in proptest::collection::vec(interval(), 1..60),
    ) {
        let max = min + span;
        let mizu_overload = |iv: &IntervalSummary| iv.failures as f64 >= 0.05 * iv.completed as f64;
        let cubic_overload = |iv: &IntervalSummary| iv.failures > 0;
        type Overload<'a> = &'a dyn Fn(&IntervalSummary) -> bool;
        let laws: [(RateLaw, Overload); 2] = [
            (RateLaw::mizu(min, max, Duration::from_millis(100), 0.1).unwrap(), &mizu_overload),
            (RateLaw::cubic(min, max).unwrap(), &cubic_overload),
        ];
        for (law, overload) in laws {
            let mut state = law.initial_state();
            let mut rate = start.clamp(min, max);
            for iv in &intervals {
                let next = law.step(&mut state, rate, iv);
                prop_assert!((min..=max).contains(&next), "{law:?}: {next} outside [{min}, {max}]");
                if iv.failures > 0 && overload(iv) {
                    prop_assert!(next <= rate, "{law:?} grew {rate} -> {next} on {iv:?}");
                }
                rate = next;
            }
        }
    }
}

/// `WindowSummary::new` (what a user builds to test a law of their own)
/// fills a plain window from its arguments, the `with_*` methods set the
/// other signals, and numbers that cannot describe one window are a
/// `ConfigError` naming the field, the value and the allowed range.
#[test]
fn window_summary_new_fills_a_plain_window_and_refuses_an_impossible_one() {
    let ms = Duration::from_millis;
    let w = WindowSummary::new(Duration::from_secs(2), 10, 4, 3, ms(5)).expect("consistent");
    assert_eq!(
        (w.duration_nanos, w.samples, w.failures, w.stale_failures),
        (2_000_000_000, 10, 4, 0)
    );
    assert_eq!(w.peak_in_flight, 3);
    assert_eq!(
        (w.mean_rtt_nanos, w.mean_ok_rtt_nanos, w.min_rtt_nanos),
        (5e6, 5e6, 5e6)
    );
    assert_eq!(w.max_ok_rtt_nanos, 5e6);
    assert_eq!((w.rtt_floor_nanos, w.rtt_average_nanos), (None, None));
    // Every sample failed: no success latency.
    let all_failed = WindowSummary::new(ms(10), 2, 2, 1, ms(5)).expect("consistent");
    assert_eq!(all_failed.mean_ok_rtt_nanos, 0.0);
    assert_eq!(all_failed.max_ok_rtt_nanos, 0.0);
    // An empty window is a window (the laws hold on it).
    let empty = WindowSummary::new(ms(10), 0, 0, 0, Duration::ZERO).expect("consistent");
    for mut law in laws() {
        assert_eq!(law.next_limit(10, &empty), 10, "{}", law.name());
    }

    let w = w
        .with_stale_failures(6)
        .and_then(|w| w.with_min_rtt(ms(1)))
        .expect("consistent")
        .with_mean_ok_rtt(ms(4))
        .with_max_ok_rtt(ms(9))
        .expect("consistent")
        .with_rtt_floor(ms(2))
        .with_rtt_average(ms(3));
    assert_eq!(w.stale_failures, 6);
    assert_eq!(w.max_ok_rtt_nanos, 9e6);
    assert_eq!((w.mean_ok_rtt_nanos, w.min_rtt_nanos), (4e6, 1e6));
    assert_eq!(
        (w.rtt_floor_nanos, w.rtt_average_nanos),
        (Some(2e6), Some(3e6))
    );

    let err = |e: adaptx::ConfigError| (e.field(), e.value().to_owned(), e.allowed().to_owned());
    let bad = WindowSummary::new(ms(10), 2, 3, 1, ms(1)).expect_err("3 failures of 2");
    assert_eq!(
        err(bad),
        ("failures", "3".into(), "0 ..= samples (2)".into())
    );
    let bad = WindowSummary::new(ms(10), 2, 0, 0, ms(1)).expect_err("peak 0 with samples");
    assert_eq!(bad.field(), "peak_in_flight");
    let plain = WindowSummary::new(ms(10), 10, 4, 3, ms(5)).expect("consistent");
    let bad = plain.with_stale_failures(7).expect_err("4 + 7 of 10");
    assert_eq!(
        err(bad),
        (
            "stale_failures",
            "7".into(),
            "0 ..= samples - failures (6)".into()
        )
    );
    let bad = plain.with_min_rtt(ms(6)).expect_err("min above the mean");
    assert_eq!(
        bad.to_string(),
        "invalid min_rtt: 6ms (allowed: 0 ..= mean_rtt (5000000ns))"
    );
    let bad = plain
        .with_max_ok_rtt(ms(4))
        .expect_err("max below the mean");
    assert_eq!(
        bad.to_string(),
        "invalid max_ok_rtt: 4ms (allowed: mean_ok_rtt (5000000ns) ..)"
    );
    let bad = all_failed
        .with_max_ok_rtt(ms(1))
        .expect_err("a max without a success");
    assert_eq!(
        err(bad),
        (
            "max_ok_rtt",
            "1ms".into(),
            "0 when the window has no success".into()
        )
    );
    assert!(all_failed.with_max_ok_rtt(Duration::ZERO).is_ok());
}
