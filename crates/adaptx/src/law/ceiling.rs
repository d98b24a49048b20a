//! Ceiling: find the backend's best concurrency, rest at it, probe it
//! rarely.

use super::{ControlLaw, LawState, WindowSummary, app_limited, utilized};
use crate::defaults::DEFAULT_UTILIZATION;

/// How much the mean latency of successes may exceed the latency floor
/// before Ceiling reads it as a queue: 20 %.
pub const CEILING_DEFAULT_TOLERANCE: f64 = 0.2;

/// At least this many windows between two floor probes.
const PROBE_SPACING: u32 = 5;

/// A success latency this far above the allowed one (×) is a step of the
/// floor, not a queue the limit built: probe the floor before cutting.
const PROBE_JUMP: f64 = 1.5;

/// Cutting on latency this many windows in a row probes the floor too.
const PROBE_AFTER_CUTS: u32 = 3;

/// A window's fresh failures are overload when background noise at the
/// learned rate would have produced that many this rarely.
const NOISE_SIGNIFICANCE: f64 = 0.05;

/// The background failure rate learns over about this many samples.
const NOISE_SAMPLES: f64 = 1000.0;

/// A window in which more than this fraction failed teaches the background
/// rate nothing: it was overload.
const NOISE_MAX_FRACTION: f64 = 0.05;

/// Slow start multiplies the limit by this per clean, busy window: one step
/// past the ceiling overshoots it by at most half.
const SLOW_START_GROWTH: f64 = 1.5;

/// The first step of a climb above a ceiling that moved up (after the
/// probe's +1 came back clean); each next one doubles.
const EXPLORE_FIRST_STEP: usize = 4;

/// A limit resting at a ceiling gives 7 % of itself away (keeps this
/// fraction, rounded down) for one window...
const YIELD_KEEP: f64 = 0.93;

/// ...after this many resting windows...
const YIELD_EVERY: u32 = 10;

/// ...twice as many after each time nobody took the room, up to this many...
const YIELD_EVERY_MAX: u32 = 160;

/// ...when it is at least this large.
const YIELD_FROM: usize = 10;

/// A neighbour sharing the ceiling counts as present for this many windows
/// after the last sign of it (room given away was taken, or a probe of the
/// ceiling found room on a clean backend)...
const NEIGHBOUR_WINDOWS: u32 = 60;

/// ...and while it is, the limit gives room away every this many resting
/// windows...
const NEIGHBOUR_YIELD_EVERY: u32 = 5;

/// ...and probes the ceiling every this many windows, so room a neighbour
/// gives is found while it is there.
const NEIGHBOUR_REST: u32 = 2;

/// The largest decrease factor of an overload below a known ceiling.
const DECREASE: f64 = 0.9;

/// A window measures the concurrency the backend served only with at least
/// this many successes.
const MEASURE_MIN_OK: u64 = 10;

/// Where a limit is and what it has learned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No overload seen yet: grow by half per window.
    SlowStart,
    /// Overload was seen at `ceiling`: rest just below it, probe it every few
    /// windows.
    Known { ceiling: usize },
    /// A probe of the known ceiling was clean: the ceiling moved up; climb
    /// by `step`, doubling it per clean window.
    Explore { step: usize },
}

