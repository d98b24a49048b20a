//! The adaptive rate limiter (`adaptx::rate`), through its public API, on a
//! manual clock: mizu's adjustment rules with their exact values
//! (`mizu-adaptive-behaviour.md` §5), the fixes of its defects (§6: no
//! starvation, low rates grow, no drift under light load, counting at
//! completion, no overflow, an exact Retry-After, validated options), and
//! the keyed limiter (independent buckets, idle eviction, the key bound,
//! one shared rate; its defence against chosen keys is in `keyed_attack.rs`). Arrivals are deterministic or drawn from a seeded RNG.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use adaptx::{
    ConfigError, KeyedRateLimiter, MAX_RATE_BOUND, ManualClock, Outcome, RateLimited, RateLimiter,
    RateLimiterBuilder, RatePermit, RateStats,
};

const SEC: Duration = Duration::from_secs(1);
/// An adjustment interval longer than any test: the rate holds still.
const NEVER: Duration = Duration::from_secs(3600);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// splitmix64 (Steele, Lea, Flood 2014): a seeded RNG in six lines.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// An exponential gap of a Poisson process at `per_sec` arrivals/s.
    fn gap(&mut self, per_sec: f64) -> Duration {
        Duration::from_secs_f64(-self.unit().ln() / per_sec)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

/// A limiter on a manual clock.
fn rig(builder: RateLimiterBuilder) -> (ManualClock, RateLimiter) {
    let clock = ManualClock::new();
    let limiter = builder
        .clock(clock.clone())
        .build()
        .expect("valid configuration");
    (clock, limiter)
}

/// Takes every token of the bucket: the limit is now binding.
fn drain(limiter: &RateLimiter) -> Vec<RatePermit> {
    let mut held = vec![];
    while let Ok(p) = limiter.try_acquire() {
        held.push(p);
    }
    held
}

/// Records `failures` failures, then successes, each with latency `latency`.
fn complete(permits: Vec<RatePermit>, failures: usize, latency: Duration) {
    for (i, p) in permits.into_iter().enumerate() {
        p.record_with_latency(Outcome::from_success(i >= failures), latency);
    }
}

/// Ends the interval and lets the next admission apply the adjustment.
fn tick(clock: &ManualClock, limiter: &RateLimiter) -> u64 {
    clock.advance(SEC);
    drop(limiter.try_acquire());
    limiter.current_rate()
}

/// One interval of mizu's tests: saturate, complete `n` of the drained
/// requests (`failures` of them failing) at mean `latency`, tick.
fn interval(clock: &ManualClock, limiter: &RateLimiter, failures: usize, latency: Duration) -> u64 {
    complete(drain(limiter), failures, latency);
    tick(clock, limiter)
}

// ===========================================================================
// mizu's rules, exact values (notes §5)
// ===========================================================================

#[test]
fn error_rate_above_threshold_cuts_100_to_80() {
    let (clock, l) = rig(RateLimiter::builder());
    assert_eq!(interval(&clock, &l, 50, ms(50)), 80);
    assert_eq!(l.stats().decreases, 1);
}

#[test]
fn mean_latency_above_target_cuts_100_to_90() {
    let (clock, l) = rig(RateLimiter::builder());
    assert_eq!(interval(&clock, &l, 0, ms(200)), 90);
}

#[test]
fn good_interval_while_binding_grows_100_to_110() {
    let (clock, l) = rig(RateLimiter::builder());
    assert_eq!(interval(&clock, &l, 0, ms(20)), 110);
    assert_eq!(l.stats().increases, 1);
}

/// The extra vectors of §5: thresholds are strict, the error rule wins, and
/// the dead band holds the rate.
#[test]
fn mizu_extra_vectors_hold_exactly() {
    let cases = [
        (10, ms(20), 100),                          // 0.1 is not > 0.1, and not < 0.05
        (4, ms(20), 110),                           // 0.04 < 0.05
        (0, ms(50), 100),                           // exactly target/2 is not below it
        (0, ms(100), 100),                          // exactly target is not above it
        (0, ms(100) + Duration::from_nanos(1), 90), // just above target
        (11, ms(500), 80),                          // the error rule wins; no compounding
        (7, ms(20), 100),                           // dead band
    ];
    for (failures, latency, want) in cases {
        let (clock, l) = rig(RateLimiter::builder());
        assert_eq!(
            interval(&clock, &l, failures, latency),
            want,
            "{failures} failures at {latency:?}"
        );
    }
}

/// TestLimiter_AdjustClampToMin: 15 → 12 → (9.6, clamped) 10 → 10.
#[test]
fn cuts_clamp_to_min_15_12_10_10() {
    let (clock, l) = rig(RateLimiter::builder().initial_rate(15).min_rate(10));
    let seq: Vec<u64> = (0..5)
        .map(|_| interval(&clock, &l, usize::MAX, ms(50)))
        .collect();
    assert_eq!(seq, [12, 10, 10, 10, 10]);
}

/// TestLimiter_AdjustClampToMax: 950 → (1045, clamped) 1000 → 1000.
#[test]
fn growth_clamps_to_max_950_1000_1000() {
    let (clock, l) = rig(RateLimiter::builder().initial_rate(950).max_rate(1000));
    let seq: Vec<u64> = (0..4).map(|_| interval(&clock, &l, 0, ms(10))).collect();
    assert_eq!(seq, [1000, 1000, 1000, 1000]);
    assert_eq!(l.stats().increases, 1);
}

// ===========================================================================
// The fixes (notes §6)
// ===========================================================================

/// §6.3: mizu's truncation kept every rate below 10 stuck.
#[test]
fn low_rates_grow_9_to_10_and_1_to_2() {
    let (clock, l) = rig(RateLimiter::builder().initial_rate(9).min_rate(1));
    assert_eq!(interval(&clock, &l, 0, ms(1)), 10);
    assert_eq!(interval(&clock, &l, 0, ms(1)), 11);

    let (clock, l) = rig(RateLimiter::builder().initial_rate(1).min_rate(1));
    assert_eq!(interval(&clock, &l, 0, ms(1)), 2);
}

/// §6.8: fast, clean traffic below the rate is no reason to raise it.
#[test]
fn light_load_does_not_drift_to_max() {
    let (clock, l) = rig(RateLimiter::builder());
    for _ in 0..50 * 20 {
        clock.advance(ms(20)); // 50 requests/s against a rate of 100
        l.try_acquire().expect("below the rate").success();
    }
    assert_eq!(l.current_rate(), 100);
    let s = l.stats();
    assert_eq!((s.increases, s.decreases, s.rejected), (0, 0, 0));
    assert_eq!(s.successes, 1000);
}

/// §6.4: an interval without completions changes nothing, and its pressure
/// is not carried into the next interval.
#[test]
fn interval_without_completions_changes_nothing_and_keeps_nothing() {
    let (clock, l) = rig(RateLimiter::builder());
    assert_eq!(tick(&clock, &l), 100); // nothing at all

    let held = drain(&l); // binding, but nothing completes
    assert!(l.try_acquire().is_err());
    assert_eq!(tick(&clock, &l), 100);

    // Fast successes in the next interval, which itself is not binding:
    // the earlier interval's pressure does not make it grow.
    complete(held, 0, ms(1));
    assert_eq!(tick(&clock, &l), 100);
    assert_eq!(l.stats().increases, 0);
}

/// §6.7: requests count when they complete. A hung backend's requests are
/// no evidence of speed; when they finally finish, their true latency
/// counts.
#[test]
fn hung_backend_does_not_raise_the_rate() {
    let (clock, l) = rig(RateLimiter::builder());
    let mut hung = vec![];
    for _ in 0..5 {
        hung.extend(drain(&l)); // saturated, rejections: binding
        assert!(l.try_acquire().is_err());
        assert_eq!(tick(&clock, &l), 100);
    }
    let s = l.stats();
    assert_eq!((s.increases, s.completed), (0, 0));
    assert_eq!(s.in_flight, hung.len() as u64);

    // They finish after seconds: latency from admission, above target.
    assert!(hung[0].elapsed() >= Duration::from_secs(5));
    for p in hung {
        p.success();
    }
    assert_eq!(tick(&clock, &l), 90);
}

/// A dropped permit says nothing about the backend.
#[test]
fn dropped_permits_count_as_dropped_and_give_no_feedback() {
    let (clock, l) = rig(RateLimiter::builder());
    drop(drain(&l));
    assert_eq!(tick(&clock, &l), 100);
    let s = l.stats();
    assert_eq!(s.dropped, 101); // the drained 100 and the tick's admission
    assert_eq!((s.completed, s.in_flight), (0, 0));
}

#[test]
fn stats_count_every_outcome() {
    let (clock, l) = rig(RateLimiter::builder()
        .initial_rate(10)
        .adjust_interval(NEVER));
    let mut held = drain(&l);
    assert_eq!(held.len(), 10);
    assert!(l.try_acquire().is_err());
    assert!(l.try_acquire().is_err());
    clock.advance(ms(30));
    held.pop().expect("held").failure();
    held.pop().expect("held").success();
    held.pop().expect("held").record(Outcome::Success);
    drop(held.pop());
    let s = l.stats();
    assert_eq!(s.rate, 10);
    assert_eq!((s.min_rate, s.max_rate), (10, 1000));
    assert_eq!(s.admitted, 10);
    assert_eq!(s.completed, 3);
    assert_eq!((s.successes, s.failures), (2, 1));
    assert_eq!(s.dropped, 1);
    assert_eq!(s.in_flight, 6);
    assert_eq!(s.rejected, 3); // the drain's last attempt, and two more
    assert_eq!((s.increases, s.decreases), (0, 0));
}

#[test]
fn latency_is_measured_from_admission_on_the_injected_clock() {
    let (clock, l) = rig(RateLimiter::builder());
    let held = drain(&l);
    clock.advance(ms(250));
    assert_eq!(held[0].elapsed(), ms(250));
    for p in held {
        p.success(); // 250 ms > 100 ms target
    }
    assert_eq!(tick(&clock, &l), 90);
}

// ---------------------------------------------------------------------------
// No starvation (§6.1): fractional tokens are kept
// ---------------------------------------------------------------------------

/// Admissions per whole second of `[1 s, end)`, from admission times.
fn per_second(admitted: &[Duration], end: u64) -> Vec<usize> {
    (1..end)
        .map(|s| admitted.iter().filter(|t| t.as_secs() == s).count())
        .collect()
}

/// mizu admitted 100 in the first second and then 0 every second.
#[test]
fn evenly_spaced_200_per_s_against_100_admit_100_per_s() {
    let (clock, l) = rig(RateLimiter::builder());
    let mut admitted = vec![];
    for i in 1..=30 * 200 {
        clock.set(ms(5) * i);
        if let Ok(p) = l.try_acquire() {
            admitted.push(ms(5) * i);
            // In the dead band (target/2 ≤ 75 ms ≤ target): the rate holds,
            // with adjustments running every second.
            p.record_with_latency(Outcome::Success, ms(75));
        }
    }
    for (s, n) in per_second(&admitted, 30).into_iter().enumerate() {
        assert!((98..=102).contains(&n), "second {}: {n}", s + 1);
    }
    assert_eq!(l.current_rate(), 100);
}

/// mizu admitted about 9 per second here.
#[test]
fn poisson_400_per_s_against_100_admit_at_least_95_per_s() {
    let (clock, l) = rig(RateLimiter::builder().adjust_interval(NEVER));
    let mut rng = SplitMix(0x5EED_0400);
    let mut admitted = vec![];
    let mut now = Duration::ZERO;
    while now < 30 * SEC {
        now += rng.gap(400.0);
        clock.set(now);
        if let Ok(p) = l.try_acquire() {
            admitted.push(now);
            p.success();
        }
    }
    for (s, n) in per_second(&admitted, 30).into_iter().enumerate() {
        assert!(n >= 95, "second {}: {n}", s + 1);
    }
    let steady = admitted.iter().filter(|t| **t >= SEC).count();
    assert!((2890..=2910).contains(&steady), "{steady}");
}

/// mizu rejected some of even 50 per second against 100.
#[test]
fn arrivals_below_the_rate_are_never_rejected() {
    // Evenly spaced.
    let (clock, l) = rig(RateLimiter::builder().adjust_interval(NEVER));
    for i in 1..=30 * 50 {
        clock.set(ms(20) * i);
        l.try_acquire().expect("50/s against 100/s").success();
    }
    // Poisson: bursts well within the bucket of 100.
    let (clock, l) = rig(RateLimiter::builder().adjust_interval(NEVER));
    let mut rng = SplitMix(0x5EED_0050);
    let mut now = Duration::ZERO;
    for _ in 0..1500 {
        now += rng.gap(50.0);
        clock.set(now);
        l.try_acquire()
            .expect("Poisson 50/s against 100/s")
            .success();
    }
    assert_eq!(l.stats().rejected, 0);
}

#[test]
fn fixed_burst_caps_the_bucket_whatever_the_rate() {
    let (clock, l) = rig(RateLimiter::builder().burst(5).adjust_interval(NEVER));
    assert_eq!(drain(&l).len(), 5);
    clock.advance(Duration::from_secs(60));
    assert_eq!(drain(&l).len(), 5);
    clock.advance(ms(30)); // 3 tokens at 100/s
    assert_eq!(drain(&l).len(), 3);
}

// ---------------------------------------------------------------------------
// Overflow (§6.11) and Retry-After (§6.13)
// ---------------------------------------------------------------------------

/// mizu's `elapsed · rate` overflowed int64 after 10.7 days at 10000/s.
#[test]
fn no_overflow_after_ten_years_idle() {
    let ten_years = Duration::from_secs(10 * 365 * 24 * 3600);

    let (clock, l) = rig(RateLimiter::builder()
        .initial_rate(10_000)
        .max_rate(10_000)
        .adjust_interval(NEVER));
    drop(drain(&l));
    clock.advance(ten_years);
    assert_eq!(drain(&l).len(), 10_000); // exactly a full bucket
    let limited = l.try_acquire().unwrap_err();
    assert_eq!(limited.retry_after(), Duration::from_micros(100));

    // The largest rate, and the clock at its end (584 years).
    let (clock, l) = rig(RateLimiter::builder()
        .initial_rate(MAX_RATE_BOUND)
        .max_rate(MAX_RATE_BOUND)
        .burst(3));
    assert_eq!(drain(&l).len(), 3);
    clock.advance(ten_years);
    assert_eq!(drain(&l).len(), 3);
    clock.advance(Duration::MAX);
    assert_eq!(drain(&l).len(), 3);
    assert_eq!(
        l.try_acquire().unwrap_err().retry_after(),
        Duration::from_nanos(1)
    );
    assert_eq!(l.current_rate(), MAX_RATE_BOUND);
}

/// mizu always answered `Retry-After: 1`.
#[test]
fn retry_after_is_exact_10_per_s_empty_bucket_waits_100ms() {
    let (clock, l) = rig(RateLimiter::builder()
        .initial_rate(10)
        .adjust_interval(NEVER));
    assert_eq!(drain(&l).len(), 10);
    let limited: RateLimited = l.try_acquire().unwrap_err();
    assert_eq!(limited.retry_after(), ms(100));
    assert_eq!(limited.retry_after_secs(), 1);
    assert_eq!(limited.rate(), 10);

    clock.advance(ms(30));
    assert_eq!(l.try_acquire().unwrap_err().retry_after(), ms(70));
    clock.advance(ms(70) - Duration::from_nanos(1));
    assert_eq!(
        l.try_acquire().unwrap_err().retry_after(),
        Duration::from_nanos(1)
    );
    clock.advance(Duration::from_nanos(1));
    assert!(l.try_acquire().is_ok());
}

/// Retrying exactly after `retry_after` succeeds, one nanosecond earlier
/// does not: the wait is the true one, rounded up.
#[test]
fn retry_after_is_never_shorter_than_the_true_wait() {
    let mut rng = SplitMix(0x5EED_0077);
    for _ in 0..200 {
        let rate = rng.range(1, 10_000);
        let (clock, l) = rig(RateLimiter::builder()
            .initial_rate(rate)
            .min_rate(1)
            .max_rate(10_000)
            .burst(rng.range(1, 5))
            .adjust_interval(NEVER));
        for _ in 0..20 {
            clock.advance(Duration::from_nanos(rng.range(0, 2_000_000_000 / rate)));
            while l.try_acquire().is_ok() {}
            let wait = l.try_acquire().unwrap_err().retry_after();
            assert!(wait > Duration::ZERO && wait <= SEC / rate as u32 + Duration::from_nanos(1));
            clock.advance(wait - Duration::from_nanos(1));
            assert!(l.try_acquire().is_err(), "rate {rate}: early by 1 ns");
            clock.advance(Duration::from_nanos(1));
            assert!(l.try_acquire().is_ok(), "rate {rate}: after {wait:?}");
        }
    }
}

// ---------------------------------------------------------------------------
// Configuration (§6.2, §6.9)
// ---------------------------------------------------------------------------

#[test]
fn bad_values_are_errors_naming_field_value_and_range() {
    let nan = f64::NAN;
    let cases: Vec<(RateLimiterBuilder, &str)> = vec![
        (RateLimiter::builder().initial_rate(0), "initial_rate"),
        (
            RateLimiter::builder().initial_rate(MAX_RATE_BOUND + 1),
            "initial_rate",
        ),
        (RateLimiter::builder().min_rate(0), "min_rate"),
        (RateLimiter::builder().max_rate(0), "max_rate"),
        (RateLimiter::builder().min_rate(20).max_rate(10), "max_rate"),
        (
            RateLimiter::builder().target_latency(Duration::ZERO),
            "target_latency",
        ),
        (
            RateLimiter::builder().error_threshold(0.0),
            "error_threshold",
        ),
        (
            RateLimiter::builder().error_threshold(-0.1),
            "error_threshold",
        ),
        (
            RateLimiter::builder().error_threshold(1.5),
            "error_threshold",
        ),
        (
            RateLimiter::builder().error_threshold(nan),
            "error_threshold",
        ),
        (
            RateLimiter::builder().error_threshold(f64::INFINITY),
            "error_threshold",
        ),
        (
            RateLimiter::builder().adjust_interval(Duration::ZERO),
            "adjust_interval",
        ),
        (
            RateLimiter::builder().adjust_interval(Duration::from_secs(25 * 3600)),
            "adjust_interval",
        ),
        (RateLimiter::builder().burst(0), "burst"),
        (RateLimiter::builder().burst(MAX_RATE_BOUND + 1), "burst"),
        (RateLimiter::builder().key_ttl(Duration::ZERO), "key_ttl"),
        (RateLimiter::builder().max_keys(0), "max_keys"),
    ];
    for (builder, field) in cases {
        let keyed: Result<KeyedRateLimiter<u32>, ConfigError> = builder.clone().build_keyed();
        let err = builder.build().unwrap_err();
        assert_eq!(err.field(), field);
        assert_eq!(keyed.unwrap_err(), err);
        let text = err.to_string();
        assert!(text.starts_with(&format!("invalid {field}: ")), "{text}");
        assert!(
            text.contains(err.value()) && text.contains(err.allowed()),
            "{text}"
        );
    }
    let err = RateLimiter::builder()
        .min_rate(20)
        .max_rate(10)
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid max_rate: 10 (allowed: min_rate (20) ..= 1000000000)"
    );
    let err = RateLimiter::builder()
        .error_threshold(nan)
        .build()
        .unwrap_err();
    assert_eq!(err.value(), "NaN");
}

