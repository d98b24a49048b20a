//! Queue-estimating control in the manner of TCP Vegas.

use std::time::Duration;

use super::baseline::{self, Baseline, DelayLaw};
use super::{ControlLaw, LawState, WindowSummary, app_limited, decrease, utilized};
use crate::defaults::{
    DEFAULT_DECREASE_RATIO, DEFAULT_TARGET_LATENCY, DEFAULT_TOLERANCE, DEFAULT_UTILIZATION,
};
use crate::error::{ConfigError, open_closed, open_open};

/// Latency-driven control that estimates how many operations are queued at
/// the backend and keeps that queue inside a band.
///
/// Vegas compares the window's mean latency with the long-term latency floor.
/// Whatever the window spent above the floor is time spent waiting, so
/// `L · (1 − floor / mean)` of the `L` operations in flight are, in effect,
/// queued. A short queue means the backend has room and the limit grows by
/// one; a long queue means it is saturated and the limit is cut; in between
/// the limit holds. A window with a failure is cut as well.
///
/// # Algorithm
///
/// With `L` the live limit, `r` the window's mean latency, `m` the latency
/// floor (the limiter's RTT_min, relearned when it moves: see
/// [Relearning the floor](#relearning-the-floor)) and `T` the target
/// latency, all in nanoseconds:
///
/// - any fresh failure ([`WindowSummary::failures`]): next =
///   `floor(L · decrease_ratio)`;
/// - stale failures only, or a window that used less than half the limit
///   (`2 · peak_in_flight < L`, "app-limited"): hold;
/// - no floor yet, `r <= 0` or `m <= 0`: hold;
/// - `q = N · (1 − m / r)` with `N = min(L, peak_in_flight)`, the estimated
///   queue of the operations actually in use (Little's law);
/// - `x = m / T`, `scale = 1` if `x >= 1`, else `max(1 − x, x)`;
/// - `α = L · tolerance · scale`, `β = 2α`;
/// - `q < α`: next = `L + 1`, but only if the window's peak in-flight reached
///   `ceil(L · utilization)`, else hold;
/// - `q > β`: next = `floor(L · decrease_ratio)`;
/// - otherwise hold.
///
/// | parameter | range | default |
/// |---|---|---|
/// | `tolerance` | `0 < t <= 1` | `DEFAULT_TOLERANCE` (0.1) |
/// | `target_latency` | `> 0` | `DEFAULT_TARGET_LATENCY` (100 ms) |
/// | `decrease_ratio` | `0 < r < 1` | `DEFAULT_DECREASE_RATIO` (0.5) |
/// | `utilization` | `0 < u <= 1` | `DEFAULT_UTILIZATION` (0.9) |
///
/// The queue estimate and the α/β band come from TCP Vegas (Brakmo and
/// Peterson, "TCP Vegas: End to End Congestion Avoidance on a Global
/// Internet", 1994), with the window's mean latency in place of the
/// per-packet RTT.
///
/// # Relearning the floor
///
/// The limiter's RTT_min is the lowest window mean seen, drifting up by the
/// min-latency decay (a half-life of ~700 windows): it follows a floor that
/// drops, not one that rises. A backend that became twice as slow without
/// becoming busier then reads as a queue of `L / 2`, and the seed's Vegas
/// cut the limit to 1 and stayed there (the simulator's scenario 08: 0.04
/// of the limit before the step). Only the latency at *reduced
/// concurrency* tells a slower backend from a queue of ours, so Vegas (and
/// [`Gradient`](crate::Gradient)) keep an RTT baseline manager in the
/// manner of Envoy's adaptive concurrency filter and BBR's PROBE_RTT:
///
/// - a **re-probe** cuts the limit to half for a window after the
///   operations admitted before have drained (at most
///   [`BASELINE_PROBE_WINDOWS`](crate::BASELINE_PROBE_WINDOWS) windows).
///   If the latency there is less than
///   [`BASELINE_PROBE_DROP`](crate::BASELINE_PROBE_DROP) (10 %) lower than
///   before the cut, it is the floor, and `m` becomes it even above RTT_min;
///   if it fell by more, the queue was ours and the probe cuts again (at
///   most [`BASELINE_PROBE_HALVINGS`](crate::BASELINE_PROBE_HALVINGS)
///   times), so a deep queue is measured through. The limit before the
///   probe is then restored;
/// - after a re-probe `m = max(RTT_min, r)`, `r` the lowest window mean
///   since the probe: a floor that drops again is followed at once;
/// - a re-probe starts, on a window without failures that used at least
///   half the limit, after
///   [`BASELINE_EXPIRY_WINDOWS`](crate::BASELINE_EXPIRY_WINDOWS) (5)
///   windows in a row on which the formula cut for latency (`q > β`) — a
///   count that doubles after each probe that found the floor where it was
///   — or after [`BASELINE_PROBE_INTERVAL`](crate::BASELINE_PROBE_INTERVAL)
///   (100) windows plus up to 15 % jitter with no window within
///   [`BASELINE_MATCH`](crate::BASELINE_MATCH) (5 %) of `m`. A backend whose
///   latency stays at its floor is never probed.
///
/// On scenario 08 (50 → 100 ms at 60 s, C\* = 30) Vegas keeps 0.98 of its
/// mean limit after the step (median of seeds 0–9; the seed: 0.04); a probe
/// costs two windows at half the limit.
///
/// This law differs from the Go adaptx v1.5.2 original in five ways:
///
/// - Go estimates the queue from the limit, not from the concurrency in use:
///   one request in flight under a limit of 20, with latency noise of
///   20–80 ms, read as a queue of up to 15 and cut the limit 20 → 1 in a
///   minute.
/// - Go ignores failures, so a backend that fails fast keeps growing the limit.
/// - Go has no utilization gate, so a lightly loaded limiter climbs to
///   `max_limit` one window at a time.
/// - Go scales α by `1 − m / T` while `m < T` and by 1 from `m >= T` on, so
///   as the floor nears the target the band collapses to zero and then jumps
///   back to `L · tolerance`. A backend whose floor sits just under the target
///   is halved over and over. Here the scale never drops below one half and
///   reaches 1 continuously at `m = T`; for `m <= T / 2` and `m >= T` it is
///   exactly Go's value.
/// - Go's floor only drifts up by the min-latency decay; here it is
///   re-probed when it may have moved (see
///   [Relearning the floor](#relearning-the-floor)). Until the first probe
///   the two agree exactly.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// use adaptx::{ControlLaw, Vegas, WindowSummary};
///
/// let mut vegas = Vegas::new(0.1, Duration::from_millis(100), 0.5, 0.9)?;
/// let ms = Duration::from_millis;
/// let us = Duration::from_micros;
/// let window = WindowSummary::new(Duration::from_secs(1), 100, 0, 10, us(1020))?
///     .with_min_rtt(ms(1))?
///     .with_rtt_floor(ms(1))
///     .with_rtt_average(ms(1));
/// // q = 10 · (1 − 1 / 1.02) ≈ 0.2 is below α ≈ 0.99: room to grow.
/// assert_eq!(vegas.next_limit(10, &window), 11);
///
/// // Latency five times the floor: q = 8 is above β ≈ 1.98.
/// let queued = WindowSummary::new(Duration::from_secs(1), 100, 0, 10, ms(5))?
///     .with_rtt_floor(ms(1))
///     .with_rtt_average(ms(1));
/// assert_eq!(vegas.next_limit(10, &queued), 5);
/// # Ok::<(), adaptx::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Vegas {
    tolerance: f64,
    target_latency: Duration,
    /// `target_latency` in nanoseconds, converted once.
    target_nanos: f64,
    decrease_ratio: f64,
    utilization: f64,
    baseline: Baseline,
}

