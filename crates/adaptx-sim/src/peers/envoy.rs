//! Envoy's adaptive concurrency filter, gradient controller. A
//! re-implementation from the published description (envoyproxy/envoy
//! `source/extensions/filters/http/adaptive_concurrency/controller/gradient_controller.cc`
//! at 054694f / c35f67f, its test, and the v3 protos), not their code.
//!
//! # Timers and probes, mapped onto adaptx windows
//!
//! - The **update timer** (`concurrency_update_interval`, required by Envoy;
//!   here [`ENVOY_UPDATE_INTERVAL`] = 100 ms, the value of Envoy's example
//!   configuration) is the adaptx sample window: the simulator gives this
//!   peer 100 ms windows, and each handed-over window is one update.
//! - The **probe timer** (`min_rtt_calc_params.interval`, required; here
//!   [`ENVOY_MIN_RTT_INTERVAL`] = 60 s plus up to 15 % jitter) is counted in
//!   the summed `duration_nanos` of the windows since the last probe ended.
//!   When it has run out at a window's end, that window's samples are
//!   dropped (Envoy clears its histogram on entering a probe) and the probe
//!   starts. The jitter draws from a generator seeded at construction.
//! - **During a probe** the law returns `min_concurrency` (3), the limit
//!   that was in force is kept to be restored exactly, and windows are
//!   pooled until [`ENVOY_REQUEST_COUNT`] (50) samples are in. Envoy drops
//!   the samples of requests that started before the probe (its epoch rule,
//!   #11579); a summary does not say when its requests started, so a probe
//!   window counts only once its peak in-flight is at most
//!   `min_concurrency`, i.e. once the requests admitted before the probe
//!   have drained. As in Envoy, a probe has no time bound.
//! - **minRTT and sampleRTT** are Envoy's p50 of the samples; a summary
//!   has no percentiles, so they are the sample-weighted mean of the probe
//!   windows and the update window's mean.

use std::time::Duration;

use adaptx::{ControlLaw, WindowSummary};

/// `concurrency_update_interval`, as the simulator sets it (Envoy requires
/// a value; 100 ms is its documented example).
pub const ENVOY_UPDATE_INTERVAL: Duration = Duration::from_millis(100);

/// `min_rtt_calc_params.interval`, as the simulator sets it (Envoy requires
/// a value; 60 s is its documented example).
pub const ENVOY_MIN_RTT_INTERVAL: Duration = Duration::from_secs(60);

/// `min_rtt_calc_params.jitter`: up to this fraction of the interval is
/// added to each probe's delay.
pub const ENVOY_PROBE_JITTER: f64 = 0.15;

/// `min_rtt_calc_params.request_count`: samples per probe.
pub const ENVOY_REQUEST_COUNT: u64 = 50;

/// `min_rtt_calc_params.min_concurrency`: the pinned limit during a probe,
/// the floor of the limit, and where Envoy starts.
pub const ENVOY_MIN_CONCURRENCY: usize = 3;

/// `concurrency_limit_params` buffer: latency up to `minRTT·(1 + 0.25)`
/// is accepted.
pub const ENVOY_BUFFER: f64 = 0.25;

/// The smallest gradient.
pub const ENVOY_MIN_GRADIENT: f64 = 0.5;

/// The largest gradient.
pub const ENVOY_MAX_GRADIENT: f64 = 2.0;

/// Consecutive updates at the floor after which a probe starts at once
/// (Envoy #10647).
const FLOOR_TRIGGER: u32 = 5;

/// The delay to the next probe, in milliseconds: `interval + (r mod
/// ⌈interval_ms · jitter⌉)`, exactly `interval` without jitter.
pub(crate) fn probe_delay_ms(interval_ms: u64, jitter: f64, r: u64) -> u64 {
    let span = (interval_ms as f64 * jitter).ceil() as u64;
    if span == 0 {
        interval_ms
    } else {
        interval_ms + r % span
    }
}

