//! Additive increase, multiplicative decrease.

use super::{ControlLaw, LawState, WindowSummary, decrease, utilized};
use crate::defaults::{DEFAULT_DECREASE_RATIO, DEFAULT_INCREASE_RATE, DEFAULT_UTILIZATION};
use crate::error::{ConfigError, open_closed, open_open};

/// Additive increase, multiplicative decrease: grow slowly while the backend
/// is busy and healthy, cut the limit on any failure.
///
/// AIMD reacts only to failures and to how busy the limit was; it never looks
/// at latency. It earns `increase_rate` of credit on every window that used
/// the limit and adds the whole part of the credit to the limit, so a rate
/// below 1 grows the limit once every few windows. A window whose peak
/// in-flight stayed well below the limit proves nothing about a larger one,
/// so it holds the limit and keeps the credit earned so far.
///
/// # Algorithm
///
/// With `L` the live limit, for each window:
///
/// - any fresh failure ([`WindowSummary::failures`]): `credit = 0`, next =
///   `floor(L · decrease_ratio)`;
/// - else if there are stale failures, or `peak_in_flight < ceil(L ·
///   utilization)`: hold `L`, keep the credit;
/// - else `credit += increase_rate`, `step = floor(credit)`, `credit -= step`,
///   next = `L + step`.
///
/// | parameter | range | default |
/// |---|---|---|
/// | `increase_rate` | `> 0`, finite | `DEFAULT_INCREASE_RATE` (1.0) |
/// | `decrease_ratio` | `0 < r < 1` | `DEFAULT_DECREASE_RATIO` (0.5) |
/// | `utilization` | `0 < u <= 1` | `DEFAULT_UTILIZATION` (0.9) |
///
/// Because of the ceiling, limits up to 9 need full saturation at the default
/// utilization: `ceil(9 · 0.9) = 9`.
///
/// This is the congestion-avoidance rule of TCP (Jacobson 1988, RFC 5681),
/// applied per window instead of per round trip.
///
/// # Examples
///
/// ```
/// use adaptx::{Aimd, ControlLaw, WindowSummary};
/// use std::time::Duration;
///
/// let mut aimd = Aimd::default();
/// let (second, ms) = (Duration::from_secs(1), Duration::from_millis(1));
/// // 100 samples of 1 ms, 10 in flight at the peak: the limit was used.
/// let busy = WindowSummary::new(second, 100, 0, 10, ms)?;
/// assert_eq!(aimd.next_limit(10, &busy), 11);
///
/// let failing = WindowSummary::new(second, 100, 1, 10, ms)?;
/// assert_eq!(aimd.next_limit(11, &failing), 5);
/// # Ok::<(), adaptx::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Aimd {
    increase_rate: f64,
    decrease_ratio: f64,
    utilization: f64,
    /// Fractional increase earned but not yet added to the limit; always in `[0, 1)`
    /// after a growth step.
    credit: f64,
}

impl Aimd {
    /// Creates an AIMD law with the given parameters.
    ///
    /// # Errors
    ///
    /// Returns a [`ConfigError`] naming the first parameter, in argument
    /// order, that is out of range (NaN and infinities included):
    /// `increase_rate` must be positive and finite, `decrease_ratio` must lie
    /// in `(0, 1)` and `utilization` in `(0, 1]`.
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptx::Aimd;
    ///
    /// let aimd = Aimd::new(0.5, 0.7, 1.0).unwrap();
    /// assert_eq!(aimd.increase_rate(), 0.5);
    ///
    /// let err = Aimd::new(1.0, 1.5, 0.9).unwrap_err();
    /// assert_eq!(err.field(), "decrease_ratio");
    /// ```
    pub fn new(
        increase_rate: f64,
        decrease_ratio: f64,
        utilization: f64,
    ) -> Result<Self, ConfigError> {
        Ok(Self {
            increase_rate: open_closed(
                "increase_rate",
                increase_rate,
                0.0,
                f64::MAX,
                "finite value > 0",
            )?,
            decrease_ratio: open_open("decrease_ratio", decrease_ratio, 0.0, 1.0, "0 < value < 1")?,
            utilization: open_closed("utilization", utilization, 0.0, 1.0, "0 < value <= 1")?,
            credit: 0.0,
        })
    }

    /// The credit earned per window that used the limit.
    pub fn increase_rate(&self) -> f64 {
        self.increase_rate
    }

