//! Partitions: named shares of the limit, guaranteed when contended, lending
//! what they leave idle.
//!
//! # Algorithm
//!
//! The global limit `L` is hard. Partition `j` has a share `pct_j` (the
//! shares sum to at most 1; partition 0, `default`, takes the remainder, so
//! the shares always sum to 1) and, with the reserve fraction `ρ`, a
//! reservation `R_j`: the `⌊ρ·L⌋` reserved slots split by largest remainder
//! of `ρ·L·pct_j` (ties to the larger share, then the lower index). A
//! partition's claim is `c_j = max(used_j, R_j)`. Partition `i` is admitted
//! iff
//!
//! ```text
//! Σ used < L  and  (used_i < R_i  or  Σ c_j < L)
//! ```
//!
//! so a partition under its reservation gets in whenever the global limit
//! has room, and borrowing uses only unreserved capacity. `ρ = 0` is greedy
//! sharing, `ρ = 1` hard isolation; a share of 0 is best effort: it gets
//! nothing once the others claim everything. Borrowed permits are not
//! preempted: the wait queue hands released permits to the waiters the rule
//! admits, so a partition below its reservation gets the next free permit.
//! The rule is the one recommended in `spec/peer-algorithms.md` §7 (it fixes
//! Netflix concurrency-limits #234, where partitions overshoot the limit, and
//! avoids #233, whose global CAS voids the shares).
//!
//! # Implementation details
//!
//! | word      | bits                   | meaning                                  |
//! |-----------|------------------------|------------------------------------------|
//! | `used`    | `16·j .. 16·j + 16`    | permits held by partition `j` (0 ..= 3)  |
//! | `reserve` | `16·j .. 16·j + 16`    | `R_j` for the live limit                 |
//!
//! Admission is one CAS on `used` (load, decode, apply the pure rule, CAS);
//! release is one `fetch_sub` of the partition's field. Because every
//! partition's count is in the one word, no interleaving can admit past the
//! rule — the race of #234 needs two words. The limit itself stays in the
//! pool's state word; `reserve` is rewritten (under the queue lock) right
//! after each limit change, so an admission racing with a change may pair
//! the new `L` with the old reservations. That admission is the same as one
//! made just before the change: `Σ used < L` is always checked against the
//! live limit, so the global limit is never exceeded (a decrease becomes
//! debt, as without partitions). With four 16-bit fields a partitioned
//! limiter's `max_limit` is at most [`MAX_PARTITIONED_LIMIT`].

use std::fmt;

use crate::error::ConfigError;
use crate::sync::{AtomicU64, Ordering};

/// Partitions a limiter can have, the implicit `default` one included.
pub const MAX_PARTITIONS: usize = 4;
/// The largest `max_limit` of a partitioned limiter (four 16-bit counts
/// share one 64-bit word).
pub const MAX_PARTITIONED_LIMIT: usize = u16::MAX as usize;
/// The default reserve fraction `ρ`: half of each share is guaranteed, the
/// rest may be lent.
pub const DEFAULT_RESERVE: f64 = 0.5;
/// The name of the partition that takes the share the named ones leave, and
/// every request without a class.
pub const DEFAULT_PARTITION: &str = "default";

const FIELD: u64 = 0xFFFF;

#[inline]
fn field(word: u64, j: usize) -> u64 {
    (word >> (16 * j)) & FIELD
}

#[inline]
fn unit(j: usize) -> u64 {
    1 << (16 * j)
}

/// Checks that limit `n`, given as option `field`, fits a partitioned pool
/// (at most [`MAX_PARTITIONED_LIMIT`]): at build, at a reconfiguration and
/// for a forced limit.
pub(crate) fn check_partitioned_limit(field: &'static str, n: usize) -> Result<(), ConfigError> {
    if n > MAX_PARTITIONED_LIMIT {
        return Err(ConfigError::new(field, n, "1 ..= 65535 with partitions"));
    }
    Ok(())
}

