//! The shared part of a rate limiter: the token clock, the limiter's own
//! bucket, the counters, and the interval closer. A keyed limiter's buckets
//! live with its table; this engine admits into whichever bucket it is
//! handed.
//!
//! # Implementation details
//!
//! The hot path (an admission, a completion) takes no lock and allocates
//! nothing: one clock reading, the [`Schedule`]'s segment (read-mostly
//! words), one compare-and-swap on the bucket's word ([`Bucket::take`]),
//! the permit's lane handle, and increments of that lane's counters (one
//! at admission, two at completion). The
//! parts sit on cache lines of their own ([`Padded`]): what every call
//! reads and only a change writes (clock, schedule, interval start, mode);
//! the limiter's own bucket, written by every admission; each lane's
//! handle; each lane's counters; the per-interval flags.
//!
//! **Lanes.** A thread writes the handle and the counters of its lane
//! (the lane of its [`ThreadNumber`], [`lane_index`]), so up to as
//! many threads as the machine has CPUs never write a line another one
//! writes, except the bucket's word, which is the limit itself. The
//! requests in flight are `admitted − completed − dropped`.
//!
//! **Spare handles.** A permit owns a reference to its lane (it may outlive
//! the limiter, and move to another thread). A permit finished on a thread
//! gives its reference to that thread's one spare slot (a thread-local),
//! and the thread's next admission on the same lane takes it from there:
//! admitting and finishing on one thread moves a reference instead of
//! counting one up and down (two locked instructions, 19.6 ns on the
//! benchmark VM). The cost: each thread keeps at most one reference,
//! to the lane of the last permit it finished, until it finishes a permit
//! of another limiter or exits. A permit finished after its limiter was
//! dropped keeps nothing (the lanes' drop clears a flag), so a limiter
//! dropped with permits in flight is freed with its last permit, and the
//! dropping thread's own spare handle goes with the limiter; a spare handle
//! another thread kept from before the drop stays until that thread
//! finishes a permit of another limiter or exits (documented on
//! [`RateLimiter`](super::RateLimiter)). Under loom there is
//! no spare slot.
//!
//! **Owned counters.** Each lane has two sets of counters
//! ([`LaneCounters`]): one written only by the thread whose number first
//! counted on the lane (its *owner*), with a plain load and store — no
//! locked instruction: under 1 ns against a `fetch_add`'s 9 ns on the
//! benchmark VM, three of them per admission and completion — and one
//! written with `fetch_add` by every other thread (more threads than lanes, a permit
//! completed on another thread than the one that admitted it, a thread
//! exiting). A thread number belongs to one live thread at a time and is
//! handed on when its thread exits, so a pool that replaces its threads
//! keeps its lanes owned; the free list's lock orders the old owner's last
//! write before the new owner's first. The closer and `stats` add both
//! sets.
//!
//! **Registers, not memory.** The admission's state stays in registers:
//! the thread-local hands out two words (the thread number and the spare
//! handle), and the cold paths (a refusal, a dropped permit) take and return
//! plain values. A struct built in one place and copied in another goes
//! through the stack, written with 8-byte stores and read back with 16-byte
//! loads, and the store buffer cannot forward two stores into one load: each
//! such copy stalled an admission by ~6 ns, more than half of the
//! `CoarseClock` path.
//!
//! **Counters** are cumulative atomics that are never reset. A completion
//! adds its latency (Relaxed), then its count (Release); the closer reads
//! the counts (Acquire), then the latency sum, so it never sees a count
//! without its latency. The latency sum wraps; differences between two
//! closes are taken with `wrapping_sub`, exact as long as one interval's
//! latencies sum to less than 2⁶⁴ ns (584 years).
//!
//! **The interval close** runs off the admission path: the call (admission
//! or completion) that finds the interval over claims it with one CAS that
//! moves the start to `now`, so at most one caller closes each interval and
//! every other caller goes on without waiting. The closer takes the
//! `control` lock (uncontended: one closer per interval; a user's
//! `set_rate` may also hold it), computes the interval's counts as
//! differences from the previous close, so every completion lands in
//! exactly one interval, and runs the law on its state. A completion racing
//! with a close may land in either neighbour; the law tolerates that. The
//! `binding` flag is swapped to `false` by the closer, so an interval never
//! inherits an earlier interval's pressure, and an interval without
//! completions changes nothing but still consumes its evidence.
//!
//! **A rate change** (the law's, or `set_rate`, `set_bounds`, `set_law`)
//! publishes a new segment of the token clock, under the `control` lock,
//! continuing the level the old one reached: every bucket holds the same
//! tokens just after the change as just before (see [`bucket`](super::bucket)).
//! If the capacity grows with it, the limiter's own bucket is first clipped
//! to the old capacity (one CAS on its word), so tokens it could not hold
//! do not appear. A keyed bucket is not clipped at the change (the table
//! is not walked): one left idle past the old capacity holds up to the new
//! one when next used, as if the larger capacity had applied while it was
//! idle — as a lazily refilled bucket always did. A lowered capacity clips
//! every bucket when it is next read.

