//! # Implementation details
//!
//! A fixed-size, lock-free, log-linear latency histogram (HdrHistogram-style)
//! for the limiter's hot path, plus [`Counts`], a plain snapshot used to merge
//! several histograms and answer percentile / min / max / mean queries.
//!
//! ## Layout
//!
//! Values are nanoseconds (`u64`). With `SUB_BITS = 6` (64 sub-buckets per
//! power of two):
//!
//! * values `0..128` each get their own bucket (index = value, exact);
//! * every power of two `[2^e, 2^(e+1))` with `7 <= e <= 63` is split into
//!   64 equal sub-buckets of width `2^s`, where `s = e - 6`.
//!
//! The index of a value `v` is computed without branches, loops or floats:
//!
//! ```text
//! s     = 57 - leading_zeros(v | 64)      // = max(floor(log2 v), 6) - 6, in 0..=57
//! index = 64·s + (v >> s)                 // (v >> s) is the "mantissa" m
//! ```
//!
//! For `v < 128` this gives `s = 0` and `index = v`. For `v >= 128` the
//! mantissa `m = v >> s` lies in `64..128`, so each power of two occupies 64
//! consecutive indices and indices are monotonic in `v`. The largest index
//! (`v = u64::MAX`: `s = 57`, `m = 127`) is `64·57 + 127 = 3775`, hence there
//! are **3 776 buckets** (`128` exact + `57 × 64` log-linear), i.e.
//! **30 208 bytes** (`3 776 × 8`) per [`Histogram`] and per [`Counts`]. Every
//! `u64`, up to and including `u64::MAX`, has a bucket.
//!
//! ## Representative value and error bound
//!
//! Bucket `(s, m)` with `s >= 1` covers `[m·2^s, (m+1)·2^s)`; its
//! representative is the midpoint `r = m·2^s + 2^(s-1)` (an integer, and at
//! most `255·2^56 < 2^64`, so it never overflows). For any `v` in the bucket:
//!
//! ```text
//! |r - v| / v  <=  2^(s-1) / (m·2^s)  =  1 / (2m)  <=  1 / 128  =  0.78125 %
//! ```
//!
//! (worst case: `v` at the lower edge of a bucket with `m = 64`, i.e. just at
//! a power of two). Buckets with `s = 0` are exact. Percentiles, min and max
//! are reported as representatives of the bucket containing the exact sample,
//! so they inherit the same bound; the mean is a weighted mean of
//! representatives, so it is also within 0.78125 % (plus integer rounding).
//!
//! ## Concurrency and cost
//!
//! [`Histogram::record`] performs exactly one `fetch_add(1, Relaxed)` on one
//! bucket: no allocation (the buckets are allocated once in
//! [`Histogram::new`]), no lock, no loop. The index is clamped with `min`
//! (a no-op by construction) so that indexing the fixed-size array needs no
//! bounds-check branch. Readers ([`Histogram::add_to`]) load each bucket with
//! `Relaxed`; a snapshot taken while writers are active is therefore not an
//! atomic cut, which is acceptable for statistics. Counters wrap on overflow
//! (after 2^64 records); all aggregation in [`Counts`] saturates, and the mean
//! sums in `u128`, so nothing panics or overflows.

use std::fmt;

use crate::sync::{AtomicU64, Ordering, add_alone};

/// Number of sub-bucket bits per power of two (64 sub-buckets).
const SUB_BITS: u32 = 6;

/// Values below this are recorded exactly (one bucket each).
const EXACT: usize = 2 << SUB_BITS;

/// Total number of buckets: 128 exact + 57 × 64 log-linear = 3 776.
#[cfg(not(adaptx_loom))]
const BUCKETS: usize = (65 - SUB_BITS as usize) << SUB_BITS;

/// Under loom the buckets are loom atomics, each one a modelled object: a
/// handful keeps the window models small (values clamp into the last one;
/// only the counts matter there).
#[cfg(adaptx_loom)]
const BUCKETS: usize = 4;

