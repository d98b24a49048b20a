//! Run-time control of a running limiter: modes (enforce, shadow, bypass),
//! reconfiguration through the builder's checks, and a forced limit. Each
//! test is named after the contract it checks.

mod common;

use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use adaptx::{
    Algorithm, ControlLaw, Limiter, ManualClock, Mode, Outcome, Partitions, QueuePolicy,
    RateLimiter, WindowSummary,
};
use common::{MS, Recorder, Rig, WINDOW, assert_accounting, poll_once};

// ---------------------------------------------------------------- modes

#[test]
fn mode_shadow_admits_over_the_limit_and_counts_would_reject() {
    let mut rig = Rig::new(|b| b.initial_limit(2).max_limit(10));
    rig.limiter.set_mode(Mode::Shadow);
    for _ in 0..5 {
        rig.held
            .push(rig.limiter.try_acquire_owned().expect("shadow admits"));
    }
    let s = rig.limiter.stats();
    assert_eq!((s.in_flight, s.would_reject, s.rejected), (5, 3, 0));
    assert_eq!((s.total, s.mode), (5, Mode::Shadow));
    assert_eq!((rig.limiter.limit(), rig.limiter.debt()), (2, 3));
    assert!(rig.limiter.allow(), "allow says what try_acquire will do");
    assert_accounting(&rig.limiter);
    rig.held.clear();
    assert_eq!((rig.limiter.in_flight(), rig.limiter.available()), (0, 2));
    assert_eq!(rig.limiter.stats().dropped, 5);
}

#[test]
fn mode_shadow_acquire_never_waits() {
    let rig = Rig::new(|b| b.initial_limit(1));
    let _held = rig.limiter.try_acquire().expect("free");
    rig.limiter.set_mode(Mode::Shadow);
    let mut acquire = pin!(rig.limiter.acquire());
    let Poll::Ready(Ok(permit)) = poll_once(acquire.as_mut()) else {
        panic!("shadow mode must admit at once");
    };
    assert_eq!(permit.in_flight_at_admission(), 1);
    assert_eq!(rig.limiter.waiting(), 0);
    assert_eq!(rig.limiter.stats().would_reject, 1);
}

#[test]
fn mode_switch_to_shadow_grants_every_queued_waiter_in_place() {
    let rig = Rig::new(|b| b.initial_limit(1));
    let held = rig.limiter.try_acquire().expect("free");
    let mut a = pin!(rig.limiter.acquire());
    let mut b = pin!(rig.limiter.acquire());
    assert!(poll_once(a.as_mut()).is_pending());
    assert!(poll_once(b.as_mut()).is_pending());
    assert_eq!(rig.limiter.waiting(), 2);
    rig.limiter.set_mode(Mode::Bypass);
    assert_eq!(rig.limiter.waiting(), 0);
    let Poll::Ready(Ok(pa)) = poll_once(a.as_mut()) else {
        panic!("granted by the switch");
    };
    let Poll::Ready(Ok(pb)) = poll_once(b.as_mut()) else {
        panic!("granted by the switch");
    };
    // Granted in queue order: the first in line saw one permit in flight.
    assert_eq!(
        (pa.in_flight_at_admission(), pb.in_flight_at_admission()),
        (1, 2)
    );
    assert_eq!(rig.limiter.in_flight(), 3);
    assert_eq!(rig.limiter.stats().would_reject, 2);
    drop((held, pa, pb));
    assert_eq!(rig.limiter.in_flight(), 0);
    assert_accounting(&rig.limiter);
}

#[test]
fn mode_back_to_enforce_keeps_permits_above_the_limit_as_debt() {
    let mut rig = Rig::new(|b| b.initial_limit(2));
    rig.limiter.set_mode(Mode::Shadow);
    for _ in 0..4 {
        rig.held
            .push(rig.limiter.try_acquire_owned().expect("admitted"));
    }
    assert_eq!(rig.limiter.set_mode(Mode::Enforce), Mode::Shadow);
    assert_eq!(rig.limiter.debt(), 2);
    assert!(
        rig.limiter.try_acquire().is_err(),
        "over the limit: refused"
    );
    assert!(!rig.limiter.allow());
    // Two releases retire the debt; the third frees a permit.
    rig.held.pop();
    rig.held.pop();
    assert!(rig.limiter.try_acquire().is_err());
    rig.held.pop();
    let again = rig.limiter.try_acquire().expect("under the limit again");
    assert_eq!(rig.limiter.in_flight(), 2);
    drop(again);
    rig.held.clear();
    assert_eq!((rig.limiter.in_flight(), rig.limiter.available()), (0, 2));
    let s = rig.limiter.stats();
    assert_eq!((s.rejected, s.would_reject), (2, 2));
}

