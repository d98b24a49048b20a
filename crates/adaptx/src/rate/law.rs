//! The rate control law: mizu's three rules on one interval's completions,
//! pure (no clock, no lock, no allocation). Public, so that a limiter kept
//! elsewhere (a fleet's, on a shared store) moves its rate by the same law.

use std::time::Duration;

use crate::clock::duration_nanos;
use crate::error::{ConfigError, open_closed};

use super::cubic::Cubic;
use super::defaults::MAX_RATE_BOUND;

/// What one adjustment interval saw: the input of a [`RateLaw`].
///
/// Built with [`IntervalSummary::new`]; more fields may be added for later
/// laws (the struct is `#[non_exhaustive]`).
///
/// # Examples
///
/// ```
/// use adaptx::IntervalSummary;
/// use std::time::Duration;
///
/// let iv = IntervalSummary::new(100, 5, Duration::from_millis(2_000), true);
/// assert_eq!(iv.completed, 100);
/// assert_eq!(iv.latency_sum_nanos, 2_000_000_000);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct IntervalSummary {
    /// Operations that completed with an outcome (successes + failures).
    pub completed: u64,
    /// Of those, failures.
    pub failures: u64,
    /// Sum of their latencies, in nanoseconds.
    pub latency_sum_nanos: u64,
    /// Whether the limit was binding: a request was rejected, or an
    /// admission left a bucket with less than one token.
    pub binding: bool,
    /// How long the interval lasted, in nanoseconds (0 if unknown). Laws
    /// that follow a curve in time ([`RateLaw::Cubic`]) advance by it.
    pub elapsed_nanos: u64,
}

impl IntervalSummary {
    /// An interval of `completed` completions, `failures` of them failures,
    /// whose latencies sum to `latency_sum` (saturating at 2⁶⁴ − 1 ns), and
    /// whether the limit was `binding`.
    pub fn new(completed: u64, failures: u64, latency_sum: Duration, binding: bool) -> Self {
        Self {
            completed,
            failures,
            latency_sum_nanos: duration_nanos(latency_sum),
            binding,
            elapsed_nanos: 0,
        }
    }

    /// The same interval, lasting `elapsed` (saturating at 2⁶⁴ − 1 ns).
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptx::IntervalSummary;
    /// use std::time::Duration;
    ///
    /// let iv = IntervalSummary::new(10, 0, Duration::from_millis(50), false)
    ///     .with_elapsed(Duration::from_millis(500));
    /// assert_eq!(iv.elapsed_nanos, 500_000_000);
    /// ```
    #[must_use]
    pub fn with_elapsed(mut self, elapsed: Duration) -> Self {
        self.elapsed_nanos = duration_nanos(elapsed);
        self
    }
}

