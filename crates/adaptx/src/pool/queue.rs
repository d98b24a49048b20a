//! The wait queue's discipline: how many may wait, for how long, and who is
//! served next.
//!
//! # Algorithm
//!
//! A released (or newly grown) permit goes to one waiter chosen among those
//! still waiting, not past their deadline, and admitted by the partition
//! rule (a waiter whose partition is full never blocks the others):
//!
//! 1. the highest priority first;
//! 2. within it, by [`QueueOrder`]: [`Fifo`](QueueOrder::Fifo) the oldest,
//!    [`Lifo`](QueueOrder::Lifo) the newest,
//!    [`AdaptiveLifo`](QueueOrder::AdaptiveLifo) the oldest while the oldest
//!    waiter of the queue is at most `max_age` old and the newest beyond
//!    (Facebook's adaptive LIFO, "Fail at Scale", ACM Queue 2015; the
//!    oldest entry's age as the signal, as in congestion-limiter's
//!    queue-ordering design: under overload the newest request is the one
//!    whose caller is still waiting for it).
//!
//! A full queue takes a newcomer only by shedding a waiter of lower
//! priority: the lowest priority goes first, and among equals the one the
//! order would serve last. Waiters past their deadline are resolved as timed
//! out whenever the queue is served.

use std::collections::VecDeque;
use std::time::Duration;

use super::Waiter;
use crate::clock::duration_nanos;
use crate::error::ConfigError;
use crate::sync::Arc;

/// The order in which waiters get permits.
///
/// # Examples
///
/// ```
/// use adaptx::{Limiter, QueueOrder, QueuePolicy};
/// use std::time::Duration;
///
/// let limiter = Limiter::builder()
///     .queue(
///         QueuePolicy::new()
///             .max_waiters(100)
///             .order(QueueOrder::AdaptiveLifo { max_age: Duration::from_millis(50) }),
///     )
///     .build()?;
/// assert_eq!(limiter.waiting(), 0);
/// # Ok::<(), adaptx::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum QueueOrder {
    /// Oldest first (the default).
    #[default]
    Fifo,
    /// Newest first.
    Lifo,
    /// Oldest first while the oldest waiter is at most `max_age` old, newest
    /// first beyond: FIFO when the queue is a blip, LIFO when it is a
    /// backlog whose oldest callers have likely given up.
    AdaptiveLifo {
        /// The oldest waiter's age beyond which the newest is served.
        /// Allowed: > 0.
        max_age: Duration,
    },
}

/// The wait queue of [`Limiter::acquire`](crate::Limiter::acquire): its
/// bound, its per-waiter timeout and its [`QueueOrder`].
///
/// The default is today's: unbounded, no timeout, FIFO.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use adaptx::{Limiter, QueueOrder, QueuePolicy};
///
/// let limiter = Limiter::builder()
///     .queue(
///         QueuePolicy::new()
///             .max_waiters(100)
///             .timeout(Duration::from_secs(1))
///             .order(QueueOrder::AdaptiveLifo { max_age: Duration::from_millis(250) }),
///     )
///     .build()?;
/// # drop(limiter);
/// // A queue that holds nobody cannot time anybody out: a clear error.
/// let err = Limiter::builder()
///     .queue(QueuePolicy::new().max_waiters(0).timeout(Duration::from_secs(1)))
///     .build()
///     .unwrap_err();
/// assert_eq!(err.field(), "queue.timeout");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct QueuePolicy {
    max_waiters: Option<usize>,
    timeout: Option<Duration>,
    order: QueueOrder,
}

impl QueuePolicy {
    /// Unbounded, no timeout, FIFO.
    pub fn new() -> Self {
        Self::default()
    }

    /// At most `n` waiters; beyond, an acquirer is refused at once (or sheds
    /// a waiter of lower priority). 0: nobody waits, `acquire` fails at once
    /// when no permit is free. Default: unbounded.
    pub fn max_waiters(mut self, n: usize) -> Self {
        self.max_waiters = Some(n);
        self
    }

    /// How long a waiter may wait before it fails as timed out, on the
    /// limiter's clock. Default: no timeout. Allowed: > 0, and not with
    /// `max_waiters(0)`.
    ///
    /// The deadline is checked whenever the queue is served and whenever the
    /// waiting future is polled; inside a tokio runtime (feature `tokio`) a
    /// timer also wakes the waiter at its deadline.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Who is served next. Default [`QueueOrder::Fifo`].
    pub fn order(mut self, order: QueueOrder) -> Self {
        self.order = order;
        self
    }

