//! How often a key outside the table has been seen lately: a doorkeeper and
//! a count-min sketch over the keys' 64-bit keyed hashes (TinyLFU's
//! frequency filter: Einziger, Friedman and Manes, "TinyLFU: A Highly
//! Efficient Cache Admission Policy", ACM ToS 2017; Caffeine's
//! `FrequencySketch`).
//!
//! # Implementation details
//!
//! * **Doorkeeper**: sets of four hashes. A key's first sighting only
//!   writes its hash into its set, in an empty way or else in a random one;
//!   a later sighting that finds the hash still there is a repeat. The sets
//!   are exact (a way holds a whole 64-bit hash, so a key never passes for
//!   seen because another key was, unlike the Bloom filter of the paper):
//!   one-shot keys never reach the counters, whatever their number. They
//!   forget by replacement: a key is remembered, on average, for as many
//!   new keys as the doorkeeper has ways, and two keys sharing a set do not
//!   push each other out unless it is full. The replacement is random, not
//!   first-in first-out, so that five keys or more cycling through one set
//!   (clients arriving together, each back before four others) cannot push
//!   each other out forever: each survives a cycle with probability at
//!   least `(3/4)^(k−1)` and once it is in the table it leaves the set.
//! * **Counters**: four rows of saturating `u8` counters, one per row chosen
//!   by multiply-shift hashing of the key's hash with an odd constant; the
//!   estimate is the minimum of the four (count-min: Cormode and
//!   Muthukrishnan 2005), never below the true count since the last aging.
//! * **Aging**: after `period` sightings every counter is halved (the
//!   paper's reset), so the sketch reflects recent use and the noise other
//!   keys add to a counter stays below `period / width` on average: with
//!   `width = period` under one per counter at worst.
//!
//! Nothing here reads a clock, allocates after construction or locks: the
//! sketch lives inside its shard, under the shard's lock.

use super::reduce;

/// Odd multipliers choosing a key's counter in each row (the first four
/// 64-bit primes below 2⁶⁴ / φ; any odd constants with mixed bits serve).
const ROW_SEEDS: [u64; 4] = [
    0x9E37_79B9_7F4A_7C15,
    0xC2B2_AE3D_27D4_EB4F,
    0x1656_67B1_9E37_79F9,
    0x27D4_EB2F_1656_67C5,
];

/// Ways per doorkeeper set.
const WAYS: usize = 4;

/// The doorkeeper and the counters of one shard.
#[derive(Debug)]
pub(super) struct FrequencySketch {
    /// Sets of [`WAYS`] ways, each the `hash | 1` of a key seen once;
    /// 0 = empty.
    door: Box<[u64]>,
    /// Picks the way a new key replaces in a full set.
    rng: fastrand::Rng,
    /// Four rows of `width` counters, row after row.
    counters: Box<[u8]>,
    width: usize,
    /// Sightings since the last aging.
    samples: u32,
    /// Sightings between two agings.
    period: u32,
}

impl FrequencySketch {
    /// A sketch for a shard that tracks about `keys` keys.
    pub(super) fn new(keys: usize, seed: u64) -> Self {
        let (width, door) = Self::sizes(keys);
        Self {
            door: vec![0; door].into_boxed_slice(),
            rng: fastrand::Rng::with_seed(seed),
            counters: vec![0; 4 * width].into_boxed_slice(),
            width,
            samples: 0,
            period: u32::try_from(width).unwrap_or(u32::MAX),
        }
    }

    /// The row width and the doorkeeper ways for `keys` keys. Exact, not
    /// powers of two: indices are reduced to a range by a multiplication
    /// (`reduce`), which needs no mask.
    fn sizes(keys: usize) -> (usize, usize) {
        let width = keys.saturating_mul(4).clamp(64, 1 << 30);
        (width, width.next_multiple_of(WAYS))
    }

    /// Resizes the sketch for `keys` keys: the doorkeeper keeps every key
    /// it remembers (it holds whole hashes, so they can be placed again, at
    /// most four to a set), the counters start again from zero.
    pub(super) fn resize(&mut self, keys: usize) {
        let mut grown = Self::new(keys, self.rng.u64(..));
        for &cell in self.door.iter().filter(|&&c| c != 0) {
            grown.remember(cell);
        }
        *self = grown;
    }

    /// Records a sighting of the key with hash `h`; returns its estimated
    /// sightings since the last aging, this one included: 1 on a first
    /// sighting (or one the doorkeeper forgot), at least 2 on a repeat.
    pub(super) fn record(&mut self, h: u64) -> u32 {
        self.tick();
        if !self.remember(h | 1) {
            return 1;
        }
        let mut min = u8::MAX;
        for row in 0..ROW_SEEDS.len() {
            let c = &mut self.counters[self.index(row, h)];
            *c = c.saturating_add(1);
            min = min.min(*c);
        }
        1 + u32::from(min)
    }

    /// Whether `cell` (a hash with its low bit set) is in the doorkeeper;
    /// if not, puts it there, in an empty way of its set or a random one.
    fn remember(&mut self, cell: u64) -> bool {
        // The top four bits chose the shard: shifted out, the next choose
        // the set.
        let first = reduce(cell << 4, self.door.len() / WAYS) * WAYS;
        let set = &mut self.door[first..first + WAYS];
        if set.contains(&cell) {
            return true;
        }
        let way = match set.iter().position(|&w| w == 0) {
            Some(empty) => empty,
            None => self.rng.usize(..WAYS),
        };
        set[way] = cell;
        false
    }

