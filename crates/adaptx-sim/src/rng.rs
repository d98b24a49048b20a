//! Seeded random streams.
//!
//! Each source of randomness (service times, client errors, arrivals of each
//! client, each limiter's jitter) draws from its own stream, derived from the
//! run's seed with splitmix64. Independent streams keep the runs of different
//! policies on the same seed comparable: a law that admits more requests does
//! not shift the arrival times of the open-loop demand.

/// One splitmix64 step: the standard seed expander (Steele, Lea & Flood,
/// "Fast splittable pseudorandom number generators", OOPSLA 2014).
pub(crate) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seed of stream `stream` of a run seeded with `seed`.
pub(crate) fn stream_seed(seed: u64, stream: u64) -> u64 {
    let mut s = seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03);
    splitmix64(&mut s)
}

/// A generator for stream `stream` of the run seeded with `seed`.
pub(crate) fn stream(seed: u64, stream: u64) -> fastrand::Rng {
    fastrand::Rng::with_seed(stream_seed(seed, stream))
}

/// An exponential variate with mean `mean` (inverse transform).
pub(crate) fn exponential(rng: &mut fastrand::Rng, mean: f64) -> f64 {
    // 1 - u is in (0, 1], so the logarithm is finite.
    -mean * (1.0 - rng.f64()).ln()
}

/// Streams of a run.
pub(crate) mod streams {
    /// Service-time jitter.
    pub(crate) const SERVICE: u64 = 1;
    /// Client errors.
    pub(crate) const CLIENT_ERROR: u64 = 2;
    /// Overload errors at random and from a soft ceiling.
    pub(crate) const FAILURE: u64 = 3;
    /// Arrivals of client `i` are stream `ARRIVALS + i`.
    pub(crate) const ARRIVALS: u64 = 1_000;
    /// The class of each open arrival.
    pub(crate) const CLASS: u64 = 4;
    /// The jitter RNG of client `i`'s limiter is seeded from `LIMITER + i`.
    pub(crate) const LIMITER: u64 = 2_000;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_differ_and_repeat() {
        assert_eq!(stream_seed(1, 2), stream_seed(1, 2));
        assert_ne!(stream_seed(1, 2), stream_seed(1, 3));
        assert_ne!(stream_seed(1, 2), stream_seed(2, 2));
    }

    #[test]
    fn exponential_has_its_mean() {
        let mut rng = stream(7, 0);
        let n = 200_000;
        let mean = (0..n).map(|_| exponential(&mut rng, 3.0)).sum::<f64>() / n as f64;
        assert!((mean - 3.0).abs() < 0.05, "{mean}");
    }
}
