//! The [`Limiter`] facade.

mod acquire;
mod builder;
mod execute;
mod permit;
mod runtime;
mod spare;

pub use acquire::{Acquire, Drained};
pub use builder::{Algorithm, Builder, LimitChangeHook};
pub use execute::Controller;
pub use permit::{Outcome, OwnedPermit, Permit};

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use crate::clock::AnyClock;
use crate::control::{Control, Decision};
use crate::error::{AcquireError, AcquireTimeoutError, DrainTimeoutError, TryAcquireError};
use crate::histogram::Counts;
use crate::mode::ModeCell;
use crate::observe::{Closing, LimitChange, Observer};
use crate::pool::{Admission, Class, Pool, TryFail, UnknownPartition};
use crate::stats::Stats;
use crate::sync::{Arc, AtomicU64, Mutex, Ordering, Padded, lock};
use crate::window::{Event, Sample, Window};

use permit::Holder;
use runtime::{LawNames, Tuned, Tuning};

/// An adaptive concurrency limiter.
///
/// A permit pool whose size a control law moves once per sample window from
/// the latency and outcome of completed operations. `Limiter` is a cheap
/// handle: clones share one limiter. It is `Send + Sync`.
///
/// Admission is fair: [`acquire`](Limiter::acquire) waits in line (FIFO by
/// default; bounded, LIFO, adaptive LIFO and priorities with
/// [`Builder::queue`](crate::Builder::queue)),
/// [`try_acquire`](Limiter::try_acquire) never overtakes a waiter, and
/// [`allow`](Limiter::allow) only looks. A [`Permit`] records the outcome of
/// the admitted operation and releases its slot; [`execute`](Limiter::execute)
/// does both around an async closure and catches its panics.
///
/// # Memory
///
/// A limiter's sample windows hold four latency histograms of 30 KiB (two
/// stripes of threads, two windows each: the one in progress and the last
/// closed). The first thread to record a success on a stripe owns it and
/// writes its histogram without a locked instruction; the first success of
/// another thread on that stripe allocates a second histogram for the
/// others (the one allocation of the hot path after construction), so a
/// limiter completed on by more threads than stripes holds up to 240 KiB.
///
/// # Memory after a drop
///
/// A thread that ends an [`OwnedPermit`] (the `*_owned` methods' permits,
/// and the tower layers') keeps that permit's reference to the limiter, so
/// that its next owned admission reuses it instead of counting a reference
/// up and down. A limiter dropped while permits are in flight is freed with
/// its last permit, and the thread that drops the last handle gives up its
/// own reference at once; but a reference another thread kept from before
/// the drop holds the limiter's state (its law, its hook, its clock) until
/// that thread ends an owned permit of another limiter or exits — at most
/// one limiter per thread. With a [`CoarseClock`](crate::CoarseClock), that
/// clock's thread runs until then too.
///
/// # Examples
///
/// ```
/// # async fn call_backend() -> Result<u32, std::io::Error> { Ok(1) }
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use adaptx::{Algorithm, Limiter};
///
/// let limiter = Limiter::builder()
///     .algorithm(Algorithm::Gradient)
///     .initial_limit(10)
///     .max_limit(200)
///     .build()?;
///
/// // Manual admission: the permit measures latency from admission.
/// let permit = limiter.acquire().await?;
/// match call_backend().await {
///     Ok(_) => permit.success(),
///     Err(_) => permit.failure(),
/// }
///
/// // Or let the limiter run the operation.
/// let value = limiter.execute(async |_ctl| call_backend().await).await?;
/// assert_eq!(value, 1);
/// assert_eq!(limiter.in_flight(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct Limiter {
    inner: Arc<Inner>,
}

impl Clone for Limiter {
    fn clone(&self) -> Self {
        self.inner.handles.fetch_add(1, Ordering::Relaxed);
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl Drop for Limiter {
    fn drop(&mut self) {
        // The count only tells a permit that ends whether to keep a spare
        // reference; the `Arc` keeps the state alive whatever it reads.
        if self.inner.handles.fetch_sub(1, Ordering::Release) == 1 {
            // The last handle: this thread's spare reference goes now.
            spare::forget(&self.inner);
        }
    }
}

impl fmt::Debug for Limiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (limit, in_flight, closed) = self.inner.hot.pool.snapshot();
        f.debug_struct("Limiter")
            .field("algorithm", &self.inner.names.current())
            .field("limit", &limit)
            .field("in_flight", &in_flight)
            .field("closed", &closed)
            .finish_non_exhaustive()
    }
}