/// Maps a value to its bucket index (always `< BUCKETS`).
#[inline]
fn bucket_index(v: u64) -> usize {
    // `(v | 64)` has at least bit 6 set, so `leading_zeros <= 57` and the
    // subtraction cannot underflow; `shift` is in `0..=57`.
    let shift = (63 - SUB_BITS) - (v | (1 << SUB_BITS)).leading_zeros();
    let idx = ((shift as usize) << SUB_BITS) + (v >> shift) as usize;
    // No-op by construction (max index is `BUCKETS - 1`); lets the compiler
    // drop the bounds check when indexing `[_; BUCKETS]`.
    idx.min(BUCKETS - 1)
}

/// Representative value (rounded midpoint) of bucket `idx`.
#[inline]
fn representative(idx: usize) -> u64 {
    if idx < EXACT {
        idx as u64
    } else {
        let shift = (idx >> SUB_BITS) as u32 - 1; // >= 1
        let mantissa = ((idx & ((1 << SUB_BITS) - 1)) | (1 << SUB_BITS)) as u64;
        (mantissa << shift) + (1 << (shift - 1))
    }
}

/// Allocates a zeroed, fixed-size boxed array without a large stack temporary.
fn boxed_array<T, F: FnMut() -> T>(f: F) -> Box<[T; BUCKETS]> {
    let slice: Box<[T]> = std::iter::repeat_with(f).take(BUCKETS).collect();
    match slice.try_into() {
        Ok(array) => array,
        Err(_) => unreachable!("exactly BUCKETS elements were collected"),
    }
}

/// Lock-free, fixed-size, log-linear latency histogram (nanoseconds).
///
/// 3 776 `AtomicU64` buckets (30 208 bytes), allocated once in [`new`](Self::new).
/// See the module documentation for the layout and error bound (≤ 0.78125 %).
pub(crate) struct Histogram {
    /// One atomic counter per bucket.
    buckets: Box<[AtomicU64; BUCKETS]>,
}

impl Histogram {
    /// Creates an empty histogram (the only allocation it ever performs).
    pub(crate) fn new() -> Self {
        Self {
            buckets: boxed_array(|| AtomicU64::new(0)),
        }
    }

    /// Records one latency in nanoseconds.
    ///
    /// Exactly one atomic RMW (`fetch_add(1, Release)`) on one bucket; no
    /// allocation, no lock, no loop, no float. Any `u64` is accepted.
    /// `Release` pairs with [`count_acquire`](Self::count_acquire): a reader
    /// that counts this record sees the writes this thread made before it
    /// (the window's hand-over relies on it).
    #[inline]
    pub(crate) fn record(&self, nanos: u64) {
        self.buckets[bucket_index(nanos)].fetch_add(1, Ordering::Release);
    }

    /// Records one latency, by the histogram's only writer: a load and a
    /// store (`Release`, as [`record`](Self::record)) instead of a locked
    /// read-modify-write. Only while no other thread records here.
    #[inline]
    pub(crate) fn record_alone(&self, nanos: u64) {
        add_alone(&self.buckets[bucket_index(nanos)], 1, Ordering::Release);
    }

    /// Empties the histogram and returns how many samples it held.
    ///
    /// Each bucket is swapped to 0, so a record racing with this is either
    /// counted in the result or stays in the histogram: nothing is lost.
    pub(crate) fn take_count(&self) -> u64 {
        // Swapping only the non-empty buckets keeps this cheap: most buckets
        // of a latency histogram are empty, and a swap is a locked RMW.
        self.buckets.iter().fold(0u64, |acc, b| {
            if b.load(Ordering::Relaxed) == 0 {
                acc
            } else {
                acc.saturating_add(b.swap(0, Ordering::Relaxed))
            }
        })
    }

    /// Samples recorded (`Acquire` loads: pairs with
    /// [`record`](Self::record)). Counts wrap like the
    /// buckets, so a difference of two counts stays exact.
    pub(crate) fn count_acquire(&self) -> u64 {
        self.buckets
            .iter()
            .fold(0u64, |acc, b| acc.wrapping_add(b.load(Ordering::Acquire)))
    }

