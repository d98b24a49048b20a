//! Arbitrary operation sequences on a limiter driven by a `ManualClock`,
//! with the invariants checked after every step.
#![no_main]

use std::time::Duration;

use adaptx::{Algorithm, Limiter, ManualClock, Outcome, OwnedPermit};
use adaptx_fuzz::check;
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Setup {
    algorithm: u8,
    min: u8,
    max: u16,
    initial: u16,
    warmup: u8,
    jitter: bool,
    window_nanos: u32,
    seed: u64,
}

#[derive(Debug, Arbitrary)]
enum Op {
    TryAcquire,
    Success(u16),
    Failure(u16),
    Latency(u16, bool, Duration),
    Skipped(u16, bool),
    Drop(u16),
    Advance(Duration),
    Close,
    ResetStats,
}

fuzz_target!(|input: (Setup, Vec<Op>)| {
    let (s, ops) = input;
    let clock = ManualClock::new();
    let (min, initial) = (1 + usize::from(s.min % 8), 1 + usize::from(s.initial % 300));
    let max = (1 + usize::from(s.max % 300)).max(min);
    let l = Limiter::builder()
        .algorithm(
            [Algorithm::Aimd, Algorithm::Vegas, Algorithm::Gradient][usize::from(s.algorithm % 3)],
        )
        .clock(clock.clone())
        .min_limit(min)
        .max_limit(max)
        .initial_limit(initial)
        .warmup_samples(u64::from(s.warmup % 4))
        .jitter(if s.jitter { 0.5 } else { 0.0 })
        .sample_window(Duration::from_nanos(
            1 + u64::from(s.window_nanos % 10_000_000),
        ))
        .target_latency(Duration::from_millis(1))
        .seed(s.seed)
        .build()
        .expect("valid configuration");
    let mut held: Vec<OwnedPermit> = Vec::new();
    // Successes, failures and drops recorded since the last reset.
    let mut ended = [0u64; 3];
    check(&l, min, max, 0, ended);
    for op in ops {
        let mut take =
            |i: u16| (!held.is_empty()).then(|| held.swap_remove(usize::from(i) % held.len()));
        match op {
            Op::TryAcquire => held.extend(l.try_acquire_owned().ok()),
            Op::Success(i) => take(i).map_or((), |p| {
                p.success();
                ended[0] += 1;
            }),
            Op::Failure(i) => take(i).map_or((), |p| {
                p.failure();
                ended[1] += 1;
            }),
            Op::Latency(i, ok, d) => take(i).map_or((), |p| {
                p.record_with_latency(Outcome::from_success(ok), d);
                ended[usize::from(!ok)] += 1;
            }),
            Op::Skipped(i, ok) => take(i).map_or((), |p| {
                p.record_skipped(Outcome::from_success(ok));
                ended[usize::from(!ok)] += 1;
            }),
            Op::Drop(i) => take(i).map_or((), |p| {
                drop(p);
                ended[2] += 1;
            }),
            Op::Advance(d) => clock.advance(d),
            Op::Close => _ = l.close(),
            Op::ResetStats => {
                l.reset_stats();
                ended = [0; 3];
            }
        }
        check(&l, min, max, held.len(), ended);
    }
    ended[2] += held.len() as u64;
    held.clear();
    check(&l, min, max, 0, ended);
    assert_eq!((l.debt(), l.available()), (0, l.limit()));
});
