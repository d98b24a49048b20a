//! The adaptive rate limiter in front of the backend: the `[rate_limiter]`
//! table.
//!
//! A scenario with a `[rate_limiter]` admits every request through adaptx's
//! [`RateLimiter`](adaptx::RateLimiter) (mizu's law: the token bucket's rate
//! moves once per `adjust_interval` from the interval's error rate and mean
//! latency) instead of the concurrency limiter, and is run with the policy
//! `rate`; its fixed baselines and its oracle are fixed *rates* (a limiter
//! with `min_rate = max_rate = initial_rate = r`). The measures are the same:
//! a second's "limit" is the rate in force.
//!
//! ```toml
//! [rate_limiter]          # adaptx RateLimiterBuilder options; unset ones keep its defaults
//! initial_rate = 800
//! min_rate = 10
//! max_rate = 2000
//! target_latency = "100ms"
//! error_threshold = 0.1
//! adjust_interval = "1s"
//! burst = 20              # default: one second's worth of tokens at the current rate
//! keyed = true            # one keyed limiter shared by the clients, a bucket per client
//! ```
//!
//! An open-demand arrival that finds no token is shed. A closed-loop worker
//! that finds no token waits the `retry_after` the limiter answers and tries
//! again; each try counts as an arrival and each refusal as shed.

use std::sync::Arc;
use std::time::Duration;

use adaptx::{
    ConfigError, KeyedRateLimiter, ManualClock, RateAlgorithm, RateLimiter, RateLimiterBuilder,
};
use serde::Deserialize;

use crate::time::Nanos;

/// Options of the adaptive rate limiter; unset ones keep adaptx's defaults.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimiterSpec {
    /// `RateLimiterBuilder::initial_rate`.
    pub initial_rate: Option<u64>,
    /// `RateLimiterBuilder::min_rate`; also the bottom of the oracle's sweep.
    pub min_rate: Option<u64>,
    /// `RateLimiterBuilder::max_rate`; also the top of the oracle's sweep.
    pub max_rate: Option<u64>,
    /// `RateLimiterBuilder::target_latency`.
    pub target_latency: Option<Nanos>,
    /// `RateLimiterBuilder::error_threshold`.
    pub error_threshold: Option<f64>,
    /// `RateLimiterBuilder::adjust_interval`.
    pub adjust_interval: Option<Nanos>,
    /// `RateLimiterBuilder::burst`.
    pub burst: Option<u64>,
    /// One keyed limiter shared by every client, a bucket per client, one
    /// rate (`build_keyed`); default `false`: each client its own limiter.
    pub keyed: Option<bool>,
}

impl RateLimiterSpec {
    /// `self` with every option `over` sets replaced by `over`'s.
    pub fn overlaid(&self, over: &RateLimiterSpec) -> RateLimiterSpec {
        RateLimiterSpec {
            initial_rate: over.initial_rate.or(self.initial_rate),
            min_rate: over.min_rate.or(self.min_rate),
            max_rate: over.max_rate.or(self.max_rate),
            target_latency: over.target_latency.or(self.target_latency),
            error_threshold: over.error_threshold.or(self.error_threshold),
            adjust_interval: over.adjust_interval.or(self.adjust_interval),
            burst: over.burst.or(self.burst),
            keyed: over.keyed.or(self.keyed),
        }
    }

    /// Whether the clients share one keyed limiter.
    pub fn is_keyed(&self) -> bool {
        self.keyed.unwrap_or(false)
    }

    /// The configured `max_rate`, or adaptx's default.
    pub fn max_rate(&self) -> u64 {
        self.max_rate.unwrap_or(adaptx::DEFAULT_MAX_RATE)
    }

    /// The configured `min_rate`, or adaptx's default.
    pub fn min_rate(&self) -> u64 {
        self.min_rate.unwrap_or(adaptx::DEFAULT_MIN_RATE)
    }

    /// The builder on `clock` with law `algorithm`; a fixed rate `r` if
    /// given.
    pub(crate) fn builder(
        &self,
        algorithm: RateAlgorithm,
        fixed: Option<u64>,
        clock: ManualClock,
    ) -> RateLimiterBuilder {
        let mut b = RateLimiter::builder().algorithm(algorithm).clock(clock);
        if let Some(v) = self.target_latency {
            b = b.target_latency(Duration::from_nanos(v.0));
        }
        if let Some(v) = self.error_threshold {
            b = b.error_threshold(v);
        }
        if let Some(v) = self.adjust_interval {
            b = b.adjust_interval(Duration::from_nanos(v.0));
        }
        if let Some(v) = self.burst {
            b = b.burst(v);
        }
        if let Some(r) = fixed {
            return b.initial_rate(r).min_rate(r).max_rate(r);
        }
        if let Some(v) = self.initial_rate {
            b = b.initial_rate(v);
        }
        if let Some(v) = self.min_rate {
            b = b.min_rate(v);
        }
        if let Some(v) = self.max_rate {
            b = b.max_rate(v);
        }
        b
    }

    /// Checks the options with adaptx's builder (both forms).
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        let b = self.builder(RateAlgorithm::default(), None, ManualClock::new());
        if self.is_keyed() {
            b.build_keyed::<u32>().map(drop)
        } else {
            b.build().map(drop)
        }
    }
}

/// A client's rate limiter: its own, or its key in a shared keyed one.
#[derive(Debug, Clone)]
pub(crate) enum RateAdmission {
    /// The client's own limiter.
    Own(RateLimiter),
    /// Key `client` of a limiter the clients share.
    Keyed(Arc<KeyedRateLimiter<u32>>, u32),
}

impl RateAdmission {
    pub(crate) fn try_acquire(&self) -> Result<adaptx::RatePermit, adaptx::RateLimited> {
        match self {
            RateAdmission::Own(l) => l.try_acquire(),
            RateAdmission::Keyed(l, k) => l.try_acquire(k),
        }
    }

    pub(crate) fn rate(&self) -> u64 {
        match self {
            RateAdmission::Own(l) => l.current_rate(),
            RateAdmission::Keyed(l, _) => l.current_rate(),
        }
    }
}
