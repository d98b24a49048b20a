//! The buckets of one shard's keys, stored under a fixed-size hash of the
//! key: the table's memory does not depend on the keys' size.
//!
//! # Implementation details
//!
//! A key is stored as its 64-bit keyed hash (see the parent module for why
//! 64 bits), in a dense array of [`Slot`]s with a hash → position index, so
//! that a victim can be sampled at random positions in `O(1)` (a `HashMap`
//! alone can only be iterated from its start). The index hashes the
//! already-random key hash by rotation only ([`PreHashed`]).
//!
//! | structure | bytes per key | growth slack |
//! |---|---|---|
//! | `slots: Vec<Slot>` | `size_of::<Slot>()` = 32 | capacity ≤ the shard's cap, reserved exactly |
//! | `index: HashMap<u64, u32>` | 16 + 1 control byte | ≤ 2 · 8/7 buckets per key (power-of-two growth at 7/8 load) |
//!
//! Removal is a `swap_remove` that re-points the moved slot's index entry,
//! so the array stays dense and positions stay valid.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::super::bucket::TimedBucket;

/// A tracked key: its hash, its bucket, and how often it was used.
#[derive(Debug)]
pub(super) struct Slot {
    hash: u64,
    pub(super) bucket: TimedBucket,
    /// Sightings when it took the slot, then one per request through it
    /// (admitted or not), saturating: what a candidate's sightings must
    /// exceed to take the slot while it is in use.
    pub(super) hits: u32,
}

/// How weak a slot is as an eviction victim: idle slots first, then the
/// fewest hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Weakness {
    /// Unused for at least the TTL: free to take.
    Idle,
    /// Active, with this many hits.
    Active(u32),
}

/// Hashes a `u64` that is already a keyed hash: the identity, rotated so
/// that the shard's bits (the top four, equal across a shard) land where
/// `HashMap` looks last.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct PreHashed(u64);

