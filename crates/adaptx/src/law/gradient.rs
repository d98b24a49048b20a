//! Latency-gradient control in the manner of Netflix's concurrency-limits.

use super::baseline::{self, Baseline, DelayLaw};
use super::{ControlLaw, LawState, WindowSummary, app_limited, decrease, utilized};
use crate::defaults::{DEFAULT_DECREASE_RATIO, DEFAULT_TOLERANCE, DEFAULT_UTILIZATION};
use crate::error::{ConfigError, open_closed, open_open};

/// Latency-driven control that follows the relative change of latency
/// against its smoothed average.
///
/// Gradient compares each window's mean latency with the exponential moving
/// average of earlier windows. Latency well below the average means the
/// backend has recovered, and the limit grows by two; latency within the
/// tolerance grows it by one; latency above it shrinks the limit in
/// proportion to the rise, by at most `decrease_ratio`. A window with a
/// failure is cut by `decrease_ratio` outright.
///
/// The law keeps no state: the limiter maintains the average and passes it
/// in [`WindowSummary::rtt_average_nanos`], the value *before* the current
/// window is folded in. The first window after construction or a reset has
/// no average and holds.
///
/// # Algorithm
///
/// With `L` the live limit, `r` the window's mean latency and `avg` the
/// smoothed latency, both in nanoseconds:
///
/// - any fresh failure ([`WindowSummary::failures`]): next =
///   `floor(L · decrease_ratio)`;
/// - stale failures only, or a window that used less than half the limit
///   (`2 · peak_in_flight < L`, "app-limited": its latency says nothing
///   about the limit): hold;
/// - no average yet, or `avg <= 0`: hold;
/// - `g = (r − avg) / avg`;
/// - `g <= tolerance` and `r > GRADIENT_QUEUE_BOUND · floor` (a standing
///   queue, with `floor` the RTT_min of [`WindowSummary::rtt_floor_nanos`]):
///   hold;
/// - `g < −tolerance`: next = `L + 2`;
/// - `g <= tolerance`: next = `L + 1`;
/// - otherwise next = `floor(L · max(1 − g · decrease_ratio, decrease_ratio))`.
///
/// Growth (`+2` or `+1`) happens only if the window's peak in-flight reached
/// `ceil(L · utilization)`; otherwise the limit holds.
///
/// | parameter | range | default |
/// |---|---|---|
/// | `tolerance` | `0 < t <= 1` | `DEFAULT_TOLERANCE` (0.1) |
/// | `decrease_ratio` | `0 < r < 1` | `DEFAULT_DECREASE_RATIO` (0.5) |
/// | `utilization` | `0 < u <= 1` | `DEFAULT_UTILIZATION` (0.9) |
///
/// The idea of steering the limit by the ratio of short-term to long-term
/// latency comes from the gradient limiters of Netflix's
/// [concurrency-limits](https://github.com/Netflix/concurrency-limits).
///
/// Unlike the Go adaptx v1.5.2 original, a window that used less than half
/// the limit holds: Go cut on every noisy window, so one request in flight
/// at 20 requests/s with latency noise of 20–80 ms took the limit 20 → 9 → 2
/// in two minutes. Growth is gated on utilization: Go
/// grows on every flat window, so a lightly loaded limiter climbs to
/// `max_limit` and later shrinks slowly and abruptly. And growth stops at a
/// standing queue ([`GRADIENT_QUEUE_BOUND`]): the gradient alone compares the
/// latency with an average that follows it, so a queue that grows by one
/// request per window never shows (in the simulator's queueing scenario Go's
/// rule settled at 4.7× the backend's concurrency with a p50 of 5× the
/// service time; with the bound, 2.2× and 2.4×).
///
/// The floor of the standing-queue bound is relearned when it moves, by the
/// same RTT baseline manager as [Vegas'](crate::Vegas#relearning-the-floor):
/// the count of windows that trigger a re-probe is of those held by the
/// bound. Without it, in the simulator, a floor that tripled (scenario 08
/// with a 50 → 150 ms step) left Gradient 0.04 of its mean limit (with the
/// manager, 0.88), and a floor that dropped under a queue of ours was never
/// seen (a processor-sharing backend going 100 → 50 ms left the p50 at
/// 4.5× the new service time; with the manager, 2.2×).
///
/// # Examples
///
/// ```
/// use adaptx::{ControlLaw, Gradient, WindowSummary};
/// use std::time::Duration;
///
/// let mut gradient = Gradient::default();
/// let ms = Duration::from_millis;
/// // 100 samples in a second, 20 in flight at the peak, mean latency `mean`,
/// // over a floor and an average of 10 ms.
/// let window = |mean| {
///     WindowSummary::new(Duration::from_secs(1), 100, 0, 20, mean)
///         .and_then(|w| w.with_min_rtt(ms(10)))
///         .map(|w| w.with_rtt_floor(ms(10)).with_rtt_average(ms(10)))
/// };
/// // Latency rose by half: g = 0.5, factor max(1 − 0.25, 0.5) = 0.75.
/// assert_eq!(gradient.next_limit(20, &window(ms(15))?), 15);
///
/// // Latency flat: grow by one.
/// assert_eq!(gradient.next_limit(20, &window(ms(10))?), 21);
/// # Ok::<(), adaptx::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Gradient {
    tolerance: f64,
    decrease_ratio: f64,
    utilization: f64,
    baseline: Baseline,
}

