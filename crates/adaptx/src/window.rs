//! The per-window sample accumulator and the hand-over of a finished window.
//!
//! # Implementation details
//!
//! Completions add to the window without a lock. The sample counters are
//! split into [`STRIPES`] stripes, one per group of threads (the thread
//! numbered `n` among those that use windows writes stripe `n mod
//! STRIPES`), each on its own cache lines. Each
//! stripe holds two [`Slot`]s: the current window records into one; the
//! other holds the previous window, frozen, for [`Stats`](crate::Stats).
//!
//! ## Every sample lands wholly in one window
//!
//! A sample is several atomic writes (a count, a latency sum, maybe a new
//! minimum). A closer that read those fields while a completion was between
//! two of its writes would see the sample's count in one window and its
//! latency in the next. So each stripe has a `gate` word:
//!
//! | bits    | field     | meaning                                                  |
//! |---------|-----------|----------------------------------------------------------|
//! | 0..=62  | `started` | samples that entered the current slot since it opened    |
//! | 63      | `SLOT`    | which of the two slots is current                        |
//!
//! A completion enters with one `fetch_add(1)` on the gate, which tells it
//! the current slot and counts it in that slot's `started` in the same
//! atomic step. It then adds its latency (and minimum, peak) and finishes
//! with one last write that counts it as *finished*: a success histogram's
//! bucket, or the failure counter (`Release`). A slot's finished count is the
//! sum of those.
//!
//! The closer (one at a time: it holds the controller mutex) empties the idle
//! slot, then swaps the gate to the idle slot with `started = 0`
//! (`AcqRel`); the swap returns exactly how many samples entered the old
//! slot. It waits until the old slot's finished count reaches that number
//! (`Acquire` loads; the wait is a few nanoseconds unless a completing
//! thread was preempted between its writes) and only then reads the slot. A
//! completion that entered after the swap writes to the new slot; one that
//! entered before is waited for. Hence a sample's count, latency, minimum and
//! peak are read in the same window, and no sample is read twice or lost.
//! The hand-over is model-checked (`window_handover` in `pool/loom.rs`).
//!
//! ## The stripe's owner records a success without a locked instruction
//!
//! The first thread to record a success on a stripe becomes its *owner*
//! (by its [`ThreadNumber`](crate::sync::ThreadNumber), which passes to the
//! next thread to get that number, after this one exits). The owner adds
//! its latency to the slot's `ok_rtt` and counts it in the slot's `hist`
//! with a load and a store each — it is their only writer — and every
//! other thread on the stripe writes `ok_rtt_shared` and `hist_shared`
//! with read-modify-writes; the hand-over reads both, and a slot's
//! finished successes are the two histograms' counts. The closer's reads
//! stay exact: the owner's histogram store is its sample's finishing write
//! (`Release`), and the idle slot's clearing comes before the gate swap
//! that the owner's entry reads (`Acquire`), so the owner never adds to a
//! value older than the clearing. `hist_shared` is allocated at the first
//! success of a thread that does not own its stripe (30 KiB), so a limiter
//! completed on by at most one thread per stripe never holds it. Modelled
//! with an owner and another writer on one stripe
//! (`loom_window_owner_and_another_writer_on_one_stripe`).
//!
//! A success costs one read-modify-write on its owner's stripe (the gate)
//! and three on another thread's, a failure three or four, all on the
//! stripe's own lines; the shared window start is only read.
//!
//! ## Decrease epochs
//!
//! The window also keeps the *decrease epoch*: the number of decreases of
//! the limit so far. A permit is tagged with it at admission. A failure is
//! *fresh* — evidence of overload at the present limit — only if its
//! operation was admitted after the last decrease; otherwise it is the
//! overload the last decrease already answered (TCP's recovery rule).
//!
//! The epoch is bumped by the closer after the window's law ran, under the
//! controller mutex, so a sample of window `W` can see the epoch one behind
//! the value the close of `W` reads (`E`) — when the close of `W − 1`
//! decreased and has not bumped yet — but never two behind (the closes
//! before are ordered before the swap that opened `W`) and never ahead. A
//! failure whose tag equals the epoch it reads is counted in
//! `fresh[tag & 1]`; the close of `W` takes `fresh[E & 1]`: exactly the
//! failures tagged `E`, those admitted after the last decrease.