use std::num::NonZeroU64;
use std::time::Duration;

use super::bucket::{Bucket, ONE, Segment, Take, TimedBucket};
use super::law::{IntervalSummary, RateLaw, RateLawState};
use super::schedule::Schedule;
use super::{RateLimited, RatePermit, RateStats};
use crate::clock::AnyClock;
use crate::error::ConfigError;
use crate::mode::{Mode, ModeCell};
use crate::observe::RateObserver;
#[cfg(adaptx_loom)]
use crate::sync::thread_number;
use crate::sync::{Arc, AtomicBool, AtomicU64, Mutex, Ordering, Owner, Padded, add_alone, lock};
#[cfg(not(adaptx_loom))]
use crate::sync::{NumberPool, SpareSlot, ThreadNumber};

/// One set of cumulative counters.
#[derive(Debug, Default)]
struct Counters {
    admitted: AtomicU64,
    successes: AtomicU64,
    failures: AtomicU64,
    latency_sum: AtomicU64,
    rejected: AtomicU64,
    dropped: AtomicU64,
    /// Admissions shadow or bypass mode let through with an empty bucket.
    would_reject: AtomicU64,
}

/// One lane's counters: a set that the lane's owner — the first thread to
/// count on the lane — writes alone, with a load and a store (no locked
/// instruction), and a set that every other thread writes with atomic
/// read-modify-writes. A permit completed on another thread than the one
/// that admitted it counts in the shared set of its lane.
#[derive(Debug, Default)]
#[repr(align(128))]
struct LaneCounters {
    owner: Owner,
    own: Counters,
    shared: Padded<Counters>,
}

impl LaneCounters {
    /// The set the thread numbered `me` writes (`None`: a thread whose
    /// number is gone, exiting).
    #[inline]
    fn writer(&self, me: Option<NonZeroU64>) -> Writer<'_> {
        if self.owner.is(me) {
            Writer::Only(&self.own)
        } else {
            Writer::Shared(&self.shared)
        }
    }

    /// A counter's total over both sets.
    fn sum(&self, field: fn(&Counters) -> &AtomicU64, order: Ordering) -> u64 {
        field(&self.own)
            .load(order)
            .wrapping_add(field(&self.shared).load(order))
    }
}

/// How the calling thread adds to a lane's counters.
#[derive(Debug, Clone, Copy)]
enum Writer<'a> {
    /// The lane's owner: the set's only writer.
    Only(&'a Counters),
    /// Any other thread: one of many writers.
    Shared(&'a Counters),
}

impl Writer<'_> {
    /// Adds `n` to a counter, storing with `order`.
    #[inline]
    fn add(self, field: fn(&Counters) -> &AtomicU64, n: u64, order: Ordering) {
        match self {
            Writer::Only(c) => add_alone(field(c), n, order),
            Writer::Shared(c) => {
                field(c).fetch_add(n, order);
            }
        }
    }
}

