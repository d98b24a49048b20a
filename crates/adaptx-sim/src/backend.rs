//! The backend model: service time with jitter, processor sharing over a
//! number of workers, a concurrency ceiling that rejects or drops, a rate
//! limit, and client errors. (Which accepted requests end in an overload
//! error — at random or past a soft ceiling — is the engine's draw: the
//! backend only does their work.)
//!
//! # Implementation details
//!
//! Processor sharing is simulated with a *virtual-work clock* `v`: the amount
//! of work, in units of 1/[`SCALE`] ns, that every request inside has
//! received since time zero. With `L` requests inside and `c` workers, `v`
//! advances at `min(1, c / L)` units of work per unit of time, so a request
//! that enters at `v₀` with work `w` leaves when `v` reaches `v₀ + w`. Those
//! virtual finish times do not change when `L` does — only the speed of `v`
//! does — so the requests inside sit in a binary heap keyed by virtual finish
//! time: an arrival or a departure is `O(log n)`, and the next departure is
//! the heap's minimum, converted to real time at the current speed.
//!
//! All of it is integer arithmetic. `v` advances by `⌊dt · c · SCALE / L⌋`
//! and the next departure is planned at `⌈(v_f − v) · L / (c · SCALE)⌉` ns
//! after the last advance, so at the planned time `v ≥ v_f` exactly: the
//! ceiling of the plan covers the floor of the advance. Every advance is
//! followed by a new plan, so rounding never accumulates. Without sharing
//! (no `workers`, or `L ≤ c`) the speed is exactly `SCALE` per ns and a
//! request's latency is exactly its work.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::scenario::{BackendSpec, OverLimit};
use crate::time::SECOND;

/// Units of virtual work per nanosecond.
pub(crate) const SCALE: u64 = 4096;

/// What the backend does with a request offered to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Offer {
    /// Inside; it leaves through [`Backend::complete`].
    Accepted,
    /// Refused: an overload error answers after the reject latency.
    Rejected,
    /// Refused and never answered.
    Dropped,
}

/// The backend's state.
#[derive(Debug)]
pub(crate) struct Backend {
    spec: BackendSpec,
    inside: u64,
    /// Virtual work clock, in 1/`SCALE` ns.
    v: u64,
    /// When `v` was last advanced.
    vt: u64,
    /// (virtual finish, sequence, request slot).
    heap: BinaryHeap<Reverse<(u64, u64, u32)>>,
    seq: u64,
    /// Planned time of the next departure, `u64::MAX` when empty.
    next: u64,
    /// Start times of the requests accepted in the trailing second, for the
    /// rate limit.
    starts: VecDeque<u64>,
}

impl Backend {
    pub(crate) fn new(spec: BackendSpec) -> Self {
        Self {
            spec,
            inside: 0,
            v: 0,
            vt: 0,
            heap: BinaryHeap::new(),
            seq: 0,
            next: u64::MAX,
            starts: VecDeque::new(),
        }
    }

    pub(crate) fn spec(&self) -> &BackendSpec {
        &self.spec
    }

    /// Requests inside.
    pub(crate) fn inside(&self) -> u64 {
        self.inside
    }

    /// When the next request leaves, `u64::MAX` if none is inside.
    #[inline]
    pub(crate) fn next_completion(&self) -> u64 {
        self.next
    }

    fn sharing(&self) -> Option<u64> {
        match self.spec.workers {
            Some(c) if self.inside > u64::from(c) => Some(u64::from(c)),
            _ => None,
        }
    }

    fn advance(&mut self, t: u64) {
        let dt = t.saturating_sub(self.vt);
        if dt == 0 {
            return;
        }
        let inc = match self.sharing() {
            Some(c) => {
                (u128::from(dt) * u128::from(c) * u128::from(SCALE) / u128::from(self.inside))
                    as u64
            }
            None => dt.saturating_mul(SCALE),
        };
        self.v = self.v.saturating_add(inc);
        self.vt = t;
    }

    fn replan(&mut self) {
        self.next = match self.heap.peek() {
            None => u64::MAX,
            Some(Reverse((vf, _, _))) => {
                let need = vf.saturating_sub(self.v);
                let dt = match self.sharing() {
                    Some(c) => {
                        let num = u128::from(need) * u128::from(self.inside);
                        let den = u128::from(c) * u128::from(SCALE);
                        num.div_ceil(den) as u64
                    }
                    None => need.div_ceil(SCALE),
                };
                self.vt.saturating_add(dt)
            }
        };
    }

    /// Offers request `slot` with `work` ns of work at time `t`. `work` is
    /// drawn only when the request is accepted.
    pub(crate) fn offer(
        &mut self,
        t: u64,
        slot: u32,
        work: impl FnOnce(&BackendSpec) -> u64,
    ) -> Offer {
        if let Some(rate) = self.spec.rate_limit {
            // The trailing second is (t − 1 s, t].
            while self
                .starts
                .front()
                .is_some_and(|&s| s.saturating_add(SECOND) <= t)
            {
                self.starts.pop_front();
            }
            if self.starts.len() as f64 >= rate {
                return Offer::Rejected;
            }
        }
        if let Some(m) = self.spec.max_concurrency {
            if self.inside >= u64::from(m) {
                return match self.spec.over_limit {
                    OverLimit::Reject => Offer::Rejected,
                    OverLimit::Drop => Offer::Dropped,
                };
            }
        }
        if self.spec.rate_limit.is_some() {
            self.starts.push_back(t);
        }
        let w = work(&self.spec).max(1);
        self.advance(t);
        self.inside += 1;
        self.seq += 1;
        let vf = self.v.saturating_add(w.saturating_mul(SCALE));
        self.heap.push(Reverse((vf, self.seq, slot)));
        self.replan();
        Offer::Accepted
    }

