//! What runs a control law: the estimators (RTT_min, the moving average),
//! jitter, and the call into [`ControlLaw`] when a window closes.
//!
//! Everything here lives behind the limiter's controller mutex, which only
//! the completion that closes a window (at most one per window), `stats` and
//! `reset_stats` take.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use crate::law::{ControlLaw, WindowSummary};
use crate::window::{AdaptiveWindow, Event, Window};

/// Parameters of the controller that are not the law's.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ControlConfig {
    pub(crate) min_limit: usize,
    pub(crate) max_limit: usize,
    pub(crate) warmup: u64,
    pub(crate) smoothing: f64,
    pub(crate) min_latency_decay: f64,
    pub(crate) jitter: f64,
    /// The sample window, ns.
    pub(crate) window_nanos: u64,
    pub(crate) adaptive: Option<AdaptiveWindow>,
    /// A limit forced by hand (`Limiter::force_limit`): the law still runs
    /// on every window, but what it decides is not applied.
    pub(crate) forced: Option<usize>,
}

/// The state behind the controller mutex: the law, the estimators, the jitter
/// RNG and the totals of the windows handed over so far.
#[derive(Debug)]
pub(crate) struct Control {
    pub(crate) law: Box<dyn ControlLaw>,
    /// The controller's parameters; changed at run time under the mutex.
    pub(crate) cfg: ControlConfig,
    rng: fastrand::Rng,
    seed: u64,
    /// EMA of window means, ns.
    avg: Option<f64>,
    /// RTT_min, ns.
    floor: Option<f64>,
    /// Successful and failed samples of the windows handed over.
    closed_ok: u64,
    closed_fail: u64,
}

/// What a window close decided.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Decision {
    pub(crate) old: usize,
    pub(crate) new: usize,
    /// The window the law judged: the reason of the change.
    pub(crate) window: WindowSummary,
}

impl Control {
    pub(crate) fn new(mut law: Box<dyn ControlLaw>, seed: u64, cfg: ControlConfig) -> Self {
        seed_law(law.as_mut(), seed);
        Self {
            law,
            cfg,
            rng: fastrand::Rng::with_seed(seed),
            seed,
            avg: None,
            floor: None,
            closed_ok: 0,
            closed_fail: 0,
        }
    }

    /// Puts `law` in force, seeded from this controller's seed.
    pub(crate) fn set_law(&mut self, mut law: Box<dyn ControlLaw>) {
        seed_law(law.as_mut(), self.seed);
        self.law = law;
    }

    /// Forgets everything learned (the RNG restarts from its seed) and
    /// every sample of `w`, whose next window starts at `now`.
    pub(crate) fn reset(&mut self, w: &Window, now: u64) {
        self.law.reset();
        self.rng = fastrand::Rng::with_seed(self.seed);
        self.avg = None;
        self.floor = None;
        w.clear(now);
        self.closed_ok = 0;
        self.closed_fail = 0;
    }

    /// Samples recorded since construction or reset: (successes, failures).
    /// Never goes back: a sample is counted in the live window or, after the
    /// hand-over (which the mutex held here excludes), in the closed totals.
    pub(crate) fn totals(&self, w: &Window) -> (u64, u64) {
        let (ok, fail) = w.live();
        (
            self.closed_ok.wrapping_add(ok),
            self.closed_fail.wrapping_add(fail),
        )
    }

    /// Outcomes recorded since construction or reset, with and without a
    /// latency sample: (successes, failures).
    pub(crate) fn outcomes(&self, w: &Window) -> (u64, u64) {
        with_skipped(self.totals(w), w)
    }

    /// [`outcomes`](Control::outcomes) without the samples of the window in
    /// progress: no pass over its histograms. Never goes back either.
    #[cfg(feature = "metrics")]
    pub(crate) fn closed_outcomes(&self, w: &Window) -> (u64, u64) {
        with_skipped((self.closed_ok, self.closed_fail), w)
    }

    /// The smoothed mean latency the controller uses.
    pub(crate) fn average(&self) -> Option<Duration> {
        self.avg.map(|ns| Duration::from_nanos(ns as u64))
    }

    /// The RTT_min estimate.
    pub(crate) fn floor(&self) -> Option<Duration> {
        self.floor.map(|ns| Duration::from_nanos(ns as u64))
    }

