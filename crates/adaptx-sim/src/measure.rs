//! What a run measures: one [`Second`] per second of virtual time, per client
//! and in total, and the summaries the report and the bands read.

use std::ops::Range;

use crate::scenario::Law;
use crate::time::SECOND;

/// What limits a client's concurrency in a run.
///
/// # Examples
///
/// ```
/// use adaptx_sim::{Law, Policy, Scenario, run};
///
/// let sc = Scenario::from_toml("mine.toml", r#"
///     name = "mine"
///     duration = "20s"
///     [backend]
///     service_time = "10ms"
///     max_concurrency = 8
///     over_limit = "reject"
///     [demand]
///     kind = "closed"
///     workers = 40
/// "#)?;
/// for policy in [Policy::Law(Law::Aimd), Policy::Fixed(4)] {
///     let r = run(&sc, policy, 7);
///     assert_eq!(r.seconds.len(), 20, "{policy}");
/// }
/// # Ok::<(), adaptx_sim::ScenarioError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Policy {
    /// An adaptx control law, with the scenario's limiter options.
    Law(Law),
    /// A fixed limit: an adaptx limiter built with `min_limit = max_limit =
    /// initial_limit = n`.
    Fixed(usize),
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Policy::Law(l) => write!(f, "{l}"),
            Policy::Fixed(n) => write!(f, "fixed {n}"),
        }
    }
}

/// Measures of one second of virtual time: the second `[k s, (k+1) s)`, with
/// events at exactly `(k+1) s` that are completions counted in it (the
/// second closes after the completions of its last instant).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Second {
    /// The limit when the second closed (summed over clients in a total).
    pub limit: u64,
    /// The lowest limit during the second (summed over clients in a total).
    pub limit_min: u64,
    /// The highest limit during the second (in a total: the highest of any
    /// one client).
    pub limit_max: u64,
    /// The median of the limit over the second, weighted by time: the
    /// lowest level the limit was at or below for at least half of it
    /// (summed over clients in a total). Where the limit *rests*: a
    /// one-window probe or gift at the closing instant does not move it.
    pub limit_median: u64,
    /// Time-average of the permits held.
    pub in_flight: f64,
    /// Most permits held at once.
    pub in_flight_peak: u64,
    /// Successful answers.
    pub goodput: u64,
    /// Answers that were client errors (not overload; not goodput).
    pub client_errors: u64,
    /// Overload errors answered by the backend (ceiling or rate limit).
    pub rejects: u64,
    /// Requests that timed out (dropped or too slow).
    pub timeouts: u64,
    /// Open-demand arrivals that found no free permit.
    pub shed: u64,
    /// Open-demand arrivals (0 for a closed demand).
    pub arrivals: u64,
    /// Requests admitted and sent to the backend.
    pub sent: u64,
    /// Median latency of the second's successes, ns (totals only).
    pub p50_ns: Option<u64>,
    /// 99th-percentile latency of the second's successes, ns (totals only).
    pub p99_ns: Option<u64>,
    /// Goodput ceiling during the second, per second (a client's share in a
    /// client's series), from the mean service time as simulated: see
    /// [`crate::capacity`].
    pub capacity: f64,
    /// Best concurrency C* during the second, if the backend has one (a
    /// client's share in a client's series).
    pub c_star: Option<f64>,
    /// Invariant violations seen during the second.
    pub violations: u64,
    /// The latencies of the second's successes (totals only): what a range's
    /// percentiles are computed from.
    pub latency: Latencies,
}

/// How long each limit held during the current second: what
/// [`Second::limit_median`] is read from. One entry per distinct level in the
/// second: a few for a concurrency limit (it moves once per window at most),
/// up to hundreds for a rate that moves with the clock.
#[derive(Debug, Clone)]
pub(crate) struct LimitMedian {
    /// Time held so far in the second, per limit, in order of first use.
    times: Vec<(usize, u64)>,
    /// The limit in force, and since when (or since the second began).
    current: usize,
    since: u64,
}

