//! The [`KeyedRateLimiter`]: one bucket per key, one adaptive rate, and a
//! key table that keys an attacker chooses can neither grow nor take over.
//!
//! | file | role |
//! |---|---|
//! | `keyed.rs` | the facade, the shards, the global key count, idle sweeps |
//! | `keyed/table.rs` | one shard's slots: a key's 64-bit hash, its bucket, its hits |
//! | `keyed/sketch.rs` | one shard's doorkeeper and count-min sketch (TinyLFU) |
//! | `keyed/admission.rs` | one shard's table, sketch and newcomer buckets, and the decision for a key without a slot |
//!
//! # Implementation details
//!
//! Keys live in [`SHARDS`] shards, each a `Mutex` on its own cache lines. A
//! key is hashed once per call with SipHash-1-3 under a random 128-bit key
//! drawn per limiter (`std`'s [`RandomState`]); the top four bits of the
//! 64-bit hash choose the shard, and the shard stores the hash, never the
//! key. A check locks one shard, never a global lock. The number of tracked
//! keys is one atomic counter: a new key reserves a slot with a CAS loop
//! bounded by `max_keys`, and every eviction gives its slot back.
//!
//! ## Why a 64-bit hash is enough
//!
//! Two keys with the same hash share one bucket: each gets half of one
//! key's allowance, neither escapes the limit. By accident, among `n`
//! tracked keys that happens with probability at most `n² / 2⁶⁵`
//! (2.7 · 10⁻¹² for 10⁴ keys, 2.7 · 10⁻⁸ for 10⁶). On purpose, an attacker
//! who cannot see the hash key cannot aim: each key it tries collides with
//! one of the `n` tracked keys with probability `n / 2⁶⁴`, so 10¹² requests
//! (a year at 30 000 per second) against 10⁴ keys find one with probability
//! 5 · 10⁻⁴, for the prize of sharing one client's bucket, observable only
//! through its own 429s. For the same reason it cannot aim keys at one
//! shard or one `HashMap` bucket (what `RandomState` exists for). A 128-bit
//! hash would double the stored key for no change in that trade (and `std`
//! has no stable 128-bit keyed hasher).
//!
//! ## Memory
//!
//! For `n = ceil(max_keys / 16)` keys per shard. At construction:
//! `ceil(n / 16)` newcomer buckets of 16 bytes per shard (at most 4 096),
//! and a frequency sketch sized for `min(n, 256)` keys: a doorkeeper of 4
//! hashes of 8 bytes and four rows of 4 one-byte counters per key, 48
//! bytes: about 200 KB in all for any `max_keys` ≥ 4 096. The sketch is
//! resized, doubling, as its shard's table grows past its size, up to `n`
//! keys (a rare allocation of a key without a slot, never on the hot
//! path). Growing with the tracked keys, up to the shard's cap
//! `c = min(max_keys, 2n + 16)`: a 32-byte slot in a `Vec` grown by
//! doubling but reserved exactly up to `c`, and an index entry of 16 bytes
//! and a control byte in a `HashMap` of at most `2 · 8/7 · c` buckets: at
//! most `71 c` bytes per shard. [`MAX_BYTES_PER_KEY`] is the sum per key of
//! `max_keys`; measured on a full table, 130 bytes per key at 10 000 keys
//! and 113 at 100 000 (`tests/keyed_attack.rs`). The keys themselves are
//! never stored.
//!
//! # Admission
//!
//! A key without a slot is *sighted* in its shard's frequency sketch, then:
//!
//! 1. On its first sighting (one the doorkeeper does not remember) it is
//!    admitted from a **newcomer bucket**: one of `ceil(n / 16)` per shard,
//!    chosen by the key's hash, each a bucket like a key's at the same
//!    rate. All newcomer buckets together (`max_keys / 16` of them, at
//!    least 16 and at most 65 536) hold `max_keys / 16` times one key's
//!    burst and refill at `max_keys / 16` times its rate.
//! 2. On a later sighting it takes a **free slot** with a full bucket of its
//!    own, or the slot of the **weakest of 8 sampled** slots of its shard:
//!    with a full bucket if that one is idle (unused for the TTL), with one
//!    token if it is in use but has fewer hits than the candidate has
//!    sightings (TinyLFU's duel: Einziger, Friedman and Manes, ACM ToS
//!    2017; Caffeine's admission). The incumbent wins ties. If every slot of
//!    the table is taken, idle slots everywhere are swept first (at most
//!    once per earliest expiry, see below).
//! 3. Otherwise, its newcomer bucket again.
//!
//! A key with a slot is admitted from its own bucket; each request counts
//! a hit in the slot. A slot in use is never taken by a key sighted no
//! more often than the slot was hit, so a client that uses its bucket keeps
//! it through any flood of new keys.
//!
//! ## What a new client gets, and why not more
//!
//! A key's first request carries no information: a new client's key and a
//! spoofed one are alike until one of them comes back. So a policy that
//! never refused a new client's first request would admit every request of
//! an attacker who sends each key once, without bound; and a policy that
//! bounds what first requests get can refuse a new client while such a
//! flood drains that bound. This one bounds it, high: a new client's first
//! request is refused only while fresh keys drain its newcomer bucket
//! (fresh keys faster than `rate` per newcomer bucket, `max_keys / 16 ·
//! rate` in all: 64 000 per second at the defaults, 640 buckets at 100 per
//! second); its second request
//! takes a slot of its own if the doorkeeper still remembers the first
//! (on average until `4n` fresh keys have landed in its shard — about
//! `4 · max_keys` in all — between the two) and a slot is free, idle or
//! weaker; from then on it has its own bucket. A client on probation at a
//! rate below the key rate needs one token per request, which the newcomer
//! bucket holds unless a flood drains it.
//!
//! ## The attacker's best strategies
//!
//! Write `B` for the number of newcomer buckets
//! ([`newcomer_buckets`](KeyedRateLimiter::newcomer_buckets)), `burst` and
//! `rate` for one key's.
//!
//! * **Every request a fresh key** (the flood): no key is ever sighted
//!   twice, so none takes a slot (the doorkeeper is exact, not a Bloom
//!   filter, so no one-shot key passes for a repeat) and no memory is
//!   allocated. The attacker is admitted only from the newcomer buckets:
//!   **at most `B · (burst + rate · t)` requests over `t` seconds in all**,
//!   however many keys it sends (`tests/keyed_attack.rs`: 200 000 keys in
//!   0.2 s at the defaults, 76 160 admitted against a bound of 76 800).
//!   Tracked clients are untouched.
//! * **Each key twice** (or `k` times): the second sighting takes a *free*
//!   slot, with a full bucket. A slot frees only when its key has been
//!   idle for the TTL (eviction by a duel replaces, it frees nothing), so
//!   this pays at most one burst per slot per TTL: `max_keys · burst` per
//!   TTL, against the `max_keys · rate · TTL` the full table grants its
//!   keys anyway. Once the table is full, its keys enter duels, and a
//!   client that used its bucket more often than the attacker sighted its
//!   key keeps it: a full table of clients at 10 requests per second
//!   admits the attacker only through the newcomer buckets (tested with
//!   each key twice and three times).
//! * **Evicting clients used less**: a key sighted more often than a
//!   slot's hits takes it, but with **one token**, earning the rest at the
//!   rate: evicting buys no burst, and costs `hits + 1` requests per
//!   eviction. What it does cost is the evicted client's slot: clients
//!   that send less often than the attacker sights its keys can be pushed
//!   to the newcomer buckets. An attacker holding `max_keys` slots this
//!   way must keep sighting `max_keys` keys more often than the clients
//!   use theirs, and every request of a key with a slot is charged to that
//!   key's bucket: it then *is* `max_keys` heavy clients. Size `max_keys`
//!   above the clients you serve.
//!
//! In all, over `t` seconds, the attacker is admitted at most
//! `B · (burst + rate · t)` through the newcomer buckets, plus
//! `max_keys · burst · (1 + t / TTL)` through free slots, plus `rate · t`
//! per slot it holds (a slot taken by a duel adds one token).
//!
//! ## Idle keys
//!
//! A key unused for at least the TTL is evicted lazily, in two ways:
//!
//! 1. A key without a slot sweeps its own shard first if that shard was
//!    last swept at least one TTL ago: `O(shard)` at most once per TTL per
//!    shard, which keeps memory proportional to the keys active within a
//!    TTL.
//! 2. A repeat key that finds the table full sweeps every shard, one lock at
//!    a time, unless `sweep_not_before` says no key can have expired yet.
//!    The sweeper records the earliest expiry among the keys it kept; keys
//!    can only be touched (expiring later) or added (expiring after that),
//!    so the value stays a lower bound, and a flood of new keys against a
//!    full table of live ones costs one atomic load each, not a sweep each.
//!    The sweeper claims the sweep by swapping the gate to `u64::MAX`.