impl Hasher for PreHashed {
    #[inline]
    fn finish(&self) -> u64 {
        // hashbrown takes the bucket from the low bits and a tag from the
        // top seven: both now come from bits 25..57 of the key's hash.
        self.0.rotate_left(32)
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used (the index is keyed by `u64`); fold
        // anything else in rather than panic.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// One shard's tracked keys.
#[derive(Debug)]
pub(super) struct Table {
    slots: Vec<Slot>,
    index: HashMap<u64, u32, BuildHasherDefault<PreHashed>>,
    /// The most slots this shard holds.
    cap: usize,
    /// Picks the victims' sample.
    rng: fastrand::Rng,
    /// When this shard was last swept of idle keys.
    pub(super) last_sweep: u64,
}

/// Slots sampled to choose a victim (Redis samples 5 for its approximate
/// LRU, Ristretto 5 for its SampledLFU; 8 finds one of the weakest eighth of
/// a table with probability 1 − (7/8)⁸ ≈ 66 %).
const VICTIM_SAMPLE: usize = 8;

impl Table {
    pub(super) fn new(cap: usize, seed: u64, now: u64) -> Self {
        Self {
            slots: Vec::new(),
            index: HashMap::default(),
            cap,
            rng: fastrand::Rng::with_seed(seed),
            last_sweep: now,
        }
    }

    /// Keys tracked by this shard.
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether the shard holds its cap of keys.
    pub(super) fn is_full(&self) -> bool {
        self.slots.len() >= self.cap
    }

    /// The slot of the key with hash `h`, counting a hit.
    #[inline]
    pub(super) fn hit(&mut self, h: u64) -> Option<&mut TimedBucket> {
        let &i = self.index.get(&h)?;
        let slot = &mut self.slots[i as usize];
        slot.hits = slot.hits.saturating_add(1);
        Some(&mut slot.bucket)
    }

    /// Adds the key with hash `h` (not in the table, which is not full);
    /// returns its bucket.
    pub(super) fn insert(&mut self, h: u64, bucket: TimedBucket, hits: u32) -> &mut TimedBucket {
        if self.slots.len() == self.slots.capacity() {
            // Double, but never past the cap: the bound on bytes is exact.
            let more = self.slots.len().max(4).min(self.cap - self.slots.len());
            self.slots.reserve_exact(more);
        }
        let i = self.slots.len();
        self.slots.push(Slot {
            hash: h,
            bucket,
            hits,
        });
        self.index.insert(h, position(i));
        &mut self.slots[i].bucket
    }

    /// Replaces the key at position `i` by the key with hash `h`; returns
    /// its bucket.
    pub(super) fn replace(
        &mut self,
        i: usize,
        h: u64,
        bucket: TimedBucket,
        hits: u32,
    ) -> &mut TimedBucket {
        let old = std::mem::replace(
            &mut self.slots[i],
            Slot {
                hash: h,
                bucket,
                hits,
            },
        );
        self.index.remove(&old.hash);
        self.index.insert(h, position(i));
        &mut self.slots[i].bucket
    }

    /// The weakest of a random sample of slots, with its position.
    pub(super) fn weakest_sampled(
        &mut self,
        idle: impl Fn(&TimedBucket) -> bool,
    ) -> Option<(usize, Weakness)> {
        let n = self.slots.len();
        (0..VICTIM_SAMPLE.min(n))
            .map(|_| {
                let i = self.rng.usize(..n);
                let s = &self.slots[i];
                let w = if idle(&s.bucket) {
                    Weakness::Idle
                } else {
                    Weakness::Active(s.hits)
                };
                (i, w)
            })
            .min_by_key(|&(_, w)| w)
    }

    /// Removes every slot whose bucket is idle; returns how many, and the
    /// slots kept.
    pub(super) fn remove_idle(&mut self, idle: impl Fn(&TimedBucket) -> bool) -> usize {
        let before = self.slots.len();
        let mut i = 0;
        while i < self.slots.len() {
            if idle(&self.slots[i].bucket) {
                let gone = self.slots.swap_remove(i);
                self.index.remove(&gone.hash);
                if let Some(moved) = self.slots.get(i) {
                    self.index.insert(moved.hash, position(i));
                }
            } else {
                i += 1;
            }
        }
        before - self.slots.len()
    }

    /// The buckets of the keys tracked.
    pub(super) fn buckets(&self) -> impl Iterator<Item = &TimedBucket> {
        self.slots.iter().map(|s| &s.bucket)
    }
}

/// A position in the slot array, stored in 32 bits: a shard's cap is at
/// most `u32::MAX` (checked when the limiter is built).
fn position(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

// The buckets' words are loom atomics under `--cfg adaptx_loom`, usable only
// inside a model: these tests run in the plain build.
#[cfg(all(test, not(adaptx_loom)))]
mod tests {
    use super::*;

    use super::super::super::bucket::{Bucket, ONE};

    /// A bucket last used at `t`.
    fn used_at(t: u64) -> TimedBucket {
        TimedBucket::new(Bucket::full(0, ONE), t)
    }

    fn idle_before(t: u64) -> impl Fn(&TimedBucket) -> bool {
        move |b: &TimedBucket| b.last() < t
    }

    #[test]
    fn slots_are_32_bytes() {
        assert_eq!(size_of::<Slot>(), 32);
    }

    #[test]
    fn insert_hit_replace_remove_keep_the_index_consistent() {
        let mut t = Table::new(8, 1, 0);
        for k in 0..8u64 {
            t.insert(k << 40, used_at(k), 1);
        }
        assert!(t.is_full());
        assert_eq!(t.slots.capacity(), 8);
        t.replace(3, 99 << 40, used_at(10), 5);
        assert!(t.hit(3 << 40).is_none());
        assert!(t.hit(99 << 40).is_some());
        // Keys last used at 0, 1 and 2 are idle before 3.
        assert_eq!(t.remove_idle(idle_before(3)), 3);
        assert_eq!(t.len(), 5);
        for (i, s) in t.slots.iter().enumerate() {
            assert_eq!(t.index[&s.hash] as usize, i);
        }
        for k in [4u64, 5, 6, 7, 99] {
            assert!(t.hit(k << 40).is_some(), "key {k}");
        }
    }

    #[test]
    fn the_sample_prefers_idle_then_fewest_hits() {
        let mut t = Table::new(2, 7, 0);
        t.insert(1, used_at(5), 3);
        t.insert(2, used_at(5), 9);
        // Eight draws from two slots: both are seen (all but 2 · 2⁻⁸).
        let (i, w) = t.weakest_sampled(idle_before(0)).expect("a slot");
        assert_eq!((t.slots[i].hash, w), (1, Weakness::Active(3)));
        let (i, w) = t.weakest_sampled(idle_before(6)).expect("a slot");
        assert_eq!(w, Weakness::Idle);
        assert!(t.slots[i].hash == 1 || t.slots[i].hash == 2);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8),
        Hit(u8),
        ReplaceWeakest(u8),
        RemoveIdleBefore(u8),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            any::<u8>().prop_map(Op::Insert),
            any::<u8>().prop_map(Op::Hit),
            any::<u8>().prop_map(Op::ReplaceWeakest),
            any::<u8>().prop_map(Op::RemoveIdleBefore),
        ]
    }

    proptest::proptest! {
        /// Any sequence of inserts, hits, replacements and sweeps keeps the
        /// index and the slots one-to-one, the slots within the cap, and
        /// the reserved capacity within the cap (the bound on bytes).
        #[test]
        fn the_index_and_the_slots_stay_one_to_one(ops in proptest::collection::vec(op(), 1..200)) {
            const CAP: usize = 24;
            let mut t = Table::new(CAP, 9, 0);
            let mut model = std::collections::BTreeMap::new(); // hash -> last use
            for (now, op) in ops.into_iter().enumerate() {
                let now = now as u64;
                match op {
                    Op::Insert(k) => {
                        let h = u64::from(k) << 40;
                        if !t.is_full() && !model.contains_key(&h) {
                            t.insert(h, used_at(now), 2);
                            model.insert(h, now);
                        }
                    }
                    Op::Hit(k) => {
                        let h = u64::from(k) << 40;
                        proptest::prop_assert_eq!(t.hit(h).is_some(), model.contains_key(&h));
                    }
                    Op::ReplaceWeakest(k) => {
                        let h = u64::from(k) << 40;
                        if model.contains_key(&h) {
                            continue;
                        }
                        if let Some((i, _)) = t.weakest_sampled(|_| false) {
                            model.remove(&t.slots[i].hash);
                            t.replace(i, h, used_at(now), 2);
                            model.insert(h, now);
                        }
                    }
                    Op::RemoveIdleBefore(b) => {
                        let before = now.saturating_sub(u64::from(b % 32));
                        let removed = t.remove_idle(|bucket| bucket.last() < before);
                        let gone: Vec<u64> =
                            model.iter().filter(|&(_, &last)| last < before).map(|(&h, _)| h).collect();
                        proptest::prop_assert_eq!(removed, gone.len());
                        for h in gone {
                            model.remove(&h);
                        }
                    }
                }
                proptest::prop_assert_eq!(t.len(), model.len());
                proptest::prop_assert_eq!(t.index.len(), t.slots.len());
                proptest::prop_assert!(t.slots.capacity() <= CAP);
                for (i, s) in t.slots.iter().enumerate() {
                    proptest::prop_assert_eq!(t.index.get(&s.hash).copied(), Some(position(i)));
                    proptest::prop_assert!(model.contains_key(&s.hash));
                }
            }
        }
    }
}
