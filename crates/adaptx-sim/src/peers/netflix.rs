//! Netflix concurrency-limits: `Gradient2Limit` and `AIMDLimit`, each under
//! `WindowedLimit`. Re-implementations from the published description
//! (Netflix/concurrency-limits @ 78a74b9, `concurrency-limits-core`:
//! `limit/Gradient2Limit.java`, `limit/AIMDLimit.java`,
//! `limit/WindowedLimit.java`, `limit/measurement/ExpAvgMeasurement.java`),
//! not their code.
//!
//! # WindowedLimit, mapped onto adaptx windows
//!
//! `WindowedLimit` collects samples for `clamp(2·minRTT, 1 s, 1 s)` = 1 s
//! and publishes (the window's average RTT, its **max** in-flight, whether
//! any sample dropped) to the inner law, but discards a window of fewer than
//! 10 samples whole, drop flags included. The simulator gives these peers
//! 1 s adaptx windows, so one adaptx window is one Netflix window; the
//! summary's mean (failures included, as Netflix averages dropped samples
//! too) is the tracked RTT and its peak in-flight the in-flight. Not
//! reproduced: the 100 µs minimum-RTT filter (a summary cannot drop single
//! samples; no simulated latency is that short).

use adaptx::{ControlLaw, WindowSummary};

/// `WindowedLimit`'s window: `minWindowTime` = `maxWindowTime` = 1 s.
pub const NETFLIX_WINDOW: std::time::Duration = std::time::Duration::from_secs(1);

/// `WindowedLimit`'s `windowSize`: a window with fewer samples is discarded.
pub const NETFLIX_WINDOW_MIN_SAMPLES: u64 = 10;

/// Gradient2's `rttTolerance`: latency up to 1.5× the long RTT is accepted.
pub const NETFLIX_G2_TOLERANCE: f64 = 1.5;

/// Gradient2's `smoothing` of the limit.
pub const NETFLIX_G2_SMOOTHING: f64 = 0.2;

/// Gradient2's `queueSize`: the constant 4 (its default).
pub const NETFLIX_G2_QUEUE: f64 = 4.0;

/// Gradient2's `longWindow`, in updates (here: windows): EMA factor 2/(N+1).
pub const NETFLIX_G2_LONG_WINDOW: u32 = 600;

/// `ExpAvgMeasurement`'s warm-up: the first 10 values are averaged plainly.
const LONG_WARMUP: u32 = 10;

/// Gradient2's drift reset: when long/short > 2 the long RTT is ×0.95.
const DRIFT_RATIO: f64 = 2.0;
const DRIFT_DECAY: f64 = 0.95;

/// Gradient2's bounds on the gradient.
const G2_MIN_GRADIENT: f64 = 0.5;
const G2_MAX_GRADIENT: f64 = 1.0;

/// AIMDLimit's `backoffRatio`.
pub const NETFLIX_AIMD_BACKOFF: f64 = 0.9;

/// AIMDLimit's `timeout`: an RTT above it counts as a drop.
pub const NETFLIX_AIMD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether `WindowedLimit` publishes the window at all.
fn published(w: &WindowSummary) -> bool {
    w.samples >= NETFLIX_WINDOW_MIN_SAMPLES
}

/// `ExpAvgMeasurement`: the plain mean of the first `warmup` values, then an
/// EMA with factor `2 / (window + 1)`.
#[derive(Debug, Clone, Copy)]
struct ExpAvg {
    window: u32,
    warmup: u32,
    count: u32,
    sum: f64,
    value: f64,
}

impl ExpAvg {
    const fn new(window: u32, warmup: u32) -> Self {
        Self {
            window,
            warmup,
            count: 0,
            sum: 0.0,
            value: 0.0,
        }
    }

    fn add(&mut self, x: f64) -> f64 {
        if self.count < self.warmup {
            self.count += 1;
            self.sum += x;
            self.value = self.sum / f64::from(self.count);
        } else {
            let f = 2.0 / (f64::from(self.window) + 1.0);
            self.value = self.value * (1.0 - f) + x * f;
        }
        self.value
    }
}

