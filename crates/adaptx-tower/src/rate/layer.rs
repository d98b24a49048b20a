use adaptx::{KeyedRateLimiter, RateLimited, RateLimiter};
use http::{Response, StatusCode};
use tower_layer::Layer;

use super::key::{Keyed, NoSkip};
use super::service::AdaptiveRateLimit;
use crate::classify::HttpClassifier;

/// Builds the response to a rate-limited request.
///
/// Implemented by [`DefaultRejection`] and every
/// `Fn(&RateLimited) -> Response<B>`. The layer then adds `Retry-After`
/// (unless the response has one) and, if enabled, the `X-RateLimit-*`
/// headers.
///
/// # Examples
///
/// ```
/// use adaptx::{RateLimited, RateLimiter};
/// use adaptx_tower::AdaptiveRateLimitLayer;
/// use http::{Response, StatusCode};
///
/// let layer = AdaptiveRateLimitLayer::new(RateLimiter::builder().build()?).on_rate_limited(
///     |limited: &RateLimited| {
///         let mut res = Response::new(format!("slow down: {}s", limited.retry_after_secs()));
///         *res.status_mut() = StatusCode::TOO_MANY_REQUESTS;
///         res // the layer adds Retry-After and the X-RateLimit-* headers
///     },
/// );
/// # let _ = layer;
/// # Ok::<(), adaptx::ConfigError>(())
/// ```
pub trait OnRateLimited<B> {
    /// The response to a request rejected with `limited`.
    fn on_rate_limited(&self, limited: &RateLimited) -> Response<B>;
}

impl<B, F> OnRateLimited<B> for F
where
    F: Fn(&RateLimited) -> Response<B>,
{
    fn on_rate_limited(&self, limited: &RateLimited) -> Response<B> {
        self(limited)
    }
}

/// The default rejection: `429 Too Many Requests` with an empty body.
///
/// # Examples
///
/// ```
/// use adaptx::{RateLimited, RateLimiter};
/// use adaptx_tower::{AdaptiveRateLimitLayer, DefaultRejection, OnRateLimited};
/// use std::time::Duration;
///
/// let res: http::Response<String> =
///     DefaultRejection.on_rate_limited(&RateLimited::new(Duration::from_secs(2), 10));
/// assert_eq!(res.status(), 429);
/// // What `AdaptiveRateLimitLayer::new` uses unless told otherwise.
/// let _layer = AdaptiveRateLimitLayer::new(RateLimiter::builder().build()?);
/// # Ok::<(), adaptx::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultRejection;

impl<B: Default> OnRateLimited<B> for DefaultRejection {
    fn on_rate_limited(&self, _limited: &RateLimited) -> Response<B> {
        let mut res = Response::new(B::default());
        *res.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        res
    }
}

/// Applies an adaptive rate limit to an HTTP server.
///
/// Each request takes a token from the [`RateLimiter`]'s bucket (or from its
/// key's bucket in a [`KeyedRateLimiter`]). Without one it is answered at
/// once with `429 Too Many Requests` and `Retry-After` = the whole seconds
/// until a token is due (at least 1). Admitted requests carry a
/// [`RatePermit`](adaptx::RatePermit) to their response; the
/// [classifier](crate::Classify) (default [`HttpClassifier`]: inner errors,
/// 503, 504, 408 and an upstream's 429 are failures; other 5xx give no
/// feedback) and the latency from admission feed the controller that moves
/// the rate. A response future dropped before the response (a client that
/// disconnects) gives no feedback and counts as dropped.
///
/// Its 429s carry the mark [`Answered::RateShed`](crate::Answered), so an
/// adaptx layer outside does not take them for overload; a response an
/// inner adaptx layer produced is judged by its mark before the classifier
/// (a concurrency layer's 503 gives no feedback, its timeout is a failure).
///
/// Every response (admitted or rejected) carries `X-RateLimit-Limit` (the
/// current adaptive rate), `X-RateLimit-Remaining` and `X-RateLimit-Reset`,
/// unless [`headers(false)`](AdaptiveRateLimitLayer::headers). Admitted
/// requests get a [`CurrentRate`](crate::CurrentRate) extension.
///
/// A request the source cannot key ([`ClientIp`](crate::ClientIp) on a
/// server that does not provide the client's address) is answered `500
/// Internal Server Error` and the error, which names the fix, is logged
/// once (`tracing`): see [`Rejected::NoKey`](crate::Rejected::NoKey).
///
/// The error type is the inner service's: it fits axum.
///
/// # Examples
///
/// ```
/// use adaptx::RateLimiter;
/// use adaptx_tower::{AdaptiveRateLimitLayer, ClientIp};
/// use axum::{Router, http::Request, routing::get};
///
/// // One bucket per client IP; /health is never limited.
/// let limiter = RateLimiter::builder().initial_rate(50).build_keyed()?;
/// let layer = AdaptiveRateLimitLayer::keyed(limiter, ClientIp)
///     .skip(|req: &Request<axum::body::Body>| req.uri().path() == "/health");
/// let app: Router = Router::new()
///     .route("/", get(|| async { "hi" }))
///     .route("/health", get(|| async { "ok" }))
///     .layer(layer);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct AdaptiveRateLimitLayer<L, C = HttpClassifier, R = DefaultRejection, P = NoSkip> {
    source: L,
    classifier: C,
    on_rate_limited: R,
    skip: P,
    headers: bool,
}

