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
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSkip;

impl<B> SkipRequest<B> for NoSkip {
    fn skip(&self, _req: &Request<B>) -> bool {
        false
    }
}
