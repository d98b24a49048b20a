//! Peer benchmarks for `adaptx` (not published).
//!
//! The crate holds no code: `benches/peers.rs` measures adaptx next to its
//! peers in one criterion run — `tokio::sync::Semaphore`, tower's
//! `ConcurrencyLimit`, the `congestion-limiter` crate's AIMD limiter, and
//! `governor`'s direct rate limiter — and `scripts/bench-table` runs it and
//! prints the markdown table of ratios:
//!
//! ```text
//! scripts/bench-table
//! cargo bench -p adaptx-bench --bench peers    # the raw criterion run
//! ```
//!
//! It also runs the repository README's examples as doc tests: the README
//! lies outside every published package, so no published crate may include
//! it, and this one is not published.

/// The repository's `README.md`, whose Rust examples run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct RepositoryReadme;