/// In `mode`, admits twice the limit of 4 at once, then fails them all
/// once the window is over.
fn overloaded_window(mode: Mode) -> Rig {
    let rig = Rig::new(|b| b.initial_limit(4));
    rig.limiter.set_mode(mode);
    let permits: Vec<_> = (0..8)
        .map(|_| rig.limiter.try_acquire().expect("admitted"))
        .collect();
    rig.clock.advance(WINDOW);
    for p in permits {
        p.record_with_latency(Outcome::Failure, 10 * MS);
    }
    rig
}

#[test]
fn mode_shadow_law_still_moves_the_limit() {
    let rig = overloaded_window(Mode::Shadow);
    // AIMD halves on a failed window: the limit moved although nothing was
    // ever refused.
    assert_eq!(rig.limiter.limit(), 2);
    let s = rig.limiter.stats();
    assert_eq!((s.decreases, s.rejected, s.would_reject), (1, 0, 4));
}

#[test]
fn mode_bypass_freezes_the_limit_and_keeps_measuring() {
    let rig = overloaded_window(Mode::Bypass);
    rig.clock.advance(WINDOW);
    rig.limiter
        .try_acquire()
        .expect("free")
        .record_with_latency(Outcome::Success, 20 * MS);
    assert_eq!(rig.limiter.limit(), 4, "the law does not run in bypass");
    let s = rig.limiter.stats();
    assert_eq!((s.failures, s.success, s.decreases), (8, 1, 0));
    assert_eq!(s.would_reject, 4);
    assert!(s.latency_samples > 0, "latencies are still recorded");
    // Back to enforce: the law resumes from the frozen limit.
    rig.limiter.set_mode(Mode::Enforce);
    rig.clock.advance(WINDOW);
    rig.limiter
        .try_acquire()
        .expect("free")
        .record_with_latency(Outcome::Failure, 20 * MS);
    assert_eq!(rig.limiter.limit(), 2);
}

#[test]
fn mode_closed_limiter_refuses_in_every_mode() {
    for mode in [Mode::Enforce, Mode::Shadow, Mode::Bypass] {
        let rig = Rig::new(|b| b.initial_limit(1));
        rig.limiter.set_mode(mode);
        rig.limiter.close();
        assert!(rig.limiter.try_acquire().is_err(), "{mode}");
        let mut acquire = pin!(rig.limiter.acquire());
        assert!(
            matches!(poll_once(acquire.as_mut()), Poll::Ready(Err(_))),
            "{mode}"
        );
        assert_eq!(rig.limiter.stats().would_reject, 0);
    }
}

#[test]
fn mode_shadow_partitions_count_permits_above_their_share() {
    let limiter = Limiter::builder()
        .initial_limit(4)
        .partitions(
            Partitions::new()
                .share("batch", 0.5)
                .share("critical", 0.5)
                .reserve(1.0),
        )
        .build()
        .expect("valid");
    let batch = limiter.class("batch").expect("known");
    let critical = limiter.class("critical").expect("known");
    let mut held: Vec<_> = (0..2)
        .map(|_| limiter.try_acquire_as(batch).expect("share"))
        .collect();
    assert!(limiter.try_acquire_as(batch).is_err());
    limiter.set_mode(Mode::Shadow);
    held.extend((0..3).map(|_| limiter.try_acquire_as(batch).expect("shadow")));
    assert_eq!(limiter.in_flight_of(batch), 5);
    assert_eq!(limiter.in_flight(), 5);
    limiter.set_mode(Mode::Enforce);
    // Critical's reservation is intact, but the global limit is spent.
    assert!(limiter.try_acquire_as(critical).is_err());
    held.truncate(1);
    assert_eq!((limiter.in_flight_of(batch), limiter.in_flight()), (1, 1));
    let c: Vec<_> = (0..2)
        .map(|_| limiter.try_acquire_as(critical).expect("its share"))
        .collect();
    assert_eq!(limiter.in_flight(), 3);
    drop((held, c));
    assert_eq!(limiter.in_flight(), 0);
    assert_accounting(&limiter);
}

