//! The workloads a scenario can express: demand that moves (rate ramps and
//! steps, worker counts, think time, clients joining and leaving), per-client
//! limiter settings, the adaptive rate limiter (own and keyed), overload
//! errors at random and past a soft ceiling — each checked against what the
//! model says it does.

mod common;

use adaptx_sim::{Law, Policy, Run, Scenario, Second, capacity, run};

fn sum(secs: &[Second], f: impl Fn(&Second) -> u64) -> u64 {
    secs.iter().map(f).sum()
}

/// `observed` within `k` standard deviations of a Poisson count with mean
/// `expected`.
fn poisson_close(observed: u64, expected: f64, k: f64) -> bool {
    (observed as f64 - expected).abs() <= k * expected.sqrt().max(1.0)
}

fn open(rate_lines: &str, duration: &str) -> Scenario {
    common::scenario(&format!(
        r#"
name = "open"
duration = "{duration}"
[backend]
service_time = "10ms"
[demand]
kind = "open"
{rate_lines}
"#
    ))
}

#[test]
fn demand_rate_ramp_follows_its_curve() {
    let sc = open(
        r#"rate = 50.0
[[demand.schedule]]
at = "30s"
rate = 800.0
ramp = "120s""#,
        "180s",
    );
    let r = run(&sc, Policy::Fixed(1000), 0);
    let rate = |t: f64| {
        if t < 30.0 {
            50.0
        } else if t < 150.0 {
            50.0 + 750.0 * (t - 30.0) / 120.0
        } else {
            800.0
        }
    };
    // Every 10-second block: the integral of the curve, within 4 sigma.
    for b in 0..18 {
        let expected: f64 = (0..10)
            .map(|k| rate((b * 10 + k) as f64 + 0.5))
            .sum::<f64>();
        let got = sum(&r.seconds[b * 10..b * 10 + 10], |s| s.arrivals);
        assert!(
            poisson_close(got, expected, 4.0),
            "[{}, {}) s: {got} arrivals, expected {expected}",
            b * 10,
            b * 10 + 10
        );
    }
    // Capacity follows the demand of each second (no backend ceiling): the
    // mean rate over the second.
    for (k, s) in r.seconds.iter().enumerate() {
        let want = rate(k as f64 + 0.5);
        assert!(
            (s.capacity - want).abs() < 1e-6,
            "second {k}: capacity {} != {want}",
            s.capacity
        );
    }
}

#[test]
fn a_rate_of_zero_stops_arrivals_until_the_next_change() {
    let sc = open(
        r#"rate = 100.0
[[demand.schedule]]
at = "10s"
rate = 0.0
[[demand.schedule]]
at = "20s"
rate = 200.0"#,
        "30s",
    );
    let r = run(&sc, Policy::Fixed(1000), 1);
    assert!(poisson_close(
        sum(&r.seconds[..10], |s| s.arrivals),
        1000.0,
        4.0
    ));
    assert_eq!(sum(&r.seconds[10..20], |s| s.arrivals), 0);
    assert!(poisson_close(
        sum(&r.seconds[20..], |s| s.arrivals),
        2000.0,
        4.0
    ));
}

fn closed(extra: &str, clients: u32) -> Scenario {
    common::scenario(&format!(
        r#"
name = "closed"
duration = "40s"
[backend]
service_time = "50ms"
[demand]
kind = "closed"
clients = {clients}
workers = 10
{extra}
"#
    ))
}

#[test]
fn worker_count_steps_and_ramps_set_the_concurrency() {
    let sc = closed(
        r#"
[[demand.schedule]]
at = "10s"
workers = 30
[[demand.schedule]]
at = "20s"
workers = 0
ramp = "10s""#,
        1,
    );
    let r = run(&sc, Policy::Fixed(1000), 0);
    // A flat 50 ms backend without a ceiling: in flight = workers.
    assert!((r.seconds[5].in_flight - 10.0).abs() < 1e-9);
    assert!((r.seconds[15].in_flight - 30.0).abs() < 1e-9);
    // Mid-ramp (30 -> 0 over 20-30 s): about 15 in second 25.
    let mid = r.seconds[25].in_flight;
    assert!((13.0..=17.0).contains(&mid), "in flight at 25 s: {mid}");
    // Retired workers leave after their answer: nothing after the ramp.
    assert!(
        r.seconds[31..]
            .iter()
            .all(|s| s.sent == 0 && s.in_flight == 0.0)
    );
    // Goodput follows: 10 workers / 50 ms = 200/s, 30 → 600/s.
    assert_eq!(r.seconds[5].goodput, 200);
    assert_eq!(r.seconds[15].goodput, 600);
}

