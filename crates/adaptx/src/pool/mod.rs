//! The permit engine: a semaphore whose size can move.
//!
//! # Implementation details
//!
//! The whole admission state is one `AtomicU64`:
//!
//! | bits    | field       | meaning                                              |
//! |---------|-------------|------------------------------------------------------|
//! | 0..=30  | `in_flight` | permits held (admitted operations, and permits handed to a waiter that has not yet seen them) |
//! | 31..=61 | `limit`     | the live limit                                       |
//! | 62      | `CLOSED`    | the pool is closed: no admission ever again          |
//! | 63      | `WAITERS`   | the wait queue is not empty; always set when partitioned |
//!
//! A partitioned pool keeps `WAITERS` set for its whole life, so that the
//! unpartitioned fast paths, which test that bit anyway (admission with the
//! same mask as `CLOSED`, release before its CAS), divert it to the
//! partitioned ones without a branch of their own: the unpartitioned hot
//! path pays nothing for partitions. A partitioned limit is at most
//! [`MAX_PARTITIONED_LIMIT`], so the limit field's top bit (61) is free
//! there; it holds `PART_WAITERS`, the partitioned pool's "the wait queue
//! is not empty", and is masked out wherever the limit is read.
//!
//! The number of free permits and the shrink debt are *derived*, not stored:
//! `available = max(0, limit − in_flight)` and `debt = max(0, in_flight −
//! limit)`. The accounting invariant `available + in_flight − debt == limit`
//! therefore holds by construction, and no sequence of operations can lose or
//! duplicate a permit: admission is `in_flight += 1` only while `in_flight <
//! limit`, release is `in_flight −= 1` (which retires a permit while there is
//! debt), growing or shrinking is a store of `limit`.
//!
//! Because `CLOSED` and `in_flight` live in the same word, close and
//! admission are linearized: once a CAS has set `CLOSED`, no CAS can admit,
//! and a drain that observes `CLOSED` with `in_flight == 0` knows that no
//! operation is running or can start.
//!
//! ## Waiters
//!
//! Waiters queue in a mutex-protected `VecDeque`, served in the order of
//! the queue's discipline ([`queue`]: bound, per-waiter deadline, FIFO /
//! LIFO / adaptive LIFO, priorities, lowest priority shed first). The
//! waiters bit (`WAITERS`, partitioned `PART_WAITERS`) is set (under the
//! queue lock) only while the queue is non-empty; it is cleared under the lock when the queue empties. While it
//! is set, every path that could free a permit (release, growth, close)
//! takes the queue lock, so a free permit is handed to the waiter the
//! discipline picks instead of to a barging `try_acquire`.
//!
//! Unpartitioned, a waiter is queued only when `in_flight >= limit`. Hence
//! the second invariant: **`WAITERS` set ⇒ `in_flight >= limit`**, and while
//! it is set only holders of the queue lock change the state word.
//!
//! Partitioned ([`partition`]), a waiter is queued when the partition rule
//! refuses it, which may leave room for other partitions; the invariant is
//! instead **no queued waiter is admissible while the lock is free** (each
//! change that frees room serves the queue under the lock). The table's
//! counts and the state word are two words: admission CASes the table (the
//! decision) then counts the permit in the state word (undone only if the
//! pool closed in between); release gives the table's count back first. A
//! waiter loads the state word, then the table, and queues only if its CAS
//! setting `PART_WAITERS` finds the word it loaded, so a release either
//! freed its room before the waiter looked or sees `PART_WAITERS` and serves
//! the queue.
//!
//! A permit handed to a waiter is counted in `in_flight` at the moment it is
//! handed over; the waiter's node records the state word of the hand-over so
//! the admission snapshot is exact. A waiter that is dropped after being
//! granted gives its permit back through the ordinary release path.
//!
//! Wakers are always woken after the queue lock is released.
//!
//! ## Admission above the limit
//!
//! In shadow and bypass mode ([`over`]) a request the limit refuses is
//! admitted anyway, by the same `in_flight += 1`: it is a permit like any
//! other, held and released the same way, and counted in `in_flight`. So
//! `in_flight` stays exactly the permits held, and a permit above the limit
//! shows as debt (`in_flight − limit`) that its release retires; switching
//! back to enforce mode therefore admits no one until `in_flight` is under
//! the limit again, and no permit is lost or made twice. The only cap is
//! the counter's width ([`MAX_PERMITS`], and 65 535 per partition).
//!
//! The switch is a flag written under the queue lock; turning it on grants
//! every queued waiter in the same critical section, and an acquirer reads
//! the flag under that lock before it queues, so no waiter is left queued
//! while the flag is on.
//!
//! ## Memory ordering
//!
//! Admission and release use `AcqRel` CASes on the state word. Admission
//! hands no data between threads; the ordering matters for drain, where a
//! release's `Release` pairs with the drain check's `Acquire` so that
//! everything the last operation did happens-before the drain's success.

use std::collections::VecDeque;
use std::task::{Context, Poll, Waker};

use crate::clock::AnyClock;
use crate::sync::{Arc, AtomicU8, AtomicU64, Mutex, Ordering, lock};

mod over;
mod partition;
mod queue;

use over::OverLimit;
pub(crate) use partition::check_partitioned_limit;

pub(crate) use partition::Table;
pub use partition::{
    Class, DEFAULT_PARTITION, DEFAULT_RESERVE, MAX_PARTITIONED_LIMIT, MAX_PARTITIONS, Partitions,
    UnknownPartition,
};
pub(crate) use queue::Discipline;
pub use queue::{QueueOrder, QueuePolicy};

const COUNT_MASK: u64 = (1 << 31) - 1;
const LIMIT_SHIFT: u32 = 31;
const CLOSED: u64 = 1 << 62;
const WAITERS: u64 = 1 << 63;
/// Partitioned pools only: the wait queue is not empty (the limit field's top
/// bit, which a partitioned limit never uses).
const PART_WAITERS: u64 = 1 << 61;

