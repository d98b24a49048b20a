//! The token bucket: one atomic word per bucket, read against the limiter's
//! token clock (a [`Segment`] of it, handed in by the caller: no clock, no
//! lock in here, governor's style).
//!
//! # Implementation details
//!
//! **The token clock.** Instead of every bucket refilling itself at the
//! rate, the limiter keeps one clock that counts the tokens minted since it
//! was built: its *level* `V(t)`, in [`ONE`]ths of a token. `V` grows at the
//! current rate; a rate change starts a new [`Segment`] at the level the old
//! one had reached, so `V` is continuous and a rate change neither mints nor
//! loses a token in any bucket, without touching a bucket (the buckets of a
//! keyed limiter included). Within a segment starting at `(start, base)` at
//! `r` per second,
//!
//! ```text
//! V(t) = base + floor((t − start) · r · ONE / 10⁹)      (mod 2⁶⁴)
//! ```
//!
//! computed exactly, without 128-bit division: `(t − start)` is split into
//! whole seconds (`r · ONE` units each) and the rest (`rest · r < 10¹⁸`,
//! divided by the constant `10⁹ / ONE`).
//!
//! **The bucket** is GCRA's theoretical arrival time on that clock: one
//! word `x`, the level at which the bucket was empty. It holds
//! `min(cap, V − x)` units; an admission needs [`ONE`] of them and moves
//! `x` to `max(x, V − cap) + ONE` with one compare-and-swap — governor's
//! `max(tat, t0) + t` with the time measured in tokens. A rejection reports
//! the exact time until `V` reaches `x + ONE`.
//!
//! | quantity | range | why it fits |
//! |---|---|---|
//! | rate `r` | 1 ..= 10⁹ per s | builder checks ([`MAX_RATE_BOUND`](crate::MAX_RATE_BOUND)) |
//! | `cap` | `ONE` ..= 10⁹ · `ONE` < 2³⁹ | burst ≤ 10⁹ |
//! | `V`, `x` | mod 2⁶⁴ | differences taken with wrapping arithmetic |
//! | `V − x` | −(a race's few units) ..= 2⁶³ | see below |
//!
//! `V` and `x` wrap; only `V − x` matters. It is never negative except by a
//! few units when a reader raced a rate change (it used the old segment for
//! the instants between the change's clock reading and its publication), or
//! when a bucket stayed idle for 2⁶³ units — 2⁵⁴ tokens, 208 days at
//! 10⁹ per second, half a million years at 10⁶. A reader that finds it
//! negative reads the clock again (its first reading may predate the
//! admission that moved `x`); if it is still negative the bucket is reset
//! to empty ([`Bucket::repair`]), never to full. That moves `x` back by
//! the few units of the race (a counter clock read without a fence may
//! also run a few cycles early): at most the rate times a few
//! nanoseconds. The idle case is caught
//! before that: the closer of the limiter's first interval after such an
//! idle time, and a keyed bucket's own last-use time, tell that the bucket
//! is full ([`Segment::wraps_over`], [`Bucket::fill`]).

use crate::sync::{AtomicU64, Ordering};

/// Units of the token clock per token: tokens are counted to 1/512.
///
/// A power of two that divides 10⁹ (2⁹ does), so `10⁹ / ONE` is an integer
/// and a level is exact integer arithmetic.
pub(crate) const ONE: u64 = 512;

const NANOS_PER_SEC: u64 = 1_000_000_000;
/// Nanoseconds per unit at one token per second.
const NANOS_PER_UNIT: u64 = NANOS_PER_SEC / ONE;
const _: () = assert!(NANOS_PER_UNIT * ONE == NANOS_PER_SEC);

/// One piece of the token clock: from `start` (ns, on the limiter's clock)
/// the level grows from `base` at `rate` tokens per second; buckets hold at
/// most `cap` units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Segment {
    pub(crate) start: u64,
    pub(crate) base: u64,
    pub(crate) rate: u64,
    pub(crate) cap: u64,
}