/// What changes at most once per interval, whichever lane changes it.
#[derive(Debug, Default)]
struct Moves {
    increases: AtomicU64,
    decreases: AtomicU64,
    binding: AtomicBool,
}

/// The most lanes an engine has: more threads than this share lanes.
const MAX_LANES: usize = 64;

/// The number of lanes for this machine: its parallelism, rounded up to a
/// power of two.
fn lane_count() -> usize {
    std::thread::available_parallelism()
        .map_or(1, usize::from)
        .next_power_of_two()
        .min(MAX_LANES)
}

/// The lane of the thread numbered `me` among `n` (a power of two):
/// threads numbered in turn write lanes in turn.
#[inline]
fn lane_index(me: Option<NonZeroU64>, n: usize) -> usize {
    // Truncation keeps the low bits, which are all that are used.
    me.map_or(0, NonZeroU64::get) as usize & (n - 1)
}

/// One lane of an engine: what a permit holds. Each lane is its own
/// reference-counted handle, so threads on different lanes never write
/// the same reference count, nor the same counters. Aligned so that each
/// handle's reference count has its cache lines to itself.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct Lane {
    pub(crate) core: Arc<Core>,
    index: usize,
}

/// How a permit ends.
#[derive(Debug, Clone, Copy)]
pub(crate) enum End {
    /// An outcome (success or not) and a latency, recorded at `now`.
    Recorded {
        success: bool,
        latency: u64,
        now: u64,
    },
    /// Dropped without an outcome: no feedback.
    Dropped,
}

impl Lane {
    /// Finishes a permit of `lane`: counts how it ended in the lane's
    /// counters as the calling thread writes them (closing the interval if
    /// a recorded outcome finds it over), then leaves the handle in the
    /// thread's spare slot. One thread-local access.
    #[inline(always)]
    pub(crate) fn finish(lane: Arc<Lane>, end: End) {
        #[cfg(not(adaptx_loom))]
        {
            let mut held = Some(lane);
            let replaced = THREAD.try_with(|t| {
                if let Some(lane) = &held {
                    lane.count(Some(t.number.get()), end);
                    if !lane.core.hot.limiter_alive.load(Ordering::Acquire) {
                        // Nobody will admit on it again: keep nothing.
                        return None;
                    }
                }
                held.take().and_then(|lane| t.spare.put(lane))
            });
            if replaced.is_err() {
                // The thread is exiting: counted as a thread without a
                // number.
                if let Some(lane) = &held {
                    lane.count(None, end);
                }
            }
            // Released after the borrow ends: dropping the last handle
            // drops the engine, and with it a user's clock.
            drop(replaced);
            drop(held);
        }
        #[cfg(adaptx_loom)]
        lane.count(thread_number(), end);
    }

    /// Counts how a permit ended, as the thread numbered `me`.
    #[inline(always)]
    fn count(&self, me: Option<NonZeroU64>, end: End) {
        let c = self.core.counters[self.index].writer(me);
        match end {
            End::Recorded {
                success,
                latency,
                now,
            } => {
                c.add(|c| &c.latency_sum, latency, Ordering::Relaxed);
                if success {
                    c.add(|c| &c.successes, 1, Ordering::Release);
                } else {
                    c.add(|c| &c.failures, 1, Ordering::Release);
                }
                self.core.maybe_adjust(now);
            }
            // Release, as a completion's count: `stats` reads it (Acquire)
            // before `admitted`, so it sees this permit's admission too.
            End::Dropped => c.add(|c| &c.dropped, 1, Ordering::Release),
        }
    }
}

