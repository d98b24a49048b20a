use std::hash::Hash;
use std::net::{IpAddr, SocketAddr};

use adaptx::{KeyedRateLimiter, Outcome, RateLimiter, RatePermit};
use http::{HeaderName, Request};

use crate::error::{MissingKey, Rejected};

/// What an admitted request carries to its response: the rate and the
/// tokens left at admission (for the headers), and the way back for its
/// outcome.
///
/// Implemented by [`RatePermit`]; a limiter kept elsewhere (a fleet's, on a
/// shared store) implements it for its own permit and so gets the whole
/// layer. Dropping a token without [`record`](RateToken::record) gives no
/// feedback.
///
/// # Examples
///
/// ```
/// use adaptx::{Outcome, RateLimiter};
/// use adaptx_tower::RateToken;
///
/// let limiter = RateLimiter::builder().initial_rate(10).build()?;
/// let permit = limiter.try_acquire().unwrap();
/// assert_eq!(RateToken::rate_at_admission(&permit), 10);
/// RateToken::record(permit, Outcome::Success);
/// # Ok::<(), adaptx::ConfigError>(())
/// ```
pub trait RateToken {
    /// The rate (requests per second) in force at admission.
    fn rate_at_admission(&self) -> u64;

    /// Whole tokens left just after this admission.
    fn remaining(&self) -> u64;

    /// Records the request's outcome, with the latency from admission.
    fn record(self, outcome: Outcome);
}

impl RateToken for RatePermit {
    fn rate_at_admission(&self) -> u64 {
        RatePermit::rate_at_admission(self)
    }

    fn remaining(&self) -> u64 {
        RatePermit::remaining(self)
    }

    fn record(self, outcome: Outcome) {
        RatePermit::record(self, outcome);
    }
}

/// Where a request's rate permit comes from: a global [`RateLimiter`], a
/// [`Keyed`] limiter with its key extractor, or any limiter whose permit is
/// a [`RateToken`].
///
/// # Examples
///
/// A source of one's own: API calls and static files at separate rates.
///
/// ```
/// use adaptx::{RateLimiter, RatePermit};
/// use adaptx_tower::{AdaptiveRateLimitLayer, RateSource, Rejected};
/// use http::Request;
///
/// #[derive(Clone)]
/// struct PerRoute {
///     api: RateLimiter,
///     files: RateLimiter,
/// }
///
/// impl<B> RateSource<B> for PerRoute {
///     type Permit = RatePermit;
///
///     fn try_acquire(&self, req: &Request<B>) -> Result<RatePermit, Rejected> {
///         let limiter = if req.uri().path().starts_with("/api") { &self.api } else { &self.files };
///         Ok(limiter.try_acquire()?)
///     }
///
///     fn current_rate(&self) -> u64 {
///         self.api.current_rate()
///     }
/// }
///
/// let source = PerRoute {
///     api: RateLimiter::builder().initial_rate(100).build()?,
///     files: RateLimiter::builder().initial_rate(1000).max_rate(5000).build()?,
/// };
/// let req = Request::builder().uri("/api/users").body(())?;
/// assert_eq!(source.try_acquire(&req).unwrap().rate_at_admission(), 100);
/// let _layer = AdaptiveRateLimitLayer::with_source(source);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait RateSource<B> {
    /// The permit an admitted request carries.
    type Permit: RateToken;

    /// Admits `req`, or says how long to wait, or that `req` cannot be
    /// keyed.
    ///
    /// # Errors
    ///
    /// [`Rejected::Limited`] when the request's bucket is empty (the layer
    /// answers 429); [`Rejected::NoKey`] when the request carries nothing to
    /// key it by (a server misconfiguration: the layer answers 500).
    fn try_acquire(&self, req: &Request<B>) -> Result<Self::Permit, Rejected>;

    /// The current rate, requests per second.
    fn current_rate(&self) -> u64;
}

impl<B> RateSource<B> for RateLimiter {
    type Permit = RatePermit;

    fn try_acquire(&self, _req: &Request<B>) -> Result<RatePermit, Rejected> {
        Ok(RateLimiter::try_acquire(self)?)
    }

