//! The [`KeyedRateLimiter`]: one bucket per key, one adaptive rate.
//!
//! # Implementation details
//!
//! Buckets live in [`SHARDS`] shards, each a `Mutex<HashMap>` on its own
//! cache lines; a key's shard comes from the top bits of a hash of the key
//! under a per-limiter random seed. A check locks one shard, never a global
//! lock. The number of tracked keys is one atomic counter: a new key
//! reserves a slot with a CAS loop bounded by `max_keys`, and every eviction
//! gives its slot back.
//!
//! Idle keys (unused for at least the TTL) are evicted lazily, in two ways:
//!
//! 1. A new key sweeps its own shard first if that shard was last swept at
//!    least one TTL ago: `O(shard)` at most once per TTL per shard, which
//!    keeps memory proportional to the keys active within a TTL.
//! 2. A new key that finds the table full sweeps every shard, one lock at a
//!    time, unless `sweep_not_before` says no key can have expired yet. The
//!    sweeper records the earliest expiry among the keys it kept; keys can
//!    only be touched (expiring later) or added (expiring after that), so
//!    the value stays a lower bound, and a flood of new keys against a full
//!    table of live ones costs one atomic load each, not a sweep each. The
//!    sweeper claims the sweep by swapping the gate to `u64::MAX`.
//!
//! A new key that still finds no slot is admitted from the shared overflow
//! bucket.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, Hash, RandomState};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::bucket::Bucket;
use super::engine::Core;
use super::{RateLimited, RatePermit, RateStats, lock};
use crate::sync::Padded;

/// Number of shards of the key table.
const SHARDS: usize = 16;

/// One shard of the key table.
#[derive(Debug)]
struct Shard<K> {
    map: HashMap<K, Bucket>,
    /// When this shard was last swept of idle keys.
    last_sweep: u64,
}

/// A rate limiter with one token bucket per key (client IP, API key, user)
/// and one adaptive rate shared by every key.
///
/// Each key gets its own bucket, so one client exhausting its tokens does
/// not touch another's. Every bucket refills at the *same* rate, the one the
/// controller moves from the feedback of all keys' requests (see
/// [`RateLimiter`](crate::RateLimiter)'s `# Algorithm`). The rate is shared
/// because the capacity it tracks is shared: every key's requests land on
/// the same backend, so its latency and errors are caused by all keys
/// together; a controller per key would see the same signal with less data,
/// and a quiet key would never learn that the backend is overloaded. A
/// rejection or an emptied bucket of *any* key marks the interval as
/// binding. For one bucket for everyone, use
/// [`RateLimiter`](crate::RateLimiter).
///
/// A cheap handle: clones share one limiter. `Send + Sync` when `K: Send`.
///
/// # Eviction and the key bound
///
/// A key unused for at least [`key_ttl`](crate::RateLimiterBuilder::key_ttl) may be
/// evicted; it comes back with a full bucket. Eviction is lazy (no
/// background task): a new key sweeps its shard at most once per TTL, and a
/// full table is swept when a new key needs a slot; [`evict_idle`]
/// sweeps on demand.
///
/// At most [`max_keys`](crate::RateLimiterBuilder::max_keys) keys have a bucket of
/// their own. **When the table is full and no key is idle, a new key is
/// admitted from one shared overflow bucket**, refilled at the same rate,
/// until a slot frees. So a flood of new keys never evicts active clients,
/// never grows memory past the bound, and never locks new clients out
/// entirely: together they share one key's allowance.
///
/// [`evict_idle`]: KeyedRateLimiter::evict_idle
///
/// # Examples
///
/// ```
/// use adaptx::{ManualClock, RateLimiter};
///
/// let limiter = RateLimiter::builder()
///     .initial_rate(10)
///     .clock(ManualClock::new())
///     .build_keyed::<String>()?;
/// for _ in 0..10 {
///     limiter.try_acquire("alice")?.success();
/// }
/// assert!(limiter.try_acquire("alice").is_err());
/// // Bob has a bucket of his own.
/// assert!(limiter.try_acquire("bob").is_ok());
/// assert_eq!(limiter.len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct KeyedRateLimiter<K> {
    inner: Arc<Inner<K>>,
}