/// The law that moves an adaptive rate once per interval, from the rate
/// before it and an [`IntervalSummary`]: pure (no clock, no lock, no
/// allocation), so the same law can run wherever the interval's feedback is
/// gathered — in a [`RateLimiter`](crate::RateLimiter), or for a whole fleet
/// on a shared store.
///
/// [`RateLimiterBuilder::settings`](crate::RateLimiterBuilder::settings)
/// returns the law a builder configures; [`RateLaw::mizu`] builds one
/// directly. New laws may be added as variants (the enum and its variants
/// are `#[non_exhaustive]`, so they are built only by the checked
/// constructors).
///
/// # Examples
///
/// ```
/// use adaptx::{IntervalSummary, RateLaw};
/// use std::time::Duration;
///
/// let law = RateLaw::mizu(10, 1000, Duration::from_millis(100), 0.1)?;
/// let errors = IntervalSummary::new(100, 50, Duration::from_secs(5), true);
/// assert_eq!(law.next_rate(100, &errors), 80);
/// let fast = IntervalSummary::new(100, 0, Duration::from_secs(2), true);
/// assert_eq!(law.next_rate(100, &fast), 110);
/// assert_eq!(law.next_rate(5, &IntervalSummary::default()), 10); // clamped
/// # Ok::<(), adaptx::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum RateLaw {
    /// mizu's three rules (see [`RateLaw::next_rate`] and
    /// [`RateLimiter`](crate::RateLimiter)'s `# Algorithm`).
    #[non_exhaustive]
    Mizu {
        /// The floor of the rate, requests per second.
        min_rate: u64,
        /// The ceiling of the rate, requests per second.
        max_rate: u64,
        /// The mean latency above which the rate is cut by 10 %.
        target_latency: Duration,
        /// The error rate above which the rate is cut by 20 %.
        error_threshold: f64,
    },
    /// The AWS SDKs' adaptive retry rate (smithy-rs `ClientRateLimiter`,
    /// behind `RetryMode::Adaptive`), which remembers: on an interval with a
    /// failure (a throttle) the rate drops to 0.7 × the measured send rate
    /// (or the current rate if lower) and that becomes CUBIC's `W_max`;
    /// otherwise it follows `0.4·(t − K)³ + W_max`, `t` the time since the
    /// throttle and `K = ∛(0.3·W_max/0.4)` seconds, so it returns to
    /// `W_max` after `K` seconds, probes slowly near it, then faster. It is
    /// never above twice the measured send rate (an idle client cannot bank
    /// a high rate), and it does not limit at all until the first throttle:
    /// the rate is `max_rate` until then. The send rate is measured as AWS
    /// does, in half-second buckets with an exponential average (weight 0.8
    /// on the newest). Rates are rounded to whole requests per second and
    /// clamped into `[min_rate, max_rate]`.
    ///
    /// Being stateful, it is moved by [`RateLaw::step`]; a
    /// [`RateLimiter`](crate::RateLimiter) keeps its state. The interval's
    /// [`elapsed_nanos`](IntervalSummary::elapsed_nanos) is its clock.
    #[non_exhaustive]
    Cubic {
        /// The floor of the rate, requests per second.
        min_rate: u64,
        /// The ceiling of the rate, requests per second (the rate before
        /// the first throttle).
        max_rate: u64,
    },
}

/// Which law moves a [`RateLimiter`](crate::RateLimiter)'s rate: the
/// builder's [`algorithm`](crate::RateLimiterBuilder::algorithm) option.
///
/// # Examples
///
/// ```
/// use adaptx::{RateAlgorithm, RateLaw, RateLimiter};
///
/// let s = RateLimiter::builder()
///     .algorithm(RateAlgorithm::Cubic)
///     .min_rate(5)
///     .max_rate(500)
///     .settings()?;
/// assert_eq!(s.law, RateLaw::cubic(5, 500)?);
/// # Ok::<(), adaptx::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RateAlgorithm {
    /// mizu's three rules on errors and mean latency ([`RateLaw::Mizu`]).
    #[default]
    Mizu,
    /// The AWS SDKs' adaptive retry rate on throttles ([`RateLaw::Cubic`]):
    /// no limit until the first failure, then CUBIC recovery. It ignores
    /// latency (`target_latency` and `error_threshold` do not apply: every
    /// failure is a throttle).
    Cubic,
}

/// What a [`RateLaw`] remembers between intervals (nothing for
/// [`RateLaw::Mizu`]; the CUBIC curve, the send rate and the last throttle
/// for [`RateLaw::Cubic`]). Made by [`RateLaw::initial_state`], moved by
/// [`RateLaw::step`].
#[derive(Debug, Clone, PartialEq)]
pub struct RateLawState {
    /// Seconds of interval time seen (the law's own clock).
    now: f64,
    /// The CUBIC law's state, made on its first step.
    cubic: Option<Cubic>,
}

impl RateLawState {
    /// Whether the law limits yet: always for [`RateLaw::Mizu`]; for
    /// [`RateLaw::Cubic`], once it has seen its first throttle.
    pub fn enabled(&self) -> bool {
        self.cubic.is_none_or(|c| c.enabled())
    }

    /// The send rate the law measured, per second, if it measures one
    /// ([`RateLaw::Cubic`]).
    pub fn measured_rate(&self) -> Option<f64> {
        self.cubic.map(|c| c.measured())
    }
}