    /// Removes the requests that finish at `t` (the planned
    /// [`next_completion`](Backend::next_completion)) into `out`, in order
    /// of virtual finish time, then of entry.
    pub(crate) fn complete(&mut self, t: u64, out: &mut Vec<u32>) {
        self.advance(t);
        while let Some(&Reverse((vf, _, slot))) = self.heap.peek() {
            if vf > self.v {
                break;
            }
            self.heap.pop();
            self.inside -= 1;
            out.push(slot);
        }
        self.replan();
    }

    /// Replaces the parameters at time `t`; requests inside keep their work.
    pub(crate) fn set_spec(&mut self, t: u64, spec: BackendSpec) {
        self.advance(t);
        self.spec = spec;
        self.replan();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::{MILLISECOND, Nanos};

    fn spec(workers: Option<u32>) -> BackendSpec {
        BackendSpec {
            service_time: Nanos(100 * MILLISECOND),
            jitter: 0.0,
            workers,
            max_concurrency: None,
            over_limit: OverLimit::Reject,
            reject_latency: Nanos(2 * MILLISECOND),
            rate_limit: None,
            client_error_rate: 0.0,
            failure_rate: 0.0,
            soft_ceiling: None,
            soft_ceiling_full: None,
        }
    }

    fn drain(b: &mut Backend) -> Vec<(u64, u32)> {
        let mut done = Vec::new();
        let mut buf = Vec::new();
        while b.next_completion() != u64::MAX {
            let t = b.next_completion();
            b.complete(t, &mut buf);
            done.extend(buf.drain(..).map(|s| (t, s)));
        }
        done
    }

    #[test]
    fn without_sharing_latency_is_the_work() {
        let mut b = Backend::new(spec(None));
        for i in 0..5 {
            assert_eq!(b.offer(0, i, |s| s.service_time.0), Offer::Accepted);
        }
        let done = drain(&mut b);
        assert_eq!(done.len(), 5);
        assert!(done.iter().all(|&(t, _)| t == 100 * MILLISECOND));
    }

    #[test]
    fn sharing_slows_everyone_equally() {
        // Four requests on two workers: each runs at half speed and leaves
        // at 2 × 100 ms.
        let mut b = Backend::new(spec(Some(2)));
        for i in 0..4 {
            b.offer(0, i, |s| s.service_time.0);
        }
        let done = drain(&mut b);
        assert_eq!(done.len(), 4);
        assert!(
            done.iter().all(|&(t, _)| t == 200 * MILLISECOND),
            "{done:?}"
        );
    }

    #[test]
    fn a_late_arrival_shares_the_rest() {
        // One worker. A enters at 0 with 100 ms; B at 50 ms with 100 ms.
        // 0-50: A alone (50 done). 50-150: both at half speed: A finishes its
        // last 50 at 150; B has 50 done, then alone: leaves at 200.
        let mut b = Backend::new(spec(Some(1)));
        b.offer(0, 0, |s| s.service_time.0);
        b.offer(50 * MILLISECOND, 1, |s| s.service_time.0);
        let done = drain(&mut b);
        assert_eq!(done, vec![(150 * MILLISECOND, 0), (200 * MILLISECOND, 1)]);
    }

    #[test]
    fn ceiling_rejects_or_drops() {
        let mut s = spec(None);
        s.max_concurrency = Some(1);
        let mut b = Backend::new(s.clone());
        assert_eq!(b.offer(0, 0, |_| 1), Offer::Accepted);
        assert_eq!(b.offer(0, 1, |_| 1), Offer::Rejected);
        s.over_limit = OverLimit::Drop;
        b.set_spec(0, s);
        assert_eq!(b.offer(0, 2, |_| 1), Offer::Dropped);
    }

    #[test]
    fn rate_limit_counts_the_trailing_second() {
        let mut s = spec(None);
        s.rate_limit = Some(2.0);
        let mut b = Backend::new(s);
        assert_eq!(b.offer(SECOND, 0, |_| 1), Offer::Accepted);
        assert_eq!(b.offer(SECOND + 1, 1, |_| 1), Offer::Accepted);
        assert_eq!(b.offer(SECOND + 2, 2, |_| 1), Offer::Rejected);
        assert_eq!(b.offer(2 * SECOND - 1, 3, |_| 1), Offer::Rejected);
        // At 2 s the first start has left the trailing second (1 s, 2 s].
        assert_eq!(b.offer(2 * SECOND, 4, |_| 1), Offer::Accepted);
        assert_eq!(b.offer(2 * SECOND, 5, |_| 1), Offer::Rejected);
    }
}