struct Inner<K> {
    core: Arc<Core>,
    hasher: RandomState,
    shards: Box<[Padded<Mutex<Shard<K>>>; SHARDS]>,
    overflow: Mutex<Bucket>,
    len: AtomicUsize,
    max_keys: usize,
    ttl: u64,
    sweep_not_before: AtomicU64,
}

impl<K> Clone for KeyedRateLimiter<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K> fmt::Debug for KeyedRateLimiter<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedRateLimiter")
            .field("rate", &self.inner.core.rate())
            .field("keys", &self.len())
            .field("max_keys", &self.inner.max_keys)
            .finish_non_exhaustive()
    }
}

impl<K> KeyedRateLimiter<K> {
    pub(crate) fn from_core(core: Core, ttl: u64, max_keys: usize) -> Self {
        let now = core.now();
        let overflow = core.new_bucket(now);
        Self {
            inner: Arc::new(Inner {
                core: Arc::new(core),
                hasher: RandomState::new(),
                shards: Box::new(std::array::from_fn(|_| {
                    Padded(Mutex::new(Shard {
                        map: HashMap::new(),
                        last_sweep: now,
                    }))
                })),
                overflow: Mutex::new(overflow),
                len: AtomicUsize::new(0),
                max_keys,
                ttl,
                sweep_not_before: AtomicU64::new(0),
            }),
        }
    }

    /// The current rate, in requests per second, of every key's bucket.
    pub fn current_rate(&self) -> u64 {
        self.inner.core.rate()
    }

    /// A snapshot of the counters, over all keys.
    pub fn stats(&self) -> RateStats {
        self.inner.core.stats()
    }

    /// The admission mode (see [`Mode`](crate::Mode)).
    pub fn mode(&self) -> crate::Mode {
        self.inner.core.mode()
    }

    /// Switches the admission mode at once; returns the mode it replaces.
    ///
    /// In [`Mode::Shadow`](crate::Mode::Shadow) and
    /// [`Mode::Bypass`](crate::Mode::Bypass) a request that finds its bucket
    /// empty is admitted anyway (also from the shared overflow bucket), counted in
    /// [`RateStats::would_reject`](crate::RateStats::would_reject) (and in
    /// `admitted`), and its permit records its outcome as any other; the
    /// bucket still gives the tokens it has. Shadow keeps adjusting the
    /// rate; bypass freezes it.
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptx::{ManualClock, Mode, RateLimiter};
    ///
    /// let limiter = RateLimiter::builder()
    ///     .initial_rate(10)
    ///     .clock(ManualClock::new())
    ///     .build_keyed::<String>()?;
    /// limiter.set_mode(Mode::Shadow);
    /// for _ in 0..11 {
    ///     limiter.try_acquire("alice")?.success();
    /// }
    /// let stats = limiter.stats();
    /// assert_eq!((stats.admitted, stats.would_reject, stats.rejected), (11, 1, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_mode(&self, mode: crate::Mode) -> crate::Mode {
        self.inner.core.set_mode(mode)
    }

    /// Keys with a bucket of their own.
    pub fn len(&self) -> usize {
        self.inner.len.load(Ordering::Acquire)
    }

    /// Whether no key has a bucket of its own.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Evicts every key unused for at least the TTL, now; returns how many.
    ///
    /// Eviction also happens lazily as new keys arrive; call this to
    /// release memory after a burst of clients has gone.
    pub fn evict_idle(&self) -> usize {
        let now = self.inner.core.now();
        let (evicted, next) = self.inner.sweep_all(now);
        self.inner.sweep_not_before.store(next, Ordering::Release);
        evicted
    }
}