/// The calling thread at an admission on one of `lanes`: its lane, its
/// number, and the spare handle it keeps if that is for its lane.
#[derive(Debug)]
struct Caller<'a> {
    lane: &'a Arc<Lane>,
    me: Option<NonZeroU64>,
    spare: Option<Arc<Lane>>,
}

impl<'a> Caller<'a> {
    /// The calling thread, with one thread-local access.
    #[inline(always)]
    fn enter(lanes: &'a [Arc<Lane>]) -> Self {
        let n = lanes.len();
        #[cfg(not(adaptx_loom))]
        {
            // Two words out of the thread-local, so they stay in registers:
            // a `Caller` built in there went through the stack, and its
            // copy stalled on store forwarding (~5 ns an admission).
            let entered = THREAD.try_with(|t| {
                let me = t.number.get();
                let lane = &lanes[lane_index(Some(me), n)];
                (me, t.spare.take_if(|h| Arc::ptr_eq(h, lane)))
            });
            let (me, spare) = match entered {
                Ok((me, spare)) => (Some(me), spare),
                Err(_) => (None, None),
            };
            Caller {
                lane: &lanes[lane_index(me, n)],
                me,
                spare,
            }
        }
        #[cfg(adaptx_loom)]
        {
            let me = thread_number();
            Caller {
                lane: &lanes[lane_index(me, n)],
                me,
                spare: None,
            }
        }
    }

    /// The handle for a new permit: the spare one, or a new reference.
    #[inline(always)]
    fn handle(self) -> Arc<Lane> {
        self.spare.unwrap_or_else(|| Arc::clone(self.lane))
    }

    /// An admission refused: the `spare` handle it took goes back to its
    /// slot.
    #[cold]
    fn refused(spare: Option<Arc<Lane>>) {
        #[cfg(not(adaptx_loom))]
        if let Some(handle) = spare {
            // Dropped after the borrow ends (or with the closure, if the
            // thread is exiting).
            drop(THREAD.try_with(|t| t.spare.put(handle)));
        }
        #[cfg(adaptx_loom)]
        drop(spare);
    }
}

/// What a thread keeps for the rate engines (see the module docs): its
/// number, which chooses its lane and may own the lane's counters, and its
/// spare lane handle. The number is given back first when the thread exits.
#[cfg(not(adaptx_loom))]
#[derive(Debug)]
struct ThreadState {
    number: ThreadNumber,
    spare: SpareSlot<Lane>,
}

/// The rate engines' thread numbers.
#[cfg(not(adaptx_loom))]
static NUMBERS: NumberPool = NumberPool::new();

#[cfg(not(adaptx_loom))]
std::thread_local! {
    static THREAD: ThreadState = ThreadState {
        number: ThreadNumber::take(&NUMBERS),
        spare: SpareSlot::new(),
    };
}

/// The lanes of one engine. A `std` `Arc` even under loom: the array is
/// only read, and loom's `Arc` cannot hold a slice.
type Lanes = std::sync::Arc<LaneSet>;

/// The lanes of one core, shared by a limiter's clones. Dropped with the
/// last clone: from then on no finished permit is kept in a spare slot, so
/// an engine whose limiter is gone is freed when its last permit ends.
#[derive(Debug)]
struct LaneSet(Box<[Arc<Lane>]>);

impl std::ops::Deref for LaneSet {
    type Target = [Arc<Lane>];

    fn deref(&self) -> &[Arc<Lane>] {
        &self.0
    }
}

impl Drop for LaneSet {
    fn drop(&mut self) {
        let Some(first) = self.0.first() else { return };
        first.core.hot.limiter_alive.store(false, Ordering::Release);
        // The dropping thread's own spare handle, if it is one of these
        // lanes', goes now (released after the borrow ends: it may be the
        // last handle, whose drop drops the core and a user's clock).
        #[cfg(not(adaptx_loom))]
        {
            let ours = THREAD.try_with(|t| t.spare.take_if(|h| Arc::ptr_eq(&h.core, &first.core)));
            drop(ours);
        }
    }
}