/// Envoy's new limit: `⌊L·g + √(L·g)⌋` with `g = clamp(minRTT·(1 +
/// buffer) / sampleRTT, 0.5, 2)`, clamped to `[min, max]`.
pub(crate) fn gradient_limit(
    limit: usize,
    min_rtt: f64,
    sample_rtt: f64,
    buffer: f64,
    min: usize,
    max: usize,
) -> usize {
    let g = (min_rtt * (1.0 + buffer) / sample_rtt).clamp(ENVOY_MIN_GRADIENT, ENVOY_MAX_GRADIENT);
    let lg = limit as f64 * g;
    ((lg + lg.sqrt()) as usize).clamp(min, max)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Measuring minRTT at `min_concurrency`; `deferred` is restored after.
    Probe {
        deferred: usize,
        samples: u64,
        rtt_sum: f64,
    },
    /// Updating every window; the next probe is due when `since` reaches
    /// `due` (ns).
    Normal { since: u64, due: u64 },
}

/// A re-implementation of Envoy's **adaptive concurrency gradient
/// controller** from its published description — not their code.
///
/// # Algorithm
///
/// Every update interval (one adaptx window; see the module docs), outside
/// a probe, with `L` the limit and `sampleRTT` the window's latency:
///
/// - `g = clamp(minRTT·(1 + 0.25) / sampleRTT, 0.5, 2)`;
/// - `L ← ⌊L·g + √(L·g)⌋`, clamped to `[min, max]`;
/// - if `L` was and stays at `min`, a counter grows; at 5 a probe starts at
///   once; any other update resets it.
///
/// minRTT is *measured*: a probe pins the limit at `min_concurrency` (3)
/// until 50 samples of requests admitted during it are in, takes their
/// latency as minRTT and restores the previous limit exactly. Probes run at
/// the start and every 60 s + U[0, 15 %) after the previous one ended. At
/// `g = 1` the `√(L·g)` term still adds about `√L` per update, so the limit
/// climbs until latency exceeds `1.25·minRTT` (kept as is).
#[derive(Debug, Clone)]
pub struct EnvoyGradient {
    min: usize,
    max: usize,
    seed: u64,
    rng: fastrand::Rng,
    phase: Option<Phase>,
    min_rtt: Option<f64>,
    at_floor: u32,
}

impl EnvoyGradient {
    /// The gradient controller with Envoy's defaults, bounded to
    /// `[max(min_limit, 3), max_limit]`; `seed` seeds the probe jitter.
    pub fn new(min_limit: usize, max_limit: usize, seed: u64) -> Self {
        let min = min_limit.max(ENVOY_MIN_CONCURRENCY);
        Self {
            min,
            max: max_limit.max(min),
            seed,
            rng: fastrand::Rng::with_seed(seed),
            phase: None,
            min_rtt: None,
            at_floor: 0,
        }
    }

    /// The measured minRTT in nanoseconds, once a probe has ended.
    pub fn min_rtt_nanos(&self) -> Option<f64> {
        self.min_rtt
    }

    /// The floor: `max(min_limit, min_concurrency)`, where Envoy starts.
    pub fn floor(&self) -> usize {
        self.min
    }

    /// Whether a probe is running.
    pub fn probing(&self) -> bool {
        matches!(self.phase, None | Some(Phase::Probe { .. }))
    }

    fn enter_probe(&mut self, deferred: usize) -> usize {
        self.phase = Some(Phase::Probe {
            deferred,
            samples: 0,
            rtt_sum: 0.0,
        });
        self.at_floor = 0;
        self.min
    }

    fn probe_window(
        &mut self,
        w: &WindowSummary,
        deferred: usize,
        samples: u64,
        sum: f64,
    ) -> usize {
        // Only windows of requests admitted during the probe count.
        let (samples, sum) = if w.peak_in_flight <= self.min {
            (
                samples + w.samples,
                sum + w.mean_rtt_nanos * w.samples as f64,
            )
        } else {
            (samples, sum)
        };
        if samples < ENVOY_REQUEST_COUNT {
            self.phase = Some(Phase::Probe {
                deferred,
                samples,
                rtt_sum: sum,
            });
            return self.min;
        }
        self.min_rtt = Some(sum / samples as f64);
        let interval = ENVOY_MIN_RTT_INTERVAL.as_millis() as u64;
        let delay = probe_delay_ms(interval, ENVOY_PROBE_JITTER, self.rng.u64(..));
        self.phase = Some(Phase::Normal {
            since: 0,
            due: delay.saturating_mul(1_000_000),
        });
        deferred
    }
}

