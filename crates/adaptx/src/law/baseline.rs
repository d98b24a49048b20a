//! The RTT baseline manager of the delay laws: relearns the latency floor
//! when it moves, by re-probing at reduced concurrency.
//!
//! # Why
//!
//! The limiter's RTT_min ([`WindowSummary::rtt_floor_nanos`]) is the lowest
//! window mean seen so far, drifting up by the min-latency decay (0.001 of
//! the gap per window: a half-life of about 700 windows). It follows a floor
//! that drops at once, but not one that rises: when the backend becomes
//! twice as slow without becoming busier, a delay law reads the extra
//! latency as a queue it built and cuts the limit to the minimum, where it
//! stays (the simulator's scenario 08: Vegas kept 0.04 of its limit).
//!
//! A windowed minimum alone cannot tell a slower backend from a queue of
//! our own: under a standing queue every window's mean rises too. What
//! tells them apart is the latency at *reduced concurrency*: our queue
//! drains when fewer operations are admitted, a slower service does not.
//! This is Envoy's adaptive concurrency filter (the `minRTT` measured at
//! `min_concurrency`, re-measured periodically with jitter) and BBR's
//! PROBE_RTT (a windowed minimum that expires and is re-measured with the
//! in-flight cut).
//!
//! # Algorithm
//!
//! The manager runs in the law, at the window close, on the window summary
//! alone (no clock, no lock, no allocation). With `m` the floor the law
//! reads and `L` the limit in force:
//!
//! - before the first re-probe, `m` is the limiter's RTT_min, exactly as
//!   before (the reference vectors are unchanged);
//! - a **re-probe** cuts the limit to `max(1, floor(L · BASELINE_PROBE_RATIO))`
//!   (half) and waits, up to [`BASELINE_PROBE_WINDOWS`] windows, for a window
//!   whose peak in-flight is within the cut limit: the operations admitted
//!   before have drained, so no completion of that window waited in a queue
//!   the old limit built. If its mean latency (of successes) is less than
//!   [`BASELINE_PROBE_DROP`] below the latency before the cut, less
//!   concurrency did not mean less latency: that latency is the floor, and
//!   `m` becomes it, above the limiter's RTT_min if need be. If the latency
//!   fell by more, part of it was a queue of ours, maybe not all drained:
//!   the probe cuts again (at most [`BASELINE_PROBE_HALVINGS`] cuts), so a
//!   queue deeper than half the limit is measured through too. The probe
//!   then restores `L` exactly. A fresh failure ends it, and the law judges
//!   that window at `L`;
//! - after a re-probe, `m = max(RTT_min, r)` with `r` the lowest window mean
//!   since the probe, its measurement included: a floor that rises is
//!   adopted, one that drops is followed at once;
//! - a re-probe starts on a window without failures that used at least half
//!   the limit (a less used one already runs at reduced concurrency, and a
//!   cut would only turn the next burst away) when either
//!   - the law read a queue against `m` on [`BASELINE_EXPIRY_WINDOWS`] such
//!     windows in a row (Vegas: `q > β`, a cut; Gradient: the
//!     [`GRADIENT_QUEUE_BOUND`]): a queue that the law's own cuts did not
//!     drain, or that it never cuts, is either no queue at all or one worth
//!     confirming. Each probe that leaves `m` within [`BASELINE_MATCH`] of
//!     where it was doubles that count for the next one (up to
//!     [`BASELINE_PROBE_INTERVAL`]), since the queue was real; a probe that
//!     moves `m` restores it; or
//!   - [`BASELINE_PROBE_INTERVAL`] windows plus a jitter of up to
//!     [`BASELINE_PROBE_JITTER`] of it have passed, none of them within
//!     [`BASELINE_MATCH`] of `m` (BBR's expiry: a floor the traffic keeps
//!     meeting needs no probe), so a small drift is relearned too.
//!
//! The jitter is drawn from a SplitMix64 hash of the latency sum of the
//! window that ends a probe: limiters of a fleet, which never see the same
//! nanoseconds, drift apart without a shared seed (Envoy #8337: probes in
//! lockstep empty a backend), and the law stays a pure function of its
//! inputs. The restore is an increase, so the limiter's jitter may withhold
//! a little of it (`jitter / 4` of the step on average).
//!
//! A probe costs, on a backend that does not queue, two windows at half the
//! limit; on one that queues, less, since the first cut mostly shortens the
//! queue. A backend whose latency stays at the floor is never probed.
//!
//! [`GRADIENT_QUEUE_BOUND`]: super::GRADIENT_QUEUE_BOUND