/// Named shares of a limiter's limit.
///
/// Each [`share`](Partitions::share) names a partition and its fraction of
/// the limit; the fractions may sum to at most 1, and the rest goes to the
/// implicit partition `"default"`, which also takes every request that names
/// no partition (a share of 0 there makes it best effort). The
/// [`reserve`](Partitions::reserve) fraction of each share is guaranteed
/// under contention; the rest of the limit is lent to whoever asks first.
///
/// # Examples
///
/// ```
/// use adaptx::{Limiter, Partitions};
///
/// let limiter = Limiter::builder()
///     .initial_limit(10)
///     .partitions(Partitions::new().share("critical", 0.7).share("batch", 0.3).reserve(1.0))
///     .build()?;
/// let batch = limiter.class("batch")?;
/// let critical = limiter.class("critical")?;
/// // Hard isolation (reserve 1): batch gets its 3, critical its 7.
/// let held: Vec<_> = (0..3).map(|_| limiter.try_acquire_as(batch).unwrap()).collect();
/// assert!(limiter.try_acquire_as(batch).is_err());
/// assert!(limiter.try_acquire_as(critical).is_ok());
/// # drop(held);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Partitions {
    shares: Vec<(String, f64)>,
    reserve: f64,
}

impl Default for Partitions {
    fn default() -> Self {
        Self::new()
    }
}

impl Partitions {
    /// No named partition yet, reserve [`DEFAULT_RESERVE`].
    pub fn new() -> Self {
        Self {
            shares: Vec::new(),
            reserve: DEFAULT_RESERVE,
        }
    }

    /// Adds partition `name` with `fraction` of the limit. Allowed: a
    /// non-empty name other than `"default"`, not used twice, a fraction in
    /// `[0, 1]`; at most 3 named partitions, fractions summing to at most 1.
    pub fn share(mut self, name: impl Into<String>, fraction: f64) -> Self {
        self.shares.push((name.into(), fraction));
        self
    }

    /// The fraction `ρ` of each share that is reserved for it under
    /// contention. Default [`DEFAULT_RESERVE`]. Allowed: `[0, 1]`.
    pub fn reserve(mut self, rho: f64) -> Self {
        self.reserve = rho;
        self
    }

    /// Validates and builds the engine's table.
    pub(crate) fn table(&self, max_limit: usize) -> Result<Table, ConfigError> {
        if self.shares.is_empty() {
            return Err(ConfigError::new(
                "partitions",
                "none",
                "at least one named share",
            ));
        }
        if self.shares.len() >= MAX_PARTITIONS {
            return Err(ConfigError::new(
                "partitions",
                self.shares.len(),
                "at most 3 named partitions (plus \"default\")",
            ));
        }
        let rho = crate::error::closed_closed(
            "partitions.reserve",
            self.reserve,
            0.0,
            1.0,
            "0 <= value <= 1",
        )?;
        let mut names = vec![DEFAULT_PARTITION.to_owned()];
        let mut pct = [0.0; MAX_PARTITIONS];
        for (j, (name, f)) in self.shares.iter().enumerate() {
            if name.is_empty() || names.iter().any(|n| n == name) {
                return Err(ConfigError::new(
                    "partitions.share",
                    name,
                    "a non-empty name, not \"default\", each used once",
                ));
            }
            pct[j + 1] = crate::error::closed_closed(
                "partitions.share",
                *f,
                0.0,
                1.0,
                "0 <= fraction <= 1",
            )?;
            names.push(name.clone());
        }
        let sum: f64 = pct.iter().sum();
        if sum > 1.0 + 1e-9 {
            return Err(ConfigError::new(
                "partitions",
                format_args!("shares summing to {:.1} %", sum * 100.0),
                "shares summing to at most 100 %",
            ));
        }
        pct[0] = (1.0 - sum).max(0.0);
        check_partitioned_limit("max_limit", max_limit)?;
        Ok(Table {
            used: AtomicU64::new(0),
            reserve: AtomicU64::new(0),
            rule: Rule {
                pct,
                count: names.len(),
                rho,
            },
            names,
        })
    }
}

/// A request's class: the partition it counts against and its priority.
///
/// Made by [`Limiter::class`](crate::Limiter::class), which checks the
/// partition's name; [`Class::default`] is the `"default"` partition at
/// priority 0. Higher priorities are served first from the wait queue, and
/// the lowest priority is shed first when the queue is full.
/// A class made by another limiter, whose partition this one does not have,
/// counts against `"default"`.
///
/// # Examples
///
/// ```
/// let limiter = adaptx::Limiter::new();
/// let urgent = adaptx::Class::default().with_priority(10);
/// assert_eq!(urgent.priority(), 10);
/// limiter.try_acquire_as(urgent)?.success();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Class {
    pub(crate) slot: u8,
    pub(crate) priority: u8,
}