#[test]
fn think_time_steps_slow_each_worker() {
    let sc = closed(
        r#"
[[demand.schedule]]
at = "10s"
think_time = "50ms""#,
        1,
    );
    let r = run(&sc, Policy::Fixed(1000), 0);
    assert_eq!(r.seconds[5].goodput, 200);
    // Each cycle is now 100 ms: 10 workers → 100/s.
    assert_eq!(r.seconds[15].goodput, 100);
}

#[test]
fn a_client_joins_and_leaves() {
    let sc = closed(
        r#"
[[client]]
[[client]]
workers = 0
[[demand.schedule]]
at = "10s"
client = 1
workers = 20
[[demand.schedule]]
at = "20s"
client = 1
workers = 0"#,
        2,
    );
    let r = run(&sc, Policy::Fixed(1000), 0);
    let c1 = &r.clients[1];
    assert_eq!(sum(&c1[..10], |s| s.sent), 0);
    assert_eq!(c1[15].goodput, 400);
    assert!(c1[21..].iter().all(|s| s.sent == 0));
    // Client 0 is untouched throughout.
    assert!(r.clients[0].iter().all(|s| s.goodput == 200));
}

#[test]
fn per_client_limiter_settings_start_each_client_at_its_limit() {
    let sc = common::scenario(
        r#"
name = "unequal"
duration = "5s"
[backend]
service_time = "50ms"
[demand]
kind = "closed"
clients = 3
workers = 100
[limiter]
sample_window = "10s"
[[client]]
limiter = { initial_limit = 5 }
[[client]]
[[client]]
limiter = { initial_limit = 80, max_limit = 90 }
"#,
    );
    let r = run(&sc, Policy::Law(Law::Aimd), 0);
    let first: Vec<u64> = r.clients.iter().map(|c| c[0].limit).collect();
    assert_eq!(first, [5, adaptx::DEFAULT_INITIAL_LIMIT as u64, 80]);
    // Each client keeps its own bounds: the third cannot exceed 90 and in
    // flight follows each limit (no ceiling, plenty of workers).
    assert_eq!(r.clients[2][0].in_flight_peak, 80);
    assert_eq!(r.clients[0][0].in_flight_peak, 5);
}

#[test]
fn random_failures_fail_that_fraction_of_accepted_requests() {
    let sc = common::scenario(
        r#"
name = "flaky"
duration = "60s"
[backend]
service_time = "20ms"
failure_rate = 0.05
[demand]
kind = "closed"
workers = 20
"#,
    );
    let r = run(&sc, Policy::Fixed(20), 0);
    let sent = sum(&r.seconds, |s| s.sent);
    let failed = sum(&r.seconds, |s| s.rejects);
    let want = sent as f64 * 0.05;
    let sd = (sent as f64 * 0.05 * 0.95).sqrt();
    assert!(
        (failed as f64 - want).abs() < 4.0 * sd,
        "{failed} failures of {sent}, expected {want}"
    );
    // They fail after their work: the backend stays full, goodput is 95 %.
    let (cap, _) = capacity(&sc, &sc.backend);
    assert!((cap - 1000.0 * 0.95).abs() < 1e-9, "capacity {cap}");
}

fn soft(limit: usize, jitter: f64) -> (Run, Scenario) {
    let sc = common::scenario(&format!(
        r#"
name = "soft"
duration = "60s"
[backend]
service_time = "50ms"
jitter = {jitter}
soft_ceiling = 20
soft_ceiling_full = 80
[demand]
kind = "closed"
workers = 100
"#
    ));
    (run(&sc, Policy::Fixed(limit), 0), sc)
}

fn failed_fraction(r: &Run) -> (f64, f64) {
    let steady = &r.seconds[10..];
    let sent = sum(steady, |s| s.sent) as f64;
    (sum(steady, |s| s.rejects) as f64 / sent, sent)
}

