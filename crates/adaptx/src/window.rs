//! The per-window sample accumulator and the controller that runs a law when
//! a window closes.
//!
//! # Implementation details
//!
//! Completions add to the window without a lock. The sample counters are
//! split into [`STRIPES`] stripes, one per group of threads (a thread keeps
//! the stripe it was given on first use), each on its own cache lines: a
//! success adds to one bucket of its stripe's current latency histogram, a
//! failure to its stripe's cumulative `fail` counter; each adds its latency
//! to the stripe's cumulative `ok_rtt` or `fail_rtt`. That is two atomic read-modify-writes per
//! sample, on lines that threads of other stripes do not touch. The shared
//! per-window extremes (`min_rtt`, `peak`) are read on every sample but
//! written only when they move, and they share the limiter's hot cache line
//! with the permit state word, which every operation touches anyway.
//!
//! Successes are not counted separately: their number is the sum of the
//! histograms' buckets plus what earlier rotations folded away, computed
//! under the controller mutex (by the closer and by `stats`). A rotation
//! empties a histogram with one `swap(0)` per non-empty bucket, so a record
//! racing with it is counted either in the folded total or in the histogram
//! — never lost, never twice — and the success count read under the mutex
//! never goes back.
//!
//! The window start is an atomic timestamp; the completion that finds the
//! window over claims it with one CAS on the start and is the only one that
//! runs the law for it. The closer takes the controller mutex (uncontended:
//! at most one closer per window) and computes the window's counts as
//! differences of the cumulative counters since the previous close, so every
//! sample lands in exactly one window. A sample that races with a close may
//! have its count and its latency fall into neighbouring windows; the laws
//! tolerate that.
//!
//! Two latency histograms per stripe alternate: the current window records
//! into one, the previous window's stays readable for
//! [`Stats`](crate::Stats).

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use crate::histogram::{Counts, Histogram};
use crate::law::{ControlLaw, WindowSummary};
use crate::sync::{AtomicU64, Ordering};

/// Number of sample stripes: two keeps two contending threads apart at
/// 4 × 30 KiB of histograms per limiter.
pub(crate) const STRIPES: usize = 2;

/// Pads a value to its own cache line pair so hot atomics written by
/// different paths do not false-share.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Padded<T>(pub(crate) T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}

thread_local! {
    static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// This thread's stripe: handed out round-robin on first use.
#[inline]
fn stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    STRIPE.with(|s| {
        let mut i = s.get();
        if i == usize::MAX {
            i = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % STRIPES;
            s.set(i);
        }
        i
    })
}

/// Completions and rejections that carry no latency sample, counted per
/// stripe like the samples so that no path shares a contended counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// A success recorded without a latency sample.
    SkippedOk = 0,
    /// A failure recorded without a latency sample.
    SkippedFail = 1,
    /// A permit released without an outcome.
    Dropped = 2,
    /// An admission attempt that ended without a permit.
    Rejected = 3,
}

/// One stripe of sample counters.
#[derive(Debug)]
struct Stripe {
    fail: AtomicU64,
    ok_rtt: AtomicU64,
    fail_rtt: AtomicU64,
    events: [AtomicU64; 4],
    hist: [Histogram; 2],
}

impl Stripe {
    fn new() -> Self {
        Self {
            fail: AtomicU64::new(0),
            ok_rtt: AtomicU64::new(0),
            fail_rtt: AtomicU64::new(0),
            events: std::array::from_fn(|_| AtomicU64::new(0)),
            hist: [Histogram::new(), Histogram::new()],
        }
    }
}

/// Lock-free per-window accumulators. `repr(C)` keeps the small shared
/// fields together; the limiter places them on the permit state word's line.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Window {
    pub(crate) min_rtt: AtomicU64,
    pub(crate) peak: AtomicU64,
    pub(crate) start: AtomicU64,
    pub(crate) epoch: AtomicU64,
    stripes: Box<[Padded<Stripe>; STRIPES]>,
}

impl Window {
    pub(crate) fn new(start: u64) -> Self {
        Self {
            min_rtt: AtomicU64::new(u64::MAX),
            peak: AtomicU64::new(0),
            start: AtomicU64::new(start),
            epoch: AtomicU64::new(0),
            stripes: Box::new(std::array::from_fn(|_| Padded(Stripe::new()))),
        }
    }