impl Segment {
    /// Units minted from `start` to `now`, exactly (0 before `start`).
    #[inline]
    fn minted(&self, now: u64) -> u128 {
        let dt = now.saturating_sub(self.start);
        u128::from(dt) * u128::from(self.rate) * u128::from(ONE) / u128::from(NANOS_PER_SEC)
    }

    /// The level of the token clock at `now` (mod 2⁶⁴). A reading before
    /// the segment's start counts as its start, so the level never goes
    /// back.
    #[inline]
    pub(crate) fn level(&self, now: u64) -> u64 {
        let dt = now.saturating_sub(self.start);
        let (secs, rest) = (dt / NANOS_PER_SEC, dt % NANOS_PER_SEC);
        // rest · rate < 10⁹ · 10⁹ < 2⁶³.
        let whole = secs.wrapping_mul(self.rate).wrapping_mul(ONE);
        self.base
            .wrapping_add(whole)
            .wrapping_add(rest * self.rate / NANOS_PER_UNIT)
    }

    /// Nanoseconds from `now` until the level has grown by `need` units:
    /// the smallest wait after which it has, never a nanosecond less.
    pub(crate) fn wait(&self, now: u64, need: u64) -> u64 {
        let target = self.minted(now) + u128::from(need);
        let per_sec = u128::from(self.rate) * u128::from(ONE);
        // The smallest `dt` with `floor(dt · rate · ONE / 10⁹) >= target`.
        let dt = (target * u128::from(NANOS_PER_SEC)).div_ceil(per_sec);
        let from = u128::from(now.saturating_sub(self.start));
        u64::try_from(dt.saturating_sub(from)).unwrap_or(u64::MAX)
    }

    /// Whether `idle` nanoseconds at this rate mint so many units (2⁶²)
    /// that the wrapped difference `V − x` of a bucket unused for that long
    /// can no longer be read: such a bucket is full, whatever its word says.
    #[inline]
    pub(crate) fn wraps_over(&self, idle: u64) -> bool {
        u128::from(idle) * u128::from(self.rate) * u128::from(ONE)
            >= (1u128 << 62) * u128::from(NANOS_PER_SEC)
    }

    /// The segment that takes over at `now` with `rate` and `cap`: it starts
    /// at the level this one has reached, so the clock is continuous.
    pub(crate) fn next(&self, now: u64, rate: u64, cap: u64) -> Segment {
        let start = now.max(self.start);
        Segment {
            start,
            base: self.level(start),
            rate,
            cap,
        }
    }
}

/// What a bucket holds at `level`: `Some(units)`, at most `cap`, or `None`
/// if `x` is ahead of the level (see the module docs).
#[inline]
pub(crate) fn held(level: u64, x: u64, cap: u64) -> Option<u64> {
    let d = level.wrapping_sub(x);
    (d <= i64::MAX as u64).then(|| d.min(cap))
}

/// The outcome of [`Bucket::take`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    /// A token was taken; the bucket holds this many units after it.
    Taken(u64),
    /// Less than a token: this many units are missing.
    Short(u64),
    /// The bucket's word is ahead of the level read.
    Ahead,
}

/// A token bucket: GCRA's arrival level on the token clock, in one word.
///
/// The word is the only shared state a bucket has, so `Relaxed` suffices:
/// a decision depends on its value alone, and the compare-and-swap fails
/// (and the decision is retaken) if any other admission moved it since the
/// load. A stale load can only be older, which holds *more* tokens than
/// now, so a rejection on it stands.
#[derive(Debug)]
pub(crate) struct Bucket {
    x: AtomicU64,
}

impl Bucket {
    /// A full bucket at `level`.
    pub(crate) fn full(level: u64, cap: u64) -> Self {
        Self {
            x: AtomicU64::new(level.wrapping_sub(cap)),
        }
    }

