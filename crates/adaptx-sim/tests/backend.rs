//! The backend models, measured through whole runs with fixed limits.

mod common;

use adaptx_sim::{Law, Policy, Run, Second, run};

/// Mean of `f` over seconds `[from, to)`.
fn mean(r: &Run, from: usize, to: usize, f: impl Fn(&Second) -> u64) -> f64 {
    let s = &r.seconds[from..to];
    s.iter().map(f).sum::<u64>() as f64 / s.len() as f64
}

fn close(actual: f64, expected: f64, rel: f64) {
    assert!(
        (actual - expected).abs() <= rel * expected,
        "{actual} is not within {} % of {expected}",
        rel * 100.0
    );
}

#[test]
fn processor_sharing_serves_c_over_service_time() {
    // 4 workers, 100 ms: throughput 40/s whatever the load; with 40 inside
    // each request takes 40 / 4 × 100 ms = 1 s.
    let sc = common::scenario(
        r#"
name = "ps"
duration = "20s"
[backend]
service_time = "100ms"
workers = 4
[demand]
kind = "closed"
workers = 40
timeout = "10s"
"#,
    );
    let r = run(&sc, Policy::Fixed(40), 0);
    close(mean(&r, 5, 20, |s| s.goodput), 40.0, 0.01);
    assert_eq!(r.steady_p50_ns, Some(1_000_000_000));
    close(r.goodput_fraction(), 1.0, 0.01);
    // Below the workers nothing is shared: latency is the service time.
    let r = run(&sc, Policy::Fixed(4), 0);
    assert_eq!(r.steady_p99_ns, Some(100_000_000));
    close(mean(&r, 5, 20, |s| s.goodput), 40.0, 0.01);
}

#[test]
fn processor_sharing_with_jitter_keeps_throughput() {
    let sc = common::scenario(
        r#"
name = "ps-jitter"
duration = "60s"
[backend]
service_time = "50ms"
jitter = 0.5
workers = 10
[demand]
kind = "closed"
workers = 100
timeout = "10s"
"#,
    );
    let r = run(&sc, Policy::Fixed(100), 1);
    // Mean work 75 ms: 10 / 0.075 = 133.3/s.
    close(mean(&r, 10, 60, |s| s.goodput), 133.3, 0.03);
}

#[test]
fn reject_answers_fast_and_does_not_occupy() {
    // 5 slots, 100 ms flat: 50/s served. The other 5 permits cycle through
    // 2 ms overload errors: 5 × 500 = 2500/s.
    let sc = common::scenario(
        r#"
name = "reject"
duration = "10s"
[backend]
service_time = "100ms"
max_concurrency = 5
over_limit = "reject"
[demand]
kind = "closed"
workers = 10
"#,
    );
    let r = run(&sc, Policy::Fixed(10), 0);
    close(mean(&r, 2, 10, |s| s.goodput), 50.0, 0.001);
    close(mean(&r, 2, 10, |s| s.rejects), 2500.0, 0.01);
    assert_eq!(r.seconds.iter().map(|s| s.timeouts).sum::<u64>(), 0);
    // Rejections are not successes: their 2 ms latency stays out of p99.
    assert_eq!(r.steady_p99_ns, Some(100_000_000));
}

#[test]
fn drop_is_never_answered_and_times_out() {
    // The 5 permits beyond the ceiling are each stuck for the 1 s timeout.
    let sc = common::scenario(
        r#"
name = "drop"
duration = "10s"
[backend]
service_time = "100ms"
max_concurrency = 5
over_limit = "drop"
[demand]
kind = "closed"
workers = 10
timeout = "1s"
"#,
    );
    let r = run(&sc, Policy::Fixed(10), 0);
    close(mean(&r, 2, 10, |s| s.goodput), 50.0, 0.001);
    close(mean(&r, 2, 10, |s| s.timeouts), 5.0, 0.001);
    assert_eq!(r.seconds.iter().map(|s| s.rejects).sum::<u64>(), 0);
}

#[test]
fn a_slow_answer_times_out_but_still_occupies_the_backend() {
    // 2 s of work, 1 s timeout: every request fails. The abandoned requests
    // stay inside until their work is done, so the retries sent between 1 s
    // and 2 s find the backend full and are rejected.
    let sc = common::scenario(
        r#"
name = "slow"
duration = "10s"
[backend]
service_time = "2s"
max_concurrency = 3
[demand]
kind = "closed"
workers = 3
timeout = "1s"
"#,
    );
    let r = run(&sc, Policy::Fixed(3), 0);
    assert_eq!(r.seconds.iter().map(|s| s.goodput).sum::<u64>(), 0);
    // Accepted at 0, 2, 4, 6, 8 s, timed out a second later: 3 × 5.
    assert_eq!(r.seconds.iter().map(|s| s.timeouts).sum::<u64>(), 15);
    // Between, 3 permits cycle through 2 ms rejections for 1 s, 5 times.
    let rejects: u64 = r.seconds.iter().map(|s| s.rejects).sum();
    assert_eq!(rejects, 5 * 3 * 500);
}