/// mizu never clamped the initial rate, so 0 locked every request out.
#[test]
fn initial_rate_is_clamped_into_min_max() {
    let l = RateLimiter::builder().initial_rate(5).build().unwrap();
    assert_eq!(l.current_rate(), 10);
    let l = RateLimiter::builder().initial_rate(5000).build().unwrap();
    assert_eq!(l.current_rate(), 1000);
    let l = RateLimiter::builder()
        .min_rate(7)
        .max_rate(7)
        .build()
        .unwrap();
    assert_eq!(l.current_rate(), 7);
    assert!(l.try_acquire().is_ok());
}

#[test]
fn one_per_second_is_the_floor_and_still_admits() {
    let (clock, l) = rig(RateLimiter::builder().initial_rate(1).min_rate(1));
    for _ in 0..5 {
        assert_eq!(interval(&clock, &l, usize::MAX, ms(500)), 1);
    }
    clock.advance(SEC);
    assert!(l.try_acquire().is_ok());
}

#[test]
fn presets_have_mizus_values() {
    let s = RateLimiterBuilder::simple().build().unwrap().stats();
    assert_eq!((s.rate, s.min_rate, s.max_rate), (100, 10, 1000));
    let d = RateLimiter::builder().build().unwrap().stats();
    assert_eq!((d.rate, d.min_rate, d.max_rate), (100, 10, 1000));
    let s = RateLimiterBuilder::high_throughput()
        .build()
        .unwrap()
        .stats();
    assert_eq!((s.rate, s.min_rate, s.max_rate), (1000, 100, 10_000));
    let s = RateLimiterBuilder::conservative().build().unwrap().stats();
    assert_eq!((s.rate, s.min_rate, s.max_rate), (50, 5, 200));

    // The presets' targets: 50 ms is above high_throughput's target/2 but
    // below the default's; conservative cuts on 6 % errors.
    let (clock, l) = rig(RateLimiterBuilder::high_throughput());
    assert_eq!(interval(&clock, &l, 0, ms(40)), 1000);
    assert_eq!(interval(&clock, &l, 0, ms(60)), 900);
    let (clock, l) = rig(RateLimiterBuilder::conservative());
    assert_eq!(interval(&clock, &l, 0, ms(150)), 50);
    assert_eq!(interval(&clock, &l, 3, ms(10)), 40); // 3/50 = 6 % > 5 %
}