use super::{WindowSummary, app_limited};
use crate::rng::splitmix64;

/// Windows that used at least half the limit, none of them within
/// [`BASELINE_MATCH`] of the latency floor, after which the floor is
/// re-probed (before jitter; counted from the last probe or the last window
/// that matched the floor).
pub const BASELINE_PROBE_INTERVAL: u32 = 100;

/// A window whose mean latency is at most `1 + BASELINE_MATCH` times the
/// floor confirms it: no re-probe is needed while the traffic keeps doing
/// so (BBR's rule: `min_rtt` expires only when no sample has matched it).
pub const BASELINE_MATCH: f64 = 0.05;

/// Up to this fraction of [`BASELINE_PROBE_INTERVAL`] is added to each
/// interval, drawn afresh after every probe (Envoy's default is 15 %).
pub const BASELINE_PROBE_JITTER: f64 = 0.15;

/// A re-probe holds the limit at this fraction of the limit in force
/// (at least 1).
pub const BASELINE_PROBE_RATIO: f64 = 0.5;

/// A re-probe adopts its measurement as the floor, even above the
/// limiter's RTT_min, only if it is at most this fraction below the latency
/// of the window that started it: cutting the concurrency then barely
/// changed the latency, which is the backend's, not a queue of ours. A
/// larger fall means the probe drained a queue of ours (and, with a deep
/// one, perhaps not all of it): its measurement then only lowers the floor.
pub const BASELINE_PROBE_DROP: f64 = 0.1;

/// The most times one re-probe cuts the limit: as long as a cut lowers
/// the latency by more than [`BASELINE_PROBE_DROP`], the queue was ours and
/// the probe cuts again, so a queue deeper than half the limit is drained
/// too.
pub const BASELINE_PROBE_HALVINGS: u32 = 3;

/// The most windows one cut of a re-probe lasts when none of them measures (its
/// operations never drained below the reduced limit, or no success came
/// back): the floor is then kept and the limit restored.
pub const BASELINE_PROBE_WINDOWS: u32 = 3;

/// Consecutive windows on which the law read a queue at the floor (Vegas:
/// a cut; Gradient: the standing-queue bound) after which the floor is
/// re-probed at once. Each probe that leaves the floor where it was doubles
/// the count for the next one (up to [`BASELINE_PROBE_INTERVAL`]): the queue
/// was real, and probing it again soon would only cost throughput. A probe
/// that moves the floor restores it.
pub const BASELINE_EXPIRY_WINDOWS: u32 = 5;

/// What the law does with a window, as the baseline manager decides.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Step {
    /// Run the law's formula on the window, at limit `limit` (the live one,
    /// or the one restored by a probe ended by a failure) with the latency
    /// floor `floor` (nanoseconds, `None` before any).
    Judge { limit: usize, floor: Option<f64> },
    /// A probe starts, continues or ends: the next limit is this one.
    Set(usize),
}

/// An active re-probe.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Probe {
    /// The limit in force when the probe started, restored after it.
    deferred: usize,
    /// The floor the law read when the probe started.
    floor: Option<f64>,
    /// The mean latency of the window before the present cut, ns.
    before: f64,
    /// Times the limit was cut since the probe started.
    halvings: u32,
    /// Probe windows closed at the present cut.
    windows: u32,
}

/// The reduced limit of a probe's cut: `max(1, floor(limit · BASELINE_PROBE_RATIO))`.
fn halve(limit: usize) -> usize {
    ((limit as f64 * BASELINE_PROBE_RATIO) as usize).max(1)
}

/// Whether `a` and `b` are within [`BASELINE_MATCH`] of each other.
fn matches(a: f64, b: f64) -> bool {
    a <= (1.0 + BASELINE_MATCH) * b && b <= (1.0 + BASELINE_MATCH) * a
}