impl RateLaw {
    /// mizu's law, checked: rates within [`MAX_RATE_BOUND`], `min_rate <=
    /// max_rate`, `target_latency > 0`, `0 < error_threshold <= 1`.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first parameter out of its range, as
    /// the builder names it.
    pub fn mizu(
        min_rate: u64,
        max_rate: u64,
        target_latency: Duration,
        error_threshold: f64,
    ) -> Result<Self, ConfigError> {
        let (min_rate, max_rate) = check_range(min_rate, max_rate)?;
        if target_latency.is_zero() {
            return Err(ConfigError::new(
                "target_latency",
                target_latency,
                "a duration > 0",
            ));
        }
        let error_threshold = open_closed(
            "error_threshold",
            error_threshold,
            0.0,
            1.0,
            "0 < value <= 1",
        )?;
        Ok(Self::Mizu {
            min_rate,
            max_rate,
            target_latency,
            error_threshold,
        })
    }

    /// The AWS SDKs' adaptive retry law ([`RateLaw::Cubic`]), checked: rates
    /// within [`MAX_RATE_BOUND`], `min_rate <= max_rate`.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first parameter out of its range.
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptx::{IntervalSummary, RateLaw};
    /// use std::time::Duration;
    ///
    /// let law = RateLaw::cubic(1, 1000)?;
    /// let mut state = law.initial_state();
    /// let second = |n, throttles| {
    ///     IntervalSummary::new(n, throttles, Duration::ZERO, true).with_elapsed(Duration::from_secs(1))
    /// };
    /// // No throttle yet: not limiting.
    /// assert_eq!(law.step(&mut state, 1000, &second(100, 0)), 1000);
    /// // A throttle: 0.7 × the measured send rate (about 100 per second).
    /// let cut = law.step(&mut state, 1000, &second(100, 1));
    /// assert!((60..=80).contains(&cut), "{cut}");
    /// # Ok::<(), adaptx::ConfigError>(())
    /// ```
    pub fn cubic(min_rate: u64, max_rate: u64) -> Result<Self, ConfigError> {
        let (min_rate, max_rate) = check_range(min_rate, max_rate)?;
        Ok(Self::Cubic { min_rate, max_rate })
    }

    /// The state the law starts from.
    pub fn initial_state(&self) -> RateLawState {
        RateLawState {
            now: 0.0,
            cubic: None,
        }
    }

    /// The rate after an interval, from the rate before it and what the law
    /// remembers: [`next_rate`](RateLaw::next_rate) for a law without memory
    /// ([`RateLaw::Mizu`]); for [`RateLaw::Cubic`], the curve advanced by the
    /// interval's [`elapsed_nanos`](IntervalSummary::elapsed_nanos), fed its
    /// completions as responses and `failures > 0` as a throttle. Clamped
    /// into `[min_rate, max_rate]`; no input overflows.
    pub fn step(&self, state: &mut RateLawState, rate: u64, iv: &IntervalSummary) -> u64 {
        match *self {
            Self::Mizu { .. } => self.next_rate(rate, iv),
            Self::Cubic { min_rate, max_rate } => {
                state.now += iv.elapsed_nanos as f64 / 1e9;
                let now = state.now;
                let cubic = state.cubic.get_or_insert_with(|| Cubic::new(0.0));
                // The rate in force (rounded, clamped, or set by hand) is
                // the one a throttle cuts from.
                cubic.set_fill(rate.min(MAX_RATE_BOUND) as f64);
                let fill = cubic.update(now, iv.completed, iv.failures > 0);
                if !cubic.enabled() {
                    return max_rate;
                }
                // `as` saturates: NaN → 0, above u64::MAX → u64::MAX.
                (fill.round() as u64).clamp(min_rate, max_rate)
            }
        }
    }

    /// This law with its rate bounds replaced, checked as its constructor
    /// (and the builder) check them.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `min_rate` or `max_rate` if either is out of
    /// its range.
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptx::RateLaw;
    /// use std::time::Duration;
    ///
    /// let law = RateLaw::mizu(10, 1000, Duration::from_millis(100), 0.1)?;
    /// let wider = law.with_bounds(1, 5000)?;
    /// assert_eq!((wider.min_rate(), wider.max_rate()), (1, 5000));
    /// assert_eq!(law.with_bounds(50, 20).unwrap_err().field(), "max_rate");
    /// # Ok::<(), adaptx::ConfigError>(())
    /// ```
    pub fn with_bounds(&self, min_rate: u64, max_rate: u64) -> Result<Self, ConfigError> {
        match *self {
            Self::Mizu {
                target_latency,
                error_threshold,
                ..
            } => Self::mizu(min_rate, max_rate, target_latency, error_threshold),
            Self::Cubic { .. } => Self::cubic(min_rate, max_rate),
        }
    }