/// The step taken when latency falls well below its average
/// (`gradientFastStep` in the Go original).
const FAST_STEP: usize = 2;

impl Gradient {
    /// Creates a Gradient law with the given parameters.
    ///
    /// # Errors
    ///
    /// Returns a [`ConfigError`] naming the first parameter, in argument
    /// order, that is out of range (NaN and infinities included):
    /// `tolerance` must lie in `(0, 1]`, `decrease_ratio` in `(0, 1)` and
    /// `utilization` in `(0, 1]`.
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptx::Gradient;
    ///
    /// let gradient = Gradient::new(0.2, 0.7, 0.8).unwrap();
    /// assert_eq!(gradient.tolerance(), 0.2);
    ///
    /// let err = Gradient::new(0.0, 0.5, 0.9).unwrap_err();
    /// assert_eq!(err.field(), "tolerance");
    /// ```
    pub fn new(tolerance: f64, decrease_ratio: f64, utilization: f64) -> Result<Self, ConfigError> {
        Ok(Self {
            tolerance: open_closed("tolerance", tolerance, 0.0, 1.0, "0 < value <= 1")?,
            decrease_ratio: open_open("decrease_ratio", decrease_ratio, 0.0, 1.0, "0 < value < 1")?,
            utilization: open_closed("utilization", utilization, 0.0, 1.0, "0 < value <= 1")?,
            baseline: Baseline::default(),
        })
    }

    /// The relative latency change, either way, treated as flat.
    pub fn tolerance(&self) -> f64 {
        self.tolerance
    }

    /// The factor applied to the limit on a failure, and the floor of the
    /// proportional backoff.
    pub fn decrease_ratio(&self) -> f64 {
        self.decrease_ratio
    }

    /// The fraction of the limit that a window's peak in-flight must reach
    /// before the limit may grow.
    pub fn utilization(&self) -> f64 {
        self.utilization
    }

    /// Whether the window shows a standing queue: a mean latency above
    /// [`GRADIENT_QUEUE_BOUND`] times the floor latency.
    fn queued(floor: Option<f64>, window: &WindowSummary) -> bool {
        floor.is_some_and(|floor| window.mean_rtt_nanos > GRADIENT_QUEUE_BOUND * floor)
    }

    fn grow(&self, limit: usize, step: usize, window: &WindowSummary) -> usize {
        if utilized(limit, window.peak_in_flight, self.utilization) {
            limit.saturating_add(step)
        } else {
            limit
        }
    }
}

impl Default for Gradient {
    /// `tolerance` 0.1, `decrease_ratio` 0.5, `utilization` 0.9.
    fn default() -> Self {
        Self {
            tolerance: DEFAULT_TOLERANCE,
            decrease_ratio: DEFAULT_DECREASE_RATIO,
            utilization: DEFAULT_UTILIZATION,
            baseline: Baseline::default(),
        }
    }
}

/// Growth stops while the window mean latency exceeds this multiple of the
/// floor latency (RTT_min): past it, requests wait at least as long in a
/// queue as they take to serve. The gradient alone cannot see a standing
/// queue: a queue that grows by one request per window raises the latency
/// by about `1/limit` per window, inside the tolerance band, while the EMA
/// follows it up.
pub const GRADIENT_QUEUE_BOUND: f64 = 2.0;