/// The handle a facade holds: one [`Lane`] per lane of one [`Core`];
/// dereferences to the core.
#[derive(Debug, Clone)]
pub(crate) struct Engine {
    lanes: Lanes,
}

impl Engine {
    pub(crate) fn new(core: Core) -> Self {
        let core = Arc::new(core);
        let lanes = (0..core.counters.len())
            .map(|index| {
                Arc::new(Lane {
                    core: Arc::clone(&core),
                    index,
                })
            })
            .collect();
        Self {
            lanes: std::sync::Arc::new(LaneSet(lanes)),
        }
    }

    /// Closes the interval if it is over at `now`, then takes one token
    /// from the limiter's own bucket, or reports the wait.
    #[inline(always)]
    pub(crate) fn acquire(&self, now: u64) -> Result<RatePermit, RateLimited> {
        let caller = Caller::enter(&self.lanes);
        let core = &caller.lane.core;
        core.maybe_adjust(now);
        let admitted = core.admit(caller, &core.bucket, now);
        // The tokens left (none after a rejection), for the metrics' gauge.
        let tokens = admitted.as_ref().map_or(0, RatePermit::remaining);
        core.observe.tokens(now, core.hot.interval_nanos, tokens);
        admitted
    }

    /// Takes one token from a keyed limiter's `bucket` at `now` (the caller
    /// holds its shard's lock), or reports the wait.
    #[inline]
    pub(crate) fn admit_keyed(
        &self,
        bucket: &mut TimedBucket,
        now: u64,
    ) -> Result<RatePermit, RateLimited> {
        let caller = Caller::enter(&self.lanes);
        let core = &caller.lane.core;
        let seg = core.hot.schedule.read();
        core.admit(caller, bucket.touch(&seg, now), now)
    }
}

impl std::ops::Deref for Engine {
    type Target = Core;

    #[inline]
    fn deref(&self) -> &Core {
        &self.lanes[0].core
    }
}

/// The cumulative counters as of the previous close.
#[derive(Debug, Default)]
struct Mark {
    successes: u64,
    failures: u64,
    latency_sum: u64,
}

/// What only the closer and the rate changers touch, under one lock that no
/// admission takes.
#[derive(Debug)]
struct Control {
    law: RateLaw,
    /// What the law remembers between intervals.
    state: RateLawState,
    mark: Mark,
    /// The segment last published: the writers' own copy, so a change
    /// reads no shared word before it writes.
    segment: Segment,
    /// The schedule's version of `segment`.
    version: u64,
}

/// What every call reads and only a change writes.
#[derive(Debug)]
struct Hot {
    clock: AnyClock,
    schedule: Schedule,
    interval_start: AtomicU64,
    interval_nanos: u64,
    /// Enforce, shadow or bypass (see [`Mode`]).
    mode: ModeCell,
    /// Until the limiter's last clone is dropped (its permits may outlive
    /// it): a finished permit's handle goes to a spare slot only while it
    /// is alive.
    limiter_alive: AtomicBool,
}

/// The shared engine behind [`RateLimiter`](super::RateLimiter) and
/// [`KeyedRateLimiter`](super::KeyedRateLimiter).
#[derive(Debug)]
pub(crate) struct Core {
    hot: Padded<Hot>,
    /// The limiter's own bucket (a keyed limiter does not use it).
    bucket: Padded<Bucket>,
    /// Counters, one pair of sets per lane; their sums are the limiter's.
    counters: Box<[LaneCounters]>,
    moves: Padded<Moves>,
    /// The bucket capacity in tokens, or `None` for one second of the rate.
    burst: Option<u64>,
    control: Mutex<Control>,
    /// Metrics (empty without the feature).
    observe: RateObserver,
}