impl LimitMedian {
    /// A first second that opens at time 0 with limit `limit`.
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            times: Vec::new(),
            current: limit,
            since: 0,
        }
    }

    /// The limit in force becomes `limit` at `t`.
    pub(crate) fn change(&mut self, t: u64, limit: usize) {
        self.add(t);
        self.current = limit;
    }

    /// Adds the time from `since` to `t` to the limit in force.
    fn add(&mut self, t: u64) {
        let dt = t.saturating_sub(self.since);
        self.since = t;
        let l = self.current;
        match self.times.iter_mut().find(|(x, _)| *x == l) {
            Some((_, d)) => *d += dt,
            None => self.times.push((l, dt)),
        }
    }

    /// Closes the second at `t`: the lowest level the limit was at or below
    /// for at least half of it. The next second opens with the limit in
    /// force.
    pub(crate) fn close(&mut self, t: u64) -> u64 {
        self.add(t);
        self.times.sort_unstable_by_key(|&(l, _)| l);
        let total: u64 = self.times.iter().map(|&(_, d)| d).sum();
        let mut below = 0;
        let median = self
            .times
            .iter()
            .find(|&&(_, d)| {
                below += d;
                2 * below >= total
            })
            .map_or(self.current, |&(l, _)| l);
        self.times.clear();
        median as u64
    }
}

impl Second {
    /// Overload failures: rejections and timeouts.
    pub fn overload(&self) -> u64 {
        self.rejects + self.timeouts
    }
}

/// The latencies of one second's successes, in the buckets of the run's
/// log-linear histogram (exact below 256 ns, buckets at most 1/128 of the
/// value wide above), keeping only the buckets that hold a sample, and the
/// exact minimum and maximum.
///
/// Merging the seconds of a range gives exactly the histogram of every
/// success in the range, so a range's percentile is exact to the
/// histogram's precision (within 0.8 %, and exact for a flat latency) — it
/// is not an average of per-second percentiles.
///
/// # Cost
///
/// 8 bytes per non-empty bucket plus 32 bytes per second. A 50 ms latency
/// with 10 % exponential jitter fills about 60 buckets a second at any
/// rate, so about 0.5 kB per second of virtual time: 1.8 MB for an hour
/// (totals only; the clients' series carry none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Latencies {
    /// (bucket, count), in bucket order.
    buckets: Box<[(u16, u32)]>,
    min: u64,
    max: u64,
}

impl Latencies {
    /// The latencies `values` (ns), bucketed.
    pub fn from_values(values: impl IntoIterator<Item = u64>) -> Self {
        let mut h = Hist::new();
        for v in values {
            h.record(v);
        }
        h.take()
    }

    /// Number of latencies.
    pub fn len(&self) -> u64 {
        self.buckets.iter().map(|&(_, c)| u64::from(c)).sum()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// Bytes held on the heap.
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.buckets)
    }
}

/// Successes over `seconds` as a fraction of the arrivals (open demand) or,
/// without arrivals, of the requests sent; NaN with neither.
pub(crate) fn success_fraction(seconds: &[Second]) -> f64 {
    let good: u64 = seconds.iter().map(|s| s.goodput).sum();
    let arrivals: u64 = seconds.iter().map(|s| s.arrivals).sum();
    let sent: u64 = seconds.iter().map(|s| s.sent).sum();
    good as f64 / if arrivals > 0 { arrivals } else { sent } as f64
}

/// The `q` quantile (lower nearest rank) of the latencies of every success
/// in `seconds`, ns; `None` if there are none.
pub(crate) fn quantile(seconds: &[Second], q: f64) -> Option<u64> {
    let mut h = Hist::new();
    for s in seconds {
        h.add(&s.latency);
    }
    h.quantile(q)
}

/// Goodput over `seconds` as a fraction of their capacity.
pub(crate) fn goodput_fraction(seconds: &[Second]) -> f64 {
    let cap: f64 = seconds.iter().map(|s| s.capacity).sum();
    seconds.iter().map(|s| s.goodput).sum::<u64>() as f64 / cap
}

