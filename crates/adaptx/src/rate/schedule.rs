//! The token clock's current [`Segment`], published to lock-free readers.
//!
//! # Implementation details
//!
//! A segment is four words, too many for one atomic, and it changes once
//! per adjustment at most, while every admission reads it. It is kept in
//! two slots and a version counter `version`: slot `version & 1` is current.
//!
//! - A writer (one at a time: the caller holds the limiter's control lock)
//!   fills the *other* slot and then publishes it by storing `version + 1`
//!   (Release). It never writes the slot readers are told to read, so a
//!   writer that is preempted halfway blocks no one.
//! - A reader loads `version` (Acquire, pairing with the publication), the slot's
//!   words (Relaxed), issues an Acquire fence and loads `version` again. If it is
//!   unchanged the words are one segment. A writer's Release fence sits
//!   before its slot writes; if a reader saw any of them, that fence
//!   synchronizes with the reader's, so the reader's second load sees the
//!   `version` the writer started from, which is past the reader's first load:
//!   it retries. A reader retries only if two segments were published while
//!   it read four words.
//!
//! This is a seqlock whose odd phase is the other slot: readers never wait
//! for a writer.

use super::bucket::Segment;
use crate::sync::{AtomicU64, Ordering, fence, spin_wait_step};

#[derive(Debug)]
struct Slot {
    start: AtomicU64,
    base: AtomicU64,
    rate: AtomicU64,
    cap: AtomicU64,
}

impl Slot {
    fn new(s: Segment) -> Self {
        Self {
            start: AtomicU64::new(s.start),
            base: AtomicU64::new(s.base),
            rate: AtomicU64::new(s.rate),
            cap: AtomicU64::new(s.cap),
        }
    }
}

/// The current segment of the token clock.
#[derive(Debug)]
pub(crate) struct Schedule {
    version: AtomicU64,
    slots: [Slot; 2],
}

impl Schedule {
    pub(crate) fn new(first: Segment) -> Self {
        Self {
            version: AtomicU64::new(0),
            slots: [Slot::new(first), Slot::new(first)],
        }
    }

    /// The current segment.
    #[inline]
    pub(crate) fn read(&self) -> Segment {
        let mut spins = 0;
        loop {
            let version = self.version.load(Ordering::Acquire);
            let slot = &self.slots[(version & 1) as usize];
            let seg = Segment {
                start: slot.start.load(Ordering::Relaxed),
                base: slot.base.load(Ordering::Relaxed),
                rate: slot.rate.load(Ordering::Relaxed),
                cap: slot.cap.load(Ordering::Relaxed),
            };
            fence(Ordering::Acquire);
            if self.version.load(Ordering::Relaxed) == version {
                return seg;
            }
            spin_wait_step(&mut spins);
        }
    }

    /// Makes `next` the current segment, after version `current` (the
    /// value this returned last time, or 0); returns the new version. The
    /// caller holds the limiter's control lock: one writer at a time, and it
    /// keeps the version itself, so a change writes without first reading a
    /// word the readers read.
    pub(crate) fn publish(&self, current: u64, next: Segment) -> u64 {
        let slot = &self.slots[(current.wrapping_add(1) & 1) as usize];
        fence(Ordering::Release);
        slot.start.store(next.start, Ordering::Relaxed);
        slot.base.store(next.base, Ordering::Relaxed);
        slot.rate.store(next.rate, Ordering::Relaxed);
        slot.cap.store(next.cap, Ordering::Relaxed);
        let version = current.wrapping_add(1);
        self.version.store(version, Ordering::Release);
        version
    }
}
