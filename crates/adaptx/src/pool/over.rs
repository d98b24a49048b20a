//! Admission above the limit, for shadow and bypass mode: see "Admission
//! above the limit" in the [engine's documentation](super).

use super::{
    CLOSED, MAX_PERMITS, PART_WAITERS, Pool, Seats, TryFail, WAITERS, Woken, grant, in_flight_of,
};
use crate::sync::{AtomicU8, AtomicU64, Ordering, lock};

/// The switch and the count of admissions above the limit.
#[derive(Debug, Default)]
pub(super) struct OverLimit {
    /// 1 while requests over the limit are admitted. Written under the
    /// queue lock.
    on: AtomicU8,
    /// Admissions made above the limit since construction or the last
    /// [`Pool::clear_over_limit_admissions`].
    admitted: AtomicU64,
}

impl Pool {
    /// Whether requests the limit refuses are admitted anyway.
    #[inline]
    pub(crate) fn admits_over_limit(&self) -> bool {
        self.over.on.load(Ordering::Acquire) != 0
    }

    /// Admissions made above the limit (the rejections and waits enforce
    /// mode would have made).
    pub(crate) fn over_limit_admissions(&self) -> u64 {
        self.over.admitted.load(Ordering::Relaxed)
    }

    /// Zeroes [`over_limit_admissions`](Pool::over_limit_admissions).
    pub(crate) fn clear_over_limit_admissions(&self) {
        self.over.admitted.store(0, Ordering::Relaxed);
    }

    /// Turns admission above the limit on or off. Turning it on grants every
    /// queued waiter at once, above the limit, in the discipline's order
    /// (a waiter past its deadline times out instead); returns the waiters
    /// to wake, for the caller to wake once it holds no lock. Permits held
    /// stay valid either way: turning it off leaves those above the limit as
    /// debt that their releases retire.
    pub(crate) fn set_over_limit(&self, on: bool) -> Woken {
        let mut woken = Woken::default();
        let mut q = lock(&self.queue);
        self.over.on.store(u8::from(on), Ordering::Release);
        let s = self.state.load(Ordering::Acquire);
        if !on || s & self.waiters_bit() == 0 {
            return woken;
        }
        let table = self.parts.as_deref();
        let mut seats = Seats::Over {
            table,
            next: self.plain(s),
        };
        let granted = grant(&mut q, &mut seats, &mut woken);
        let empty = q.waiters.is_empty();
        if table.is_some() {
            // Partitioned admissions count in the word without the lock.
            self.update(|s| {
                let next = s + granted;
                if empty { next & !PART_WAITERS } else { next }
            });
        } else {
            // `WAITERS` is set and we hold the lock: the word is stable.
            let mut next = s + granted;
            if empty {
                next &= !WAITERS;
            }
            self.store_stable(s, next);
        }
        self.over.admitted.fetch_add(granted, Ordering::Relaxed);
        woken
    }

    /// Takes a permit for partition `slot` above the limit, without the
    /// queue lock unless an unpartitioned pool has `WAITERS` set; returns
    /// the plain word before the admission (a word, so that it comes back in
    /// registers, as from `try_acquire_flagged`). Refused when admission
    /// above the limit is off, the pool is closed, or the counters are full.
    #[cold]
    #[inline(never)]
    pub(crate) fn try_acquire_over(&self, slot: u8) -> Result<u64, TryFail> {
        if !self.admits_over_limit() {
            return Err(TryFail::NoCapacity);
        }
        let prev = match self.parts.as_deref() {
            // Taking room only makes queued waiters less admissible: no lock.
            Some(t) => self.take_part_over(t, slot)?,
            None => match self.count_over(false) {
                Some(r) => r?,
                None => {
                    let _q = lock(&self.queue);
                    if !self.admits_over_limit() {
                        return Err(TryFail::NoCapacity);
                    }
                    return self.take_over_locked(slot);
                }
            },
        };
        self.over.admitted.fetch_add(1, Ordering::Relaxed);
        Ok(prev)
    }

    /// Takes a permit above the limit with the queue lock held by the
    /// caller (so an unpartitioned word may be changed with `WAITERS` set);
    /// returns the plain word before the admission.
    pub(super) fn take_over_locked(&self, slot: u8) -> Result<u64, TryFail> {
        let prev = match self.parts.as_deref() {
            Some(t) => self.take_part_over(t, slot)?,
            None => match self.count_over(true) {
                Some(r) => r?,
                None => unreachable!("a locked count never gives up"),
            },
        };
        self.over.admitted.fetch_add(1, Ordering::Relaxed);
        Ok(prev)
    }

    /// The partitioned admission above the limit: the partition's count
    /// whatever the rule says, then the state word's.
    fn take_part_over(&self, t: &super::Table, slot: u8) -> Result<u64, TryFail> {
        if self.is_closed() {
            return Err(TryFail::Closed);
        }
        if !t.take_over(usize::from(slot)) {
            return Err(TryFail::NoCapacity);
        }
        self.count_in(t, slot)
    }

    /// The unpartitioned count CAS above the limit: `in_flight += 1` unless
    /// closed or the counter is full; returns the word before. Without the
    /// queue lock (`locked` false) it gives up (`None`) when `WAITERS` is
    /// set, since only lock holders may change the word then.
    fn count_over(&self, locked: bool) -> Option<Result<u64, TryFail>> {
        let mut s = self.state.load(Ordering::Acquire);
        loop {
            if s & CLOSED != 0 {
                return Some(Err(TryFail::Closed));
            }
            if !locked && s & WAITERS != 0 {
                return None;
            }
            if in_flight_of(s) >= MAX_PERMITS {
                return Some(Err(TryFail::NoCapacity));
            }
            match self
                .state
                .compare_exchange(s, s + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(prev) => return Some(Ok(prev)),
                Err(actual) => s = actual,
            }
        }
    }
}