impl Core {
    pub(crate) fn new(
        clock: AnyClock,
        initial_rate: u64,
        interval_nanos: u64,
        law: RateLaw,
        burst: Option<u64>,
        name: &str,
    ) -> Self {
        let now = clock.now_nanos();
        let first = Segment {
            start: now,
            base: 0,
            rate: initial_rate,
            cap: capacity(burst, initial_rate),
        };
        Self {
            hot: Padded(Hot {
                clock,
                schedule: Schedule::new(first),
                interval_start: AtomicU64::new(now),
                interval_nanos,
                mode: ModeCell::default(),
                limiter_alive: AtomicBool::new(true),
            }),
            bucket: Padded(Bucket::full(first.level(now), first.cap)),
            counters: (0..lane_count()).map(|_| LaneCounters::default()).collect(),
            moves: Padded(Moves::default()),
            burst,
            control: Mutex::new(Control {
                law,
                state: law.initial_state(),
                mark: Mark::default(),
                segment: first,
                version: 0,
            }),
            observe: RateObserver::new(name, initial_rate, law.min_rate(), law.max_rate()),
        }
    }

    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.hot.clock.now_nanos()
    }

    /// The current rate, requests per second.
    #[inline]
    pub(crate) fn rate(&self) -> u64 {
        self.hot.schedule.read().rate
    }

    /// A keyed limiter's bucket for a key taking a slot at `now`, with its
    /// last use at `now`: full, or holding one token.
    pub(crate) fn key_bucket(&self, now: u64, full: bool) -> TimedBucket {
        let seg = self.hot.schedule.read();
        let level = seg.level(now);
        let bucket = if full {
            Bucket::full(level, seg.cap)
        } else {
            Bucket::full(level, ONE.min(seg.cap))
        };
        TimedBucket::new(bucket, now)
    }

    /// Takes one token from `bucket` at `now` for `caller`, or reports the
    /// wait.
    #[inline(always)]
    fn admit(
        &self,
        caller: Caller<'_>,
        bucket: &Bucket,
        mut now: u64,
    ) -> Result<RatePermit, RateLimited> {
        let mut seg = self.hot.schedule.read();
        let mut fresh = false;
        let need = loop {
            match bucket.take(seg.level(now), seg.cap) {
                Take::Taken(left) => {
                    let remaining = left / ONE;
                    if remaining == 0 {
                        self.mark_binding();
                    }
                    self.counters[caller.lane.index].writer(caller.me).add(
                        |c| &c.admitted,
                        1,
                        Ordering::Relaxed,
                    );
                    return Ok(RatePermit::new(caller.handle(), now, seg.rate, remaining));
                }
                Take::Short(need) => break need,
                Take::Ahead if !fresh => {
                    // The reading may predate the admission that moved the
                    // bucket: read the clock again, after it.
                    (now, seg, fresh) = (self.now().max(now), self.hot.schedule.read(), true);
                }
                Take::Ahead => {
                    bucket.repair(seg.level(now));
                    break ONE;
                }
            }
        };
        match self.short(caller.lane.index, caller.me, &seg, now, need) {
            None => Ok(RatePermit::new(caller.handle(), now, seg.rate, 0)),
            Some(limited) => {
                Caller::refused(caller.spare);
                Err(limited)
            }
        }
    }

    /// The bucket holds `need` units less than a token: the rejection
    /// (`Some`), counted on lane `lane` as the thread numbered `me`, or in
    /// shadow and bypass mode `None`, an admission counted as the rejection
    /// enforce mode would have made.
    #[cold]
    fn short(
        &self,
        lane: usize,
        me: Option<NonZeroU64>,
        seg: &Segment,
        now: u64,
        need: u64,
    ) -> Option<RateLimited> {
        self.mark_binding();
        let counters = self.counters[lane].writer(me);
        if self.hot.mode.get().admits_over_limit() {
            counters.add(|c| &c.would_reject, 1, Ordering::Relaxed);
            counters.add(|c| &c.admitted, 1, Ordering::Relaxed);
            return None;
        }
        counters.add(|c| &c.rejected, 1, Ordering::Relaxed);
        Some(RateLimited::new(
            Duration::from_nanos(seg.wait(now, need)),
            seg.rate,
        ))
    }

    /// Records that the limit held a request back (or nearly did). The load
    /// first keeps a saturated limiter from writing the shared line on
    /// every call. A closer's swap landing between the load (which saw the
    /// flag set) and this call's return counts this call in the interval it
    /// closed, which was binding already: like a completion racing a close,
    /// it lands in one neighbour.
    #[inline]
    fn mark_binding(&self) {
        let binding = &self.moves.binding;
        if !binding.load(Ordering::Relaxed) {
            binding.store(true, Ordering::Relaxed);
        }
    }

    /// Closes the interval if it is over at `now`.
    #[inline]
    pub(crate) fn maybe_adjust(&self, now: u64) {
        let start = self.hot.interval_start.load(Ordering::Acquire);
        if now.saturating_sub(start) >= self.hot.interval_nanos {
            self.close(start, now);
        }
    }

    /// Runs at most once per interval: the caller that wins the CAS on the
    /// interval start closes it.
    #[cold]
    fn close(&self, start: u64, now: u64) {
        if self
            .hot
            .interval_start
            .compare_exchange(start, now, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        // A limiter idle for so long that its bucket's word may have
        // wrapped: its last admission read a clock before the interval's
        // end (a later one would have closed the interval), so it is full.
        let seg = self.hot.schedule.read();
        let last_use = start.saturating_add(self.hot.interval_nanos);
        if seg.wraps_over(now.saturating_sub(last_use)) {
            let b = &self.bucket;
            b.fill(b.word(), seg.level(now), seg.cap);
        }
        // The new segment starts when the lock is taken, not when this
        // caller read the clock: admissions between the two ran on the old
        // segment (read before the lock: no user code under it).
        let fresh = self.now().max(now);
        let mut ctl = lock(&self.control);
        let (mut successes, mut failures, mut latency_sum) = (0u64, 0u64, 0u64);
        for c in self.counters.iter() {
            // Per lane: the counts before the latency sum (see the docs).
            successes = successes.wrapping_add(c.sum(|c| &c.successes, Ordering::Acquire));
            failures = failures.wrapping_add(c.sum(|c| &c.failures, Ordering::Acquire));
            latency_sum = latency_sum.wrapping_add(c.sum(|c| &c.latency_sum, Ordering::Relaxed));
        }
        let binding = self.moves.binding.swap(false, Ordering::Relaxed);
        let mark = &ctl.mark;
        let failed = failures.wrapping_sub(mark.failures);
        let interval = IntervalSummary {
            completed: successes.wrapping_sub(mark.successes).wrapping_add(failed),
            failures: failed,
            latency_sum_nanos: latency_sum.wrapping_sub(mark.latency_sum),
            binding,
            elapsed_nanos: now.saturating_sub(start),
        };
        ctl.mark = Mark {
            successes,
            failures,
            latency_sum,
        };
        // Bypass freezes the rate; the interval's evidence is consumed all
        // the same.
        if self.hot.mode.get().adapts() {
            let rate = ctl.segment.rate;
            let Control { law, state, .. } = &mut *ctl;
            let new = law.step(state, rate, &interval);
            self.change_rate(&mut ctl, fresh, new);
        }
        // `stats` takes the lock again.
        drop(ctl);
        self.observe.interval(|| self.stats());
    }

    /// Moves the rate to `new` at `now` (the caller holds the control lock)
    /// and counts the move.
    fn change_rate(&self, ctl: &mut Control, now: u64, new: u64) {
        let seg = ctl.segment;
        if new == seg.rate {
            return;
        }
        let next = seg.next(now, new, capacity(self.burst, new));
        if next.cap > seg.cap {
            self.bucket.clip(next.base, seg.cap);
        }
        ctl.version = self.hot.schedule.publish(ctl.version, next);
        ctl.segment = next;
        let c = &self.moves;
        let counter = if new > seg.rate {
            &c.increases
        } else {
            &c.decreases
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Sets the rate now; see [`RateLimiter::set_rate`](super::RateLimiter::set_rate).
    pub(crate) fn set_rate(&self, rate: u64) -> Result<(), ConfigError> {
        // The clock (a user's, maybe) is read before the lock.
        let now = self.now();
        let mut ctl = lock(&self.control);
        let rate = ctl.law.bounded_rate(rate)?;
        self.change_rate(&mut ctl, now, rate);
        Ok(())
    }

    /// Sets the law's bounds; see
    /// [`RateLimiter::set_bounds`](super::RateLimiter::set_bounds).
    pub(crate) fn set_bounds(&self, min_rate: u64, max_rate: u64) -> Result<(), ConfigError> {
        let now = self.now();
        let mut ctl = lock(&self.control);
        let law = ctl.law.with_bounds(min_rate, max_rate)?;
        self.install(&mut ctl, law, now);
        Ok(())
    }

    /// Swaps the law; see [`RateLimiter::set_law`](super::RateLimiter::set_law).
    pub(crate) fn set_law(&self, law: RateLaw) {
        let now = self.now();
        let mut ctl = lock(&self.control);
        self.install(&mut ctl, law, now);
    }

    /// Installs `law` and brings the rate into its bounds. A law of another
    /// kind starts from its initial state; new bounds keep what it learned.
    fn install(&self, ctl: &mut Control, law: RateLaw, now: u64) {
        if std::mem::discriminant(&ctl.law) != std::mem::discriminant(&law) {
            ctl.state = law.initial_state();
        }
        ctl.law = law;
        let rate = ctl.segment.rate.clamp(law.min_rate(), law.max_rate());
        self.change_rate(ctl, now, rate);
    }

    /// The law in force.
    pub(crate) fn law(&self) -> RateLaw {
        lock(&self.control).law
    }

    /// The admission mode.
    pub(crate) fn mode(&self) -> Mode {
        self.hot.mode.get()
    }

    /// Switches the admission mode; returns the one it replaces.
    pub(crate) fn set_mode(&self, mode: Mode) -> Mode {
        self.hot.mode.set(mode)
    }

    /// A snapshot of the counters (each read separately).
    pub(crate) fn stats(&self) -> RateStats {
        let law = self.law();
        let sum = |field: fn(&Counters) -> &AtomicU64| {
            self.counters.iter().fold(0u64, |sum, c| {
                sum.wrapping_add(c.sum(field, Ordering::Acquire))
            })
        };
        let (successes, failures, dropped) = (
            sum(|c| &c.successes),
            sum(|c| &c.failures),
            sum(|c| &c.dropped),
        );
        // Admitted last, so the in-flight difference is never negative.
        let admitted = sum(|c| &c.admitted);
        let m = &self.moves;
        let load = |a: &AtomicU64| a.load(Ordering::Acquire);
        let completed = successes.wrapping_add(failures);
        let in_flight = admitted.saturating_sub(completed.wrapping_add(dropped));
        RateStats {
            rate: self.rate(),
            min_rate: law.min_rate(),
            max_rate: law.max_rate(),
            admitted,
            in_flight,
            completed,
            successes,
            failures,
            dropped,
            rejected: sum(|c| &c.rejected),
            increases: load(&m.increases),
            decreases: load(&m.decreases),
            mode: self.hot.mode.get(),
            would_reject: sum(|c| &c.would_reject),
        }
    }
}

/// The bucket capacity in units at `rate`: the configured burst, or one
/// second of the rate.
fn capacity(burst: Option<u64>, rate: u64) -> u64 {
    burst.unwrap_or(rate) * ONE
}
