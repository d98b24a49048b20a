//! Vector's adaptive request concurrency (ARC). A re-implementation from
//! the published description (vectordotdev/vector @ c3445d42d2,
//! `src/sinks/util/adaptive_concurrency/controller.rs`), not their code.
//!
//! # Cadence, mapped onto adaptx windows
//!
//! Vector decides once per smoothed RTT, at the first completion after
//! `next_update = last decision + m` (m the EWMA of window-mean RTTs). The
//! simulator gives this peer short adaptx windows ([`VECTOR_TICK`], 5 ms);
//! the law sums their durations and runs Vector's decision on the first
//! tick that ends at or after `m` since the last decision, so a decision is
//! at most one tick late. What Vector keeps per decision window is rebuilt
//! from the ticks:
//!
//! - the window mean of **successful** RTTs: the sample-weighted mean of the
//!   ticks without failures (a summary's mean mixes successes and failures,
//!   so a tick with a failure contributes no RTT — an approximation);
//! - `had_back_pressure`: any tick with a failure (a rejection or a timeout,
//!   Vector's "retriable response" and "timeout");
//! - `reached_limit`: any tick whose peak in-flight reached the limit
//!   (Vector tests in-flight ≥ limit at request start).

use std::time::Duration;

use adaptx::{ControlLaw, WindowSummary};

/// `decrease_ratio`: the multiplicative decrease, rounded down.
pub const VECTOR_DECREASE_RATIO: f64 = 0.9;

/// `ewma_alpha`: the weight of the newest window mean.
pub const VECTOR_EWMA_ALPHA: f64 = 0.4;

/// `rtt_deviation_scale`: the multiple of the EWMA's standard deviation a
/// mean must exceed to count as a rise.
pub const VECTOR_RTT_DEVIATION_SCALE: f64 = 2.5;

/// The adaptx sample window the simulator gives this peer: the granularity
/// at which "once per smoothed RTT" is counted.
pub const VECTOR_TICK: Duration = Duration::from_millis(5);

/// A re-implementation of Vector's **adaptive request concurrency** from
/// its published description — not their code.
///
/// # Algorithm
///
/// Once per smoothed RTT `m` (see the module docs), with `τ = 2.5·√v`, `L`
/// the limit and `mean` the decision window's mean of successful RTTs:
///
/// - **+1** if `L < max`, the limit was reached, there was no back-pressure,
///   `mean` exists and `mean ≤ m`;
/// - otherwise **`max(1, ⌊0.9·L⌋)`** if `L > 1` and there was back-pressure
///   or `mean` (0 if none) `≥ m + τ`;
/// - otherwise hold.
///
/// Then `mean` is folded into the EWMA (`d = mean − m`, `m ← m + 0.4·d`,
/// `v ← 0.6·(v + 0.4·d²)`) and the next decision is due `m` later. The
/// first successful sample ever only seeds the EWMA (`v = 0`); its window is
/// not reset. With a flat RTT (`v = 0`) a window that did not reach the
/// limit *decreases* it (the `≥`): an unused limit decays, as in Vector.
#[derive(Debug, Clone)]
pub struct VectorArc {
    max: usize,
    /// (m, v): the EWMA of RTT and its variance, ns and ns².
    ewma: Option<(f64, f64)>,
    /// Nanoseconds since the last decision (or the seeding sample).
    elapsed: u64,
    /// Sum of successful RTTs (ns) and their count in the decision window.
    rtt_sum: f64,
    rtt_count: u64,
    back_pressure: bool,
    reached: bool,
}

impl VectorArc {
    /// ARC with Vector's defaults, capped at `max_limit` (Vector's floor is
    /// 1, below any scenario's `min_limit`, which the limiter applies).
    pub fn new(max_limit: usize) -> Self {
        Self {
            max: max_limit.max(1),
            ewma: None,
            elapsed: 0,
            rtt_sum: 0.0,
            rtt_count: 0,
            back_pressure: false,
            reached: false,
        }
    }

    /// The EWMA of RTT and its variance (ns, ns²), once seeded.
    pub fn ewma(&self) -> Option<(f64, f64)> {
        self.ewma
    }

    fn clear_window(&mut self) {
        self.elapsed = 0;
        self.rtt_sum = 0.0;
        self.rtt_count = 0;
        self.back_pressure = false;
        self.reached = false;
    }

