//! The tower layer over the fleet: [`adaptx_tower::AdaptiveRateLimitLayer`]
//! takes a [`FleetRateLimiter`] as its [`RateSource`], so the 429s, the
//! `Retry-After` and the `X-RateLimit-*` headers are the layer's own code.

use adaptx::Outcome;
use adaptx_tower::{AdaptiveRateLimitLayer, RateSource, RateToken, Rejected};
use http::Request;

use crate::{FleetPermit, FleetRateLimiter};

impl RateToken for FleetPermit {
    fn rate_at_admission(&self) -> u64 {
        FleetPermit::rate_at_admission(self)
    }

    fn remaining(&self) -> u64 {
        FleetPermit::remaining(self)
    }

    fn record(self, outcome: Outcome) {
        FleetPermit::record(self, outcome);
    }
}

impl<B> RateSource<B> for FleetRateLimiter {
    type Permit = FleetPermit;

    fn try_acquire(&self, _req: &Request<B>) -> Result<FleetPermit, Rejected> {
        Ok(FleetRateLimiter::try_acquire(self)?)
    }

    fn current_rate(&self) -> u64 {
        FleetRateLimiter::current_rate(self)
    }
}

impl FleetRateLimiter {
    /// The tower layer over this limiter: [`AdaptiveRateLimitLayer`] with
    /// its classifier, rejection, skip and header options.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use adaptx_redis::FleetRateLimiter;
    /// use axum::{Router, routing::get};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = FleetRateLimiter::builder("redis://127.0.0.1:6379", "api").build()?;
    /// let app: Router = Router::new()
    ///     .route("/", get(|| async { "hi" }))
    ///     .layer(limiter.layer());
    /// # Ok(())
    /// # }
    /// ```
    pub fn layer(&self) -> AdaptiveRateLimitLayer<FleetRateLimiter> {
        AdaptiveRateLimitLayer::with_source(self.clone())
    }
}
