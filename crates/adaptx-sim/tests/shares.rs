//! Clients sharing one backend, each with its own Ceiling limiter: none is
//! shut out, whatever its share. (How close the shares come to fair is a
//! band of the scenarios, `10-fairness` and `19-unequal-clients`.)

mod common;

use adaptx_sim::{Law, Policy, run};

/// Four clients of 50 closed workers start at the default limit of 10 on a
/// ceiling of `c` that rejects; each client's steady goodput as a share of
/// the fair one (the steady total over four), for `seed`.
fn shares(c: u32, seed: u64) -> Vec<f64> {
    let sc = common::scenario(&format!(
        r#"
name = "four-on-{c}"
duration = "180s"
[backend]
service_time = "50ms"
jitter = 0.1
max_concurrency = {c}
over_limit = "reject"
[demand]
kind = "closed"
clients = 4
workers = 50
"#
    ));
    let r = run(&sc, Policy::Law(Law::Ceiling), seed);
    let served: Vec<f64> = r
        .clients
        .iter()
        .map(|secs| secs[r.steady_from..].iter().map(|s| s.goodput as f64).sum())
        .collect();
    let fair = served.iter().sum::<f64>() / served.len() as f64;
    served.iter().map(|g| g / fair).collect()
}

/// The first client to start holds the whole ceiling of 8 (the others' calls
/// are rejected and they fall to a limit of 1), and a limit below 10 used to
/// keep what it had for good: three clients failed every call for the whole
/// run. A limit of 2 or more now yields a permit now and then, and a client
/// shut out takes it.
#[test]
fn no_client_is_shut_out_when_the_fair_share_is_below_ten_permits() {
    for seed in 0..3 {
        let s = shares(8, seed);
        let least = s.iter().copied().fold(f64::INFINITY, f64::min);
        assert!(
            least > 0.3,
            "seed {seed}: a client got {least:.2} of its fair share ({s:.2?})"
        );
    }
}