use std::num::NonZeroU64;

use crate::histogram::{Counts, Histogram};
#[cfg(adaptx_loom)]
use crate::sync::thread_number;
use crate::sync::{AtomicU64, Ordering, Owner, Padded, add_alone, spin_wait_step};

/// Number of sample stripes: two keeps two contending threads apart at
/// 4 × 30 KiB of histograms per limiter.
pub(crate) const STRIPES: usize = 2;

/// The gate's current-slot bit.
const SLOT: u64 = 1 << 63;

/// The windows' thread numbers: a thread numbered `n` writes stripe
/// `n mod STRIPES`, and owns that stripe's latency sum if it is the first
/// to record a success there. Numbered apart from the rate engines' lanes,
/// so that the first threads to use windows take the first numbers, one
/// stripe each.
#[cfg(not(adaptx_loom))]
static NUMBERS: crate::sync::NumberPool = crate::sync::NumberPool::new();

#[cfg(not(adaptx_loom))]
thread_local! {
    static NUMBER: crate::sync::ThreadNumber = crate::sync::ThreadNumber::take(&NUMBERS);
}

/// The calling thread's number: `None` for a thread whose thread-locals
/// are gone (exiting), which writes stripe 0 as a non-owner.
#[inline]
fn caller() -> Option<NonZeroU64> {
    #[cfg(not(adaptx_loom))]
    {
        NUMBER.try_with(crate::sync::ThreadNumber::get).ok()
    }
    #[cfg(adaptx_loom)]
    {
        thread_number()
    }
}

/// The stripe of the thread numbered `me`.
#[inline]
fn stripe_of(me: Option<NonZeroU64>) -> usize {
    // Truncation keeps the low bits, which are all that are used.
    me.map_or(0, NonZeroU64::get) as usize % STRIPES
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

/// One completion with a latency sample.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    pub(crate) success: bool,
    pub(crate) nanos: u64,
    /// In flight at the completion, the completing operation included.
    pub(crate) in_flight: usize,
    /// The decrease epoch at the operation's admission.
    pub(crate) epoch: u64,
}

/// One window's accumulators on one stripe.
#[derive(Debug)]
struct Slot {
    /// The latency sum of the stripe owner's successes (its only writer).
    ok_rtt: AtomicU64,
    /// The latency sum of every other thread's successes.
    ok_rtt_shared: AtomicU64,
    fail_rtt: AtomicU64,
    /// Failures by the parity of their admission epoch, counted only when
    /// that epoch was still current at the completion.
    fresh: [AtomicU64; 2],
    min_rtt: AtomicU64,
    peak: AtomicU64,
    /// Failures: one of the two "finished" counters.
    fail: AtomicU64,
    /// The stripe owner's successes by latency (its only writer), and
    /// every other thread's: the other "finished" counters.
    hist: Histogram,
    hist_shared: SharedHistogram,
}

/// The histogram of the successes of threads that do not own their stripe:
/// allocated at the first such success (30 KiB), so a limiter that at most
/// one thread per stripe completes on never holds it. Under loom, at once
/// (the model checks the hand-over, not `OnceLock`).
#[derive(Debug)]
struct SharedHistogram {
    #[cfg(not(adaptx_loom))]
    lazy: std::sync::OnceLock<Histogram>,
    #[cfg(adaptx_loom)]
    eager: Histogram,
}

impl SharedHistogram {
    fn new() -> Self {
        Self {
            #[cfg(not(adaptx_loom))]
            lazy: std::sync::OnceLock::new(),
            #[cfg(adaptx_loom)]
            eager: Histogram::new(),
        }
    }

    /// The histogram, allocated if it is not yet.
    #[cold]
    fn get_or_init(&self) -> &Histogram {
        #[cfg(not(adaptx_loom))]
        {
            self.lazy.get_or_init(Histogram::new)
        }
        #[cfg(adaptx_loom)]
        {
            &self.eager
        }
    }

    /// The histogram, if it was allocated.
    #[inline]
    fn get(&self) -> Option<&Histogram> {
        #[cfg(not(adaptx_loom))]
        {
            self.lazy.get()
        }
        #[cfg(adaptx_loom)]
        {
            Some(&self.eager)
        }
    }