mod admission;
mod sketch;
mod table;

use std::borrow::Borrow;
use std::fmt;
use std::hash::{BuildHasher, Hash, RandomState};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use self::admission::{
    ADMIT_AFTER, KEYS_PER_NEWCOMER_BUCKET, MAX_NEWCOMERS_PER_SHARD, Shard, Start,
};
use super::bucket::TimedBucket;
use super::engine::{Core, Engine};
use super::{RateLimited, RatePermit, RateStats, lock};
use crate::sync::Padded;

/// Number of shards of the key table.
const SHARDS: usize = 16;

/// Bytes of memory a keyed rate limiter's key table takes at most, per key
/// of [`max_keys`](crate::RateLimiterBuilder::max_keys), whatever the keys'
/// size, for `max_keys` ≥ 4 096 (smaller tables pay a fixed floor of at
/// most 120 KiB: 64 doorkeeper cells and counters per row and shard, and
/// 16 extra slots per shard).
///
/// At most 49 bytes for the frequency sketch and the newcomer buckets
/// (about 200 KB of it allocated at construction, the rest as the table
/// grows), and at most 142 for the tracked keys (when every shard has held
/// its cap of `2 · max_keys / 16 + 16` keys: slots of 32 bytes, and an
/// index of at most `2 · 8/7` entries of 17 bytes per slot), plus 18 KiB in
/// all, under 5 bytes per key from 4 096 keys on. Measured on a full table
/// with the keys spread as the hash spreads them: 130 bytes per key at
/// 10 000 keys, 113 at 100 000.
pub const MAX_BYTES_PER_KEY: usize = 200;

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
/// A cheap handle: clones share one limiter. `Send + Sync`.
///
/// # Keys an attacker chooses
///
/// The table stores a 64-bit keyed hash of each key, never the key, so its
/// memory is bounded in bytes: at most [`MAX_BYTES_PER_KEY`] bytes per key
/// of [`max_keys`](crate::RateLimiterBuilder::max_keys), however large the
/// keys are.
///
/// A key gets a bucket of its own from its **second** request on (its first
/// is admitted from one of [`newcomer_buckets`] shared buckets, each a
/// bucket like a key's), and only into a free slot or an idle one (a full
/// bucket), or the slot of a key used less often than it (TinyLFU; one
/// token, the rest earned at the rate). So a flood of one-shot keys never
/// takes a slot, allocates nothing, is admitted at most
/// `newcomer_buckets() · (burst + rate · t)` times over `t` seconds in all,
/// and never evicts a client that uses its bucket. What that costs a new
/// client during such a flood, and the attacker's best strategies with
/// their bounds, are in the module source's docs (`rate/keyed.rs`).
///
/// [`newcomer_buckets`]: KeyedRateLimiter::newcomer_buckets
///
/// # Eviction and the key bound
///
/// A key unused for at least [`key_ttl`](crate::RateLimiterBuilder::key_ttl) may be
/// evicted; it comes back as a new key. Eviction is lazy (no
/// background task): a new key sweeps its shard at most once per TTL, and a
/// full table is swept when a new key needs a slot; [`evict_idle`]
/// sweeps on demand. At most
/// [`max_keys`](crate::RateLimiterBuilder::max_keys) keys have a bucket of
/// their own.
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
/// // A first request is admitted from a newcomer bucket; the second gives
/// // Alice a bucket of her own: 10 tokens, this request takes one.
/// limiter.try_acquire("alice")?.success();
/// for _ in 0..10 {
///     limiter.try_acquire("alice")?.success();
/// }
/// assert!(limiter.try_acquire("alice").is_err());
/// // Bob has a bucket of his own.
/// assert!(limiter.try_acquire("bob").is_ok());
/// assert!(limiter.try_acquire("bob").is_ok());
/// assert_eq!(limiter.len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct KeyedRateLimiter<K> {
    inner: Arc<Inner>,
    /// The key type: only its hash is stored.
    key: PhantomData<fn(&K)>,
}