impl<K: Hash + Eq> KeyedRateLimiter<K> {
    /// Admits a request for `key` if its bucket holds a token, first
    /// adjusting the shared rate if the adjustment interval is over.
    ///
    /// An unknown key gets a full bucket, or the overflow bucket if the table
    /// is full of active keys (see the type's docs).
    ///
    /// # Errors
    ///
    /// [`RateLimited`], with the time until a token is available in the
    /// key's bucket, if it holds less than one token.
    pub fn try_acquire<Q>(&self, key: &Q) -> Result<RatePermit, RateLimited>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let inner = &*self.inner;
        let core = &inner.core;
        let now = core.now();
        core.maybe_adjust(now);
        let rate = core.rate();
        let shard = &inner.shards[inner.shard_of(key)];
        {
            let mut s = lock(shard);
            if let Some(bucket) = s.map.get_mut(key) {
                return core.admit(bucket, now, rate);
            }
            inner.sweep_shard_if_due(&mut s, now);
            if inner.reserve() {
                return inner.insert(&mut s, key, now, rate);
            }
        }
        // The table is full: free idle slots everywhere, then look again
        // (another caller may have added this key meanwhile).
        inner.sweep_all_if_due(now);
        let mut s = lock(shard);
        if let Some(bucket) = s.map.get_mut(key) {
            return core.admit(bucket, now, rate);
        }
        if inner.reserve() {
            return inner.insert(&mut s, key, now, rate);
        }
        drop(s);
        core.admit(&mut lock(&inner.overflow), now, rate)
    }
}

impl<K> Inner<K> {
    fn shard_of<Q: Hash + ?Sized>(&self, key: &Q) -> usize {
        // The top bits: the map inside the shard uses its own seed, so the
        // bits that chose the shard do not also cluster its buckets.
        (self.hasher.hash_one(key) >> (64 - SHARDS.trailing_zeros())) as usize
    }

    /// Takes a key slot if one is free.
    fn reserve(&self) -> bool {
        self.len
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_keys).then_some(n + 1)
            })
            .is_ok()
    }

    /// Whether a bucket last used at `last` is idle at `now`.
    fn idle(&self, last: u64, now: u64) -> bool {
        now.saturating_sub(last) >= self.ttl
    }

    /// Removes the idle keys of one shard; returns how many.
    fn sweep(&self, shard: &mut Shard<K>, now: u64) -> usize {
        let before = shard.map.len();
        shard.map.retain(|_, b| !self.idle(b.last(), now));
        shard.last_sweep = now;
        let evicted = before - shard.map.len();
        if evicted > 0 {
            self.len.fetch_sub(evicted, Ordering::AcqRel);
        }
        evicted
    }

    fn sweep_shard_if_due(&self, shard: &mut Shard<K>, now: u64) {
        if self.idle(shard.last_sweep, now) {
            self.sweep(shard, now);
        }
    }

    /// Sweeps every shard unless no key can have expired since the last full
    /// sweep, or another caller is sweeping.
    #[cold]
    fn sweep_all_if_due(&self, now: u64) {
        let gate = self.sweep_not_before.load(Ordering::Acquire);
        if now < gate
            || self
                .sweep_not_before
                .compare_exchange(gate, u64::MAX, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let (_, next) = self.sweep_all(now);
        self.sweep_not_before.store(next, Ordering::Release);
    }

    /// Sweeps every shard, one lock at a time. Returns the keys evicted and
    /// the earliest time a kept key can expire.
    fn sweep_all(&self, now: u64) -> (usize, u64) {
        let mut evicted = 0;
        let mut next = u64::MAX;
        for shard in self.shards.iter() {
            let mut s = lock(shard);
            evicted += self.sweep(&mut s, now);
            for b in s.map.values() {
                next = next.min(b.last().saturating_add(self.ttl));
            }
        }
        // An empty table: sweeping again is free.
        (evicted, if next == u64::MAX { 0 } else { next })
    }

    /// Inserts `key` (its slot already reserved) with a full bucket, and
    /// admits from it.
    fn insert<Q>(
        &self,
        shard: &mut Shard<K>,
        key: &Q,
        now: u64,
        rate: u64,
    ) -> Result<RatePermit, RateLimited>
    where
        K: Hash + Eq + Borrow<Q>,
        Q: ToOwned<Owned = K> + ?Sized,
    {
        let mut bucket = Bucket::full(now, self.core.capacity(rate));
        let admitted = self.core.admit(&mut bucket, now, rate);
        shard.map.insert(key.to_owned(), bucket);
        admitted
    }
}