// ---------------------------------------------------------------- reconfigure

#[test]
fn reconfigure_bounds_clamp_the_limit_and_keep_every_permit() {
    let mut rig = Rig::new(|b| b.initial_limit(10).max_limit(20));
    rig.saturate();
    assert_eq!(rig.held.len(), 10);
    rig.limiter.reconfigure(|b| b.max_limit(4)).expect("valid");
    assert_eq!((rig.limiter.limit(), rig.limiter.debt()), (4, 6));
    let s = rig.limiter.stats();
    assert_eq!((s.max_limit, s.in_flight), (4, 10));
    rig.held.truncate(3);
    assert_eq!((rig.limiter.in_flight(), rig.limiter.available()), (3, 1));
    assert_accounting(&rig.limiter);
    // Growth through the floor.
    rig.limiter
        .reconfigure(|b| b.min_limit(8).max_limit(20))
        .expect("valid");
    assert_eq!((rig.limiter.limit(), rig.limiter.available()), (8, 5));
}

#[test]
fn reconfigure_growth_grants_queued_waiters_in_their_order() {
    let rig = Rig::new(|b| b.initial_limit(1).max_limit(10));
    let held = rig.limiter.try_acquire().expect("free");
    let mut a = pin!(rig.limiter.acquire());
    let mut b = pin!(rig.limiter.acquire());
    let mut c = pin!(rig.limiter.acquire());
    for f in [a.as_mut(), b.as_mut(), c.as_mut()] {
        assert!(poll_once(f).is_pending());
    }
    rig.limiter.reconfigure(|b| b.min_limit(3)).expect("valid");
    let Poll::Ready(Ok(pa)) = poll_once(a.as_mut()) else {
        panic!("first in line: granted");
    };
    let Poll::Ready(Ok(pb)) = poll_once(b.as_mut()) else {
        panic!("second in line: granted");
    };
    assert!(
        poll_once(c.as_mut()).is_pending(),
        "the third keeps its place"
    );
    assert_eq!(rig.limiter.waiting(), 1);
    drop((held, pa, pb));
    assert!(matches!(poll_once(c.as_mut()), Poll::Ready(Ok(_))));
}

#[test]
fn reconfigure_bad_value_is_the_builders_error_and_changes_nothing() {
    let rig = Rig::new(|b| b.initial_limit(5).max_limit(50));
    let before = rig.limiter.stats();
    type Edit = fn(adaptx::Builder) -> adaptx::Builder;
    let edits: [(&str, Edit); 10] = [
        ("min_limit", |b| b.min_limit(0)),
        ("max_limit", |b| b.max_limit(usize::MAX)),
        ("initial_limit", |b| b.initial_limit(0)),
        ("smoothing", |b| b.smoothing(0.0)),
        ("decrease_ratio", |b| b.decrease_ratio(1.5)),
        ("tolerance", |b| b.tolerance(f64::NAN)),
        ("jitter", |b| b.jitter(2.0)),
        ("sample_window", |b| b.sample_window(Duration::ZERO)),
        ("sample_window_rtt_multiple", |b| {
            b.sample_window_adaptive(10, 0.5)
        }),
        ("min_latency_decay", |b| b.min_latency_decay(-1.0)),
    ];
    for (field, edit) in edits {
        let built = edit(Limiter::builder()).build().unwrap_err();
        // A good change in the same call is not applied either.
        let live = rig
            .limiter
            .reconfigure(|b| edit(b.max_limit(7).algorithm(Algorithm::Vegas)))
            .unwrap_err();
        assert_eq!(live.field(), field);
        assert_eq!(live.to_string(), built.to_string(), "{field}");
    }
    let after = rig.limiter.stats();
    assert_eq!(
        (
            after.limit,
            after.min_limit,
            after.max_limit,
            after.algorithm
        ),
        (
            before.limit,
            before.min_limit,
            before.max_limit,
            before.algorithm
        )
    );
}

