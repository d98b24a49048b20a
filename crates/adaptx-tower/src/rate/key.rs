use std::hash::Hash;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use adaptx::{KeyedRateLimiter, Outcome, RateLimited, RateLimiter, RatePermit};
use http::{HeaderName, Request};

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

    /// Admits `req` or says how long to wait.
    ///
    /// # Errors
    ///
    /// [`RateLimited`] when the request's bucket is empty.
    fn try_acquire(&self, req: &Request<B>) -> Result<Self::Permit, RateLimited>;

    /// The current rate, requests per second.
    fn current_rate(&self) -> u64;
}

impl<B> RateSource<B> for RateLimiter {
    type Permit = RatePermit;

    fn try_acquire(&self, _req: &Request<B>) -> Result<RatePermit, RateLimited> {
        RateLimiter::try_acquire(self)
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
    fn extract(&self, req: &Request<B>) -> Self::Key;
}

impl<B, K, F> KeyExtractor<B> for F
where
    F: Fn(&Request<B>) -> K,
{
    type Key = K;

    fn extract(&self, req: &Request<B>) -> K {
        self(req)
    }
}

/// The client's IP address, from the connection.
///
/// Read from axum's `ConnectInfo<SocketAddr>` extension (serve with
/// `into_make_service_with_connect_info::<SocketAddr>()`; needs the `axum`
/// feature), or from a plain `SocketAddr` extension (for hyper servers that
/// insert one). Requests with neither share the bucket of `0.0.0.0`.
///
/// Forwarding headers (`X-Forwarded-For`, `X-Real-IP`) are deliberately not
/// read: any client can set them. Behind a trusted proxy, use [`HeaderKey`]
/// or a closure that parses them.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientIp;

impl<B> KeyExtractor<B> for ClientIp {
    type Key = IpAddr;

    fn extract(&self, req: &Request<B>) -> IpAddr {
        #[cfg(feature = "axum")]
        if let Some(info) = req
            .extensions()
            .get::<axum::extract::ConnectInfo<SocketAddr>>()
        {
            return info.0.ip();
        }
        req.extensions()
            .get::<SocketAddr>()
            .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), SocketAddr::ip)
    }
}

/// The value of a request header (for example an API key); requests without
/// it (or with a non-text value) share the bucket of the empty string.
#[derive(Debug, Clone)]
pub struct HeaderKey(pub HeaderName);

impl<B> KeyExtractor<B> for HeaderKey {
    type Key = String;

    fn extract(&self, req: &Request<B>) -> String {
        req.headers()
            .get(&self.0)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
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

    fn try_acquire(&self, req: &Request<B>) -> Result<RatePermit, RateLimited> {
        self.limiter.try_acquire(&self.extractor.extract(req))
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