    /// The counter of `h` in `row`.
    #[inline]
    fn index(&self, row: usize, h: u64) -> usize {
        row * self.width + reduce(h.wrapping_mul(ROW_SEEDS[row]), self.width)
    }

    /// Counts a sighting; every `period` sightings, halves every counter.
    fn tick(&mut self) {
        self.samples += 1;
        if self.samples >= self.period {
            self.samples = 0;
            for c in self.counters.iter_mut() {
                *c >>= 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hashes spread like a keyed hash's (a fixed odd multiplier on a
    /// counter, enough for these tests).
    fn h(i: u64) -> u64 {
        i.wrapping_add(1)
            .wrapping_mul(0x9FB2_1C65_1E98_DF25)
            .rotate_left(29)
    }

    #[test]
    fn first_sighting_is_one_then_counts_up() {
        let mut s = FrequencySketch::new(100, 1);
        assert_eq!(s.record(h(1)), 1);
        assert_eq!(s.record(h(1)), 2);
        assert_eq!(s.record(h(1)), 3);
        assert_eq!(s.record(h(2)), 1);
        assert_eq!(s.record(h(2)), 2);
    }

    #[test]
    fn one_shot_keys_never_pass_for_repeats() {
        let mut s = FrequencySketch::new(100, 1);
        assert!((0..100_000).all(|i| s.record(h(i)) == 1));
    }

    /// The doorkeeper set of `x` in `s`.
    fn set_of(s: &FrequencySketch, x: u64) -> usize {
        reduce((x | 1) << 4, s.door.len() / WAYS)
    }

    #[test]
    fn a_key_is_remembered_until_its_set_is_full_and_it_is_replaced() {
        let mut s = FrequencySketch::new(16, 1);
        assert_eq!(s.door.len(), 64);
        let set = set_of(&s, h(7));
        let (mut same, mut other) = (vec![], vec![]);
        for i in 100..100_000 {
            let v = if set_of(&s, h(i)) == set {
                &mut same
            } else {
                &mut other
            };
            v.push(h(i));
        }
        s.record(h(7));
        // Any number of keys in other sets, and three in its own (which
        // fill the set), leave it remembered; so is a key sharing its set.
        for &x in other.iter().chain(&same[..3]) {
            s.record(x);
        }
        assert_eq!(s.record(same[0]), 2);
        assert_eq!(s.record(h(7)), 2);
        // New keys in its full set replace a random way: it goes, in time.
        let mut pushed_out_after = None;
        for (n, &x) in same[3..].iter().enumerate() {
            s.record(x);
            if !s.door.contains(&(h(7) | 1)) {
                pushed_out_after = Some(n + 1);
                break;
            }
        }
        assert!(pushed_out_after.is_some());
        assert_eq!(s.record(h(7)), 1);
    }

    /// Six keys cycling through one set of four, each back before the
    /// other five: with first-in first-out replacement none would ever be
    /// seen twice; with random replacement each is, soon.
    #[test]
    fn keys_cycling_through_a_full_set_are_still_seen_again() {
        let mut s = FrequencySketch::new(16, 3);
        let set = set_of(&s, h(0));
        let six: Vec<u64> = (0..)
            .map(h)
            .filter(|&x| set_of(&s, x) == set)
            .take(6)
            .collect();
        let mut repeats = [0; 6];
        for _ in 0..50 {
            for (i, &x) in six.iter().enumerate() {
                if s.record(x) >= 2 {
                    repeats[i] += 1;
                }
            }
        }
        assert!(repeats.iter().all(|&r| r > 0), "{repeats:?}");
    }

    #[test]
    fn aging_halves_the_counts() {
        let mut s = FrequencySketch::new(16, 1);
        let period = s.period;
        for _ in 0..10 {
            s.record(h(1));
        }
        // 1 (doorkeeper) + 9 counted.
        assert_eq!(s.record(h(1)), 11);
        // Fill the period with one-shot keys outside h(1)'s doorkeeper set:
        // the counters of h(1) halve once.
        let set = set_of(&s, h(1));
        let fillers: Vec<u64> = (1000..)
            .map(h)
            .filter(|&x| set_of(&s, x) != set)
            .take((period - s.samples - 1) as usize)
            .collect();
        fillers.iter().for_each(|&x| {
            s.record(x);
        });
        assert_eq!(s.samples, period - 1);
        // This sighting ages first (10 -> 5), then counts: 1 + 6.
        assert_eq!(s.record(h(1)), 7);
    }

    #[test]
    fn a_resize_keeps_the_doorkeeper_and_resets_the_counters() {
        let mut s = FrequencySketch::new(16, 1);
        for i in 0..10 {
            s.record(h(i));
        }
        assert_eq!(s.record(h(9)), 2);
        s.resize(1024);
        assert_eq!(s.door.len(), 4096);
        // Remembered, and counted afresh: 1 + 1.
        assert!((0..10).all(|i| s.record(h(i)) == 2));
        assert_eq!(s.record(h(1000)), 1);
    }

    #[test]
    fn counters_saturate() {
        let mut s = FrequencySketch::new(1 << 16, 1);
        for _ in 0..1000 {
            s.record(h(3));
        }
        assert_eq!(s.record(h(3)), 256);
    }
}