    /// Checks a rate set at run time: within [`MAX_RATE_BOUND`] and within
    /// this law's `[min_rate, max_rate]`.
    pub(crate) fn bounded_rate(&self, rate: u64) -> Result<u64, ConfigError> {
        let rate = check_rate("rate", rate)?;
        if (self.min_rate()..=self.max_rate()).contains(&rate) {
            Ok(rate)
        } else {
            Err(ConfigError::new("rate", rate, "min_rate ..= max_rate"))
        }
    }

    /// The floor of the rate, requests per second.
    pub fn min_rate(&self) -> u64 {
        match *self {
            Self::Mizu { min_rate, .. } | Self::Cubic { min_rate, .. } => min_rate,
        }
    }

    /// The ceiling of the rate, requests per second.
    pub fn max_rate(&self) -> u64 {
        match *self {
            Self::Mizu { max_rate, .. } | Self::Cubic { max_rate, .. } => max_rate,
        }
    }

    /// The rate after an interval, from the rate before it.
    ///
    /// For [`RateLaw::Mizu`], with `n` completions, `f` failures, latency
    /// sum `Σ`, error rate `e = f / n` and target `T`:
    ///
    /// - `n = 0`: unchanged (no evidence either way);
    /// - `e > threshold`: `floor(0.8 · rate)`;
    /// - else `Σ > T · n` (mean above target): `floor(0.9 · rate)`;
    /// - else `2Σ < T · n` (mean below `T/2`), `e < threshold/2` and the limit
    ///   was binding: `ceil(1.1 · rate)`, which is at least `rate + 1`;
    /// - otherwise unchanged;
    ///
    /// then clamped into `[min_rate, max_rate]`. A law that remembers
    /// ([`RateLaw::Cubic`]) is stepped from its initial state: use
    /// [`step`](RateLaw::step) to carry its memory from one interval to the
    /// next. The factors are exact
    /// integer fractions, so 100 becomes exactly 80, 90 or 110. A `rate`
    /// above [`MAX_RATE_BOUND`] is first taken as that bound, so no input
    /// overflows.
    pub fn next_rate(&self, rate: u64, iv: &IntervalSummary) -> u64 {
        match *self {
            Self::Mizu {
                min_rate,
                max_rate,
                target_latency,
                error_threshold,
            } => {
                let rate = rate.min(MAX_RATE_BOUND);
                if iv.completed == 0 {
                    return rate.clamp(min_rate, max_rate);
                }
                // `rate` ≤ MAX_RATE_BOUND (10⁹), so `rate · 11` cannot overflow.
                let error_rate = iv.failures as f64 / iv.completed as f64;
                // The mean compared exactly, as a rational: Σ/n vs T.
                let sum = u128::from(iv.latency_sum_nanos);
                let budget = u128::from(duration_nanos(target_latency)) * u128::from(iv.completed);
                let next = if error_rate > error_threshold {
                    rate * 8 / 10
                } else if sum > budget {
                    rate * 9 / 10
                } else if 2 * sum < budget && error_rate < error_threshold / 2.0 && iv.binding {
                    (rate * 11).div_ceil(10)
                } else {
                    rate
                };
                next.clamp(min_rate, max_rate)
            }
            Self::Cubic { .. } => self.step(&mut self.initial_state(), rate, iv),
        }
    }
}

/// Checks `min_rate` and `max_rate` against `1 ..= MAX_RATE_BOUND` and
/// each other.
fn check_range(min_rate: u64, max_rate: u64) -> Result<(u64, u64), ConfigError> {
    let min_rate = check_rate("min_rate", min_rate)?;
    let max_rate = check_rate("max_rate", max_rate)?;
    if max_rate < min_rate {
        return Err(ConfigError::below_min(
            "max_rate",
            max_rate,
            "min_rate",
            min_rate,
            MAX_RATE_BOUND,
        ));
    }
    Ok((min_rate, max_rate))
}