/// The largest limit or in-flight count the state word can hold.
pub(crate) const MAX_PERMITS: usize = COUNT_MASK as usize;

#[inline]
fn in_flight_of(s: u64) -> usize {
    (s & COUNT_MASK) as usize
}

#[inline]
fn limit_of(s: u64) -> usize {
    ((s >> LIMIT_SHIFT) & COUNT_MASK) as usize
}

#[inline]
fn with_limit(s: u64, limit: usize) -> u64 {
    (s & !(COUNT_MASK << LIMIT_SHIFT)) | ((limit as u64 & COUNT_MASK) << LIMIT_SHIFT)
}

/// The state at the instant of an admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Admission {
    /// The live limit when the permit was taken.
    pub(crate) limit: usize,
    /// Operations in flight when the permit was taken, not counting this one.
    pub(crate) in_flight: usize,
}

impl Admission {
    fn of(prev: u64) -> Self {
        Self {
            limit: limit_of(prev),
            in_flight: in_flight_of(prev),
        }
    }
}

/// Why a non-blocking admission failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TryFail {
    Closed,
    NoCapacity,
}

/// Why a wait for a permit ended without one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The pool is closed.
    Closed,
    /// The queue was full of waiters of equal or higher priority.
    Full,
    /// The waiter's deadline passed.
    TimedOut,
    /// A newcomer of higher priority took the waiter's place in a full queue.
    Shed,
}

const WAITING: u8 = 0;
const GRANTED: u8 = 1;
const CLOSED_OUT: u8 = 2;
const CANCELLED: u8 = 3;
const TIMED_OUT: u8 = 4;
const SHED: u8 = 5;

/// One queued acquirer.
#[derive(Debug)]
pub(crate) struct Waiter {
    state: AtomicU8,
    /// The state word just before the permit was handed over.
    granted_at: AtomicU64,
    waker: Mutex<Option<Waker>>,
    /// Its partition.
    slot: u8,
    priority: u8,
    /// When it was queued, and when it times out (`u64::MAX`: never), ns.
    enqueued: u64,
    deadline: u64,
}

impl Waiter {
    fn new(waker: Waker, class: Class, enqueued: u64, deadline: u64) -> Self {
        Self {
            state: AtomicU8::new(WAITING),
            granted_at: AtomicU64::new(0),
            waker: Mutex::new(Some(waker)),
            slot: class.slot,
            priority: class.priority,
            enqueued,
            deadline,
        }
    }

    fn is_waiting(&self) -> bool {
        self.state.load(Ordering::Acquire) == WAITING
    }

    /// The waiter's deadline, ns on the pool's clock (`u64::MAX`: none).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn deadline(&self) -> u64 {
        self.deadline
    }

    /// Moves `WAITING → to`; on success returns the waker to wake.
    fn finish(&self, to: u8, granted_at: u64) -> Option<Option<Waker>> {
        if to == GRANTED {
            self.granted_at.store(granted_at, Ordering::Relaxed);
        }
        self.state
            .compare_exchange(WAITING, to, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| lock(&self.waker).take())
    }
}

/// Waiters resolved by a change of the pool, to be woken once the caller
/// holds no lock. Dropping it wakes them too, so none is ever lost. The
/// first waker is held inline: a release that hands over one permit does not
/// allocate.
#[derive(Debug, Default)]
#[must_use = "resolved waiters must be woken"]
pub(crate) struct Woken {
    first: Option<Waker>,
    rest: Vec<Waker>,
}

impl Woken {
    fn push(&mut self, w: Option<Waker>) {
        match (w, self.first.is_none()) {
            (Some(w), true) => self.first = Some(w),
            (Some(w), false) => self.rest.push(w),
            (None, _) => {}
        }
    }

    /// Wakes every resolved waiter.
    pub(crate) fn wake_all(self) {
        drop(self);
    }
}

impl Drop for Woken {
    fn drop(&mut self) {
        if let Some(w) = self.first.take() {
            w.wake();
        }
        for w in self.rest.drain(..) {
            w.wake();
        }
    }
}

#[derive(Debug, Default)]
struct Queue {
    waiters: VecDeque<Arc<Waiter>>,
    drain: Vec<(u64, Waker)>,
    next_drain_id: u64,
    discipline: Discipline,
    clock: Option<AnyClock>,
}

impl Queue {
    /// The time, when the discipline needs it (0 otherwise).
    fn now(&self) -> u64 {
        match &self.clock {
            Some(c) if self.discipline.needs_clock() => c.now_nanos(),
            _ => 0,
        }
    }

    /// Drops withdrawn entries and times out the waiters past their deadline.
    fn sweep(&mut self, now: u64, woken: &mut Woken) {
        let timeouts = self.discipline.timeout.is_some();
        self.waiters.retain(|w| {
            if timeouts && w.deadline <= now {
                if let Some(k) = w.finish(TIMED_OUT, 0) {
                    woken.push(k);
                }
            }
            w.is_waiting()
        });
    }
}

/// Who can take the permits a grant hands out.
enum Seats<'a> {
    /// Unpartitioned, under the queue lock with `WAITERS` set: the state
    /// word is stable and `next` is the value to store.
    Plain { next: u64 },
    /// Above the limit (shadow and bypass mode): every waiter, while the
    /// counters have room. `next` is the plain state word plus the grants
    /// so far; `table` counts each grant in its partition.
    Over { table: Option<&'a Table>, next: u64 },
    /// Partitioned, under limit `limit`: each grant takes a unit of the
    /// waiter's partition.
    Part {
        table: &'a Table,
        limit: usize,
        state: u64,
    },
}