impl Class {
    /// The same class with `priority` (0 is the lowest and the default).
    #[must_use]
    pub fn with_priority(mut self, priority: u8) -> Self {
        self.priority = priority;
        self
    }

    /// The priority.
    pub fn priority(self) -> u8 {
        self.priority
    }
}

/// [`Limiter::class`](crate::Limiter::class) was given a partition name the
/// limiter does not have.
///
/// # Examples
///
/// ```
/// use adaptx::{Limiter, Partitions};
///
/// let limiter = Limiter::builder().partitions(Partitions::new().share("live", 0.8)).build()?;
/// let err = limiter.class("batch").unwrap_err();
/// assert_eq!(err.name(), "batch");
/// assert_eq!(err.to_string(), "unknown partition \"batch\" (known: default, live)");
/// # Ok::<(), adaptx::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPartition {
    name: String,
    known: String,
}

impl UnknownPartition {
    pub(crate) fn new(name: &str, known: impl Into<String>) -> Self {
        Self {
            name: name.to_owned(),
            known: known.into(),
        }
    }

    /// The name asked for.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for UnknownPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown partition {:?} (known: {})",
            self.name, self.known
        )
    }
}

impl std::error::Error for UnknownPartition {}

/// The pure admission rule (see the module documentation).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rule {
    pct: [f64; MAX_PARTITIONS],
    count: usize,
    rho: f64,
}

impl Rule {
    /// `R_j` for limit `l`, packed as in the `reserve` word.
    ///
    /// Allocates nothing: a limit change runs on the completion that closes
    /// a window.
    pub(crate) fn reserves(&self, l: usize) -> u64 {
        let n = self.count;
        let total = self.rho * l as f64;
        let quota: [f64; MAX_PARTITIONS] = std::array::from_fn(|j| total * self.pct[j]);
        // Rounding noise must not eat a slot: 0.5 · 10 · 0.3 is 1.4999…
        let slots = (total + 1e-9).floor() as u64;
        let mut r: [u64; MAX_PARTITIONS] = std::array::from_fn(|j| {
            if j < n {
                (quota[j] + 1e-9).floor() as u64
            } else {
                0
            }
        });
        let mut left = slots.saturating_sub(r.iter().sum());
        let mut order: [usize; MAX_PARTITIONS] = std::array::from_fn(|j| j);
        let order = &mut order[..n];
        order.sort_unstable_by(|&a, &b| {
            let (ra, rb) = (quota[a] - r[a] as f64, quota[b] - r[b] as f64);
            rb.total_cmp(&ra)
                .then(self.pct[b].total_cmp(&self.pct[a]))
                .then(a.cmp(&b))
        });
        for &j in order.iter() {
            if left == 0 {
                break;
            }
            if quota[j] - r[j] as f64 > 1e-9 {
                r[j] += 1;
                left -= 1;
            }
        }
        r.iter()
            .enumerate()
            .fold(0, |w, (j, &x)| w | (x.min(FIELD) << (16 * j)))
    }

    /// Whether partition `i` may take a permit with `used`, reservations
    /// `reserve` and limit `l`. The fields of the partitions the table does
    /// not have are 0 in both words, so the sums run over all
    /// [`MAX_PARTITIONS`] fields: a fixed count the compiler unrolls.
    #[inline]
    pub(crate) fn admits(&self, used: u64, reserve: u64, l: usize, i: usize) -> bool {
        let mut sum = 0;
        let mut claims = 0;
        for j in 0..MAX_PARTITIONS {
            let (u, r) = (field(used, j), field(reserve, j));
            sum += u;
            claims += u.max(r);
        }
        let l = l as u64;
        sum < l && (field(used, i) < field(reserve, i) || claims < l)
    }
}

/// The partition table of a pool. See the module documentation.
#[derive(Debug)]
pub(crate) struct Table {
    used: AtomicU64,
    reserve: AtomicU64,
    rule: Rule,
    names: Vec<String>,
}

