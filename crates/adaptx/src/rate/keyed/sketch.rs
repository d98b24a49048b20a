//! How often a key outside the table has been seen lately: a doorkeeper and
//! a count-min sketch over the keys' 64-bit keyed hashes (TinyLFU's
//! frequency filter: Einziger, Friedman and Manes, "TinyLFU: A Highly
//! Efficient Cache Admission Policy", ACM ToS 2017; Caffeine's
//! `FrequencySketch`).
//!
//! # Implementation details
//!
//! * **Doorkeeper**: sets of four hashes, first in first out. A key's first
//!   sighting only writes its hash into its set (pushing out the oldest of
//!   the four); a later sighting that finds the hash still there is a
//!   repeat. The sets are exact (a way holds a whole 64-bit hash, so a key
//!   never passes for seen because another key was, unlike the Bloom
//!   filter of the paper) and forget by pushing out: a key is remembered
//!   until four more new keys have landed in its set, on average for as
//!   many new keys as the doorkeeper has ways, and two keys sharing a set
//!   do not push each other out. So one-shot keys never reach the
//!   counters, whatever their number.
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
    /// Sets of [`WAYS`] ways, each the `hash | 1` of a key seen once, the
    /// newest first; 0 = empty.
    door: Box<[u64]>,
    /// Four rows of `1 << width_bits` counters, row after row.
    counters: Box<[u8]>,
    width_bits: u32,
    /// Sightings since the last aging.
    samples: u32,
    /// Sightings between two agings.
    period: u32,
}

impl FrequencySketch {
    /// A sketch for a shard that tracks about `keys` keys.
    pub(super) fn new(keys: usize) -> Self {
        let width = (4 * keys).clamp(64, 1 << 24).next_power_of_two();
        let door = (2 * keys).clamp(64, 1 << 24).next_power_of_two();
        debug_assert!(door % WAYS == 0);
        Self {
            door: vec![0; door].into_boxed_slice(),
            counters: vec![0; 4 * width].into_boxed_slice(),
            width_bits: width.trailing_zeros(),
            samples: 0,
            period: u32::try_from(width).unwrap_or(u32::MAX),
        }
    }

    /// Records a sighting of the key with hash `h`; returns its estimated
    /// sightings since the last aging, this one included: 1 on a first
    /// sighting (or one the doorkeeper forgot), at least 2 on a repeat.
    pub(super) fn record(&mut self, h: u64) -> u32 {
        self.tick();
        // Bits 8.. choose the set: the top bits chose the shard.
        let sets = self.door.len() / WAYS;
        let first = ((h >> 8) as usize & (sets - 1)) * WAYS;
        let set = &mut self.door[first..first + WAYS];
        if !set.contains(&(h | 1)) {
            set.copy_within(0..WAYS - 1, 1);
            set[0] = h | 1;
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

    /// The counter of `h` in `row`.
    #[inline]
    fn index(&self, row: usize, h: u64) -> usize {
        let col = h.wrapping_mul(ROW_SEEDS[row]) >> (64 - self.width_bits);
        (row << self.width_bits) | col as usize
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
        let mut s = FrequencySketch::new(100);
        assert_eq!(s.record(h(1)), 1);
        assert_eq!(s.record(h(1)), 2);
        assert_eq!(s.record(h(1)), 3);
        assert_eq!(s.record(h(2)), 1);
        assert_eq!(s.record(h(2)), 2);
    }

    #[test]
    fn one_shot_keys_never_pass_for_repeats() {
        let mut s = FrequencySketch::new(100);
        assert!((0..100_000).all(|i| s.record(h(i)) == 1));
    }

    /// The doorkeeper set of `x` in `s`.
    fn set_of(s: &FrequencySketch, x: u64) -> usize {
        (x >> 8) as usize & (s.door.len() / WAYS - 1)
    }

    #[test]
    fn a_key_is_forgotten_only_after_four_more_in_its_set() {
        let mut s = FrequencySketch::new(32);
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
        // Any number of keys in other sets, and three in its own, leave it
        // remembered; and a key sharing its set is remembered too.
        other.iter().for_each(|&x| {
            s.record(x);
        });
        same[..3].iter().for_each(|&x| {
            s.record(x);
        });
        assert_eq!(s.record(same[0]), 2);
        assert_eq!(s.record(h(7)), 2);
        // Four new ones in its set push it out.
        same[3..7].iter().for_each(|&x| {
            s.record(x);
        });
        assert_eq!(s.record(h(7)), 1);
    }

    #[test]
    fn aging_halves_the_counts() {
        let mut s = FrequencySketch::new(16);
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
    fn counters_saturate() {
        let mut s = FrequencySketch::new(1 << 16);
        for _ in 0..1000 {
            s.record(h(3));
        }
        assert_eq!(s.record(h(3)), 256);
    }
}