impl Seats<'_> {
    fn admissible(&self, w: &Waiter) -> bool {
        match self {
            Seats::Plain { next } => in_flight_of(*next) < limit_of(*next),
            Seats::Part { table, limit, .. } => table.admissible(usize::from(w.slot), *limit),
            Seats::Over { table, next } => {
                in_flight_of(*next) < MAX_PERMITS
                    && table.is_none_or(|t| t.has_room_over(usize::from(w.slot)))
            }
        }
    }

    /// Takes a permit for `w`: the admission snapshot, or `None` if a
    /// concurrent admission took the room first.
    fn take(&mut self, w: &Waiter) -> Option<u64> {
        match self {
            Seats::Plain { next } => {
                let at = *next;
                *next += 1;
                Some(at)
            }
            Seats::Part {
                table,
                limit,
                state,
            } => table
                .try_take(usize::from(w.slot), *limit)
                .then_some(*state),
            Seats::Over { table, next } => {
                if table.is_some_and(|t| !t.take_over(usize::from(w.slot))) {
                    return None;
                }
                let at = *next;
                *next += 1;
                Some(at)
            }
        }
    }

    fn undo(&mut self, w: &Waiter) {
        match self {
            Seats::Plain { next } => *next -= 1,
            Seats::Part { table, .. } => table.give(usize::from(w.slot)),
            Seats::Over { table, next } => {
                *next -= 1;
                if let Some(t) = table {
                    t.give(usize::from(w.slot));
                }
            }
        }
    }
}

/// The permit engine. See the module documentation.
///
/// `repr(C)` and boxed side structures keep the state word first, so the
/// limiter can share its cache line with its other hot fields.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Pool {
    state: AtomicU64,
    queue: Box<Mutex<Queue>>,
    parts: Option<Box<Table>>,
    /// Admission above the limit (shadow and bypass mode); boxed so the
    /// window's hot fields stay on the state word's cache line.
    over: Box<OverLimit>,
}

impl Pool {
    /// A pool with `limit` permits, an unbounded FIFO queue and no
    /// partitions. `limit` must be at most [`MAX_PERMITS`].
    #[cfg(test)]
    pub(crate) fn new(limit: usize) -> Self {
        Self::with(limit, Discipline::default(), None, None)
    }

    /// A pool with `limit` permits (at most [`MAX_PERMITS`], and at most
    /// [`MAX_PARTITIONED_LIMIT`] with a table), the queue `discipline` on
    /// `clock`, and partitions `parts`.
    pub(crate) fn with(
        limit: usize,
        discipline: Discipline,
        parts: Option<Table>,
        clock: Option<AnyClock>,
    ) -> Self {
        debug_assert!(limit <= MAX_PERMITS);
        let mut state = with_limit(0, limit);
        if let Some(t) = &parts {
            debug_assert!(limit <= MAX_PARTITIONED_LIMIT);
            t.set_limit(limit);
            state |= WAITERS;
        }
        Self {
            state: AtomicU64::new(state),
            queue: Box::new(Mutex::new(Queue {
                discipline,
                clock,
                ..Queue::default()
            })),
            parts: parts.map(Box::new),
            over: Box::default(),
        }
    }

    /// The partition table, if the pool has one.
    pub(crate) fn table(&self) -> Option<&Table> {
        self.parts.as_deref()
    }

    /// The bit of the state word that says "the wait queue is not empty":
    /// `WAITERS` unpartitioned, `PART_WAITERS` partitioned.
    #[inline]
    pub(crate) fn waiters_bit(&self) -> u64 {
        if self.parts.is_some() {
            PART_WAITERS
        } else {
            WAITERS
        }
    }

    /// `s` with a partitioned pool's `PART_WAITERS` taken out of the limit
    /// field.
    #[inline]
    fn plain(&self, s: u64) -> u64 {
        if self.parts.is_some() {
            s & !PART_WAITERS
        } else {
            s
        }
    }

    /// The state word, limit field plain.
    #[inline]
    fn word(&self) -> u64 {
        self.plain(self.state.load(Ordering::Acquire))
    }

    /// The live limit.
    #[inline]
    pub(crate) fn limit(&self) -> usize {
        limit_of(self.word())
    }

    /// Permits held.
    #[inline]
    pub(crate) fn in_flight(&self) -> usize {
        in_flight_of(self.state.load(Ordering::Acquire))
    }

    /// Whether the pool is closed.
    #[inline]
    pub(crate) fn is_closed(&self) -> bool {
        self.state.load(Ordering::Acquire) & CLOSED != 0
    }

    /// `(limit, in_flight, closed)` from one load.
    #[inline]
    pub(crate) fn snapshot(&self) -> (usize, usize, bool) {
        let s = self.word();
        (limit_of(s), in_flight_of(s), s & CLOSED != 0)
    }

    /// Free permits now (a hint).
    #[inline]
    pub(crate) fn available(&self) -> usize {
        let s = self.word();
        limit_of(s).saturating_sub(in_flight_of(s))
    }

    /// Shrink debt now: permits that releases will retire.
    #[inline]
    pub(crate) fn debt(&self) -> usize {
        let s = self.word();
        in_flight_of(s).saturating_sub(limit_of(s))
    }

    /// Waiters in the queue (withdrawn ones not yet swept included).
    pub(crate) fn waiting(&self) -> usize {
        lock(&self.queue).waiters.len()
    }

    /// Takes a permit for the default class if one is free and nobody is
    /// queued for it.
    #[inline]
    pub(crate) fn try_acquire(&self) -> Result<Admission, TryFail> {
        self.try_acquire_as(0)
    }

