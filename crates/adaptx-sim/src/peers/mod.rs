//! Peer laws: re-implementations of the control laws a user would otherwise
//! pick, so the simulator can show them beside adaptx's own.
//!
//! Each peer is a [`ControlLaw`](adaptx::ControlLaw) written from the peer's
//! *published description* (its source code read at a given version, its
//! issue threads and tests, as summarised in the project's
//! `peer-algorithms.md`) — **not their code**, and not endorsed by them:
//!
//! | law | peer | cadence here |
//! |---|---|---|
//! | [`NetflixGradient2`] | Netflix concurrency-limits `Gradient2Limit` under `WindowedLimit` | one 1 s window |
//! | [`NetflixAimd`] | Netflix concurrency-limits `AIMDLimit` under `WindowedLimit` | one 1 s window |
//! | [`VectorArc`] | Vector's adaptive request concurrency | once per smoothed RTT, counted in 5 ms ticks |
//! | [`EnvoyGradient`] | Envoy's adaptive concurrency gradient controller | every 100 ms, with minRTT probes |
//!
//! # What is kept, and what had to be adapted
//!
//! The peers' own parameters are their published defaults, and their known
//! weaknesses are kept, not fixed: Gradient2 still ignores errors and its
//! long RTT still drifts up under load (the runaway of Netflix PR #134);
//! Vector's limit still decays when unused; Envoy still pins the limit at
//! its floor until a probe has its 50 samples. This is a comparison.
//!
//! adaptx hands a law one [`WindowSummary`](adaptx::WindowSummary) per sample
//! window, from the completion that closes it; a window without samples is
//! not handed over at all. The peers decide per sample, per window, per RTT
//! or per timer, so each file says how its cadence maps onto windows. Common
//! to all:
//!
//! - **Time** is the sum of the `duration_nanos` of the windows seen: no law
//!   reads a clock. Time in windows without any completion is not seen (the
//!   peers too decide only at completions or on samples, except Envoy's
//!   timers, which do nothing without samples either).
//! - **Latency** is the window's mean (`mean_rtt_nanos`, failures
//!   included) where a peer uses an average, and also where it uses a
//!   percentile (Envoy's p50): a summary carries no percentiles.
//! - **In-flight** is the window's peak at a completion, counting the
//!   completing operation (Netflix counts it at acquire).
//! - **A failure** (a rejection or a timeout) is a drop for Netflix and
//!   back-pressure for Vector; adaptx's split into fresh and stale failures
//!   is ignored, since no peer has a recovery rule.
//! - **Bounds**: `[min_limit, max_limit]` are the scenario's, as for
//!   adaptx's laws, so every policy works within the same bounds (the
//!   peers' default floors differ: Netflix's 20 would forbid any limit below
//!   20). Envoy keeps its `min_concurrency` of 3 as a floor because its probe
//!   and its floor trigger are built on it.
//! - The limiter's own jitter and warmup are off for peers: the simulator
//!   builds their limiters with `jitter(0.0)` and `warmup_samples(0)`, and
//!   each peer applies its own start-up rule.
//!
//! Laws are pure: no clock reads, no allocation, no locks; all state is in
//! the struct. Envoy's probe jitter draws from a seeded generator kept in
//! the struct.

use adaptx::Builder;

use crate::scenario::{Law, LimiterSpec};

mod envoy;
mod netflix;
mod vector;

pub use envoy::{
    ENVOY_BUFFER, ENVOY_MAX_GRADIENT, ENVOY_MIN_CONCURRENCY, ENVOY_MIN_GRADIENT,
    ENVOY_MIN_RTT_INTERVAL, ENVOY_PROBE_JITTER, ENVOY_REQUEST_COUNT, ENVOY_UPDATE_INTERVAL,
    EnvoyGradient,
};
pub use netflix::{
    NETFLIX_AIMD_BACKOFF, NETFLIX_AIMD_TIMEOUT, NETFLIX_G2_LONG_WINDOW, NETFLIX_G2_QUEUE,
    NETFLIX_G2_SMOOTHING, NETFLIX_G2_TOLERANCE, NETFLIX_WINDOW, NETFLIX_WINDOW_MIN_SAMPLES,
    NetflixAimd, NetflixGradient2,
};
pub use vector::{
    VECTOR_DECREASE_RATIO, VECTOR_EWMA_ALPHA, VECTOR_RTT_DEVIATION_SCALE, VECTOR_TICK, VectorArc,
};