/// Counters only the window closer writes.
#[derive(Debug, Default)]
struct Counters {
    increases: AtomicU64,
    decreases: AtomicU64,
}

impl Counters {
    fn clear(&self) {
        self.increases.store(0, Ordering::Relaxed);
        self.decreases.store(0, Ordering::Relaxed);
    }
}

/// The fields every operation touches, on one cache line: the permit state
/// word first, then the window's shared fields.
#[derive(Debug)]
#[repr(C)]
struct Hot {
    pool: Pool,
    window: Window,
}

pub(crate) struct Inner {
    hot: Padded<Hot>,
    clock: AnyClock,
    /// The settings completions read (the window's length, the adaptive
    /// window's samples, the early close on a fresh failure), changeable at
    /// run time.
    tuned: Tuned,
    /// The law's name, read without a lock.
    names: LawNames,
    execute_op: std::sync::Arc<str>,
    try_execute_op: std::sync::Arc<str>,
    control: Mutex<Control>,
    hook: Option<LimitChangeHook>,
    counters: Counters,
    /// Queueing, partitions and the reject delay.
    admission: AdmissionConfig,
    /// Enforce, shadow or bypass.
    mode: ModeCell,
    /// The name of [`Builder::name`].
    name: Box<str>,
    /// Metrics and log events (empty without the features).
    observe: Observer,
    /// The run-time options as last set, for [`Limiter::reconfigure`];
    /// taken before `control` when both are.
    tuning: Mutex<Tuning>,
    /// [`Limiter`] handles alive: at 0 a permit that ends keeps no spare
    /// reference ([`spare`]).
    handles: AtomicU64,
}

/// The options of [`Builder::queue`], [`Builder::partitions`] and
/// `Builder::reject_delay` that the facade needs after build.
#[derive(Debug, Default)]
pub(crate) struct AdmissionConfig {
    /// The wait queue's per-waiter timeout, for the blocking forms.
    pub(crate) queue_timeout: Option<Duration>,
    /// How long a refused `acquire` waits before it returns.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) reject_delay: Option<Duration>,
    /// Refusals held back by the reject delay now (not an engine word:
    /// std's atomic even under loom).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) delayed: std::sync::atomic::AtomicU64,
}

/// How a permit ends.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ending {
    /// Outcome with a latency sample in nanoseconds, ending at `now`, of an
    /// operation admitted in decrease epoch `epoch`.
    Sampled {
        outcome: Outcome,
        nanos: u64,
        now: u64,
        epoch: u64,
    },
    /// Outcome without a latency sample.
    Skipped(Outcome),
}