    fn current_rate(&self) -> u64 {
        RateLimiter::current_rate(self)
    }
}

/// Extracts the key of a request's bucket.
///
/// Implemented by [`ClientIp`], [`HeaderKey`] and every
/// `Fn(&Request<B>) -> K`.
///
/// # Examples
///
/// ```
/// use adaptx::RateLimiter;
/// use adaptx_tower::{AdaptiveRateLimitLayer, KeyExtractor};
/// use http::Request;
///
/// // Any closure over the request is an extractor: here the tenant from the path.
/// let tenant = |req: &Request<()>| req.uri().path().split('/').nth(1).unwrap_or("").to_owned();
/// let req = Request::builder().uri("/acme/orders").body(())?;
/// assert_eq!(tenant.extract(&req)?, "acme");
/// let _layer = AdaptiveRateLimitLayer::keyed(RateLimiter::builder().build_keyed::<String>()?, tenant);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait KeyExtractor<B> {
    /// The key type.
    type Key;

    /// The key of `req`.
    ///
    /// # Errors
    ///
    /// [`MissingKey`] when `req` carries nothing this extractor can key it
    /// by, and sharing one bucket among all such requests would be wrong.
    fn extract(&self, req: &Request<B>) -> Result<Self::Key, MissingKey>;
}

impl<B, K, F> KeyExtractor<B> for F
where
    F: Fn(&Request<B>) -> K,
{
    type Key = K;

    fn extract(&self, req: &Request<B>) -> Result<K, MissingKey> {
        Ok(self(req))
    }
}

/// The client's IP address, from the connection.
///
/// Read from axum's `ConnectInfo<SocketAddr>` extension (serve with
/// `into_make_service_with_connect_info::<SocketAddr>()`; needs the `axum`
/// feature), or from a plain `SocketAddr` extension (for hyper servers that
/// insert one).
///
/// **A request with neither is an error, not a shared bucket**: the layer
/// answers it `500 Internal Server Error` and logs, once per process, an
/// error (`tracing`, target `adaptx_tower`) that names the fix. Without the
/// address every client would share one bucket, so the limit would
/// silently become global: the 500 shows the mistake on the first request
/// a developer sends, where a warning in the log could be missed until
/// production. (No check can run when the layer is built: the extension is
/// inserted per connection by the server, which the layer does not see.)
///
/// Forwarding headers (`X-Forwarded-For`, `X-Real-IP`) are deliberately not
/// read: any client can set them. Behind a trusted proxy, use [`HeaderKey`]
/// or a closure that parses them.
///
/// # Examples
///
/// ```
/// use adaptx_tower::{ClientIp, KeyExtractor};
/// use http::Request;
/// use std::net::SocketAddr;
///
/// let mut req = Request::new(());
/// req.extensions_mut().insert("10.1.2.3:4567".parse::<SocketAddr>()?);
/// assert_eq!(ClientIp.extract(&req)?.to_string(), "10.1.2.3");
/// // No address (served without `ConnectInfo`): an error, answered 500.
/// assert!(ClientIp.extract(&Request::new(())).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientIp;

/// What [`ClientIp`]'s error says to do.
const CLIENT_IP_FIX: &str = "serve the app with \
    `into_make_service_with_connect_info::<SocketAddr>()` (axum), or insert \
    the peer's `SocketAddr` into the request's extensions (hyper)";

impl<B> KeyExtractor<B> for ClientIp {
    type Key = IpAddr;

    fn extract(&self, req: &Request<B>) -> Result<IpAddr, MissingKey> {
        #[cfg(feature = "axum")]
        if let Some(info) = req
            .extensions()
            .get::<axum::extract::ConnectInfo<SocketAddr>>()
        {
            return Ok(info.0.ip());
        }
        req.extensions()
            .get::<SocketAddr>()
            .map(SocketAddr::ip)
            .ok_or(MissingKey::new("ClientIp", CLIENT_IP_FIX))
    }
}