    /// Adds this histogram's counts into `out` (`Relaxed` loads), for building
    /// a snapshot that merges several histograms. Does not allocate.
    pub(crate) fn add_to(&self, out: &mut Counts) {
        let mut added = 0u64;
        for (dst, src) in out.buckets.iter_mut().zip(self.buckets.iter()) {
            let c = src.load(Ordering::Relaxed);
            *dst = dst.saturating_add(c);
            added = added.saturating_add(c);
        }
        out.total = out.total.saturating_add(added);
    }
}

impl Histogram {
    /// Calls `f(representative, count)` for each non-empty bucket, in
    /// increasing order (`Relaxed` loads), of a histogram that holds
    /// `total` samples: zeros, and others no lower than `min`. Reads the
    /// zero bucket, then from `min`'s bucket up until `total` samples were
    /// seen, so a window's latencies cost the buckets they span, not all
    /// 3 776. Does not allocate.
    pub(crate) fn for_each_from(&self, min: u64, total: u64, mut f: impl FnMut(u64, u64)) {
        let mut left = total;
        let indices = std::iter::once(0).chain(bucket_index(min).max(1)..BUCKETS);
        for idx in indices {
            if left == 0 {
                break;
            }
            let c = self.buckets[idx].load(Ordering::Relaxed);
            if c != 0 {
                f(representative(idx), c);
                left = left.saturating_sub(c);
            }
        }
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Histogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.count_acquire())
            .finish()
    }
}

/// Plain (non-atomic) bucket counts with the same layout as [`Histogram`];
/// allocate once (30 208 bytes) and reuse via [`clear`](Self::clear).
#[derive(Clone)]
pub(crate) struct Counts {
    /// One counter per bucket.
    buckets: Box<[u64; BUCKETS]>,
    /// Sum of all buckets (saturating).
    total: u64,
}

impl Counts {
    /// Creates empty counts.
    pub(crate) fn new() -> Self {
        Self {
            buckets: boxed_array(|| 0),
            total: 0,
        }
    }

    #[cfg(all(test, not(adaptx_loom)))]
    /// Resets every bucket to 0 without reallocating.
    pub(crate) fn clear(&mut self) {
        self.buckets.fill(0);
        self.total = 0;
    }

    /// Total number of recorded samples.
    pub(crate) fn count(&self) -> u64 {
        self.total
    }

    /// Lower nearest-rank percentile: the value of the sample at sorted index
    /// `floor((n − 1)·p)`, reported as its bucket's representative; `None`
    /// when empty.
    ///
    /// `p` is clamped to `0.0..=1.0`; NaN is treated as `0.0`.
    pub(crate) fn percentile(&self, p: f64) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) };
        let last = self.total - 1;
        // Float-to-int `as` saturates; `min` guards against rounding up to n.
        let rank = (((last as f64) * p).floor() as u64).min(last);
        let mut seen = 0u64;
        for (idx, &c) in self.buckets.iter().enumerate() {
            seen = seen.saturating_add(c);
            if seen > rank {
                return Some(representative(idx));
            }
        }
        // Unreachable while `total` equals the bucket sum; fall back to max.
        self.max()
    }

    /// Representative of the lowest non-empty bucket; `None` when empty.
    pub(crate) fn min(&self) -> Option<u64> {
        self.buckets
            .iter()
            .position(|&c| c != 0)
            .map(representative)
    }

    /// Representative of the highest non-empty bucket; `None` when empty.
    pub(crate) fn max(&self) -> Option<u64> {
        self.buckets
            .iter()
            .rposition(|&c| c != 0)
            .map(representative)
    }

    /// Mean of the samples using bucket representatives (nanoseconds, rounded
    /// to nearest); `None` when empty. Sums in `u128`, so it cannot overflow.
    pub(crate) fn mean(&self) -> Option<u64> {
        let mut sum = 0u128;
        let mut n = 0u128;
        for (idx, &c) in self.buckets.iter().enumerate() {
            if c != 0 {
                sum += u128::from(c) * u128::from(representative(idx));
                n += u128::from(c);
            }
        }
        if n == 0 {
            return None;
        }
        // The mean is at most the largest representative, so it fits in u64.
        u64::try_from((sum + n / 2) / n).ok()
    }
}

