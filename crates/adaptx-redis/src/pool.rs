//! The lease pool: the tokens of this instance's current lease, taken by
//! the hot path without a lock, filled and taken back by the driver task.
//!
//! # Invariants
//!
//! Each holds on every interleaving of takers with the driver; the loom
//! models in `pool/loom.rs` check them (`RUSTFLAGS="--cfg adaptx_loom"
//! CARGO_TARGET_DIR=target/loom cargo test -p adaptx-redis --lib --release loom`).
//!
//! 1. **No token admitted twice or lost.** Every change of `tokens` is one
//!    atomic read-modify-write (a take's CAS loop, a grant's `fetch_add`, a
//!    take-back's CAS, a drain's `swap`), so at any quiescent point
//!    `initial + granted − admitted − taken back − drained = tokens`.
//! 2. **At most one lease of credit.** A take succeeds only from a value
//!    above `−lease_size`, so admissions beyond the granted tokens never
//!    bring `tokens` below `−lease_size`, however many takers race at the
//!    credit line (for the lease size the taker read; the driver changes it
//!    only between leases).
//! 3. **A grant pays the debt first.** A grant adds to `tokens`, debt
//!    included: a grant of `g` over a debt of `d` leaves `g − d` to take.
//! 4. **The idle take-back takes nothing a take already took.** It swaps
//!    the value it saw for zero only if `tokens` still holds it (a CAS from
//!    a positive value), so a take in between makes it fail and keeps the
//!    lease; a take after it runs on credit from zero, within the line.
//! 5. **No lost refill request.** A take that leaves `tokens` at or below
//!    the low-water mark (a quarter of the lease), or is refused at the
//!    credit line, sets `refill_wanted`; the taker that turns it from false
//!    to true wakes the driver ([`Take::wake`]). The driver clears the flag
//!    ([`begin_refill`](LeasePool::begin_refill)) *before* it asks Redis and
//!    grants, and only when it asks for tokens (never for a take-back's
//!    refund), so a request made after the clear stays set with its wake
//!    pending, and one made before it is answered by the grant that follows.
//!    A set flag always has a wake sent after the driver's last clear.

use crate::sync::{AtomicBool, AtomicI64, AtomicU64, Ordering};

#[cfg(all(test, adaptx_loom))]
mod loom;

/// The tokens of the current lease, the credit line, and the refill request.
#[derive(Debug)]
pub(crate) struct LeasePool {
    /// Leased tokens left; negative while admitting on credit.
    tokens: AtomicI64,
    /// The current lease size K: the credit line, and what the driver asks
    /// for.
    lease_size: AtomicU64,
    /// The hot path wants a lease.
    refill_wanted: AtomicBool,
}

/// What one [`take`](LeasePool::take) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub(crate) struct Take {
    /// The tokens left after an admission (negative: in debt), or `None`
    /// when refused at the credit line.
    pub(crate) left: Option<i64>,
    /// This take asked for a refill first: the caller must wake the driver.
    pub(crate) wake: bool,
}

impl LeasePool {
    /// An empty pool, lease size one, a refill wanted (the first lease).
    pub(crate) fn new() -> Self {
        Self {
            tokens: AtomicI64::new(0),
            lease_size: AtomicU64::new(1),
            refill_wanted: AtomicBool::new(true),
        }
    }