impl AdaptiveRateLimitLayer<RateLimiter> {
    /// A layer over one global `limiter`.
    pub fn new(limiter: RateLimiter) -> Self {
        Self::with_source(limiter)
    }
}

impl<K, X> AdaptiveRateLimitLayer<Keyed<K, X>> {
    /// A layer over a bucket per key, keyed by `extractor`
    /// ([`ClientIp`](crate::ClientIp), [`HeaderKey`](crate::HeaderKey) or a
    /// closure `Fn(&Request<B>) -> K`).
    pub fn keyed(limiter: KeyedRateLimiter<K>, extractor: X) -> Self {
        Self::with_source(Keyed::new(limiter, extractor))
    }
}

impl<L> AdaptiveRateLimitLayer<L> {
    /// A layer over any [`RateSource`](crate::RateSource).
    pub fn with_source(source: L) -> Self {
        Self {
            source,
            classifier: HttpClassifier::new(),
            on_rate_limited: DefaultRejection,
            skip: NoSkip,
            headers: true,
        }
    }
}

impl<L, C, R, P> AdaptiveRateLimitLayer<L, C, R, P> {
    /// The limiter (a [`RateLimiter`] or a [`Keyed`] limiter), for
    /// `current_rate` and `stats`.
    pub fn limiter(&self) -> &L {
        &self.source
    }

    /// Whether to send the `X-RateLimit-*` headers (default `true`).
    pub fn headers(mut self, on: bool) -> Self {
        self.headers = on;
        self
    }

    /// Replaces the classifier.
    pub fn classifier<C2>(self, classifier: C2) -> AdaptiveRateLimitLayer<L, C2, R, P> {
        AdaptiveRateLimitLayer {
            source: self.source,
            classifier,
            on_rate_limited: self.on_rate_limited,
            skip: self.skip,
            headers: self.headers,
        }
    }

    /// Replaces the rejection response (see [`OnRateLimited`]); it is
    /// handed the [`RateLimited`], with
    /// [`retry_after_secs`](RateLimited::retry_after_secs).
    pub fn on_rate_limited<R2>(self, on_rate_limited: R2) -> AdaptiveRateLimitLayer<L, C, R2, P> {
        AdaptiveRateLimitLayer {
            source: self.source,
            classifier: self.classifier,
            on_rate_limited,
            skip: self.skip,
            headers: self.headers,
        }
    }

    /// Lets the requests `skip` picks through without a token, headers or
    /// feedback (see [`SkipRequest`](crate::SkipRequest)).
    pub fn skip<P2>(self, skip: P2) -> AdaptiveRateLimitLayer<L, C, R, P2> {
        AdaptiveRateLimitLayer {
            source: self.source,
            classifier: self.classifier,
            on_rate_limited: self.on_rate_limited,
            skip,
            headers: self.headers,
        }
    }
}

impl<S, L: Clone, C: Clone, R: Clone, P: Clone> Layer<S> for AdaptiveRateLimitLayer<L, C, R, P> {
    type Service = AdaptiveRateLimit<S, L, C, R, P>;

    fn layer(&self, inner: S) -> Self::Service {
        AdaptiveRateLimit::new(
            inner,
            self.source.clone(),
            self.classifier.clone(),
            self.on_rate_limited.clone(),
            self.skip.clone(),
            self.headers,
        )
    }
}
