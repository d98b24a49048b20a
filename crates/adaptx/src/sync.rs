//! Synchronization primitives, swapped for loom's under `--cfg adaptx_loom`
//! so the permit engine can be model-checked.

#[cfg(adaptx_loom)]
pub(crate) use loom::sync::{
    Arc, Mutex, MutexGuard,
    atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering, fence},
};

#[cfg(not(adaptx_loom))]
pub(crate) use std::sync::{
    Arc, Mutex, MutexGuard,
    atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering, fence},
};

/// Locks `m`, ignoring poisoning: no code in this crate panics while holding
/// one of its locks, and the data behind them stays consistent at every step.
#[inline]
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One step of a short wait for another thread to finish a few writes: a
/// spin hint, and after a while a yield so that a preempted writer can run.
/// Under loom, a yield, so the model checker schedules the other threads.
#[inline]
pub(crate) fn spin_wait_step(spins: &mut u32) {
    #[cfg(adaptx_loom)]
    {
        let _ = spins;
        loom::thread::yield_now();
    }
    #[cfg(not(adaptx_loom))]
    {
        if *spins < 64 {
            *spins += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// Which thread writes a set of counters alone: the first to ask, by its
/// thread number (a rate lane's counters, a window stripe's latency sum
/// and histogram). The owner writes with [`add_alone`]; every other thread
/// writes a second set with read-modify-writes. `Default` is nobody yet.
/// Claimed once; the number, and with it the ownership, passes to the next
/// thread that gets it.
#[derive(Debug, Default)]
pub(crate) struct Owner(AtomicU64);

impl Owner {
    /// Whether the thread numbered `me` owns the counters, claiming them if
    /// nobody has. `None` (a thread whose number is gone, exiting) never
    /// owns.
    #[inline]
    pub(crate) fn is(&self, me: Option<std::num::NonZeroU64>) -> bool {
        let Some(me) = me else {
            return false;
        };
        let owner = self.0.load(Ordering::Relaxed);
        owner == me.get()
            || (owner == 0
                && self
                    .0
                    .compare_exchange(0, me.get(), Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok())
    }
}

/// Adds `n` to `a` by its only writer: a load and a store (with `order`),
/// no locked instruction.
#[inline]
pub(crate) fn add_alone(a: &AtomicU64, n: u64, order: Ordering) {
    a.store(a.load(Ordering::Relaxed).wrapping_add(n), order);
}

/// A thread's spare reference to a shared value — a rate limiter's lane, a
/// concurrency limiter's state — kept in a thread-local, so that a permit
/// admitted and ended on one thread moves a reference instead of counting
/// one up and down (two locked instructions, and the count's cache line
/// moving between CPUs). A slot found borrowed (a re-entrant call) acts as
/// empty. Neither method drops a reference while the slot is borrowed: the
/// caller drops what they return, which may be the last reference to a
/// value whose drop runs a user's code.
#[cfg(not(adaptx_loom))]
#[derive(Debug)]
pub(crate) struct SpareSlot<T>(std::cell::RefCell<Option<Arc<T>>>);

#[cfg(not(adaptx_loom))]
impl<T> SpareSlot<T> {
    /// An empty slot.
    pub(crate) const fn new() -> Self {
        Self(std::cell::RefCell::new(None))
    }

    /// The spare, taken out, if `wanted` says it is the one.
    #[inline(always)]
    pub(crate) fn take_if(&self, wanted: impl FnOnce(&Arc<T>) -> bool) -> Option<Arc<T>> {
        let mut slot = self.0.try_borrow_mut().ok()?;
        if slot.as_ref().is_some_and(wanted) {
            slot.take()
        } else {
            None
        }
    }

    /// Keeps `handle` as the spare. Returns the reference the caller must
    /// drop: the spare it replaced, or `handle` itself if the slot was
    /// borrowed.
    #[inline(always)]
    pub(crate) fn put(&self, handle: Arc<T>) -> Option<Arc<T>> {
        match self.0.try_borrow_mut() {
            Ok(mut slot) => slot.replace(handle),
            Err(_) => Some(handle),
        }
    }
}

/// A thread's number from one [`NumberPool`], given back when it is
/// dropped (a thread keeps it in a thread-local, so when the thread
/// exits): unique among the numbers of that pool held, never 0, and the
/// lowest free number is given first, so a pool of threads that replaces
/// its threads keeps using the same few numbers.
///
/// Between the return of a number and its next holder stands the pool's
/// lock: whatever the old holder wrote under the number happens before
/// whatever the new one does.
#[cfg(not(adaptx_loom))]
#[derive(Debug)]
pub(crate) struct ThreadNumber {
    number: std::num::NonZeroU64,
    pool: &'static NumberPool,
}

/// Numbers given back, and the next never given: one per use of thread
/// numbers (the rate engines' lanes, the windows' stripes), so that each
/// numbers the threads that use it from 1.
#[cfg(not(adaptx_loom))]
#[derive(Debug)]
pub(crate) struct NumberPool(std::sync::Mutex<(Vec<std::num::NonZeroU64>, std::num::NonZeroU64)>);

#[cfg(not(adaptx_loom))]
impl NumberPool {
    /// A pool that gives 1 first.
    pub(crate) const fn new() -> Self {
        Self(std::sync::Mutex::new((
            Vec::new(),
            std::num::NonZeroU64::MIN,
        )))
    }
}

#[cfg(not(adaptx_loom))]
impl ThreadNumber {
    /// The lowest free number of `pool`.
    #[cold]
    pub(crate) fn take(pool: &'static NumberPool) -> Self {
        let mut numbers = lock(&pool.0);
        let (free, next) = &mut *numbers;
        let number = free.pop().unwrap_or_else(|| {
            let n = *next;
            *next = n.saturating_add(1);
            n
        });
        Self { number, pool }
    }

    /// The number.
    #[inline]
    pub(crate) fn get(&self) -> std::num::NonZeroU64 {
        self.number
    }
}

#[cfg(not(adaptx_loom))]
impl Drop for ThreadNumber {
    fn drop(&mut self) {
        let mut numbers = lock(&self.pool.0);
        numbers.0.push(self.number);
        // Lowest last: popped first.
        numbers.0.sort_unstable_by(|a, b| b.cmp(a));
    }
}

/// The calling thread's number under loom: the model's own thread index
/// (plus one), so every execution of a model numbers its threads alike.
#[cfg(adaptx_loom)]
pub(crate) fn thread_number() -> Option<std::num::NonZeroU64> {
    // loom's `ThreadId` shows its index as `ThreadId(N)`.
    let id = format!("{:?}", loom::thread::current().id());
    id.trim_start_matches("ThreadId(")
        .trim_end_matches(')')
        .parse::<u64>()
        .ok()
        .and_then(|n| std::num::NonZeroU64::new(n + 1))
}

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

/// Runs a loom model with a bounded number of preemptions: the setting every
/// model of this crate uses.
#[cfg(all(test, adaptx_loom))]
pub(crate) fn loom_model<F>(f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}