/// Overload failures over `seconds` as a fraction of requests sent; 0 if
/// none was sent.
pub(crate) fn overload_fraction(seconds: &[Second]) -> f64 {
    let sent: u64 = seconds.iter().map(|s| s.sent).sum();
    let bad: u64 = seconds.iter().map(Second::overload).sum();
    if sent == 0 {
        0.0
    } else {
        bad as f64 / sent as f64
    }
}

/// Arrivals shed over `seconds` as a fraction of arrivals; 0 if none
/// arrived.
pub(crate) fn shed_fraction(seconds: &[Second]) -> f64 {
    let arrivals: u64 = seconds.iter().map(|s| s.arrivals).sum();
    let shed: u64 = seconds.iter().map(|s| s.shed).sum();
    if arrivals == 0 {
        0.0
    } else {
        shed as f64 / arrivals as f64
    }
}

/// Mean over `seconds` of the closing limit.
pub(crate) fn mean_limit(seconds: &[Second]) -> f64 {
    mean(seconds.iter().map(|s| s.limit as f64))
}

/// Indices of the whole seconds that overlap `[from, to)` (ns) in a series
/// of `n` seconds.
pub(crate) fn range(n: usize, from: u64, to: u64) -> Range<usize> {
    let a = ((from / SECOND) as usize).min(n);
    let b = (to.div_ceil(SECOND) as usize).clamp(a, n);
    a..b
}

/// The result of one run of one scenario with one policy and seed.
///
/// # Examples
///
/// ```
/// use adaptx_sim::{Law, Policy, Scenario, run};
///
/// let sc = Scenario::from_toml("mine.toml", r#"
///     name = "mine"
///     duration = "20s"
///     [backend]
///     service_time = "10ms"
///     max_concurrency = 8
///     over_limit = "reject"
///     [demand]
///     kind = "closed"
///     workers = 40
/// "#)?;
/// let r = run(&sc, Policy::Law(Law::Ceiling), 0);
/// let served: u64 = r.seconds.iter().map(|s| s.goodput).sum();
/// assert!(served > 0);
/// assert_eq!(r, run(&sc, Policy::Law(Law::Ceiling), 0)); // deterministic
/// # Ok::<(), adaptx_sim::ScenarioError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// The scenario's id (its file name without `.toml`).
    pub scenario: String,
    /// What limited the clients.
    pub policy: Policy,
    /// The seed.
    pub seed: u64,
    /// Totals over clients, one per second.
    pub seconds: Vec<Second>,
    /// Each client's seconds.
    pub clients: Vec<Vec<Second>>,
    /// Each request class's seconds (`[[class]]`), summed over clients;
    /// their capacity is the total's, and they carry their latencies.
    pub classes: Vec<Vec<Second>>,
    /// Index of the first steady second.
    pub steady_from: usize,
    /// Median latency of the steady successes, ns.
    pub steady_p50_ns: Option<u64>,
    /// 99th-percentile latency of the steady successes, ns.
    pub steady_p99_ns: Option<u64>,
    /// How many times any client's limit went down.
    pub decreases: u64,
    /// The sum of the clients' initial limits.
    pub initial_limit: u64,
    /// Each client's `[min_limit, max_limit]`.
    pub limit_bounds: (usize, usize),
}

impl Run {
    /// The steady seconds.
    pub fn steady(&self) -> &[Second] {
        &self.seconds[self.steady_from.min(self.seconds.len())..]
    }

    /// Requests sent to the backend in the whole run.
    pub fn requests(&self) -> u64 {
        self.seconds.iter().map(|s| s.sent).sum()
    }

    /// Steady goodput as a fraction of steady capacity.
    pub fn goodput_fraction(&self) -> f64 {
        goodput_fraction(self.steady())
    }

    /// Steady goodput per second.
    pub fn steady_goodput(&self) -> f64 {
        mean(self.steady().iter().map(|s| s.goodput as f64))
    }

    /// Steady mean of the closing limit.
    pub fn mean_limit(&self) -> f64 {
        mean_limit(self.steady())
    }

    /// Steady mean of C*, if the backend has one.
    pub fn mean_c_star(&self) -> Option<f64> {
        let s = self.steady();
        let v: Option<Vec<f64>> = s.iter().map(|s| s.c_star).collect();
        v.map(|v| mean(v.into_iter()))
    }

