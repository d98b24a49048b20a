//! Adaptive rate limiting: `429 Too Many Requests` with `Retry-After` and
//! `X-RateLimit-*` headers, over a global or a keyed rate limiter.

mod future;
mod key;
mod layer;
mod service;

pub use future::RateLimitFuture;
pub use key::{
    ClientIp, HeaderKey, KeyExtractor, Keyed, NoSkip, RateSource, RateToken, SkipRequest,
};
pub use layer::{AdaptiveRateLimitLayer, DefaultRejection, OnRateLimited};
pub use service::AdaptiveRateLimit;

/// The current rate of the limiter (requests per second) when a request was
/// admitted, inserted into the request's extensions for the handler.
///
/// With axum: `Extension(CurrentRate(rate)): Extension<CurrentRate>`.
///
/// # Examples
///
/// ```
/// use adaptx::RateLimiter;
/// use adaptx_tower::{AdaptiveRateLimitLayer, CurrentRate};
/// use http::{Request, Response};
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let svc = AdaptiveRateLimitLayer::new(RateLimiter::builder().initial_rate(40).build()?)
///     .layer(service_fn(|req: Request<()>| async move {
///         let CurrentRate(rate) = req.extensions().get::<CurrentRate>().copied().unwrap();
///         Ok::<_, std::io::Error>(Response::new(format!("your rate: {rate}/s")))
///     }));
/// let res = svc.oneshot(Request::new(())).await?;
/// assert_eq!(res.body(), "your rate: 40/s");
/// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CurrentRate(pub u64);

/// The `X-RateLimit-Limit` header: the current adaptive rate, requests per
/// second.
pub const X_RATELIMIT_LIMIT: http::HeaderName = http::HeaderName::from_static("x-ratelimit-limit");
/// The `X-RateLimit-Remaining` header: whole tokens left in the bucket.
pub const X_RATELIMIT_REMAINING: http::HeaderName =
    http::HeaderName::from_static("x-ratelimit-remaining");
/// The `X-RateLimit-Reset` header: Unix time, in seconds, by which the bucket
/// holds a token again.
pub const X_RATELIMIT_RESET: http::HeaderName = http::HeaderName::from_static("x-ratelimit-reset");
