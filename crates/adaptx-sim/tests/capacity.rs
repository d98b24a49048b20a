//! Capacity is computed from the service time as simulated: the base plus
//! an exponential term of mean `jitter × service_time`. A fixed limit of C*
//! on a ceiling that rejects never meets the ceiling and keeps C* requests
//! in service, so it serves exactly C* / s̄ per second on average: the
//! capacity.

use adaptx_sim::{Policy, Scenario};

#[test]
fn a_fixed_limit_at_c_star_serves_the_capacity_jitter_included() {
    let sc = Scenario::from_toml(
        "capacity.toml",
        r#"
name = "capacity"
duration = "600s"
[backend]
service_time = "50ms"
jitter = 0.5
max_concurrency = 20
[demand]
kind = "closed"
workers = 100
"#,
    )
    .unwrap();
    // s̄ = 50 ms × (1 + 0.5) = 75 ms; capacity = 20 / s̄.
    let (base, jitter, c_star): (f64, f64, f64) = (0.050, 0.5, 20.0);
    let mean = base * (1.0 + jitter);
    let capacity = c_star / mean;
    // Each of the 20 slots is a renewal process of mean μ = s̄ and standard
    // deviation σ = jitter × base (the exponential term's); over the steady
    // T = 300 s the count N has variance ≈ 20 · T · σ² / μ³, so the goodput
    // fraction has a relative standard deviation of (σ/μ) / √E[N] ≈ 0.12 %.
    let t = 300.0;
    let sigma = jitter * base;
    let n = c_star * t / mean;
    let sd = (sigma / mean) / n.sqrt();
    assert!(sd < 0.0013, "{sd}");
    for seed in 0..3 {
        let run = adaptx_sim::run(&sc, Policy::Fixed(20), seed);
        assert_eq!(run.steady().len(), 300);
        for s in &run.seconds {
            assert!((s.capacity - capacity).abs() < 1e-9, "{}", s.capacity);
            assert_eq!(s.c_star, Some(c_star));
        }
        assert_eq!(run.steady_overload(), 0);
        let gp = run.goodput_fraction();
        // 4 standard deviations. Without the jitter the fraction would be
        // 0.67; with the median service time instead of the mean, 0.90.
        assert!((gp - 1.0).abs() < 4.0 * sd, "seed {seed}: {gp} (sd {sd})");
    }
}