impl ControlLaw for Gradient {
    fn name(&self) -> &'static str {
        "gradient"
    }

    fn next_limit(&mut self, limit: usize, window: &WindowSummary) -> usize {
        baseline::next_limit(self, limit, window)
    }

    fn reset(&mut self) {
        self.baseline.reset();
    }

    fn state(&self) -> LawState {
        let (relearned_floor_nanos, probing, queued_windows) = self.baseline.state();
        LawState::Gradient {
            relearned_floor_nanos,
            probing,
            queued_windows,
        }
    }
}

impl DelayLaw for Gradient {
    fn baseline(&mut self) -> &mut Baseline {
        &mut self.baseline
    }

    /// The standing-queue bound.
    fn reads_queue(&self, _limit: usize, floor: f64, w: &WindowSummary) -> bool {
        Self::queued(Some(floor), w)
    }

    /// The formula of the `# Algorithm` section.
    fn judge(&self, limit: usize, floor: Option<f64>, window: &WindowSummary) -> usize {
        if window.failures > 0 {
            return decrease(limit, self.decrease_ratio);
        }
        if window.stale_failures > 0 || app_limited(limit, window.peak_in_flight) {
            return limit;
        }
        let avg = match window.rtt_average_nanos {
            Some(avg) if avg > 0.0 => avg,
            _ => return limit,
        };
        let g = (window.mean_rtt_nanos - avg) / avg;
        if g.is_nan() {
            // A NaN latency says nothing; without this guard it would fall
            // through to the backoff, since `f64::max` ignores NaN.
            return limit;
        }
        if g <= self.tolerance && Self::queued(floor, window) {
            // Improvement: a standing queue holds the limit even when the
            // latency is flat (see `QUEUE_BOUND`).
            limit
        } else if g < -self.tolerance {
            self.grow(limit, FAST_STEP, window)
        } else if g <= self.tolerance {
            self.grow(limit, 1, window)
        } else {
            let l = limit as f64;
            let factor = (1.0 - g * self.decrease_ratio).max(self.decrease_ratio);
            (l * factor) as usize
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: f64 = 1e6;

    /// A clean window, saturated at `limit`, with mean latency `r` and
    /// smoothed latency `avg`.
    fn window(limit: usize, avg: Option<f64>, r: f64) -> WindowSummary {
        crate::law::test_window(limit, r, Some(r), avg)
    }

    fn gradient() -> Gradient {
        Gradient::new(0.1, 0.5, 0.9).expect("valid parameters")
    }

    #[test]
    fn name_is_gradient() {
        assert_eq!(Gradient::default().name(), "gradient");
    }

    #[test]
    fn latency_well_below_average_grows_by_two() {
        assert_eq!(
            gradient().next_limit(10, &window(10, Some(10.0 * MS), MS)),
            12
        );
    }

    #[test]
    fn latency_far_above_average_backs_off_to_ratio() {
        // g = 1.5: max(1 − 0.75, 0.5) = 0.5.
        assert_eq!(
            gradient().next_limit(20, &window(20, Some(10.0 * MS), 25.0 * MS)),
            10
        );
    }

    #[test]
    fn latency_above_average_backs_off_proportionally() {
        let mut law = gradient();
        // g = 0.5: factor 0.75.
        assert_eq!(
            law.next_limit(20, &window(20, Some(10.0 * MS), 15.0 * MS)),
            15
        );
        // g = 0.2: factor 0.9.
        assert_eq!(
            law.next_limit(20, &window(20, Some(10.0 * MS), 12.0 * MS)),
            18
        );
    }

    #[test]
    fn latency_within_tolerance_grows_by_one() {
        let mut law = gradient();
        // g = 0.1 exactly: the upper edge is inclusive.
        assert_eq!(
            law.next_limit(20, &window(20, Some(10.0 * MS), 11.0 * MS)),
            21
        );
        assert_eq!(
            law.next_limit(20, &window(20, Some(10.0 * MS), 10.0 * MS)),
            21
        );
        // g = −0.1 exactly: not below −tol, so +1 rather than +2.
        assert_eq!(
            law.next_limit(20, &window(20, Some(10.0 * MS), 9.0 * MS)),
            21
        );
    }

    #[test]
    fn first_window_without_average_holds() {
        let mut law = gradient();
        assert_eq!(law.next_limit(10, &window(10, None, 50.0 * MS)), 10);
        assert_eq!(law.next_limit(10, &window(10, Some(0.0), MS)), 10);
        assert_eq!(law.next_limit(10, &window(10, Some(-1.0), MS)), 10);
    }

    #[test]
    fn failures_decrease_by_ratio() {
        let failing = WindowSummary {
            failures: 1,
            stale_failures: 0,
            ..window(10, Some(10.0 * MS), MS)
        };
        assert_eq!(gradient().next_limit(10, &failing), 5);
        // Even on the first window.
        let first = WindowSummary {
            rtt_average_nanos: None,
            ..failing
        };
        assert_eq!(gradient().next_limit(10, &first), 5);
    }

    #[test]
    fn underutilized_window_does_not_grow() {
        // Go has no utilization gate and would return 12 and 21 here.
        let mut law = gradient();
        let fast = WindowSummary {
            peak_in_flight: 0,
            ..window(10, Some(10.0 * MS), MS)
        };
        assert_eq!(law.next_limit(10, &fast), 10);
        let flat = WindowSummary {
            peak_in_flight: 17,
            ..window(20, Some(10.0 * MS), 10.0 * MS)
        };
        assert_eq!(law.next_limit(20, &flat), 20);
        // ceil(20 · 0.9) = 18 is enough.
        let busy = WindowSummary {
            peak_in_flight: 18,
            ..flat
        };
        assert_eq!(law.next_limit(20, &busy), 21);
    }

    #[test]
    fn app_limited_window_holds_on_a_latency_rise() {
        // Half the limit or less in use: the rise is not our queue.
        for peak in [0, 1, 9] {
            let idle = WindowSummary {
                peak_in_flight: peak,
                ..window(20, Some(10.0 * MS), 25.0 * MS)
            };
            assert_eq!(gradient().next_limit(20, &idle), 20, "peak {peak}");
        }
        // From half the limit on, the rise backs off.
        let half = WindowSummary {
            peak_in_flight: 10,
            ..window(20, Some(10.0 * MS), 25.0 * MS)
        };
        assert_eq!(gradient().next_limit(20, &half), 10);
    }

    #[test]
    fn app_limited_window_still_backs_off_on_fresh_failures() {
        let failing = WindowSummary {
            peak_in_flight: 0,
            failures: 1,
            ..window(20, Some(10.0 * MS), 10.0 * MS)
        };
        assert_eq!(gradient().next_limit(20, &failing), 10);
    }

    #[test]
    fn stale_failures_hold() {
        let stale = WindowSummary {
            stale_failures: 3,
            ..window(20, Some(10.0 * MS), 25.0 * MS)
        };
        assert_eq!(gradient().next_limit(20, &stale), 20);
        let grow = WindowSummary {
            stale_failures: 3,
            ..window(20, Some(10.0 * MS), MS)
        };
        assert_eq!(gradient().next_limit(20, &grow), 20);
    }

    #[test]
    fn nan_and_infinite_latencies_do_not_panic() {
        let mut law = gradient();
        assert_eq!(law.next_limit(10, &window(10, Some(MS), f64::NAN)), 10);
        assert_eq!(law.next_limit(10, &window(10, Some(f64::NAN), MS)), 10);
        assert_eq!(law.next_limit(10, &window(10, Some(f64::INFINITY), MS)), 10);
        assert_eq!(law.next_limit(10, &window(10, Some(MS), f64::INFINITY)), 5);
        assert_eq!(
            law.next_limit(usize::MAX, &window(usize::MAX, Some(MS), 0.0)),
            usize::MAX
        );
    }

    #[test]
    fn default_uses_named_defaults() {
        let law = Gradient::default();
        assert_eq!(law.tolerance(), DEFAULT_TOLERANCE);
        assert_eq!(law.decrease_ratio(), DEFAULT_DECREASE_RATIO);
        assert_eq!(law.utilization(), DEFAULT_UTILIZATION);
    }

    #[test]
    fn new_rejects_bad_tolerance() {
        for tol in [0.0, -0.1, 1.01, f64::NAN, f64::INFINITY] {
            let err = Gradient::new(tol, 0.5, 0.9).expect_err("invalid tolerance");
            assert_eq!(err.field(), "tolerance", "tolerance {tol}");
        }
        assert!(Gradient::new(1.0, 0.5, 0.9).is_ok());
    }

    #[test]
    fn new_rejects_bad_decrease_ratio() {
        for ratio in [0.0, -0.5, 1.0, 1.5, f64::NAN, f64::INFINITY] {
            let err = Gradient::new(0.1, ratio, 0.9).expect_err("invalid ratio");
            assert_eq!(err.field(), "decrease_ratio", "ratio {ratio}");
        }
    }

    #[test]
    fn new_rejects_bad_utilization() {
        for util in [0.0, -0.1, 1.5, f64::NAN, f64::INFINITY] {
            let err = Gradient::new(0.1, 0.5, util).expect_err("invalid utilization");
            assert_eq!(err.field(), "utilization", "utilization {util}");
        }
        assert!(Gradient::new(0.1, 0.5, 1.0).is_ok());
    }

    #[test]
    fn config_error_display_names_field_value_and_range() {
        let err = Gradient::new(0.1, 0.0, 0.9).expect_err("invalid ratio");
        assert_eq!(
            err.to_string(),
            "invalid decrease_ratio: 0.0 (allowed: 0 < value < 1)"
        );
        let err = Gradient::new(f64::INFINITY, 0.5, 0.9).expect_err("invalid tolerance");
        assert_eq!(
            err.to_string(),
            "invalid tolerance: inf (allowed: 0 < value <= 1)"
        );
    }

    #[test]
    fn standing_queue_holds_growth() {
        // Improvement (Go would grow to 21): a flat window whose mean is more
        // than twice the floor holds.
        let mut w = window(20, Some(30.0 * MS), 30.0 * MS);
        w.rtt_floor_nanos = Some(14.0 * MS);
        assert_eq!(gradient().next_limit(20, &w), 20);
        // At exactly twice the floor it still grows.
        w.rtt_floor_nanos = Some(15.0 * MS);
        assert_eq!(gradient().next_limit(20, &w), 21);
        // A queue does not stop a backoff.
        let mut up = window(20, Some(10.0 * MS), 25.0 * MS);
        up.rtt_floor_nanos = Some(5.0 * MS);
        assert_eq!(gradient().next_limit(20, &up), 10);
    }

    #[test]
    fn gradient_relearns_a_floor_that_rises() {
        // 50 ms, then from window 10 on 110 ms at every concurrency: more
        // than GRADIENT_QUEUE_BOUND times the limiter's RTT_min of 50 ms,
        // which reads as a standing queue and holds growth for good.
        let r = |i| if i < 10 { 50.0 * MS } else { 110.0 * MS };
        let mut law = gradient();
        let limits = crate::law::drive(&mut law, 20, 40, r, |_| 50.0 * MS);
        // The test windows carry a flat average, so only the bound holds
        // (windows 10–13); the fifth window above the bound (14) starts a
        // re-probe at 15; window 15 still drains the 30 admitted before,
        // window 16 measures 110 ms and restores 30, and growth resumes.
        assert_eq!(&limits[9..15], &[30, 30, 30, 30, 30, 15], "{limits:?}");
        assert_eq!(&limits[15..18], &[15, 30, 31], "{limits:?}");
        assert_eq!(limits[39], 53, "{limits:?}");
    }

    #[test]
    fn gradient_relearns_a_floor_that_drops() {
        // 50 → 110 ms (relearned as above), then 50 ms again from window 30
        // and a standing queue of our own at 2.2 × 50 ms from window 35.
        let r = |i| match i {
            0..10 => 50.0 * MS,
            10..30 => 110.0 * MS,
            30..35 => 50.0 * MS,
            _ => 110.0 * MS,
        };
        let mut law = gradient();
        let limits = crate::law::drive(&mut law, 20, 40, r, |_| 50.0 * MS);
        // The floor read fell back to 50 ms with the first fast window, so
        // the queue at 110 ms holds the limit; a floor stuck at 110 ms would
        // grow it by one per window. (Five windows above the bound re-probe
        // it again at window 39.)
        assert_eq!(&limits[34..39], &[48; 5], "{limits:?}");
    }
}