struct Inner {
    core: Engine,
    hasher: RandomState,
    shards: Box<[Padded<Mutex<Shard>>; SHARDS]>,
    len: AtomicUsize,
    max_keys: usize,
    newcomer_buckets: usize,
    ttl: u64,
    sweep_not_before: AtomicU64,
}

impl<K> Clone for KeyedRateLimiter<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            key: PhantomData,
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
        let hasher = RandomState::new();
        let per_shard = max_keys.div_ceil(SHARDS);
        let cap = (2 * per_shard + 16).min(max_keys);
        let newcomers = per_shard
            .div_ceil(KEYS_PER_NEWCOMER_BUCKET)
            .clamp(1, MAX_NEWCOMERS_PER_SHARD);
        let shards = Box::new(std::array::from_fn(|i| {
            let seed = hasher.hash_one(i);
            let bucket = || core.key_bucket(now, true);
            Padded(Mutex::new(Shard::new(
                cap, per_shard, newcomers, seed, now, bucket,
            )))
        }));
        Self {
            inner: Arc::new(Inner {
                core: Engine::new(core),
                hasher,
                shards,
                len: AtomicUsize::new(0),
                max_keys,
                newcomer_buckets: newcomers * SHARDS,
                ttl,
                sweep_not_before: AtomicU64::new(0),
            }),
            key: PhantomData,
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

    /// Sets the rate now, for every key, keeping the keys and their
    /// buckets' tokens; as [`RateLimiter::set_rate`](crate::RateLimiter::set_rate).
    /// One difference: when the capacity grows with the rate, a key whose
    /// bucket was idle past the old capacity may hold up to the new one at
    /// its next request (the table is not walked to clip it), as if the
    /// larger capacity had applied while it was idle.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`](crate::ConfigError) naming `rate` if it is outside
    /// the law's `[min_rate, max_rate]`, and nothing changes.
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptx::RateLimiter;
    ///
    /// let limiter = RateLimiter::builder().initial_rate(100).build_keyed::<String>()?;
    /// for _ in 0..2 {
    ///     limiter.try_acquire("alice")?.success(); // a second request gets her a slot
    /// }
    /// limiter.set_rate(500)?;
    /// assert_eq!((limiter.current_rate(), limiter.len()), (500, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_rate(&self, rate: u64) -> Result<(), crate::ConfigError> {
        self.inner.core.set_rate(rate)
    }

    /// Sets the law's floor and ceiling now; as
    /// [`RateLimiter::set_bounds`](crate::RateLimiter::set_bounds).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`](crate::ConfigError) naming `min_rate` or
    /// `max_rate`, and nothing changes.
    pub fn set_bounds(&self, min_rate: u64, max_rate: u64) -> Result<(), crate::ConfigError> {
        self.inner.core.set_bounds(min_rate, max_rate)
    }

    /// Replaces the law that moves the rate; as
    /// [`RateLimiter::set_law`](crate::RateLimiter::set_law).
    pub fn set_law(&self, law: crate::RateLaw) {
        self.inner.core.set_law(law);
    }

    /// The law that moves the rate.
    pub fn law(&self) -> crate::RateLaw {
        self.inner.core.law()
    }

    /// The admission mode (see [`Mode`](crate::Mode)).
    pub fn mode(&self) -> crate::Mode {
        self.inner.core.mode()
    }

    /// Switches the admission mode at once; returns the mode it replaces.
    ///
    /// In [`Mode::Shadow`](crate::Mode::Shadow) and
    /// [`Mode::Bypass`](crate::Mode::Bypass) a request that finds its bucket
    /// empty is admitted anyway (also from a shared newcomer bucket), counted in
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
    /// // Alice's first request comes from a newcomer bucket, the next ten
    /// // from her own bucket of 10 tokens, the twelfth beyond it.
    /// for _ in 0..12 {
    ///     limiter.try_acquire("alice")?.success();
    /// }
    /// let stats = limiter.stats();
    /// assert_eq!((stats.admitted, stats.would_reject, stats.rejected), (12, 1, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_mode(&self, mode: crate::Mode) -> crate::Mode {
        self.inner.core.set_mode(mode)
    }

    /// Keys with a bucket of their own.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// The number of newcomer buckets: `16 · ceil(ceil(max_keys / 16) / 16)`,
    /// about `max_keys / 16`, at least 16 and at most 65 536.
    ///
    /// Keys without a bucket of their own (a key's first request, and a
    /// key that finds no slot it may take) are admitted from these, so over
    /// `t` seconds they are admitted at most `newcomer_buckets() · (burst +
    /// rate · t)` times in all, however many they are.
    pub fn newcomer_buckets(&self) -> usize {
        self.inner.newcomer_buckets
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
    /// A key without a bucket of its own is admitted from a newcomer bucket
    /// on its first request, and gets a full bucket of its own on a later
    /// one if the table has room for it (see the type's docs).
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
        let h = inner.hasher.hash_one(key);
        let mut s = lock(&inner.shards[shard_of(h)]);
        if let Some(bucket) = s.table.hit(h) {
            return core.admit_keyed(bucket, now);
        }
        inner.admit_unknown(s, h, now)
    }
}