/// Ceiling: a law that finds the backend's best concurrency C*, rests there
/// and probes it rarely, from overload failures *and* latency.
///
/// - **Slow start.** Until the first overload it grows the limit by half per
///   clean, busy window, so the first overshoot is at most 1.5 × C*.
/// - **Decrease to what was served.** On a fresh overload failure (the
///   limiter closes the window at once: [`reacts_to_first_failure`]) it uses
///   the concurrency the backend actually served in the last window long
///   enough to measure it, `N = successes / window time × mean success
///   latency` (Little's law): the concurrency in use, not a fixed fraction,
///   so a ceiling costs no sawtooth. Measured where the limit was higher
///   than `N`, `N` is the ceiling's level: the limit goes there. Measured
///   where the limit itself bound it, the ceiling lies between `N` (which
///   held) and the failing limit: the limit tries halfway.
/// - **Noise.** Fresh failures count as overload only when background noise
///   could not explain them: the law learns the rate of failures that come at
///   any load (from windows where at most 5 % failed), and a window whose
///   failures a Poisson count at that rate would reach with probability 5 %
///   or more is clean — a flaky network costs no capacity.
/// - **Ceiling memory.** It remembers the lowest limit that failed, rests one
///   below it, and every 2–4 windows (jittered) probes it: the probe costs one
///   rejection when the ceiling is still there; a clean probe means the
///   ceiling moved up, and the limit climbs by 4, 8, 16, … per window until
///   it fails. Below the resting level it returns halfway per window. A
///   failure at a resting level that held cuts to what was served and by a
///   tenth at least.
/// - **Sharing.** After 10 resting windows a limit of 10 or more gives 7 %
///   of itself away for one window and climbs back: a client sharing the
///   ceiling may take the room (a bigger limit gives more), so clients that
///   started unequal move toward equal shares. When nobody took it (the
///   climb back met no failure) it waits twice as long the next time, up to
///   160 windows, so a client alone pays almost nothing; when the room was
///   taken, it gives again after 10. While a neighbour has shown itself in
///   the last 60 windows — it took room this limit gave, or a probe of the
///   ceiling found room on a clean backend (no learned background failures,
///   no late ones, so a timeout or a flaky network is not taken for one) —
///   the limit gives room every 5 resting windows and probes every 2, so
///   room one client gives is found while it is there.
/// - **Latency.** The floor is the lowest mean success latency of a measured
///   window since the floor was last probed. A busy window whose success mean
///   exceeds the floor by more than `tolerance` is a queue: the limit moves to
///   `L · floor · (1 + tolerance) / mean`, and that level becomes the ceiling.
///   A mean more than 1.5 × the allowed one, or three such cuts in a row,
///   first *probes* the floor (at most every 5 windows): one window at half the
///   limit, whose mean becomes the floor — so a backend that got slower, not
///   busier, keeps its limit.
///
/// Stale failures (the drain of an overload already answered) neither cut nor
/// stop a climb. A window that used less than `utilization` of the limit never
/// grows it, and one that used less than half of it never cuts on latency.
///
/// # Examples
///
/// ```
/// use adaptx::{Ceiling, ControlLaw, WindowSummary};
/// use std::time::Duration;
///
/// let mut law = Ceiling::default();
/// let (second, ms50) = (Duration::from_secs(1), Duration::from_millis(50));
/// let busy = WindowSummary::new(second, 200, 0, 10, ms50)?
///     .with_rtt_floor(ms50)
///     .with_rtt_average(ms50);
/// // Slow start: half again per clean, busy window.
/// assert_eq!(law.next_limit(10, &busy), 15);
/// // 300 successes of 50 ms in a second: 15 were served at a time; a fresh
/// // failure finds 15 served at a limit of 22, so the limit goes to 15.
/// let failing = WindowSummary::new(second, 301, 1, 22, ms50)?
///     .with_rtt_floor(ms50)
///     .with_rtt_average(ms50);
/// assert_eq!(law.next_limit(22, &failing), 15);
/// # Ok::<(), adaptx::ConfigError>(())
/// ```
///
/// [`reacts_to_first_failure`]: ControlLaw::reacts_to_first_failure
#[derive(Debug, Clone)]
pub struct Ceiling {
    tolerance: f64,
    utilization: f64,
    phase: Phase,
    /// Windows spent at the resting level since the last probe.
    rested: u32,
    /// Windows to rest before the next probe.
    rest: u32,
    /// Windows rested since the limit last gave room away, how many to rest
    /// before the next time, and whether it is climbing back from one.
    since_yield: u32,
    yield_every: u32,
    yielding: bool,
    /// Windows since the last sign of a neighbour sharing the ceiling
    /// (`u32::MAX`: none yet).
    since_neighbour: u32,
    rng: u64,
    /// The lowest mean success latency of a measured window since the last
    /// floor probe.
    floor: Option<f64>,
    since_floor_probe: u32,
    /// Consecutive windows cut on latency.
    latency_cuts: u32,
    /// The limit to restore after a floor probe in progress.
    floor_probe: Option<usize>,
    /// The concurrency served in the last measured window, and the limit
    /// it was measured at.
    served: Option<f64>,
    served_at: usize,
    /// Background failure probability per sample (failures that come at any
    /// load: a flaky network).
    noise: f64,
}