/// The value of a request header (for example an API key); requests without
/// it (or with a non-text value) share the bucket of the empty string.
///
/// # Examples
///
/// ```
/// use adaptx::RateLimiter;
/// use adaptx_tower::{AdaptiveRateLimitLayer, HeaderKey, KeyExtractor};
/// use http::{HeaderName, Request};
///
/// let key = HeaderKey(HeaderName::from_static("x-api-key"));
/// let req = Request::builder().header("x-api-key", "k-123").body(())?;
/// assert_eq!(key.extract(&req)?, "k-123");
/// let _layer = AdaptiveRateLimitLayer::keyed(RateLimiter::builder().build_keyed::<String>()?, key);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct HeaderKey(pub HeaderName);

impl<B> KeyExtractor<B> for HeaderKey {
    type Key = String;

    fn extract(&self, req: &Request<B>) -> Result<String, MissingKey> {
        Ok(req
            .headers()
            .get(&self.0)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned())
    }
}

/// A [`KeyedRateLimiter`] with the extractor of its keys.
///
/// # Examples
///
/// ```
/// use adaptx::RateLimiter;
/// use adaptx_tower::{ClientIp, Keyed, RateSource};
/// use http::Request;
///
/// use std::net::SocketAddr;
///
/// let keyed = Keyed::new(RateLimiter::builder().initial_rate(20).build_keyed()?, ClientIp);
/// assert_eq!(RateSource::<()>::current_rate(&keyed), 20);
/// let mut req = Request::new(());
/// req.extensions_mut().insert("10.1.2.3:4567".parse::<SocketAddr>()?);
/// assert!(keyed.try_acquire(&req).is_ok());
/// // A request without the client's address cannot be keyed.
/// assert!(keyed.try_acquire(&Request::new(())).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Keyed<K, X> {
    limiter: KeyedRateLimiter<K>,
    extractor: X,
}

impl<K, X> Keyed<K, X> {
    /// `limiter`, keyed by `extractor`.
    pub fn new(limiter: KeyedRateLimiter<K>, extractor: X) -> Self {
        Self { limiter, extractor }
    }

    /// The limiter.
    pub fn limiter(&self) -> &KeyedRateLimiter<K> {
        &self.limiter
    }
}

impl<B, K, X> RateSource<B> for Keyed<K, X>
where
    K: Hash + Eq + Clone,
    X: KeyExtractor<B, Key = K>,
{
    type Permit = RatePermit;

    fn try_acquire(&self, req: &Request<B>) -> Result<RatePermit, Rejected> {
        let key = self.extractor.extract(req).map_err(Rejected::NoKey)?;
        Ok(self.limiter.try_acquire(&key)?)
    }

    fn current_rate(&self) -> u64 {
        self.limiter.current_rate()
    }
}

/// Decides which requests bypass the rate limit (health checks, metrics).
///
/// Implemented by [`NoSkip`] and every `Fn(&Request<B>) -> bool`.
///
/// # Examples
///
/// ```
/// use adaptx::RateLimiter;
/// use adaptx_tower::{AdaptiveRateLimitLayer, SkipRequest};
/// use http::Request;
///
/// let health = |req: &Request<()>| req.uri().path() == "/health";
/// assert!(health.skip(&Request::builder().uri("/health").body(())?));
/// let _layer = AdaptiveRateLimitLayer::new(RateLimiter::builder().build()?).skip(health);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait SkipRequest<B> {
    /// Whether `req` bypasses the limit.
    fn skip(&self, req: &Request<B>) -> bool;
}

impl<B, F> SkipRequest<B> for F
where
    F: Fn(&Request<B>) -> bool,
{
    fn skip(&self, req: &Request<B>) -> bool {
        self(req)
    }
}

/// Skips no request (the default).
///
/// # Examples
///
/// ```
/// use adaptx_tower::{NoSkip, SkipRequest};
///
/// assert!(!NoSkip.skip(&http::Request::new(())));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSkip;

impl<B> SkipRequest<B> for NoSkip {
    fn skip(&self, _req: &Request<B>) -> bool {
        false
    }
}