/// The RTT baseline manager: see the module docs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Baseline {
    /// The lowest window mean since the last re-probe measured the floor
    /// (that measurement included); `None` before the first.
    relearned: Option<f64>,
    probe: Option<Probe>,
    /// Windows that used at least half the limit since the last one whose
    /// mean came within [`BASELINE_MATCH`] of the floor, or since the last
    /// probe ended.
    unmatched: u32,
    /// Unmatched windows after which the next probe is due.
    due: u32,
    /// Consecutive windows that used at least half the limit on which the
    /// law read a queue.
    queued: u32,
    /// Queued windows after which the next probe is due.
    expiry: u32,
}

impl Default for Baseline {
    fn default() -> Self {
        Self {
            relearned: None,
            probe: None,
            unmatched: 0,
            due: BASELINE_PROBE_INTERVAL,
            queued: 0,
            expiry: BASELINE_EXPIRY_WINDOWS,
        }
    }
}

impl Baseline {
    /// Forgets everything learned, as after construction.
    pub(crate) fn reset(&mut self) {
        *self = Self::default();
    }

    /// The relearned floor, whether a re-probe runs, and the queued
    /// windows: the law's part of a [`LawState`](super::LawState).
    pub(crate) fn state(&self) -> (Option<f64>, bool, u32) {
        (self.relearned, self.probe.is_some(), self.queued)
    }

    /// The floor the law reads: the limiter's RTT_min, raised to what the
    /// last re-probe (and every window since) measured.
    fn floor(&self, rtt_min: Option<f64>) -> Option<f64> {
        match (rtt_min, self.relearned) {
            (Some(m), Some(r)) => Some(m.max(r)),
            (m, None) => m,
            (None, r) => r,
        }
    }

    /// Folds one closed window in, at live limit `limit`, and says what the
    /// law does with it. `reads_queue(floor)` says whether the law, reading
    /// this window against `floor`, sees a queue of its own (Vegas: it
    /// would cut; Gradient: the standing-queue bound holds it).
    pub(crate) fn step(
        &mut self,
        limit: usize,
        w: &WindowSummary,
        reads_queue: impl FnOnce(f64) -> bool,
    ) -> Step {
        // A success mean of 0 (none, or a coarse clock) measures nothing.
        let mean = (w.mean_ok_rtt_nanos > 0.0).then_some(w.mean_ok_rtt_nanos);
        if let Some(probe) = self.probe {
            return self.probe_step(probe, limit, mean, w);
        }

        if let (Some(m), Some(r)) = (mean, self.relearned) {
            self.relearned = Some(r.min(m));
        }
        let floor = self.floor(w.rtt_floor_nanos);
        // Half the limit or less in use: the latency says nothing about the
        // limit, and the concurrency is already reduced.
        let busy = !app_limited(limit, w.peak_in_flight);
        if let (Some(m), Some(f)) = (mean, floor) {
            if m <= (1.0 + BASELINE_MATCH) * f {
                // The traffic itself confirmed the floor.
                self.unmatched = 0;
            } else if busy {
                self.unmatched = self.unmatched.saturating_add(1);
            }
            if busy {
                self.queued = if reads_queue(f) {
                    self.queued.saturating_add(1)
                } else {
                    0
                };
            }
        }
        let due = self.queued >= self.expiry || self.unmatched >= self.due;
        if due && busy && w.failures == 0 && w.stale_failures == 0 {
            self.probe = Some(Probe {
                deferred: limit,
                floor,
                before: w.mean_ok_rtt_nanos,
                halvings: 1,
                windows: 0,
            });
            return Step::Set(halve(limit));
        }
        Step::Judge { limit, floor }
    }