    /// Takes a permit for partition `slot` (ignored without partitions) if
    /// one is free and nobody queued is owed it.
    ///
    /// The unpartitioned admission CAS: `in_flight += 1` while
    /// `in_flight < limit`. A closed pool, a queue (which unpartitioned
    /// implies `in_flight >= limit`, so a barging caller cannot overtake a
    /// waiter) and a partitioned pool (`WAITERS` always set) all leave by
    /// the one test of `CLOSED | WAITERS`. A refusal tries admission above
    /// the limit ([`over`]), out of line: the mode costs the fast path
    /// nothing.
    #[inline(always)]
    pub(crate) fn try_acquire_as(&self, slot: u8) -> Result<Admission, TryFail> {
        let mut s = self.state.load(Ordering::Acquire);
        loop {
            if s & (CLOSED | WAITERS) != 0 || in_flight_of(s) >= limit_of(s) {
                return self.try_acquire_flagged(s, slot).map(Admission::of);
            }
            match self
                .state
                .compare_exchange_weak(s, s + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(prev) => return Ok(Admission::of(prev)),
                Err(actual) => s = actual,
            }
        }
    }

    /// Admission when the word `s` had `CLOSED` or `WAITERS` set, or no free
    /// permit: the partitioned admission, else a refusal — or, either way,
    /// an admission above the limit when that is on. Returns the plain word
    /// before the admission (a word, not an [`Admission`], so that it comes
    /// back in registers and the caller's fast path keeps its result there
    /// too).
    #[inline(never)]
    fn try_acquire_flagged(&self, s: u64, slot: u8) -> Result<u64, TryFail> {
        match self.parts.as_deref() {
            Some(t) => self.try_acquire_part_or_over(t, s, slot),
            None if s & CLOSED != 0 => Err(TryFail::Closed),
            // `in_flight >= limit` at `s` (which `WAITERS` without partitions
            // implies).
            None if self.admits_over_limit() => self.try_acquire_over(slot),
            None => Err(TryFail::NoCapacity),
        }
    }

    /// The partitioned admission, then above the limit if the rule refuses
    /// and that is on. Out of line, so that the unpartitioned refusal above
    /// stays a small function.
    #[inline(never)]
    fn try_acquire_part_or_over(&self, t: &Table, s: u64, slot: u8) -> Result<u64, TryFail> {
        match self.try_acquire_part(t, s, slot) {
            Err(TryFail::NoCapacity) if self.admits_over_limit() => self.try_acquire_over(slot),
            r => r,
        }
    }

    /// The partitioned pool's count CAS on the state word: `in_flight += 1`
    /// unless closed (the table has decided).
    #[inline(always)]
    fn count(&self) -> Result<u64, TryFail> {
        let mut s = self.state.load(Ordering::Acquire);
        loop {
            if s & CLOSED != 0 {
                return Err(TryFail::Closed);
            }
            match self
                .state
                .compare_exchange_weak(s, s + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(prev) => return Ok(prev & !PART_WAITERS),
                Err(actual) => s = actual,
            }
        }
    }

    /// The partitioned admission: the rule's CAS on the table, then the
    /// count in the state word. With waiters queued it runs under the queue
    /// lock (the waiters are all refused by the rule then, so the rule alone
    /// decides; see the module documentation).
    /// `s` is the state word the caller just loaded.
    #[inline]
    fn try_acquire_part(&self, t: &Table, s: u64, slot: u8) -> Result<u64, TryFail> {
        if s & CLOSED != 0 {
            return Err(TryFail::Closed);
        }
        if s & PART_WAITERS != 0 {
            return self.try_acquire_part_locked(t, slot);
        }
        if !t.try_take(usize::from(slot), limit_of(s)) {
            return Err(TryFail::NoCapacity);
        }
        self.count_in(t, slot)
    }

    #[cold]
    fn try_acquire_part_locked(&self, t: &Table, slot: u8) -> Result<u64, TryFail> {
        let _q = lock(&self.queue);
        let s = self.word();
        if s & CLOSED != 0 {
            return Err(TryFail::Closed);
        }
        if !t.try_take(usize::from(slot), limit_of(s)) {
            return Err(TryFail::NoCapacity);
        }
        self.count_in(t, slot)
    }

    /// Counts a permit the table just gave partition `slot` in the state
    /// word, or gives it back if the pool closed meanwhile.
    #[inline]
    fn count_in(&self, t: &Table, slot: u8) -> Result<u64, TryFail> {
        self.count().inspect_err(|_| t.give(usize::from(slot)))
    }

    /// Returns one permit of the default class.
    #[cfg(test)]
    pub(crate) fn release(&self) {
        self.release_from(0);
    }

    /// Returns one permit of partition `slot`: to the next waiter if there is
    /// one and no debt, otherwise to the pool (or retires it while there is
    /// debt).
    ///
    /// A partitioned pool has `WAITERS` always set, so its releases leave the
    /// unpartitioned CAS loop at its first test, for [`Pool::release_part`].
    #[inline(always)]
    pub(crate) fn release_from(&self, slot: u8) {
        let s = self.state.load(Ordering::Relaxed);
        if !self.uncount(s, WAITERS) {
            self.release_flagged(slot);
        }
    }