#[test]
fn reconfigure_refuses_an_option_only_a_build_sets_naming_it() {
    let rig = Rig::new(|b| b);
    let err = rig
        .limiter
        .reconfigure(|b| b.max_limit(5).queue(QueuePolicy::new().max_waiters(3)))
        .unwrap_err();
    assert_eq!(err.field(), "queue");
    assert_eq!(
        err.to_string(),
        "invalid queue: \"a new value\" (allowed: set only when building the limiter)"
    );
    let err = rig.limiter.reconfigure(|b| b.seed(7)).unwrap_err();
    assert_eq!(err.field(), "seed");
    assert_eq!(rig.limiter.stats().max_limit, 1000);
}

#[test]
fn reconfigure_max_limit_of_a_partitioned_limiter_is_checked() {
    let limiter = Limiter::builder()
        .partitions(Partitions::new().share("a", 0.5))
        .build()
        .expect("valid");
    let err = limiter.reconfigure(|b| b.max_limit(70_000)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid max_limit: 70000 (allowed: 1 ..= 65535 with partitions)"
    );
    let err = limiter.force_limit(70_000).unwrap_err();
    assert_eq!(err.field(), "forced_limit");
}

#[test]
fn reconfigure_swaps_the_law_and_keeps_the_estimators() {
    let rig = Rig::new(|b| b.initial_limit(4));
    rig.limiter
        .try_acquire()
        .expect("free")
        .record_with_latency(Outcome::Success, 30 * MS);
    rig.clock.advance(WINDOW);
    rig.limiter
        .try_acquire()
        .expect("free")
        .record_with_latency(Outcome::Success, 30 * MS);
    let floor = rig.limiter.min_latency_estimate();
    assert!(floor.is_some());
    assert_eq!(rig.limiter.algorithm(), "aimd");
    rig.limiter
        .reconfigure(|b| b.algorithm(Algorithm::Gradient))
        .expect("valid");
    assert_eq!(rig.limiter.algorithm(), "gradient");
    assert_eq!(rig.limiter.stats().algorithm, "gradient");
    assert_eq!(rig.limiter.min_latency_estimate(), floor);
    assert_eq!(rig.limiter.limit(), 4);
    let name = futures_lite_block_on(
        rig.limiter
            .execute(async |ctl| Ok::<_, std::io::Error>(ctl.algorithm())),
    );
    assert_eq!(name.expect("ran"), "gradient");
}

/// A minimal `block_on` for a future that is ready at once.
fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
    match poll_once(pin!(f)) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("ready at once"),
    }
}

/// A law whose state is the number of windows it has seen; it proposes
/// `10 + seen`.
#[derive(Debug)]
struct Counting {
    seen: Arc<AtomicUsize>,
}

impl ControlLaw for Counting {
    fn name(&self) -> &'static str {
        "counting"
    }

    fn next_limit(&mut self, _limit: usize, _w: &WindowSummary) -> usize {
        10 + self.seen.fetch_add(1, Ordering::SeqCst) + 1
    }
}

#[test]
fn reconfigure_keeps_the_law_and_its_state_unless_it_changes() {
    let seen = Arc::new(AtomicUsize::new(0));
    let rig = Rig::new(|b| b.law(Counting { seen: seen.clone() }).initial_limit(10));
    let window = |rig: &Rig| {
        rig.clock.advance(WINDOW);
        rig.limiter
            .try_acquire()
            .expect("free")
            .record_with_latency(Outcome::Success, MS);
    };
    window(&rig);
    assert_eq!(rig.limiter.limit(), 11);
    // A change that is not the law's keeps the user's law, state and all.
    rig.limiter
        .reconfigure(|b| b.max_limit(500).smoothing(0.5))
        .expect("valid");
    window(&rig);
    assert_eq!((rig.limiter.limit(), seen.load(Ordering::SeqCst)), (12, 2));
    assert_eq!(rig.limiter.algorithm(), "counting");
    // Choosing a built-in law replaces it.
    rig.limiter
        .reconfigure(|b| b.algorithm(Algorithm::Aimd))
        .expect("valid");
    window(&rig);
    assert_eq!(seen.load(Ordering::SeqCst), 2, "the old law no longer runs");
    assert_eq!(rig.limiter.algorithm(), "aimd");
}