/// A re-implementation of Netflix concurrency-limits' **Gradient2** (under
/// `WindowedLimit`) from its published description — not their code.
///
/// # Algorithm
///
/// Per published window (≥ 10 samples; see the module docs), with `L` the
/// stored `f64` limit, `rtt` the window mean and `inflight` its peak:
///
/// 1. `long ← ExpAvg(rtt)`: the plain mean of the first 10 windows, then an
///    EMA with factor 2/(600 + 1);
/// 2. if `long / rtt > 2`, the stored long RTT is multiplied by 0.95 (this
///    window's gradient still uses the undecayed value);
/// 3. app-limited: if `inflight < L / 2`, hold;
/// 4. `g = clamp(1.5 · long / rtt, 0.5, 1)`;
/// 5. `L ← 0.8 · L + 0.2 · (L · g + 4)`, clamped to `[min, max]`; the
///    limiter is told `⌊L⌋`.
///
/// Failures are **never read** (Netflix issue #176): a drop lowers the limit
/// only through its RTT. Under steady overload the long RTT absorbs the
/// loaded RTTs, `g` returns to 1 and the limit climbs (the runaway described
/// on Netflix PR #134); kept as is. Netflix's optional fixes (PR #134) are
/// not applied.
///
/// If the limit handed in is not `⌊L⌋` (first call, or a reset), `L` is
/// re-seeded from it.
///
/// # Examples
///
/// A peer law is an [`adaptx::ControlLaw`]: it runs in a real limiter.
///
/// ```
/// use adaptx::Limiter;
/// use adaptx_sim::peers::NetflixGradient2;
///
/// let limiter = Limiter::builder().law(NetflixGradient2::new(1, 200)).build()?;
/// assert_eq!(limiter.algorithm(), "netflix_gradient2 (peer)");
/// # Ok::<(), adaptx::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct NetflixGradient2 {
    min: f64,
    max: f64,
    estimate: Option<f64>,
    long: ExpAvg,
}

impl NetflixGradient2 {
    /// Gradient2 with Netflix's defaults, bounded to `[min_limit, max_limit]`.
    pub fn new(min_limit: usize, max_limit: usize) -> Self {
        Self {
            min: min_limit as f64,
            max: max_limit.max(min_limit) as f64,
            estimate: None,
            long: ExpAvg::new(NETFLIX_G2_LONG_WINDOW, LONG_WARMUP),
        }
    }

    /// The stored (unrounded) limit, once the law has run.
    pub fn estimate(&self) -> Option<f64> {
        self.estimate
    }

    /// The long-term RTT average, in nanoseconds (0 before any window).
    pub fn long_rtt_nanos(&self) -> f64 {
        self.long.value
    }

    /// Netflix's `_update(rtt, inflight)`, returning the new stored limit.
    fn update(&mut self, l: f64, rtt: f64, inflight: usize) -> f64 {
        let long = self.long.add(rtt);
        if long / rtt > DRIFT_RATIO {
            self.long.value *= DRIFT_DECAY;
        }
        if (inflight as f64) < l / 2.0 {
            return l;
        }
        let g = (NETFLIX_G2_TOLERANCE * long / rtt).clamp(G2_MIN_GRADIENT, G2_MAX_GRADIENT);
        let new = l * g + NETFLIX_G2_QUEUE;
        let new = l * (1.0 - NETFLIX_G2_SMOOTHING) + new * NETFLIX_G2_SMOOTHING;
        new.clamp(self.min, self.max)
    }
}

impl ControlLaw for NetflixGradient2 {
    fn name(&self) -> &'static str {
        "netflix_gradient2 (peer)"
    }

    fn next_limit(&mut self, limit: usize, w: &WindowSummary) -> usize {
        if !published(w) || w.mean_rtt_nanos <= 0.0 {
            return limit;
        }
        let l = match self.estimate {
            Some(e) if e as usize == limit => e,
            _ => limit as f64,
        };
        let l = self.update(l, w.mean_rtt_nanos, w.peak_in_flight);
        self.estimate = Some(l);
        l as usize
    }

    fn reset(&mut self) {
        self.estimate = None;
        self.long = ExpAvg::new(NETFLIX_G2_LONG_WINDOW, LONG_WARMUP);
    }
}

/// A re-implementation of Netflix concurrency-limits' **AIMDLimit** (under
/// `WindowedLimit`) from its published description — not their code.
///
/// # Algorithm
///
/// Per published window (≥ 10 samples), with `L` the limit:
///
/// - a drop (any failure in the window) or a mean RTT above 5 s:
///   `L ← ⌊0.9 · L⌋`;
/// - else, if `2 · inflight ≥ L` (the app-limited guard): `L ← L + 1`;
/// - clamp to `[min, max]`.
///
/// Netflix's AIMD can also run per sample, without `WindowedLimit`; then it
/// steps once per response and its ramp speed scales with throughput. Here
/// it runs once per 1 s window, the `WindowedLimit` use. A window of fewer
/// than 10 samples is discarded with its drops, as Netflix does: under light
/// load drops never reach the law.
#[derive(Debug, Clone)]
pub struct NetflixAimd {
    min: usize,
    max: usize,
}

