//! The peer laws in the simulator: named and labelled as peers, within the
//! scenario's bounds, deterministic, and with their known weaknesses kept.

mod common;

use adaptx_sim::{Law, Policy, Scenario, run};

fn hard_limit(duration: &str) -> Scenario {
    common::scenario(&format!(
        r#"
name = "peers"
duration = "{duration}"
[backend]
service_time = "50ms"
jitter = 0.1
max_concurrency = 20
over_limit = "reject"
[demand]
kind = "closed"
workers = 100
"#
    ))
}

#[test]
fn peers_are_apart_from_adaptx_laws_and_labelled() {
    assert_eq!(Law::ALL.len(), 4);
    for law in Law::ALL {
        assert!(!law.is_peer());
        assert_eq!(law.to_string(), law.name());
    }
    for law in Law::PEERS {
        assert!(law.is_peer());
        assert!(law.algorithm().is_none());
        assert_eq!(law.to_string(), format!("{} (peer)", law.name()));
        assert_eq!(Law::from_name(law.name()), Some(law));
    }
    let names: Vec<_> = Law::PEERS.iter().map(|l| l.name()).collect();
    assert_eq!(
        names,
        [
            "netflix_gradient2",
            "netflix_aimd",
            "vector_arc",
            "envoy_gradient"
        ]
    );
}

#[test]
fn a_band_may_name_a_peer() {
    let sc = common::scenario(
        r#"
name = "band"
duration = "10s"
[backend]
service_time = "50ms"
[demand]
kind = "closed"
workers = 10
[[band]]
laws = ["aimd", "netflix_gradient2", "envoy_gradient"]
metric = "goodput"
"#,
    );
    assert_eq!(
        sc.bands[0].laws,
        [Law::Aimd, Law::NetflixGradient2, Law::EnvoyGradient]
    );
}

#[test]
fn peers_stay_in_bounds_and_repeat_exactly() {
    let sc = hard_limit("40s");
    for law in Law::PEERS {
        let a = run(&sc, Policy::Law(law), 4);
        let b = run(&sc, Policy::Law(law), 4);
        assert_eq!(a, b, "{law}");
        let violations: u64 = a.seconds.iter().map(|s| s.violations).sum();
        assert_eq!(violations, 0, "{law}");
        assert!(a.seconds.iter().all(|s| s.limit >= 1 && s.limit <= 1000));
    }
}

#[test]
fn gradient2_ignores_fast_rejections_and_runs_away_on_a_reject_ceiling() {
    // Netflix #176: drops are never read, and a 2 ms rejection looks like a
    // fast, healthy response; the limit climbs far past C* = 20 while
    // Netflix's loss-based AIMD stays near it.
    let sc = hard_limit("60s");
    let g2 = run(&sc, Policy::Law(Law::NetflixGradient2), 0);
    let aimd = run(&sc, Policy::Law(Law::NetflixAimd), 0);
    let end = |r: &adaptx_sim::Run| r.seconds.last().map_or(0, |s| s.limit);
    assert!(end(&g2) > 50, "{}", end(&g2));
    assert!(g2.overload_fraction() > 0.5, "{}", g2.overload_fraction());
    assert!(aimd.mean_limit() < 40.0, "{}", aimd.mean_limit());
}

#[test]
fn envoy_starts_pinned_at_its_floor_by_the_first_probe() {
    let sc = hard_limit("10s");
    let r = run(&sc, Policy::Law(Law::EnvoyGradient), 0);
    // The probe pins 3 until 50 samples at ≤ 3 in flight (3 per 50 ms:
    // about a second), then the gradient grows the limit.
    assert_eq!(r.seconds[0].limit_max, 3);
    assert!(r.seconds[9].limit > 3);
}
