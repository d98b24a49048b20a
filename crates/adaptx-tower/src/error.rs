//! Small error types.

use std::fmt;

/// The boxed error of the client-side service, as in tower.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The limiter was closed while the client-side service waited for a permit.
///
/// Returned (boxed) by
/// [`AdaptiveConcurrencyClient::poll_ready`](crate::AdaptiveConcurrencyClient)
/// after [`Limiter::close`](adaptx::Limiter::close). Server-side layers answer
/// with a response instead.
///
/// # Examples
///
/// ```
/// use adaptx::Limiter;
/// use adaptx_tower::{AdaptiveConcurrencyClientLayer, LimiterClosed};
/// use tower::{ServiceBuilder, ServiceExt, service_fn};
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let limiter = Limiter::new();
/// let svc = ServiceBuilder::new()
///     .layer(AdaptiveConcurrencyClientLayer::new(limiter.clone()))
///     .service(service_fn(|_: ()| async { Ok::<_, std::io::Error>("ok") }));
/// limiter.close();
/// let err = svc.oneshot(()).await.unwrap_err();
/// assert!(err.is::<LimiterClosed>());
/// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimiterClosed(());

impl LimiterClosed {
    pub(crate) fn new() -> Self {
        Self(())
    }
}

impl fmt::Display for LimiterClosed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("concurrency limiter is closed")
    }
}

impl std::error::Error for LimiterClosed {}

/// The client-side layer's timeout ran out before the inner service
/// answered.
///
/// Returned (boxed) by
/// [`ClientResponseFuture`](crate::ClientResponseFuture) when
/// [`timeout`](crate::AdaptiveConcurrencyClientLayer::timeout) is set; the
/// request is recorded as a failure. Server-side layers answer with a
/// `504` instead.
///
/// # Examples
///
/// ```
/// use adaptx::Limiter;
/// use adaptx_tower::{AdaptiveConcurrencyClientLayer, Elapsed};
/// use std::time::Duration;
/// use tower::{ServiceBuilder, ServiceExt, service_fn};
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap().block_on(async {
/// let limiter = Limiter::new();
/// let svc = ServiceBuilder::new()
///     .layer(AdaptiveConcurrencyClientLayer::new(limiter.clone()).timeout(Duration::from_secs(1)))
///     .service(service_fn(|_: ()| async {
///         tokio::time::sleep(Duration::from_secs(60)).await; // a hung backend
///         Ok::<_, std::io::Error>("late")
///     }));
/// let err = svc.oneshot(()).await.unwrap_err();
/// assert!(err.is::<Elapsed>());
/// assert_eq!(limiter.stats().failures, 1); // the hang lowers the limit
/// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Elapsed(());

impl Elapsed {
    pub(crate) fn new() -> Self {
        Self(())
    }
}

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("request timed out holding a concurrency permit")
    }
}

impl std::error::Error for Elapsed {}

/// Why a [`RateSource`](crate::RateSource) did not admit a request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rejected {
    /// The request's bucket is empty: the layer answers `429` with
    /// `Retry-After`.
    Limited(adaptx::RateLimited),
    /// The request carries nothing to key it by: the layer answers `500`
    /// and logs the error once.
    NoKey(MissingKey),
}

impl From<adaptx::RateLimited> for Rejected {
    fn from(limited: adaptx::RateLimited) -> Self {
        Self::Limited(limited)
    }
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Limited(limited) => limited.fmt(f),
            Self::NoKey(missing) => missing.fmt(f),
        }
    }
}

impl std::error::Error for Rejected {}

/// A [`KeyExtractor`](crate::KeyExtractor) found nothing to key a request
/// by: a server misconfiguration (for [`ClientIp`](crate::ClientIp), no
/// client address), answered `500` rather than sharing one bucket among
/// every such request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MissingKey {
    extractor: &'static str,
    fix: &'static str,
}

impl MissingKey {
    /// The error of `extractor` (its name), with what to do about it.
    pub fn new(extractor: &'static str, fix: &'static str) -> Self {
        Self { extractor, fix }
    }
}

impl fmt::Display for MissingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} found no key in the request: {}",
            self.extractor, self.fix
        )
    }
}

impl std::error::Error for MissingKey {}