#[test]
fn rate_limit_caps_accepted_starts() {
    // 30 accepted per trailing second; 10 permits at 10 ms would send far
    // more; the rest are rejected after 2 ms.
    let sc = common::scenario(
        r#"
name = "rate"
duration = "20s"
[backend]
service_time = "10ms"
rate_limit = 30
[demand]
kind = "closed"
workers = 10
"#,
    );
    let r = run(&sc, Policy::Fixed(10), 0);
    close(mean(&r, 2, 20, |s| s.goodput), 30.0, 0.04);
    assert!(mean(&r, 2, 20, |s| s.rejects) > 1000.0);
    let (cap, c_star) = adaptx_sim::capacity(&sc, &sc.backend);
    assert_eq!(cap, 30.0);
    assert_eq!(c_star, Some(0.3));
}

#[test]
fn client_errors_are_successes_for_the_limiter_but_not_goodput() {
    let sc = common::scenario(
        r#"
name = "client-errors"
duration = "60s"
[backend]
service_time = "50ms"
client_error_rate = 0.2
[demand]
kind = "closed"
workers = 10
[limiter]
max_limit = 10
"#,
    );
    let r = run(&sc, Policy::Law(Law::Aimd), 0);
    let good: u64 = r.seconds.iter().map(|s| s.goodput).sum();
    let bad: u64 = r.seconds.iter().map(|s| s.client_errors).sum();
    close(bad as f64 / (good + bad) as f64, 0.2, 0.05);
    // No overload signal reached the law: the limit never went down.
    assert_eq!(r.decreases, 0);
    // Capacity counts goodput only.
    close(r.seconds[30].capacity, 200.0 * 0.8, 1e-9);
}

#[test]
fn open_demand_is_poisson_and_sheds_without_a_permit() {
    let text = r#"
name = "open"
duration = "100s"
[backend]
service_time = "100ms"
[demand]
kind = "open"
rate = 100.0
"#;
    let sc = common::scenario(text);
    let r = run(&sc, Policy::Fixed(100), 0);
    let arrivals: u64 = r.seconds.iter().map(|s| s.arrivals).sum();
    close(arrivals as f64, 10_000.0, 0.03);
    assert_eq!(r.seconds.iter().map(|s| s.shed).sum::<u64>(), 0);
    // One permit, 100 ms each: at most 10/s get in, the rest are shed.
    let r = run(&sc, Policy::Fixed(1), 0);
    let shed: u64 = r.seconds.iter().map(|s| s.shed).sum();
    let sent: u64 = r.seconds.iter().map(|s| s.sent).sum();
    assert!(sent <= 1000 && sent > 800, "{sent}");
    assert_eq!(
        shed + sent,
        r.seconds.iter().map(|s| s.arrivals).sum::<u64>()
    );
}

#[test]
fn think_time_slows_a_closed_worker() {
    let sc = common::scenario(
        r#"
name = "think"
duration = "10s"
[backend]
service_time = "100ms"
[demand]
kind = "closed"
workers = 10
think_time = "100ms"
"#,
    );
    let r = run(&sc, Policy::Fixed(10), 0);
    close(mean(&r, 1, 10, |s| s.goodput), 50.0, 0.001);
}

#[test]
fn schedule_changes_the_backend_at_its_time() {
    let sc = common::scenario(
        r#"
name = "schedule"
duration = "20s"
[backend]
service_time = "50ms"
max_concurrency = 10
[[schedule]]
at = "10s"
service_time = "100ms"
max_concurrency = 5
[demand]
kind = "closed"
workers = 10
"#,
    );
    let r = run(&sc, Policy::Fixed(5), 0);
    close(mean(&r, 2, 10, |s| s.goodput), 100.0, 0.001);
    close(mean(&r, 12, 20, |s| s.goodput), 50.0, 0.001);
    assert_eq!(r.seconds[5].capacity, 200.0);
    assert_eq!(r.seconds[15].capacity, 50.0);
    assert_eq!(r.seconds[5].c_star, Some(10.0));
    assert_eq!(r.seconds[15].c_star, Some(5.0));
    // Steady starts 30 s after the last change, capped at the last second.
    assert_eq!(r.steady_from, 19);
}

#[test]
fn the_limit_stays_within_bounds_and_in_flight_under_it() {
    let sc = common::scenario(
        r#"
name = "bounds"
duration = "60s"
[backend]
service_time = "20ms"
jitter = 1.0
max_concurrency = 8
[demand]
kind = "closed"
workers = 50
[limiter]
min_limit = 2
max_limit = 30
"#,
    );
    for law in Law::ALL {
        let r = run(&sc, Policy::Law(law), 4);
        for (t, s) in r.seconds.iter().enumerate() {
            assert_eq!(s.violations, 0, "{law} at {t} s");
            assert!((2..=30).contains(&s.limit), "{law} at {t} s: {}", s.limit);
            assert!(s.in_flight_peak <= 30, "{law} at {t} s");
        }
    }
}