    /// The release CAS on the state word: `in_flight -= 1`, from `s` on,
    /// unless `waiters` (the pool's [`waiters_bit`](Pool::waiters_bit), or
    /// `WAITERS` for the unpartitioned fast path) is set (then `false`: the
    /// queue must be served, or the pool is partitioned).
    #[inline(always)]
    fn uncount(&self, mut s: u64, waiters: u64) -> bool {
        loop {
            if s & waiters != 0 {
                return false;
            }
            debug_assert!(in_flight_of(s) > 0, "release without a permit");
            let next = s - 1;
            match self
                .state
                .compare_exchange_weak(s, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    if next & CLOSED != 0 && in_flight_of(next) == 0 {
                        self.notify_drained();
                    }
                    return true;
                }
                Err(actual) => s = actual,
            }
        }
    }

    /// Release when the state word had `WAITERS` set: the partitioned
    /// release, or serving the queue.
    #[inline(never)]
    fn release_flagged(&self, slot: u8) {
        match self.parts.as_deref() {
            Some(t) => self.release_part(t, self.state.load(Ordering::Acquire), slot),
            None => self.release_slow(),
        }
    }

    #[cold]
    fn release_slow(&self) {
        let mut woken = Woken::default();
        let mut drained = false;
        {
            let mut q = lock(&self.queue);
            let s = self.state.load(Ordering::Acquire);
            if s & WAITERS == 0 || in_flight_of(s) > limit_of(s) {
                // The queue emptied while we waited for the lock, or there is
                // debt to pay: a plain decrement. Without `WAITERS` other
                // threads may race, hence the CAS loop.
                drained = self.decrement();
            } else {
                // Hand the permit over: the releasing operation is over (its
                // `- 1` is in the snapshot), each grant counts one.
                let mut seats = Seats::Plain { next: s - 1 };
                grant(&mut q, &mut seats, &mut woken);
                let Seats::Plain { mut next } = seats else {
                    unreachable!("plain seats stay plain");
                };
                if q.waiters.is_empty() {
                    next &= !WAITERS;
                }
                self.store_stable(s, next);
            }
        }
        if drained {
            self.notify_drained();
        }
        woken.wake_all();
    }

    /// The partitioned release. The table's count goes first, then the state
    /// word's; a release that finds `PART_WAITERS` set serves the queue under its
    /// lock. A waiter is queued only after loading the state word and then
    /// the table (both under the lock, in that order), and only if its CAS
    /// setting `PART_WAITERS` finds the word it loaded: so either it saw this
    /// release's table count, or this release's state CAS sees `PART_WAITERS`.
    /// `s` is the state word the caller just loaded.
    #[inline]
    fn release_part(&self, t: &Table, s: u64, slot: u8) {
        if s & PART_WAITERS != 0 {
            return self.release_part_slow(t, Some(slot));
        }
        t.give(usize::from(slot));
        if !self.uncount(s, PART_WAITERS) {
            self.release_part_slow(t, None);
        }
    }

    /// Serves the queue after a partitioned release; `give` is the slot whose
    /// table count is still to be returned.
    #[cold]
    fn release_part_slow(&self, t: &Table, give: Option<u8>) {
        let mut woken = Woken::default();
        let drained = {
            let mut q = lock(&self.queue);
            if let Some(slot) = give {
                t.give(usize::from(slot));
            }
            let granted = self.grant_part(&mut q, t, &mut woken);
            // The released permit leaves, each grant comes in.
            let empty = q.waiters.is_empty();
            let prev = self.update(|s| {
                let next = s + granted - 1;
                if empty { next & !PART_WAITERS } else { next }
            });
            let next = prev + granted - 1;
            next & CLOSED != 0 && in_flight_of(next) == 0
        };
        if drained {
            self.notify_drained();
        }
        woken.wake_all();
    }

    /// Grants every queued waiter the rule admits now; returns how many.
    fn grant_part(&self, q: &mut Queue, t: &Table, woken: &mut Woken) -> u64 {
        let state = self.word();
        let mut seats = Seats::Part {
            table: t,
            limit: limit_of(state),
            state,
        };
        grant(q, &mut seats, woken)
    }

    /// A CAS loop applying `f` to the state word; returns the previous word.
    fn update(&self, f: impl Fn(u64) -> u64) -> u64 {
        let mut s = self.state.load(Ordering::Acquire);
        loop {
            match self
                .state
                .compare_exchange(s, f(s), Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(prev) => return prev,
                Err(actual) => s = actual,
            }
        }
    }

    /// CAS loop for `in_flight -= 1`; returns whether it drained a closed pool.
    fn decrement(&self) -> bool {
        let next = self.update(|s| s - 1) - 1;
        next & CLOSED != 0 && in_flight_of(next) == 0
    }

    /// Stores a new state word while `WAITERS` is set and the queue lock is
    /// held, when no other thread can change the word (unpartitioned pools).
    fn store_stable(&self, expected: u64, next: u64) {
        let swapped =
            self.state
                .compare_exchange(expected, next, Ordering::AcqRel, Ordering::Acquire);
        debug_assert!(swapped.is_ok(), "state changed under the queue lock");
    }

    /// Polls for a permit of the default class; see [`Pool::poll_acquire_as`].
    #[cfg(test)]
    pub(crate) fn poll_acquire(
        &self,
        node: &mut Option<Arc<Waiter>>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Admission, Refused>> {
        self.poll_acquire_as(node, cx, Class::default())
    }

    /// Polls for a permit of `class`. `node` holds this acquirer's queue
    /// entry between polls; it must start as `None` and be passed to
    /// [`Pool::cancel`] if the acquirer gives up while it is `Some`.
    pub(crate) fn poll_acquire_as(
        &self,
        node: &mut Option<Arc<Waiter>>,
        cx: &mut Context<'_>,
        class: Class,
    ) -> Poll<Result<Admission, Refused>> {
        if let Some(w) = node.as_ref() {
            let mut st = w.state.load(Ordering::Acquire);
            if st == WAITING {
                {
                    let mut slot = lock(&w.waker);
                    match slot.as_ref() {
                        Some(old) if old.will_wake(cx.waker()) => {}
                        _ => *slot = Some(cx.waker().clone()),
                    }
                }
                if w.deadline != u64::MAX && lock(&self.queue).now() >= w.deadline {
                    self.time_out(w);
                }
                // Re-check after publishing the waker: a grant that raced
                // with the registration set the state first.
                st = w.state.load(Ordering::Acquire);
            }
            let r = match st {
                WAITING => return Poll::Pending,
                GRANTED => Ok(Admission::of(w.granted_at.load(Ordering::Relaxed))),
                CLOSED_OUT | CANCELLED => Err(Refused::Closed),
                TIMED_OUT => Err(Refused::TimedOut),
                _ => Err(Refused::Shed),
            };
            *node = None;
            return Poll::Ready(r);
        }

        match self.try_acquire_as(class.slot) {
            Ok(a) => return Poll::Ready(Ok(a)),
            Err(TryFail::Closed) => return Poll::Ready(Err(Refused::Closed)),
            Err(TryFail::NoCapacity) => {}
        }

        let mut woken = Woken::default();
        let r = self.admit_or_enqueue(node, cx, class, &mut woken);
        woken.wake_all();
        r
    }

    /// Under the queue lock: a permit if one came free, else a place in the
    /// queue (shedding a lower-priority waiter from a full one), else a
    /// refusal.
    fn admit_or_enqueue(
        &self,
        node: &mut Option<Arc<Waiter>>,
        cx: &mut Context<'_>,
        class: Class,
        woken: &mut Woken,
    ) -> Poll<Result<Admission, Refused>> {
        let mut q = lock(&self.queue);
        if self.admits_over_limit() {
            // Read under the lock that turning it on holds while it empties
            // the queue: no acquirer queues while it is on (unless the
            // counters are full; then it waits as in enforce mode).
            match self.take_over_locked(class.slot) {
                Ok(prev) => return Poll::Ready(Ok(Admission::of(prev))),
                Err(TryFail::Closed) => return Poll::Ready(Err(Refused::Closed)),
                Err(TryFail::NoCapacity) => {}
            }
        }
        let now = q.now();
        let d = q.discipline;
        if q.waiters.len() >= d.max_waiters {
            q.sweep(now, woken);
        }
        let full = q.waiters.len() >= d.max_waiters;
        let mut flag = !full;
        let bit = self.waiters_bit();
        let mut s = self.state.load(Ordering::Acquire);
        loop {
            if s & CLOSED != 0 {
                return Poll::Ready(Err(Refused::Closed));
            }
            match self.parts.as_deref() {
                None if in_flight_of(s) < limit_of(s) => {
                    // A permit came free before we took the lock.
                    match self
                        .state
                        .compare_exchange(s, s + 1, Ordering::AcqRel, Ordering::Acquire)
                    {
                        Ok(prev) => return Poll::Ready(Ok(Admission::of(prev))),
                        Err(actual) => {
                            s = actual;
                            continue;
                        }
                    }
                }
                None => {}
                // The state word is loaded before the table: see
                // `release_part`.
                Some(t) if t.try_take(usize::from(class.slot), limit_of(s & !PART_WAITERS)) => {
                    return Poll::Ready(
                        self.count_in(t, class.slot)
                            .map(Admission::of)
                            .map_err(|_| Refused::Closed),
                    );
                }
                Some(_) => {}
            }
            if !flag {
                break;
            }
            if s & bit != 0 {
                break;
            }
            match self
                .state
                .compare_exchange(s, s | bit, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => break,
                Err(actual) => s = actual,
            }
        }
        if full {
            if d.max_waiters == 0 {
                return Poll::Ready(Err(Refused::Full));
            }
            let Some(v) = d.victim(&q.waiters, now, class.priority) else {
                return Poll::Ready(Err(Refused::Full));
            };
            // The queue is not empty, so the waiters bit is set.
            if let Some(w) = q.waiters.remove(v) {
                woken.push(w.finish(SHED, 0).flatten());
            }
            flag = true;
        }
        debug_assert!(flag);
        let w = Arc::new(Waiter::new(cx.waker().clone(), class, now, d.deadline(now)));
        q.waiters.push_back(w.clone());
        *node = Some(w);
        Poll::Pending
    }

    /// Times out a queued waiter (its deadline passed, or its timer fired).
    /// Returns `false` if it was already resolved (granted, closed out…).
    pub(crate) fn time_out(&self, w: &Arc<Waiter>) -> bool {
        match w.finish(TIMED_OUT, 0) {
            Some(_) => {
                self.unlink(w);
                true
            }
            None => false,
        }
    }

    /// Removes a resolved waiter from the queue, clearing the waiters bit if it
    /// was the last.
    fn unlink(&self, w: &Arc<Waiter>) {
        let mut q = lock(&self.queue);
        if let Some(pos) = q.waiters.iter().position(|x| Arc::ptr_eq(x, w)) {
            q.waiters.remove(pos);
        }
        if q.waiters.is_empty() {
            let s = self.state.load(Ordering::Acquire);
            if self.parts.is_some() {
                if s & PART_WAITERS != 0 {
                    self.update(|s| s & !PART_WAITERS);
                }
            } else if s & WAITERS != 0 {
                self.store_stable(s, s & !WAITERS);
            }
        }
    }

    /// Withdraws a queued acquirer. Returns `true` if it held a granted
    /// permit, which this call has given back.
    pub(crate) fn cancel(&self, w: &Arc<Waiter>) -> bool {
        if w.finish(CANCELLED, 0).is_some() {
            self.unlink(w);
            false
        } else if w.state.load(Ordering::Acquire) == GRANTED {
            self.release_from(w.slot);
            true
        } else {
            false
        }
    }

    /// Sets the live limit (clamped to [`MAX_PERMITS`]); returns the old
    /// one. Growth hands new permits to queued waiters first; a shrink below
    /// `in_flight` becomes debt that releases pay. Wakes the waiters it
    /// granted before returning.
    #[cfg(test)]
    pub(crate) fn set_limit(&self, limit: usize) -> usize {
        let (old, woken) = self.set_limit_deferred(limit);
        woken.wake_all();
        old
    }

    /// [`set_limit`](Pool::set_limit) without the wake-ups: returns the old
    /// limit and the waiters granted a permit, for the caller to wake once it
    /// holds no lock (a woken task may run at once, on this thread, and take
    /// the caller's locks).
    pub(crate) fn set_limit_deferred(&self, limit: usize) -> (usize, Woken) {
        let limit = limit.min(MAX_PERMITS);
        let mut woken = Woken::default();
        let mut q = lock(&self.queue);
        let s = self.state.load(Ordering::Acquire);
        if let Some(t) = self.parts.as_deref() {
            let limit = limit.min(MAX_PARTITIONED_LIMIT);
            let prev = self.update(|s| with_limit(s, limit) | (s & PART_WAITERS));
            let old = limit_of(prev & !PART_WAITERS);
            t.set_limit(limit);
            if s & PART_WAITERS != 0 {
                let granted = self.grant_part(&mut q, t, &mut woken);
                let empty = q.waiters.is_empty();
                self.update(|s| {
                    let next = s + granted;
                    if empty { next & !PART_WAITERS } else { next }
                });
            }
            return (old, woken);
        }
        if s & WAITERS != 0 {
            // Stable under the lock: only we may change the word.
            let mut seats = Seats::Plain {
                next: with_limit(s, limit),
            };
            grant(&mut q, &mut seats, &mut woken);
            let Seats::Plain { mut next } = seats else {
                unreachable!("plain seats stay plain");
            };
            if q.waiters.is_empty() {
                next &= !WAITERS;
            }
            self.store_stable(s, next);
            (limit_of(s), woken)
        } else {
            let old = limit_of(self.update(|s| with_limit(s, limit)));
            (old, woken)
        }
    }

    /// Closes the pool: no admission succeeds afterwards and every queued
    /// waiter wakes with [`Refused::Closed`]. Returns `true` on the first
    /// call.
    pub(crate) fn close(&self) -> bool {
        let (first, waiters, drained) = {
            let mut q = lock(&self.queue);
            let prev = self.state.fetch_or(CLOSED, Ordering::AcqRel);
            let bit = self.waiters_bit();
            if prev & bit != 0 {
                self.state.fetch_and(!bit, Ordering::AcqRel);
            }
            (
                prev & CLOSED == 0,
                std::mem::take(&mut q.waiters),
                in_flight_of(prev) == 0,
            )
        };
        for w in waiters {
            if let Some(Some(waker)) = w.finish(CLOSED_OUT, 0) {
                waker.wake();
            }
        }
        if drained {
            self.notify_drained();
        }
        first
    }

    /// Ready once the pool is closed and no permit is held. `id` keeps this
    /// poller's registration between polls; pass it to
    /// [`Pool::forget_drain`] when giving up.
    pub(crate) fn poll_drained(&self, id: &mut Option<u64>, cx: &mut Context<'_>) -> Poll<()> {
        if self.is_drained() {
            return Poll::Ready(());
        }
        let mut q = lock(&self.queue);
        if self.is_drained() {
            return Poll::Ready(());
        }
        match *id {
            Some(me) => {
                if let Some(entry) = q.drain.iter_mut().find(|(i, _)| *i == me) {
                    if !entry.1.will_wake(cx.waker()) {
                        entry.1 = cx.waker().clone();
                    }
                } else {
                    q.drain.push((me, cx.waker().clone()));
                }
            }
            None => {
                let me = q.next_drain_id;
                q.next_drain_id += 1;
                q.drain.push((me, cx.waker().clone()));
                *id = Some(me);
            }
        }
        Poll::Pending
    }

    /// Drops a drain registration.
    pub(crate) fn forget_drain(&self, id: u64) {
        lock(&self.queue).drain.retain(|(i, _)| *i != id);
    }

    fn is_drained(&self) -> bool {
        let s = self.state.load(Ordering::Acquire);
        s & CLOSED != 0 && in_flight_of(s) == 0
    }

    #[cold]
    fn notify_drained(&self) {
        let waiting = std::mem::take(&mut lock(&self.queue).drain);
        for (_, w) in waiting {
            w.wake();
        }
    }
}

