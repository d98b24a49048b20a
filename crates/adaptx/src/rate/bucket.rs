//! The token bucket: pure arithmetic, handed the time, the rate and the
//! capacity by its caller (governor's style: no clock, no lock in here).
//!
//! # Implementation details
//!
//! Tokens are counted in fixed point, in *nano-tokens* (10⁻⁹ token). At `r`
//! tokens per second the bucket earns exactly `r` nano-tokens per elapsed
//! nanosecond, so a refill is one integer multiplication and no fraction of
//! a token is ever lost (mizu's integer bucket lost the remainder on every
//! call, which starved traffic arriving faster than `1/r`). An admission
//! takes [`NANO`] nano-tokens, one whole token.
//!
//! | quantity | bound | why it fits |
//! |---|---|---|
//! | `rate` | 1 ..= 10⁹ per s | builder checks ([`MAX_RATE_BOUND`](crate::MAX_RATE_BOUND)) |
//! | `capacity` | 1 ..= 10⁹ tokens | builder checks |
//! | `tokens` | 0 ..= capacity · 10⁹ ≤ 10¹⁸ | < 2⁶⁴ ≈ 1.8 · 10¹⁹ |
//! | `elapsed · rate` | < 2⁶⁴ · 10⁹ | computed in `u128`, then capped at the capacity |
//!
//! `last` only moves forward: a caller holding an older reading of the clock
//! than the last refill adds nothing, so the elapsed time is never negative.

/// Nano-tokens per token: the bucket's fixed-point scale.
pub(crate) const NANO: u64 = 1_000_000_000;

/// A token bucket's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bucket {
    /// Nano-tokens available, at most `capacity · NANO`.
    tokens: u64,
    /// The clock reading (ns) up to which tokens have been credited.
    last: u64,
}

impl Bucket {
    /// A full bucket of `capacity` tokens at time `now`.
    pub(crate) fn full(now: u64, capacity: u64) -> Self {
        Self {
            tokens: capacity.saturating_mul(NANO),
            last: now,
        }
    }

    /// The last time the bucket was refilled: the last time it was used.
    pub(crate) fn last(&self) -> u64 {
        self.last
    }

    /// Credits the tokens earned since the last refill at `rate` per second,
    /// capped at `capacity` tokens. The cap also clips a bucket that holds
    /// more than a capacity lowered since (the rate was cut).
    pub(crate) fn refill(&mut self, now: u64, rate: u64, capacity: u64) {
        let cap = capacity.saturating_mul(NANO);
        let elapsed = now.saturating_sub(self.last);
        // Never more than a full bucket, whatever the idle time: no overflow.
        let earned = (u128::from(elapsed) * u128::from(rate)).min(u128::from(cap));
        let earned = u64::try_from(earned).unwrap_or(cap);
        self.tokens = self.tokens.saturating_add(earned).min(cap);
        self.last = self.last.max(now);
    }

    /// Refills, then takes one token.
    ///
    /// Returns the whole tokens left after the take, or, if less than one
    /// token is available, the exact nanoseconds until one will be at `rate`:
    /// `ceil((1 token − tokens) / rate)`.
    pub(crate) fn take(&mut self, now: u64, rate: u64, capacity: u64) -> Result<u64, u64> {
        self.refill(now, rate, capacity);
        if self.tokens >= NANO {
            self.tokens -= NANO;
            Ok(self.tokens / NANO)
        } else {
            Err((NANO - self.tokens).div_ceil(rate.max(1)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn starts_full_and_empties() {
        let mut b = Bucket::full(0, 3);
        assert_eq!(b.take(0, 10, 3), Ok(2));
        assert_eq!(b.take(0, 10, 3), Ok(1));
        assert_eq!(b.take(0, 10, 3), Ok(0));
        assert_eq!(b.take(0, 10, 3), Err(S / 10));
    }

    #[test]
    fn keeps_fractions() {
        // 3 tokens/s, polled every microsecond for one second: the three
        // tokens earned arrive at 1/3, 2/3 and 1 s, none lost to rounding.
        let mut b = Bucket::full(0, 2);
        assert_eq!(b.take(0, 3, 2), Ok(1));
        assert_eq!(b.take(0, 3, 2), Ok(0));
        let mut admitted = vec![];
        for t in (0..=S).step_by(1000) {
            if b.take(t, 3, 2).is_ok() {
                admitted.push(t);
            }
        }
        assert_eq!(admitted, [333_334_000, 666_667_000, S]);
    }

    #[test]
    fn retry_after_is_exact() {
        let mut b = Bucket::full(0, 1);
        assert_eq!(b.take(0, 7, 1), Ok(0));
        let wait = b.take(0, 7, 1).unwrap_err();
        assert_eq!(wait, S.div_ceil(7));
        assert!(b.take(wait - 1, 7, 1).is_err());
        assert!(b.take(wait, 7, 1).is_ok());
    }

    #[test]
    fn long_idle_and_backwards_time() {
        let mut b = Bucket::full(5, 1_000_000_000);
        b.tokens = 0;
        b.refill(u64::MAX, 1_000_000_000, 1_000_000_000);
        assert_eq!(b.tokens, 1_000_000_000 * NANO);
        b.refill(3, 1_000_000_000, 1_000_000_000);
        assert_eq!(b.last, u64::MAX);
    }

    #[test]
    fn lowered_capacity_clips() {
        let mut b = Bucket::full(0, 100);
        assert_eq!(b.take(0, 80, 80), Ok(79));
    }
}
