//! The atomics of the lease pool, swapped for loom's under
//! `--cfg adaptx_loom` (the core crate's cfg, so one `RUSTFLAGS` checks
//! both crates) so the pool can be model-checked.

#[cfg(adaptx_loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

#[cfg(not(adaptx_loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
