//! The lock-free bucket (GCRA on the limiter's token clock) against an
//! exact one: a rate change neither mints nor loses a token — every bucket
//! holds the same just after a change as just before (clipped to a lowered
//! capacity) and refills at the new rate from then on — on a manual clock.

mod common;

use std::time::Duration;

use adaptx::{KeyedRateLimiter, ManualClock, RateLaw, RateLimiter, RateLimiterBuilder};
use proptest::prelude::*;

const NEVER: Duration = Duration::from_secs(24 * 3600);

fn rig(builder: RateLimiterBuilder) -> (ManualClock, RateLimiter) {
    let clock = ManualClock::new();
    let l = builder.clock(clock.clone()).build().expect("valid");
    (clock, l)
}

/// Admits until rejected; how many.
fn drain(l: &RateLimiter) -> usize {
    std::iter::from_fn(|| l.try_acquire().ok()).count()
}

fn drain_key(l: &KeyedRateLimiter<String>, key: &str) -> usize {
    std::iter::from_fn(|| l.try_acquire(key).ok()).count()
}

#[test]
fn lowering_the_rate_clips_a_default_bucket_to_its_new_capacity() {
    let (clock, l) = rig(RateLimiter::builder()
        .initial_rate(100)
        .adjust_interval(NEVER));
    l.set_rate(10).expect("within bounds");
    assert_eq!(drain(&l), 10);
    clock.advance(Duration::from_millis(100));
    assert_eq!(drain(&l), 1);
}

/// A bucket idle long past its capacity holds its capacity, not what it
/// would have earned without one: raising the capacity adds no token at
/// once.
#[test]
fn raising_the_rate_adds_no_token_at_once() {
    let (clock, l) = rig(RateLimiter::builder()
        .initial_rate(10)
        .adjust_interval(NEVER));
    clock.advance(Duration::from_secs(60));
    l.set_rate(100).expect("within bounds");
    assert_eq!(drain(&l), 10);
    clock.advance(Duration::from_millis(10));
    assert_eq!(drain(&l), 1);
}

#[test]
fn keyed_set_rate_keeps_every_keys_tokens_and_the_keys() {
    let clock = ManualClock::new();
    let l = RateLimiter::builder()
        .initial_rate(100)
        .burst(10)
        .adjust_interval(NEVER)
        .clock(clock.clone())
        .build_keyed::<String>()
        .expect("valid");
    // A key's first request comes from a newcomer bucket, its second from
    // a full bucket of its own: "a" holds 8 tokens, "b" 9.
    for _ in 0..3 {
        drop(l.try_acquire("a").expect("token"));
    }
    for _ in 0..2 {
        drop(l.try_acquire("b").expect("token"));
    }
    l.set_rate(1000).expect("within bounds");
    assert!(l.set_rate(0).is_err());
    assert_eq!(l.len(), 2);
    clock.advance(Duration::from_millis(1)); // one token at 1000/s
    assert_eq!(drain_key(&l, "a"), 9);
    assert_eq!(drain_key(&l, "b"), 10, "capped at the burst");
    l.set_bounds(10, 20).expect("valid");
    assert_eq!(l.current_rate(), 20);
    let law = RateLaw::mizu(1, 30, Duration::from_millis(5), 0.2).expect("valid");
    l.set_law(law);
    assert_eq!((l.law(), l.current_rate()), (law, 20));
}

/// What a test does to a limiter.
#[derive(Debug, Clone)]
enum Op {
    Advance(u64),
    Admit,
    SetRate(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u64..50_000_000).prop_map(Op::Advance),
        6 => Just(Op::Admit),
        1 => (1u64..=1000).prop_map(Op::SetRate),
    ]
}

/// The exact continuous bucket, in nano-tokens: refilled at the rate,
/// capped continuously, clipped at each change.
struct Reference {
    nano: u128,
    last: u64,
    rate: u64,
    burst: Option<u64>,
}

impl Reference {
    fn cap(&self) -> u128 {
        u128::from(self.burst.unwrap_or(self.rate)) * 1_000_000_000
    }

    fn refill(&mut self, now: u64) {
        let earned = u128::from(now - self.last) * u128::from(self.rate);
        self.nano = (self.nano + earned).min(self.cap());
        self.last = now;
    }
}

proptest! {
    #![proptest_config(common::proptest_config(256, 0x6c72_6174_6532))]

    /// Against the exact continuous bucket: the limiter never admits more,
    /// and at most one token (plus 1/512 of a token per change) fewer.
    #[test]
    fn rate_changes_neither_mint_nor_lose_tokens(
        initial in 1u64..=1000,
        burst in prop::option::of(1u64..=50),
        ops in prop::collection::vec(op(), 1..200),
    ) {
        let mut b = RateLimiter::builder().initial_rate(initial).min_rate(1).adjust_interval(NEVER);
        if let Some(burst) = burst {
            b = b.burst(burst);
        }
        let (clock, l) = rig(b);
        let mut reference = Reference { nano: 0, last: 0, rate: initial, burst };
        reference.nano = reference.cap();
        let (mut now, mut admitted, mut expected, mut changes) = (0u64, 0u64, 0u64, 0u64);
        for op in ops {
            match op {
                Op::Advance(ns) => {
                    now += ns;
                    clock.advance(Duration::from_nanos(ns));
                }
                Op::Admit => {
                    reference.refill(now);
                    if reference.nano >= 1_000_000_000 {
                        reference.nano -= 1_000_000_000;
                        expected += 1;
                    }
                    admitted += u64::from(l.try_acquire().is_ok());
                }
                Op::SetRate(r) => {
                    reference.refill(now);
                    reference.rate = r;
                    reference.nano = reference.nano.min(reference.cap());
                    l.set_rate(r).expect("within bounds");
                    changes += 1;
                }
            }
            prop_assert!(admitted <= expected, "minted: {admitted} > {expected}");
            prop_assert!(admitted + 1 + changes / 512 >= expected, "lost: {admitted} < {expected}");
        }
    }
}
