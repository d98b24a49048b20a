//! Who gets a bucket of their own: one shard's table, its frequency sketch
//! and its newcomer buckets, and the decision for a key not in the table
//! (the parent module's `# Admission` tells the policy and its reasons).
//!
//! # Implementation details
//!
//! Everything here lives inside one shard, under the shard's lock: the
//! decision reads and writes only this shard's table, sketch and newcomer
//! buckets, so a flood of new keys contends on shards exactly as known keys
//! do and never on a lock of its own. The global key count is the caller's
//! (a CAS loop, handed in as `reserve`).

use super::super::bucket::TimedBucket;
use super::reduce;
use super::sketch::FrequencySketch;
use super::table::{Table, Weakness};

/// Sightings (within the sketch's memory) after which a key may take a slot
/// of its own: the second request of a key proves it is not a one-shot.
pub(super) const ADMIT_AFTER: u32 = 2;

/// Tracked keys (of `max_keys`) per newcomer bucket: the newcomer buckets of
/// all shards together refill at `max_keys / 16` times the per-key rate.
pub(super) const KEYS_PER_NEWCOMER_BUCKET: usize = 16;

/// Keys per shard the sketch is sized for at construction (so 49 · 16 ·
/// 256 ≈ 200 KB for any `max_keys` ≥ 4 096); it grows with the table.
const SKETCH_KEYS_AT_START: usize = 256;

/// Most newcomer buckets per shard: 65 536 in all (1 MiB), however large
/// `max_keys` is.
pub(super) const MAX_NEWCOMERS_PER_SHARD: usize = 4096;

/// What a key that takes a slot starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Start {
    /// A full bucket: the slot was free, or its key idle for the TTL. A
    /// slot frees at most once per TTL, which bounds these.
    Full,
    /// One token, the rest earned at the rate: the slot was taken from a
    /// key in use, so that evicting keys never pays a burst.
    OneToken,
}

/// One shard of the key table.
#[derive(Debug)]
pub(super) struct Shard {
    pub(super) table: Table,
    sketch: FrequencySketch,
    /// Keys the sketch is sized for: at first at most
    /// [`SKETCH_KEYS_AT_START`], doubled as the table grows past it, up to
    /// `keys`.
    sketch_keys: usize,
    keys: usize,
    /// Shared by the keys of this shard that have no slot, chosen by hash.
    newcomers: Box<[TimedBucket]>,
}

impl Shard {
    /// A shard holding at most `cap` keys, sized for about `keys` of them,
    /// with `newcomers` newcomer buckets made by `bucket`.
    pub(super) fn new(
        cap: usize,
        keys: usize,
        newcomers: usize,
        seed: u64,
        now: u64,
        bucket: impl Fn() -> TimedBucket,
    ) -> Self {
        let sketch_keys = keys.min(SKETCH_KEYS_AT_START);
        Self {
            table: Table::new(cap, seed, now),
            sketch: FrequencySketch::new(sketch_keys, seed.rotate_left(32)),
            sketch_keys,
            keys,
            newcomers: (0..newcomers).map(|_| bucket()).collect(),
        }
    }

    /// Counts a sighting of the key with hash `h`, which has no slot;
    /// returns its estimated sightings.
    pub(super) fn sight(&mut self, h: u64) -> u32 {
        self.sketch.record(h)
    }

    /// Gives the key with hash `h`, sighted `seen` times (from
    /// [`sight`](Shard::sight)) and without a slot, a slot of its own with
    /// a bucket from `new_bucket`, and returns that bucket; or `None`.
    ///
    /// * Seen fewer than [`ADMIT_AFTER`] times: `None`.
    /// * Else a free slot, if this shard is under its cap and `reserve`
    ///   takes a slot of the global count: a [`Start::Full`] bucket.
    /// * Else the weakest of a random sample of this shard's slots: if it
    ///   is idle, a [`Start::Full`] bucket (as good as a free slot); if it
    ///   has fewer hits than `seen` (TinyLFU's duel: the incumbent wins
    ///   ties), a [`Start::OneToken`] bucket.
    pub(super) fn take_slot(
        &mut self,
        h: u64,
        seen: u32,
        new_bucket: impl FnOnce(Start) -> TimedBucket,
        idle: impl Fn(&TimedBucket) -> bool,
        reserve: impl FnOnce() -> bool,
    ) -> Option<&mut TimedBucket> {
        if seen < ADMIT_AFTER {
            return None;
        }
        if !self.table.is_full() && reserve() {
            if self.table.len() >= self.sketch_keys && self.sketch_keys < self.keys {
                // Cold: at most log₂(keys / SKETCH_KEYS_AT_START) times.
                self.sketch_keys = (2 * self.sketch_keys).min(self.keys);
                self.sketch.resize(self.sketch_keys);
            }
            return Some(self.table.insert(h, new_bucket(Start::Full), seen));
        }
        let (i, weakness) = self.table.weakest_sampled(idle)?;
        let start = match weakness {
            Weakness::Idle => Start::Full,
            Weakness::Active(hits) if hits < seen => Start::OneToken,
            Weakness::Active(_) => return None,
        };
        Some(self.table.replace(i, h, new_bucket(start), seen))
    }

    /// The newcomer bucket of the key with hash `h`.
    pub(super) fn newcomer(&mut self, h: u64) -> &mut TimedBucket {
        // The low bits: the top ones chose the shard and the doorkeeper set.
        let i = reduce(h << 32, self.newcomers.len());
        &mut self.newcomers[i]
    }
}