/// Checks a rate (or a burst) against `1 ..= MAX_RATE_BOUND`.
pub(crate) fn check_rate(field: &'static str, n: u64) -> Result<u64, ConfigError> {
    if (1..=MAX_RATE_BOUND).contains(&n) {
        Ok(n)
    } else {
        Err(ConfigError::new(field, n, "1 ..= 1000000000"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn law(min: u64, max: u64) -> RateLaw {
        RateLaw::mizu(min, max, Duration::from_millis(100), 0.1).expect("valid law")
    }

    fn iv(failures: u64, mean: u64) -> IntervalSummary {
        IntervalSummary {
            completed: 100,
            failures,
            latency_sum_nanos: 100 * mean,
            binding: true,
            elapsed_nanos: 1_000_000_000,
        }
    }

    /// mizu's notes §5, the Go tests and the extra vectors.
    #[test]
    fn mizu_vectors() {
        let l = law(10, 1000);
        let cases = [
            (50, 50 * MS, 80),
            (0, 200 * MS, 90),
            (0, 20 * MS, 110),
            (10, 20 * MS, 100),
            (4, 20 * MS, 110),
            (0, 50 * MS, 100),
            (0, 100 * MS, 100),
            (11, 500 * MS, 80),
            (7, 20 * MS, 100),
        ];
        for (failures, mean, want) in cases {
            assert_eq!(
                l.next_rate(100, &iv(failures, mean)),
                want,
                "{failures} {mean}"
            );
        }
        let over = IntervalSummary {
            latency_sum_nanos: 100 * 100 * MS + 100,
            ..iv(0, 0)
        };
        assert_eq!(l.next_rate(100, &over), 90);
    }

    #[test]
    fn clamps() {
        let l = law(10, 1000);
        let mut rate = 15;
        let mut seen = vec![];
        for _ in 0..4 {
            rate = l.next_rate(rate, &iv(100, 50 * MS));
            seen.push(rate);
        }
        assert_eq!(seen, [12, 10, 10, 10]);
        assert_eq!(l.next_rate(950, &iv(0, 10 * MS)), 1000);
    }

    #[test]
    fn low_rates_grow_and_idle_changes_nothing() {
        let l = law(1, 1000);
        assert_eq!(l.next_rate(9, &iv(0, MS)), 10);
        assert_eq!(l.next_rate(1, &iv(0, MS)), 2);
        assert_eq!(l.next_rate(1, &iv(100, MS)), 1);
        assert_eq!(l.next_rate(9, &IntervalSummary::default()), 9);
        let idle = IntervalSummary {
            binding: false,
            ..iv(0, MS)
        };
        assert_eq!(l.next_rate(9, &idle), 9);
    }
}

#[cfg(test)]
mod public_tests {
    use super::*;

    /// `RateLaw::mizu` names the parameter out of range, as the builder does.
    #[test]
    fn rate_law_constructor_names_the_bad_parameter() {
        let ms = Duration::from_millis(1);
        let field = |r: Result<RateLaw, ConfigError>| r.expect_err("invalid").field();
        assert_eq!(field(RateLaw::mizu(0, 10, ms, 0.1)), "min_rate");
        assert_eq!(field(RateLaw::mizu(10, 5, ms, 0.1)), "max_rate");
        assert_eq!(
            field(RateLaw::mizu(1, 5, Duration::ZERO, 0.1)),
            "target_latency"
        );
        assert_eq!(field(RateLaw::mizu(1, 5, ms, 0.0)), "error_threshold");
        let law = RateLaw::mizu(3, 7, ms, 1.0).expect("valid");
        assert_eq!((law.min_rate(), law.max_rate()), (3, 7));
    }

    /// A rate from elsewhere (another instance's configuration) is brought
    /// into range, and no rate overflows.
    #[test]
    fn rate_law_clamps_any_input_rate() {
        let law = RateLaw::mizu(10, 1000, Duration::from_millis(100), 0.1).expect("valid");
        let fast = IntervalSummary::new(100, 0, Duration::from_millis(100), true);
        assert_eq!(law.next_rate(u64::MAX, &fast), 1000);
        assert_eq!(law.next_rate(0, &IntervalSummary::default()), 10);
    }
}