#[test]
fn soft_ceiling_errors_rise_linearly_with_the_requests_inside() {
    // At most 20 inside: no error at all.
    let (r, _) = soft(20, 0.0);
    assert_eq!(sum(&r.seconds, |s| s.rejects), 0);
    // The probability is drawn for each request with the count it finds
    // (itself included). On a flat backend a fixed limit of 50 sends its 50
    // requests in one batch every 50 ms, the i-th finding i inside: the mean
    // is sum over i = 21..=50 of (i - 20) / 60, over 50 = 0.155.
    let (r, _) = soft(50, 0.0);
    let (f, sent) = failed_fraction(&r);
    let want = (21..=50).map(|i| f64::from(i - 20) / 60.0).sum::<f64>() / 50.0;
    assert!(
        (f - want).abs() < 4.0 * (want * (1.0 - want) / sent).sqrt(),
        "{f} vs {want}"
    );
    // With jitter the departures spread out and each request replaces one
    // that left: it finds about 50 inside, p = (50 - 20) / 60 = 0.5.
    let (r, sc) = soft(50, 0.5);
    let (f, _) = failed_fraction(&r);
    assert!((f - 0.5).abs() < 0.03, "{f}");
    // Capacity: the best L maximises L (1 - (L - 20) / 60) / s: L = 40,
    // 40 x 2/3 / 75 ms (50 ms + half of it as jitter) = 355.6/s.
    let (cap, c_star) = capacity(&sc, &sc.backend);
    assert_eq!(c_star, Some(40.0));
    assert!((cap - 40.0 * (2.0 / 3.0) / 0.075).abs() < 1e-6, "{cap}");
}

fn rated(extra: &str, demand: &str) -> Scenario {
    common::scenario(&format!(
        r#"
name = "rated"
duration = "30s"
[backend]
service_time = "10ms"
{demand}
[rate_limiter]
{extra}
"#
    ))
}

#[test]
fn a_fixed_rate_admits_that_rate_and_sheds_the_rest() {
    // The default bucket holds a second's worth of tokens: it is spent in the
    // first second, then every token is taken as it is refilled.
    let sc = rated("", "[demand]\nkind = \"open\"\nrate = 1000.0");
    let r = run(&sc, Policy::Fixed(300), 0);
    for s in &r.seconds[1..] {
        assert!((299..=301).contains(&s.sent), "sent {}", s.sent);
        assert_eq!(s.sent + s.shed, s.arrivals);
        assert_eq!(s.limit, 300);
    }
}

#[test]
fn closed_workers_refused_by_the_rate_limiter_retry_after_its_wait() {
    let sc = rated("burst = 1", "[demand]\nkind = \"closed\"\nworkers = 50");
    let r = run(&sc, Policy::Fixed(100), 0);
    for s in &r.seconds[1..] {
        assert!((99..=101).contains(&s.sent), "sent {}", s.sent);
        assert!(s.shed > 0);
        assert_eq!(s.arrivals, s.sent + s.shed);
    }
}

#[test]
fn keyed_rate_limiter_gives_each_client_a_bucket_at_one_rate() {
    let sc = rated(
        "keyed = true",
        "[demand]\nkind = \"open\"\nclients = 2\nrate = 1000.0\n[[client]]\nrate = 100.0",
    );
    let r = run(&sc, Policy::Fixed(300), 0);
    let c0 = sum(&r.clients[0][10..], |s| s.sent);
    let c1 = sum(&r.clients[1][10..], |s| s.sent);
    // Client 0 offers 100/s, under its bucket's 300/s; client 1 is held to
    // 300/s by its own bucket.
    assert!(poisson_close(c0, 2000.0, 4.0), "client 0 sent {c0}");
    assert!((5990..=6010).contains(&c1), "client 1 sent {c1}");
    assert!(r.seconds.iter().all(|s| s.limit == 600));
}

#[test]
fn the_adaptive_rate_falls_to_capacity_under_overload() {
    let sc = common::scenario(
        r#"
name = "rate-overload"
duration = "30s"
[backend]
service_time = "20ms"
max_concurrency = 20
[demand]
kind = "open"
rate = 3000.0
[rate_limiter]
initial_rate = 3000
max_rate = 4000
"#,
    );
    let r = run(&sc, Policy::Law(Law::Rate), 0);
    // 20 / 20 ms = 1000/s; the law cuts by 20 % while more than 10 % fail.
    assert_eq!(r.seconds[0].limit, 3000);
    assert!(
        r.seconds[10..].iter().all(|s| s.limit <= 1111),
        "{:?}",
        r.seconds[10]
    );
    assert!(r.decreases >= 5);
}

#[test]
fn moving_workloads_are_deterministic() {
    let sc = common::scenario(
        r#"
name = "det"
duration = "30s"
[backend]
service_time = "20ms"
jitter = 0.2
soft_ceiling = 10
soft_ceiling_full = 40
failure_rate = 0.01
[demand]
kind = "open"
clients = 2
rate = 100.0
[[demand.schedule]]
at = "5s"
rate = 900.0
ramp = "20s"
"#,
    );
    let a = run(&sc, Policy::Law(Law::Gradient), 4);
    assert_eq!(a, run(&sc, Policy::Law(Law::Gradient), 4));
    assert_ne!(a.seconds, run(&sc, Policy::Law(Law::Gradient), 5).seconds);
}