    /// Takes one token, on credit down to minus one lease; asks for a
    /// refill at the low-water mark or when refused.
    #[inline]
    pub(crate) fn take(&self) -> Take {
        let credit = i64::try_from(self.lease_size.load(Ordering::Relaxed)).unwrap_or(i64::MAX);
        let left = self
            .tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |p| {
                (p > -credit).then(|| p - 1)
            })
            .ok()
            .map(|prev| prev - 1);
        let short = left.is_none_or(|l| l <= credit / 4);
        Take {
            left,
            wake: short && self.ask_refill(),
        }
    }

    /// Sets the refill request; true on its false → true edge only (the
    /// caller wakes the driver).
    #[inline]
    fn ask_refill(&self) -> bool {
        !self.refill_wanted.load(Ordering::Relaxed)
            && !self.refill_wanted.swap(true, Ordering::AcqRel)
    }

    /// Whether a refill is wanted.
    pub(crate) fn refill_wanted(&self) -> bool {
        self.refill_wanted.load(Ordering::Acquire)
    }

    /// The driver is about to ask for tokens: requests from here on are
    /// new ones.
    pub(crate) fn begin_refill(&self) {
        self.refill_wanted.store(false, Ordering::Release);
    }

    /// Adds a grant (paying a debt first).
    pub(crate) fn grant(&self, tokens: u64) {
        let tokens = i64::try_from(tokens).unwrap_or(i64::MAX);
        self.tokens.fetch_add(tokens, Ordering::AcqRel);
    }

    /// The tokens left now (negative: in debt).
    pub(crate) fn level(&self) -> i64 {
        self.tokens.load(Ordering::Acquire)
    }

    /// Takes back an idle lease: the `seen` tokens, if the pool still
    /// holds exactly them and they are positive. Returns the tokens taken.
    pub(crate) fn take_back_idle(&self, seen: i64) -> Option<u64> {
        if seen <= 0 {
            return None;
        }
        self.tokens
            .compare_exchange(seen, 0, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .and_then(|prev| u64::try_from(prev).ok())
    }

    /// Empties the pool (fallback, shutdown): returns what it held;
    /// negative is a debt, forgiven.
    pub(crate) fn drain(&self) -> i64 {
        self.tokens.swap(0, Ordering::AcqRel)
    }

    /// Empties the pool and restarts the lease at one token (rejoin).
    pub(crate) fn reset(&self) {
        self.tokens.store(0, Ordering::Release);
        self.set_lease_size(1);
    }

    /// The current lease size (the credit line).
    pub(crate) fn lease_size(&self) -> u64 {
        self.lease_size.load(Ordering::Relaxed)
    }

    pub(crate) fn set_lease_size(&self, k: u64) {
        self.lease_size.store(k, Ordering::Relaxed);
    }
}

#[cfg(all(test, not(adaptx_loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// The pool admits on credit down to minus one lease, then refuses; the
    /// driver is asked for a lease once (on the edge), at the low-water mark.
    #[test]
    fn pool_admits_on_credit_of_one_lease() {
        let p = LeasePool::new();
        p.begin_refill();
        p.set_lease_size(8);
        p.grant(8);
        let mut left = vec![];
        let mut wakes = 0;
        loop {
            let t = p.take();
            wakes += usize::from(t.wake);
            let Some(l) = t.left else { break };
            left.push(l);
        }
        // 8 leased + 8 on credit; below the credit line nothing.
        assert_eq!(left.len(), 16);
        assert_eq!(&left[..8], &[7, 6, 5, 4, 3, 2, 1, 0]);
        assert_eq!(p.level(), -8);
        assert!(p.refill_wanted());
        assert_eq!(wakes, 1, "one wake per request");
        // A grant pays the debt first.
        p.grant(10);
        assert_eq!(p.take().left, Some(1));
    }

    /// Many threads taking while a refiller grants: every token taken was
    /// granted or is the final debt — none lost, none taken twice.
    #[test]
    fn pool_loses_and_duplicates_no_token() {
        let p = Arc::new(LeasePool::new());
        p.set_lease_size(4);
        let taken = Arc::new(AtomicU64::new(0));
        let granted = 20_000i64;
        std::thread::scope(|scope| {
            for _ in 0..3 {
                let (p, taken) = (Arc::clone(&p), Arc::clone(&taken));
                scope.spawn(move || {
                    for _ in 0..20_000 {
                        if p.take().left.is_some() {
                            taken.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
            let p = Arc::clone(&p);
            scope.spawn(move || {
                for _ in 0..granted / 4 {
                    p.grant(4);
                    std::thread::yield_now();
                }
            });
        });
        let pool = p.level();
        let taken = i64::try_from(taken.load(Ordering::Relaxed)).unwrap_or(i64::MAX);
        assert_eq!(taken, granted - pool, "taken {taken}, pool {pool}");
        assert!(pool >= -4, "credit exceeded: {pool}");
    }

    /// The take-back takes only an untouched positive lease.
    #[test]
    fn take_back_takes_only_an_untouched_lease() {
        let p = LeasePool::new();
        p.set_lease_size(4);
        assert_eq!(p.take_back_idle(0), None);
        p.grant(3);
        let _ = p.take();
        assert_eq!(p.take_back_idle(3), None, "a take in between keeps it");
        assert_eq!(p.take_back_idle(2), Some(2));
        assert_eq!(p.level(), 0);
    }
}