/// A law that records the seeds it is given.
#[derive(Debug)]
struct Seeded {
    seeds: Arc<Mutex<Vec<u64>>>,
}

impl ControlLaw for Seeded {
    fn name(&self) -> &'static str {
        "seeded"
    }

    fn next_limit(&mut self, limit: usize, _w: &WindowSummary) -> usize {
        limit
    }

    fn seed(&mut self, seed: u64) {
        self.seeds.lock().expect("not poisoned").push(seed);
    }
}

#[test]
fn control_law_seed_comes_from_the_limiters_seed() {
    let seeds = Arc::new(Mutex::new(Vec::new()));
    let law = || Seeded {
        seeds: seeds.clone(),
    };
    let build = |seed| {
        Limiter::builder()
            .law(law())
            .seed(seed)
            .build()
            .expect("valid")
    };
    let (a, _b, _c) = (build(1), build(1), build(2));
    let got = seeds.lock().expect("not poisoned").clone();
    // Seeded once each at build: limiters seeded alike give their laws the
    // same seed, others another; neither is the limiter's own (that is the
    // jitter's stream).
    assert_eq!(got.len(), 3);
    assert_eq!(got[0], got[1]);
    assert_ne!(got[0], got[2]);
    assert!(!got.contains(&1) && !got.contains(&2));
    // A law kept in force is not seeded again (its draws go on), nor by a
    // reset of the statistics (the law keeps its seed through its reset).
    a.reconfigure(|b| b.max_limit(50)).expect("valid");
    a.reset_stats();
    assert_eq!(seeds.lock().expect("not poisoned").len(), 3);
    // A law put in force at run time is seeded the same way.
    a.reconfigure(|b| b.law(law())).expect("valid");
    let got = seeds.lock().expect("not poisoned").clone();
    assert_eq!(got.len(), 4);
    assert_eq!(got[3], got[0]);
}

/// A law whose `seed` panics.
#[derive(Debug)]
struct PanicsWhenSeeded;

impl ControlLaw for PanicsWhenSeeded {
    fn name(&self) -> &'static str {
        "panics_when_seeded"
    }

    fn next_limit(&mut self, limit: usize, _w: &WindowSummary) -> usize {
        limit + 1
    }

    fn seed(&mut self, _seed: u64) {
        panic!("a user's law");
    }
}

#[test]
fn control_law_seed_that_panics_leaves_the_limiter_running() {
    let rig = Rig::new(|b| b.law(PanicsWhenSeeded).initial_limit(4));
    rig.limiter
        .reconfigure(|b| b.law(PanicsWhenSeeded))
        .expect("valid");
    assert_eq!(rig.limiter.algorithm(), "panics_when_seeded");
    // The law runs: a busy window grows the limit.
    let permits: Vec<_> = (0..4)
        .map(|_| rig.limiter.try_acquire().expect("free"))
        .collect();
    rig.clock.advance(WINDOW);
    for p in permits {
        p.record_with_latency(Outcome::Success, MS);
    }
    assert_eq!(rig.limiter.limit(), 5);
}

#[test]
fn reconfigure_keeps_a_builtin_laws_state_unless_a_parameter_changes() {
    // AIMD at increase rate 0.5 grows by one every second busy window: the
    // half credit of the first must survive a change that is not the law's.
    let mut rig = Rig::new(|b| b.initial_limit(4).increase_rate(0.5));
    assert_eq!(rig.saturated_window(MS), 4);
    rig.limiter
        .reconfigure(|b| b.max_limit(100))
        .expect("valid");
    assert_eq!(rig.saturated_window(MS), 5, "the credit was kept");
    assert_eq!(rig.saturated_window(MS), 5);
    rig.limiter
        .reconfigure(|b| b.increase_rate(0.5).decrease_ratio(0.6))
        .expect("valid");
    assert_eq!(rig.saturated_window(MS), 5, "a new law: credit from zero");
    assert_eq!(rig.saturated_window(MS), 6);
}