    /// Steady overload failures as a fraction of requests sent.
    pub fn overload_fraction(&self) -> f64 {
        overload_fraction(self.steady())
    }

    /// Steady overload failures.
    pub fn steady_overload(&self) -> u64 {
        self.steady().iter().map(Second::overload).sum()
    }

    /// Seconds in `[from, to)` (whole seconds, clamped to the run).
    pub fn between(&self, from: u64, to: u64) -> &[Second] {
        &self.seconds[range(self.seconds.len(), from, to)]
    }

    /// The series a band reads: client `client`'s, or the totals; empty for
    /// a client the run does not have.
    pub fn series(&self, client: Option<usize>) -> &[Second] {
        match client {
            None => &self.seconds,
            Some(c) => self.clients.get(c).map_or(&[], Vec::as_slice),
        }
    }
}

/// Arithmetic mean; NaN for no values.
pub(crate) fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (n, s) = v.fold((0u64, 0.0), |(n, s), x| (n + 1, s + x));
    s / n as f64
}

/// Sub-buckets per power of two: bucket width ≤ 1/128 of the value (0.8 %).
const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;
/// Values below this are their own bucket.
const LINEAR: u64 = 2 * SUB;
const BUCKETS: usize = ((64 - SUB_BITS) as usize + 1) * SUB as usize;

/// A log-linear latency histogram: exact below 256 ns, within 0.8 % above;
/// percentiles are clamped to the exact minimum and maximum, so a flat
/// latency reads exactly.
#[derive(Debug, Clone)]
pub(crate) struct Hist {
    /// u64: a range of an hour-long run can put more than 2³² successes in
    /// one bucket.
    counts: Box<[u64]>,
    n: u64,
    min: u64,
    max: u64,
}

impl Hist {
    pub(crate) fn new() -> Self {
        Self {
            counts: vec![0; BUCKETS].into_boxed_slice(),
            n: 0,
            min: u64::MAX,
            max: 0,
        }
    }

    #[inline]
    fn index(v: u64) -> usize {
        if v < LINEAR {
            v as usize
        } else {
            let msb = 63 - v.leading_zeros();
            let shift = msb - SUB_BITS;
            (((shift + 1) as u64) << SUB_BITS | ((v >> shift) & (SUB - 1))) as usize
        }
    }

    /// The middle of bucket `i`.
    fn value(i: usize) -> u64 {
        let i = i as u64;
        if i < LINEAR {
            i
        } else {
            let shift = (i >> SUB_BITS) - 1;
            let low = (SUB | (i & (SUB - 1))) << shift;
            low + ((1u64 << shift) >> 1)
        }
    }

