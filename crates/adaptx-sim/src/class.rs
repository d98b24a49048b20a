//! Request classes: each open-demand arrival belongs to a class (`[[class]]`,
//! a share of the demand that may change over the run) that names its
//! limiter partition and priority; the limiter's wait queue and partitions
//! (`[limiter.queue]`, `[limiter] partitions`) are the options they meet.
//!
//! An arrival's class is drawn from the classes' shares at its arrival time
//! with its own seeded stream, so a class's demand is a Poisson stream of
//! rate `share × rate`: a surge of one class is a schedule of the demand's
//! rate together with a schedule of the shares.

use std::time::Duration;

use adaptx::{Builder, Partitions, QueueOrder, QueuePolicy};
use serde::Deserialize;

use crate::scenario::{DemandKind, Scenario};
use crate::time::Nanos;

/// One class of requests (`[[class]]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassSpec {
    /// Its name, for the report.
    pub name: String,
    /// Its fraction of each client's arrivals at time zero (`0 ..= 1`; the
    /// classes' shares sum to 1).
    pub share: f64,
    /// The limiter partition its requests count against (default
    /// `"default"`).
    pub partition: Option<String>,
    /// Its priority in the limiter's wait queue (default 0, the lowest).
    #[serde(default)]
    pub priority: u8,
    /// Changes of its share, written `[[class.schedule]]`, in time order.
    #[serde(default)]
    pub schedule: Vec<ShareChange>,
}

/// A class's share from `at` on.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShareChange {
    /// When the share changes (a step).
    pub at: Nanos,
    /// The new share.
    pub share: f64,
}

impl ClassSpec {
    /// The share in force at `t` (ns).
    pub(crate) fn share_at(&self, t: u64) -> f64 {
        self.schedule
            .iter()
            .rev()
            .find(|c| c.at.0 <= t)
            .map_or(self.share, |c| c.share)
    }
}

/// The class of an arrival at `t`, from a uniform draw `u` in `[0, 1)`.
pub(crate) fn pick(classes: &[ClassSpec], t: u64, u: f64) -> usize {
    let mut acc = 0.0;
    for (k, c) in classes.iter().enumerate() {
        acc += c.share_at(t);
        if u < acc {
            return k;
        }
    }
    classes.len().saturating_sub(1)
}

/// Checks the classes of `sc`.
pub(crate) fn validate(sc: &Scenario) -> Result<(), String> {
    if sc.classes.is_empty() {
        return Ok(());
    }
    if sc.demand.kind != DemandKind::Open {
        return Err("class: classes need an open demand (demand.kind = \"open\")".into());
    }
    if sc.classes.len() > 16 {
        return Err(format!(
            "class: {} classes: expected at most 16",
            sc.classes.len()
        ));
    }
    let partitions: Vec<&str> = sc
        .limiter
        .partitions
        .iter()
        .flatten()
        .map(|p| p.name.as_str())
        .collect();
    let mut instants = vec![0];
    for (k, c) in sc.classes.iter().enumerate() {
        let at = format!("class[{k}]");
        if c.name.is_empty() || sc.classes[..k].iter().any(|o| o.name == c.name) {
            return Err(format!(
                "{at}.name: {:?}: expected a non-empty, unique name",
                c.name
            ));
        }
        crate::bounds::f64_in_range(&format!("{at}.share"), c.share, 0.0, 1.0)?;
        if let Some(p) = &c.partition {
            if p != adaptx::DEFAULT_PARTITION && !partitions.contains(&p.as_str()) {
                return Err(format!(
                    "{at}.partition: {p:?}: expected \"default\" or a partition of [limiter] partitions"
                ));
            }
        }
        let mut last = Nanos(0);
        for (j, s) in c.schedule.iter().enumerate() {
            let at = format!("{at}.schedule[{j}]");
            crate::bounds::f64_in_range(&format!("{at}.share"), s.share, 0.0, 1.0)?;
            if s.at < last || s.at >= sc.duration {
                return Err(format!(
                    "{at}.at: {}: expected in time order and before the end of the run ({})",
                    s.at, sc.duration
                ));
            }
            last = s.at;
            instants.push(s.at.0);
        }
    }
    for t in instants {
        let sum: f64 = sc.classes.iter().map(|c| c.share_at(t)).sum();
        if (sum - 1.0).abs() > 1e-6 {
            return Err(format!(
                "class: the shares sum to {sum} at {}: expected 1",
                Nanos(t)
            ));
        }
    }
    Ok(())
}

/// The order of the limiter's wait queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OrderSpec {
    /// Oldest first.
    Fifo,
    /// Newest first.
    Lifo,
    /// Oldest first while the oldest waiter is at most `max_age` old.
    AdaptiveLifo,
}

/// The limiter's wait queue (`[limiter.queue]`): open arrivals that find no
/// permit wait in it (until granted, refused, or their client timeout)
/// instead of being shed.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueSpec {
    /// `QueuePolicy::max_waiters` (default unbounded).
    pub max_waiters: Option<usize>,
    /// `QueuePolicy::timeout` (default none: the client timeout still ends
    /// a wait).
    pub timeout: Option<Nanos>,
    /// The order (default `fifo`).
    pub order: Option<OrderSpec>,
    /// `adaptive_lifo` only, required there: the oldest waiter's age beyond
    /// which the newest is served.
    pub max_age: Option<Nanos>,
}

impl QueueSpec {
    /// adaptx's policy.
    pub(crate) fn policy(&self) -> Result<QueuePolicy, String> {
        let mut p = QueuePolicy::new();
        if let Some(n) = self.max_waiters {
            p = p.max_waiters(n);
        }
        if let Some(t) = self.timeout {
            p = p.timeout(Duration::from_nanos(t.0));
        }
        let order = match (self.order.unwrap_or(OrderSpec::Fifo), self.max_age) {
            (OrderSpec::Fifo, None) => QueueOrder::Fifo,
            (OrderSpec::Lifo, None) => QueueOrder::Lifo,
            (OrderSpec::AdaptiveLifo, Some(age)) => QueueOrder::AdaptiveLifo {
                max_age: Duration::from_nanos(age.0),
            },
            (OrderSpec::AdaptiveLifo, None) => {
                return Err("max_age: required with order \"adaptive_lifo\"".into());
            }
            (_, Some(_)) => {
                return Err("max_age: only with order \"adaptive_lifo\"".into());
            }
        };
        Ok(p.order(order))
    }
}

/// One named share of the limit (`partitions = [{ name, share }]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionSpec {
    /// The partition's name.
    pub name: String,
    /// Its fraction of the limit.
    pub share: f64,
}

/// `b` with the queue and the partitions of a limiter spec.
pub(crate) fn configure(
    mut b: Builder,
    queue: Option<&QueueSpec>,
    partitions: Option<&[PartitionSpec]>,
    reserve: Option<f64>,
) -> Builder {
    if let Some(q) = queue {
        // A bad queue is reported by validation, which builds the policy
        // first; here it only can be valid.
        if let Ok(p) = q.policy() {
            b = b.queue(p);
        }
    }
    if let Some(list) = partitions {
        let mut p = Partitions::new();
        for s in list {
            p = p.share(s.name.clone(), s.share);
        }
        if let Some(r) = reserve {
            p = p.reserve(r);
        }
        b = b.partitions(p);
    }
    b
}