#[test]
fn reconfigure_sample_window_applies_to_the_window_in_progress() {
    let rig = Rig::new(|b| b.initial_limit(4));
    rig.limiter
        .reconfigure(|b| b.sample_window(100 * MS))
        .expect("valid");
    let permits: Vec<_> = (0..4)
        .map(|_| rig.limiter.try_acquire().expect("free"))
        .collect();
    rig.clock.advance(150 * MS);
    for p in permits {
        p.record_with_latency(Outcome::Failure, MS);
    }
    assert_eq!(rig.limiter.limit(), 2, "a 100 ms window closed at 150 ms");
}

#[test]
fn reconfigure_adaptive_window_on_then_off() {
    // Adaptive on: after a window with successes of 10 ms, a window of 20
    // samples may close after 4 × 10 ms.
    let rig = Rig::new(|b| b.initial_limit(40).max_limit(100));
    rig.limiter
        .reconfigure(|b| b.sample_window_adaptive(20, 4.0))
        .expect("valid");
    let window_of = |rig: &Rig, n: usize, after: Duration| {
        let permits: Vec<_> = (0..n)
            .map(|_| rig.limiter.try_acquire().expect("free"))
            .collect();
        rig.clock.advance(after);
        for p in permits {
            p.record_with_latency(Outcome::Success, 10 * MS);
        }
    };
    window_of(&rig, 40, WINDOW); // a full window: learns the 10 ms latency
    assert_eq!(rig.limiter.stats().increases, 1);
    window_of(&rig, 41, 50 * MS);
    assert_eq!(rig.limiter.stats().increases, 2, "closed early at 50 ms");
    rig.limiter
        .reconfigure(|b| b.sample_window_fixed())
        .expect("valid");
    window_of(&rig, 42, 50 * MS);
    assert_eq!(rig.limiter.stats().increases, 2, "fixed: no early close");
}

// ---------------------------------------------------------------- forced limit

#[test]
fn force_limit_pins_the_limit_while_the_law_keeps_observing() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let rig = Rig::new(|b| {
        b.law(Recorder {
            seen: seen.clone(),
            react: false,
            hold: false,
        })
        .initial_limit(10)
        .min_limit(5)
    });
    rig.limiter.force_limit(3).expect("valid");
    assert_eq!(rig.limiter.limit(), 3, "below min_limit: the operator wins");
    assert_eq!(rig.limiter.stats().forced_limit, Some(3));
    for _ in 0..3 {
        rig.clock.advance(WINDOW);
        rig.limiter
            .try_acquire()
            .expect("free")
            .record_with_latency(Outcome::Failure, MS);
    }
    assert_eq!(
        seen.lock().expect("not poisoned").len(),
        3,
        "the law saw every window"
    );
    assert_eq!(rig.limiter.limit(), 3, "but moved nothing");
    let s = rig.limiter.stats();
    assert_eq!((s.increases, s.decreases), (0, 0));
    // Released: clamped into the bounds, then the law moves it again.
    assert_eq!(rig.limiter.release_forced_limit(), Some(3));
    assert_eq!(rig.limiter.release_forced_limit(), None);
    assert_eq!((rig.limiter.limit(), rig.limiter.forced_limit()), (5, None));
    rig.clock.advance(WINDOW);
    rig.limiter.try_acquire().expect("free").success();
    assert_eq!(rig.limiter.limit(), 5, "clamped at min");
    rig.limiter.reconfigure(|b| b.min_limit(1)).expect("valid");
    rig.clock.advance(WINDOW);
    rig.limiter
        .try_acquire()
        .expect("free")
        .record_with_latency(Outcome::Failure, MS);
    assert_eq!(rig.limiter.limit(), 4, "the recorder steps down by one");
}

#[test]
fn force_limit_shrink_is_debt_and_growth_grants_waiters() {
    let mut rig = Rig::new(|b| b.initial_limit(4));
    rig.saturate();
    rig.limiter.force_limit(2).expect("valid");
    assert_eq!(rig.limiter.debt(), 2);
    let mut w = pin!(rig.limiter.acquire());
    assert!(poll_once(w.as_mut()).is_pending());
    rig.limiter.force_limit(6).expect("valid");
    let Poll::Ready(Ok(granted)) = poll_once(w.as_mut()) else {
        panic!("growth grants the waiter");
    };
    assert_eq!(rig.limiter.in_flight(), 5);
    drop(granted);
    let err = rig.limiter.force_limit(0).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid forced_limit: 0 (allowed: 1 ..= 2147483647)"
    );
    assert_eq!(rig.limiter.limit(), 6);
}

