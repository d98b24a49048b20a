//! Band metrics over a time range, per client, `worst_goodput` and
//! `time_until`, each against a hand-built run with hand-computed values.
//!
//! The run has 10 seconds (steady from 5 s) and two clients:
//!
//! | second | 0–4 | 5 | 6 | 7 | 8 | 9 |
//! |---|---|---|---|---|---|---|
//! | client 0 goodput (capacity 10) | 5 | 8 | 2 | 8 | 8 | 8 |
//! | client 0 rejects | 0 | 2 | 8 | 2 | 0 | 0 |
//! | client 0 limit | k + 1 | 6 | 7 | 8 | 9 | 10 |
//! | client 1 goodput (capacity 10) | 5 | 10 | 10 | 10 | 10 | 10 |
//! | client 1 shed | 0 | 5 | 5 | 0 | 0 | 0 |
//! | client 1 limit | 4 | 4 | 4 | 4 | 4 | 4 |
//! | total successes' latencies, ns | — | 1..=100 | 201..=250 | — | — | — |
//!
//! Sent = goodput + rejects; arrivals = sent + shed.

mod common;

use adaptx_sim::band::{self, Refs};
use adaptx_sim::{BandSpec, Latencies, Policy, Run, Second};

fn sec(goodput: u64, rejects: u64, shed: u64, limit: u64) -> Second {
    Second {
        limit,
        limit_min: limit,
        limit_max: limit,
        limit_median: limit,
        goodput,
        rejects,
        sent: goodput + rejects,
        shed,
        arrivals: goodput + rejects + shed,
        capacity: 10.0,
        ..Second::default()
    }
}

/// The run of the table above, with client goodputs `g0` and `g1`.
fn build(g0: [u64; 10], g1: [u64; 10]) -> Run {
    let rejects0 = [0, 0, 0, 0, 0, 2, 8, 2, 0, 0];
    let shed1 = [0, 0, 0, 0, 0, 5, 5, 0, 0, 0];
    let c0: Vec<Second> = (0..10)
        .map(|k| sec(g0[k], rejects0[k], 0, k as u64 + 1))
        .collect();
    let c1: Vec<Second> = (0..10).map(|k| sec(g1[k], 0, shed1[k], 4)).collect();
    let seconds = (0..10)
        .map(|k| {
            let (a, b) = (&c0[k], &c1[k]);
            Second {
                limit: a.limit + b.limit,
                limit_min: a.limit_min + b.limit_min,
                limit_max: a.limit_max.max(b.limit_max),
                limit_median: a.limit_median + b.limit_median,
                goodput: a.goodput + b.goodput,
                rejects: a.rejects + b.rejects,
                sent: a.sent + b.sent,
                shed: a.shed + b.shed,
                arrivals: a.arrivals + b.arrivals,
                capacity: 20.0,
                latency: match k {
                    5 => Latencies::from_values(1..=100),
                    6 => Latencies::from_values(201..=250),
                    _ => Latencies::default(),
                },
                ..Second::default()
            }
        })
        .collect();
    Run {
        scenario: "hand".into(),
        policy: Policy::Fixed(1),
        seed: 0,
        seconds,
        clients: vec![c0, c1],
        classes: Vec::new(),
        steady_from: 5,
        steady_p50_ns: None,
        steady_p99_ns: None,
        decreases: 0,
        initial_limit: 5,
        limit_bounds: (1, 100),
    }
}

fn hand() -> Run {
    build(
        [5, 5, 5, 5, 5, 8, 2, 8, 8, 8],
        [5, 5, 5, 5, 5, 10, 10, 10, 10, 10],
    )
}

/// A band parsed (and validated) from a 10 s, two-client scenario.
fn band(toml: &str) -> BandSpec {
    band_in("10s", toml)
}

/// A band parsed from a two-client scenario of `duration`.
fn band_in(duration: &str, toml: &str) -> BandSpec {
    let text = format!(
        r#"
name = "t"
duration = "{duration}"
[backend]
service_time = "50ms"
[demand]
kind = "closed"
clients = 2
workers = 10
[[band]]
laws = ["aimd"]
{toml}
"#
    );
    common::scenario(&text).bands.remove(0)
}

fn value(toml: &str) -> f64 {
    band::metric(&hand(), &band(toml), &Refs::default())
}

#[track_caller]
fn close(got: f64, want: f64) {
    assert!(
        (got - want).abs() < 1e-12 || got == want,
        "got {got}, want {want}"
    );
}