    /// Adds one latency sample. No lock, no allocation.
    #[inline]
    pub(crate) fn add(&self, success: bool, nanos: u64, in_flight: usize) {
        let s = &self.stripes[stripe()];
        if success {
            let cur = self.epoch.load(Ordering::Relaxed) as usize & 1;
            s.hist[cur].record(nanos);
            s.ok_rtt.fetch_add(nanos, Ordering::Relaxed);
        } else {
            s.fail.fetch_add(1, Ordering::Relaxed);
            s.fail_rtt.fetch_add(nanos, Ordering::Relaxed);
        }
        // RTT_min is a service time: a fast failure (connection refused) or a
        // zero reading from a coarse clock is not one.
        if success && nanos > 0 && nanos < self.min_rtt.load(Ordering::Relaxed) {
            self.min_rtt.fetch_min(nanos, Ordering::Relaxed);
        }
        let in_flight = in_flight as u64;
        if in_flight > self.peak.load(Ordering::Relaxed) {
            self.peak.fetch_max(in_flight, Ordering::Relaxed);
        }
    }

    /// Counts one `event` on this thread's stripe.
    #[inline]
    pub(crate) fn count(&self, event: Event) {
        self.stripes[stripe()].events[event as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// How many `event`s were counted since construction or reset.
    pub(crate) fn total(&self, event: Event) -> u64 {
        self.sum(|s| s.events[event as usize].load(Ordering::Relaxed))
    }

    /// Sums `f` over the stripes.
    fn sum(&self, f: impl Fn(&Stripe) -> u64) -> u64 {
        self.stripes
            .iter()
            .fold(0u64, |acc, s| acc.wrapping_add(f(s)))
    }

    /// Successful samples still in the histograms.
    fn live_ok(&self) -> u64 {
        self.sum(|s| s.hist[0].count().wrapping_add(s.hist[1].count()))
    }

    fn fails(&self) -> u64 {
        self.sum(|s| s.fail.load(Ordering::Relaxed))
    }

    /// Cumulative latency of successful and of failed samples.
    fn rtt_sums(&self) -> (u64, u64) {
        (
            self.sum(|s| s.ok_rtt.load(Ordering::Relaxed)),
            self.sum(|s| s.fail_rtt.load(Ordering::Relaxed)),
        )
    }

    /// Adds the successful latency samples of the window in progress and,
    /// while that is younger than one window, of the window before it, into
    /// `out`.
    pub(crate) fn recent_latencies(&self, now: u64, window: u64, out: &mut Counts) {
        let start = self.start.load(Ordering::Acquire);
        let age = now.saturating_sub(start);
        let cur = self.epoch.load(Ordering::Acquire) as usize & 1;
        for s in self.stripes.iter() {
            // A sample at `t >= start + window` would have closed the window,
            // so every sample of the current window is older than
            // `age - window`.
            if age < window.saturating_mul(2) {
                s.hist[cur].add_to(out);
            }
            if age < window {
                s.hist[cur ^ 1].add_to(out);
            }
        }
    }

    /// Switches the histograms: the current one becomes the previous one and
    /// the one before that is emptied; returns how many samples it held.
    fn rotate(&self) -> u64 {
        let next = self.epoch.load(Ordering::Relaxed).wrapping_add(1);
        let folded = self.sum(|s| s.hist[next as usize & 1].take_count());
        self.epoch.store(next, Ordering::Release);
        folded
    }

    fn clear(&self, now: u64) {
        for s in self.stripes.iter() {
            s.fail.store(0, Ordering::Relaxed);
            s.ok_rtt.store(0, Ordering::Relaxed);
            s.fail_rtt.store(0, Ordering::Relaxed);
            for e in &s.events {
                e.store(0, Ordering::Relaxed);
            }
            s.hist[0].take_count();
            s.hist[1].take_count();
        }
        self.min_rtt.store(u64::MAX, Ordering::Relaxed);
        self.peak.store(0, Ordering::Relaxed);
        self.start.store(now, Ordering::Release);
    }
}

/// Parameters of the controller that are not the law's.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ControlConfig {
    pub(crate) min_limit: usize,
    pub(crate) max_limit: usize,
    pub(crate) warmup: u64,
    pub(crate) smoothing: f64,
    pub(crate) min_latency_decay: f64,
    pub(crate) jitter: f64,
}

/// The state behind the controller mutex: the law, the estimators, the jitter
/// RNG and what the previous close saw of the cumulative counters.
#[derive(Debug)]
pub(crate) struct Control {
    pub(crate) law: Box<dyn ControlLaw>,
    rng: fastrand::Rng,
    seed: u64,
    /// EMA of window means, ns.
    avg: Option<f64>,
    /// RTT_min, ns.
    floor: Option<f64>,
    /// Successful samples emptied out of the histograms by rotations.
    folded_ok: u64,
    last_ok: u64,
    last_fail: u64,
    last_ok_rtt: u64,
    last_fail_rtt: u64,
}

/// What a window close decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Decision {
    pub(crate) old: usize,
    pub(crate) new: usize,
}