use common::{assert_mentions, error};

const BASE: &str = r#"
name = "x"
duration = "60s"
[backend]
service_time = "50ms"
"#;

#[test]
fn bad_workload_fields_are_clear_errors() {
    let cases: [(&str, &[&str]); 10] = [
        (
            "[demand]\nkind = \"open\"\nrate = 10.0\n[[demand.schedule]]\nat = \"30s\"\nrate = 20.0\nramp = \"40s\"",
            &["demand.schedule[0].ramp", "70s", "past the end"],
        ),
        (
            "[demand]\nkind = \"open\"\nrate = 10.0\n[[demand.schedule]]\nat = \"10s\"\nclient = 2\nrate = 5.0",
            &["demand.schedule[0].client", "2", "0 ..= 0"],
        ),
        (
            "[demand]\nkind = \"closed\"\nworkers = 5\n[[demand.schedule]]\nat = \"10s\"\nrate = 5.0",
            &["demand.schedule[0].rate", "only for an open demand"],
        ),
        (
            "[demand]\nkind = \"closed\"\nworkers = 5\n[[demand.schedule]]\nat = \"10s\"",
            &["demand.schedule[0]", "changes nothing"],
        ),
        (
            "[demand]\nkind = \"closed\"\nworkers = 5\n[[client]]\n[[client]]",
            &["client", "2 entries for 1 client"],
        ),
        (
            "[demand]\nkind = \"closed\"\nworkers = 5\n[limiter]\nmax_limit = 10\n[rate_limiter]\n",
            &["limiter", "[rate_limiter]"],
        ),
        (
            "[demand]\nkind = \"closed\"\nworkers = 5\n[rate_limiter]\nmin_rate = 0",
            &["rate_limiter.min_rate", "0"],
        ),
        (
            "[demand]\nkind = \"closed\"\nworkers = 5\n[rate_limiter]\n[[band]]\nlaws = [\"aimd\"]\nmetric = \"goodput\"",
            &["band[0].laws", "aimd", "rate"],
        ),
        (
            "[demand]\nkind = \"closed\"\nworkers = 5\n[[client]]\nlimiter = { initial_limit = 0 }",
            &["client[0].limiter.initial_limit", "0"],
        ),
        (
            "[demand]\nkind = \"closed\"\nworkers = 5\n[[client]]\nrate_limiter = { burst = 3 }",
            &["client[0].rate_limiter", "only with a [rate_limiter]"],
        ),
    ];
    for (tail, parts) in cases {
        assert_mentions(&error(&format!("{BASE}{tail}")), parts);
    }
    let backend = |fields: &str| {
        error(&format!(
            "name = \"x\"\nduration = \"60s\"\n[backend]\nservice_time = \"50ms\"\n{fields}\n[demand]\nkind = \"closed\"\nworkers = 5"
        ))
    };
    let m = backend("failure_rate = 1.5");
    assert!(m.contains("backend.failure_rate: 1.5"), "{m}");
    let m = backend("soft_ceiling = 20");
    assert!(m.contains("backend.soft_ceiling_full: required"), "{m}");
    let m = backend("soft_ceiling = 20\nsoft_ceiling_full = 20");
    assert!(
        m.contains("backend.soft_ceiling_full: 20: expected above soft_ceiling (20)"),
        "{m}"
    );
}

#[test]
fn keyed_clients_share_one_adaptive_rate() {
    // Client 1 overloads a 1000/s backend; client 0 sends 50/s. With one
    // keyed limiter both keys run at the one rate that falls; with a limiter
    // each, the rates move apart (each judges its own interval).
    let text = |keyed: bool| {
        format!(
            r#"
name = "keyed"
duration = "20s"
[backend]
service_time = "20ms"
max_concurrency = 20
[demand]
kind = "open"
clients = 2
rate = 3000.0
[[client]]
rate = 50.0
[rate_limiter]
initial_rate = 3000
max_rate = 4000
keyed = {keyed}
"#
        )
    };
    let shared = run(&common::scenario(&text(true)), Policy::Law(Law::Rate), 0);
    assert!(shared.clients[1][10].limit < 3000);
    for k in 0..20 {
        assert_eq!(
            shared.clients[0][k].limit, shared.clients[1][k].limit,
            "second {k}"
        );
    }
    let own = run(&common::scenario(&text(false)), Policy::Law(Law::Rate), 0);
    assert!((0..20).any(|k| own.clients[0][k].limit != own.clients[1][k].limit));
}