#[test]
fn goodput_over_a_range_and_per_client() {
    // Steady: (18 + 12 + 18 + 18 + 18) / (5 × 20).
    close(value(r#"metric = "goodput""#), 0.84);
    // Client 0, steady: (8 + 2 + 8 + 8 + 8) / (5 × 10).
    close(value("metric = \"goodput\"\nclient = 0"), 0.68);
    close(
        value("metric = \"goodput\"\nfrom = \"0s\"\nto = \"5s\""),
        0.5,
    );
    // Every second overlapping [5.5 s, 7.2 s): 5, 6 and 7.
    close(
        value("metric = \"goodput\"\nfrom = \"5.5s\"\nto = \"7.2s\""),
        48.0 / 60.0,
    );
    // `to` alone: from the start of the steady interval.
    close(value("metric = \"goodput\"\nto = \"6s\""), 0.9);
}

#[test]
fn overload_shed_and_limit_over_a_range_and_per_client() {
    // Steady: 12 rejects of 96 sent; client 0: 12 of 46.
    close(value(r#"metric = "overload_fraction""#), 0.125);
    close(
        value("metric = \"overload_fraction\"\nclient = 0"),
        12.0 / 46.0,
    );
    close(value("metric = \"overload_fraction\"\nfrom = \"8s\""), 0.0);
    // Whole run by default: 10 shed of 156 arrivals; client 1: 10 of 85.
    close(value(r#"metric = "shed_fraction""#), 10.0 / 156.0);
    close(value("metric = \"shed_fraction\"\nclient = 1"), 10.0 / 85.0);
    close(
        value("metric = \"shed_fraction\"\nfrom = \"6s\"\nto = \"7s\""),
        5.0 / 25.0,
    );
    // Steady: client 0's 6..=10 (mean 8) + client 1's 4.
    close(value(r#"metric = "mean_limit""#), 12.0);
    close(
        value("metric = \"mean_limit\"\nclient = 0\nfrom = \"0s\"\nto = \"3s\""),
        2.0,
    );
    close(value("metric = \"max_limit\"\nclient = 1"), 4.0);
    close(value("metric = \"max_limit\"\nto = \"3s\""), 4.0);
    close(value("metric = \"max_limit\"\nfrom = \"7s\""), 10.0);
}

#[test]
fn percentiles_merge_the_range_not_its_seconds() {
    // Steady: 1..=100 and 201..=250, 150 values: the 75th and the 149th
    // (lower nearest rank). The mean of the two seconds' medians would be
    // (50 + 225) / 2.
    close(value(r#"metric = "p50_ms""#), 75e-6);
    close(value(r#"metric = "p99_ms""#), 249e-6);
    close(
        value("metric = \"p50_ms\"\nfrom = \"6s\"\nto = \"7s\""),
        225e-6,
    );
    close(
        value("metric = \"p99_ms\"\nfrom = \"6s\"\nto = \"7s\""),
        250e-6,
    );
    assert!(value("metric = \"p50_ms\"\nfrom = \"7s\"").is_nan());
}

#[test]
fn client_shares_over_a_range() {
    // Steady: 34 and 50, fair share 42.
    close(value(r#"metric = "client_share_min""#), 34.0 / 42.0);
    close(value(r#"metric = "client_share_max""#), 50.0 / 42.0);
    close(
        value("metric = \"client_share_min\"\nfrom = \"0s\"\nto = \"5s\""),
        1.0,
    );
}

#[test]
fn worst_goodput_is_the_lowest_window() {
    // Steady 2 s windows: 30/40, 30/40, 36/40, 36/40.
    close(value("metric = \"worst_goodput\"\nwindow = \"2s\""), 0.75);
    close(value("metric = \"worst_goodput\"\nwindow = \"1s\""), 0.6);
    close(
        value("metric = \"worst_goodput\"\nwindow = \"1s\"\nclient = 0"),
        0.2,
    );
    close(value("metric = \"worst_goodput\"\nwindow = \"5s\""), 0.84);
    // Over the whole run, the first 3 s: 30/60.
    close(
        value("metric = \"worst_goodput\"\nwindow = \"3s\"\nfrom = \"0s\""),
        0.5,
    );
    // [7 s, 10 s): 0.9 in every window.
    close(
        value("metric = \"worst_goodput\"\nwindow = \"2s\"\nfrom = \"7s\""),
        0.9,
    );
}

#[test]
fn time_until_a_measure_holds() {
    // From 4.5 s: second 4 (0.5), then second 5 (0.9) ends at 6 s.
    close(
        value(
            "metric = \"time_until\"\nafter = \"4.5s\"\nholds = { measure = \"goodput\", min = 0.9 }",
        ),
        1.5,
    );
    // 2 s windows from second 4: 0.7, 0.75, 0.75, then [7, 9) 0.9.
    close(
        value(
            "metric = \"time_until\"\nafter = \"4.5s\"\nwindow = \"2s\"\nholds = { measure = \"goodput\", min = 0.9 }",
        ),
        4.5,
    );
    // No overload from second 8 on.
    close(
        value(
            "metric = \"time_until\"\nafter = \"5s\"\nholds = { measure = \"overload_fraction\", max = 0.0 }",
        ),
        4.0,
    );
    // Total limit 12 first at second 7 (8 + 4).
    close(
        value(
            "metric = \"time_until\"\nafter = \"0s\"\nholds = { measure = \"mean_limit\", min = 12 }",
        ),
        8.0,
    );
    // Both bounds: client 0's limit in [3, 3] at second 2.
    close(
        value(
            "metric = \"time_until\"\nafter = \"0s\"\nclient = 0\nholds = { measure = \"mean_limit\", min = 3, max = 3 }",
        ),
        3.0,
    );
    assert_eq!(
        value(
            "metric = \"time_until\"\nafter = \"0s\"\nclient = 0\nholds = { measure = \"mean_limit\", max = 0.5 }",
        ),
        f64::INFINITY
    );
    // p99 over 1 s windows: second 5's is 99 ns.
    close(
        value(
            "metric = \"time_until\"\nafter = \"1s\"\nholds = { measure = \"p99_ms\", max = 0.001 }",
        ),
        5.0,
    );
}

#[test]
fn time_to_limit_is_time_until_a_limit() {
    let until = value(
        "metric = \"time_until\"\nafter = \"0s\"\nholds = { measure = \"mean_limit\", min = 12 }",
    );
    close(
        value("metric = \"time_to_limit_at_least\"\nafter = \"0s\"\nthreshold = 12"),
        until,
    );
    close(
        value("metric = \"time_to_limit_at_least\"\nafter = \"0s\"\nthreshold = 5\nclient = 0"),
        5.0,
    );
    close(
        value("metric = \"time_to_limit_at_most\"\nafter = \"2s\"\nthreshold = 9"),
        1.0,
    );
}

#[test]
fn time_to_limit_at_most_reads_the_limit_median_not_the_closing_one() {
    let at_most =
        band("metric = \"time_to_limit_at_most\"\nafter = \"2s\"\nthreshold = 5\nclient = 0");
    let at_least =
        band("metric = \"time_to_limit_at_least\"\nafter = \"0s\"\nthreshold = 9\nclient = 0");
    let mut r = hand();
    let c0 = &mut r.clients[0];
    // Seconds 2 and 3 close on one-window dips (to 1 and 4) while resting at
    // 7 and 6: not yet brought down. Second 4 rests at 5 and closes on a
    // probe of 6: down, at the end of second 4 (5 s, 3 s after `after`).
    c0[2].limit_median = 7;
    c0[2].limit = 1;
    c0[3].limit_median = 6;
    c0[4].limit_median = 5;
    c0[4].limit = 6;
    close(band::metric(&r, &at_most, &Refs::default()), 3.0);
    // Reached is an instant: second 3 closing at 9 while resting at 6
    // reached 9 (4 s).
    r.clients[0][3].limit = 9;
    close(band::metric(&r, &at_least, &Refs::default()), 4.0);
}

#[test]
fn recovery_time_per_client() {
    // Client 0: baseline [0, 5) mean 5; 0.8 × 5 = 4 reached again after 6 s
    // at second 7 (8), not at second 6 (2).
    close(
        value(
            "metric = \"recovery_time\"\nafter = \"6s\"\nfraction = 0.8\nbaseline_from = \"0s\"\nbaseline_to = \"5s\"\nclient = 0",
        ),
        2.0,
    );
}

#[test]
fn goodput_against_the_oracles() {
    let run = hand();
    let oracle = build([10; 10], [10; 10]);
    let capped = build([8; 10], [8; 10]);
    let refs = Refs {
        oracle: Some(&oracle),
        capped_oracle: Some(&capped),
        ..Refs::default()
    };
    let v = |toml: &str| band::metric(&run, &band(toml), &refs);
    close(v(r#"metric = "goodput_vs_oracle""#), 84.0 / 100.0);
    close(v(r#"metric = "goodput_vs_capped_oracle""#), 84.0 / 80.0);
    close(v("metric = \"goodput_vs_oracle\"\nclient = 0"), 34.0 / 50.0);
    close(
        v("metric = \"goodput_vs_oracle\"\nfrom = \"6s\"\nto = \"7s\""),
        12.0 / 20.0,
    );
    // No oracle: no value.
    assert!(value(r#"metric = "goodput_vs_oracle""#).is_nan());
}

/// On a real run, the steady percentiles merged from the per-second
/// histograms are the run's own steady percentiles.
#[test]
fn merged_steady_percentiles_match_the_run() {
    let sc = adaptx_sim::suite::builtin_named("05-queueing.toml").unwrap();
    let run = adaptx_sim::run(&sc, Policy::Law(adaptx_sim::Law::Aimd), 3);
    let p50 = band::metric(&run, &band(r#"metric = "p50_ms""#), &Refs::default());
    let p99 = band::metric(&run, &band(r#"metric = "p99_ms""#), &Refs::default());
    assert_eq!(p50, run.steady_p50_ns.unwrap() as f64 / 1e6);
    assert_eq!(p99, run.steady_p99_ns.unwrap() as f64 / 1e6);
    // Over one second: that second's own percentiles.
    let k = 100;
    let one = band_in(
        "180s",
        &format!("metric = \"p99_ms\"\nfrom = \"{k}s\"\nto = \"{}s\"", k + 1),
    );
    assert_eq!(
        band::metric(&run, &one, &Refs::default()),
        run.seconds[k].p99_ns.unwrap() as f64 / 1e6
    );
}