/// The builder of a peer's limiter: the scenario's bounds (and initial
/// limit, except for Envoy, which starts at its floor), the peer's own
/// cadence as the sample window, no jitter and no warmup, and the law.
/// `b` carries the clock and the seed; `law` is a peer.
pub(crate) fn builder(b: Builder, law: Law, spec: &LimiterSpec, seed: u64) -> Builder {
    let min = spec.min_limit.unwrap_or(adaptx::DEFAULT_MIN_LIMIT);
    let max = spec.max_limit.unwrap_or(adaptx::DEFAULT_MAX_LIMIT).max(min);
    let mut b = b
        .min_limit(min)
        .max_limit(max)
        .jitter(0.0)
        .warmup_samples(0);
    if let Some(v) = spec.initial_limit {
        b = b.initial_limit(v);
    }
    match law {
        Law::NetflixGradient2 => b
            .sample_window(NETFLIX_WINDOW)
            .law(NetflixGradient2::new(min, max)),
        Law::NetflixAimd => b
            .sample_window(NETFLIX_WINDOW)
            .law(NetflixAimd::new(min, max)),
        Law::VectorArc => b.sample_window(VECTOR_TICK).law(VectorArc::new(max)),
        Law::EnvoyGradient => {
            let envoy = EnvoyGradient::new(min, max, seed);
            b.initial_limit(envoy.floor())
                .sample_window(ENVOY_UPDATE_INTERVAL)
                .law(envoy)
        }
        Law::Aimd
        | Law::Vegas
        | Law::Gradient
        | Law::Ceiling
        | Law::Rate
        | Law::RateCubic
        | Law::Throttle => b,
    }
}

/// A window summary for the peers' unit tests: `samples` samples of mean
/// and minimum `rtt_ms`, peak in-flight `peak`, no failures, `duration_ms`
/// long.
#[cfg(test)]
pub(crate) fn window(
    duration_ms: u64,
    samples: u64,
    peak: usize,
    rtt_ms: f64,
) -> adaptx::WindowSummary {
    let duration = std::time::Duration::from_millis(duration_ms);
    let mut w = adaptx::WindowSummary::new(duration, samples, 0, peak, std::time::Duration::ZERO)
        .expect("a consistent window");
    // The latencies as the tests' exact floats.
    w.mean_rtt_nanos = rtt_ms * 1e6;
    w.mean_ok_rtt_nanos = rtt_ms * 1e6;
    w.min_rtt_nanos = rtt_ms * 1e6;
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::Policy;

    #[test]
    fn each_peer_limiter_runs_its_law_under_its_label_and_the_scenario_bounds() {
        let spec = LimiterSpec {
            initial_limit: Some(12),
            min_limit: Some(2),
            max_limit: Some(300),
            jitter: Some(0.5),
            ..LimiterSpec::default()
        };
        for law in Law::PEERS {
            let limiter = crate::sim::limiter_builder(
                &spec,
                Some(Policy::Law(law)),
                1,
                adaptx::ManualClock::new(),
            )
            .build()
            .expect("a peer's limiter builds");
            let stats = limiter.stats();
            assert_eq!(stats.algorithm, law.to_string());
            assert_eq!(stats.max_limit, 300);
            if law == Law::EnvoyGradient {
                // Envoy starts at its floor, min_concurrency.
                assert_eq!(stats.min_limit, 2);
                assert_eq!(stats.limit, ENVOY_MIN_CONCURRENCY);
            } else {
                assert_eq!((stats.min_limit, stats.limit), (2, 12));
            }
        }
    }
}
