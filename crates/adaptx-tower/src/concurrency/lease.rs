//! A concurrency permit on its way to an outcome.

use std::fmt;
use std::time::Duration;

use adaptx::{Outcome, OwnedPermit};

use crate::classify::Verdict;

/// An admitted request's permit, with where its latency starts and what its
/// drop means.
///
/// The latency is measured on the limiter's clock from `start`, an offset
/// from admission: zero on the server (the permit is taken for the
/// request), the permit's age at `call` on the client (a permit taken in
/// `poll_ready` may wait in a ready service for a long time before the
/// request exists).
///
/// Dropped without a verdict (the request was cancelled), the permit
/// counts as *dropped*, or, once `drop_deadline` has passed since `start`,
/// as a failure: a request abandoned after that long was abandoned because
/// the backend was slow.
pub(crate) struct Lease {
    permit: Option<OwnedPermit>,
    start: Duration,
    drop_deadline: Option<Duration>,
}

impl Lease {
    /// A lease whose latency runs from admission.
    pub(crate) fn new(permit: OwnedPermit, drop_deadline: Option<Duration>) -> Self {
        Self {
            permit: Some(permit),
            start: Duration::ZERO,
            drop_deadline,
        }
    }

    /// A lease whose latency runs from now, not from admission.
    pub(crate) fn starting_now(permit: OwnedPermit, drop_deadline: Option<Duration>) -> Self {
        Self {
            start: permit.elapsed(),
            permit: Some(permit),
            drop_deadline,
        }
    }

    /// A lease without a permit (a request the layer answered itself).
    pub(crate) const fn empty() -> Self {
        Self {
            permit: None,
            start: Duration::ZERO,
            drop_deadline: None,
        }
    }

    /// Moves the permit out into a new lease, leaving this one empty.
    pub(crate) fn take(&mut self) -> Self {
        Self {
            permit: self.permit.take(),
            start: self.start,
            drop_deadline: self.drop_deadline,
        }
    }

    /// Whether the lease still holds its permit.
    pub(crate) fn is_held(&self) -> bool {
        self.permit.is_some()
    }

    /// Ends the permit with `verdict`.
    pub(crate) fn finish(mut self, verdict: Verdict) {
        if let Some(permit) = self.permit.take() {
            record(permit, self.start, verdict);
        }
    }
}

/// Records `verdict` on `permit`, its latency measured from `start`.
fn record(permit: OwnedPermit, start: Duration, verdict: Verdict) {
    let outcome = match verdict {
        Verdict::Success => Outcome::Success,
        Verdict::Failure => Outcome::Failure,
        Verdict::Fault => return permit.record_skipped(Outcome::Failure),
        Verdict::Skip => return permit.record_skipped(Outcome::Success),
    };
    // The core's permits measure from admission; the offset is taken off
    // here (a `Permit::restart` in the core would spare a clock read).
    let latency = permit.elapsed().saturating_sub(start);
    permit.record_with_latency(outcome, latency);
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(permit) = self.permit.take() else {
            return;
        };
        match self.drop_deadline {
            Some(deadline) if permit.elapsed().saturating_sub(self.start) >= deadline => {
                record(permit, self.start, Verdict::Failure);
            }
            // Released without an outcome: counted as dropped.
            _ => drop(permit),
        }
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("permit", &self.permit)
            .field("start", &self.start)
            .field("drop_deadline", &self.drop_deadline)
            .finish()
    }
}