    /// The factor applied to the limit on a window with a failure.
    pub fn decrease_ratio(&self) -> f64 {
        self.decrease_ratio
    }

    /// The fraction of the limit that a window's peak in-flight must reach
    /// before the limit may grow.
    pub fn utilization(&self) -> f64 {
        self.utilization
    }
}

impl Default for Aimd {
    /// `increase_rate` 1.0, `decrease_ratio` 0.5, `utilization` 0.9.
    fn default() -> Self {
        Self {
            increase_rate: DEFAULT_INCREASE_RATE,
            decrease_ratio: DEFAULT_DECREASE_RATIO,
            utilization: DEFAULT_UTILIZATION,
            credit: 0.0,
        }
    }
}

impl ControlLaw for Aimd {
    fn name(&self) -> &'static str {
        "aimd"
    }

    fn next_limit(&mut self, limit: usize, window: &WindowSummary) -> usize {
        if window.failures > 0 {
            // Credit earned while healthy must not buy growth right after a backoff.
            self.credit = 0.0;
            return decrease(limit, self.decrease_ratio);
        }
        if window.stale_failures > 0 || !utilized(limit, window.peak_in_flight, self.utilization) {
            // Failures of operations admitted before the last decrease are
            // the overload it answered, still draining: no second cut, and
            // no growth on a window that still shows that overload.
            return limit;
        }
        self.credit += self.increase_rate;
        let step = self.credit.floor();
        self.credit -= step;
        // `as` saturates, so a huge rate yields usize::MAX; the limiter clamps it.
        limit.saturating_add(step as usize)
    }

    fn reset(&mut self) {
        self.credit = 0.0;
    }

    fn state(&self) -> LawState {
        LawState::Aimd {
            credit: self.credit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clean window whose peak in-flight is `peak`.
    fn window(peak: usize) -> WindowSummary {
        crate::law::test_window(peak, 1e6, Some(1e6), Some(1e6))
    }

    fn failing(peak: usize) -> WindowSummary {
        WindowSummary {
            failures: 1,
            stale_failures: 0,
            ..window(peak)
        }
    }

    fn aimd(rate: f64, ratio: f64) -> Aimd {
        Aimd::new(rate, ratio, DEFAULT_UTILIZATION).expect("valid parameters")
    }

    #[test]
    fn stale_failures_hold_and_keep_the_credit() {
        let mut law = Aimd::new(0.5, 0.5, 0.9).expect("valid parameters");
        assert_eq!(law.next_limit(10, &window(10)), 10);
        let stale = WindowSummary {
            stale_failures: 4,
            ..window(10)
        };
        assert_eq!(law.next_limit(10, &stale), 10);
        // The half credit earned before is still there.
        assert_eq!(law.next_limit(10, &window(10)), 11);
    }

    #[test]
    fn name_is_aimd() {
        assert_eq!(Aimd::default().name(), "aimd");
    }

    #[test]
    fn saturated_window_grows_by_one() {
        let mut law = Aimd::default();
        assert_eq!(law.next_limit(10, &window(10)), 11);
    }

    #[test]
    fn fractional_rate_accumulates_across_windows() {
        let mut law = aimd(0.5, 0.5);
        assert_eq!(law.next_limit(10, &window(10)), 10);
        assert_eq!(law.next_limit(10, &window(10)), 11);
        assert_eq!(law.credit, 0.0);
    }

    #[test]
    fn one_failure_among_successes_halves_and_clears_credit() {
        let mut law = aimd(0.5, 0.5);
        assert_eq!(law.next_limit(20, &window(20)), 20);
        assert_eq!(law.credit, 0.5);

        let one_of_many = WindowSummary {
            samples: 1000,
            ..failing(20)
        };
        assert_eq!(law.next_limit(20, &one_of_many), 10);
        assert_eq!(law.credit, 0.0);
        // The credit was cleared: the next eligible window only earns 0.5 again.
        assert_eq!(law.next_limit(10, &window(10)), 10);
    }

    #[test]
    fn underutilized_window_holds_and_keeps_credit() {
        let mut law = aimd(0.5, 0.5);
        assert_eq!(law.next_limit(10, &window(10)), 10);
        for _ in 0..5 {
            assert_eq!(law.next_limit(10, &window(0)), 10);
            assert_eq!(law.credit, 0.5);
        }
        assert_eq!(law.next_limit(10, &window(10)), 11);
    }

    #[test]
    fn gate_needs_ceil_of_limit_times_utilization() {
        let mut law = Aimd::default();
        // ceil(10 · 0.9) = 9.
        assert_eq!(law.next_limit(10, &window(8)), 10);
        assert_eq!(law.next_limit(10, &window(9)), 11);
    }

    #[test]
    fn small_limits_need_full_saturation() {
        let mut law = Aimd::default();
        for limit in 1..=9 {
            assert_eq!(
                law.next_limit(limit, &window(limit - 1)),
                limit,
                "L = {limit}"
            );
            assert_eq!(
                law.next_limit(limit, &window(limit)),
                limit + 1,
                "L = {limit}"
            );
        }
    }

    #[test]
    fn large_rate_returns_unclamped_step() {
        // Clamping into [min, max] is the limiter's job.
        let mut law = aimd(100.0, 0.5);
        assert_eq!(law.next_limit(10, &window(10)), 110);
        assert_eq!(law.credit, 0.0);
    }

    #[test]
    fn small_ratio_may_return_zero() {
        // floor(8 · 0.1) = 0; the limiter raises it to min_limit.
        let mut law = aimd(1.0, 0.1);
        assert_eq!(law.next_limit(8, &failing(8)), 0);
    }

    #[test]
    fn extreme_inputs_do_not_panic() {
        let mut law = aimd(f64::MAX, 0.5);
        assert_eq!(law.next_limit(usize::MAX, &window(usize::MAX)), usize::MAX);
        assert_eq!(law.next_limit(10, &window(10)), usize::MAX);
        assert_eq!(law.next_limit(0, &window(0)), usize::MAX);
        assert_eq!(law.next_limit(usize::MAX, &failing(0)), usize::MAX / 2 + 1);
        assert_eq!(law.next_limit(0, &failing(0)), 0);
    }

    #[test]
    fn reset_clears_credit() {
        let mut law = aimd(0.5, 0.5);
        assert_eq!(law.next_limit(10, &window(10)), 10);
        law.reset();
        assert_eq!(law.credit, 0.0);
        assert_eq!(law.next_limit(10, &window(10)), 10);
    }

    #[test]
    fn default_uses_named_defaults() {
        let law = Aimd::default();
        assert_eq!(law.increase_rate(), DEFAULT_INCREASE_RATE);
        assert_eq!(law.decrease_ratio(), DEFAULT_DECREASE_RATIO);
        assert_eq!(law.utilization(), DEFAULT_UTILIZATION);
    }

    #[test]
    fn new_accepts_boundary_values() {
        let law = Aimd::new(1e-9, 0.999, 1.0).expect("valid parameters");
        assert_eq!(law.increase_rate(), 1e-9);
        assert_eq!(law.decrease_ratio(), 0.999);
        assert_eq!(law.utilization(), 1.0);
    }

    #[test]
    fn new_rejects_bad_increase_rate() {
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let err = Aimd::new(rate, 0.5, 0.9).expect_err("invalid rate");
            assert_eq!(err.field(), "increase_rate", "rate {rate}");
        }
    }

    #[test]
    fn new_rejects_bad_decrease_ratio() {
        for ratio in [0.0, -0.5, 1.0, 1.5, f64::NAN, f64::INFINITY] {
            let err = Aimd::new(1.0, ratio, 0.9).expect_err("invalid ratio");
            assert_eq!(err.field(), "decrease_ratio", "ratio {ratio}");
        }
    }

    #[test]
    fn new_rejects_bad_utilization() {
        for util in [0.0, -0.1, 1.5, f64::NAN, f64::INFINITY] {
            let err = Aimd::new(1.0, 0.5, util).expect_err("invalid utilization");
            assert_eq!(err.field(), "utilization", "utilization {util}");
        }
    }

    #[test]
    fn config_error_display_names_field_value_and_range() {
        let err = Aimd::new(1.0, 1.5, 0.9).expect_err("invalid ratio");
        assert_eq!(
            err.to_string(),
            "invalid decrease_ratio: 1.5 (allowed: 0 < value < 1)"
        );
        let err = Aimd::new(-1.0, 0.5, 0.9).expect_err("invalid rate");
        assert_eq!(
            err.to_string(),
            "invalid increase_rate: -1.0 (allowed: finite value > 0)"
        );
        let err = Aimd::new(1.0, 0.5, 0.0).expect_err("invalid utilization");
        assert_eq!(
            err.to_string(),
            "invalid utilization: 0.0 (allowed: 0 < value <= 1)"
        );
    }
}
