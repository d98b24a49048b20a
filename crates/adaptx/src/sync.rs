//! Synchronization primitives, swapped for loom's under `--cfg adaptx_loom`
//! so the permit engine can be model-checked.

#[cfg(adaptx_loom)]
pub(crate) use loom::sync::{
    Arc, Mutex, MutexGuard,
    atomic::{AtomicU8, AtomicU64, Ordering},
};

#[cfg(not(adaptx_loom))]
pub(crate) use std::sync::{
    Arc, Mutex, MutexGuard,
    atomic::{AtomicU8, AtomicU64, Ordering},
};

/// Locks `m`, ignoring poisoning: no code in this crate panics while holding
/// one of its locks, and the data behind them stays consistent at every step.
#[inline]
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