impl Vegas {
    /// Creates a Vegas law with the given parameters.
    ///
    /// # Errors
    ///
    /// Returns a [`ConfigError`] naming the first parameter, in argument
    /// order, that is out of range (NaN and infinities included):
    /// `tolerance` must lie in `(0, 1]`, `target_latency` must be non-zero,
    /// `decrease_ratio` must lie in `(0, 1)` and `utilization` in `(0, 1]`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use adaptx::Vegas;
    ///
    /// let vegas = Vegas::new(0.2, Duration::from_millis(50), 0.5, 0.9).unwrap();
    /// assert_eq!(vegas.target_latency(), Duration::from_millis(50));
    ///
    /// let err = Vegas::new(0.2, Duration::ZERO, 0.5, 0.9).unwrap_err();
    /// assert_eq!(err.field(), "target_latency");
    /// ```
    pub fn new(
        tolerance: f64,
        target_latency: Duration,
        decrease_ratio: f64,
        utilization: f64,
    ) -> Result<Self, ConfigError> {
        let tolerance = open_closed("tolerance", tolerance, 0.0, 1.0, "0 < value <= 1")?;
        if target_latency.is_zero() {
            return Err(ConfigError::new(
                "target_latency",
                target_latency,
                "value > 0",
            ));
        }
        Ok(Self {
            baseline: Baseline::default(),
            tolerance,
            target_latency,
            target_nanos: target_latency.as_nanos() as f64,
            decrease_ratio: open_open("decrease_ratio", decrease_ratio, 0.0, 1.0, "0 < value < 1")?,
            utilization: open_closed("utilization", utilization, 0.0, 1.0, "0 < value <= 1")?,
        })
    }

