//! The throttle's sliding window of (requests, accepts) counts: a ring of
//! [`SLICES`] slices, each one atomic word, so recording and summing take no
//! lock.
//!
//! # Implementation details
//!
//! A slice's word packs its *lap* (which turn of the ring it belongs to,
//! modulo 2²²) with its two counts (21 bits each):
//!
//! ```text
//! 63        42 41        21 20         0
//! [   lap    ] [ requests ] [ accepts  ]
//! ```
//!
//! Time `t` falls in slice `s = t / slice_nanos`, stored at index
//! `s % SLICES` with lap `s / SLICES`. A record CAS-increments its slice if
//! the word holds its lap, replaces the word if it holds an older lap (the
//! slice is being reused), and drops the sample if the word holds a newer
//! lap (a caller whose clock read is older than another's rotation: its
//! slice has already left the window). Every sample is therefore counted in
//! exactly its own slice or, when that slice is already gone, nowhere —
//! never in another slice. A sum reads each word once and keeps the slices
//! whose time lies in the last `SLICES` slices up to now.
//!
//! The counts saturate: a slice counts at most 2²¹ − 1 requests; beyond,
//! whole samples (request and accept together) are dropped, so the ratio
//! the throttle reads is that of the samples kept. Laps wrap after 2²²
//! turns of the ring (16 years with the default two-minute window, 48 days
//! with the shortest one): a slice untouched for exactly that long would be
//! read as fresh.

use crate::sync::{AtomicU64, Ordering};

/// Slices in the ring.
pub(crate) const SLICES: u64 = 30;

const COUNT_BITS: u32 = 21;
const COUNT_MAX: u64 = (1 << COUNT_BITS) - 1;
const LAP_SHIFT: u32 = 2 * COUNT_BITS;
const LAP_MASK: u64 = (1 << (64 - LAP_SHIFT)) - 1;
const REQUEST: u64 = 1 << COUNT_BITS;

fn lap_of(w: u64) -> u64 {
    w >> LAP_SHIFT
}

fn requests_of(w: u64) -> u64 {
    (w >> COUNT_BITS) & COUNT_MAX
}

fn accepts_of(w: u64) -> u64 {
    w & COUNT_MAX
}

fn pack(lap: u64, requests: u64, accepts: u64) -> u64 {
    (lap & LAP_MASK) << LAP_SHIFT | requests << COUNT_BITS | accepts
}

/// Where time `now` falls: (ring index, lap, slice number).
fn locate(now: u64, slice_nanos: u64) -> (usize, u64, u64) {
    let s = now / slice_nanos;
    ((s % SLICES) as usize, (s / SLICES) & LAP_MASK, s)
}

/// The window's counts.
#[derive(Debug)]
pub(crate) struct CountWindow {
    slices: Box<[AtomicU64]>,
    slice_nanos: u64,
}

impl CountWindow {
    /// A window of `SLICES` slices of `slice_nanos` (≥ 1) each.
    pub(crate) fn new(slice_nanos: u64) -> Self {
        Self {
            slices: (0..SLICES).map(|_| AtomicU64::new(0)).collect(),
            slice_nanos: slice_nanos.max(1),
        }
    }

    /// Counts one request at `now`, accepted or not.
    pub(crate) fn record(&self, now: u64, accepted: bool) {
        let (i, lap, _) = locate(now, self.slice_nanos);
        let slot = &self.slices[i];
        let mut w = slot.load(Ordering::Relaxed);
        loop {
            let behind = lap.wrapping_sub(lap_of(w)) & LAP_MASK;
            let next = if behind == 0 {
                if requests_of(w) == COUNT_MAX {
                    return;
                }
                w + REQUEST + u64::from(accepted)
            } else if behind < LAP_MASK / 2 {
                pack(lap, 1, u64::from(accepted))
            } else {
                // The slot already holds a later lap: this sample's slice
                // has left the window.
                return;
            };
            match slot.compare_exchange_weak(w, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return,
                Err(seen) => w = seen,
            }
        }
    }