    /// Successes recorded here (`Acquire`).
    fn count_acquire(&self) -> u64 {
        self.get().map_or(0, Histogram::count_acquire)
    }
}

impl Slot {
    fn new() -> Self {
        Self {
            ok_rtt: AtomicU64::new(0),
            ok_rtt_shared: AtomicU64::new(0),
            fail_rtt: AtomicU64::new(0),
            fresh: [AtomicU64::new(0), AtomicU64::new(0)],
            min_rtt: AtomicU64::new(u64::MAX),
            peak: AtomicU64::new(0),
            fail: AtomicU64::new(0),
            hist: Histogram::new(),
            hist_shared: SharedHistogram::new(),
        }
    }

    /// Successes and failures that have finished their writes to this slot.
    /// The successes are the owner's and the others'.
    fn finished(&self) -> ((u64, u64), u64) {
        (
            (self.hist.count_acquire(), self.hist_shared.count_acquire()),
            self.fail.load(Ordering::Acquire),
        )
    }

    /// Adds the slot's success latencies into `out`.
    fn add_latencies_to(&self, out: &mut Counts) {
        self.hist.add_to(out);
        if let Some(h) = self.hist_shared.get() {
            h.add_to(out);
        }
    }

    /// The largest success latency of a frozen slot holding `own` and
    /// `shared` successes (a bucket's midpoint, within 0.8 %); `None`
    /// without one. Walks the buckets its latencies span, from the smallest.
    fn highest_ok(&self, own: u64, shared: u64) -> Option<u64> {
        let min = self.min_rtt.load(Ordering::Relaxed);
        let mut highest = None;
        let mut note = |nanos: u64, _| highest = highest.max(Some(nanos));
        self.hist.for_each_from(min, own, &mut note);
        if let Some(h) = self.hist_shared.get() {
            h.for_each_from(min, shared, &mut note);
        }
        highest
    }

    /// Empties the slot. Only while no completion can write to it.
    fn clear(&self) {
        self.ok_rtt.store(0, Ordering::Relaxed);
        self.ok_rtt_shared.store(0, Ordering::Relaxed);
        self.fail_rtt.store(0, Ordering::Relaxed);
        for f in &self.fresh {
            f.store(0, Ordering::Relaxed);
        }
        self.min_rtt.store(u64::MAX, Ordering::Relaxed);
        self.peak.store(0, Ordering::Relaxed);
        self.fail.store(0, Ordering::Relaxed);
        self.hist.take_count();
        if let Some(h) = self.hist_shared.get() {
            h.take_count();
        }
    }
}

/// One stripe: its gate, its two slots and its event counters.
#[derive(Debug)]
struct Stripe {
    gate: AtomicU64,
    /// The thread that writes the slots' `ok_rtt` and `hist` alone.
    owner: Owner,
    events: [AtomicU64; 4],
    slots: [Slot; 2],
    /// The successes of the slot handed over last, the owner's and the
    /// others', so that reading its latencies stops at the last one of
    /// each histogram. Written under the controller mutex.
    #[cfg(feature = "metrics")]
    handed_ok: [std::sync::atomic::AtomicU64; 2],
}

impl Stripe {
    fn new() -> Self {
        Self {
            gate: AtomicU64::new(0),
            owner: Owner::default(),
            events: std::array::from_fn(|_| AtomicU64::new(0)),
            slots: [Slot::new(), Slot::new()],
            #[cfg(feature = "metrics")]
            handed_ok: [
                std::sync::atomic::AtomicU64::new(0),
                std::sync::atomic::AtomicU64::new(0),
            ],
        }
    }

    /// The index of the slot completions record into now.
    fn current(&self) -> usize {
        (self.gate.load(Ordering::Acquire) >> 63) as usize
    }

    /// Freezes the current slot and opens the other; waits until every
    /// sample that entered the frozen slot has finished writing, and returns
    /// the frozen slot with its successes and failures. The caller must hold
    /// the controller mutex.
    fn freeze(&self) -> (&Slot, (u64, u64), u64) {
        let cur = self.current();
        // The idle slot was frozen by the previous hand-over, which waited
        // for all its writers: nothing writes to it now.
        self.slots[cur ^ 1].clear();
        let next = if cur == 0 { SLOT } else { 0 };
        let entered = self.gate.swap(next, Ordering::AcqRel) & !SLOT;
        let frozen = &self.slots[cur];
        let mut spins = 0;
        loop {
            let ((own, shared), fail) = frozen.finished();
            if own.wrapping_add(shared).wrapping_add(fail) == entered {
                return (frozen, (own, shared), fail);
            }
            spin_wait_step(&mut spins);
        }
    }
}