    /// Closes the window of `w` that started at `start`, at `now`, and —
    /// when `adapt` and warmup allow — runs the law. Returns the limit the
    /// pool should move to, if it changes; a decrease starts a new decrease
    /// epoch.
    pub(crate) fn close(
        &mut self,
        w: &Window,
        cfg: &ControlConfig,
        limit: usize,
        start: u64,
        now: u64,
        adapt: bool,
    ) -> Option<Decision> {
        let f = w.hand_over(w.epoch());
        self.closed_ok = self.closed_ok.wrapping_add(f.ok);
        self.closed_fail = self.closed_fail.wrapping_add(f.fail);
        let samples = f.ok.saturating_add(f.fail);
        if samples == 0 {
            return None;
        }
        // RTT_min is the lowest window mean of successful samples: a single
        // lucky sample of a noisy backend would make service-time noise look
        // like queueing (with 10 % exponential jitter the minimum sample sits
        // ~10 % under the mean, which Vegas' default band reads as a queue),
        // and a fast failure is not a service time at all.
        if f.ok > 0 && f.ok_rtt > 0 {
            let m = f.ok_rtt as f64 / f.ok as f64;
            self.floor = Some(self.floor.map_or(m, |fl| fl.min(m)));
            // The next window may close after `rtt_multiple` of this
            // window's mean success latency: a recent latency, queueing
            // included, so that the operations admitted under the limit
            // decided now have completed by then (RTT_min would close it
            // before they do whenever a queue stretches the latency). A
            // window without successes keeps the last value.
            if let Some(a) = cfg.adaptive {
                w.set_early(a.early(m, cfg.window_nanos));
            }
        }
        let seen = self.closed_ok.saturating_add(self.closed_fail);
        if !adapt || seen < cfg.warmup {
            return None;
        }

        let mean = f.ok_rtt.wrapping_add(f.fail_rtt) as f64 / samples as f64;
        let mean_ok = if f.ok > 0 {
            f.ok_rtt as f64 / f.ok as f64
        } else {
            0.0
        };
        let summary = WindowSummary {
            duration_nanos: now.saturating_sub(start),
            samples,
            failures: f.fresh,
            stale_failures: f.fail.saturating_sub(f.fresh),
            peak_in_flight: usize::try_from(f.peak).unwrap_or(usize::MAX),
            mean_rtt_nanos: mean,
            mean_ok_rtt_nanos: mean_ok,
            min_rtt_nanos: if f.min_rtt == u64::MAX {
                0.0
            } else {
                f.min_rtt as f64
            },
            // A bucket's midpoint may lie just under the slowest success:
            // never under the successes' mean.
            max_ok_rtt_nanos: (f.max_ok_rtt as f64).max(mean_ok),
            rtt_floor_nanos: self.floor,
            rtt_average_nanos: self.avg,
        };
        // A user's law that panics must not take the completing operation's
        // permit down with it: the window holds the limit instead.
        let law = &mut self.law;
        let proposed = catch_unwind(AssertUnwindSafe(|| law.next_limit(limit, &summary)));
        let mut next = proposed.unwrap_or(limit);
        if next > limit && cfg.jitter > 0.0 {
            next -= self.withheld(next - limit, cfg.jitter);
        }
        let next = next.clamp(cfg.min_limit, cfg.max_limit);
        self.update_estimators(mean, cfg);
        if cfg.forced.is_some() {
            // The law has seen the window at the forced limit; its decision
            // waits for the limit to be released.
            return None;
        }
        if next < limit {
            w.bump_epoch();
        }
        (next != limit).then_some(Decision {
            old: limit,
            new: next,
            window: summary,
        })
    }

    /// How much of an increase of `delta` to withhold. As in the reference,
    /// on a fair coin flip `delta · jitter · u` is withheld (`u` uniform in
    /// [0, 1)); unlike the reference, that amount is rounded stochastically
    /// instead of truncated, so even a +1 step is withheld with probability
    /// `jitter / 4` and lockstep fleets drift apart (the reference withheld
    /// nothing for steps of 10 or less). The expected amount withheld,
    /// `delta · jitter / 4`, is the reference's.
    fn withheld(&mut self, delta: usize, jitter: f64) -> usize {
        let want = delta as f64 * jitter * self.rng.f64();
        if self.rng.f64() >= 0.5 {
            return 0;
        }
        let whole = want.floor();
        let extra = usize::from(self.rng.f64() < want - whole);
        (whole as usize).saturating_add(extra).min(delta)
    }

    fn update_estimators(&mut self, mean: f64, cfg: &ControlConfig) {
        if mean <= 0.0 {
            return;
        }
        let s = cfg.smoothing;
        let avg = match self.avg {
            Some(avg) => s * mean + (1.0 - s) * avg,
            None => mean,
        };
        self.avg = Some(avg);
        if cfg.min_latency_decay > 0.0 {
            if let Some(f) = self.floor {
                self.floor = Some(f + cfg.min_latency_decay * (avg - f));
            }
        }
    }
}

/// Seeds `law`'s own draws from the limiter's `seed`, through one
/// splitmix64 step so that they are not the jitter's draws. A user's law
/// that panics there keeps whatever seed it had, and the limiter goes on.
fn seed_law(law: &mut dyn ControlLaw, seed: u64) {
    let seed = crate::rng::splitmix64(seed);
    let _ = catch_unwind(AssertUnwindSafe(|| law.seed(seed)));
}

/// Sampled outcomes `(ok, fail)` with the skipped ones of `w` added.
fn with_skipped((ok, fail): (u64, u64), w: &Window) -> (u64, u64) {
    (
        ok.saturating_add(w.total(Event::SkippedOk)),
        fail.saturating_add(w.total(Event::SkippedFail)),
    )
}
