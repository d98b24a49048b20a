//! The capped oracle (the best fixed limit whose steady overload is at most
//! 2 %) beside the plain one, and the bands that read them.

mod common;

use adaptx_sim::suite::{self, ORACLE_OVERLOAD_CAP, ORACLE_TOLERANCE, Options};
use adaptx_sim::{Law, Policy, Run};

/// A rate limit that rejects cheaply: a fixed limit above C* = 20 keeps the
/// rate limiter full (goodput 200/s) by sending far more than it takes, and
/// fails most of it; a limit that keeps overload under 2 % stays below C*,
/// where the jitter (an exponential term as large as the base) leaves the
/// rate limit's trailing second short some of the time.
const RATE_LIMIT: &str = r#"
name = "rate-limit"
duration = "40s"
[backend]
service_time = "50ms"
jitter = 1.0
rate_limit = 200.0
reject_latency = "20ms"
[demand]
kind = "closed"
workers = 30
"#;

fn limit(r: &Run) -> usize {
    match r.policy {
        Policy::Fixed(l) => l,
        other => panic!("an oracle is a fixed limit, not {other:?}"),
    }
}

#[test]
fn the_capped_oracle_gives_up_goodput_to_stay_under_the_cap() {
    let sc = common::scenario(RATE_LIMIT);
    let (b, _) = suite::baselines(&sc, 0, false);
    let capped = b.capped_oracle.as_ref().expect("a limit within the cap");
    assert!(
        b.oracle.overload_fraction() > 0.3,
        "plain oracle: fixed {}, overload {}",
        limit(&b.oracle),
        b.oracle.overload_fraction()
    );
    assert!(capped.overload_fraction() <= ORACLE_OVERLOAD_CAP);
    assert!(limit(capped) < limit(&b.oracle));
    assert!(capped.steady_goodput() < b.oracle.steady_goodput() * (1.0 - ORACLE_TOLERANCE));
    // The rule: the smallest limit within the cap whose goodput is within
    // the tolerance of the best within the cap, among the limits tried; the
    // limits on either side of it were tried.
    let within: Vec<_> = b
        .sweep
        .iter()
        .filter(|p| p.overload_fraction <= ORACLE_OVERLOAD_CAP)
        .collect();
    let top = within.iter().map(|p| p.goodput).fold(0.0, f64::max);
    let first = within
        .iter()
        .find(|p| p.goodput >= top * (1.0 - ORACLE_TOLERANCE))
        .unwrap();
    assert_eq!(first.limit, limit(capped));
    for l in [limit(capped) - 1, limit(capped) + 1] {
        assert!(b.sweep.iter().any(|p| p.limit == l), "{l} not tried");
    }
}

#[test]
fn bands_read_the_oracles_of_their_own_seed() {
    let text = format!(
        "{RATE_LIMIT}\n{}",
        r#"
[[band]]
laws = ["aimd"]
metric = "goodput_vs_oracle"
[[band]]
laws = ["aimd"]
metric = "goodput_vs_capped_oracle"
"#
    );
    let sc = common::scenario(&text);
    let entries = vec![suite::Entry {
        scenario: sc.clone(),
        shown: true,
    }];
    let options = Options {
        laws: vec![Law::Aimd],
        seeds: vec![0, 1, 2],
        threads: 2,
        ..Options::default()
    };
    let s = suite::run(entries, &options);
    let o = &s.outcomes[0];
    assert!(o.baselines.is_none(), "not asked for");
    assert_eq!(o.oracles.keys().copied().collect::<Vec<_>>(), [0, 1, 2]);
    let checks: Vec<_> = s.checks().collect();
    assert_eq!(checks.len(), 2);
    for (band, c) in checks.iter().enumerate() {
        assert!(c.failed_seeds.is_empty(), "{:?}", c.failed_seeds);
        // The values are the law's goodput over each seed's oracle's.
        let values: Vec<f64> = options
            .seeds
            .iter()
            .map(|&seed| {
                let b = o.oracles[&seed].as_ref().unwrap();
                let oracle = if band == 0 {
                    &b.oracle
                } else {
                    b.capped_oracle.as_ref().unwrap()
                };
                assert_eq!(oracle.seed, seed);
                o.run(Law::Aimd, seed).unwrap().steady_goodput() / oracle.steady_goodput()
            })
            .collect();
        for (v, seed) in [c.worst, c.median] {
            assert!(
                (v - values[seed as usize]).abs() < 1e-12,
                "{values:?} {v} {seed}"
            );
        }
    }
    // Without such a band, no sweep runs.
    let plain = vec![suite::Entry {
        scenario: common::scenario(RATE_LIMIT),
        shown: true,
    }];
    let s = suite::run(plain, &options);
    assert!(s.outcomes[0].oracles.is_empty());
}