    /// Vector's decision, from (m, v) before this window is folded in.
    fn decide(&self, limit: usize, mean: Option<f64>, m: f64, v: f64) -> usize {
        let tau = VECTOR_RTT_DEVIATION_SCALE * v.sqrt();
        let grow = limit < self.max && self.reached && !self.back_pressure;
        if grow && mean.is_some_and(|x| x <= m) {
            limit + 1
        } else if limit > 1 && (self.back_pressure || mean.unwrap_or(0.0) >= m + tau) {
            ((limit as f64 * VECTOR_DECREASE_RATIO) as usize).max(1)
        } else {
            limit
        }
    }
}

impl ControlLaw for VectorArc {
    fn name(&self) -> &'static str {
        "vector_arc (peer)"
    }

    fn next_limit(&mut self, limit: usize, w: &WindowSummary) -> usize {
        self.elapsed = self.elapsed.saturating_add(w.duration_nanos);
        if w.failures + w.stale_failures > 0 {
            self.back_pressure = true;
        } else if w.samples > 0 {
            self.rtt_sum += w.mean_rtt_nanos * w.samples as f64;
            self.rtt_count += w.samples;
        }
        if w.peak_in_flight >= limit {
            self.reached = true;
        }
        let mean = (self.rtt_count > 0).then(|| self.rtt_sum / self.rtt_count as f64);
        let Some((m, v)) = self.ewma else {
            // The first sample seeds the EWMA and arms the first decision
            // one RTT later; the window is not reset.
            if let Some(x) = mean {
                self.ewma = Some((x, 0.0));
                self.elapsed = 0;
            }
            return limit;
        };
        if (self.elapsed as f64) < m {
            return limit;
        }
        let next = self.decide(limit, mean, m, v);
        if let Some(x) = mean {
            let d = x - m;
            let m = m + VECTOR_EWMA_ALPHA * d;
            let v = (1.0 - VECTOR_EWMA_ALPHA) * (v + VECTOR_EWMA_ALPHA * d * d);
            self.ewma = Some((m, v));
        }
        self.clear_window();
        next
    }

    fn reset(&mut self) {
        *self = Self::new(self.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peers::window;

    /// One 5 ms tick of `n` samples at `rtt_ms`, peak `peak`.
    fn tick(n: u64, peak: usize, rtt_ms: f64) -> WindowSummary {
        window(5, n, peak, rtt_ms)
    }

    #[test]
    fn first_response_only_seeds_then_a_reached_limit_grows() {
        // service.rs `increases_limit`: the first response seeds the EWMA;
        // the second, at the same RTT with the limit reached, gives 2.
        let mut arc = VectorArc::new(200);
        assert_eq!(arc.next_limit(1, &window(1000, 1, 1, 1000.0)), 1);
        assert_eq!(arc.ewma(), Some((1e9, 0.0)));
        assert_eq!(arc.next_limit(1, &window(1000, 1, 1, 1000.0)), 2);
    }

    #[test]
    fn back_pressure_decreases_with_a_floor_of_one() {
        // `handles_deferral`, with Vector's default ratio 0.9: ⌊0.9·2⌋ = 1.
        let mut arc = VectorArc::new(200);
        arc.next_limit(2, &window(1000, 1, 2, 1000.0));
        let mut deferred = window(1000, 1, 2, 1000.0);
        deferred.failures = 1;
        assert_eq!(arc.next_limit(2, &deferred), 1);
        // At 1 there is no decrease.
        assert_eq!(arc.next_limit(1, &deferred), 1);
    }

    #[test]
    fn decides_once_per_smoothed_rtt_counted_in_ticks() {
        let mut arc = VectorArc::new(200);
        arc.next_limit(10, &tick(5, 10, 20.0)); // seeds m = 20 ms
        // Three ticks (15 ms) are not an RTT yet; the fourth (20 ms) is.
        for _ in 0..3 {
            assert_eq!(arc.next_limit(10, &tick(5, 10, 20.0)), 10);
        }
        assert_eq!(arc.next_limit(10, &tick(5, 10, 20.0)), 11);
        // The window restarted: the next decision is 20 ms later again.
        for _ in 0..3 {
            assert_eq!(arc.next_limit(11, &tick(5, 11, 20.0)), 11);
        }
        assert_eq!(arc.next_limit(11, &tick(5, 11, 20.0)), 12);
    }

    #[test]
    fn ewma_and_band_follow_the_derived_vector() {
        // m = 100 ms, v = 0; a window mean of 110 ms gives m = 104, v = 24
        // ms²; τ is then 12.25 ms, so 115 ms (< 116.25) holds.
        let mut arc = VectorArc {
            ewma: Some((100e6, 0.0)),
            ..VectorArc::new(200)
        };
        // 110 ms at a window that did not reach the limit: 110 ≥ 100 + 0 → decrease.
        assert_eq!(arc.next_limit(10, &window(100, 10, 5, 110.0)), 9);
        let (m, v) = arc.ewma().unwrap();
        assert!((m - 104e6).abs() < 1e-6 * 104e6, "{m}");
        assert!((v - 24e12).abs() < 1e-6 * 24e12, "{v}");
        assert_eq!(arc.next_limit(9, &window(105, 10, 5, 115.0)), 9);
        // 117 ms (≥ 116.25 against the updated m, v) would decrease:
        let mut probe = arc.clone();
        let (m2, v2) = probe.ewma().unwrap();
        let bar = m2 + 2.5 * v2.sqrt();
        let w = window(200, 10, 5, bar / 1e6 + 0.01);
        assert_eq!(probe.next_limit(9, &w), 8);
    }

    #[test]
    fn first_window_keeps_the_seeding_sample() {
        // The seeding window is not reset: the first decision window
        // averages it in, (100 + 110) / 2 = 105 ms, so m = 100 + 0.4·5.
        let mut arc = VectorArc::new(200);
        arc.next_limit(10, &window(100, 10, 5, 100.0));
        arc.next_limit(10, &window(100, 10, 5, 110.0));
        let (m, _) = arc.ewma().unwrap();
        assert!((m - 102e6).abs() < 1e-6 * 102e6, "{m}");
    }

    #[test]
    fn flat_latency_below_the_limit_decays_it() {
        let mut arc = VectorArc::new(200);
        arc.next_limit(10, &window(50, 10, 3, 50.0));
        let mut limit = 10;
        for _ in 0..5 {
            limit = arc.next_limit(limit, &window(50, 10, 3, 50.0));
        }
        // 10 → 9 → 8 → 7 → 6 → 5.
        assert_eq!(limit, 5);
    }

    #[test]
    fn a_failed_tick_contributes_back_pressure_but_no_rtt() {
        let mut arc = VectorArc::new(200);
        arc.next_limit(10, &tick(5, 10, 20.0));
        let mut failed = tick(5, 10, 900.0);
        failed.failures = 1;
        for _ in 0..3 {
            arc.next_limit(10, &failed);
        }
        assert_eq!(arc.next_limit(10, &tick(5, 10, 20.0)), 9);
        // The 900 ms RTTs of the failed ticks did not reach the EWMA.
        assert_eq!(arc.ewma(), Some((20e6, 0.0)));
    }

    #[test]
    fn rapid_decrease_after_growth() {
        // `rapid_decrease` (ratio 0.9 here): rounds at concurrency 1, 1, 2, 3
        // bring the limit to 4, then one deferral gives ⌊0.9·4⌋ = 3.
        let mut arc = VectorArc::new(200);
        let mut limit = 1;
        for peak in [1, 1, 2, 3] {
            limit = arc.next_limit(limit, &window(1000, 1, peak, 1000.0));
        }
        assert_eq!(limit, 4);
        let mut d = window(1000, 1, 4, 1000.0);
        d.failures = 1;
        assert_eq!(arc.next_limit(limit, &d), 3);
    }

    #[test]
    fn at_max_a_flat_window_decreases_by_the_ge_rule() {
        // No growth past max; and with v = 0, mean ≥ m + 0 decreases (Vector
        // rounds to whole µs in its tests to avoid exactly this).
        let mut arc = VectorArc::new(5);
        arc.next_limit(5, &window(10, 5, 5, 10.0));
        assert_eq!(arc.next_limit(5, &window(10, 5, 5, 10.0)), 4);
        // Below max, the same window grows.
        let mut arc = VectorArc::new(6);
        arc.next_limit(5, &window(10, 5, 5, 10.0));
        assert_eq!(arc.next_limit(5, &window(10, 5, 5, 10.0)), 6);
    }
}