impl NetflixAimd {
    /// AIMD with Netflix's defaults (backoff 0.9, timeout 5 s), bounded to
    /// `[min_limit, max_limit]`.
    pub fn new(min_limit: usize, max_limit: usize) -> Self {
        Self {
            min: min_limit,
            max: max_limit.max(min_limit),
        }
    }
}

impl ControlLaw for NetflixAimd {
    fn name(&self) -> &'static str {
        "netflix_aimd (peer)"
    }

    fn next_limit(&mut self, limit: usize, w: &WindowSummary) -> usize {
        if !published(w) {
            return limit;
        }
        let dropped = w.failures + w.stale_failures > 0;
        let timeout = w.mean_rtt_nanos > NETFLIX_AIMD_TIMEOUT.as_nanos() as f64;
        let next = if dropped || timeout {
            (limit as f64 * NETFLIX_AIMD_BACKOFF) as usize
        } else if w.peak_in_flight.saturating_mul(2) >= limit {
            limit + 1
        } else {
            limit
        };
        next.clamp(self.min, self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peers::window;

    fn g2() -> NetflixGradient2 {
        NetflixGradient2::new(1, 200)
    }

    #[test]
    fn exp_avg_warms_up_with_plain_mean_then_smooths() {
        // ExpAvgMeasurementTest.testWarmup: window 100, warm-up 10.
        let mut a = ExpAvg::new(100, 10);
        for (i, x) in (10..20).enumerate() {
            let v = a.add(f64::from(x));
            assert!((v - (10.0 + 0.5 * i as f64)).abs() < 1e-12, "{i}: {v}");
        }
        assert!((a.add(100.0) - 16.2).abs() < 0.1);
    }

    /// The Gradient2 window vector of peer-algorithms.md §1 (HEAD column):
    /// windows 1-10 at RTT 10 ms / in-flight 20 rise 0.8 each; then the
    /// table's rows 11-17.
    #[test]
    fn gradient2_follows_the_window_vector() {
        let mut law = g2();
        let mut limit = 20;
        for k in 1..=10 {
            limit = law.next_limit(limit, &window(1000, 100, 20, 10.0));
            let want = 20.0 + 0.8 * f64::from(k);
            assert!((law.estimate().unwrap() - want).abs() < 1e-9, "window {k}");
        }
        assert_eq!(limit, 28);
        let mut drop17 = window(1000, 100, 30, 100.0);
        drop17.failures = 5;
        // (rtt ms, in-flight, long ms after, L, ⌊L⌋)
        let rows = [
            (window(1000, 100, 20, 10.0), 10.000, 28.8, 28),
            (window(1000, 100, 24, 20.0), 10.033, 28.1744, 28),
            (window(1000, 100, 24, 40.0), 10.133, 26.1569, 26),
            (window(1000, 100, 24, 40.0), 10.232, 24.3412, 24),
            (window(1000, 100, 24, 5.0), 9.704, 25.1412, 25),
            (window(1000, 100, 3, 5.0), 9.689, 25.1412, 25),
            (drop17, 9.989, 23.4271, 23),
        ];
        for (i, (w, long, l, int)) in rows.iter().enumerate() {
            limit = law.next_limit(limit, w);
            let k = i + 11;
            assert!(
                (law.long_rtt_nanos() / 1e6 - long).abs() < 1e-3,
                "long, window {k}"
            );
            assert!((law.estimate().unwrap() - l).abs() < 1e-4, "L, window {k}");
            assert_eq!(limit, *int, "window {k}");
        }
    }

    #[test]
    fn gradient2_ignores_failures_with_healthy_latency() {
        let mut law = g2();
        let mut w = window(1000, 100, 20, 10.0);
        w.failures = 90;
        assert_eq!(law.next_limit(20, &w), 20); // 20.8
        assert!(law.estimate().unwrap() > 20.0);
    }

    #[test]
    fn gradient2_converges_to_queue_over_one_minus_gradient() {
        // A constant g < 1 (rtt = 1.5·long/g with a frozen long of 10 ms)
        // drives L to q / (1 − g): 8 at g = 0.5, 40 at g = 0.9.
        for (g, want) in [(0.5, 8.0), (0.9, 40.0)] {
            let mut law = g2();
            law.long = ExpAvg::new(u32::MAX, 0);
            law.long.value = 10e6;
            let mut limit = 100;
            for _ in 0..2000 {
                // Keep the long RTT at 10 ms despite the EMA's tiny step.
                law.long.value = 10e6;
                let rtt = 1.5 * 10.0 / g;
                limit = law.next_limit(limit, &window(1000, 100, 1000, rtt));
            }
            let l = law.estimate().unwrap();
            assert!((l - want).abs() < 1e-3, "g {g}: {l}");
        }
    }

    #[test]
    fn gradient2_runs_away_when_the_long_rtt_absorbs_the_load() {
        // The runaway (PR #134): C = 20 servers, S = 50 ms, RTT = S·max(1,
        // L/C), one update per window, min 1, max 200. The peer-algorithms
        // table gives 28.0 after 10 windows, 42.2 after 60, 66.2 after 300,
        // 112.8 after 600 and the max (200) by 1200.
        let mut law = g2();
        let mut limit = 20;
        let mut at = Vec::new();
        for k in 1..=1200 {
            // The model's RTT comes from the integer limit in force.
            let rtt = 50.0 * (limit as f64 / 20.0).max(1.0);
            limit = law.next_limit(limit, &window(1000, 100, limit, rtt));
            if [10, 60, 300, 600, 1200].contains(&k) {
                at.push(law.estimate().unwrap());
            }
        }
        let want = [28.0, 42.2, 66.2, 112.8, 200.0];
        for (got, want) in at.iter().zip(want) {
            assert!((got - want).abs() < 0.05, "{got} vs {want}");
        }
        assert_eq!(limit, 200);
    }

    #[test]
    fn gradient2_holds_when_app_limited_even_on_high_latency() {
        let mut law = g2();
        law.next_limit(40, &window(1000, 100, 40, 10.0));
        let before = law.estimate().unwrap();
        assert_eq!(law.next_limit(40, &window(1000, 100, 19, 100.0)), 40);
        assert_eq!(law.estimate().unwrap(), before);
    }

    #[test]
    fn netflix_windows_of_fewer_than_ten_samples_are_discarded() {
        let mut law = g2();
        assert_eq!(law.next_limit(20, &window(1000, 9, 20, 10.0)), 20);
        assert!(law.estimate().is_none());
        let mut aimd = NetflixAimd::new(1, 200);
        let mut w = window(1000, 9, 20, 10.0);
        w.failures = 9;
        assert_eq!(aimd.next_limit(20, &w), 20);
    }

    #[test]
    fn gradient2_reseeds_from_a_limit_it_did_not_propose() {
        let mut law = g2();
        law.next_limit(20, &window(1000, 100, 20, 10.0)); // 20.8
        assert_eq!(law.next_limit(50, &window(1000, 100, 50, 10.0)), 50); // 50.8
        assert!((law.estimate().unwrap() - 50.8).abs() < 1e-9);
    }

    /// AIMDLimitTest's vectors, per window.
    #[test]
    fn aimd_matches_netflix_tests() {
        // initial 20, one success at inflight 10 → 21.
        let mut a = NetflixAimd::new(1, 200);
        assert_eq!(a.next_limit(20, &window(1000, 10, 10, 1.0)), 21);
        // initial 30, a drop → 27.
        let mut w = window(1000, 10, 30, 1.0);
        w.failures = 1;
        assert_eq!(a.next_limit(30, &w), 27);
        // initial 21, max 21 (and min 0, here the smallest limit, 1): stays 21.
        let mut capped = NetflixAimd::new(1, 21);
        assert_eq!(capped.next_limit(21, &window(1000, 10, 21, 1.0)), 21);
    }

    #[test]
    fn aimd_backs_off_on_stale_failures_and_timeouts_too() {
        let mut a = NetflixAimd::new(1, 200);
        let mut w = window(1000, 10, 20, 1.0);
        w.stale_failures = 1;
        assert_eq!(a.next_limit(20, &w), 18);
        assert_eq!(a.next_limit(10, &window(1000, 10, 10, 5001.0)), 9);
        // At 5 s exactly it is not a timeout.
        assert_eq!(a.next_limit(10, &window(1000, 10, 10, 5000.0)), 11);
    }

    #[test]
    fn aimd_grows_only_when_half_the_limit_is_in_flight() {
        let mut a = NetflixAimd::new(1, 200);
        assert_eq!(a.next_limit(20, &window(1000, 10, 9, 1.0)), 20);
        assert_eq!(a.next_limit(20, &window(1000, 10, 10, 1.0)), 21);
        // At small limits a decrease is a −1 step.
        let mut w = window(1000, 10, 10, 1.0);
        w.failures = 1;
        assert_eq!(a.next_limit(10, &w), 9);
    }
}
