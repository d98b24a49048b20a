//! Why the limit moved: the limit-change hook's [`LimitChange`] and the
//! law's state and estimators in [`Stats`](adaptx::Stats).

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use adaptx::{
    Algorithm, ControlLaw, LawState, LimitChange, Limiter, ManualClock, Outcome, WindowSummary,
};
use common::{MS, Rig, adapt_opts};

fn recorded() -> (
    Arc<Mutex<Vec<LimitChange>>>,
    impl Fn(&LimitChange) + Send + Sync,
) {
    let changes: Arc<Mutex<Vec<LimitChange>>> = Arc::default();
    let sink = changes.clone();
    (changes, move |c: &LimitChange| {
        sink.lock().expect("changes").push(*c)
    })
}

#[test]
fn limit_change_hook_receives_old_new_the_law_and_the_window() {
    let (changes, hook) = recorded();
    let mut rig = Rig::new(|b| b.initial_limit(4).on_limit_change_with(hook));
    // A saturated clean window of 20 ms successes: 4 -> 5.
    rig.record_saturated(Outcome::Success, 20 * MS);
    rig.advance();
    rig.record_saturated(Outcome::Success, 20 * MS);
    // Then a failure: 5 -> 2.
    rig.advance();
    rig.record_saturated(Outcome::Failure, 10 * MS);
    let changes = changes.lock().expect("changes");
    assert_eq!(changes.len(), 2, "{changes:?}");
    let up = changes[0];
    assert_eq!((up.old, up.new, up.law), (4, 5, "aimd"));
    assert!(up.is_increase());
    assert_eq!(up.window.samples, 2);
    assert_eq!(up.window.failures, 0);
    assert_eq!(up.window.peak_in_flight, 4);
    assert_eq!(up.mean_latency(), 20 * MS);
    assert_eq!(up.rtt_min(), Some(20 * MS));
    let down = changes[1];
    assert_eq!((down.old, down.new), (5, 2));
    assert!(!down.is_increase());
    assert_eq!((down.window.samples, down.window.failures), (1, 1));
    assert_eq!(down.mean_latency(), 10 * MS);
}

#[test]
fn limit_change_two_argument_hook_still_receives_old_and_new() {
    let seen: Arc<Mutex<Vec<(usize, usize)>>> = Arc::default();
    let sink = seen.clone();
    let rig = Rig::new(|b| {
        b.initial_limit(4)
            .on_limit_change(move |old, new| sink.lock().expect("seen").push((old, new)))
    });
    rig.advance();
    rig.record_idle(Outcome::Failure, MS);
    assert_eq!(*seen.lock().expect("seen"), [(4, 2)]);
}

#[test]
fn limit_change_the_later_hook_replaces_the_earlier() {
    let (first, hook) = recorded();
    let second: Arc<Mutex<Vec<(usize, usize)>>> = Arc::default();
    let sink = second.clone();
    let rig = Rig::new(|b| {
        b.initial_limit(4)
            .on_limit_change_with(hook)
            .on_limit_change(move |old, new| sink.lock().expect("seen").push((old, new)))
    });
    rig.advance();
    rig.record_idle(Outcome::Failure, MS);
    assert!(first.lock().expect("changes").is_empty());
    assert_eq!(*second.lock().expect("seen"), [(4, 2)]);
}

#[test]
fn stats_expose_rtt_min_and_the_moving_average() {
    let mut rig = Rig::new(|b| b.initial_limit(2).min_latency_decay(0.0).smoothing(0.2));
    let s = rig.limiter.stats();
    assert_eq!((s.rtt_min, s.rtt_average), (None, None));
    rig.record_saturated(Outcome::Success, 10 * MS);
    rig.advance();
    rig.record_saturated(Outcome::Success, 10 * MS);
    rig.advance();
    rig.record_saturated(Outcome::Success, 30 * MS);
    let s = rig.limiter.stats();
    // RTT_min: the lowest window mean (10 ms); the average: 10 ms, then
    // 0.2 · 30 + 0.8 · 10 = 14 ms.
    assert_eq!(s.rtt_min, Some(10 * MS));
    assert_eq!(s.rtt_average, Some(14 * MS));
    assert_eq!(s.rtt_min, rig.limiter.min_latency_estimate());
    assert_eq!(s.rtt_average, rig.limiter.smoothed_latency());
    rig.limiter.reset_stats();
    let s = rig.limiter.stats();
    assert_eq!((s.rtt_min, s.rtt_average), (None, None));
}

#[test]
fn stats_law_state_of_aimd_is_its_credit() {
    let mut rig = Rig::new(|b| b.initial_limit(2).increase_rate(0.5));
    assert!(matches!(
        rig.limiter.stats().law_state,
        LawState::Aimd { credit, .. } if credit == 0.0
    ));
    rig.record_saturated(Outcome::Success, 10 * MS);
    rig.advance();
    rig.record_saturated(Outcome::Success, 10 * MS);
    // Half a permit earned, none spent.
    assert_eq!(rig.limiter.limit(), 2);
    assert!(matches!(
        rig.limiter.stats().law_state,
        LawState::Aimd { credit, .. } if credit == 0.5
    ));
}

