use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
#[cfg(not(target_os = "linux"))]
use std::time::{SystemTime, UNIX_EPOCH};

use http::{Request, Response, StatusCode, header};
use tower_service::Service;

use super::CurrentRate;
use super::future::{RateHeaders, RateLimitFuture};
use super::key::{RateSource, RateToken, SkipRequest};
use super::layer::OnRateLimited;
use crate::classify::{Answered, Classify};
use crate::error::{MissingKey, Rejected};
use crate::header::{Field, number};

/// The service of [`AdaptiveRateLimitLayer`](crate::AdaptiveRateLimitLayer).
///
/// `poll_ready` is the inner service's; `call` takes a token or answers with
/// the rejection.
///
/// # Examples
///
/// Made by [`AdaptiveRateLimitLayer`](crate::AdaptiveRateLimitLayer):
///
/// ```
/// use adaptx::RateLimiter;
/// use adaptx_tower::AdaptiveRateLimitLayer;
/// use http::{Request, Response, StatusCode};
/// use tower::{Layer, Service, ServiceExt, service_fn};
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let rate = RateLimiter::builder().initial_rate(1).min_rate(1).burst(1).build()?;
/// let mut svc = AdaptiveRateLimitLayer::new(rate).layer(service_fn(|_: Request<()>| async {
///     Ok::<_, std::io::Error>(Response::new(String::from("ok")))
/// }));
/// let first = svc.ready().await?.call(Request::new(())).await?;
/// assert_eq!(first.status(), StatusCode::OK);
/// let second = svc.ready().await?.call(Request::new(())).await?;
/// assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
/// assert_eq!(second.headers()["retry-after"], "1");
/// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct AdaptiveRateLimit<S, L, C, R, P> {
    inner: S,
    source: L,
    classifier: C,
    on_rate_limited: R,
    skip: P,
    headers: bool,
}

impl<S, L, C, R, P> AdaptiveRateLimit<S, L, C, R, P> {
    pub(crate) fn new(
        inner: S,
        source: L,
        classifier: C,
        on_rate_limited: R,
        skip: P,
        headers: bool,
    ) -> Self {
        Self {
            inner,
            source,
            classifier,
            on_rate_limited,
            skip,
            headers,
        }
    }

    /// The limiter.
    pub fn limiter(&self) -> &L {
        &self.source
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

/// Whether a request without a key has been logged (once per process: the
/// mistake is the server's, every request would repeat it).
static NO_KEY_LOGGED: AtomicBool = AtomicBool::new(false);

/// The answer to a request without a key: `500`, and the error logged the
/// first time.
fn no_key<B: Default>(missing: &MissingKey) -> Response<B> {
    if !NO_KEY_LOGGED.swap(true, Ordering::Relaxed) {
        tracing::error!(
            "adaptive rate limit: {missing}; every such request is answered \
             500 (logged once)"
        );
    }
    let mut res = Response::new(B::default());
    *res.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    res
}

/// Unix time in whole seconds, `secs` from now.
fn unix_in(secs: u64) -> u64 {
    unix_now().saturating_add(secs)
}

/// Unix time in whole seconds. On Linux from the coarse real-time clock
/// (`CLOCK_REALTIME_COARSE`): its resolution of a few milliseconds does not
/// matter to a count of seconds, and it costs 4 ns where `SystemTime::now`
/// costs 39 (measured on the benchmark machine); it is read on every
/// admitted request's path.
#[cfg(target_os = "linux")]
fn unix_now() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
    u64::try_from(now.tv_sec).unwrap_or(0)
}

/// Unix time in whole seconds.
#[cfg(not(target_os = "linux"))]
fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl<S, L, C, R, P, ReqBody, ResBody> Service<Request<ReqBody>> for AdaptiveRateLimit<S, L, C, R, P>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ResBody: Default,
    L: RateSource<ReqBody>,
    C: Classify<Response<ResBody>, S::Error> + Clone,
    R: OnRateLimited<ResBody>,
    P: SkipRequest<ReqBody>,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = RateLimitFuture<S::Future, ResBody, C, L::Permit>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<ReqBody>) -> Self::Future {
        if self.skip.skip(&req) {
            req.extensions_mut()
                .insert(CurrentRate(self.source.current_rate()));
            return RateLimitFuture::passthrough(self.inner.call(req));
        }
        match self.source.try_acquire(&req) {
            Ok(permit) => {
                let rate = permit.rate_at_admission();
                let headers = self.headers.then(|| RateHeaders {
                    limit: rate,
                    remaining: permit.remaining(),
                    // A rate of at least 1/s earns a token within a second.
                    reset: unix_in(1),
                });
                req.extensions_mut().insert(CurrentRate(rate));
                RateLimitFuture::running(
                    self.inner.call(req),
                    permit,
                    self.classifier.clone(),
                    headers,
                )
            }
            Err(Rejected::NoKey(missing)) => RateLimitFuture::rejected(no_key(&missing)),
            Err(Rejected::Limited(limited)) => {
                let mut res =
                    Answered::RateShed.mark(self.on_rate_limited.on_rate_limited(&limited));
                let secs = limited.retry_after_secs();
                res.headers_mut()
                    .entry(header::RETRY_AFTER)
                    .or_insert_with(|| number(Field::RetryAfter, secs));
                if self.headers {
                    RateHeaders {
                        limit: limited.rate(),
                        remaining: 0,
                        reset: unix_in(secs),
                    }
                    .apply(&mut res);
                }
                RateLimitFuture::rejected(res)
            }
        }
    }
}