    /// Validates the policy.
    pub(crate) fn discipline(&self) -> Result<Discipline, ConfigError> {
        let timeout = match self.timeout {
            Some(t) if t.is_zero() => {
                return Err(ConfigError::new("queue.timeout", t, "> 0"));
            }
            Some(t) if self.max_waiters == Some(0) => {
                return Err(ConfigError::new(
                    "queue.timeout",
                    t,
                    "no timeout with max_waiters 0 (nobody waits)",
                ));
            }
            t => t.map(duration_nanos),
        };
        let max_age = match self.order {
            QueueOrder::AdaptiveLifo { max_age } if max_age.is_zero() => {
                return Err(ConfigError::new("queue.order.max_age", max_age, "> 0"));
            }
            QueueOrder::AdaptiveLifo { max_age } => Some(duration_nanos(max_age)),
            _ => None,
        };
        Ok(Discipline {
            max_waiters: self.max_waiters.unwrap_or(usize::MAX),
            timeout,
            lifo: self.order == QueueOrder::Lifo,
            max_age,
        })
    }

    /// The per-waiter timeout.
    pub(crate) fn waiter_timeout(&self) -> Option<Duration> {
        self.timeout
    }
}

/// The validated [`QueuePolicy`], in nanoseconds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Discipline {
    pub(crate) max_waiters: usize,
    pub(crate) timeout: Option<u64>,
    lifo: bool,
    max_age: Option<u64>,
}

impl Default for Discipline {
    fn default() -> Self {
        Self {
            max_waiters: usize::MAX,
            timeout: None,
            lifo: false,
            max_age: None,
        }
    }
}

impl Discipline {
    /// Whether serving the queue needs the time.
    pub(crate) fn needs_clock(&self) -> bool {
        self.timeout.is_some() || self.max_age.is_some()
    }

    /// The deadline of a waiter enqueued at `now`.
    pub(crate) fn deadline(&self, now: u64) -> u64 {
        self.timeout.map_or(u64::MAX, |t| now.saturating_add(t))
    }

    /// Whether the newest is served first now.
    fn newest_first(&self, waiters: &VecDeque<Arc<Waiter>>, now: u64) -> bool {
        match self.max_age {
            Some(age) => waiters
                .iter()
                .find(|w| w.is_waiting())
                .is_some_and(|w| now.saturating_sub(w.enqueued) > age),
            None => self.lifo,
        }
    }

    /// The index of the waiter to serve next among those `admissible`
    /// accepts; see the module documentation.
    pub(crate) fn pick(
        &self,
        waiters: &VecDeque<Arc<Waiter>>,
        now: u64,
        mut admissible: impl FnMut(&Waiter) -> bool,
    ) -> Option<usize> {
        let newest_first = self.newest_first(waiters, now);
        let mut best: Option<(usize, u8)> = None;
        let n = waiters.len();
        for k in 0..n {
            let i = if newest_first { n - 1 - k } else { k };
            let w = &waiters[i];
            if !w.is_waiting() || w.deadline <= now {
                continue;
            }
            if best.is_some_and(|(_, p)| w.priority <= p) {
                continue;
            }
            if admissible(w) {
                best = Some((i, w.priority));
            }
        }
        best.map(|(i, _)| i)
    }

    /// The waiter a newcomer of `priority` displaces from a full queue: the
    /// lowest priority below `priority`, the one served last among equals.
    pub(crate) fn victim(
        &self,
        waiters: &VecDeque<Arc<Waiter>>,
        now: u64,
        priority: u8,
    ) -> Option<usize> {
        let newest_first = self.newest_first(waiters, now);
        let mut worst: Option<(usize, u8)> = None;
        let n = waiters.len();
        for k in 0..n {
            // Walk from the one served last to the one served first.
            let i = if newest_first { k } else { n - 1 - k };
            let w = &waiters[i];
            if !w.is_waiting() || w.priority >= priority {
                continue;
            }
            if worst.is_none_or(|(_, p)| w.priority < p) {
                worst = Some((i, w.priority));
            }
        }
        worst.map(|(i, _)| i)
    }
}