    #[inline]
    pub(crate) fn record(&mut self, v: u64) {
        self.counts[Self::index(v)] += 1;
        self.n += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// The histogram's buckets as [`Latencies`]; leaves it empty. Scans only
    /// the buckets between the minimum's and the maximum's.
    pub(crate) fn take(&mut self) -> Latencies {
        if self.n == 0 {
            return Latencies::default();
        }
        let span = Self::index(self.min)..=Self::index(self.max);
        let buckets = self.counts[span.clone()]
            .iter()
            .zip(span.clone())
            .filter(|(c, _)| **c > 0)
            // BUCKETS ≤ 2^16 (checked by a test); one second's count of
            // one bucket fits a u32 at any simulated rate.
            .map(|(&c, i)| (i as u16, u32::try_from(c).unwrap_or(u32::MAX)))
            .collect();
        self.counts[span].fill(0);
        let out = Latencies {
            buckets,
            min: self.min,
            max: self.max,
        };
        self.n = 0;
        self.min = u64::MAX;
        self.max = 0;
        out
    }

    /// Adds the latencies of `l`.
    pub(crate) fn add(&mut self, l: &Latencies) {
        if l.is_empty() {
            return;
        }
        for &(i, c) in &*l.buckets {
            self.counts[usize::from(i)] += u64::from(c);
            self.n += u64::from(c);
        }
        self.min = self.min.min(l.min);
        self.max = self.max.max(l.max);
    }

    /// The `q` quantile, lower nearest rank (the ⌈q·n⌉-th smallest).
    pub(crate) fn quantile(&self, q: f64) -> Option<u64> {
        if self.n == 0 {
            return None;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(Self::value(i).clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_tight() {
        let mut prev = 0;
        for v in [
            0u64,
            1,
            255,
            256,
            257,
            1000,
            50_000_000,
            3_000_000_000,
            u64::MAX / 2,
        ] {
            let i = Hist::index(v);
            assert!(i >= prev && i < BUCKETS, "{v}");
            prev = i;
            let back = Hist::value(i);
            let err = (back as f64 - v as f64).abs() / (v.max(1) as f64);
            assert!(err <= 1.0 / 128.0, "{v} -> {back}");
        }
    }

    #[test]
    fn bucket_indices_fit_in_u16() {
        assert!(BUCKETS <= usize::from(u16::MAX) + 1);
        assert_eq!(Hist::index(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn merged_seconds_read_as_one_histogram() {
        let values: Vec<u64> = (0..3000u64).map(|v| 40_000_000 + v * v * 7).collect();
        let mut whole = Hist::new();
        let mut part = Hist::new();
        let mut merged = Hist::new();
        for chunk in values.chunks(700) {
            for &v in chunk {
                whole.record(v);
                part.record(v);
            }
            let l = part.take();
            assert_eq!(l.len(), chunk.len() as u64);
            merged.add(&l);
        }
        assert_eq!(part.n, 0);
        assert!(part.counts.iter().all(|&c| c == 0));
        for q in [0.0, 0.01, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(merged.quantile(q), whole.quantile(q), "q = {q}");
        }
    }

    #[test]
    fn flat_latency_reads_exactly() {
        let mut h = Hist::new();
        for _ in 0..100 {
            h.record(50_000_000);
        }
        assert_eq!(h.quantile(0.5), Some(50_000_000));
        assert_eq!(h.quantile(0.99), Some(50_000_000));
    }

    #[test]
    fn quantiles_of_a_ramp() {
        let mut h = Hist::new();
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        let p50 = h.quantile(0.5).unwrap() as f64;
        let p99 = h.quantile(0.99).unwrap() as f64;
        assert!((p50 / 500_000.0 - 1.0).abs() < 0.01, "{p50}");
        assert!((p99 / 990_000.0 - 1.0).abs() < 0.01, "{p99}");
    }

    #[test]
    fn limit_median_is_where_the_limit_rests_not_where_it_closes() {
        const S: u64 = 1_000_000_000;
        let mut h = LimitMedian::new(20);
        // At 20 until 20 ms, then at 10 with a 2 ms probe of 11 every 66 ms
        // and one at the very end: the second rests at 10, closes at 11.
        h.change(20_000_000, 10);
        let mut t = 20_000_000;
        while t + 66_000_000 < S {
            t += 64_000_000;
            h.change(t, 11);
            t += 2_000_000;
            h.change(t, 10);
        }
        h.change(S - 1_000_000, 11);
        assert_eq!(h.close(S), 10);
        // The next second opens at the limit in force (11): 400 ms there,
        // 600 ms at 12.
        h.change(S + 400_000_000, 12);
        assert_eq!(h.close(2 * S), 12);
        // Half at 12, half at 3: at or below 3 for half the second.
        h.change(2 * S + 500_000_000, 3);
        assert_eq!(h.close(3 * S), 3);
        // A second with no change holds the limit in force.
        assert_eq!(h.close(4 * S), 3);
        // Falling through levels: 300 ms at 20, then 175 ms at each of 10,
        // 9, 8 and 7. No level held longer than 20, but the limit was at or
        // below 9 for 525 ms.
        h.change(4 * S, 20);
        for (k, l) in [10, 9, 8, 7].into_iter().enumerate() {
            h.change(4 * S + 300_000_000 + k as u64 * 175_000_000, l);
        }
        assert_eq!(h.close(5 * S), 9);
    }
}