#[test]
fn the_work_estimate_bounds_demand_that_moves() {
    use adaptx_sim::work;
    let cases = [
        // An open ramp: the estimate must take the top of the ramp.
        (
            open(
                "rate = 10.0\n[[demand.schedule]]\nat = \"5s\"\nrate = 5000.0\nramp = \"5s\"",
                "20s",
            ),
            Policy::Fixed(1000),
        ),
        // Workers that join later, with a shorter think time.
        (
            closed(
                "think_time = \"100ms\"\n[[client]]\nworkers = 1\n[[demand.schedule]]\nat = \"5s\"\nworkers = 400\nthink_time = \"0ms\"",
                1,
            ),
            Policy::Fixed(1000),
        ),
        // Closed workers retrying behind a rate limiter.
        (
            rated("", "[demand]\nkind = \"closed\"\nworkers = 200"),
            Policy::Fixed(500),
        ),
    ];
    for (sc, policy) in cases {
        let r = run(&sc, policy, 0);
        let est = work::run_events(&sc, None);
        let real = r.requests() + r.seconds.iter().map(|s| s.shed).sum::<u64>();
        assert!(
            real as f64 <= est,
            "{}: {real} requests and refusals, estimate {est}",
            sc.name
        );
    }
}

#[test]
fn workload_fields_are_bounded() {
    let cases: [(&str, &[&str]); 5] = [
        (
            "[demand]\nkind = \"open\"\nrate = 10.0\n[[demand.schedule]]\nat = \"10s\"\nrate = 1e300",
            &["demand.schedule[0].rate", "1e300", "1e9"],
        ),
        (
            "[demand]\nkind = \"closed\"\nworkers = 5\n[[demand.schedule]]\nat = \"10s\"\nworkers = 4294967295",
            &["demand.schedule[0].workers", "4294967295", "1000000"],
        ),
        (
            "[demand]\nkind = \"closed\"\nclients = 3\nworkers = 5\n[[demand.schedule]]\nat = \"10s\"\nworkers = 900000",
            &["demand", "2700000 workers", "1000000"],
        ),
        (
            "[demand]\nkind = \"closed\"\nworkers = 5\n[[client]]\nthink_time = \"2h\"",
            &["client[0].think_time", "7200s", "3600s"],
        ),
        (
            "[demand]\nkind = \"closed\"\nworkers = 5\n[[client]]\nlimiter = { max_limit = 2000000 }",
            &["client[0].limiter.max_limit", "2000000", "1000000"],
        ),
    ];
    for (tail, parts) in cases {
        assert_mentions(&error(&format!("{BASE}{tail}")), parts);
    }
    let backend = error(&format!(
        "{BASE}soft_ceiling = 4294967295\nsoft_ceiling_full = 4294967295\n[demand]\nkind = \"closed\"\nworkers = 5"
    ));
    assert!(
        backend.contains("backend.soft_ceiling: 4294967295"),
        "{backend}"
    );
}

/// The `throttle` policy is Google SRE client-side throttling: each client
/// refuses requests locally until it sends `k = 2` per request the backend
/// accepts. Against a quota of 300/s offered 1 200/s, it sends ~600/s, the
/// quota refuses half of them, and the other 600/s are refused locally;
/// the recorded "limit" is that sending rate.
#[test]
fn throttle_policy_sends_k_requests_per_accept() {
    let sc = common::scenario(
        r#"
name = "quota"
duration = "90s"
[backend]
service_time = "10ms"
rate_limit = 300.0
[demand]
kind = "open"
rate = 1200.0
[rate_limiter]
initial_rate = 1200
"#,
    );
    let r = run(&sc, Policy::Law(Law::Throttle), 3);
    let steady = &r.seconds[20..];
    let (sent, served) = (sum(steady, |s| s.sent), sum(steady, |s| s.goodput));
    let (rejects, shed) = (sum(steady, |s| s.rejects), sum(steady, |s| s.shed));
    let arrivals = sum(steady, |s| s.arrivals);
    let per_accept = sent as f64 / served as f64;
    assert!(
        (1.9..=2.1).contains(&per_accept),
        "sent {sent} per served {served}: {per_accept}"
    );
    assert!(
        poisson_close(served, 300.0 * steady.len() as f64, 4.0),
        "served {served}"
    );
    assert!(
        poisson_close(rejects, served as f64, 6.0),
        "rejects {rejects}, served {served}"
    );
    assert_eq!(
        arrivals,
        sent + shed,
        "every arrival is sent or refused locally"
    );
    let limit = steady.iter().map(|s| s.limit as f64).sum::<f64>() / steady.len() as f64;
    assert!(
        (540.0..=660.0).contains(&limit),
        "mean recorded rate {limit}"
    );
}