impl ControlLaw for EnvoyGradient {
    fn name(&self) -> &'static str {
        "envoy_gradient (peer)"
    }

    fn next_limit(&mut self, limit: usize, w: &WindowSummary) -> usize {
        match self.phase {
            // Envoy starts with a probe at min_concurrency.
            None => self.enter_probe(limit),
            Some(Phase::Probe {
                deferred,
                samples,
                rtt_sum,
            }) => self.probe_window(w, deferred, samples, rtt_sum),
            Some(Phase::Normal { since, due }) => {
                let since = since.saturating_add(w.duration_nanos);
                if since >= due {
                    return self.enter_probe(limit);
                }
                self.phase = Some(Phase::Normal { since, due });
                let (Some(min_rtt), true) = (self.min_rtt, w.mean_rtt_nanos > 0.0) else {
                    return limit;
                };
                let new = gradient_limit(
                    limit,
                    min_rtt,
                    w.mean_rtt_nanos,
                    ENVOY_BUFFER,
                    self.min,
                    self.max,
                );
                if limit == self.min && new == self.min {
                    self.at_floor += 1;
                    if self.at_floor >= FLOOR_TRIGGER {
                        return self.enter_probe(new);
                    }
                } else {
                    self.at_floor = 0;
                }
                new
            }
        }
    }

    fn reset(&mut self) {
        *self = Self::new(self.min, self.max, self.seed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peers::window;

    /// A law past its first probe, with minRTT `min_rtt_ms`, at `limit`.
    fn probed(min: usize, min_rtt_ms: f64, limit: usize) -> EnvoyGradient {
        let mut e = EnvoyGradient::new(min, 1000, 7);
        assert_eq!(e.next_limit(limit, &window(100, 10, 3, min_rtt_ms)), min);
        assert_eq!(e.next_limit(min, &window(100, 50, min, min_rtt_ms)), limit);
        assert!(!e.probing());
        e
    }

    #[test]
    fn gradient_matches_the_worked_vectors() {
        // L = 10, minRTT 5 ms, buffer 25 %.
        for (sample, want) in [(4.0, 19), (5.0, 16), (6.25, 13), (10.0, 8), (20.0, 7)] {
            assert_eq!(
                gradient_limit(10, 5.0, sample, 0.25, 3, 1000),
                want,
                "{sample}"
            );
        }
    }

    #[test]
    fn probe_timer_adds_jitter_modulo_its_span() {
        // TimerAccuracyTest: interval 100 s, jitter 10 %, rng 15000 → 105 s.
        assert_eq!(probe_delay_ms(100_000, 0.10, 15_000), 105_000);
        // TimerAccuracyTestNoJitter: 45 s.
        assert_eq!(probe_delay_ms(45_000, 0.0, 12_345), 45_000);
    }

    #[test]
    fn starts_with_a_probe_and_restores_the_previous_limit_exactly() {
        // MinRTTReturnToPreviousLimit.
        let mut e = EnvoyGradient::new(1, 1000, 0);
        assert!(e.probing());
        assert_eq!(e.next_limit(17, &window(100, 30, 17, 9.0)), 3);
        assert_eq!(e.next_limit(3, &window(100, 30, 3, 13.0)), 3);
        assert_eq!(e.next_limit(3, &window(100, 20, 3, 13.0)), 17);
        assert_eq!(e.min_rtt_nanos(), Some(13e6));
    }

    #[test]
    fn probe_ignores_windows_of_requests_admitted_before_it() {
        // MinRTTEpoch: old-epoch completions do not end the probe.
        let mut e = EnvoyGradient::new(1, 1000, 0);
        e.next_limit(40, &window(100, 10, 40, 50.0));
        for _ in 0..10 {
            assert_eq!(e.next_limit(3, &window(100, 25, 40, 300_000.0)), 3);
        }
        assert!(e.probing());
        // A probe has no time bound.
        assert_eq!(e.next_limit(3, &window(100, 49, 3, 5.0)), 3);
        assert_eq!(e.next_limit(3, &window(100, 1, 3, 5.0)), 40);
        assert_eq!(e.min_rtt_nanos(), Some(5e6));
    }

    #[test]
    fn probe_takes_the_mean_of_its_samples() {
        // CancelLatencySample takes the p50 of 1..5 ms (3 ms); the mean here
        // is 3 ms as well.
        let mut e = EnvoyGradient::new(1, 1000, 0);
        e.next_limit(10, &window(100, 1, 10, 1.0));
        for ms in [1.0, 2.0, 3.0, 4.0, 5.0] {
            e.next_limit(3, &window(100, 10, 3, ms));
        }
        assert!((e.min_rtt_nanos().unwrap() - 3e6).abs() < 1e-6);
    }

    #[test]
    fn five_updates_at_the_floor_start_a_probe_then_the_limit_recovers() {
        // ConsecutiveMinConcurrencyReset with buffer 25 %: min 7, minRTT
        // 5 ms, rounds at 20 ms (g = 0.3125 → 0.5) stay at 7.
        let mut e = probed(7, 5.0, 7);
        for round in 1..=4 {
            assert_eq!(e.next_limit(7, &window(100, 10, 7, 20.0)), 7, "{round}");
            assert!(!e.probing());
        }
        assert_eq!(e.next_limit(7, &window(100, 10, 7, 20.0)), 7);
        assert!(e.probing(), "the 5th update at the floor starts a probe");
        assert_eq!(e.next_limit(7, &window(100, 50, 7, 20.0)), 7);
        assert_eq!(e.min_rtt_nanos(), Some(20e6));
        // Afterwards the limit never decreases over 10 rounds at 20 ms.
        let mut limit = 7;
        for _ in 0..10 {
            let next = e.next_limit(limit, &window(100, 10, limit, 20.0));
            assert!(next >= limit);
            limit = next;
        }
        assert!(limit > 7);
    }

    #[test]
    fn one_update_off_the_floor_resets_the_trigger() {
        let mut e = probed(3, 5.0, 3);
        for _ in 0..4 {
            assert_eq!(e.next_limit(3, &window(100, 10, 3, 20.0)), 3);
        }
        // g = 1.25 at 5 ms: 3·1.25 = 3.75 + 1.94 → 5.
        assert_eq!(e.next_limit(3, &window(100, 10, 3, 5.0)), 5);
        // 5·0.5 = 2.5 + 1.58 → 4; then 4·0.5 = 2 + 1.41 → 3 (from 4: no count).
        assert_eq!(e.next_limit(5, &window(100, 10, 5, 50.0)), 4);
        assert_eq!(e.next_limit(4, &window(100, 10, 4, 50.0)), 3);
        for _ in 0..4 {
            assert_eq!(e.next_limit(3, &window(100, 10, 3, 50.0)), 3);
        }
        assert!(!e.probing(), "only 4 updates at the floor since the reset");
    }

    #[test]
    fn periodic_probe_is_due_after_the_interval_plus_jitter() {
        let mut e = probed(3, 10.0, 20);
        // 60 s of 100 ms windows at g = 1.25·10/12.5 = 1 grow by √L each; the
        // probe starts within [60 s, 69 s).
        let mut limit = 20;
        let mut windows = 0u64;
        while !e.probing() {
            limit = e.next_limit(limit, &window(100, 10, limit, 12.5));
            windows += 1;
            assert!(windows <= 690);
        }
        assert!(windows >= 600, "{windows}");
        assert_eq!(limit, 3);
    }

    #[test]
    fn sqrt_term_climbs_at_gradient_one() {
        let mut e = probed(3, 10.0, 20);
        // √20 = 4.47: 20 → 24.
        assert_eq!(e.next_limit(20, &window(100, 10, 20, 12.5)), 24);
    }

    #[test]
    fn reset_starts_over_with_a_probe() {
        let mut e = probed(3, 10.0, 20);
        e.reset();
        assert!(e.probing());
        assert_eq!(e.min_rtt_nanos(), None);
    }
}