    /// One window of the active probe `probe`.
    fn probe_step(
        &mut self,
        mut probe: Probe,
        limit: usize,
        mean: Option<f64>,
        w: &WindowSummary,
    ) -> Step {
        probe.windows += 1;
        self.probe = Some(probe);
        let deferred = probe.deferred;
        if w.failures > 0 {
            self.end_probe(probe, w);
            return Step::Judge {
                limit: deferred,
                floor: self.floor(w.rtt_floor_nanos),
            };
        }
        // Drained: every completion of the window saw at most the reduced
        // limit in flight, so none of them waited in a queue the old limit
        // built.
        if let Some(m) = mean.filter(|_| w.peak_in_flight <= limit) {
            if m >= (1.0 - BASELINE_PROBE_DROP) * probe.before {
                // Less concurrency, (nearly) the same latency: the floor,
                // whatever the limiter's RTT_min says.
                self.relearned = Some(m);
            } else if probe.halvings < BASELINE_PROBE_HALVINGS && limit > 1 {
                // The latency fell with the concurrency: part of it was a
                // queue of ours, perhaps not all drained yet. Cut again and
                // compare with this window.
                self.probe = Some(Probe {
                    before: m,
                    halvings: probe.halvings + 1,
                    windows: 0,
                    ..probe
                });
                return Step::Set(halve(limit));
            } else {
                // Still falling: `m` only bounds the floor from above (the
                // limiter's RTT_min has already taken it in).
                self.relearned = self.relearned.map(|r| r.min(m));
            }
            self.end_probe(probe, w);
            return Step::Set(deferred);
        }
        if probe.windows >= BASELINE_PROBE_WINDOWS {
            self.end_probe(probe, w);
            return Step::Set(deferred);
        }
        Step::Set(limit)
    }

    /// Ends `probe` on window `w` and schedules the next one.
    fn end_probe(&mut self, probe: Probe, w: &WindowSummary) {
        self.probe = None;
        self.unmatched = 0;
        self.queued = 0;
        let moved = match (probe.floor, self.floor(w.rtt_floor_nanos)) {
            (Some(a), Some(b)) => !matches(a, b),
            (a, b) => a.is_some() != b.is_some(),
        };
        self.expiry = if moved {
            BASELINE_EXPIRY_WINDOWS
        } else {
            self.expiry.saturating_mul(2).min(BASELINE_PROBE_INTERVAL)
        };
        let span = (f64::from(BASELINE_PROBE_INTERVAL) * BASELINE_PROBE_JITTER).ceil() as u64;
        let draw = splitmix64(w.mean_ok_rtt_nanos.to_bits() ^ w.samples.rotate_left(32));
        self.due = BASELINE_PROBE_INTERVAL + (draw % span.max(1)) as u32;
    }
}

/// A delay law whose floor the baseline manager keeps: its formula, split
/// from the manager so that both built-in delay laws share one
/// [`next_limit`].
pub(crate) trait DelayLaw {
    /// The law's manager.
    fn baseline(&mut self) -> &mut Baseline;
    /// Whether the law, reading window `w` at limit `limit` against the
    /// floor `floor`, sees a queue of its own (see [`Baseline::step`]).
    fn reads_queue(&self, limit: usize, floor: f64, w: &WindowSummary) -> bool;
    /// The law's formula at limit `limit` with the floor `floor`.
    fn judge(&self, limit: usize, floor: Option<f64>, w: &WindowSummary) -> usize;
}