impl Inner {
    /// Whether a [`Limiter`] handle is alive (see [`spare`]; under loom
    /// there is no spare slot to ask for).
    #[cfg(not(adaptx_loom))]
    #[inline]
    pub(crate) fn has_handles(&self) -> bool {
        self.handles.load(Ordering::Acquire) > 0
    }

    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.clock.now_nanos()
    }

    /// The decrease epoch, for tagging an admission.
    #[inline]
    pub(crate) fn epoch(&self) -> u64 {
        self.hot.window.epoch()
    }

    /// Admission for `try_acquire`: the pool admits (above the limit too,
    /// in shadow and bypass mode), or the refusal counts as rejected.
    #[inline(always)]
    fn try_admit(&self, slot: u8) -> Result<Admission, TryFail> {
        let r = self.hot.pool.try_acquire_as(slot);
        if r.is_err() {
            self.reject();
        }
        r
    }

    /// Takes one of the reject delay's slots: the delay, or `None` when
    /// there is no delay or [`crate::MAX_DELAYED_REJECTIONS`] are taken.
    #[cfg(feature = "tokio")]
    pub(crate) fn reject_delay_slot(&self) -> Option<Duration> {
        let delay = self.admission.reject_delay?;
        let d = &self.admission.delayed;
        let mut n = d.load(Ordering::Relaxed);
        loop {
            if n >= crate::MAX_DELAYED_REJECTIONS {
                return None;
            }
            match d.compare_exchange_weak(n, n + 1, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return Some(delay),
                Err(actual) => n = actual,
            }
        }
    }

    /// Gives back a reject delay slot.
    #[cfg(feature = "tokio")]
    pub(crate) fn reject_delay_done(&self) {
        self.admission.delayed.fetch_sub(1, Ordering::AcqRel);
    }

    #[inline]
    pub(crate) fn pool(&self) -> &Pool {
        &self.hot.pool
    }

    pub(crate) fn reject(&self) {
        self.hot.window.count(Event::Rejected);
        self.observe.rejected(&self.hot.pool);
    }

    /// A permit handed to a waiter that gave up before seeing it: admitted
    /// and released without an outcome.
    pub(crate) fn drop_unseen(&self) {
        self.hot.window.count(Event::Dropped);
        self.observe.dropped();
    }

    /// Records how an admitted operation ended, then releases its permit.
    /// The order matters: the window's peak in-flight counts the operation
    /// that is completing, as the reference does.
    #[inline]
    pub(crate) fn finish(&self, ending: Ending, slot: u8) {
        match ending {
            Ending::Sampled {
                outcome,
                nanos,
                now,
                epoch,
            } => {
                let w = &self.hot.window;
                let success = outcome.is_success();
                w.add(Sample {
                    success,
                    nanos,
                    in_flight: self.hot.pool.in_flight(),
                    epoch,
                });
                let start = w.start.load(Ordering::Acquire);
                let age = now.saturating_sub(start);
                // A fresh overload failure closes the window at once when the
                // law asks for it and the limit can still go down (at
                // `min_limit` no decrease moves the epoch, so every failure
                // would close a window); a stale one (admitted before the
                // epoch moved) never does, so it takes no lock. An adaptive window
                // closes once it is old enough and holds enough samples
                // (`early` is u64::MAX when that is off: one load on this
                // line and a comparison).
                // (`react_above` is `min_limit` when the law reacts and no
                // limit is forced, `usize::MAX` otherwise: one load.)
                let react = !success
                    && epoch == w.epoch()
                    && self.hot.pool.limit() > self.tuned.react_above();
                if react
                    || age >= self.tuned.window_nanos()
                    || (age >= w.early() && w.started() >= self.tuned.min_samples())
                {
                    self.close_window(start, now);
                }
            }
            Ending::Skipped(outcome) => self.hot.window.count(if outcome.is_success() {
                Event::SkippedOk
            } else {
                Event::SkippedFail
            }),
        }
        self.hot.pool.release_from(slot);
    }

    /// [`finish`](Inner::finish) of a dropped permit. Out of line, so that
    /// the permit's drop glue stays small enough to inline: a permit whose
    /// outcome was recorded then drops for free.
    #[inline(never)]
    pub(crate) fn finish_dropped(&self, slot: u8) {
        self.hot.window.count(Event::Dropped);
        self.observe.dropped();
        self.hot.pool.release_from(slot);
    }

    /// Runs at most once per window: the caller that wins the CAS on the
    /// window start closes it.
    #[cold]
    #[inline(never)]
    fn close_window(&self, start: u64, now: u64) {
        let w = &self.hot.window;
        if w.start
            .compare_exchange(start, now, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        let (decision, woken, note, min_limit) = {
            let mut control = lock(&self.control);
            // Closed limiters keep their statistics but stop adapting, and
            // so does a bypassed one.
            let adapt = !self.hot.pool.is_closed() && self.mode.get().adapts();
            let limit = self.hot.pool.limit();
            let cfg = control.cfg;
            let d = control.close(w, &cfg, limit, start, now, adapt);
            let woken = d.map(|Decision { old, new, .. }| {
                let c = if new > old {
                    &self.counters.increases
                } else {
                    &self.counters.decreases
                };
                c.fetch_add(1, Ordering::Relaxed);
                // Applied under the mutex so that limits are set in the order
                // the windows closed; the waiters it grants are woken below.
                self.hot.pool.set_limit_deferred(new).1
            });
            let note = self.observe.window_closed(Closing {
                window: w,
                control: &control,
                pool: &self.hot.pool,
                min_limit: cfg.min_limit,
                max_limit: cfg.max_limit,
                adapting: adapt,
            });
            (d, woken, note, cfg.min_limit)
        };
        // Never wake a task while holding a lock: a woken task may run at
        // once on this thread and call into the limiter.
        if let Some(woken) = woken {
            woken.wake_all();
        }
        let change =
            decision.map(|d| LimitChange::new(d.old, d.new, self.names.current(), d.window));
        self.observe.after_close(change.as_ref(), note, min_limit);
        if let (Some(change), Some(hook)) = (&change, &self.hook) {
            // The hook must not panic; if it does, the panic stops here so a
            // completion never fails because of an observer.
            let _ = catch_unwind(AssertUnwindSafe(|| hook(change)));
        }
    }
}