    /// The fraction of the limit that the queue estimate may reach before the
    /// limit stops growing (twice that before it is cut).
    pub fn tolerance(&self) -> f64 {
        self.tolerance
    }

    /// The latency treated as the operating point: the closer the latency
    /// floor is to half of it, the narrower the band.
    pub fn target_latency(&self) -> Duration {
        self.target_latency
    }

    /// The factor applied to the limit on a backoff window.
    pub fn decrease_ratio(&self) -> f64 {
        self.decrease_ratio
    }

    /// The fraction of the limit that a window's peak in-flight must reach
    /// before the limit may grow.
    pub fn utilization(&self) -> f64 {
        self.utilization
    }

    /// The estimated queue: the operations in use, `N = min(L,
    /// peak_in_flight)`, times the share of the latency spent above the
    /// floor. By Little's law the backend serves `N · m / r` of them at a
    /// time; the rest wait. Counting the limit instead of what is in use
    /// would read latency noise in a lightly used window as a queue of
    /// `L · (1 − m / r)` that does not exist.
    fn queue(&self, limit: usize, peak_in_flight: usize, m: f64, r: f64) -> f64 {
        limit.min(peak_in_flight) as f64 * (1.0 - m / r)
    }

    /// Whether the window, read against the floor `m`, shows a queue above
    /// the band (`q > β = 2α`): the latency cut of the `# Algorithm`
    /// section.
    fn cuts(&self, limit: usize, m: f64, window: &WindowSummary) -> bool {
        let r = window.mean_rtt_nanos;
        r > 0.0
            && m > 0.0
            && self.queue(limit, window.peak_in_flight, m, r) > 2.0 * self.alpha(limit, m)
    }

    /// The lower edge α of the queue band for limit `limit` and latency floor
    /// `m` nanoseconds.
    pub(crate) fn alpha(&self, limit: usize, m: f64) -> f64 {
        let l = limit as f64;
        let x = m / self.target_nanos;
        // Go uses 1 − x below the target and 1 at or above it, which collapses
        // to 0 just below x = 1 and then jumps. Taking max(1 − x, x) keeps Go's
        // value for x <= 0.5, stays >= 0.5 and meets 1 at x = 1.
        let scale = if x >= 1.0 { 1.0 } else { (1.0 - x).max(x) };
        // Same operation order as Go's `l * tol * (1 - m/T)`, so the result is
        // bit-identical wherever the scales agree.
        l * self.tolerance * scale
    }
}

impl Default for Vegas {
    /// `tolerance` 0.1, `target_latency` 100 ms, `decrease_ratio` 0.5,
    /// `utilization` 0.9.
    fn default() -> Self {
        Self {
            tolerance: DEFAULT_TOLERANCE,
            target_latency: DEFAULT_TARGET_LATENCY,
            target_nanos: DEFAULT_TARGET_LATENCY.as_nanos() as f64,
            decrease_ratio: DEFAULT_DECREASE_RATIO,
            utilization: DEFAULT_UTILIZATION,
            baseline: Baseline::default(),
        }
    }
}