/// [`ControlLaw::next_limit`](super::ControlLaw::next_limit) of a delay
/// law: the manager decides, and the formula runs unless a probe sets the
/// limit.
pub(crate) fn next_limit(law: &mut impl DelayLaw, limit: usize, w: &WindowSummary) -> usize {
    // The manager is moved out while it asks the formula about the window
    // (a move of a few words: no allocation).
    let mut baseline = std::mem::take(law.baseline());
    let step = baseline.step(limit, w, |floor| law.reads_queue(limit, floor, w));
    *law.baseline() = baseline;
    match step {
        Step::Set(next) => next,
        Step::Judge { limit, floor } => law.judge(limit, floor, w),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: f64 = 1e6;

    /// A clean window at peak in-flight `peak` with success mean `r` and the
    /// limiter's RTT_min `floor`.
    fn w(peak: usize, r: f64, floor: f64) -> WindowSummary {
        crate::law::test_window(peak, r, Some(floor), Some(r))
    }

    /// One window, for a law that reads a queue at a mean latency above
    /// 1.1 times the floor.
    fn step(b: &mut Baseline, limit: usize, w: &WindowSummary) -> Step {
        b.step(limit, w, |f| w.mean_rtt_nanos > 1.1 * f)
    }

    fn judge(limit: usize, floor: f64) -> Step {
        Step::Judge {
            limit,
            floor: Some(floor),
        }
    }

    /// Runs `n` windows at limit `limit` that keep the floor and trigger
    /// nothing.
    fn quiet(b: &mut Baseline, n: u32, limit: usize, floor: f64) {
        for _ in 0..n {
            assert_eq!(step(b, limit, &w(limit, floor, floor)), judge(limit, floor));
        }
    }

    #[test]
    fn before_any_probe_the_floor_is_the_limiters() {
        let mut b = Baseline::default();
        assert_eq!(
            step(&mut b, 20, &w(20, 80.0 * MS, 50.0 * MS)),
            judge(20, 50.0 * MS)
        );
        let none = crate::law::test_window(20, 80.0 * MS, None, None);
        assert_eq!(
            step(&mut b, 20, &none),
            Step::Judge {
                limit: 20,
                floor: None
            }
        );
    }

    #[test]
    fn expiry_probes_at_half_the_limit_and_restores_it_exactly() {
        let mut b = Baseline::default();
        // Four windows at twice the floor: 100 > 1.1 · 50, counting.
        for _ in 0..4 {
            assert_eq!(
                step(&mut b, 21, &w(21, 100.0 * MS, 50.0 * MS)),
                judge(21, 50.0 * MS)
            );
        }
        // The fifth starts the probe at floor(21 · 0.5) = 10.
        assert_eq!(
            step(&mut b, 21, &w(21, 100.0 * MS, 50.0 * MS)),
            Step::Set(10)
        );
        // First probe window: the 21 admitted before still drained through
        // it (peak 21 > 10): the limit stays at 10, nothing measured.
        assert_eq!(
            step(&mut b, 10, &w(21, 90.0 * MS, 50.0 * MS)),
            Step::Set(10)
        );
        // Second: drained, measures 100 ms and restores 21 exactly.
        assert_eq!(
            step(&mut b, 10, &w(10, 100.0 * MS, 50.0 * MS)),
            Step::Set(21)
        );
        // The law now reads max(50, 100) = 100 ms.
        assert_eq!(
            step(&mut b, 21, &w(21, 101.0 * MS, 50.0 * MS)),
            judge(21, 100.0 * MS)
        );
    }

    #[test]
    fn a_window_within_the_ratio_restarts_the_expiry_count() {
        let mut b = Baseline::default();
        for _ in 0..4 {
            step(&mut b, 20, &w(20, 60.0 * MS, 50.0 * MS));
        }
        // 55 ms is not above 1.1 · 50: the run is broken.
        assert_eq!(
            step(&mut b, 20, &w(20, 55.0 * MS, 50.0 * MS)),
            judge(20, 50.0 * MS)
        );
        for _ in 0..4 {
            assert_eq!(
                step(&mut b, 20, &w(20, 60.0 * MS, 50.0 * MS)),
                judge(20, 50.0 * MS)
            );
        }
        assert_eq!(
            step(&mut b, 20, &w(20, 60.0 * MS, 50.0 * MS)),
            Step::Set(10)
        );
    }

    #[test]
    fn app_limited_windows_do_not_count_toward_expiry() {
        let mut b = Baseline::default();
        // 9 of 20 in use: the latency says nothing about the limit.
        for _ in 0..10 {
            assert_eq!(
                step(&mut b, 20, &w(9, 100.0 * MS, 50.0 * MS)),
                judge(20, 50.0 * MS)
            );
        }
    }

    #[test]
    fn no_probe_starts_on_a_window_with_failures() {
        let mut b = Baseline::default();
        for _ in 0..4 {
            step(&mut b, 20, &w(20, 100.0 * MS, 50.0 * MS));
        }
        for (fresh, stale) in [(1, 0), (0, 1)] {
            let failing = WindowSummary {
                failures: fresh,
                stale_failures: stale,
                ..w(20, 100.0 * MS, 50.0 * MS)
            };
            // Due from the fifth window above on, but a window with a
            // failure is the law's to judge.
            assert_eq!(step(&mut b, 20, &failing), judge(20, 50.0 * MS));
        }
        assert_eq!(
            step(&mut b, 20, &w(20, 100.0 * MS, 50.0 * MS)),
            Step::Set(10)
        );
    }

    #[test]
    fn a_failure_ends_the_probe_and_is_judged_at_the_restored_limit() {
        let mut b = Baseline::default();
        for _ in 0..5 {
            step(&mut b, 20, &w(20, 100.0 * MS, 50.0 * MS));
        }
        let failing = WindowSummary {
            failures: 1,
            ..w(10, 100.0 * MS, 50.0 * MS)
        };
        assert_eq!(step(&mut b, 10, &failing), judge(20, 50.0 * MS));
        // Nothing was measured: the floor is still the limiter's.
        assert_eq!(
            step(&mut b, 20, &w(20, 50.0 * MS, 50.0 * MS)),
            judge(20, 50.0 * MS)
        );
    }

    #[test]
    fn a_probe_that_never_drains_keeps_the_floor() {
        let mut b = Baseline::default();
        for _ in 0..5 {
            step(&mut b, 20, &w(20, 100.0 * MS, 50.0 * MS));
        }
        assert_eq!(
            step(&mut b, 10, &w(20, 100.0 * MS, 50.0 * MS)),
            Step::Set(10)
        );
        assert_eq!(
            step(&mut b, 10, &w(11, 100.0 * MS, 50.0 * MS)),
            Step::Set(10)
        );
        // The third window ends it unmeasured: 20 restored, floor kept.
        assert_eq!(
            step(&mut b, 10, &w(11, 100.0 * MS, 50.0 * MS)),
            Step::Set(20)
        );
        assert_eq!(
            step(&mut b, 20, &w(20, 50.0 * MS, 50.0 * MS)),
            judge(20, 50.0 * MS)
        );
    }

    #[test]
    fn a_probe_window_without_successes_measures_nothing() {
        let mut b = Baseline::default();
        for _ in 0..5 {
            step(&mut b, 20, &w(20, 100.0 * MS, 50.0 * MS));
        }
        let empty = WindowSummary {
            mean_ok_rtt_nanos: 0.0,
            ..w(10, 100.0 * MS, 50.0 * MS)
        };
        assert_eq!(step(&mut b, 10, &empty), Step::Set(10));
        assert_eq!(
            step(&mut b, 10, &w(10, 100.0 * MS, 50.0 * MS)),
            Step::Set(20)
        );
        assert_eq!(
            step(&mut b, 20, &w(20, 100.0 * MS, 50.0 * MS)),
            judge(20, 100.0 * MS)
        );
    }

    #[test]
    fn the_relearned_floor_follows_a_drop_at_once() {
        let mut b = Baseline::default();
        for _ in 0..5 {
            step(&mut b, 20, &w(20, 100.0 * MS, 50.0 * MS));
        }
        assert_eq!(
            step(&mut b, 10, &w(10, 100.0 * MS, 50.0 * MS)),
            Step::Set(20)
        );
        // The backend speeds up to 40 ms: the limiter's RTT_min drops to it
        // as well, and the law reads 40 ms from this window on.
        assert_eq!(
            step(&mut b, 20, &w(20, 40.0 * MS, 40.0 * MS)),
            judge(20, 40.0 * MS)
        );
        // And a drop to 70 ms, above the limiter's all-time 50: the
        // relearned floor alone follows it.
        let mut b = Baseline::default();
        for _ in 0..5 {
            step(&mut b, 20, &w(20, 100.0 * MS, 50.0 * MS));
        }
        step(&mut b, 10, &w(10, 100.0 * MS, 50.0 * MS));
        assert_eq!(
            step(&mut b, 20, &w(20, 70.0 * MS, 50.0 * MS)),
            judge(20, 70.0 * MS)
        );
        assert_eq!(
            step(&mut b, 20, &w(20, 90.0 * MS, 50.0 * MS)),
            judge(20, 70.0 * MS)
        );
    }

    #[test]
    fn periodic_probe_comes_after_the_interval() {
        // 7 % above the floor: not a match (5 %), not an expiry (10 %), the
        // drift a law reads as a small standing queue. The first probe is
        // due after exactly BASELINE_PROBE_INTERVAL such windows.
        let mut b = Baseline::default();
        let drifted = w(20, 53.5 * MS, 50.0 * MS);
        for _ in 1..BASELINE_PROBE_INTERVAL {
            assert_eq!(step(&mut b, 20, &drifted), judge(20, 50.0 * MS));
        }
        assert_eq!(step(&mut b, 20, &drifted), Step::Set(10));
        // Drained at once: the probe ends on its first window, measuring
        // the drifted floor.
        let end = w(10, 53.5 * MS, 50.0 * MS);
        assert_eq!(step(&mut b, 10, &end), Step::Set(20));
        assert_eq!(step(&mut b, 20, &drifted), judge(20, 53.5 * MS));
        // The next is due after the interval plus the jitter drawn from the
        // ending window: SplitMix64(bits(5.35e7) ^ rotl(10, 32)) mod 15.
        let draw = splitmix64((53.5 * MS).to_bits() ^ 10u64.rotate_left(32)) % 15;
        assert_eq!(b.due, BASELINE_PROBE_INTERVAL + draw as u32);
    }

    #[test]
    fn windows_that_match_the_floor_never_reprobe() {
        let mut b = Baseline::default();
        quiet(&mut b, 10 * BASELINE_PROBE_INTERVAL, 20, 50.0 * MS);
        // 5 % above is still a match; one match restarts the count.
        let drifted = w(20, 53.5 * MS, 50.0 * MS);
        for _ in 1..BASELINE_PROBE_INTERVAL {
            assert_eq!(step(&mut b, 20, &drifted), judge(20, 50.0 * MS));
        }
        assert_eq!(
            step(&mut b, 20, &w(20, 52.5 * MS, 50.0 * MS)),
            judge(20, 50.0 * MS)
        );
        for _ in 1..BASELINE_PROBE_INTERVAL {
            assert_eq!(step(&mut b, 20, &drifted), judge(20, 50.0 * MS));
        }
        assert_eq!(step(&mut b, 20, &drifted), Step::Set(10));
    }

    #[test]
    fn app_limited_windows_never_start_a_probe() {
        // Half the limit or less in use: the concurrency is already low,
        // and a cut would turn the next burst away.
        let mut b = Baseline::default();
        for _ in 0..3 * BASELINE_PROBE_INTERVAL {
            assert_eq!(
                step(&mut b, 20, &w(9, 53.5 * MS, 50.0 * MS)),
                judge(20, 50.0 * MS)
            );
        }
    }

    #[test]
    fn periodic_jitter_stays_within_its_span_and_varies() {
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..200u32 {
            let mut b = Baseline::default();
            let r = 50.0 * MS + f64::from(i) * 1_234.5;
            b.probe = Some(Probe {
                deferred: 20,
                floor: Some(50.0 * MS),
                before: r,
                halvings: 1,
                windows: 0,
            });
            assert_eq!(step(&mut b, 10, &w(10, r, 50.0 * MS)), Step::Set(20));
            assert!(
                (BASELINE_PROBE_INTERVAL..BASELINE_PROBE_INTERVAL + 15).contains(&b.due),
                "due {}",
                b.due
            );
            seen.insert(b.due);
        }
        // 200 windows spread over the 15 values of the span.
        assert!(seen.len() >= 12, "{seen:?}");
    }

    #[test]
    fn a_probe_at_limit_one_measures_at_one() {
        let mut b = Baseline::default();
        for _ in 0..4 {
            step(&mut b, 1, &w(1, 100.0 * MS, 50.0 * MS));
        }
        assert_eq!(step(&mut b, 1, &w(1, 100.0 * MS, 50.0 * MS)), Step::Set(1));
        assert_eq!(step(&mut b, 1, &w(1, 100.0 * MS, 50.0 * MS)), Step::Set(1));
        assert_eq!(
            step(&mut b, 1, &w(1, 100.0 * MS, 50.0 * MS)),
            judge(1, 100.0 * MS)
        );
    }

    #[test]
    fn reset_forgets_the_relearned_floor() {
        let mut b = Baseline::default();
        for _ in 0..5 {
            step(&mut b, 20, &w(20, 100.0 * MS, 50.0 * MS));
        }
        step(&mut b, 10, &w(10, 100.0 * MS, 50.0 * MS));
        b.reset();
        assert_eq!(b, Baseline::default());
    }

    #[test]
    fn a_probe_that_drains_our_queue_cuts_again_until_the_latency_holds() {
        // 100 ms at 20, 60 ms at 10: the latency fell with the concurrency
        // by 40 % (more than BASELINE_PROBE_DROP), so part of it was our
        // queue: cut again, to 5. There 57 ms is within 10 % of 60: the
        // floor, adopted; 20 is restored.
        let mut b = Baseline::default();
        for _ in 0..5 {
            step(&mut b, 20, &w(20, 100.0 * MS, 50.0 * MS));
        }
        assert_eq!(step(&mut b, 10, &w(10, 60.0 * MS, 50.0 * MS)), Step::Set(5));
        assert_eq!(step(&mut b, 5, &w(5, 57.0 * MS, 50.0 * MS)), Step::Set(20));
        assert_eq!(
            step(&mut b, 20, &w(20, 100.0 * MS, 50.0 * MS)),
            judge(20, 57.0 * MS)
        );
        // At 91 ms after 100 (a 9 % fall) one cut is enough.
        let mut b = Baseline::default();
        for _ in 0..5 {
            step(&mut b, 20, &w(20, 100.0 * MS, 50.0 * MS));
        }
        assert_eq!(
            step(&mut b, 10, &w(10, 91.0 * MS, 50.0 * MS)),
            Step::Set(20)
        );
        assert_eq!(
            step(&mut b, 20, &w(20, 100.0 * MS, 50.0 * MS)),
            judge(20, 91.0 * MS)
        );
    }

    #[test]
    fn a_probe_still_falling_after_its_last_cut_does_not_raise_the_floor() {
        // 160 → 100 → 70 → 55 ms at 20 → 10 → 5 → 2: every cut took more
        // than 10 % off; after BASELINE_PROBE_HALVINGS cuts 55 ms only bounds
        // the floor, and the limiter's 50 ms stays.
        let mut b = Baseline::default();
        for _ in 0..5 {
            step(&mut b, 20, &w(20, 160.0 * MS, 50.0 * MS));
        }
        assert_eq!(
            step(&mut b, 10, &w(10, 100.0 * MS, 50.0 * MS)),
            Step::Set(5)
        );
        assert_eq!(step(&mut b, 5, &w(5, 70.0 * MS, 50.0 * MS)), Step::Set(2));
        assert_eq!(step(&mut b, 2, &w(2, 55.0 * MS, 50.0 * MS)), Step::Set(20));
        assert_eq!(
            step(&mut b, 20, &w(20, 160.0 * MS, 50.0 * MS)),
            judge(20, 50.0 * MS)
        );
    }

    #[test]
    fn a_probe_that_confirms_the_floor_doubles_the_expiry_count() {
        let mut b = Baseline::default();
        let confirm = |b: &mut Baseline, windows: u32| {
            for _ in 1..windows {
                let s = step(b, 20, &w(20, 100.0 * MS, 50.0 * MS));
                assert!(matches!(s, Step::Judge { limit: 20, .. }), "{s:?}");
            }
            assert_eq!(step(b, 20, &w(20, 100.0 * MS, 50.0 * MS)), Step::Set(10));
            // 10 → 5 keeps 52 ms: the floor, 51 ms, is confirmed (within
            // 5 % of the 50 ms read before).
            assert_eq!(step(b, 10, &w(10, 52.0 * MS, 50.0 * MS)), Step::Set(5));
            assert_eq!(step(b, 5, &w(5, 51.0 * MS, 50.0 * MS)), Step::Set(20));
        };
        for windows in [5, 10, 20, 40, 80, 100, 100] {
            confirm(&mut b, windows);
        }
        // A probe that moves the floor restores the count to 5.
        for _ in 0..99 {
            step(&mut b, 20, &w(20, 100.0 * MS, 50.0 * MS));
        }
        assert_eq!(
            step(&mut b, 20, &w(20, 100.0 * MS, 50.0 * MS)),
            Step::Set(10)
        );
        assert_eq!(
            step(&mut b, 10, &w(10, 100.0 * MS, 50.0 * MS)),
            Step::Set(20)
        );
        assert_eq!(b.expiry, BASELINE_EXPIRY_WINDOWS);
    }
}