#[test]
fn stats_law_state_of_ceiling_is_its_phase_ceiling_and_floor() {
    let clock = ManualClock::new();
    let limiter = adapt_opts(&clock)
        .algorithm(Algorithm::Ceiling)
        .initial_limit(10)
        .build()
        .expect("valid");
    let LawState::Ceiling {
        phase,
        ceiling,
        floor_nanos,
        ..
    } = limiter.stats().law_state
    else {
        panic!("{:?}", limiter.stats().law_state);
    };
    assert_eq!((phase, ceiling, floor_nanos), ("slow_start", None, None));
    // A busy window of 20 successes of 50 ms measures the floor; then a
    // fresh failure at limit 10 makes 10 the remembered ceiling.
    let permits: Vec<_> = (0..10)
        .map(|_| limiter.try_acquire_owned().expect("free"))
        .collect();
    for p in permits {
        p.record_with_latency(Outcome::Success, 50 * MS);
        limiter
            .try_acquire_owned()
            .expect("free")
            .record_with_latency(Outcome::Success, 50 * MS);
        // Keep the window busy: one held while the next completes.
    }
    let held: Vec<_> = (0..10)
        .map(|_| limiter.try_acquire_owned().expect("free"))
        .collect();
    clock.advance(Duration::from_secs(1));
    let mut held = held.into_iter();
    held.next()
        .expect("held")
        .record_with_latency(Outcome::Failure, 50 * MS);
    match limiter.stats().law_state {
        LawState::Ceiling {
            phase,
            ceiling,
            floor_nanos,
            ..
        } => {
            assert_eq!(phase, "known");
            assert!(ceiling.is_some());
            assert_eq!(floor_nanos, Some(50e6));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn stats_law_state_of_vegas_counts_the_windows_it_read_a_queue() {
    let mut rig = Rig::new(|b| {
        b.algorithm(Algorithm::Vegas)
            .initial_limit(10)
            .min_latency_decay(0.0)
    });
    let queued = |rig: &Rig| match rig.limiter.stats().law_state {
        LawState::Vegas {
            queued_windows,
            probing,
            relearned_floor_nanos,
            ..
        } => {
            assert!(!probing);
            assert_eq!(relearned_floor_nanos, None);
            queued_windows
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(queued(&rig), 0);
    // A busy window at 10 ms sets RTT_min; one at 50 ms reads a queue of
    // 10 · (1 − 10 / 50) = 8 and cuts.
    rig.record_saturated(Outcome::Success, 10 * MS);
    rig.advance();
    rig.record_saturated(Outcome::Success, 10 * MS);
    rig.advance();
    rig.record_saturated(Outcome::Success, 50 * MS);
    assert_eq!(rig.limiter.limit(), 5);
    assert_eq!(queued(&rig), 1);
}

#[test]
fn stats_law_state_of_gradient_reports_its_baseline() {
    let rig = Rig::new(|b| b.algorithm(Algorithm::Gradient));
    assert!(matches!(
        rig.limiter.stats().law_state,
        LawState::Gradient {
            relearned_floor_nanos: None,
            probing: false,
            queued_windows: 0,
            ..
        }
    ));
}

#[test]
fn stats_law_state_of_a_law_of_your_own_is_unreported() {
    #[derive(Debug)]
    struct Hold;
    impl ControlLaw for Hold {
        fn name(&self) -> &'static str {
            "hold"
        }
        fn next_limit(&mut self, limit: usize, _: &WindowSummary) -> usize {
            limit
        }
    }
    let limiter = Limiter::builder().law(Hold).build().expect("valid");
    assert_eq!(limiter.stats().law_state, LawState::Unreported);
}

#[cfg(feature = "serde")]
#[test]
fn stats_serialize_the_law_state_with_a_law_tag_and_estimators_in_nanoseconds() {
    let mut rig = Rig::new(|b| b.initial_limit(2).min_latency_decay(0.0));
    let json = serde_json::to_value(rig.limiter.stats()).expect("serializes");
    assert_eq!(json["rtt_min"], serde_json::Value::Null);
    assert_eq!(json["law_state"]["law"], "aimd");
    assert_eq!(json["law_state"]["credit"], 0.0);
    rig.record_saturated(Outcome::Success, 10 * MS);
    rig.advance();
    rig.record_saturated(Outcome::Success, 10 * MS);
    let json = serde_json::to_value(rig.limiter.stats()).expect("serializes");
    assert_eq!(json["rtt_min"], 10_000_000);
    assert_eq!(json["rtt_average"], 10_000_000);

    let ceiling = Limiter::new();
    let json = serde_json::to_value(ceiling.stats()).expect("serializes");
    assert_eq!(json["law_state"]["law"], "ceiling");
    assert_eq!(json["law_state"]["phase"], "slow_start");
}

#[test]
fn builders_refuse_an_empty_name() {
    let err = Limiter::builder().name("").build().unwrap_err();
    assert_eq!(err.field(), "name");
    let err = adaptx::RateLimiter::builder()
        .name("")
        .build_keyed::<u8>()
        .unwrap_err();
    assert_eq!(err.field(), "name");
    assert_eq!(
        Limiter::builder().name("db").build().expect("valid").name(),
        "db"
    );
}