/// A finished window's exact totals, read from the frozen slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Frozen {
    pub(crate) ok: u64,
    pub(crate) fail: u64,
    /// Of `fail`, the failures admitted in the decrease epoch the close read.
    pub(crate) fresh: u64,
    pub(crate) ok_rtt: u64,
    pub(crate) fail_rtt: u64,
    /// `u64::MAX` when no successful sample had a non-zero latency.
    pub(crate) min_rtt: u64,
    /// The largest success latency (a histogram bucket's midpoint); 0
    /// without a success.
    pub(crate) max_ok_rtt: u64,
    pub(crate) peak: u64,
}

/// Lock-free per-window accumulators. `repr(C)` keeps the small shared
/// fields together; the limiter places them on the permit state word's line.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Window {
    pub(crate) start: AtomicU64,
    /// Decreases of the limit so far: the decrease epoch.
    epoch: AtomicU64,
    /// The age (ns) from which the window may close as soon as it holds
    /// enough samples ([`AdaptiveWindow`]); `u64::MAX` when that is off or
    /// no recent latency is known. Written by the closer, under the
    /// controller mutex; read by completions.
    early: AtomicU64,
    stripes: Box<[Padded<Stripe>; STRIPES]>,
}

/// The window policy of `Builder::sample_window_adaptive`: a window may
/// close once it is `rtt_multiple` recent latencies old *and* holds
/// `min_samples` samples, instead of waiting for the sample window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct AdaptiveWindow {
    pub(crate) min_samples: u64,
    pub(crate) rtt_multiple: f64,
}

impl AdaptiveWindow {
    /// The earliest close, in ns of window age, after a window whose
    /// successes took `mean_ok` ns on average, capped at the sample window
    /// `window` ns.
    pub(crate) fn early(&self, mean_ok: f64, window: u64) -> u64 {
        let age = (self.rtt_multiple * mean_ok).ceil();
        // `as` saturates: an age past u64::MAX is the cap anyway.
        (age as u64).min(window)
    }
}

impl Window {
    pub(crate) fn new(start: u64) -> Self {
        Self {
            start: AtomicU64::new(start),
            epoch: AtomicU64::new(0),
            early: AtomicU64::new(u64::MAX),
            stripes: Box::new(std::array::from_fn(|_| Padded(Stripe::new()))),
        }
    }

    /// The age from which the window may close with enough samples.
    #[inline]
    pub(crate) fn early(&self) -> u64 {
        self.early.load(Ordering::Relaxed)
    }

    /// Sets [`early`](Window::early). Only the closer calls it, under the
    /// controller mutex.
    pub(crate) fn set_early(&self, age: u64) {
        self.early.store(age, Ordering::Relaxed);
    }

    /// Samples that entered the window in progress: a live read of the
    /// stripes' gates, two relaxed loads, no lock. It may miss a sample
    /// entering at the same moment; while a close is handing the window over
    /// (between its swaps of the stripes) it may still count some of the
    /// closed window's, but the new window is then only nanoseconds old,
    /// younger than any [`early`](Window::early) age, so that count closes
    /// nothing.
    #[inline]
    pub(crate) fn started(&self) -> u64 {
        self.stripes.iter().fold(0u64, |acc, s| {
            acc.wrapping_add(s.gate.load(Ordering::Relaxed) & !SLOT)
        })
    }

