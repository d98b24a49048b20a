//! How many simulated requests per second of real time the engine sustains
//! on one core. Meaningful in release:
//! `cargo test --release -p adaptx-sim --test speed -- --nocapture`.

mod common;

use std::time::Instant;

use adaptx_sim::{Law, Policy, run};

#[test]
fn simulated_requests_per_second() {
    // A hard-limit backend: laws (a mix of successes and 2 ms rejections)
    // and a fixed limit of 2 × C* (mostly rejections).
    let sc = common::scenario(
        r#"
name = "speed"
duration = "60s"
[backend]
service_time = "50ms"
jitter = 0.1
max_concurrency = 20
[demand]
kind = "closed"
workers = 100
"#,
    );
    let policies = [
        Policy::Law(Law::Aimd),
        Policy::Law(Law::Vegas),
        Policy::Law(Law::Gradient),
        Policy::Fixed(40),
    ];
    let start = Instant::now();
    let requests: u64 = policies.iter().map(|&p| run(&sc, p, 0).requests()).sum();
    let secs = start.elapsed().as_secs_f64();
    let rate = requests as f64 / secs;
    println!(
        "simulated {requests} requests in {secs:.3} s: {:.2} M requests/s on one core ({})",
        rate / 1e6,
        if cfg!(debug_assertions) {
            "debug build"
        } else {
            "release build"
        }
    );
    assert!(requests > 500_000, "{requests}");
    if !cfg!(debug_assertions) {
        assert!(rate >= 1e6, "{rate:.0} requests/s is below 1 M/s");
    }
}