impl Limiter {
    /// A builder with every option at its default.
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// A limiter with every option at its default (Ceiling, initial limit 10,
    /// bounds 1–1000, 1 s windows).
    pub fn new() -> Self {
        Builder::new().build().unwrap_or_else(|e| {
            unreachable!("the default configuration is valid: {e}");
        })
    }

    pub(crate) fn from_inner(inner: Inner) -> Self {
        Self {
            inner: Arc::new(inner),
        }
    }

    /// Takes a permit if one is free now.
    ///
    /// Never waits and never overtakes a queued [`acquire`](Limiter::acquire).
    /// The permit borrows the limiter; see
    /// [`try_acquire_owned`](Limiter::try_acquire_owned) for one that does not.
    ///
    /// # Errors
    ///
    /// [`TryAcquireError::NoCapacity`] when every permit is held (or queued
    /// waiters are ahead), [`TryAcquireError::Closed`] after
    /// [`close`](Limiter::close). Both count as rejected in [`Stats`].
    ///
    /// # Examples
    ///
    /// ```
    /// let limiter = adaptx::Limiter::builder().initial_limit(1).build().unwrap();
    /// let permit = limiter.try_acquire().unwrap();
    /// assert!(limiter.try_acquire().is_err());
    /// permit.success();
    /// assert!(limiter.try_acquire().is_ok());
    /// ```
    #[inline]
    pub fn try_acquire(&self) -> Result<Permit<'_>, TryAcquireError> {
        self.try_acquire_as(Class::default())
    }

    /// Like [`try_acquire`](Limiter::try_acquire), with a permit that owns a
    /// handle to the limiter (`Permit<'static>`), for moving into tasks.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Limiter::try_acquire).
    #[inline]
    pub fn try_acquire_owned(&self) -> Result<OwnedPermit, TryAcquireError> {
        self.try_acquire_owned_as(Class::default())
    }

    /// Waits for a permit, in the queue's order (FIFO by default; see
    /// [`QueuePolicy`](crate::QueuePolicy)).
    ///
    /// # Errors
    ///
    /// [`AcquireError`] if the limiter is closed when called or while
    /// waiting, or if the queue refuses the request (full, timed out, shed);
    /// with a reject delay, a refusal returns after the delay.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe. Dropping the future gives up the place in line; a permit
    /// that was handed to it but not yet returned goes back to the pool (or to
    /// the next waiter). A dropped waiter counts as rejected.
    pub fn acquire(&self) -> Acquire<'_> {
        self.acquire_as(Class::default())
    }

    /// Like [`acquire`](Limiter::acquire), with a permit that owns a handle
    /// to the limiter.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Limiter::acquire).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Limiter::acquire).
    pub fn acquire_owned(&self) -> Acquire<'static> {
        self.acquire_owned_as(Class::default())
    }

    /// Waits at most `timeout` for a permit (on tokio's clock).
    ///
    /// A permit that is free now is taken even with a zero timeout.
    ///
    /// # Errors
    ///
    /// [`AcquireTimeoutError::Timeout`] when the time runs out,
    /// [`AcquireTimeoutError::Closed`] when the limiter is closed. Both count
    /// as rejected.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime with the time driver enabled.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Limiter::acquire).
    #[cfg(feature = "tokio")]
    pub async fn acquire_timeout(
        &self,
        timeout: Duration,
    ) -> Result<Permit<'_>, AcquireTimeoutError> {
        match tokio::time::timeout(timeout, self.acquire()).await {
            Ok(r) => r.map_err(AcquireTimeoutError::from),
            Err(_) => Err(AcquireTimeoutError::Timeout),
        }
    }

    /// Blocks the current thread until a permit is free.
    ///
    /// For synchronous code. Do not call it from an async task: it blocks the
    /// executor thread.
    ///
    /// # Errors
    ///
    /// [`AcquireError`] if the limiter is closed.
    pub fn acquire_blocking(&self) -> Result<Permit<'_>, AcquireError> {
        if let Ok(p) = self.try_acquire_quiet() {
            return Ok(p);
        }
        let wait = self.inner.admission.queue_timeout;
        acquire::block_on(self.acquire(), wait)
            .unwrap_or(Err(AcquireError::refused(crate::pool::Refused::TimedOut)))
    }

    /// Blocks the current thread for at most `timeout` (wall-clock time)
    /// until a permit is free.
    ///
    /// # Errors
    ///
    /// [`AcquireTimeoutError::Timeout`] or [`AcquireTimeoutError::Closed`].
    pub fn acquire_blocking_timeout(
        &self,
        timeout: Duration,
    ) -> Result<Permit<'_>, AcquireTimeoutError> {
        if let Ok(p) = self.try_acquire_quiet() {
            return Ok(p);
        }
        let wait = match self.inner.admission.queue_timeout {
            Some(q) => q.min(timeout),
            None => timeout,
        };
        match acquire::block_on(self.acquire(), Some(wait)) {
            Some(r) => r.map_err(AcquireTimeoutError::from),
            None => Err(AcquireTimeoutError::Timeout),
        }
    }

    /// A `try_acquire` that does not count a rejection (the caller goes on
    /// to wait).
    fn try_acquire_quiet(&self) -> Result<Permit<'_>, TryFail> {
        let inner = &*self.inner;
        let a = inner.hot.pool.try_acquire()?;
        Ok(Permit::new(Holder::Borrowed(inner), a, inner.now(), 0))
    }

    /// The class of requests in partition `partition` (see
    /// [`Builder::partitions`]), at priority 0; change the priority with
    /// [`Class::with_priority`]. Resolve classes once, then admit with
    /// [`try_acquire_as`](Limiter::try_acquire_as) or
    /// [`acquire_as`](Limiter::acquire_as).
    ///
    /// # Errors
    ///
    /// [`UnknownPartition`] naming `partition` and the partitions there are
    /// (every limiter has `"default"`).
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptx::{Limiter, Partitions};
    ///
    /// let limiter = Limiter::builder()
    ///     .partitions(Partitions::new().share("critical", 0.7))
    ///     .build()?;
    /// assert!(limiter.class("critical").is_ok());
    /// let err = limiter.class("batch").unwrap_err();
    /// assert_eq!(err.to_string(), "unknown partition \"batch\" (known: default, critical)");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn class(&self, partition: &str) -> Result<Class, UnknownPartition> {
        let slot = match self.inner.hot.pool.table() {
            Some(t) => t.slot(partition)?,
            None if partition == crate::DEFAULT_PARTITION => 0,
            None => {
                return Err(UnknownPartition::new(partition, crate::DEFAULT_PARTITION));
            }
        };
        Ok(Class { slot, priority: 0 })
    }

    /// Permits held by `class`'s partition (all of them without
    /// partitions).
    pub fn in_flight_of(&self, class: Class) -> usize {
        match self.inner.hot.pool.table() {
            Some(t) => t.used(usize::from(class.slot)),
            None => self.in_flight(),
        }
    }

    /// Requests waiting in the queue now.
    pub fn waiting(&self) -> usize {
        self.inner.hot.pool.waiting()
    }

    /// [`try_acquire`](Limiter::try_acquire) for a request of `class`: it
    /// counts against the class's partition and is admitted by the partition
    /// rule (see [`Partitions`](crate::Partitions)).
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Limiter::try_acquire).
    #[inline(always)]
    pub fn try_acquire_as(&self, class: Class) -> Result<Permit<'_>, TryAcquireError> {
        let inner = &*self.inner;
        match inner.try_admit(class.slot) {
            Ok(a) => Ok(Permit::new(
                Holder::Borrowed(inner),
                a,
                inner.now(),
                class.slot,
            )),
            Err(e) => Err(e.into()),
        }
    }

    /// [`try_acquire_owned`](Limiter::try_acquire_owned) for a request of
    /// `class`.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Limiter::try_acquire).
    #[inline(always)]
    pub fn try_acquire_owned_as(&self, class: Class) -> Result<OwnedPermit, TryAcquireError> {
        match self.inner.try_admit(class.slot) {
            Ok(a) => Ok(Permit::new(
                Holder::Owned(spare::handle(&self.inner)),
                a,
                self.inner.now(),
                class.slot,
            )),
            Err(e) => Err(e.into()),
        }
    }

    /// [`acquire`](Limiter::acquire) for a request of `class`: it waits in
    /// the queue with the class's priority (higher served first, lowest shed
    /// first from a full queue) and is granted a permit only when the
    /// partition rule admits it.
    ///
    /// # Errors
    ///
    /// [`AcquireError`] if the limiter is closed, or the wait queue refuses
    /// the request ([`AcquireError::is_queue_full`],
    /// [`is_timeout`](AcquireError::is_timeout),
    /// [`is_shed`](AcquireError::is_shed)); with a reject delay, a refusal
    /// returns after the delay.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Limiter::acquire).
    pub fn acquire_as(&self, class: Class) -> Acquire<'_> {
        Acquire::new(Holder::Borrowed(&self.inner), class)
    }

    /// [`acquire_owned`](Limiter::acquire_owned) for a request of `class`.
    ///
    /// # Errors
    ///
    /// As [`acquire_as`](Limiter::acquire_as).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Limiter::acquire).
    pub fn acquire_owned_as(&self, class: Class) -> Acquire<'static> {
        Acquire::new(Holder::Owned(spare::handle(&self.inner)), class)
    }

    /// Whether a permit is free right now, without taking it.
    ///
    /// A hint: a concurrent admission may take the slot before the caller
    /// acts. False after close, and false while shrink debt remains (in
    /// [`Mode::Enforce`](crate::Mode::Enforce): in shadow and bypass mode a
    /// full limiter admits anyway, and `allow` says so). One atomic load
    /// while a permit is free; changes no counter.
    #[inline]
    pub fn allow(&self) -> bool {
        let pool = &self.inner.hot.pool;
        let (limit, in_flight, closed) = pool.snapshot();
        !closed && (in_flight < limit || pool.admits_over_limit())
    }

    /// The live limit (one atomic load).
    #[inline]
    pub fn limit(&self) -> usize {
        self.inner.hot.pool.limit()
    }

    /// Operations admitted and not yet finished (one atomic load).
    #[inline]
    pub fn in_flight(&self) -> usize {
        self.inner.hot.pool.in_flight()
    }

    /// Permits free right now.
    pub fn available(&self) -> usize {
        self.inner.hot.pool.available()
    }

    /// Shrink debt: held permits that will be retired instead of returned.
    pub fn debt(&self) -> usize {
        self.inner.hot.pool.debt()
    }

    /// The limiter's name ([`Builder::name`]): the `limiter` label of its
    /// metrics and the `limiter` field of its log events.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The name of the control law.
    pub fn algorithm(&self) -> &'static str {
        self.inner.names.current()
    }

    /// The smoothed (EMA) window-mean latency the controller tracks, if any
    /// window has been evaluated. [`Stats::avg_latency`] is instead the plain
    /// mean of recent samples.
    pub fn smoothed_latency(&self) -> Option<Duration> {
        lock(&self.inner.control).average()
    }

    /// The controller's estimate of the backend's floor latency (RTT_min).
    pub fn min_latency_estimate(&self) -> Option<Duration> {
        lock(&self.inner.control).floor()
    }

    /// A snapshot of the counters and of recent latencies.
    ///
    /// The snapshot is self-consistent: `total == success + failures +
    /// dropped + in_flight`, `min ≤ p50 ≤ p99 ≤ max`. Latency fields summarize
    /// the successful samples of the window in progress and, while that window
    /// is younger than one sample window, of the window before it; they come
    /// from a
    /// fixed-bucket histogram (within 1 % of the exact values) and cost
    /// no sort. All zero when there is no recent sample.
    pub fn stats(&self) -> Stats {
        let inner = &*self.inner;
        let c = &inner.counters;
        let w = &inner.hot.window;
        let ((success, failures), rtt_min, rtt_average, law_state, cfg) = {
            let control = lock(&inner.control);
            (
                control.outcomes(w),
                control.floor(),
                control.average(),
                control.law.state(),
                control.cfg,
            )
        };
        let dropped = w.total(Event::Dropped);
        let (limit, in_flight, _) = inner.hot.pool.snapshot();
        let mut counts = Counts::new();
        inner
            .hot
            .window
            .recent_latencies(inner.now(), inner.tuned.window_nanos(), &mut counts);
        let mut stats = Stats::new(
            inner.names.current(),
            [limit, cfg.min_limit, cfg.max_limit, in_flight],
            [
                success
                    .saturating_add(failures)
                    .saturating_add(dropped)
                    .saturating_add(in_flight as u64),
                success,
                failures,
                dropped,
                w.total(Event::Rejected),
                c.increases.load(Ordering::Relaxed),
                c.decreases.load(Ordering::Relaxed),
            ],
            &counts,
        );
        stats.mode = inner.mode.get();
        stats.would_reject = inner.hot.pool.over_limit_admissions();
        stats.forced_limit = cfg.forced;
        stats.rtt_min = rtt_min;
        stats.rtt_average = rtt_average;
        stats.law_state = law_state;
        stats
    }

    /// Zeroes the counters and forgets everything the controller learned:
    /// the limit goes back to the initial limit (raised to the in-flight
    /// count if more work than that is running, so no permit is revoked), the
    /// estimators, the law's state, the window and the latency history are
    /// cleared. In-flight work and the closed state are untouched; the
    /// limit-change hook is not called.
    pub fn reset_stats(&self) {
        let inner = &*self.inner;
        let woken = {
            let tuning = lock(&inner.tuning);
            let mut control = lock(&inner.control);
            control.reset(&inner.hot.window, inner.now());
            inner.counters.clear();
            inner.hot.pool.clear_over_limit_admissions();
            let cfg = control.cfg;
            // A forced limit is the operator's, not learned: it stays.
            let limit = match cfg.forced {
                Some(forced) => forced,
                None => tuning
                    .initial_limit()
                    .max(inner.hot.pool.in_flight())
                    .min(cfg.max_limit),
            };
            let woken = inner.hot.pool.set_limit_deferred(limit).1;
            inner
                .observe
                .reset(&inner.hot.pool, cfg.min_limit, cfg.max_limit);
            woken
        };
        woken.wake_all();
    }

    /// Closes the limiter without waiting: every later admission fails with
    /// a closed error and every waiter wakes with one at once. In-flight work
    /// continues; its completions are still counted, but the limit no longer
    /// adapts. Idempotent. Returns `true` on the first call.
    pub fn close(&self) -> bool {
        self.inner.hot.pool.close()
    }

    /// Whether [`close`](Limiter::close) has been called.
    pub fn is_closed(&self) -> bool {
        self.inner.hot.pool.is_closed()
    }

    /// Closes the limiter at once (as [`close`](Limiter::close)) and returns
    /// a future that resolves when no operation is in flight.
    ///
    /// Once it resolves, no operation is running and none can start: close
    /// and admission are linearized.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future stops waiting; the limiter stays
    /// closed.
    pub fn close_and_drain(&self) -> Drained<'_> {
        self.close();
        Drained::new(&self.inner.hot.pool)
    }

    /// Closes the limiter and waits at most `timeout` (on tokio's clock) for
    /// in-flight work to finish. Can be called again, also concurrently, to
    /// keep waiting.
    ///
    /// # Errors
    ///
    /// [`DrainTimeoutError`] if work is still in flight when the time runs
    /// out; the limiter stays closed and that work is not cancelled.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime with the time driver enabled.
    ///
    /// # Cancel safety
    ///
    /// As [`close_and_drain`](Limiter::close_and_drain).
    #[cfg(feature = "tokio")]
    pub async fn close_with_timeout(&self, timeout: Duration) -> Result<(), DrainTimeoutError> {
        let drained = self.close_and_drain();
        match tokio::time::timeout(timeout, drained).await {
            Ok(()) => Ok(()),
            Err(_) => Err(DrainTimeoutError::new(self.in_flight())),
        }
    }

    /// Closes the limiter and blocks the thread at most `timeout` (wall-clock
    /// time) for in-flight work to finish.
    ///
    /// # Errors
    ///
    /// [`DrainTimeoutError`] if work is still in flight when the time runs
    /// out.
    pub fn close_blocking(&self, timeout: Duration) -> Result<(), DrainTimeoutError> {
        match acquire::block_on(self.close_and_drain(), Some(timeout)) {
            Some(()) => Ok(()),
            None => Err(DrainTimeoutError::new(self.in_flight())),
        }
    }

    pub(crate) fn inner(&self) -> &Inner {
        &self.inner
    }
}