impl Default for Counts {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Counts")
            .field("count", &self.total)
            .field("min", &self.min())
            .field("max", &self.max())
            .finish()
    }
}

#[cfg(all(test, not(adaptx_loom)))]
mod tests {
    use super::*;

    /// Relative-error tolerance asserted by the tests (1 %).
    const TOL: f64 = 0.01;
    /// Theoretical bound: 1/128.
    const BOUND: f64 = 1.0 / 128.0;

    /// Deterministic splitmix64 PRNG.
    struct SplitMix(u64);

    impl SplitMix {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        /// Uniform in [0, 1).
        fn unit(&mut self) -> f64 {
            (self.next() >> 11) as f64 / (1u64 << 53) as f64
        }

        /// Log-uniform-ish over the whole u64 range: random bits, random shift.
        fn log_uniform(&mut self) -> u64 {
            let shift = self.next() % 64;
            self.next() >> shift
        }

        /// Exponential with the given mean (nanoseconds).
        fn exponential(&mut self, mean: f64) -> u64 {
            let u = 1.0 - self.unit(); // (0, 1]
            (-u.ln() * mean) as u64
        }
    }

    fn rel_err(approx: u64, exact: u64) -> f64 {
        if exact == 0 {
            return if approx == 0 { 0.0 } else { f64::INFINITY };
        }
        (approx as f64 - exact as f64).abs() / exact as f64
    }

    /// Asserts `approx` is within 1 % of `exact` (exact below 128), returning
    /// the relative error.
    fn check(approx: u64, exact: u64, what: &str) -> f64 {
        if exact < EXACT as u64 {
            assert_eq!(approx, exact, "{what}: small values must be exact");
        }
        let e = rel_err(approx, exact);
        assert!(e <= TOL, "{what}: {approx} vs exact {exact} (err {e})");
        e
    }

    /// Checks one value's bucket and returns the representative's error.
    fn check_value(v: u64) -> f64 {
        let idx = bucket_index(v);
        assert!(idx < BUCKETS, "index {idx} out of range for {v}");
        assert_eq!(bucket_index(representative(idx)), idx, "rep of {v}");
        let e = check(representative(idx), v, "bucket representative");
        assert!(e <= BOUND + 1e-12, "{v}: err {e} exceeds 1/128");
        e
    }

    #[cfg(feature = "metrics")]
    #[test]
    fn for_each_from_reads_zeros_and_from_min_until_the_total() {
        let h = Histogram::new();
        for v in [0, 0, 5, 1_000, 1_000_000] {
            h.record(v);
        }
        let seen = |min, total| {
            let mut out = Vec::new();
            h.for_each_from(min, total, |v, c| out.push((v, c)));
            out
        };
        let all = vec![
            (0, 2),
            (5, 1),
            (representative(bucket_index(1_000)), 1),
            (representative(bucket_index(1_000_000)), 1),
        ];
        assert_eq!(seen(5, 5), all);
        // It stops at the last sample: a total of 3 reads up to 5.
        assert_eq!(seen(5, 3), all[..2]);
        // A total larger than held reads to the end and finds the same.
        assert_eq!(seen(5, 99), all);
    }

    #[test]
    fn layout_constants() {
        assert_eq!(BUCKETS, 3776);
        assert_eq!(bucket_index(u64::MAX), BUCKETS - 1);
        assert_eq!(bucket_index(0), 0);
        assert_eq!(bucket_index(127), 127);
        assert_eq!(bucket_index(128), 128);
        assert_eq!(representative(BUCKETS - 1), 255 << 56);
    }

    #[test]
    fn dense_values_are_accurate_and_monotonic() {
        let mut worst = 0.0f64;
        let mut prev = 0;
        for v in 0..100_000u64 {
            let idx = bucket_index(v);
            assert!(idx == prev || idx == prev + 1, "non-contiguous at {v}");
            prev = idx;
            if v < EXACT as u64 {
                assert_eq!(representative(idx), v);
            }
            worst = worst.max(check_value(v));
        }
        eprintln!("dense 0..100000 worst relative error: {worst:.6}");
    }

