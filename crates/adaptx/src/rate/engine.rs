//! The shared part of a rate limiter: the adaptive rate, the counters, and
//! the interval closer. Buckets live with the facades; this engine admits
//! into whichever bucket it is handed.
//!
//! # Implementation details
//!
//! The rate is one atomic word. Only the interval closer writes it, and
//! every admission reads it (Acquire) before locking a bucket. A bucket is
//! refilled at the rate current when it is next touched: after a rate change
//! at `T`, a bucket last touched at `t₀ < T` earns `(T − t₀) · (new − old)`
//! more or fewer tokens than an exact integral would give, never more than
//! a full bucket, and for a busy bucket one inter-arrival gap's worth.
//!
//! Counters are cumulative atomics that are never reset. A completion adds
//! its latency (Relaxed), then its count (Release); the closer reads the
//! counts (Acquire), then the latency sum, so it never sees a count without
//! its latency. The latency sum wraps; differences between two closes are
//! taken with `wrapping_sub`, exact as long as one interval's latencies sum
//! to less than 2⁶⁴ ns (584 years).
//!
//! The interval start is an atomic timestamp. The call (admission or
//! completion) that finds the interval over claims it with one CAS that
//! moves the start to `now`, so at most one caller closes each interval;
//! it takes the `mark` mutex (uncontended: one closer per interval) and
//! computes the interval's counts as differences from the previous close,
//! so every completion lands in exactly one interval. A completion racing
//! with a close may land in either neighbour; the law tolerates that. The
//! `binding` flag is swapped to `false` by the closer, so an interval never
//! inherits an earlier interval's pressure, and an interval without
//! completions changes nothing but still consumes its evidence.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use super::bucket::Bucket;
use super::law::{IntervalSummary, RateLaw, RateLawState};
use super::{RateLimited, RatePermit, RateStats, lock};
use crate::clock::AnyClock;
use crate::error::ConfigError;
use crate::mode::{Mode, ModeCell};
use crate::observe::RateObserver;

/// Cumulative counters.
#[derive(Debug, Default)]
struct Counters {
    admitted: AtomicU64,
    successes: AtomicU64,
    failures: AtomicU64,
    latency_sum: AtomicU64,
    rejected: AtomicU64,
    dropped: AtomicU64,
    increases: AtomicU64,
    decreases: AtomicU64,
    /// Admissions shadow or bypass mode let through with an empty bucket.
    would_reject: AtomicU64,
}

/// The cumulative counters as of the previous close, the law in force and
/// what it remembers: what the closer and the run-time changes touch, under
/// one lock that no admission takes.
#[derive(Debug)]
struct Mark {
    successes: u64,
    failures: u64,
    latency_sum: u64,
    law: RateLaw,
    state: RateLawState,
}