impl Control {
    pub(crate) fn new(law: Box<dyn ControlLaw>, seed: u64) -> Self {
        Self {
            law,
            rng: fastrand::Rng::with_seed(seed),
            seed,
            avg: None,
            floor: None,
            folded_ok: 0,
            last_ok: 0,
            last_fail: 0,
            last_ok_rtt: 0,
            last_fail_rtt: 0,
        }
    }

    /// Forgets everything learned (the RNG restarts from its seed).
    pub(crate) fn reset(&mut self) {
        self.law.reset();
        self.rng = fastrand::Rng::with_seed(self.seed);
        self.avg = None;
        self.floor = None;
        self.folded_ok = 0;
        self.last_ok = 0;
        self.last_fail = 0;
        self.last_ok_rtt = 0;
        self.last_fail_rtt = 0;
    }

    /// Samples recorded since construction or reset: (successes, failures).
    pub(crate) fn totals(&self, w: &Window) -> (u64, u64) {
        (self.folded_ok.wrapping_add(w.live_ok()), w.fails())
    }

    /// The smoothed mean latency the controller uses.
    pub(crate) fn average(&self) -> Option<Duration> {
        self.avg.map(|ns| Duration::from_nanos(ns as u64))
    }

    /// The RTT_min estimate.
    pub(crate) fn floor(&self) -> Option<Duration> {
        self.floor.map(|ns| Duration::from_nanos(ns as u64))
    }

    /// Closes the window that started at `start`, at `now`, and — when
    /// `adapt` and warmup allow — runs the law. Returns the limit the pool
    /// should move to, if it changes.
    pub(crate) fn close(
        &mut self,
        w: &Window,
        cfg: &ControlConfig,
        limit: usize,
        start: u64,
        now: u64,
        adapt: bool,
    ) -> Option<Decision> {
        let (ok, fail) = self.totals(w);
        let (ok_rtt, fail_rtt) = w.rtt_sums();
        let min_rtt = w.min_rtt.swap(u64::MAX, Ordering::Relaxed);
        let peak = w.peak.swap(0, Ordering::Relaxed);
        self.folded_ok = self.folded_ok.wrapping_add(w.rotate());

        let ok_n = ok.wrapping_sub(self.last_ok);
        let fail_n = fail.wrapping_sub(self.last_fail);
        let ok_rtt_n = ok_rtt.wrapping_sub(self.last_ok_rtt);
        let rtt_sum = ok_rtt_n.wrapping_add(fail_rtt.wrapping_sub(self.last_fail_rtt));
        (self.last_ok, self.last_fail) = (ok, fail);
        (self.last_ok_rtt, self.last_fail_rtt) = (ok_rtt, fail_rtt);
        let samples = ok_n.saturating_add(fail_n);
        if samples == 0 {
            return None;
        }
        // RTT_min is the lowest window mean of successful samples: a single
        // lucky sample of a noisy backend would make service-time noise look
        // like queueing (with 10 % exponential jitter the minimum sample sits
        // ~10 % under the mean, which Vegas' default band reads as a queue),
        // and a fast failure is not a service time at all.
        if ok_n > 0 && ok_rtt_n > 0 {
            let m = ok_rtt_n as f64 / ok_n as f64;
            self.floor = Some(self.floor.map_or(m, |f| f.min(m)));
        }
        let seen = ok.saturating_add(fail);
        if !adapt || seen < cfg.warmup {
            return None;
        }

        let mean = rtt_sum as f64 / samples as f64;
        let summary = WindowSummary {
            duration_nanos: now.saturating_sub(start),
            samples,
            failures: fail_n,
            peak_in_flight: usize::try_from(peak).unwrap_or(usize::MAX),
            mean_rtt_nanos: mean,
            min_rtt_nanos: if min_rtt == u64::MAX {
                0.0
            } else {
                min_rtt as f64
            },
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
        (next != limit).then_some(Decision {
            old: limit,
            new: next,
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

    pub(crate) fn clear_window(&mut self, w: &Window, now: u64) {
        w.clear(now);
    }
}
