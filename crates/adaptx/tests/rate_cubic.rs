//! The AWS SDKs' adaptive retry law (`RateAlgorithm::Cubic`) inside a
//! `RateLimiter`: off until the first throttle, 0.7 × the measured send rate
//! on one, CUBIC recovery to the rate at the throttle after `K` seconds,
//! never above twice the measured send rate. Deterministic: a manual clock,
//! a client offering requests on a fixed schedule.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use adaptx::{ManualClock, Outcome, RateAlgorithm, RateLimiter};

/// A client offering `offered(second)` requests per second in ten equal
/// batches 100 ms apart, each completed at once, failing (a throttle) in
/// the seconds listed in `throttled`. Returns the rate in force after each
/// second's interval closed.
fn run(seconds: u64, offered: impl Fn(u64) -> u64, throttled: &[u64]) -> Vec<u64> {
    let clock = ManualClock::new();
    let limiter = RateLimiter::builder()
        .algorithm(RateAlgorithm::Cubic)
        .initial_rate(1000)
        .min_rate(1)
        .max_rate(1000)
        .clock(clock.clone())
        .build()
        .unwrap();
    let mut rates = vec![];
    for second in 0..seconds {
        let success = !throttled.contains(&second);
        for _ in 0..10 {
            for _ in 0..offered(second) / 10 {
                if let Ok(p) = limiter.try_acquire() {
                    p.record_with_latency(Outcome::from_success(success), Duration::from_millis(1));
                }
            }
            clock.advance(Duration::from_millis(100));
        }
        // The next call closes the interval (a permit dropped without an
        // outcome gives no feedback).
        drop(limiter.try_acquire());
        rates.push(limiter.current_rate());
    }
    rates
}

/// Hand-computed: 200 requests per second measure (EMA 0.8, from 0.5)
/// 160.1, 192.02, …, W = 199.987232 by the sixth close; the throttle cuts
/// to 0.7·W = 139.99 → 140; then `0.4·(t − K)³ + W` with
/// K = ∛(0.75·W) = 5.3133 s: 168, 185, 195, 199, 200, 200, 202, 208, 220,
/// 241 (the rate in force, rounded; the cap 2 × measured ≥ 280 never binds).
const RECOVERY: [u64; 11] = [140, 168, 185, 195, 199, 200, 200, 202, 208, 220, 241];

#[test]
fn cubic_does_not_limit_before_the_first_throttle() {
    assert_eq!(run(6, |_| 200, &[]), [1000; 6]);
}

#[test]
fn cubic_throttle_cuts_to_seven_tenths_and_recovers_along_the_curve() {
    let rates = run(16, |_| 200, &[5]);
    assert_eq!(rates[..5], [1000; 5], "off until the first throttle");
    assert_eq!(rates[5..], RECOVERY, "cut, then the CUBIC curve");
}

/// After the throttle the client asks for only 20 per second: the curve
/// would climb past 200, but the rate stays within twice the measured send
/// rate (an idle client cannot bank a high rate).
#[test]
fn cubic_rate_is_capped_at_twice_the_measured_send_rate() {
    let rates = run(20, |s| if s <= 5 { 200 } else { 20 }, &[5]);
    assert_eq!(rates[5], 140);
    // Measured falls toward 20 (EMA 0.8): 2 × measured ≤ 2 × (20 + 0.2⁵·200).
    for (i, &r) in rates.iter().enumerate().skip(11) {
        assert!(r <= 40, "second {i}: rate {r} above twice the send rate");
    }
}

/// A second throttle while the client is held below its demand cuts from
/// the rate in force, not from the (higher) demand.
#[test]
fn cubic_second_throttle_cuts_from_the_rate_in_force() {
    let rates = run(8, |_| 400, &[5, 6]);
    assert_eq!(rates[5], 280, "0.7 × ~400 measured");
    // Second 6 still admits ~400 (the bucket's 280 tokens and 280/s of
    // refill), so the measured rate stays near 400 while the rate in force
    // is 280: the cut is 0.7 × min(measured, 280) = 196.
    assert_eq!(rates[6], 196);
}