    /// The decrease epoch, for tagging an admission.
    #[inline]
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Relaxed)
    }

    /// Starts a new decrease epoch. Only the closer calls it, under the
    /// controller mutex.
    pub(crate) fn bump_epoch(&self) {
        self.epoch.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds one latency sample. No lock, no allocation.
    #[inline]
    pub(crate) fn add(&self, s: Sample) {
        let me = caller();
        let stripe = &self.stripes[stripe_of(me)];
        // Enter: learn the current slot and count this sample as started in
        // it. `Acquire` pairs with the hand-over's swap, so the slot's
        // clearing (and every earlier epoch bump) is visible here.
        let slot = &stripe.slots[(stripe.gate.fetch_add(1, Ordering::Acquire) >> 63) as usize];
        let owner = s.success && stripe.owner.is(me);
        if s.success {
            if owner {
                add_alone(&slot.ok_rtt, s.nanos, Ordering::Relaxed);
            } else {
                slot.ok_rtt_shared.fetch_add(s.nanos, Ordering::Relaxed);
            }
            // RTT_min is a service time: a fast failure (connection refused)
            // or a zero reading from a coarse clock is not one.
            if s.nanos > 0 && s.nanos < slot.min_rtt.load(Ordering::Relaxed) {
                slot.min_rtt.fetch_min(s.nanos, Ordering::Relaxed);
            }
        } else {
            slot.fail_rtt.fetch_add(s.nanos, Ordering::Relaxed);
            if s.epoch == self.epoch.load(Ordering::Relaxed) {
                slot.fresh[(s.epoch & 1) as usize].fetch_add(1, Ordering::Relaxed);
            }
        }
        let in_flight = s.in_flight as u64;
        if in_flight > slot.peak.load(Ordering::Relaxed) {
            slot.peak.fetch_max(in_flight, Ordering::Relaxed);
        }
        // Finish: the last write, `Release`, publishes the ones above to a
        // closer that sees this sample as finished.
        if owner {
            slot.hist.record_alone(s.nanos);
        } else if s.success {
            slot.hist_shared.get_or_init().record(s.nanos);
        } else {
            slot.fail.fetch_add(1, Ordering::Release);
        }
    }

    /// Counts one `event` on this thread's stripe.
    #[inline]
    pub(crate) fn count(&self, event: Event) {
        self.stripes[stripe_of(caller())].events[event as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// How many `event`s were counted since construction or reset.
    pub(crate) fn total(&self, event: Event) -> u64 {
        self.stripes.iter().fold(0u64, |acc, s| {
            acc.wrapping_add(s.events[event as usize].load(Ordering::Relaxed))
        })
    }

    /// Successes and failures recorded in the window in progress (a live
    /// read, not a hand-over).
    pub(crate) fn live(&self) -> (u64, u64) {
        self.stripes.iter().fold((0u64, 0u64), |(ok, fail), s| {
            let slot = &s.slots[s.current()];
            let ((own, shared), f) = slot.finished();
            let o = own.wrapping_add(shared);
            (ok.wrapping_add(o), fail.wrapping_add(f))
        })
    }

    /// Hands the window in progress over: freezes it, opens the next one and
    /// returns the frozen window's exact totals, with the failures of
    /// decrease epoch `epoch` as fresh. The caller must hold the controller
    /// mutex.
    pub(crate) fn hand_over(&self, epoch: u64) -> Frozen {
        let mut f = Frozen {
            ok: 0,
            fail: 0,
            fresh: 0,
            ok_rtt: 0,
            fail_rtt: 0,
            min_rtt: u64::MAX,
            max_ok_rtt: 0,
            peak: 0,
        };
        for s in self.stripes.iter() {
            let (slot, (own, shared), fail) = s.freeze();
            #[cfg(feature = "metrics")]
            {
                s.handed_ok[0].store(own, std::sync::atomic::Ordering::Relaxed);
                s.handed_ok[1].store(shared, std::sync::atomic::Ordering::Relaxed);
            }
            let ok = own.wrapping_add(shared);
            f.ok = f.ok.wrapping_add(ok);
            f.fail = f.fail.wrapping_add(fail);
            f.fresh = f
                .fresh
                .wrapping_add(slot.fresh[(epoch & 1) as usize].load(Ordering::Relaxed));
            f.ok_rtt = f
                .ok_rtt
                .wrapping_add(slot.ok_rtt.load(Ordering::Relaxed))
                .wrapping_add(slot.ok_rtt_shared.load(Ordering::Relaxed));
            f.fail_rtt = f
                .fail_rtt
                .wrapping_add(slot.fail_rtt.load(Ordering::Relaxed));
            f.min_rtt = f.min_rtt.min(slot.min_rtt.load(Ordering::Relaxed));
            f.max_ok_rtt = f.max_ok_rtt.max(slot.highest_ok(own, shared).unwrap_or(0));
            f.peak = f.peak.max(slot.peak.load(Ordering::Relaxed));
        }
        f
    }

    /// Adds the successful latency samples of the window in progress and,
    /// while that is younger than one window, of the window before it, into
    /// `out`.
    pub(crate) fn recent_latencies(&self, now: u64, window: u64, out: &mut Counts) {
        let start = self.start.load(Ordering::Acquire);
        let age = now.saturating_sub(start);
        for s in self.stripes.iter() {
            let cur = s.current();
            // A sample at `t >= start + window` would have closed the window,
            // so every sample of the current window is older than
            // `age - window`.
            if age < window.saturating_mul(2) {
                s.slots[cur].add_latencies_to(out);
            }
            if age < window {
                s.slots[cur ^ 1].add_latencies_to(out);
            }
        }
    }

    /// Calls `f(nanos, count)` for the successful latencies of the window
    /// handed over last (bucket midpoints, within 0.8 %). The caller must
    /// hold the controller mutex: the next hand-over clears them.
    #[cfg(feature = "metrics")]
    pub(crate) fn closed_latencies(&self, mut f: impl FnMut(u64, u64)) {
        for s in self.stripes.iter() {
            // The hand-over made the other slot current.
            let slot = &s.slots[s.current() ^ 1];
            let min = slot.min_rtt.load(Ordering::Relaxed);
            let own = s.handed_ok[0].load(std::sync::atomic::Ordering::Relaxed);
            slot.hist.for_each_from(min, own, &mut f);
            if let Some(h) = slot.hist_shared.get() {
                let shared = s.handed_ok[1].load(std::sync::atomic::Ordering::Relaxed);
                h.for_each_from(min, shared, &mut f);
            }
        }
    }

    /// Forgets every sample and event: completions in progress land in the
    /// fresh window. The caller must hold the controller mutex.
    pub(crate) fn clear(&self, now: u64) {
        for s in self.stripes.iter() {
            s.freeze().0.clear();
            for e in &s.events {
                e.store(0, Ordering::Relaxed);
            }
        }
        self.early.store(u64::MAX, Ordering::Relaxed);
        self.start.store(now, Ordering::Release);
    }
}

#[cfg(all(test, not(adaptx_loom)))]
mod tests {
    use super::*;

    fn ok(nanos: u64) -> Sample {
        Sample {
            success: true,
            nanos,
            in_flight: 1,
            epoch: 0,
        }
    }

    #[test]
    fn hand_over_returns_exact_totals_and_opens_an_empty_window() {
        let w = Window::new(0);
        w.add(ok(10));
        w.add(ok(30));
        w.add(Sample {
            success: false,
            nanos: 5,
            in_flight: 3,
            epoch: 0,
        });
        let f = w.hand_over(0);
        assert_eq!((f.ok, f.fail, f.fresh), (2, 1, 1));
        assert_eq!((f.ok_rtt, f.fail_rtt, f.min_rtt, f.peak), (40, 5, 10, 3));
        assert_eq!(f.max_ok_rtt, 30);
        let g = w.hand_over(0);
        assert_eq!(
            (g.ok, g.fail, g.ok_rtt, g.min_rtt, g.max_ok_rtt, g.peak),
            (0, 0, 0, u64::MAX, 0, 0)
        );
    }

    #[test]
    fn a_slot_reads_its_slowest_success_from_the_owners_and_the_others_histograms() {
        // The owner's successes and another thread's, in their histograms;
        // the slowest of either, within a bucket (0.8 %).
        let near = |got: Option<u64>, want: f64| {
            let got = got.expect("a success") as f64;
            assert!((got / want - 1.0).abs() <= 1.0 / 128.0, "{got} vs {want}");
        };
        let slot = Slot::new();
        slot.min_rtt.store(1_000, Ordering::Relaxed);
        slot.hist.record_alone(1_000);
        slot.hist.record_alone(300_000);
        assert_eq!(slot.highest_ok(0, 0), None);
        near(slot.highest_ok(2, 0), 300_000.0);
        slot.hist_shared.get_or_init().record(2_000_000);
        near(slot.highest_ok(2, 1), 2_000_000.0);
        let slot = Slot::new();
        slot.min_rtt.store(5_000, Ordering::Relaxed);
        slot.hist_shared.get_or_init().record(5_000);
        slot.hist.record_alone(40_000);
        near(slot.highest_ok(1, 1), 40_000.0);
    }

    #[test]
    fn failures_of_an_earlier_epoch_are_stale() {
        let w = Window::new(0);
        w.bump_epoch();
        let fail = |epoch| Sample {
            success: false,
            nanos: 1,
            in_flight: 1,
            epoch,
        };
        w.add(fail(0));
        w.add(fail(1));
        w.add(fail(1));
        let f = w.hand_over(1);
        assert_eq!((f.fail, f.fresh), (3, 2));
    }

    #[test]
    fn a_failure_seen_before_the_bump_is_judged_at_the_close() {
        // The close of the previous window decided a decrease but has not
        // bumped the epoch when this failure, admitted before the decrease,
        // completes: it must not count as fresh at the next close.
        let w = Window::new(0);
        w.add(Sample {
            success: false,
            nanos: 1,
            in_flight: 1,
            epoch: 0,
        });
        w.bump_epoch();
        let f = w.hand_over(1);
        assert_eq!((f.fail, f.fresh), (1, 0));
    }

    #[test]
    fn one_thread_on_a_window_allocates_no_shared_histogram() {
        // The thread owns the stripe it writes, so its successes go to the
        // owner's histogram, and the others' (30 KiB each) never exist.
        let w = std::sync::Arc::new(Window::new(0));
        let w2 = w.clone();
        std::thread::spawn(move || {
            for n in 1..=1000 {
                w2.add(ok(n));
            }
        })
        .join()
        .expect("writer");
        let f = w.hand_over(0);
        assert_eq!((f.ok, f.ok_rtt), (1000, 500_500));
        for s in w.stripes.iter() {
            for slot in &s.slots {
                assert!(slot.hist_shared.get().is_none());
            }
        }
    }

    #[test]
    fn window_latency_sums_are_exact_across_threads_that_come_and_go() {
        // Several threads at a time on each stripe, threads exiting and new
        // ones taking their numbers (and their stripes' ownership), while a
        // closer hands windows over: every success's latency is read once.
        // A count lost to two writers of one word would leave the closer
        // waiting for a sample that never finishes: the test fails after a
        // minute instead of hanging.
        use std::sync::atomic::AtomicBool;
        let w = std::sync::Arc::new(Window::new(0));
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let (totals, closed) = std::sync::mpsc::channel();
        {
            let (w, done) = (w.clone(), done.clone());
            std::thread::spawn(move || {
                let (mut ok, mut rtt) = (0u64, 0u64);
                while !done.load(Ordering::Acquire) {
                    let f = w.hand_over(0);
                    (ok, rtt) = (ok + f.ok, rtt + f.ok_rtt);
                }
                let f = w.hand_over(0);
                let _ = totals.send((ok + f.ok, rtt + f.ok_rtt));
            });
        }
        for _ in 0..4 {
            let batch: Vec<_> = (0..5)
                .map(|_| {
                    let w = w.clone();
                    std::thread::spawn(move || {
                        for _ in 0..50_000 {
                            w.add(ok(3));
                        }
                    })
                })
                .collect();
            for t in batch {
                t.join().expect("writer");
            }
        }
        done.store(true, Ordering::Release);
        let (ok, rtt) = closed
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the closer never saw every sample finish: a count was lost");
        assert_eq!((ok, rtt), (1_000_000, 3_000_000));
    }
}

/// Loom models of the window hand-over (run with `--cfg adaptx_loom`, see
/// `pool/loom.rs`): every sample is read in exactly one window, with its
/// count, latency, minimum and peak together, and freshness is judged
/// against the epoch of the close that reads it.
#[cfg(all(test, adaptx_loom))]
mod loom {
    use ::loom::thread;

    use super::*;
    use crate::sync::{Arc, loom_model as model};

    fn sample(success: bool, nanos: u64, in_flight: usize) -> Sample {
        Sample {
            success,
            nanos,
            in_flight,
            epoch: 0,
        }
    }

    /// A frozen window is exact: its sums are its counts times the one
    /// latency each kind of sample took, its extremes belong to its samples.
    fn assert_exact(f: &Frozen) {
        assert_eq!(f.ok_rtt, 100 * f.ok, "{f:?}");
        assert_eq!(f.fail_rtt, 7 * f.fail, "{f:?}");
        assert_eq!(f.min_rtt == 100, f.ok > 0, "{f:?}");
        assert_eq!(f.peak > 0, f.ok + f.fail > 0, "{f:?}");
    }

    #[test]
    fn loom_window_handover_reads_each_sample_once_and_whole() {
        model(|| {
            let w = Arc::new(Window::new(0));
            let a = {
                let w = w.clone();
                thread::spawn(move || w.add(sample(true, 100, 2)))
            };
            let b = {
                let w = w.clone();
                thread::spawn(move || w.add(sample(false, 7, 1)))
            };
            let first = w.hand_over(0);
            assert_exact(&first);
            a.join().expect("writer");
            b.join().expect("writer");
            let second = w.hand_over(0);
            assert_exact(&second);
            assert_eq!(first.ok + second.ok, 1);
            assert_eq!(first.fail + second.fail, 1);
            assert_eq!(first.fresh + second.fresh, 1);
        });
    }

    #[test]
    fn loom_window_owner_and_another_writer_on_one_stripe() {
        // Threads numbered 1 (this one) and 3 write stripe 1, 2 stripe 0.
        // This thread owns stripe 1 (its first success) and adds to it with
        // a load and a store while thread 3 adds to its shared sum and
        // thread 2, owner of stripe 0, adds there; hand-overs run
        // meanwhile: every frozen window is exact, no latency lost.
        model(|| {
            let w = Arc::new(Window::new(0));
            w.add(sample(true, 100, 1));
            let writers: Vec<_> = (0..2)
                .map(|_| {
                    let w = w.clone();
                    thread::spawn(move || w.add(sample(true, 100, 1)))
                })
                .collect();
            let first = w.hand_over(0);
            w.add(sample(true, 100, 1));
            let second = w.hand_over(0);
            for t in writers {
                t.join().expect("writer");
            }
            let third = w.hand_over(0);
            for f in [&first, &second, &third] {
                assert_exact(f);
            }
            assert_eq!(first.ok + second.ok + third.ok, 4);
        });
    }

    #[test]
    fn loom_window_handover_twice_while_a_sample_lands() {
        model(|| {
            let w = Arc::new(Window::new(0));
            let a = {
                let w = w.clone();
                thread::spawn(move || w.add(sample(true, 100, 1)))
            };
            let first = w.hand_over(0);
            let second = w.hand_over(0);
            a.join().expect("writer");
            let third = w.hand_over(0);
            for f in [&first, &second, &third] {
                assert_exact(f);
            }
            assert_eq!(first.ok + second.ok + third.ok, 1);
        });
    }

    #[test]
    fn loom_window_failure_admitted_before_a_decrease_is_stale() {
        model(|| {
            let w = Arc::new(Window::new(0));
            let a = {
                let w = w.clone();
                thread::spawn(move || w.add(sample(false, 7, 1)))
            };
            // The close of the first window decides a decrease.
            let first = w.hand_over(0);
            w.bump_epoch();
            a.join().expect("writer");
            let second = w.hand_over(1);
            // In the first window the failure is fresh; in the second, stale.
            assert_eq!(first.fresh, first.fail);
            assert_eq!(second.fresh, 0);
            assert_eq!(first.fail + second.fail, 1);
        });
    }

    #[test]
    fn loom_window_started_counts_the_window_in_progress_only() {
        // The adaptive close reads `started` without the mutex while a
        // sample lands and a close hands the window over: it never counts
        // more than entered (the slot bit of each stripe is masked off, even
        // between the swaps of the two), and once the writer is done it
        // counts exactly the samples of the window in progress.
        model(|| {
            let w = Arc::new(Window::new(0));
            let a = {
                let w = w.clone();
                thread::spawn(move || {
                    w.add(sample(true, 100, 1));
                    // Possibly between the hand-over's swaps of the two
                    // stripes: each stripe's slot bit is masked off.
                    assert!(w.started() <= 1);
                })
            };
            assert!(w.started() <= 1);
            let first = w.hand_over(0);
            assert!(w.started() <= 1);
            a.join().expect("writer");
            let live = w.started();
            assert_eq!(live, 1 - first.ok);
            assert_eq!(w.hand_over(0).ok, live);
            assert_eq!(w.started(), 0);
        });
    }
}
