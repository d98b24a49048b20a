//! A concurrency permit on its way to an outcome.

use std::fmt;
use std::time::Duration;

use adaptx::{Outcome, OwnedPermit};

use crate::classify::Verdict;

/// An admitted request's permit, with what its drop means.
///
/// The permit measures the request's latency: from admission on the
/// server (the permit is taken for the request), from `call` on the client
/// (a permit taken in `poll_ready` may wait in a ready service for a long
/// time before the request exists; [`starting_now`](Lease::starting_now)
/// restarts it).
///
/// Dropped without a verdict (the request was cancelled), the permit
/// counts as *dropped*, or, once `drop_deadline` has passed, as a failure:
/// a request abandoned after that long was abandoned because the backend
/// was slow.
pub(crate) struct Lease {
    permit: Option<OwnedPermit>,
    drop_deadline: Option<Duration>,
}

impl Lease {
    /// A lease whose latency runs from admission.
    pub(crate) fn new(permit: OwnedPermit, drop_deadline: Option<Duration>) -> Self {
        Self {
            permit: Some(permit),
            drop_deadline,
        }
    }

    /// A lease whose latency runs from now, not from admission.
    pub(crate) fn starting_now(mut permit: OwnedPermit, drop_deadline: Option<Duration>) -> Self {
        permit.restart();
        Self::new(permit, drop_deadline)
    }

    /// A lease without a permit (a request the layer answered itself).
    pub(crate) const fn empty() -> Self {
        Self {
            permit: None,
            drop_deadline: None,
        }
    }

    /// Moves the permit out into a new lease, leaving this one empty.
    pub(crate) fn take(&mut self) -> Self {
        Self {
            permit: self.permit.take(),
            drop_deadline: self.drop_deadline,
        }
    }

    /// Whether the lease still holds its permit.
    pub(crate) fn is_held(&self) -> bool {
        self.permit.is_some()
    }

    /// Ends the permit with `verdict`.
    pub(crate) fn finish(mut self, verdict: Verdict) {
        self.end(verdict);
    }

    /// Ends the permit with `verdict` in place, leaving the lease empty
    /// (no move of the lease: this is on every request's path).
    #[inline]
    pub(crate) fn end(&mut self, verdict: Verdict) {
        if let Some(permit) = self.permit.take() {
            record(permit, verdict);
        }
    }
}

/// Records `verdict` on `permit`.
fn record(permit: OwnedPermit, verdict: Verdict) {
    match verdict {
        Verdict::Success => permit.record(Outcome::Success),
        Verdict::Failure => permit.record(Outcome::Failure),
        Verdict::Fault => permit.record_skipped(Outcome::Failure),
        Verdict::Skip => permit.record_skipped(Outcome::Success),
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(permit) = self.permit.take() else {
            return;
        };
        match self.drop_deadline {
            Some(deadline) if permit.elapsed() >= deadline => permit.failure(),
            // Released without an outcome: counted as dropped.
            _ => drop(permit),
        }
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("permit", &self.permit)
            .field("drop_deadline", &self.drop_deadline)
            .finish()
    }
}