impl ControlLaw for Vegas {
    fn name(&self) -> &'static str {
        "vegas"
    }

    fn next_limit(&mut self, limit: usize, window: &WindowSummary) -> usize {
        baseline::next_limit(self, limit, window)
    }

    fn reset(&mut self) {
        self.baseline.reset();
    }

    fn state(&self) -> LawState {
        let (relearned_floor_nanos, probing, queued_windows) = self.baseline.state();
        LawState::Vegas {
            relearned_floor_nanos,
            probing,
            queued_windows,
        }
    }
}

impl DelayLaw for Vegas {
    fn baseline(&mut self) -> &mut Baseline {
        &mut self.baseline
    }

    /// A cut for latency.
    fn reads_queue(&self, limit: usize, floor: f64, w: &WindowSummary) -> bool {
        self.cuts(limit, floor, w)
    }

    /// The formula of the `# Algorithm` section.
    fn judge(&self, limit: usize, floor: Option<f64>, window: &WindowSummary) -> usize {
        if window.failures > 0 {
            return decrease(limit, self.decrease_ratio);
        }
        if window.stale_failures > 0 || app_limited(limit, window.peak_in_flight) {
            return limit;
        }
        let r = window.mean_rtt_nanos;
        let Some(m) = floor else {
            return limit;
        };
        if r <= 0.0 || m <= 0.0 {
            return limit;
        }
        // NaN in r or m makes q or α NaN; both comparisons below are then
        // false and the limit holds.
        let q = self.queue(limit, window.peak_in_flight, m, r);
        if q < self.alpha(limit, m) {
            if utilized(limit, window.peak_in_flight, self.utilization) {
                limit.saturating_add(1)
            } else {
                limit
            }
        } else if self.cuts(limit, m, window) {
            decrease(limit, self.decrease_ratio)
        } else {
            limit
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: f64 = 1e6;

    /// Vegas as the seed ran it: the formula on the limiter's RTT_min, no
    /// baseline manager.
    #[derive(Debug)]
    struct NoBaseline(Vegas);

    impl ControlLaw for NoBaseline {
        fn name(&self) -> &'static str {
            "vegas-seed"
        }
        fn next_limit(&mut self, limit: usize, window: &WindowSummary) -> usize {
            self.0.judge(limit, window.rtt_floor_nanos, window)
        }
    }

    /// A clean window, saturated at `limit`, with mean latency `r` and floor `m`.
    fn window(limit: usize, m: Option<f64>, r: f64) -> WindowSummary {
        crate::law::test_window(limit, r, m, Some(r))
    }

    fn vegas(tol: f64, target: Duration) -> Vegas {
        Vegas::new(tol, target, 0.5, 0.9).expect("valid parameters")
    }

    const ONE_NS: Duration = Duration::from_nanos(1);
    const TWO_MS: Duration = Duration::from_millis(2);
    const HUNDRED_MS: Duration = Duration::from_millis(100);

    #[test]
    fn name_is_vegas() {
        assert_eq!(Vegas::default().name(), "vegas");
    }

    #[test]
    fn queue_inside_band_holds() {
        // q = 5, α = 4, β = 8.
        let mut law = vegas(0.4, ONE_NS);
        assert_eq!(law.next_limit(10, &window(10, Some(MS), 2.0 * MS)), 10);
    }

    #[test]
    fn queue_above_band_decreases() {
        // q = 9 > β = 8.
        let mut law = vegas(0.4, ONE_NS);
        assert_eq!(law.next_limit(10, &window(10, Some(MS), 10.0 * MS)), 5);
    }

    #[test]
    fn target_band_holds_small_queues() {
        // m / T = 0.5: α = 0.5, β = 1.0, and q ≈ 0.6 and ≈ 0.7 both hold.
        let mut law = vegas(0.1, TWO_MS);
        assert_eq!(law.next_limit(10, &window(10, Some(1e6), 1_063_830.0)), 10);
        assert_eq!(law.next_limit(10, &window(10, Some(1e6), 1_075_269.0)), 10);
    }

    #[test]
    fn target_below_floor_widens_band_and_grows() {
        // m >= T: α = 1.0, and q ≈ 0.7 < α.
        let mut law = vegas(0.1, ONE_NS);
        assert_eq!(law.next_limit(10, &window(10, Some(1e6), 1_075_269.0)), 11);
    }

    #[test]
    fn no_floor_yet_holds() {
        let mut law = Vegas::default();
        assert_eq!(law.next_limit(10, &window(10, None, MS)), 10);
    }

    #[test]
    fn non_positive_latency_holds() {
        let mut law = Vegas::default();
        assert_eq!(law.next_limit(10, &window(10, Some(1000.0), 0.0)), 10);
        assert_eq!(law.next_limit(10, &window(10, Some(1000.0), -1.0)), 10);
        assert_eq!(law.next_limit(10, &window(10, Some(0.0), MS)), 10);
    }

    #[test]
    fn failures_decrease() {
        // Go ignores failures here and would grow to 11 on this vector.
        let mut law = vegas(0.1, ONE_NS);
        let failing = WindowSummary {
            failures: 1,
            stale_failures: 0,
            ..window(10, Some(1e6), 1_075_269.0)
        };
        assert_eq!(law.next_limit(10, &failing), 5);
    }

    #[test]
    fn underutilized_window_does_not_grow() {
        // q < α, so Go (no utilization gate) would grow to 11.
        let mut law = vegas(0.1, ONE_NS);
        let idle = WindowSummary {
            peak_in_flight: 0,
            ..window(10, Some(1e6), 1_075_269.0)
        };
        assert_eq!(law.next_limit(10, &idle), 10);
        // ceil(10 · 0.9) = 9 is enough.
        let busy = WindowSummary {
            peak_in_flight: 9,
            ..idle
        };
        assert_eq!(law.next_limit(10, &busy), 11);
    }

    #[test]
    fn app_limited_window_holds_on_a_latency_rise() {
        // α = 2, β = 4.
        let mut law = vegas(0.2, ONE_NS);
        for peak in [0, 1, 4] {
            let idle = WindowSummary {
                peak_in_flight: peak,
                ..window(10, Some(MS), 10.0 * MS)
            };
            assert_eq!(law.next_limit(10, &idle), 10, "peak {peak}");
        }
        // Half in use: q = 5 · 0.9 = 4.5 > β.
        let half = WindowSummary {
            peak_in_flight: 5,
            ..window(10, Some(MS), 10.0 * MS)
        };
        assert_eq!(law.next_limit(10, &half), 5);
    }

    #[test]
    fn queue_is_estimated_from_the_concurrency_in_use() {
        // 6 of 10 in use, latency 1.5 × the floor: q = 6 · (1 − 1/1.5) = 2,
        // inside the band α = 10 · 0.2 = 2, β = 4: hold. Counting the limit,
        // q = 3.3 would still hold, but at twice the floor q = 3 (in use)
        // against 5 (limit) > β: only the latter cuts.
        let mut law = vegas(0.2, ONE_NS);
        let w = |r: f64| WindowSummary {
            peak_in_flight: 6,
            ..window(10, Some(MS), r)
        };
        assert_eq!(law.next_limit(10, &w(1.5 * MS)), 10);
        assert_eq!(law.next_limit(10, &w(2.0 * MS)), 10);
        assert_eq!(law.next_limit(10, &w(4.0 * MS)), 5);
    }

    #[test]
    fn stale_failures_hold() {
        let mut law = vegas(0.4, ONE_NS);
        let stale = WindowSummary {
            stale_failures: 2,
            ..window(10, Some(MS), 10.0 * MS)
        };
        assert_eq!(law.next_limit(10, &stale), 10);
        let fresh = WindowSummary {
            failures: 1,
            ..stale
        };
        assert_eq!(law.next_limit(10, &fresh), 5);
    }

    #[test]
    fn floor_just_below_target_grows() {
        // Go: α = 100 · 0.1 · 0.01 = 0.1, β = 0.2, q ≈ 0.2016 > β, so it halves
        // to 50. Here α = 100 · 0.1 · 0.99 = 9.9, and q < α.
        let mut law = vegas(0.1, HUNDRED_MS);
        assert_eq!(
            law.next_limit(100, &window(100, Some(99.0 * MS), 99.2 * MS)),
            101
        );
    }

    #[test]
    fn floor_near_target_does_not_oscillate() {
        // Go: α = 1, β = 2, q ≈ 2.17 > β, so it halves to 50. Here α = 9.
        let mut law = vegas(0.1, HUNDRED_MS);
        assert_eq!(
            law.next_limit(100, &window(100, Some(90.0 * MS), 92.0 * MS)),
            101
        );
    }

    #[test]
    fn alpha_matches_go_bit_for_bit_where_scales_agree() {
        let law = vegas(0.1, HUNDRED_MS);
        let t = 100.0 * MS;
        for m in [
            1.0,
            1e3,
            1e6,
            12_345_678.9,
            33.3 * MS,
            49.999 * MS,
            50.0 * MS,
        ] {
            let l = 100.0_f64;
            let go = l * 0.1 * (1.0 - m / t);
            assert_eq!(law.alpha(100, m).to_bits(), go.to_bits(), "m = {m}");
        }
        for m in [t, 100.0001 * MS, 1e12, f64::MAX] {
            assert_eq!(law.alpha(100, m).to_bits(), (100.0_f64 * 0.1).to_bits());
        }
    }

    #[test]
    fn alpha_is_continuous_at_target() {
        let law = vegas(0.1, HUNDRED_MS);
        let t = 100.0 * MS;
        let at = law.alpha(100, t);
        for below in [t - 1.0, t - 10.0, t * (1.0 - 1e-9)] {
            let a = law.alpha(100, below);
            assert!(
                ((at - a) / at).abs() < 1e-6,
                "α({below}) = {a}, α(T) = {at}"
            );
        }
    }

    #[test]
    fn alpha_is_lipschitz_and_at_least_half_the_band() {
        // |dα/dm| <= L · tol / T everywhere, so neighbouring floors never give
        // a jump; and α never drops below L · tol / 2.
        let law = vegas(0.1, HUNDRED_MS);
        let t = 100.0 * MS;
        let steps = 20_000;
        let dm = 2.0 * t / f64::from(steps);
        let bound = 100.0 * 0.1 / t * dm * (1.0 + 1e-9);
        let mut prev = law.alpha(100, 0.0);
        for i in 1..=steps {
            let a = law.alpha(100, dm * f64::from(i));
            assert!((a - prev).abs() <= bound, "jump at step {i}: {prev} -> {a}");
            assert!(a >= 100.0 * 0.1 * 0.5, "α = {a} at step {i}");
            prev = a;
        }
    }

    #[test]
    fn nan_and_infinite_latencies_do_not_panic() {
        let mut law = Vegas::default();
        assert_eq!(law.next_limit(10, &window(10, Some(f64::NAN), MS)), 10);
        assert_eq!(law.next_limit(10, &window(10, Some(MS), f64::NAN)), 10);
        assert_eq!(
            law.next_limit(10, &window(10, Some(f64::INFINITY), f64::INFINITY)),
            10
        );
        // Infinite mean latency: q = L, far above β.
        assert_eq!(law.next_limit(10, &window(10, Some(MS), f64::INFINITY)), 5);
        assert_eq!(
            law.next_limit(usize::MAX, &window(usize::MAX, Some(MS), MS)),
            usize::MAX
        );
    }

    #[test]
    fn default_uses_named_defaults() {
        let law = Vegas::default();
        assert_eq!(law.tolerance(), DEFAULT_TOLERANCE);
        assert_eq!(law.target_latency(), DEFAULT_TARGET_LATENCY);
        assert_eq!(law.decrease_ratio(), DEFAULT_DECREASE_RATIO);
        assert_eq!(law.utilization(), DEFAULT_UTILIZATION);
        let built = Vegas::new(
            DEFAULT_TOLERANCE,
            DEFAULT_TARGET_LATENCY,
            DEFAULT_DECREASE_RATIO,
            DEFAULT_UTILIZATION,
        )
        .expect("defaults are valid");
        assert_eq!(built.target_nanos, law.target_nanos);
    }

    #[test]
    fn new_rejects_bad_tolerance() {
        for tol in [0.0, -0.1, 1.01, f64::NAN, f64::INFINITY] {
            let err = Vegas::new(tol, HUNDRED_MS, 0.5, 0.9).expect_err("invalid tolerance");
            assert_eq!(err.field(), "tolerance", "tolerance {tol}");
        }
        assert!(Vegas::new(1.0, HUNDRED_MS, 0.5, 0.9).is_ok());
    }

    #[test]
    fn new_rejects_zero_target_latency() {
        let err = Vegas::new(0.1, Duration::ZERO, 0.5, 0.9).expect_err("invalid target");
        assert_eq!(err.field(), "target_latency");
        assert_eq!(
            err.to_string(),
            "invalid target_latency: 0ns (allowed: value > 0)"
        );
        assert!(Vegas::new(0.1, ONE_NS, 0.5, 0.9).is_ok());
        assert!(Vegas::new(0.1, Duration::MAX, 0.5, 0.9).is_ok());
    }

    #[test]
    fn new_rejects_bad_decrease_ratio() {
        for ratio in [0.0, -0.5, 1.0, 1.5, f64::NAN, f64::INFINITY] {
            let err = Vegas::new(0.1, HUNDRED_MS, ratio, 0.9).expect_err("invalid ratio");
            assert_eq!(err.field(), "decrease_ratio", "ratio {ratio}");
        }
    }

    #[test]
    fn new_rejects_bad_utilization() {
        for util in [0.0, -0.1, 1.5, f64::NAN, f64::INFINITY] {
            let err = Vegas::new(0.1, HUNDRED_MS, 0.5, util).expect_err("invalid utilization");
            assert_eq!(err.field(), "utilization", "utilization {util}");
        }
    }

    #[test]
    fn config_error_display_names_field_value_and_range() {
        let err = Vegas::new(2.0, HUNDRED_MS, 0.5, 0.9).expect_err("invalid tolerance");
        assert_eq!(
            err.to_string(),
            "invalid tolerance: 2.0 (allowed: 0 < value <= 1)"
        );
        let err = Vegas::new(0.1, HUNDRED_MS, 0.5, f64::NAN).expect_err("invalid utilization");
        assert_eq!(
            err.to_string(),
            "invalid utilization: NaN (allowed: 0 < value <= 1)"
        );
    }

    #[test]
    fn vegas_relearns_a_floor_that_rises() {
        // Scenario 08 in miniature: 50 ms, then from window 10 on 100 ms at
        // every concurrency (a slower backend, not a busier one); the
        // limiter's RTT_min stays 50 ms.
        let mut law = Vegas::default();
        let r = |i| if i < 10 { 50.0 * MS } else { 100.0 * MS };
        let limits = crate::law::drive(&mut law, 20, 60, r, |_| 50.0 * MS);
        // Growing 20 → 30 on the first ten; then, read as a queue, the step
        // halves the limit to 1 (windows 10–13); the fifth window above the
        // floor (14) starts a re-probe at max(1, 1 / 2) = 1, which measures
        // 100 ms on window 15 and restores 1; from window 16 on the limit
        // grows again, one per window.
        assert_eq!(&limits[9..17], &[30, 15, 7, 3, 1, 1, 1, 2], "{limits:?}");
        assert_eq!(limits[59], 45, "{limits:?}");
        // The seed's floor alone pins it at 1.
        let mut seed = NoBaseline(Vegas::default());
        let stuck = crate::law::drive(&mut seed, 20, 60, r, |_| 50.0 * MS);
        assert_eq!(stuck[59], 1, "{stuck:?}");
    }

    #[test]
    fn vegas_relearns_a_floor_that_drops() {
        // 50 → 100 ms (relearned as above), then 70 ms from window 40 on,
        // and from window 50 a queue of our own that lifts the latency 30 %
        // above the new floor.
        let mut law = Vegas::default();
        let r = |i| match i {
            0..10 => 50.0 * MS,
            10..40 => 100.0 * MS,
            40..50 => 70.0 * MS,
            _ => 91.0 * MS,
        };
        let limits = crate::law::drive(&mut law, 20, 51, r, |_| 50.0 * MS);
        // At 70 ms the floor read is 70 ms: q = 0, grow.
        assert!(limits[49] > limits[40], "{limits:?}");
        // 91 ms against 70: q = L · 0.23 > β = 0.2 · L · 0.7: cut. A floor
        // stuck at 100 ms would read no queue and grow.
        assert_eq!(limits[50], limits[49] / 2, "{limits:?}");
    }
}