/// Serves the queue: grants the waiters `seats` admits, in the discipline's
/// order, and resolves those past their deadline; returns the grants.
fn grant(q: &mut Queue, seats: &mut Seats<'_>, woken: &mut Woken) -> u64 {
    let now = q.now();
    if q.discipline.timeout.is_some() {
        q.sweep(now, woken);
    }
    let mut granted = 0;
    while let Some(i) = q.discipline.pick(&q.waiters, now, |w| seats.admissible(w)) {
        let w = q.waiters[i].clone();
        let Some(at) = seats.take(&w) else {
            // A lock-free admission took the room first: pick again.
            continue;
        };
        q.waiters.remove(i);
        match w.finish(GRANTED, at) {
            Some(waker) => {
                granted += 1;
                woken.push(waker);
            }
            // Withdrawn meanwhile: the permit stays free.
            None => seats.undo(&w),
        }
    }
    // Nobody left that this grant could serve: drop withdrawn entries so an
    // empty queue clears `WAITERS`.
    if seats.admissible_any() {
        q.waiters.retain(|w| w.is_waiting());
    }
    granted
}

impl Seats<'_> {
    /// Whether a permit is still free for some partition (unpartitioned:
    /// free at all).
    fn admissible_any(&self) -> bool {
        match self {
            Seats::Plain { next } => in_flight_of(*next) < limit_of(*next),
            Seats::Part { .. } | Seats::Over { .. } => true,
        }
    }
}

