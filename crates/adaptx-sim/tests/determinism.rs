//! A run is a pure function of the scenario, the policy and the seed.

mod common;

use adaptx_sim::{Law, Policy, Scenario, run};

fn hard_limit(duration: &str) -> Scenario {
    common::scenario(&format!(
        r#"
name = "det"
duration = "{duration}"
[backend]
service_time = "50ms"
jitter = 0.1
max_concurrency = 20
client_error_rate = 0.05
[demand]
kind = "closed"
workers = 100
"#
    ))
}

#[test]
fn same_seed_gives_identical_series() {
    let sc = hard_limit("40s");
    for law in Law::ALL {
        let a = run(&sc, Policy::Law(law), 3);
        let b = run(&sc, Policy::Law(law), 3);
        assert_eq!(a.seconds.len(), 40);
        assert_eq!(a, b, "{law}: two runs with seed 3 differ");
    }
}

#[test]
fn different_seeds_give_different_series() {
    let sc = hard_limit("40s");
    let a = run(&sc, Policy::Law(Law::Aimd), 1);
    let b = run(&sc, Policy::Law(Law::Aimd), 2);
    assert_ne!(a.seconds, b.seconds);
}

#[test]
fn open_demand_and_several_clients_are_deterministic() {
    let sc = common::scenario(
        r#"
name = "det-open"
duration = "20s"
[backend]
service_time = "20ms"
jitter = 0.5
workers = 4
[demand]
kind = "open"
clients = 3
rate = 150.0
"#,
    );
    let a = run(&sc, Policy::Law(Law::Gradient), 9);
    let b = run(&sc, Policy::Law(Law::Gradient), 9);
    assert_eq!(a, b);
    assert_eq!(a.clients.len(), 3);
    let c = run(&sc, Policy::Law(Law::Gradient), 10);
    assert_ne!(a.seconds, c.seconds);
}

#[test]
fn runs_on_other_threads_agree() {
    // The limiter spreads its counters over per-thread stripes; the result
    // must not depend on which thread runs the simulation.
    let sc = hard_limit("20s");
    let here = run(&sc, Policy::Law(Law::Vegas), 5);
    let there = std::thread::scope(|s| {
        s.spawn(|| run(&sc, Policy::Law(Law::Vegas), 5))
            .join()
            .unwrap()
    });
    assert_eq!(here, there);
}