impl Default for Ceiling {
    fn default() -> Self {
        Self::new(CEILING_DEFAULT_TOLERANCE, DEFAULT_UTILIZATION)
    }
}

impl Ceiling {
    /// A Ceiling law with latency `tolerance` (the queue it allows above the
    /// floor, as a fraction) and the `utilization` a window needs to grow the
    /// limit. The builder checks both.
    pub fn new(tolerance: f64, utilization: f64) -> Self {
        let mut law = Self {
            tolerance,
            utilization,
            phase: Phase::SlowStart,
            rested: 0,
            rest: 0,
            since_yield: 0,
            yield_every: YIELD_EVERY,
            yielding: false,
            since_neighbour: u32::MAX,
            rng: 0x2545_F491_4F6C_DD1D,
            floor: None,
            since_floor_probe: PROBE_SPACING,
            latency_cuts: 0,
            floor_probe: None,
            served: None,
            served_at: 0,
            noise: 0.0,
        };
        law.rest = law.draw_rest();
        law
    }

    /// 2, 3 or 4 windows, from a splitmix64 stream: probes of clients that
    /// started together drift apart. With a neighbour: 2.
    fn draw_rest(&mut self) -> u32 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        if self.neighbour() {
            NEIGHBOUR_REST
        } else {
            2 + (z % 3) as u32
        }
    }

    /// Whether a neighbour sharing the ceiling showed itself in the last
    /// [`NEIGHBOUR_WINDOWS`] windows.
    fn neighbour(&self) -> bool {
        self.since_neighbour < NEIGHBOUR_WINDOWS
    }

    /// Rest just below `ceiling` from now on.
    fn remember(&mut self, ceiling: usize) {
        self.phase = Phase::Known { ceiling };
        self.rested = 0;
    }

    /// Whether `failures` of `samples` are more than background noise could
    /// explain: `P(F ≥ failures) < NOISE_SIGNIFICANCE` for `F` Poisson with
    /// mean `noise · samples`.
    fn significant(&self, failures: u64, samples: u64) -> bool {
        let mu = self.noise * samples as f64;
        if mu <= 0.0 {
            return true;
        }
        // P(F < f) = Σ_{k < f} e^−μ μ^k / k!, summed until it settles.
        let mut term = (-mu).exp();
        let mut below = 0.0;
        for k in 0..failures.min(1000) {
            below += term;
            term *= mu / (k + 1) as f64;
        }
        1.0 - below < NOISE_SIGNIFICANCE
    }

    /// Folds a window's failure fraction into the background rate.
    fn learn_noise(&mut self, failures: u64, samples: u64) {
        if samples == 0 {
            return;
        }
        let fraction = failures as f64 / samples as f64;
        if fraction > NOISE_MAX_FRACTION {
            return;
        }
        let keep = (1.0 - 1.0 / NOISE_SAMPLES).powf(samples as f64);
        self.noise = self.noise * keep + fraction * (1.0 - keep);
    }

    /// An overload failure at limit `limit`.
    fn overloaded(&mut self, limit: usize) -> usize {
        if self.yielding {
            // The room given away was taken: a neighbour shares the ceiling.
            // Keep giving every YIELD_EVERY windows.
            self.yielding = false;
            self.yield_every = YIELD_EVERY;
            self.since_neighbour = 0;
        }
        let tenth = (limit as f64 * DECREASE) as usize;
        let (next, ceiling) = match self.phase {
            // A probe failed: the ceiling is still there.
            Phase::Known { ceiling } if limit >= ceiling => (limit - 1, limit),
            // Hit while resting at a level that held: the ceiling came down
            // (or a neighbour sharing it probed). Down to what was served,
            // and by a tenth at least, so a bigger client gives up more room.
            Phase::Known { ceiling } if limit + 1 == ceiling && self.rested > 0 => {
                let next = self
                    .served
                    .map_or(tenth, |n| (n.round() as usize).min(tenth));
                (next, limit)
            }
            // Climbing (slow start, exploring, or back toward the resting
            // level): down to what was served. Measured at a limit the
            // backend could not fill, that is the ceiling; measured at one it
            // did fill, the ceiling is somewhere up to here.
            _ => match self.served {
                Some(n) => {
                    let served = n.round() as usize;
                    // The limit had a permit or more the backend did not
                    // fill (an open demand keeps a fraction of one free
                    // between arrivals: that does not count).
                    if self.served_at as f64 - n >= 1.0 {
                        (served, served + 1)
                    } else {
                        // `served` held and `limit` failed: try between.
                        (served.midpoint(limit), limit)
                    }
                }
                None => (tenth, limit),
            },
        };
        let next = next.min(limit - 1).max(1);
        self.remember(ceiling.max(next + 1));
        next
    }

    /// The limit after a clean, busy window; `quiet`: the window had no late
    /// failures and no background failures were learned, so room a probe
    /// finds is a neighbour's (or a ceiling that moved), not a timeout yet to
    /// come or noise.
    fn grow(&mut self, limit: usize, quiet: bool) -> usize {
        match self.phase {
            Phase::SlowStart => ((limit as f64 * SLOW_START_GROWTH).ceil() as usize).max(limit + 1),
            Phase::Known { ceiling } => {
                let rest_at = ceiling - 1;
                if limit < rest_at {
                    limit + (rest_at - limit).div_ceil(2)
                } else if limit == rest_at {
                    if self.yielding {
                        // Back at rest without a failure: nobody took the
                        // room. Give it less often.
                        self.yielding = false;
                        self.yield_every = (2 * self.yield_every).min(YIELD_EVERY_MAX);
                    }
                    self.rested += 1;
                    self.since_yield += 1;
                    let every = if self.neighbour() {
                        NEIGHBOUR_YIELD_EVERY
                    } else {
                        self.yield_every
                    };
                    if self.since_yield >= every && limit >= YIELD_FROM {
                        // Give 7 % of the room away for a window and climb
                        // back: a neighbour sharing the ceiling may take it
                        // (the bigger the limit, the more it gives), so
                        // shares even out.
                        self.since_yield = 0;
                        self.yielding = true;
                        return (limit as f64 * YIELD_KEEP) as usize;
                    }
                    if self.rested >= self.rest {
                        self.rested = 0;
                        self.rest = self.draw_rest();
                        ceiling
                    } else {
                        limit
                    }
                } else {
                    // A clean, busy window at (or above) the remembered
                    // ceiling: it has moved up (or a neighbour gave room).
                    if quiet {
                        self.since_neighbour = 0;
                    }
                    self.phase = Phase::Explore {
                        step: 2 * EXPLORE_FIRST_STEP,
                    };
                    limit + EXPLORE_FIRST_STEP
                }
            }
            Phase::Explore { step } => {
                self.phase = Phase::Explore {
                    step: step.saturating_mul(2),
                };
                limit.saturating_add(step)
            }
        }
    }
}