#[cfg(all(test, not(adaptx_loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    #[derive(Default)]
    struct CountWaker(AtomicUsize);
    impl Wake for CountWaker {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn invariant(p: &Pool) {
        let (limit, in_flight, _) = p.snapshot();
        assert_eq!(p.available() + in_flight - p.debt(), limit);
    }

    #[test]
    fn shrink_records_debt_when_permits_held() {
        let p = Pool::new(4);
        for _ in 0..4 {
            p.try_acquire().unwrap();
        }
        p.set_limit(2);
        assert_eq!(p.debt(), 2);
        p.release();
        p.release();
        assert_eq!((p.debt(), p.available()), (0, 0));
        p.release();
        p.release();
        assert_eq!(p.available(), 2);
        invariant(&p);
    }

    #[test]
    fn growth_pays_down_debt_first() {
        let p = Pool::new(7);
        for _ in 0..7 {
            p.try_acquire().unwrap();
        }
        p.set_limit(4);
        assert_eq!(p.debt(), 3);
        p.set_limit(5);
        assert_eq!((p.debt(), p.available()), (2, 0));
        invariant(&p);
    }

    #[test]
    fn waiters_are_served_fifo_and_growth_grants() {
        let p = Pool::new(1);
        p.try_acquire().unwrap();
        let wk = std::sync::Arc::new(CountWaker::default());
        let waker = Waker::from(wk.clone());
        let mut cx = Context::from_waker(&waker);
        let mut a = None;
        let mut b = None;
        assert!(p.poll_acquire(&mut a, &mut cx).is_pending());
        assert!(p.poll_acquire(&mut b, &mut cx).is_pending());
        // try_acquire cannot barge.
        p.set_limit(2);
        assert_eq!(wk.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(matches!(
            p.poll_acquire(&mut a, &mut cx),
            Poll::Ready(Ok(_))
        ));
        assert!(p.poll_acquire(&mut b, &mut cx).is_pending());
        assert_eq!(p.try_acquire(), Err(TryFail::NoCapacity));
        p.release();
        assert!(matches!(
            p.poll_acquire(&mut b, &mut cx),
            Poll::Ready(Ok(Admission {
                limit: 2,
                in_flight: 1
            }))
        ));
        p.release();
        p.release();
        assert_eq!(p.in_flight(), 0);
        invariant(&p);
    }

    #[test]
    fn cancelled_granted_waiter_gives_permit_back() {
        let p = Pool::new(1);
        p.try_acquire().unwrap();
        let waker = Waker::from(std::sync::Arc::new(CountWaker::default()));
        let mut cx = Context::from_waker(&waker);
        let mut a = None;
        assert!(p.poll_acquire(&mut a, &mut cx).is_pending());
        p.release();
        let w = a.take().unwrap();
        assert!(p.cancel(&w));
        assert_eq!(p.in_flight(), 0);
        assert_eq!(p.available(), 1);
    }

    /// Queues `n` waiters of `class` on `p`; returns their nodes.
    fn queue_up(
        p: &Pool,
        cx: &mut Context<'_>,
        class: Class,
        n: usize,
    ) -> Vec<Option<Arc<Waiter>>> {
        (0..n)
            .map(|_| {
                let mut node = None;
                assert!(p.poll_acquire_as(&mut node, cx, class).is_pending());
                node
            })
            .collect()
    }

    fn granted(p: &Pool, cx: &mut Context<'_>, nodes: &mut [Option<Arc<Waiter>>]) -> Vec<usize> {
        (0..nodes.len())
            .filter(|&i| {
                nodes[i].is_some()
                    && matches!(p.poll_acquire(&mut nodes[i], cx), Poll::Ready(Ok(_)))
            })
            .collect()
    }

    #[test]
    fn queue_growth_grants_waiters_at_once_and_a_shrink_grants_none() {
        // Spec §6: limit 4 → 5 with 3 waiters: one granted at once; 4 → 3
        // then one release: no grant (debt).
        let p = Pool::with(
            4,
            QueuePolicy::new()
                .max_waiters(10)
                .discipline()
                .expect("valid"),
            None,
            None,
        );
        let waker = Waker::from(std::sync::Arc::new(CountWaker::default()));
        let mut cx = Context::from_waker(&waker);
        for _ in 0..4 {
            p.try_acquire().expect("free");
        }
        let mut nodes = queue_up(&p, &mut cx, Class::default(), 3);
        p.set_limit(5);
        assert_eq!(granted(&p, &mut cx, &mut nodes), [0]);
        p.set_limit(3);
        p.release();
        assert!(granted(&p, &mut cx, &mut nodes).is_empty());
        assert_eq!((p.in_flight(), p.debt()), (4, 1));
        invariant(&p);
    }

    #[test]
    fn queue_priority_order_then_arrival_order_within_a_priority() {
        let p = Pool::new(1);
        let waker = Waker::from(std::sync::Arc::new(CountWaker::default()));
        let mut cx = Context::from_waker(&waker);
        p.try_acquire().expect("free");
        let prio = |n| Class::default().with_priority(n);
        let mut nodes = Vec::new();
        for n in [0, 5, 0, 9] {
            nodes.extend(queue_up(&p, &mut cx, prio(n), 1));
        }
        let mut order = Vec::new();
        for _ in 0..4 {
            p.release();
            order.extend(granted(&p, &mut cx, &mut nodes));
        }
        assert_eq!(order, [3, 1, 0, 2]);
    }

    #[test]
    fn close_wakes_waiters_and_drains() {
        let p = Pool::new(1);
        p.try_acquire().unwrap();
        let wk = std::sync::Arc::new(CountWaker::default());
        let waker = Waker::from(wk.clone());
        let mut cx = Context::from_waker(&waker);
        let mut a = None;
        assert!(p.poll_acquire(&mut a, &mut cx).is_pending());
        let mut d = None;
        assert!(p.poll_drained(&mut d, &mut cx).is_pending());
        assert!(p.close());
        assert!(!p.close());
        assert!(matches!(
            p.poll_acquire(&mut a, &mut cx),
            Poll::Ready(Err(Refused::Closed))
        ));
        assert_eq!(p.try_acquire(), Err(TryFail::Closed));
        p.release();
        assert!(p.poll_drained(&mut d, &mut cx).is_ready());
        assert_eq!(wk.0.load(std::sync::atomic::Ordering::SeqCst), 2);
    }
}

#[cfg(all(test, not(adaptx_loom)))]
mod tests_prop;

#[cfg(all(test, not(adaptx_loom)))]
mod tests_partition;

#[cfg(all(test, adaptx_loom))]
mod loom;
