//! Client-side adaptive throttling (`Throttle`): the SRE book's and Envoy's
//! vectors, shedding toward `k` requests per accepted one, forgetting, and
//! exact counting under concurrency. Deterministic: a manual clock, seeds.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use adaptx::{ManualClock, Throttle, throttle_probability};

fn close(got: f64, want: f64) -> bool {
    (got - want).abs() < 5e-5
}

/// peer-algorithms §9: the SRE book's rule, K = 2.
#[test]
fn throttle_sre_vectors() {
    let p = |n, a| throttle_probability(n, a, 2.0, 1.0, 1.0);
    assert!(close(p(100, 40), 0.1980), "{}", p(100, 40));
    assert_eq!(p(100, 50), 0.0);
    assert_eq!(p(100, 90), 0.0);
    assert!(close(p(10, 0), 0.9091), "{}", p(10, 0));
    assert_eq!(p(0, 0), 0.0);
}

/// peer-algorithms §10: Envoy's admission control (sr = 0.95, cap 0.8).
#[test]
fn throttle_envoy_vectors() {
    let p = |s, aggression| throttle_probability(100, s, 1.0 / 0.95, aggression, 0.8);
    assert!(close(p(80, 1.0), 0.1563), "{}", p(80, 1.0));
    assert!(close(p(80, 2.0), 0.3954), "{}", p(80, 2.0));
    assert!(close(p(50, 1.0), 0.4690), "{}", p(50, 1.0));
    assert!(close(p(20, 1.0), 0.7817), "{}", p(20, 1.0));
    assert_eq!(p(95, 1.0), 0.0);
    // The cap: everything refused would be 100/101, held at 0.8.
    assert_eq!(p(0, 1.0), 0.8);
}

fn rig(seed: u64) -> (ManualClock, Throttle) {
    let clock = ManualClock::new();
    let t = Throttle::builder()
        .clock(clock.clone())
        .seed(seed)
        .build()
        .unwrap();
    (clock, t)
}

/// The draw refuses with the probability in force: 4 000 throttles (seeds
/// 0..4000), each with 100 requests and 80 accepts in its window (Envoy's
/// first vector, p = 0.1563), draw once; about 625 refuse (3 σ = 69).
#[test]
fn throttle_refuses_with_the_probability_in_force() {
    let refused = (0..4_000)
        .filter(|&seed| {
            let t = Throttle::builder()
                .clock(ManualClock::new())
                .k(1.0 / 0.95)
                .max_probability(0.8)
                .seed(seed)
                .build()
                .unwrap();
            for i in 0..100 {
                t.record(i < 80);
            }
            assert!(close(t.probability(), 0.1563));
            t.try_admit().is_err()
        })
        .count();
    assert!((556..=694).contains(&refused), "refused {refused} of 4000");
}

#[test]
fn throttle_refuses_nothing_while_the_backend_accepts_half() {
    let (_clock, t) = rig(1);
    for i in 0..1_000 {
        assert!(t.try_admit().is_ok(), "request {i}");
        t.record(i % 2 == 0);
    }
    assert_eq!(t.stats().throttled, 0);
}

/// The backend refuses everything: the client sheds almost all requests
/// but keeps probing (p = n / (n + 1) < 1), and every refusal counted.
#[test]
fn throttle_backend_refusing_all_is_probed_not_hammered() {
    let (_clock, t) = rig(5);
    let mut sent = 0;
    for _ in 0..10_000 {
        if t.try_admit().is_ok() {
            sent += 1;
            t.record(false);
        }
    }
    // The expected sends are Σ 1/(n + 1) ≈ ln 10 000 + 0.58 ≈ 9.8.
    assert!((2..=40).contains(&sent), "sent {sent}");
    let s = t.stats();
    assert_eq!(s.admitted, sent);
    assert_eq!(s.admitted + s.throttled, 10_000);
    assert_eq!((s.requests, s.accepts), (10_000, 0));
}

/// Once the refusals leave the window the client sends again.
#[test]
fn throttle_forgets_after_the_window() {
    let (clock, t) = rig(9);
    for _ in 0..100 {
        t.record(false);
    }
    assert!(t.probability() > 0.9);
    clock.advance(Duration::from_secs(60));
    assert!(
        t.probability() > 0.9,
        "half the window later: still counted"
    );
    clock.advance(Duration::from_secs(61));
    assert_eq!(t.probability(), 0.0);
    assert!(t.try_admit().is_ok());
}

#[test]
fn throttle_min_rps_holds_off_on_a_trickle() {
    let clock = ManualClock::new();
    let t = Throttle::builder()
        .clock(clock.clone())
        .window(Duration::from_secs(10))
        .min_rps(5.0)
        .seed(2)
        .build()
        .unwrap();
    for _ in 0..49 {
        t.record(false);
    }
    assert_eq!(t.probability(), 0.0, "49 < 5/s × 10 s");
    t.record(false);
    assert!(t.probability() > 0.9);
}

#[test]
fn throttle_same_seed_same_decisions() {
    let run = |seed| {
        let (_clock, t) = rig(seed);
        (0..500)
            .map(|i| {
                let ok = t.try_admit().is_ok();
                if ok {
                    t.record(i % 4 == 0);
                }
                ok
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(run(42), run(42));
    assert_ne!(run(42), run(43));
}

#[test]
fn throttle_config_errors_name_the_field() {
    let field = |b: adaptx::ThrottleBuilder| b.build().unwrap_err().field();
    assert_eq!(field(Throttle::builder().k(0.99)), "k");
    assert_eq!(field(Throttle::builder().k(f64::NAN)), "k");
    assert_eq!(field(Throttle::builder().aggression(0.5)), "aggression");
    assert_eq!(
        field(Throttle::builder().max_probability(0.0)),
        "max_probability"
    );
    assert_eq!(
        field(Throttle::builder().max_probability(1.5)),
        "max_probability"
    );
    assert_eq!(field(Throttle::builder().min_rps(-1.0)), "min_rps");
    assert_eq!(
        field(Throttle::builder().window(Duration::from_millis(29))),
        "window"
    );
    assert_eq!(
        field(Throttle::builder().window(Duration::from_secs(3601))),
        "window"
    );
    let e = Throttle::builder().aggression(0.5).build().unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid aggression: 0.5 (allowed: 1 ..= 100)"
    );
}

/// Two threads admitting and recording at once: every attempt is either
/// admitted or throttled, and the window counts every refusal and record.
#[test]
fn throttle_counts_exactly_under_concurrency() {
    let t = Arc::new(Throttle::builder().seed(8).build().unwrap());
    let workers: Vec<_> = (0..2)
        .map(|w| {
            let t = Arc::clone(&t);
            thread::spawn(move || {
                let mut recorded = 0u64;
                for i in 0..50_000u64 {
                    if t.try_admit().is_ok() {
                        t.record((i + w) % 3 == 0);
                        recorded += 1;
                    }
                }
                recorded
            })
        })
        .collect();
    let recorded: u64 = workers.into_iter().map(|h| h.join().unwrap()).sum();
    let s = t.stats();
    assert_eq!(s.admitted + s.throttled, 100_000);
    assert_eq!(s.admitted, recorded);
    assert_eq!(s.requests, recorded + s.throttled);
    assert!(s.throttled > 0, "a third accepted: the throttle sheds");
}