impl ControlLaw for Ceiling {
    fn name(&self) -> &'static str {
        "ceiling"
    }

    fn reacts_to_first_failure(&self) -> bool {
        true
    }

    fn next_limit(&mut self, limit: usize, w: &WindowSummary) -> usize {
        self.since_neighbour = self.since_neighbour.saturating_add(1);
        let ok = w
            .samples
            .saturating_sub(w.failures)
            .saturating_sub(w.stale_failures);
        let mean_ok = (ok > 0 && w.mean_ok_rtt_nanos > 0.0).then_some(w.mean_ok_rtt_nanos);
        self.since_floor_probe = self.since_floor_probe.saturating_add(1);
        if let Some(saved) = self.floor_probe.take() {
            // The window at half the limit measured the floor.
            if let Some(m) = mean_ok {
                self.floor = Some(m);
            }
            self.since_floor_probe = 0;
            self.latency_cuts = 0;
            if w.failures == 0 {
                return saved;
            }
        }
        // Little's law over a window long enough to hold a few round trips.
        if let Some(m) = mean_ok {
            if ok >= MEASURE_MIN_OK && w.duration_nanos as f64 >= 2.0 * m {
                self.floor = Some(self.floor.map_or(m, |f| f.min(m)));
                self.served = Some(ok as f64 / w.duration_nanos as f64 * m);
                self.served_at = limit;
            }
        }
        let all_failed = w.failures + w.stale_failures;
        if w.failures > 0 && self.significant(w.failures, w.samples) {
            self.learn_noise(all_failed, w.samples);
            return self.overloaded(limit);
        }
        // No fresh failure, or no more than the background rate explains:
        // the window counts as clean.
        self.learn_noise(all_failed, w.samples);
        if let (Some(floor), Some(m)) = (self.floor, mean_ok) {
            let allowed = floor * (1.0 + self.tolerance);
            if m > allowed && !app_limited(limit, w.peak_in_flight) {
                let suspect = m > PROBE_JUMP * allowed || self.latency_cuts >= PROBE_AFTER_CUTS;
                if suspect && self.since_floor_probe >= PROBE_SPACING {
                    // Slower, or busier? One window at half the limit tells.
                    self.floor_probe = Some(limit);
                    return (limit / 2).max(1);
                }
                self.latency_cuts += 1;
                let next = ((limit as f64 * allowed / m) as usize)
                    .min(limit - 1)
                    .max(1);
                self.remember(next + 1);
                return next;
            }
        }
        self.latency_cuts = 0;
        if !utilized(limit, w.peak_in_flight, self.utilization) {
            return limit;
        }
        let quiet = self.noise == 0.0 && w.stale_failures == 0;
        self.grow(limit, quiet)
    }

    fn reset(&mut self) {
        *self = Self::new(self.tolerance, self.utilization);
    }

    fn state(&self) -> LawState {
        let (phase, ceiling, step) = match self.phase {
            Phase::SlowStart => ("slow_start", None, None),
            Phase::Known { ceiling } => ("known", Some(ceiling), None),
            Phase::Explore { step } => ("explore", None, Some(step)),
        };
        LawState::Ceiling {
            phase,
            ceiling,
            step,
            floor_nanos: self.floor,
            served: self.served,
            served_at: self.served_at,
            noise: self.noise,
            probing_floor: self.floor_probe.is_some(),
            yielding: self.yielding,
            neighbour: self.neighbour(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: f64 = 1e6;

    /// A window of `ok` successes of `rtt_ms` and `failures` fresh failures,
    /// `duration_ms` long, with `peak` in flight.
    fn win(ok: u64, failures: u64, peak: usize, rtt_ms: f64, duration_ms: u64) -> WindowSummary {
        WindowSummary {
            duration_nanos: duration_ms * 1_000_000,
            samples: ok + failures,
            failures,
            stale_failures: 0,
            peak_in_flight: peak,
            mean_rtt_nanos: rtt_ms * MS,
            mean_ok_rtt_nanos: if ok > 0 { rtt_ms * MS } else { 0.0 },
            min_rtt_nanos: rtt_ms * MS,
            rtt_floor_nanos: Some(rtt_ms * MS),
            rtt_average_nanos: Some(rtt_ms * MS),
        }
    }

    /// A saturated window at limit `l` of a 50 ms backend: `l` served.
    fn full(l: usize) -> WindowSummary {
        win(20 * l as u64, 0, l, 50.0, 1000)
    }

    #[test]
    fn ceiling_slow_start_grows_by_half_per_busy_clean_window() {
        let mut law = Ceiling::default();
        let mut l = 10;
        let mut seen = vec![l];
        for _ in 0..4 {
            l = law.next_limit(l, &full(l));
            seen.push(l);
        }
        assert_eq!(seen, [10, 15, 23, 35, 53]);
        // A window that did not use the limit proves nothing: hold.
        assert_eq!(law.next_limit(53, &win(200, 0, 20, 50.0, 1000)), 53);
    }

    #[test]
    fn ceiling_decreases_to_the_concurrency_served() {
        let mut law = Ceiling::default();
        // 20 served (400 successes of 50 ms in 1 s) at a limit of 30: the
        // backend, not the limit, was the bound.
        assert_eq!(law.next_limit(30, &win(400, 0, 30, 50.0, 1000)), 45);
        // Little's law: 400 / 1 s × 50 ms = 20. Measured where the limit was
        // higher, 20 is the ceiling's level: rest there, probe 21.
        assert_eq!(law.next_limit(45, &win(400, 1, 45, 50.0, 1000)), 20);
        assert_eq!(law.phase, Phase::Known { ceiling: 21 });
        // Served was measured where the limit bound it (20 of 20) and 30
        // failed: the ceiling is somewhere up to 30; try halfway.
        let mut law = Ceiling::default();
        assert_eq!(law.next_limit(20, &full(20)), 30);
        assert_eq!(law.next_limit(30, &win(2, 1, 30, 50.0, 3)), 25);
        assert_eq!(law.phase, Phase::Known { ceiling: 30 });
    }

    #[test]
    fn ceiling_rests_below_the_known_ceiling_and_probes_it() {
        let mut law = Ceiling {
            phase: Phase::Known { ceiling: 21 },
            rest: 3,
            ..Ceiling::default()
        };
        // Below the resting level: halfway back per window.
        assert_eq!(law.next_limit(10, &full(10)), 15);
        assert_eq!(law.next_limit(15, &full(15)), 18);
        assert_eq!(law.next_limit(18, &full(18)), 19);
        assert_eq!(law.next_limit(19, &full(19)), 20);
        // At the resting level for `rest` windows, then one probe.
        assert_eq!(law.next_limit(20, &full(20)), 20);
        assert_eq!(law.next_limit(20, &full(20)), 20);
        assert_eq!(law.next_limit(20, &full(20)), 21);
        // The probe fails (the window closed at its first rejection): back.
        assert_eq!(law.next_limit(21, &win(2, 1, 21, 50.0, 3)), 20);
        assert_eq!(law.phase, Phase::Known { ceiling: 21 });
        assert!((2..=4).contains(&law.rest));
    }

    #[test]
    fn ceiling_gives_room_away_and_less_often_when_nobody_takes_it() {
        let mut law = Ceiling {
            phase: Phase::Known { ceiling: 31 },
            rest: 1000,
            ..Ceiling::default()
        };
        for k in 1..YIELD_EVERY {
            assert_eq!(law.next_limit(30, &full(30)), 30, "window {k}");
        }
        // The 10th resting window: 30 → 27, then back halfway per window.
        assert_eq!(law.next_limit(30, &full(30)), 27);
        assert_eq!(law.next_limit(27, &full(27)), 29);
        assert_eq!(law.next_limit(29, &full(29)), 30);
        // Nobody took the room: the next time comes after 20 windows.
        for k in 1..2 * YIELD_EVERY {
            assert_eq!(law.next_limit(30, &full(30)), 30, "window {k}");
        }
        assert_eq!(law.next_limit(30, &full(30)), 27);
        // This time a neighbour took it: the climb back fails at 29 (27 was
        // served), so the next yield comes after 10 again.
        assert_eq!(law.next_limit(27, &full(27)), 29);
        assert_eq!(law.next_limit(29, &win(2, 1, 29, 50.0, 3)), 28);
        assert_eq!(law.yield_every, YIELD_EVERY);
        // Room taken is a neighbour's sign.
        assert!(law.neighbour());
        // Below YIELD_FROM a limit keeps what it has.
        let mut small = Ceiling {
            phase: Phase::Known { ceiling: 6 },
            rest: 1000,
            ..Ceiling::default()
        };
        for _ in 0..2 * YIELD_EVERY {
            assert_eq!(small.next_limit(5, &full(5)), 5);
        }
    }

    /// A lone limit resting below a hard ceiling `c` for `windows` windows:
    /// a probe of `c` fails at once (the limiter closes the window at the
    /// first fresh failure). Counts the windows that gave room away and the
    /// probes.
    fn rest_alone(law: &mut Ceiling, c: usize, windows: usize) -> (usize, usize) {
        let (mut limit, mut yields, mut probes) = (c - 1, 0, 0);
        for _ in 0..windows {
            let w = if limit >= c {
                win(2, 1, limit, 50.0, 3)
            } else {
                full(limit)
            };
            let next = law.next_limit(limit, &w);
            yields += usize::from(next < limit && limit == c - 1);
            probes += usize::from(next >= c);
            limit = next;
        }
        (yields, probes)
    }

    #[test]
    fn ceiling_shares_faster_while_a_neighbour_shows_itself() {
        // A neighbour showed itself (it took room given away, or a probe
        // found room) in the last 60 windows: room is given after 5 resting
        // windows, not 10...
        let mut law = Ceiling {
            phase: Phase::Known { ceiling: 31 },
            rest: 1000,
            since_neighbour: 0,
            ..Ceiling::default()
        };
        for k in 1..NEIGHBOUR_YIELD_EVERY {
            assert_eq!(law.next_limit(30, &full(30)), 30, "window {k}");
        }
        assert_eq!(law.next_limit(30, &full(30)), 27);
        assert!(matches!(
            law.state(),
            LawState::Ceiling {
                neighbour: true,
                yielding: true,
                ..
            }
        ));
        // ...and the ceiling is probed every 2 resting windows: a probe, its
        // failure, two windows at rest. Below YIELD_FROM nothing is given.
        let known = |since_neighbour| Ceiling {
            phase: Phase::Known { ceiling: 9 },
            rest: 2,
            since_neighbour,
            ..Ceiling::default()
        };
        let mut near = known(0);
        let (yields, probes) = rest_alone(&mut near, 9, NEIGHBOUR_WINDOWS as usize);
        assert_eq!((yields, probes), (0, NEIGHBOUR_WINDOWS as usize / 3));
        // Nothing more shows a neighbour (no probe finds room): after 60
        // windows the limit probes as a lone one does, every 2-4 windows.
        let lone = rest_alone(&mut near, 9, NEIGHBOUR_WINDOWS as usize);
        let mut alone = known(u32::MAX);
        let never = rest_alone(&mut alone, 9, NEIGHBOUR_WINDOWS as usize);
        for (yields, p) in [lone, never] {
            assert_eq!(yields, 0);
            assert!(
                p < probes * 9 / 10,
                "{p} probes vs {probes} with a neighbour"
            );
        }
        // A probe that finds room is a sign of a neighbour.
        let mut found = known(u32::MAX);
        assert_eq!(found.next_limit(8, &full(8)), 8);
        assert_eq!(found.next_limit(8, &full(8)), 9);
        assert!(!found.neighbour());
        found.next_limit(9, &full(9));
        assert!(found.neighbour());
        // Not where background failures were learned: room found there may
        // be noise read as clean.
        let mut noisy = Ceiling {
            noise: 0.001,
            ..known(u32::MAX)
        };
        assert_eq!(noisy.next_limit(8, &full(8)), 8);
        assert_eq!(noisy.next_limit(8, &full(8)), 9);
        noisy.next_limit(9, &full(9));
        assert!(!noisy.neighbour());
        // Nor in a window with late failures (here too many, 10 %, to be
        // learned as background): dropped requests' timeouts are still on
        // their way, so the room may not be there.
        let mut late = known(u32::MAX);
        assert_eq!(late.next_limit(8, &full(8)), 8);
        assert_eq!(late.next_limit(8, &full(8)), 9);
        let mut timing_out = full(9);
        timing_out.samples += 20;
        timing_out.stale_failures = 20;
        late.next_limit(9, &timing_out);
        assert!(!late.neighbour());
    }

    #[test]
    fn ceiling_climbs_faster_and_faster_once_a_probe_is_clean() {
        let mut law = Ceiling {
            phase: Phase::Known { ceiling: 21 },
            ..Ceiling::default()
        };
        // A clean, busy window at the ceiling: it has moved up.
        assert_eq!(law.next_limit(21, &full(21)), 25);
        assert_eq!(law.next_limit(25, &full(25)), 33);
        assert_eq!(law.next_limit(33, &full(33)), 49);
        // 49 fails; 33 was served where 33 was the limit: try halfway.
        assert_eq!(law.next_limit(49, &win(2, 1, 49, 50.0, 3)), 41);
        assert_eq!(law.phase, Phase::Known { ceiling: 49 });
    }

    #[test]
    fn ceiling_reads_rare_failures_as_noise_once_it_has_learned_them() {
        let mut law = Ceiling {
            phase: Phase::Known { ceiling: 21 },
            rest: 100,
            ..Ceiling::default()
        };
        // With no background rate learned, one failure is overload.
        assert!(law.significant(1, 400));
        // A long stretch with 1 % of failures in each window.
        for _ in 0..20 {
            law.learn_noise(4, 400);
        }
        assert!((law.noise - 0.01).abs() < 0.001, "{}", law.noise);
        // One failure in 100 samples is what 1 % noise makes: not overload,
        // the limit holds at its resting level.
        assert!(!law.significant(1, 100));
        assert_eq!(law.next_limit(20, &win(99, 1, 20, 50.0, 280)), 20);
        // One failure in the first 2 samples is not.
        assert!(law.significant(1, 2));
        // Nor are 8 in 100 (P(F ≥ 8 | μ = 1) ≈ 1e-5).
        assert!(law.significant(8, 100));
        // Overload windows teach the background rate nothing.
        let before = law.noise;
        law.learn_noise(50, 100);
        assert_eq!(law.noise, before);
    }

    #[test]
    fn ceiling_cuts_a_queue_and_probes_a_floor_that_jumped() {
        let mut law = Ceiling {
            phase: Phase::Known { ceiling: 60 },
            rest: 100,
            ..Ceiling::default()
        };
        // Learns a 50 ms floor; halfway back toward resting at 59.
        assert_eq!(law.next_limit(20, &full(20)), 40);
        law.since_floor_probe = 0;
        // 60 ms is within 20 % of the floor: keep climbing.
        assert_eq!(law.next_limit(40, &win(660, 0, 40, 60.0, 1000)), 50);
        // 75 ms at a limit of 50: a queue. 50 × 60 / 75 = 40.
        assert_eq!(law.next_limit(50, &win(660, 0, 50, 75.0, 1000)), 40);
        assert_eq!(law.phase, Phase::Known { ceiling: 41 });
        // Twice the floor is a jump: once the spacing allows, probe at half
        // the limit first...
        law.since_floor_probe = PROBE_SPACING;
        assert_eq!(law.next_limit(40, &win(400, 0, 40, 100.0, 1000)), 20);
        // ...whose mean is the new floor, and restore the limit.
        assert_eq!(law.next_limit(20, &win(200, 0, 20, 100.0, 1000)), 40);
        assert_eq!(law.floor, Some(100.0 * MS));
    }

    #[test]
    fn ceiling_climbs_through_stale_failures_and_resets() {
        let mut law = Ceiling::default();
        // The drain of an overload already answered neither cuts nor stops
        // a climb.
        let stale = WindowSummary {
            stale_failures: 3,
            ..full(20)
        };
        assert_eq!(law.next_limit(20, &stale), 30);
        assert_eq!(law.next_limit(30, &win(400, 40, 30, 50.0, 1000)), 20);
        assert_eq!(law.phase, Phase::Known { ceiling: 21 });
        law.reset();
        assert_eq!(law.phase, Phase::SlowStart);
        assert_eq!(law.noise, 0.0);
        assert!(law.reacts_to_first_failure());
    }
}