    /// Takes one token at `level` if the bucket holds one.
    #[inline]
    pub(crate) fn take(&self, level: u64, cap: u64) -> Take {
        let mut x = self.x.load(Ordering::Relaxed);
        loop {
            let Some(held) = held(level, x, cap) else {
                return Take::Ahead;
            };
            if held < ONE {
                return Take::Short(ONE - held);
            }
            // `max(x, level − cap) + ONE`: the level minus what is left.
            let next = level.wrapping_sub(held).wrapping_add(ONE);
            match self
                .x
                .compare_exchange_weak(x, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Take::Taken(held - ONE),
                Err(actual) => x = actual,
            }
        }
    }

    /// What the bucket holds at `level`, in units.
    #[cfg(all(test, not(adaptx_loom)))]
    pub(crate) fn held(&self, level: u64, cap: u64) -> Option<u64> {
        held(level, self.x.load(Ordering::Relaxed), cap)
    }

    /// Empties a bucket found ahead of a fresh `level` (a wrapped idle
    /// bucket, or a race with a rate change): it refills from there.
    #[cold]
    pub(crate) fn repair(&self, level: u64) {
        let x = self.x.load(Ordering::Relaxed);
        if held(level, x, u64::MAX).is_none() {
            let _ = self
                .x
                .compare_exchange(x, level, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// Fills a bucket known to have been idle past
    /// [`Segment::wraps_over`], unless an admission moved its word since
    /// `x` was read (that admission read a fresh level).
    #[cold]
    pub(crate) fn fill(&self, x: u64, level: u64, cap: u64) {
        let _ = self.x.compare_exchange(
            x,
            level.wrapping_sub(cap),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// The bucket's word, for [`fill`](Bucket::fill).
    #[inline]
    pub(crate) fn word(&self) -> u64 {
        self.x.load(Ordering::Relaxed)
    }

    /// Clips the bucket to `cap` at `level`: tokens above the capacity are
    /// gone, so a capacity raised later does not bring them back.
    pub(crate) fn clip(&self, level: u64, cap: u64) {
        let floor = level.wrapping_sub(cap);
        let mut x = self.x.load(Ordering::Relaxed);
        while held(level, x, u64::MAX).is_some_and(|d| d > cap) {
            match self
                .x
                .compare_exchange_weak(x, floor, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(actual) => x = actual,
            }
        }
    }
}

/// A keyed limiter's bucket: a [`Bucket`] and the last time it was used,
/// for evicting idle keys. Only touched under its shard's lock.
#[derive(Debug)]
pub(crate) struct TimedBucket {
    bucket: Bucket,
    last: u64,
}

impl TimedBucket {
    pub(crate) fn new(bucket: Bucket, now: u64) -> Self {
        Self { bucket, last: now }
    }

    /// The last time the bucket was used.
    pub(crate) fn last(&self) -> u64 {
        self.last
    }

    /// Records a use at `now` and hands over the bucket, filled first if it
    /// was idle long enough for its word to wrap.
    #[inline]
    pub(crate) fn touch(&mut self, seg: &Segment, now: u64) -> &Bucket {
        if seg.wraps_over(now.saturating_sub(self.last)) {
            let b = &self.bucket;
            b.fill(b.word(), seg.level(now), seg.cap);
        }
        self.last = self.last.max(now);
        &self.bucket
    }
}

#[cfg(all(test, not(adaptx_loom)))]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn seg(rate: u64, cap_tokens: u64) -> Segment {
        Segment {
            start: 0,
            base: 0,
            rate,
            cap: cap_tokens * ONE,
        }
    }

    /// Admits at `t` on a fixed segment; the whole tokens left, or the wait.
    fn take(b: &Bucket, s: &Segment, t: u64) -> Result<u64, u64> {
        match b.take(s.level(t), s.cap) {
            Take::Taken(left) => Ok(left / ONE),
            Take::Short(need) => Err(s.wait(t, need)),
            Take::Ahead => panic!("ahead"),
        }
    }

    #[test]
    fn starts_full_and_empties() {
        let s = seg(10, 3);
        let b = Bucket::full(s.level(0), s.cap);
        assert_eq!(take(&b, &s, 0), Ok(2));
        assert_eq!(take(&b, &s, 0), Ok(1));
        assert_eq!(take(&b, &s, 0), Ok(0));
        assert_eq!(take(&b, &s, 0), Err(S / 10));
    }

    #[test]
    fn keeps_fractions() {
        // 3 tokens/s, polled every microsecond for one second: the three
        // tokens earned arrive at 1/3, 2/3 and 1 s, none lost to rounding.
        let s = seg(3, 2);
        let b = Bucket::full(s.level(0), s.cap);
        assert_eq!(take(&b, &s, 0), Ok(1));
        assert_eq!(take(&b, &s, 0), Ok(0));
        let admitted: Vec<u64> = (0..=S)
            .step_by(1000)
            .filter(|&t| take(&b, &s, t).is_ok())
            .collect();
        assert_eq!(admitted, [333_334_000, 666_667_000, S]);
    }

    #[test]
    fn retry_after_is_exact() {
        let s = seg(7, 1);
        let b = Bucket::full(s.level(0), s.cap);
        assert_eq!(take(&b, &s, 0), Ok(0));
        let wait = take(&b, &s, 0).unwrap_err();
        assert_eq!(wait, S.div_ceil(7));
        assert!(take(&b, &s, wait - 1).is_err());
        assert!(take(&b, &s, wait).is_ok());
    }

    /// The level is `floor(dt · r · ONE / 10⁹)` exactly, whatever `dt`.
    #[test]
    fn level_is_exact() {
        for rate in [1, 3, 7, 999_999_937, 1_000_000_000] {
            let s = seg(rate, 1);
            for dt in [0, 1, 999_999_999, S, 3 * S + 17, u64::MAX / 2, u64::MAX] {
                let exact = u128::from(dt) * u128::from(rate) * u128::from(ONE) / u128::from(S);
                assert_eq!(s.level(dt), exact as u64, "rate {rate} dt {dt}");
                assert_eq!(s.minted(dt), exact);
            }
        }
    }

    #[test]
    fn long_idle_fills_to_the_cap_only() {
        let s = seg(1_000_000_000, 5);
        let b = Bucket::full(s.level(0), s.cap);
        for _ in 0..5 {
            assert!(take(&b, &s, 0).is_ok());
        }
        assert_eq!(take(&b, &s, 10 * S), Ok(4));
    }

    #[test]
    fn a_lowered_capacity_clips() {
        let s = seg(100, 100);
        let b = Bucket::full(s.level(0), s.cap);
        let lower = s.next(0, 80, 80 * ONE);
        assert_eq!(take(&b, &lower, 0), Ok(79));
    }

    /// The level is continuous across a segment change, so a bucket holds
    /// the same just before and just after it.
    #[test]
    fn a_new_segment_keeps_every_bucket() {
        let s = seg(100, 100);
        let b = Bucket::full(s.level(0), s.cap);
        for _ in 0..60 {
            assert!(take(&b, &s, 0).is_ok());
        }
        let t = S / 10; // +10 tokens: 50 held
        assert_eq!(b.held(s.level(t), s.cap), Some(50 * ONE));
        let up = s.next(t, 1000, 1000 * ONE);
        assert_eq!(b.held(up.level(t), up.cap), Some(50 * ONE));
        // From there it earns at the new rate: 1 ms is one more token.
        assert_eq!(b.held(up.level(t + S / 1000), up.cap), Some(51 * ONE));
    }

    #[test]
    fn ahead_is_repaired_to_empty() {
        let s = seg(10, 2);
        let b = Bucket::full(s.level(S), s.cap);
        assert_eq!(b.take(s.level(0), s.cap), Take::Ahead);
        b.repair(s.level(0));
        assert_eq!(b.held(s.level(0), s.cap), Some(0));
    }

    #[test]
    fn clip_discards_tokens_above_the_cap() {
        let s = seg(10, 100);
        let b = Bucket::full(s.level(0), s.cap);
        b.clip(s.level(0), 3 * ONE);
        assert_eq!(b.held(s.level(0), s.cap), Some(3 * ONE));
        b.clip(s.level(0), 5 * ONE); // below the cap: nothing to do
        assert_eq!(b.held(s.level(0), s.cap), Some(3 * ONE));
    }
}