    #[test]
    fn every_bucket_bounds_are_accurate() {
        // Lower and upper edge of every bucket, derived from the index map.
        let mut worst = 0.0f64;
        for idx in EXACT..BUCKETS {
            let shift = (idx >> SUB_BITS) as u32 - 1;
            let lo = (((idx & 63) | 64) as u64) << shift;
            let hi = lo + ((1u64 << shift) - 1);
            assert_eq!(bucket_index(lo), idx);
            assert_eq!(bucket_index(hi), idx);
            worst = worst.max(check_value(lo)).max(check_value(hi));
        }
        for e in 0..64 {
            let p = 1u64 << e;
            for v in [p.saturating_sub(1), p, p.saturating_add(1)] {
                worst = worst.max(check_value(v));
            }
        }
        worst = worst.max(check_value(u64::MAX));
        eprintln!("bucket edges worst relative error: {worst:.6}");
        assert!(worst <= BOUND + 1e-12);
    }

    #[test]
    fn random_values_across_magnitudes() {
        let mut rng = SplitMix(0x5EED_1234_ABCD_0001);
        let mut worst = 0.0f64;
        for _ in 0..1_000_000 {
            worst = worst.max(check_value(rng.log_uniform()));
        }
        eprintln!("random values worst relative error: {worst:.6}");
    }

    fn exact_percentile(sorted: &[u64], p: f64) -> u64 {
        let rank = ((sorted.len() - 1) as f64 * p).floor() as usize;
        sorted[rank.min(sorted.len() - 1)]
    }

    fn counts_of(samples: &[u64]) -> Counts {
        let h = Histogram::new();
        for &s in samples {
            h.record(s);
        }
        let mut c = Counts::new();
        h.add_to(&mut c);
        c
    }