impl Table {
    /// The slot of partition `name`.
    pub(crate) fn slot(&self, name: &str) -> Result<u8, UnknownPartition> {
        match self.names.iter().position(|n| n == name) {
            Some(j) => Ok(j as u8),
            None => Err(UnknownPartition::new(name, self.names.join(", "))),
        }
    }

    /// The partition of slot `i`: a slot this table does not have (a
    /// [`Class`] made by another limiter) counts as `default`'s, the same on
    /// admission and on release.
    #[inline]
    fn index(&self, i: usize) -> usize {
        if i < self.rule.count { i } else { 0 }
    }

    /// Permits held by partition `j`.
    pub(crate) fn used(&self, j: usize) -> usize {
        field(self.used.load(Ordering::Acquire), self.index(j)) as usize
    }

    /// Reservations for limit `l` from now on. Called under the queue lock
    /// right after the pool's limit changes.
    pub(crate) fn set_limit(&self, l: usize) {
        self.reserve.store(self.rule.reserves(l), Ordering::Release);
    }

    /// Whether partition `i` would be admitted now under limit `l`.
    pub(crate) fn admissible(&self, i: usize, l: usize) -> bool {
        let i = self.index(i);
        self.rule.admits(
            self.used.load(Ordering::Acquire),
            self.reserve.load(Ordering::Acquire),
            l,
            i,
        )
    }

    /// Takes a permit for partition `i` under limit `l` if the rule admits
    /// it: one CAS on the packed counts.
    #[inline]
    pub(crate) fn try_take(&self, i: usize, l: usize) -> bool {
        let i = self.index(i);
        let reserve = self.reserve.load(Ordering::Acquire);
        let mut used = self.used.load(Ordering::Acquire);
        loop {
            if !self.rule.admits(used, reserve, l, i) {
                return false;
            }
            match self.used.compare_exchange_weak(
                used,
                used + unit(i),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(actual) => used = actual,
            }
        }
    }

    /// Whether partition `i` can count one more permit whatever the rule
    /// says (its 16-bit field is not full).
    pub(crate) fn has_room_over(&self, i: usize) -> bool {
        field(self.used.load(Ordering::Acquire), self.index(i)) < FIELD
    }

    /// Takes a permit for partition `i` whatever the rule says (admission
    /// above the limit in shadow and bypass mode): one CAS, refused only
    /// when the partition's field is full ([`MAX_PARTITIONED_LIMIT`]
    /// permits), so a count never spills into the next field.
    pub(crate) fn take_over(&self, i: usize) -> bool {
        let i = self.index(i);
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                (field(used, i) < FIELD).then(|| used + unit(i))
            })
            .is_ok()
    }

    /// Returns a permit of partition `i`.
    #[inline]
    pub(crate) fn give(&self, i: usize) {
        let i = self.index(i);
        let prev = self.used.fetch_sub(unit(i), Ordering::AcqRel);
        debug_assert!(field(prev, i) > 0, "partition release without a permit");
    }
}

#[cfg(all(test, not(adaptx_loom)))]
mod tests {
    use super::*;

    fn table(shares: &[(&str, f64)], rho: f64, l: usize) -> Table {
        let mut p = Partitions::new().reserve(rho);
        for (n, f) in shares {
            p = p.share(*n, *f);
        }
        let t = p.table(1000).expect("valid");
        t.set_limit(l);
        t
    }

    fn reserves(t: &Table) -> Vec<u64> {
        let w = t.reserve.load(Ordering::Relaxed);
        (0..t.rule.count).map(|j| field(w, j)).collect()
    }

    fn fill(t: &Table, slot: usize, l: usize) -> usize {
        let mut n = 0;
        while t.try_take(slot, l) {
            n += 1;
        }
        n
    }

    #[test]
    fn partition_reserves_split_by_largest_remainder_spec_vectors() {
        // spec §7: L = 10, batch 0.3, live 0.7 (slots 1, 2; default 0).
        let shares = [("batch", 0.3), ("live", 0.7)];
        assert_eq!(reserves(&table(&shares, 0.0, 10)), [0, 0, 0]);
        assert_eq!(reserves(&table(&shares, 0.5, 10)), [0, 1, 4]);
        assert_eq!(reserves(&table(&shares, 1.0, 10)), [0, 3, 7]);
        // Shrink to 4 with ρ = 0.5: (1, 1), the spare slot to batch's 0.6.
        assert_eq!(reserves(&table(&shares, 0.5, 4)), [0, 1, 1]);
    }