#[test]
fn force_limit_survives_reconfigure_and_reset_stats() {
    let rig = Rig::new(|b| b.initial_limit(10).max_limit(100));
    rig.limiter.force_limit(50).expect("valid");
    rig.limiter.reconfigure(|b| b.max_limit(20)).expect("valid");
    assert_eq!(rig.limiter.limit(), 50, "the forced limit overrides max");
    rig.limiter.set_mode(Mode::Shadow);
    let _p = rig.limiter.try_acquire().expect("free");
    rig.limiter.reset_stats();
    let s = rig.limiter.stats();
    assert_eq!((s.limit, s.forced_limit, s.would_reject), (50, Some(50), 0));
    assert_eq!(rig.limiter.release_forced_limit(), Some(50));
    assert_eq!(rig.limiter.limit(), 20);
}

#[test]
fn force_limit_stops_fresh_failures_from_closing_windows() {
    // A law that reacts to the first failure closes a window per fresh
    // failure only while a decrease can follow; a forced limit never moves.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let rig = Rig::new(|b| {
        b.law(Recorder {
            seen: seen.clone(),
            react: true,
            hold: false,
        })
        .initial_limit(10)
    });
    rig.limiter.force_limit(8).expect("valid");
    rig.clock.advance(MS);
    for _ in 0..5 {
        rig.limiter.try_acquire().expect("free").failure();
    }
    assert!(seen.lock().expect("not poisoned").is_empty());
    rig.limiter.release_forced_limit();
    rig.limiter.try_acquire().expect("free").failure();
    assert_eq!(seen.lock().expect("not poisoned").len(), 1, "reacts again");
}

// ---------------------------------------------------------------- rate limiters

#[test]
fn mode_rate_shadow_admits_with_an_empty_bucket_and_the_rate_moves() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::builder()
        .initial_rate(10)
        .clock(clock.clone())
        .build()
        .expect("valid");
    limiter.set_mode(Mode::Shadow);
    let permits: Vec<_> = (0..15)
        .map(|_| limiter.try_acquire().expect("shadow admits"))
        .collect();
    assert_eq!(permits[14].remaining(), 0);
    for p in permits {
        p.failure();
    }
    clock.advance(Duration::from_secs(1));
    limiter.try_acquire().expect("tokens").success();
    let s = limiter.stats();
    assert_eq!((s.admitted, s.rejected, s.would_reject), (16, 0, 5));
    assert_eq!((s.in_flight, s.mode), (0, Mode::Shadow));
    assert_eq!(limiter.current_rate(), 10, "cut by 20 %, clamped at min 10");
    limiter.set_mode(Mode::Enforce);
    while limiter.try_acquire().is_ok() {}
    assert_eq!(limiter.stats().rejected, 1);
}

#[test]
fn mode_rate_bypass_freezes_the_rate() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::builder()
        .initial_rate(100)
        .clock(clock.clone())
        .build_keyed::<u32>()
        .expect("valid");
    limiter.set_mode(Mode::Bypass);
    for _ in 0..150 {
        limiter.try_acquire(&7).expect("bypass admits").failure();
    }
    clock.advance(Duration::from_secs(1));
    limiter.try_acquire(&7).expect("admits").success();
    assert_eq!(limiter.current_rate(), 100, "frozen");
    let s = limiter.stats();
    // The key's first request comes from a newcomer bucket; the other 149
    // from its own bucket of 100 tokens: 49 beyond it.
    assert_eq!((s.would_reject, s.rejected, s.failures), (49, 0, 150));
    limiter.set_mode(Mode::Shadow);
    clock.advance(Duration::from_secs(1));
    for _ in 0..10 {
        limiter.try_acquire(&7).expect("admits").failure();
    }
    clock.advance(Duration::from_secs(1));
    limiter.try_acquire(&7).expect("admits").success();
    assert_eq!(limiter.current_rate(), 80, "shadow: the law runs");
}