// ---------------------------------------------------------------------------
// Contracts
// ---------------------------------------------------------------------------

#[test]
fn bounds() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<RateLimiter>();
    send_sync::<KeyedRateLimiter<String>>();
    send_sync::<RatePermit>();
    send_sync::<RateLimited>();
    send_sync::<RateStats>();
    send_sync::<RateLimiterBuilder>();
}

/// Eight threads race for one bucket at a stopped clock: exactly the bucket
/// is admitted, and every attempt is counted once.
#[test]
fn concurrent_checks_admit_exactly_the_bucket() {
    let (_clock, l) = rig(RateLimiter::builder().adjust_interval(NEVER));
    let barrier = Arc::new(Barrier::new(8));
    let admitted: usize = (0..8)
        .map(|_| {
            let (l, barrier) = (l.clone(), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                (0..1000).filter(|_| l.try_acquire().is_ok()).count()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .sum();
    assert_eq!(admitted, 100);
    let s = l.stats();
    assert_eq!((s.admitted, s.rejected, s.dropped), (100, 7900, 100));
}

// ===========================================================================
// Keyed
// ===========================================================================

fn keyed(builder: RateLimiterBuilder) -> (ManualClock, KeyedRateLimiter<String>) {
    let clock = ManualClock::new();
    let limiter = builder
        .clock(clock.clone())
        .build_keyed()
        .expect("valid configuration");
    (clock, limiter)
}

fn drain_key(l: &KeyedRateLimiter<String>, key: &str) -> Vec<RatePermit> {
    let mut held = vec![];
    while let Ok(p) = l.try_acquire(key) {
        held.push(p);
    }
    held
}

/// A key's first request: admitted from a newcomer bucket, not its own; the
/// next one gives it a full bucket of its own.
fn enroll(l: &KeyedRateLimiter<String>, key: &str) {
    let before = l.len();
    drop(l.try_acquire(key).expect("a newcomer bucket holds a token"));
    // Not more keys (a sweep may have evicted idle ones): no slot for it.
    assert!(
        l.len() <= before,
        "{key} has no bucket after its first request"
    );
}

#[test]
fn keyed_buckets_are_independent() {
    let (clock, l) = keyed(
        RateLimiter::builder()
            .initial_rate(10)
            .adjust_interval(NEVER),
    );
    enroll(&l, "alice");
    assert_eq!(drain_key(&l, "alice").len(), 10);
    let limited = l.try_acquire("alice").unwrap_err();
    assert_eq!(limited.retry_after(), ms(100));
    enroll(&l, "bob");
    assert_eq!(drain_key(&l, "bob").len(), 10);
    assert_eq!(l.len(), 2);
    clock.advance(ms(100));
    assert!(l.try_acquire("alice").is_ok());
    assert!(l.try_acquire("alice").is_err());
    assert_eq!(l.stats().admitted, 23);
}

#[test]
fn keyed_idle_keys_are_evicted() {
    let (clock, l) = keyed(
        RateLimiter::builder()
            .key_ttl(10 * SEC)
            .adjust_interval(NEVER),
    );
    for key in ["a", "b", "c"] {
        enroll(&l, key);
        drop(l.try_acquire(key));
    }
    assert_eq!(l.len(), 3);
    clock.advance(5 * SEC);
    drop(l.try_acquire("a")); // a is used again
    assert_eq!(l.evict_idle(), 0);
    clock.advance(5 * SEC);
    assert_eq!(l.evict_idle(), 2); // b and c, idle for 10 s
    assert_eq!(l.len(), 1);
    clock.advance(10 * SEC);
    assert_eq!(l.evict_idle(), 1);
    assert!(l.is_empty());
    // An evicted key comes back with a full bucket: the doorkeeper still
    // remembers it, so its first request back is a repeat and takes a slot.
    assert_eq!(drain_key(&l, "b").len(), 100);
    assert_eq!(l.len(), 1);
}

/// The key bound, lazily: a new key that finds the table full evicts the
/// keys idle for a TTL, and takes a slot; a key used within the TTL keeps
/// its bucket (and its debt).
#[test]
fn keyed_full_table_evicts_idle_keys_for_a_new_one() {
    let (clock, l) = keyed(
        RateLimiter::builder()
            .initial_rate(1)
            .min_rate(1)
            .burst(100)
            .max_keys(2)
            .key_ttl(10 * SEC)
            .adjust_interval(NEVER),
    );
    for key in ["a", "b"] {
        enroll(&l, key);
        drop(l.try_acquire(key));
    }
    assert_eq!(l.len(), 2);
    clock.advance(5 * SEC);
    assert_eq!(drain_key(&l, "a").len(), 100);
    clock.advance(5 * SEC);
    // b has been idle for 10 s, a for 5 s: c takes b's slot.
    enroll(&l, "c");
    assert_eq!(drain_key(&l, "c").len(), 100);
    assert_eq!(l.len(), 2);
    // a kept its bucket: 5 tokens earned since it was drained, not a full one.
    assert_eq!(drain_key(&l, "a").len(), 5);
}

/// The policy when the table is full of keys in use: new keys used less
/// often than them are admitted from the newcomer buckets (at most their
/// burst in all, however many keys), and the keys in use keep their
/// buckets; once those are idle for the TTL, new keys take their slots.
#[test]
fn keyed_full_table_of_active_keys_keeps_them_and_admits_new_keys_from_newcomer_buckets() {
    let (clock, l) = keyed(
        RateLimiter::builder()
            .initial_rate(10)
            .max_keys(2)
            .key_ttl(60 * SEC)
            .adjust_interval(NEVER),
    );
    for key in ["a", "b"] {
        enroll(&l, key);
        assert_eq!(drain_key(&l, key).len(), 10);
    }
    assert_eq!(l.len(), 2);

    // c is seen at most 11 times, fewer than a's and b's 12 hits each (the
    // drain's refusal counts): c never takes their slot. Its newcomer bucket
    // (one per shard at this size) admits its 10 tokens, less the first
    // request of a or b if they share c's shard.
    let c = drain_key(&l, "c").len();
    assert!((8..=10).contains(&c), "{c}");
    assert_eq!(l.len(), 2);
    // Many new keys: the 16 newcomer buckets of 10 tokens, at most, between
    // them; memory still bounded.
    let admitted = (0..1000)
        .filter(|i| l.try_acquire(&format!("new{i}")).is_ok())
        .count();
    assert!(admitted <= 16 * 10, "{admitted}");
    assert_eq!(l.len(), 2);
    // The tracked keys are untouched: a second later, 10 tokens each.
    clock.advance(SEC);
    assert_eq!(drain_key(&l, "a").len(), 10);
    assert_eq!(drain_key(&l, "b").len(), 10);

    // Once a and b have been idle for the TTL, new keys take their slots.
    clock.advance(60 * SEC);
    for key in ["e", "f"] {
        enroll(&l, key);
        assert_eq!(drain_key(&l, key).len(), 10);
    }
    assert_eq!(l.len(), 2);
}

/// One controller for all keys: errors on one key's requests lower every
/// key's rate; a rejection on one key marks the interval binding for all.
#[test]
fn keyed_rate_is_shared_across_keys() {
    let (clock, l) = keyed(RateLimiter::builder());
    enroll(&l, "alice");
    let held = drain_key(&l, "alice");
    assert_eq!(held.len(), 100);
    complete(held, 50, ms(50));
    clock.advance(SEC);
    // Bob's first request applies the cut; his new bucket holds 80.
    enroll(&l, "bob");
    assert_eq!(drain_key(&l, "bob").len(), 80);
    assert_eq!(l.current_rate(), 80);
    // Alice's bucket refills at 80 as well, capped at 80.
    clock.advance(10 * SEC);
    let held = drain_key(&l, "alice");
    assert_eq!(held.len(), 80);

    // Good feedback from Alice, who was the one held back: the shared rate
    // grows for everyone.
    complete(held, 0, ms(10));
    clock.advance(SEC);
    drop(l.try_acquire("carol"));
    assert_eq!(l.current_rate(), 88);
    enroll(&l, "dave");
    assert_eq!(drain_key(&l, "dave").len(), 88);
    let s = l.stats();
    assert_eq!((s.decreases, s.increases), (1, 1));
}

/// Eight threads race for four keys at a stopped clock: each key admits
/// exactly its bucket and its first request (from a newcomer bucket), and no
/// key is ever tracked twice.
#[test]
fn keyed_concurrent_checks_admit_exactly_each_bucket() {
    let (_clock, l) = keyed(RateLimiter::builder().adjust_interval(NEVER).max_keys(4));
    let barrier = Arc::new(Barrier::new(8));
    let per_key: Vec<usize> = (0..8)
        .map(|t| {
            let (l, barrier) = (l.clone(), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                let mut n = [0usize; 4];
                for i in 0..2000 {
                    let k = (i + t) % 4;
                    if l.try_acquire(&format!("k{k}")).is_ok() {
                        n[k] += 1;
                    }
                }
                n
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .fold(vec![0; 4], |mut acc, n| {
            acc.iter_mut().zip(n).for_each(|(a, b)| *a += b);
            acc
        });
    assert_eq!(per_key, [101; 4]);
    assert_eq!(l.len(), 4);
    assert_eq!(l.stats().admitted, 404);
}

#[test]
fn keyed_limiter_accepts_borrowed_keys_and_any_hashable_type() {
    let (_clock, l) = keyed(RateLimiter::builder().initial_rate(10));
    let owned = String::from("alice");
    assert!(l.try_acquire(&owned).is_ok());
    assert!(l.try_acquire("alice").is_ok()); // &str for a String key
    assert_eq!(l.len(), 1);
    assert!(l.try_acquire(&owned).is_ok());
    assert_eq!(l.len(), 1);

    let ips: KeyedRateLimiter<std::net::IpAddr> = RateLimiter::builder().build_keyed().unwrap();
    let ip = std::net::IpAddr::from([127, 0, 0, 1]);
    ips.try_acquire(&ip).unwrap().success();
    assert_eq!(ips.stats().successes, 1);
}

/// Every completion counts exactly once, whichever thread records it:
/// threads that come and go (their numbers, and so their lanes' owned
/// counters, handed on to the next threads), more threads than lanes, and
/// permits admitted on one thread and recorded on another.
#[test]
fn counts_stay_exact_across_threads_that_come_and_go() {
    let clock = ManualClock::new();
    let l = RateLimiter::builder()
        .initial_rate(1_000_000)
        .max_rate(1_000_000)
        .adjust_interval(Duration::from_secs(3600))
        .clock(clock)
        .build()
        .expect("valid");
    const ROUNDS: usize = 4;
    const THREADS: usize = 6;
    const EACH: usize = 4_000;
    for _ in 0..ROUNDS {
        let start = Arc::new(Barrier::new(THREADS));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (l, start) = (l.clone(), Arc::clone(&start));
                thread::spawn(move || {
                    start.wait();
                    let mut handed = Vec::new();
                    for i in 0..EACH {
                        if i % 16 == 0 {
                            // Interleave the threads on any number of CPUs.
                            thread::yield_now();
                        }
                        let p = l.try_acquire().expect("never empty");
                        match (t + i) % 4 {
                            0 => p.success(),
                            1 => p.failure(),
                            2 => drop(p),
                            _ => handed.push(p),
                        }
                    }
                    handed
                })
            })
            .collect();
        let handed: Vec<RatePermit> = handles
            .into_iter()
            .flat_map(|h| h.join().expect("no panic"))
            .collect();
        // Recorded on this thread, admitted on the others.
        for p in handed {
            p.success();
        }
    }
    let s = l.stats();
    let n = (ROUNDS * THREADS * EACH) as u64;
    assert_eq!(s.admitted, n);
    assert_eq!(s.in_flight, 0);
    assert_eq!((s.successes, s.failures, s.dropped), (n / 2, n / 4, n / 4));
}

/// A clock that raises a flag when it is dropped: when the limiter's engine
/// is freed.
#[derive(Debug)]
struct FlagOnDrop(Arc<std::sync::atomic::AtomicBool>);

impl adaptx::Clock for FlagOnDrop {
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

impl Drop for FlagOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A permit may outlive its limiter and still records; the engine is freed
/// once the permits are finished and the thread that keeps a spare handle
/// to it (the one that finished the last permit) moves on to another
/// limiter or exits: nothing is kept for good.
#[test]
fn a_dropped_limiter_is_freed_once_its_permits_and_threads_are_done() {
    for move_on in [false, true] {
        let freed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let clock = FlagOnDrop(Arc::clone(&freed));
        let flag = Arc::clone(&freed);
        // `join` returns once the thread has exited, its thread-locals
        // destroyed (a scoped thread's end is signalled before that).
        thread::spawn(move || {
            let l = RateLimiter::builder().clock(clock).build().expect("valid");
            let (a, b) = (
                l.try_acquire().expect("full"),
                l.try_acquire().expect("full"),
            );
            drop(l);
            a.success();
            drop(b);
            if move_on {
                let other = RateLimiter::builder().build().expect("valid");
                other.try_acquire().expect("full").success();
                assert!(
                    flag.load(std::sync::atomic::Ordering::SeqCst),
                    "freed on moving on"
                );
            }
        })
        .join()
        .expect("no panic");
        assert!(
            freed.load(std::sync::atomic::Ordering::SeqCst),
            "freed at thread exit"
        );
    }
}

#[test]
fn a_dropped_limiter_is_freed_at_once_by_the_thread_that_used_it() {
    // Permits still in flight when the limiter is dropped: the last one to
    // end frees it, the thread keeping no spare handle of a dropped limiter.
    let freed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let l = RateLimiter::builder()
        .clock(FlagOnDrop(Arc::clone(&freed)))
        .build()
        .expect("valid");
    let (a, b) = (
        l.try_acquire().expect("full"),
        l.try_acquire().expect("full"),
    );
    drop(l);
    a.success();
    assert!(
        !freed.load(std::sync::atomic::Ordering::SeqCst),
        "b holds it"
    );
    drop(b);
    assert!(
        freed.load(std::sync::atomic::Ordering::SeqCst),
        "freed with its last permit"
    );

    // Every permit ended before the drop: the thread's spare handle goes
    // with the limiter.
    let freed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let l = RateLimiter::builder()
        .clock(FlagOnDrop(Arc::clone(&freed)))
        .build()
        .expect("valid");
    l.try_acquire().expect("full").success();
    drop(l);
    assert!(
        freed.load(std::sync::atomic::Ordering::SeqCst),
        "freed when dropped"
    );
}