impl Default for Limiter {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(all(test, not(adaptx_loom)))]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::sync::atomic::{AtomicUsize, Ordering as StdOrdering};
    use std::task::{Context, Poll, Wake, Waker};

    use super::*;
    use crate::clock::ManualClock;

    /// A waker that checks, when woken, that the controller mutex is free:
    /// a task woken under it may run at once on the waking thread and call
    /// into the limiter.
    struct CheckLocks {
        limiter: Limiter,
        woken: AtomicUsize,
        under_lock: AtomicUsize,
    }

    impl Wake for CheckLocks {
        fn wake(self: std::sync::Arc<Self>) {
            self.wake_by_ref();
        }

        fn wake_by_ref(self: &std::sync::Arc<Self>) {
            self.woken.fetch_add(1, StdOrdering::SeqCst);
            if self.limiter.inner().control.try_lock().is_err() {
                self.under_lock.fetch_add(1, StdOrdering::SeqCst);
            }
        }
    }

    fn rig(initial: usize) -> (Limiter, ManualClock, std::sync::Arc<CheckLocks>) {
        let clock = ManualClock::new();
        let limiter = Limiter::builder()
            .initial_limit(initial)
            .warmup_samples(0)
            .jitter(0.0)
            .clock(clock.clone())
            .build()
            .expect("valid configuration");
        let check = std::sync::Arc::new(CheckLocks {
            limiter: limiter.clone(),
            woken: AtomicUsize::new(0),
            under_lock: AtomicUsize::new(0),
        });
        (limiter, clock, check)
    }

    #[test]
    fn accounting_waiters_are_woken_outside_every_lock_on_growth() {
        let (limiter, clock, check) = rig(1);
        let held = limiter.try_acquire().expect("free");
        let waker = Waker::from(check.clone());
        let mut cx = Context::from_waker(&waker);
        let mut waiting = pin!(limiter.acquire());
        assert!(waiting.as_mut().poll(&mut cx).is_pending());
        // The window closes on this success and grows the limit 1 → 2,
        // which grants the waiter.
        clock.advance(Duration::from_secs(1));
        held.success();
        assert_eq!(limiter.stats().increases, 1);
        assert!(check.woken.load(StdOrdering::SeqCst) >= 1);
        assert_eq!(check.under_lock.load(StdOrdering::SeqCst), 0);
        assert!(matches!(waiting.as_mut().poll(&mut cx), Poll::Ready(Ok(_))));
    }

    #[test]
    fn accounting_waiters_are_woken_outside_every_lock_on_reset() {
        let (limiter, clock, check) = rig(2);
        let first = limiter.try_acquire().expect("free");
        let second = limiter.try_acquire().expect("free");
        clock.advance(Duration::from_secs(1));
        first.failure(); // 2 → 1
        assert_eq!(limiter.limit(), 1);
        let waker = Waker::from(check.clone());
        let mut cx = Context::from_waker(&waker);
        let mut waiting = pin!(limiter.acquire());
        assert!(waiting.as_mut().poll(&mut cx).is_pending());
        // Back to the initial limit of 2: the waiter is granted.
        limiter.reset_stats();
        assert_eq!(check.woken.load(StdOrdering::SeqCst), 1);
        assert_eq!(check.under_lock.load(StdOrdering::SeqCst), 0);
        assert!(matches!(waiting.as_mut().poll(&mut cx), Poll::Ready(Ok(_))));
        second.success();
    }
}
