//! Shows the limit moving: the real limiter, driven through a manual clock,
//! protects a simulated backend that can serve 20 requests at once.
//!
//! The backend takes 50 ms (plus a little seeded jitter) per request and
//! rejects anything beyond 20 concurrent requests after 2 ms — an overload
//! error. 100 closed-loop clients hammer it. Capacity halves to 10 at 40 s
//! and recovers at 70 s. Each law (Ceiling, the default, first) starts at a limit of 10; the table shows
//! where each one takes the limit and how much useful work gets through.
//!
//! Run with `cargo run --release -p adaptx --example demo`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use adaptx::{Algorithm, Limiter, ManualClock, Outcome, OwnedPermit};

const CLIENTS: usize = 100;
const SERVICE: Duration = Duration::from_millis(50);
const REJECT_AFTER: Duration = Duration::from_millis(2);
const RUN: Duration = Duration::from_secs(100);

fn capacity_at(t: Duration) -> usize {
    match t.as_secs() {
        40..70 => 10,
        _ => 20,
    }
}

/// One second of a run.
#[derive(Debug, Default, Clone, Copy)]
struct Second {
    limit: usize,
    goodput: u32,
    overload: u32,
}

fn run(algorithm: Algorithm) -> Vec<Second> {
    let clock = ManualClock::new();
    let limiter = Limiter::builder()
        .algorithm(algorithm)
        .clock(clock.clone())
        .max_limit(100)
        .seed(7)
        .build()
        .unwrap_or_else(|e| panic!("demo configuration: {e}"));
    let mut rng = fastrand_lite(42);
    // (finish time, slot) of requests in flight; their permits by slot.
    let mut events: BinaryHeap<Reverse<(Duration, usize)>> = BinaryHeap::new();
    let mut slots: Vec<Option<(OwnedPermit, bool)>> = Vec::new();
    let mut backend = 0usize;
    let mut idle = CLIENTS;
    let mut seconds = vec![Second::default(); RUN.as_secs() as usize];
    let mut now = Duration::ZERO;

    while now < RUN {
        // Every idle client tries to start a request.
        while idle > 0 {
            let Ok(permit) = limiter.try_acquire_owned() else {
                break;
            };
            idle -= 1;
            let ok = backend < capacity_at(now);
            let took = if ok {
                backend += 1;
                // Exponential jitter with mean 10 % of the service time.
                SERVICE + SERVICE.mul_f64(-0.1 * (1.0 - rng()).ln())
            } else {
                REJECT_AFTER
            };
            let slot = slots.iter().position(Option::is_none).unwrap_or_else(|| {
                slots.push(None);
                slots.len() - 1
            });
            slots[slot] = Some((permit, ok));
            events.push(Reverse((now + took, slot)));
        }
        let Some(Reverse((at, slot))) = events.pop() else {
            break;
        };
        now = at;
        clock.set(now);
        let Some((permit, ok)) = slots[slot].take() else {
            continue;
        };
        let last = seconds.len() - 1;
        let sec = &mut seconds[(now.as_secs() as usize).min(last)];
        if ok {
            backend -= 1;
            sec.goodput += 1;
            permit.record(Outcome::Success);
        } else {
            sec.overload += 1;
            permit.record(Outcome::Failure);
        }
        sec.limit = limiter.limit();
        idle += 1;
    }
    seconds
}

/// A tiny seeded generator (splitmix64) so the demo needs no extra crate.
fn fastrand_lite(mut state: u64) -> impl FnMut() -> f64 {
    move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn main() {
    let laws = [
        Algorithm::Ceiling,
        Algorithm::Aimd,
        Algorithm::Vegas,
        Algorithm::Gradient,
    ];
    let runs: Vec<Vec<Second>> = laws.iter().map(|&a| run(a)).collect();
    println!("backend: 50 ms per request, capacity 20 concurrent (10 during 40-70 s), 100 clients");
    println!("each cell: limit / successes per second / overload errors per second\n");
    print!("{:>5}", "t(s)");
    for law in laws {
        print!(" | {:>16}", law.to_string());
    }
    println!(" | capacity");
    for t in (0..RUN.as_secs() as usize).step_by(5) {
        print!("{t:>5}");
        for r in &runs {
            let s = r[t];
            print!(" | {:>4} {:>5} {:>5}", s.limit, s.goodput, s.overload);
        }
        println!(" | {:>4}", capacity_at(Duration::from_secs(t as u64)));
    }
    println!();
    for (law, r) in laws.iter().zip(&runs) {
        let good: u32 = r.iter().map(|s| s.goodput).sum();
        let bad: u32 = r.iter().map(|s| s.overload).sum();
        let ideal: f64 = (0..RUN.as_secs())
            .map(|t| capacity_at(Duration::from_secs(t)) as f64 / SERVICE.as_secs_f64())
            .sum();
        println!(
            "{law:>8}: goodput {:.0} % of capacity, overload errors {:.1} % of requests",
            100.0 * f64::from(good) / ideal,
            100.0 * f64::from(bad) / f64::from(good + bad).max(1.0)
        );
    }
}