/// The shard of a key's hash: its top bits.
#[inline]
fn shard_of(h: u64) -> usize {
    (h >> (64 - SHARDS.trailing_zeros())) as usize
}

/// `x` mapped to `0..n` by its top bits (Lemire, "A fast alternative to
/// the modulo reduction", 2016): `x · n / 2⁶⁴`, for `n` ≤ 2³² (the sizes
/// here are far below).
#[inline]
fn reduce(x: u64, n: usize) -> usize {
    // < n: fits a usize.
    ((u128::from(x) * n as u128) >> 64) as usize
}

impl Inner {
    /// Admits a key that has no slot (its shard locked in `s`).
    #[cold]
    fn admit_unknown<'a>(
        &'a self,
        mut s: MutexGuard<'a, Shard>,
        h: u64,
        now: u64,
    ) -> Result<RatePermit, RateLimited> {
        let core = &self.core;
        self.sweep_shard_if_due(&mut s, now);
        let seen = s.sight(h);
        let idle = |b: &TimedBucket| self.idle(b.last(), now);
        let new_bucket = |start| match start {
            Start::Full => core.key_bucket(now, true),
            Start::OneToken => core.key_bucket(now, false),
        };
        if let Some(bucket) = s.take_slot(h, seen, new_bucket, idle, || self.reserve()) {
            return core.admit_keyed(bucket, now);
        }
        if seen >= ADMIT_AFTER && !s.table.is_full() && self.len() >= self.max_keys {
            // Every slot of the table is taken: free idle ones everywhere
            // (one shard lock at a time), then look again: another caller
            // may have added this key meanwhile.
            drop(s);
            self.sweep_all_if_due(now);
            s = lock(&self.shards[shard_of(h)]);
            if let Some(bucket) = s.table.hit(h) {
                return core.admit_keyed(bucket, now);
            }
            if let Some(bucket) = s.take_slot(h, seen, new_bucket, idle, || self.reserve()) {
                return core.admit_keyed(bucket, now);
            }
        }
        core.admit_keyed(s.newcomer(h), now)
    }

    /// Keys with a slot.
    fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
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
    fn sweep(&self, shard: &mut Shard, now: u64) -> usize {
        let evicted = shard.table.remove_idle(|b| self.idle(b.last(), now));
        shard.table.last_sweep = now;
        if evicted > 0 {
            self.len.fetch_sub(evicted, Ordering::AcqRel);
        }
        evicted
    }

    fn sweep_shard_if_due(&self, shard: &mut Shard, now: u64) {
        if self.idle(shard.table.last_sweep, now) {
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
            for b in s.table.buckets() {
                next = next.min(b.last().saturating_add(self.ttl));
            }
        }
        // An empty table: sweeping again is free.
        (evicted, if next == u64::MAX { 0 } else { next })
    }
}