    /// (requests, accepts) over the slices of the last `SLICES` slices up
    /// to `now`.
    pub(crate) fn sums(&self, now: u64) -> (u64, u64) {
        let (_, _, s) = locate(now, self.slice_nanos);
        let (mut requests, mut accepts) = (0, 0);
        for (j, slot) in self.slices.iter().enumerate() {
            let w = slot.load(Ordering::Relaxed);
            // The slice number this word's slot would hold in the current
            // or the previous lap, whichever is not in the future.
            let j = j as u64;
            let here = s - s % SLICES + j;
            let slice = if here > s {
                here.checked_sub(SLICES)
            } else {
                Some(here)
            };
            let Some(slice) = slice else { continue };
            if lap_of(w) == (slice / SLICES) & LAP_MASK {
                requests += requests_of(w);
                accepts += accepts_of(w);
            }
        }
        (requests, accepts)
    }
}

#[cfg(all(test, not(adaptx_loom)))]
mod tests {
    use super::*;

    const SLICE: u64 = 1_000;

    #[test]
    fn window_counts_the_last_slices_only() {
        let w = CountWindow::new(SLICE);
        w.record(0, true);
        w.record(500, false);
        w.record(SLICE * 29 + 999, true);
        assert_eq!(w.sums(SLICE * 29 + 999), (3, 2));
        // Slice 0 leaves the window when slice 30 begins.
        assert_eq!(w.sums(SLICE * 30), (1, 1));
        w.record(SLICE * 30, false);
        assert_eq!(w.sums(SLICE * 30), (2, 1));
        // Long after: nothing.
        assert_eq!(w.sums(SLICE * 1_000), (0, 0));
    }

    #[test]
    fn window_reuses_a_slot_for_its_new_lap() {
        let w = CountWindow::new(SLICE);
        for _ in 0..5 {
            w.record(SLICE * 3, true);
        }
        w.record(SLICE * 33, false);
        assert_eq!(w.sums(SLICE * 33), (1, 0));
    }

    /// A caller whose clock read predates another's rotation drops its
    /// sample instead of wiping the new slice.
    #[test]
    fn window_stale_sample_does_not_clobber_a_newer_lap() {
        let w = CountWindow::new(SLICE);
        w.record(SLICE * 33, true);
        w.record(SLICE * 3, false);
        assert_eq!(w.sums(SLICE * 33), (1, 1));
    }

    #[test]
    fn window_counts_saturate_whole_samples() {
        let w = CountWindow::new(SLICE);
        let slot = &w.slices[0];
        slot.store(pack(0, COUNT_MAX, 7), Ordering::Relaxed);
        w.record(0, true);
        assert_eq!(w.sums(0), (COUNT_MAX, 7));
    }
}

#[cfg(all(test, adaptx_loom))]
mod loom_tests {
    use super::*;
    use crate::sync::{Arc, loom_model as model};
    use ::loom::thread;

    /// Two recorders in one slice: both counted.
    #[test]
    fn loom_window_two_records_in_one_slice_both_count() {
        model(|| {
            let w = Arc::new(CountWindow::new(10));
            let w2 = Arc::clone(&w);
            let t = thread::spawn(move || w2.record(5, true));
            w.record(7, false);
            t.join().unwrap();
            assert_eq!(w.sums(9), (2, 1));
        });
    }

    /// A record in a slot's new lap racing a record in its old lap: the new
    /// lap keeps exactly its own sample whatever the order.
    #[test]
    fn loom_window_rotation_racing_a_stale_record() {
        model(|| {
            let w = Arc::new(CountWindow::new(10));
            w.record(5, true);
            let w2 = Arc::clone(&w);
            // Slice 30 reuses slot 0 (lap 1).
            let t = thread::spawn(move || w2.record(305, false));
            w.record(6, true);
            t.join().unwrap();
            assert_eq!(w.sums(305), (1, 0));
        });
    }
}