    #[test]
    fn partition_spec_vectors_batch_alone_then_live() {
        let shares = [("batch", 0.3), ("live", 0.7)];
        for (rho, batch_max, live_then) in [(0.0, 10, 0), (0.5, 6, 4), (1.0, 3, 7)] {
            let t = table(&shares, rho, 10);
            assert_eq!(fill(&t, 1, 10), batch_max, "rho {rho}: batch alone");
            assert_eq!(fill(&t, 2, 10), live_then, "rho {rho}: then live");
        }
    }

    #[test]
    fn partition_shrink_stops_admission_until_under_the_new_limit() {
        let t = table(&[("batch", 0.3), ("live", 0.7)], 0.5, 10);
        assert_eq!(fill(&t, 1, 10), 6);
        t.set_limit(4);
        assert!(!t.try_take(2, 4) && !t.try_take(1, 4));
        for _ in 0..3 {
            t.give(1);
        }
        // batch 3: live is under its reservation (0 < 1), batch claims 3 + 1.
        assert!(!t.try_take(1, 4));
        assert!(t.try_take(2, 4));
    }

    #[test]
    fn partition_best_effort_gets_nothing_once_others_claim_everything() {
        // default has share 0: best effort.
        let t = table(&[("critical", 0.7), ("batch", 0.3)], 0.5, 10);
        // R = (0, 4, 1): critical takes its 4 and borrows all but batch's 1.
        assert_eq!(fill(&t, 1, 10), 9);
        assert_eq!(fill(&t, 0, 10), 0, "batch's reservation is not lent");
        assert_eq!(fill(&t, 2, 10), 1);
    }

    #[test]
    fn partition_config_errors_name_the_field() {
        let e = Partitions::new()
            .share("a", 0.7)
            .share("b", 0.5)
            .table(100)
            .unwrap_err();
        assert_eq!(e.field(), "partitions");
        assert!(e.to_string().contains("120.0 %"), "{e}");
        let e = Partitions::new()
            .share("default", 0.5)
            .table(100)
            .unwrap_err();
        assert_eq!(e.field(), "partitions.share");
        let e = Partitions::new().share("a", 0.5).share("a", 0.1).table(100);
        assert_eq!(e.unwrap_err().field(), "partitions.share");
        let e = Partitions::new().share("a", f64::NAN).table(100);
        assert_eq!(e.unwrap_err().field(), "partitions.share");
        let e = Partitions::new().share("a", 0.5).reserve(1.5).table(100);
        assert_eq!(e.unwrap_err().field(), "partitions.reserve");
        let e = Partitions::new().table(100).unwrap_err();
        assert_eq!(e.field(), "partitions");
        let four = Partitions::new()
            .share("a", 0.1)
            .share("b", 0.1)
            .share("c", 0.1)
            .share("d", 0.1);
        assert_eq!(four.table(100).unwrap_err().field(), "partitions");
        let e = Partitions::new().share("a", 0.5).table(70_000).unwrap_err();
        assert_eq!(e.field(), "max_limit");
    }

    #[test]
    fn partition_foreign_slot_counts_as_default_on_admission_and_release() {
        let t = table(&[("critical", 0.7)], 0.0, 2);
        assert!(t.try_take(200, 2));
        assert_eq!(t.used(0), 1);
        assert!(t.try_take(1, 2));
        assert!(!t.try_take(3, 2), "the limit holds for a foreign slot");
        t.give(200);
        assert_eq!((t.used(0), t.used(1)), (0, 1));
    }

    #[test]
    fn partition_unknown_name_is_an_error_naming_it() {
        let t = table(&[("critical", 0.7)], 0.5, 10);
        assert_eq!(t.slot("critical"), Ok(1));
        assert_eq!(t.slot("default"), Ok(0));
        let e = t.slot("batch").unwrap_err();
        assert_eq!(e.name(), "batch");
        assert_eq!(
            e.to_string(),
            "unknown partition \"batch\" (known: default, critical)"
        );
    }
}
