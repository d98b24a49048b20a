//! The AWS SDKs' adaptive retry rate (smithy-rs `ClientRateLimiter`, the
//! law behind `RetryMode::Adaptive`): a rate that drops to 0.7 of the
//! measured send rate on a throttle and climbs back along TCP CUBIC's
//! curve, never above twice the measured send rate, and that does not limit
//! at all until the first throttle. Pure: handed the time, no clock, no
//! lock, no allocation.
//!
//! The state machine is AWS's `update` step by step (the constants and the
//! order of the steps are those of the published algorithm); the only
//! generalisation is that one call may account for `sent > 1` responses,
//! so a limiter that gathers feedback per interval feeds a whole interval
//! at its end. With `sent = 1` per response it is AWS's law exactly, which
//! the vectors below check.

/// CUBIC's multiplicative decrease: the rate after a throttle is
/// `BETA` × the rate at the throttle.
pub(crate) const BETA: f64 = 0.7;
/// CUBIC's scale constant `C` (rate units per second³).
pub(crate) const SCALE: f64 = 0.4;
/// The weight of the newest measurement in the send-rate average.
const SMOOTH: f64 = 0.8;
/// The floor of the computed fill rate, tokens per second.
const MIN_FILL_RATE: f64 = 0.5;

/// The state of AWS's adaptive retry rate law. Times are seconds on the
/// caller's timeline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Cubic {
    /// The smoothed send rate, per second.
    measured: f64,
    /// The half-second bucket of the last send-rate measurement.
    last_bucket: f64,
    /// Responses counted since `last_bucket`.
    count: f64,
    /// The rate at the last throttle (CUBIC's `W_max`).
    last_max: f64,
    /// When the last throttle was seen.
    t_throttle: f64,
    /// Whether a throttle has been seen (until then the law does not limit).
    enabled: bool,
    /// The rate the law asks for, tokens per second.
    fill: f64,
    /// Whether `fill` is the rate in force even before the first throttle
    /// (set by [`set_fill`](Self::set_fill)): in AWS's SDKs the bucket is
    /// off until then, so a first throttle cuts from the measured rate
    /// alone; in a limiter that always enforces its rate, from the lower of
    /// the two.
    enforced: bool,
}

impl Cubic {
    /// The state at time `now`: AWS's `ClientRateLimiter::new(now)`.
    pub(crate) fn new(now: f64) -> Self {
        Self {
            measured: MIN_FILL_RATE,
            last_bucket: now.floor(),
            count: 0.0,
            last_max: 0.0,
            t_throttle: now,
            enabled: false,
            fill: 0.0,
            enforced: false,
        }
    }

    /// The rate the law asks for (meaningful once [`enabled`](Self::enabled)).
    #[cfg(test)]
    pub(crate) fn fill(&self) -> f64 {
        self.fill
    }

    /// Takes `rate` as the rate in force: a throttle cuts from it when it
    /// is below the measured send rate.
    pub(crate) fn set_fill(&mut self, rate: f64) {
        self.fill = rate;
        self.enforced = true;
    }

    /// Whether a throttle has been seen: before the first, the law does not
    /// limit (its fill rate is tracked but not enforced).
    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    /// The smoothed send rate, per second.
    pub(crate) fn measured(&self) -> f64 {
        self.measured
    }

    /// `sent` responses arrived by `now`, `throttled` if any of them was a
    /// throttle: AWS's `update_rate_limiter` (with `sent = 1` per response).
    /// Returns the new fill rate.
    pub(crate) fn update(&mut self, now: f64, sent: u64, throttled: bool) -> f64 {
        self.measure(now, sent);
        let calculated = if throttled {
            let rate = if self.enabled || self.enforced {
                self.measured.min(self.fill)
            } else {
                self.measured
            };
            self.last_max = rate;
            self.t_throttle = now;
            self.enabled = true;
            throttle(rate)
        } else {
            self.curve(now)
        };
        self.fill = calculated.min(2.0 * self.measured).max(MIN_FILL_RATE);
        self.fill
    }

    /// The send-rate measurement: responses are counted into half-second
    /// buckets, and each time a bucket boundary passes the rate since the
    /// previous one enters an exponential average.
    fn measure(&mut self, now: f64, sent: u64) {
        let bucket = (now * 2.0).floor() / 2.0;
        self.count += sent as f64;
        if bucket > self.last_bucket {
            let rate = self.count / (bucket - self.last_bucket);
            self.measured = SMOOTH * rate + (1.0 - SMOOTH) * self.measured;
            self.count = 0.0;
            self.last_bucket = bucket;
        }
    }

    /// The CUBIC curve at `now`: `C·(t − K)³ + W_max`, `t` the time since
    /// the last throttle and `K = ∛(W_max·(1 − β)/C)` the time at which it
    /// returns to `W_max`.
    fn curve(&self, now: f64) -> f64 {
        let k = (self.last_max * (1.0 - BETA) / SCALE).cbrt();
        SCALE * (now - self.t_throttle - k).powi(3) + self.last_max
    }
}

/// The rate after a throttle at `rate`.
fn throttle(rate: f64) -> f64 {
    rate * BETA
}

#[cfg(test)]
mod tests {
    use super::*;

    /// smithy-rs compares with a relative tolerance; so do we.
    fn close(got: f64, want: f64) -> bool {
        (got - want).abs() <= 1e-9 * want.abs().max(1.0)
    }

    #[track_caller]
    fn assert_close(got: f64, want: f64, what: &str) {
        assert!(close(got, want), "{what}: got {got}, want {want}");
    }

