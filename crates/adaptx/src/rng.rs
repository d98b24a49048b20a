//! Seeded pseudo-randomness shared by the modules that draw without a
//! generator of their own (a draw from a value, or from an atomic counter).

/// SplitMix64's golden gamma: the step of its counter.
pub(crate) const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64's finalizer (Steele, Lea and Flood, "Fast splittable
/// pseudorandom number generators", 2014) applied to `x + γ`: spreads every
/// input bit over the output. Fed a counter stepped by [`GOLDEN_GAMMA`], it
/// is the SplitMix64 generator.
pub(crate) fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(GOLDEN_GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A uniform draw in `[0, 1)` from 64 random bits (their top 53).
pub(crate) fn unit(bits: u64) -> f64 {
    (bits >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_the_reference_vector() {
        // The first output of the reference SplitMix64 seeded with 0 is the
        // finalizer applied to the golden gamma.
        assert_eq!(splitmix64(0), 0xe220_a839_7b1d_cdaf);
    }

    #[test]
    fn unit_spans_zero_to_below_one() {
        assert_eq!(unit(0), 0.0);
        assert!(unit(u64::MAX) < 1.0);
        assert!((unit(1 << 63) - 0.5).abs() < 1e-15);
    }
}
