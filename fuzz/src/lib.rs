//! Invariant checks shared by the fuzz targets. The stable twins in
//! `crates/adaptx/tests/fuzz_twins.rs` carry a copy of the same checks.

use adaptx::{Limiter, MAX_LIMIT_BOUND};

/// The limiter's invariants, given its expected bounds, how many permits
/// the caller holds, and the outcomes the caller recorded since the last
/// reset: `[successes, failures, dropped]`.
pub fn check(l: &Limiter, min: usize, max: usize, held: usize, ended: [u64; 3]) {
    let (limit, in_flight) = (l.limit(), l.in_flight());
    assert!(1 <= min && min <= limit && limit <= max && max <= MAX_LIMIT_BOUND);
    assert!(in_flight <= max, "in_flight {in_flight} > max {max}");
    assert_eq!(in_flight, held, "held permits != in_flight");
    assert_eq!(l.available() + in_flight - l.debt(), limit);
    let s = l.stats();
    assert_eq!([s.success, s.failures, s.dropped], ended, "{s:?}");
    assert_eq!(s.total, ended.iter().sum::<u64>() + held as u64, "{s:?}");
    assert_eq!(
        (s.limit, s.in_flight, s.min_limit, s.max_limit),
        (limit, in_flight, min, max)
    );
}