    #[test]
    fn percentiles_min_max_mean_match_exact() {
        let mut rng = SplitMix(42);
        let mut worst = 0.0f64;
        for dist in 0..2 {
            for n in [1usize, 2, 10, 1000, 100_000] {
                let mut samples: Vec<u64> = (0..n)
                    .map(|_| {
                        if dist == 0 {
                            rng.log_uniform()
                        } else {
                            rng.exponential(2_000_000.0)
                        }
                    })
                    .collect();
                let c = counts_of(&samples);
                assert_eq!(c.count(), n as u64);
                samples.sort_unstable();
                for p in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
                    let got = c.percentile(p);
                    let exact = exact_percentile(&samples, p);
                    let what = format!("dist {dist} n {n} p {p}");
                    match got {
                        Some(g) => worst = worst.max(check(g, exact, &what)),
                        None => panic!("{what}: None for non-empty"),
                    }
                }
                let exact_min = samples[0];
                let exact_max = samples[n - 1];
                let sum: u128 = samples.iter().map(|&s| u128::from(s)).sum();
                let exact_mean = (sum / n as u128) as u64;
                for (got, exact, what) in [
                    (c.min(), exact_min, "min"),
                    (c.max(), exact_max, "max"),
                    (c.mean(), exact_mean, "mean"),
                ] {
                    let g = got.unwrap_or_else(|| panic!("{what}: None"));
                    // Mean is not exact below 128 (averaging), so compare
                    // relative error only for it.
                    if what == "mean" {
                        let e = rel_err(g, exact);
                        assert!(e <= TOL || g.abs_diff(exact) <= 1, "mean {g} vs {exact}");
                        worst = worst.max(e);
                    } else {
                        worst = worst.max(check(g, exact, what));
                    }
                }
            }
        }
        eprintln!("percentile/min/max/mean worst relative error: {worst:.6}");
    }

    #[test]
    fn two_samples_p99_is_smaller() {
        let c = counts_of(&[1_000_000, 5_000_000]);
        let small = representative(bucket_index(1_000_000));
        let large = representative(bucket_index(5_000_000));
        assert_eq!(c.percentile(0.99), Some(small));
        assert_eq!(c.percentile(0.5), Some(small));
        assert_eq!(c.percentile(1.0), Some(large));
        assert_eq!(c.percentile(0.0), Some(small));
    }

    #[test]
    fn empty_is_none() {
        let c = Counts::new();
        assert_eq!(c.count(), 0);
        assert_eq!(c.percentile(0.5), None);
        assert_eq!(c.percentile(0.99), None);
        assert_eq!(c.min(), None);
        assert_eq!(c.max(), None);
        assert_eq!(c.mean(), None);
    }

    #[test]
    fn out_of_range_p_is_clamped() {
        let c = counts_of(&[10, 20, 30]);
        assert_eq!(c.percentile(-1.0), Some(10));
        assert_eq!(c.percentile(2.0), Some(30));
        assert_eq!(c.percentile(f64::NAN), Some(10));
        assert_eq!(c.percentile(f64::INFINITY), Some(30));
    }

    #[test]
    fn extremes_do_not_overflow() {
        let h = Histogram::new();
        for _ in 0..1000 {
            h.record(u64::MAX);
            h.record(0);
        }
        let mut c = Counts::new();
        h.add_to(&mut c);
        assert_eq!(c.count(), 2000);
        let top = representative(BUCKETS - 1);
        assert_eq!(c.max(), Some(top));
        assert_eq!(c.min(), Some(0));
        assert_eq!(c.mean(), Some(top / 2));
        assert_eq!(c.percentile(1.0), Some(top));
        check(top, u64::MAX, "u64::MAX");
    }

    #[test]
    fn take_count_empties() {
        let h = Histogram::new();
        for v in [1, 1000, 1_000_000, u64::MAX] {
            h.record(v);
        }
        assert_eq!(h.count_acquire(), 4);
        assert_eq!(h.take_count(), 4);
        assert_eq!(h.count_acquire(), 0);
        let mut c = Counts::new();
        h.add_to(&mut c);
        assert_eq!(c.count(), 0);
        assert_eq!(c.max(), None);

        let mut c = counts_of(&[5, 6, 7]);
        assert_eq!(c.count(), 3);
        c.clear();
        assert_eq!(c.count(), 0);
        assert_eq!(c.percentile(0.5), None);
        assert_eq!(c.mean(), None);
    }

    #[test]
    fn add_to_merges() {
        let a = Histogram::new();
        let b = Histogram::new();
        for v in 0..100u64 {
            a.record(v * 1000);
        }
        for v in 100..300u64 {
            b.record(v * 1000);
        }
        let mut c = Counts::new();
        a.add_to(&mut c);
        b.add_to(&mut c);
        assert_eq!(c.count(), 300);
        let mut samples: Vec<u64> = (0..300u64).map(|v| v * 1000).collect();
        samples.sort_unstable();
        for p in [0.0, 0.25, 0.5, 0.99, 1.0] {
            let got = c.percentile(p).unwrap_or_default();
            check(got, exact_percentile(&samples, p), "merged percentile");
        }
        assert_eq!(c.min(), Some(0));
        // Adding the same histogram again doubles the counts.
        a.add_to(&mut c);
        assert_eq!(c.count(), 400);
        let d = c.clone();
        assert_eq!(d.count(), 400);
    }

    #[test]
    fn concurrent_records_are_counted_exactly() {
        let h = Histogram::new();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let h = &h;
                s.spawn(move || {
                    let mut rng = SplitMix(t + 1);
                    for i in 0..10_000u64 {
                        // Half the records hit one shared bucket (contention).
                        h.record(if i % 2 == 0 { 1_000 } else { rng.log_uniform() });
                    }
                });
            }
        });
        let mut c = Counts::new();
        h.add_to(&mut c);
        assert_eq!(c.count(), 40_000);
        let shared = c.buckets[bucket_index(1_000)];
        assert!(shared >= 20_000, "shared bucket lost updates: {shared}");
    }
}
