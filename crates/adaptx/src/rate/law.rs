//! The rate control law: mizu's three rules on one interval's completions,
//! pure (no clock, no lock, no allocation).

/// What one adjustment interval saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Interval {
    /// Operations that completed with an outcome (successes + failures).
    pub(crate) completed: u64,
    /// Of those, failures.
    pub(crate) failures: u64,
    /// Sum of their latencies, in nanoseconds.
    pub(crate) latency_sum: u64,
    /// Whether the limit was binding: a request was rejected, or an
    /// admission left a bucket with less than one token.
    pub(crate) binding: bool,
}

/// The law's parameters, checked by the builder.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Law {
    pub(crate) min_rate: u64,
    pub(crate) max_rate: u64,
    pub(crate) target_nanos: u64,
    pub(crate) error_threshold: f64,
}

impl Law {
    /// The rate after an interval, from the rate before it.
    ///
    /// With `n` completions, `f` failures, latency sum `Σ`, error rate
    /// `e = f / n` and target `T`:
    ///
    /// - `n = 0`: unchanged (no evidence either way);
    /// - `e > threshold`: `floor(0.8 · rate)`;
    /// - else `Σ > T · n` (mean above target): `floor(0.9 · rate)`;
    /// - else `2Σ < T · n` (mean below `T/2`), `e < threshold/2` and the limit
    ///   was binding: `ceil(1.1 · rate)`, which is at least `rate + 1`;
    /// - otherwise unchanged;
    ///
    /// then clamped into `[min_rate, max_rate]`. The factors are exact
    /// integer fractions, so 100 becomes exactly 80, 90 or 110.
    pub(crate) fn next_rate(&self, rate: u64, iv: &Interval) -> u64 {
        if iv.completed == 0 {
            return rate;
        }
        // `rate` ≤ MAX_RATE_BOUND (10⁹), so `rate · 11` cannot overflow.
        let error_rate = iv.failures as f64 / iv.completed as f64;
        // The mean compared exactly, as a rational: Σ/n vs T.
        let sum = u128::from(iv.latency_sum);
        let budget = u128::from(self.target_nanos) * u128::from(iv.completed);
        let next = if error_rate > self.error_threshold {
            rate * 8 / 10
        } else if sum > budget {
            rate * 9 / 10
        } else if 2 * sum < budget && error_rate < self.error_threshold / 2.0 && iv.binding {
            (rate * 11).div_ceil(10)
        } else {
            rate
        };
        next.clamp(self.min_rate, self.max_rate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn law(min: u64, max: u64) -> Law {
        Law {
            min_rate: min,
            max_rate: max,
            target_nanos: 100 * MS,
            error_threshold: 0.1,
        }
    }

    fn iv(failures: u64, mean: u64) -> Interval {
        Interval {
            completed: 100,
            failures,
            latency_sum: 100 * mean,
            binding: true,
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
        let over = Interval {
            latency_sum: 100 * 100 * MS + 100,
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
        assert_eq!(l.next_rate(9, &Interval::default()), 9);
        let idle = Interval {
            binding: false,
            ..iv(0, MS)
        };
        assert_eq!(l.next_rate(9, &idle), 9);
    }
}
