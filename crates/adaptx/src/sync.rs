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
