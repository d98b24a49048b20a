//! Properties of every built-in law over arbitrary window sequences: the
//! limit stays within the limiter's bounds, and no law grows the limit on a
//! window with fresh overload failures (Ceiling: failures beyond the
//! background rate it learned, which it never learns above 5 %).

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
            WindowSummary {
                duration_nanos: dur_ms * 1_000_000,
                samples,
                failures,
                stale_failures: stale,
                peak_in_flight: peak,
                mean_rtt_nanos: rtt_ms * 1e6,
                mean_ok_rtt_nanos: rtt_ms * 1e6,
                min_rtt_nanos: rtt_ms * 0.9e6,
                rtt_floor_nanos: Some(rtt_ms * 0.8e6),
                rtt_average_nanos: Some(rtt_ms * 1e6),
            }
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