    /// The state of smithy-rs's test builder: every field 0.
    fn zeroed() -> Cubic {
        Cubic {
            measured: 0.0,
            last_bucket: 0.0,
            count: 0.0,
            last_max: 0.0,
            t_throttle: 0.0,
            enabled: false,
            fill: 0.0,
            enforced: false,
        }
    }

    /// `should_match_beta_decrease`.
    #[test]
    fn aws_beta_decrease() {
        assert_close(throttle(10.0), 7.0, "throttle(10)");
        let c = Cubic {
            last_max: 10.0,
            t_throttle: 1.0,
            ..zeroed()
        };
        assert_close(c.curve(1.0), 7.0, "curve at the throttle");
    }

    /// `test_calculated_rate_with_successes`.
    #[test]
    fn aws_calculated_rate_with_successes() {
        let c = Cubic {
            last_max: 10.0,
            t_throttle: 5.0,
            ..zeroed()
        };
        let want = [
            7.0,
            9.64893600966,
            10.000030849917364,
            10.453284520772092,
            13.408697022224185,
            21.26626835427364,
            36.425998516920465,
        ];
        for (i, want) in want.into_iter().enumerate() {
            let t = 5.0 + i as f64;
            assert!(
                (c.curve(t) - want).abs() <= 1e-9 * want,
                "t = {t}: {} vs {want}",
                c.curve(t)
            );
        }
    }

    /// `test_calculated_rate_with_throttles`: the formulas fed directly; on
    /// a throttle the rate is cut and becomes the new `W_max`.
    #[test]
    fn aws_calculated_rate_with_throttles() {
        let mut c = Cubic {
            last_max: 10.0,
            t_throttle: 5.0,
            ..zeroed()
        };
        let steps = [
            (false, 5.0, 7.0),
            (false, 6.0, 9.64893600966),
            (true, 7.0, 6.754255206761999),
            (true, 8.0, 4.727978644733399),
            (false, 9.0, 4.670125557970046),
            (false, 10.0, 4.770870456867401),
            (false, 11.0, 6.011819748005445),
            (false, 12.0, 10.792973431384178),
        ];
        let mut rate = 0.0;
        for (throttled, t, want) in steps {
            if throttled {
                rate = throttle(rate);
                c.last_max = rate;
                c.t_throttle = t;
            } else {
                rate = c.curve(t);
            }
            assert_close(rate, want, &format!("t = {t}"));
        }
    }

    /// `test_client_sending_rates`: the whole update path, one response
    /// every 0.2 s, throttles at 2.0 and 3.2.
    #[test]
    fn aws_client_sending_rates() {
        let mut c = zeroed();
        let steps = [
            (0.2, false, 0.0, 0.5),
            (0.4, false, 0.0, 0.5),
            (0.6, false, 4.8, 0.5),
            (0.8, false, 4.8, 0.5),
            (1.0, false, 4.16, 0.5),
            (1.2, false, 4.16, 0.6912),
            (1.4, false, 4.16, 1.0976),
            (1.6, false, 5.632, 1.6384),
            (1.8, false, 5.632, 2.3328),
            (2.0, true, 4.3264, 3.02848),
            (2.2, false, 4.3264, 3.48663917347026),
            (2.4, false, 4.3264, 3.821874416040255),
            (2.6, false, 5.66528, 4.053385727709987),
            (2.8, false, 5.66528, 4.200373108479454),
            (3.0, false, 4.333056, 4.282036558348658),
            (3.2, true, 4.333056, 2.99742559084406),
            (3.4, false, 4.333056, 3.4522263943863463),
        ];
        for (t, throttled, measured, fill) in steps {
            let got = c.update(t, 1, throttled);
            assert_close(c.measured(), measured, &format!("measured at {t}"));
            assert_close(got, fill, &format!("fill at {t}"));
        }
        assert!(c.enabled());
    }

    /// The 2× cap: after 10 req/s and a 10 s gap, the measured rate is
    /// 0.8·0.1 + 0.2·10 = 2.08, so the fill is at most 4.16 however far
    /// the curve has climbed.
    #[test]
    fn aws_fill_is_capped_at_twice_the_measured_rate() {
        let mut c = Cubic {
            measured: 10.0,
            last_bucket: 10.0,
            last_max: 100.0,
            t_throttle: 0.0,
            enabled: true,
            ..zeroed()
        };
        let fill = c.update(20.0, 1, false);
        assert_close(c.measured(), 2.08, "measured");
        assert_close(fill, 4.16, "fill");
    }

    /// Until the first throttle the law is not enabled; `new` starts it at
    /// `now` with a measured rate of 0.5.
    #[test]
    fn aws_new_starts_disabled_at_half_a_request_per_second() {
        let mut c = Cubic::new(3.7);
        assert!(!c.enabled());
        assert_close(c.measured(), 0.5, "measured");
        c.update(4.0, 1, false);
        assert!(!c.enabled());
        c.update(4.2, 1, true);
        assert!(c.enabled());
    }

    /// One call for `sent` responses measures the same rate as `sent` calls
    /// at the same instant.
    #[test]
    fn batched_responses_measure_like_single_ones() {
        let (mut one, mut many) = (zeroed(), zeroed());
        for _ in 0..40 {
            one.update(0.1, 1, false);
        }
        one.update(0.6, 1, false);
        many.update(0.1, 40, false);
        many.update(0.6, 1, false);
        assert_close(many.measured(), 0.8 * 41.0 / 0.5, "measured");
        assert_close(one.measured(), many.measured(), "measured");
        assert_close(one.fill(), many.fill(), "fill");
    }
}