/// The shared engine behind [`RateLimiter`](super::RateLimiter) and
/// [`KeyedRateLimiter`](super::KeyedRateLimiter).
#[derive(Debug)]
pub(crate) struct Core {
    clock: AnyClock,
    rate: AtomicU64,
    interval_start: AtomicU64,
    interval_nanos: u64,
    burst: Option<u64>,
    binding: AtomicBool,
    counters: Counters,
    mark: Mutex<Mark>,
    /// Enforce, shadow or bypass (see [`Mode`]).
    mode: ModeCell,
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
        Self {
            clock,
            rate: AtomicU64::new(initial_rate),
            interval_start: AtomicU64::new(now),
            interval_nanos,
            burst,
            binding: AtomicBool::new(false),
            counters: Counters::default(),
            mark: Mutex::new(Mark {
                successes: 0,
                failures: 0,
                latency_sum: 0,
                law,
                state: law.initial_state(),
            }),
            mode: ModeCell::default(),
            observe: RateObserver::new(name, initial_rate, law.min_rate(), law.max_rate()),
        }
    }

    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.clock.now_nanos()
    }

    #[inline]
    pub(crate) fn rate(&self) -> u64 {
        self.rate.load(Ordering::Acquire)
    }

    /// The bucket capacity at `rate`: the configured burst, or one second of
    /// the rate.
    #[inline]
    pub(crate) fn capacity(&self, rate: u64) -> u64 {
        self.burst.unwrap_or(rate)
    }

    /// A full bucket at the current rate.
    pub(crate) fn new_bucket(&self, now: u64) -> Bucket {
        Bucket::full(now, self.capacity(self.rate()))
    }

    /// Takes one token from `bucket` at `now`, or reports the wait.
    ///
    /// `rate` must be the value read from [`rate`](Core::rate) after any
    /// adjustment this call made.
    pub(crate) fn admit(
        self: &Arc<Self>,
        bucket: &mut Bucket,
        now: u64,
        rate: u64,
    ) -> Result<RatePermit, RateLimited> {
        match bucket.take(now, rate, self.capacity(rate)) {
            Ok(remaining) => {
                if remaining == 0 {
                    self.mark_binding();
                }
                self.counters.admitted.fetch_add(1, Ordering::Relaxed);
                Ok(RatePermit::new(Arc::clone(self), now, rate, remaining))
            }
            Err(wait) => {
                self.mark_binding();
                if self.mode.get().admits_over_limit() {
                    // Shadow and bypass: admitted with the bucket empty, and
                    // counted as the rejection enforce mode would have made.
                    self.counters.would_reject.fetch_add(1, Ordering::Relaxed);
                    self.counters.admitted.fetch_add(1, Ordering::Relaxed);
                    return Ok(RatePermit::new(Arc::clone(self), now, rate, 0));
                }
                self.counters.rejected.fetch_add(1, Ordering::Relaxed);
                Err(RateLimited::new(Duration::from_nanos(wait), rate))
            }
        }
    }

    /// Records that the limit held a request back (or nearly did). The load
    /// first keeps a saturated limiter from writing the shared line on
    /// every call.
    #[inline]
    fn mark_binding(&self) {
        if !self.binding.load(Ordering::Relaxed) {
            self.binding.store(true, Ordering::Relaxed);
        }
    }

    /// Records a completion with an outcome, then closes the interval if it
    /// is over.
    pub(crate) fn complete(&self, success: bool, latency_nanos: u64, now: u64) {
        let c = &self.counters;
        c.latency_sum.fetch_add(latency_nanos, Ordering::Relaxed);
        let count = if success { &c.successes } else { &c.failures };
        count.fetch_add(1, Ordering::Release);
        self.maybe_adjust(now);
    }

    /// Records a permit dropped without an outcome: no feedback.
    pub(crate) fn drop_permit(&self) {
        self.counters.dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// Closes the interval if it is over at `now`.
    #[inline]
    pub(crate) fn maybe_adjust(&self, now: u64) {
        let start = self.interval_start.load(Ordering::Acquire);
        if now.saturating_sub(start) >= self.interval_nanos {
            self.close(start, now);
        }
    }

    /// Runs at most once per interval: the caller that wins the CAS on the
    /// interval start closes it.
    #[cold]
    fn close(&self, start: u64, now: u64) {
        if self
            .interval_start
            .compare_exchange(start, now, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        let mut mark = lock(&self.mark);
        let c = &self.counters;
        let successes = c.successes.load(Ordering::Acquire);
        let failures = c.failures.load(Ordering::Acquire);
        let latency_sum = c.latency_sum.load(Ordering::Relaxed);
        let binding = self.binding.swap(false, Ordering::Relaxed);
        let failed = failures.wrapping_sub(mark.failures);
        let interval = IntervalSummary {
            completed: successes.wrapping_sub(mark.successes).wrapping_add(failed),
            failures: failed,
            latency_sum_nanos: latency_sum.wrapping_sub(mark.latency_sum),
            binding,
            elapsed_nanos: now.saturating_sub(start),
        };
        (mark.successes, mark.failures, mark.latency_sum) = (successes, failures, latency_sum);
        let old = self.rate.load(Ordering::Relaxed);
        // Bypass freezes the rate; the interval's evidence is consumed all
        // the same.
        let new = if self.mode.get().adapts() {
            let Mark { law, state, .. } = &mut *mark;
            law.step(state, old, &interval)
        } else {
            old
        };
        self.change_rate(old, new);
        // `stats` takes the lock again.
        drop(mark);
        self.observe.interval(|| self.stats());
    }

    /// Stores rate `new` (the caller holds the `mark` lock, so `old` is
    /// still the rate) and counts the move.
    fn change_rate(&self, old: u64, new: u64) {
        if new == old {
            return;
        }
        self.rate.store(new, Ordering::Release);
        let c = &self.counters;
        let counter = if new > old {
            &c.increases
        } else {
            &c.decreases
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Sets the rate now; see [`RateLimiter::set_rate`](super::RateLimiter::set_rate).
    pub(crate) fn set_rate(&self, rate: u64) -> Result<(), ConfigError> {
        let mark = lock(&self.mark);
        let rate = mark.law.bounded_rate(rate)?;
        self.change_rate(self.rate.load(Ordering::Relaxed), rate);
        Ok(())
    }

    /// Sets the law's bounds; see
    /// [`RateLimiter::set_bounds`](super::RateLimiter::set_bounds).
    pub(crate) fn set_bounds(&self, min_rate: u64, max_rate: u64) -> Result<(), ConfigError> {
        let mut mark = lock(&self.mark);
        let law = mark.law.with_bounds(min_rate, max_rate)?;
        self.install(&mut mark, law);
        Ok(())
    }

    /// Swaps the law; see [`RateLimiter::set_law`](super::RateLimiter::set_law).
    pub(crate) fn set_law(&self, law: RateLaw) {
        let mut mark = lock(&self.mark);
        self.install(&mut mark, law);
    }

    /// Installs `law` and brings the rate into its bounds. A law of another
    /// kind starts from its initial state; new bounds keep what it learned.
    fn install(&self, mark: &mut Mark, law: RateLaw) {
        if std::mem::discriminant(&mark.law) != std::mem::discriminant(&law) {
            mark.state = law.initial_state();
        }
        mark.law = law;
        let old = self.rate.load(Ordering::Relaxed);
        self.change_rate(old, old.clamp(law.min_rate(), law.max_rate()));
    }

    /// The law in force.
    pub(crate) fn law(&self) -> RateLaw {
        lock(&self.mark).law
    }

    /// The admission mode.
    pub(crate) fn mode(&self) -> Mode {
        self.mode.get()
    }

    /// Switches the admission mode; returns the one it replaces.
    pub(crate) fn set_mode(&self, mode: Mode) -> Mode {
        self.mode.set(mode)
    }

    /// Reports the tokens an admission attempt at `now` left in its bucket
    /// (none after a rejection).
    #[inline]
    pub(crate) fn observe_tokens(&self, now: u64, admitted: &Result<RatePermit, RateLimited>) {
        self.observe.tokens(
            now,
            self.interval_nanos,
            admitted.as_ref().map_or(0, RatePermit::remaining),
        );
    }

    /// A snapshot of the counters (each read separately).
    pub(crate) fn stats(&self) -> RateStats {
        let law = self.law();
        let c = &self.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Acquire);
        let (successes, failures, dropped) =
            (load(&c.successes), load(&c.failures), load(&c.dropped));
        // Admitted last, so the in-flight difference is never negative.
        let admitted = load(&c.admitted);
        let completed = successes.saturating_add(failures);
        RateStats {
            rate: self.rate(),
            min_rate: law.min_rate(),
            max_rate: law.max_rate(),
            admitted,
            in_flight: admitted.saturating_sub(completed.saturating_add(dropped)),
            completed,
            successes,
            failures,
            dropped,
            rejected: load(&c.rejected),
            increases: load(&c.increases),
            decreases: load(&c.decreases),
            mode: self.mode.get(),
            would_reject: load(&c.would_reject),
        }
    }
}
