use std::fmt;
use std::future::Future;
use std::mem;
use std::pin::Pin;
use std::task::{Context, Poll, Waker, ready};

use adaptx::{Acquire, Class, Limiter, OwnedPermit};
use http::{Request, Response};
use http_body::Body;
use tower_service::Service;

use super::body::PermitBody;
use super::class::ClassBy;
use super::future::{Admit, BodyResponseFuture, ClientResponseFuture, ResponseFuture};
use super::{Deadlines, ServerConfig};
use crate::classify::Classify;
use crate::error::{BoxError, LimiterClosed};

/// The server-side service of [`AdaptiveConcurrencyLayer`](crate::AdaptiveConcurrencyLayer).
///
/// `poll_ready` is the inner service's; `call` takes a permit or answers
/// with the rejection response.
///
/// # Examples
///
/// Made by [`AdaptiveConcurrencyLayer::server`](crate::AdaptiveConcurrencyLayer::server):
///
/// ```
/// use adaptx::Limiter;
/// use adaptx_tower::AdaptiveConcurrencyLayer;
/// use http::{Request, Response, StatusCode};
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let limiter = Limiter::builder().initial_limit(1).build()?;
/// let svc = AdaptiveConcurrencyLayer::server(limiter.clone()).layer(service_fn(
///     |_: Request<()>| async { Ok::<_, std::io::Error>(Response::new(String::from("ok"))) },
/// ));
/// let _held = limiter.try_acquire()?; // the only permit
/// let res = svc.oneshot(Request::new(())).await?;
/// assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE); // an answer, not an error
/// assert_eq!(limiter.stats().rejected, 1);
/// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct AdaptiveConcurrency<S, C> {
    inner: S,
    limiter: Limiter,
    classifier: C,
    config: ServerConfig,
    class_by: Option<ClassBy>,
}

impl<S: fmt::Debug, C> fmt::Debug for AdaptiveConcurrency<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveConcurrency")
            .field("inner", &self.inner)
            .field("limiter", &self.limiter)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<S, C> AdaptiveConcurrency<S, C> {
    pub(crate) fn new(
        inner: S,
        limiter: Limiter,
        classifier: C,
        config: ServerConfig,
        class_by: Option<ClassBy>,
    ) -> Self {
        Self {
            inner,
            limiter,
            classifier,
            config,
            class_by,
        }
    }

    /// The limiter.
    pub fn limiter(&self) -> &Limiter {
        &self.limiter
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, C, ReqBody, ResBody> Service<Request<ReqBody>> for AdaptiveConcurrency<S, C>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    C: Classify<Response<ResBody>, S::Error> + Clone,
    ResBody: Default,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S, Request<ReqBody>, C>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        ResponseFuture::new(
            self.admit(req),
            self.classifier.clone(),
            self.config.answers,
        )
    }
}

impl<S, C> AdaptiveConcurrency<S, C> {
    /// Takes a permit and calls the inner service, queues for one, or
    /// rejects.
    ///
    /// Each request that ends without a permit counts as rejected exactly
    /// once: a failed `try_acquire` counts one, and so does an abandoned
    /// wait, so the queueing path never starts with `try_acquire`. Its wait
    /// is polled once here instead, which takes a free permit at once (the
    /// fast path of `Acquire`) or joins the line.
    #[inline]
    fn admit<B>(&mut self, mut req: Request<B>) -> Admit<S, Request<B>>
    where
        S: Service<Request<B>> + Clone,
    {
        // Without `class_by` the request is not moved before the inner call
        // (a move of a request is a copy of a few hundred bytes).
        let class = match &self.class_by {
            Some(by) => {
                let (class, same) = by.of(req);
                req = same;
                class
            }
            None => Class::default(),
        };
        let deadlines = self.config.deadlines;
        let permit = match self.config.queue_timeout {
            None => self.limiter.try_acquire_owned_as(class).ok(),
            Some(timeout) => {
                let mut acquire = self.limiter.acquire_owned_as(class);
                // The waker is replaced by the response future's on its
                // first poll; a grant before then is seen by that poll.
                let mut cx = Context::from_waker(Waker::noop());
                match Pin::new(&mut acquire).poll(&mut cx) {
                    // A closed limiter: the acquire counted the rejection.
                    Poll::Ready(permit) => permit.ok(),
                    Poll::Pending => {
                        // The readied service is taken along to be called
                        // once a permit comes; this one is left a fresh
                        // clone (tower's usual way to call a service later).
                        let clone = self.inner.clone();
                        let ready = mem::replace(&mut self.inner, clone);
                        return Admit::queued(ready, req, acquire, timeout, deadlines);
                    }
                }
            }
        };
        match permit {
            Some(permit) => Admit::running(self.inner.call(req), permit, deadlines),
            None => Admit::rejected(),
        }
    }
}

/// The server-side service of
/// [`AdaptiveConcurrencyAtBodyEndLayer`](crate::AdaptiveConcurrencyAtBodyEndLayer):
/// [`AdaptiveConcurrency`] whose permits end with the response body.
///
/// `poll_ready` is the inner service's; `call` takes a permit or answers
/// with the rejection response. Responses carry a [`PermitBody`], which
/// holds the permit until the body has been sent.
///
/// # Examples
///
/// Made by [`AdaptiveConcurrencyLayer::record_at_body_end`](crate::AdaptiveConcurrencyLayer::record_at_body_end);
/// see [`AdaptiveConcurrencyAtBodyEndLayer`](crate::AdaptiveConcurrencyAtBodyEndLayer).
///
/// ```
/// use adaptx::Limiter;
/// use adaptx_tower::{AdaptiveConcurrencyAtBodyEnd, AdaptiveConcurrencyLayer};
/// use http::{Request, Response};
/// use tower::{Layer, service_fn};
///
/// let handler = service_fn(|_: Request<()>| async { Ok::<_, std::io::Error>(Response::new(String::new())) });
/// let svc: AdaptiveConcurrencyAtBodyEnd<_, _> =
///     AdaptiveConcurrencyLayer::server(Limiter::new()).record_at_body_end().layer(handler);
/// assert_eq!(svc.limiter().in_flight(), 0);
/// ```
#[derive(Clone)]
pub struct AdaptiveConcurrencyAtBodyEnd<S, C> {
    inner: AdaptiveConcurrency<S, C>,
}

impl<S: fmt::Debug, C> fmt::Debug for AdaptiveConcurrencyAtBodyEnd<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveConcurrencyAtBodyEnd")
            .field("inner", &self.inner)
            .finish()
    }
}

impl<S, C> AdaptiveConcurrencyAtBodyEnd<S, C> {
    pub(crate) fn new(inner: AdaptiveConcurrency<S, C>) -> Self {
        Self { inner }
    }

    /// The limiter.
    pub fn limiter(&self) -> &Limiter {
        self.inner.limiter()
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        self.inner.get_ref()
    }
}

impl<S, C, ReqBody, ResBody> Service<Request<ReqBody>> for AdaptiveConcurrencyAtBodyEnd<S, C>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    C: Classify<Response<ResBody>, S::Error> + Clone,
    ResBody: Body + Default,
{
    type Response = Response<PermitBody<ResBody>>;
    type Error = S::Error;
    type Future = BodyResponseFuture<S, Request<ReqBody>, C>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let inner = &mut self.inner;
        BodyResponseFuture::new(
            inner.admit(req),
            inner.classifier.clone(),
            inner.config.answers,
        )
    }
}

/// The state of the client-side service's permit.
enum Slot {
    Empty,
    Acquiring(Acquire<'static>),
    Ready(OwnedPermit),
}

/// The client-side service of
/// [`AdaptiveConcurrencyClientLayer`](crate::AdaptiveConcurrencyClientLayer).
///
/// `poll_ready` waits for a permit, then for the inner service; `call`
/// consumes the permit, and the request's latency starts there (not when
/// `poll_ready` took the permit: a service may be held ready for long). A
/// clone starts without a permit, as tower's `ConcurrencyLimit` does.
///
/// # Errors
///
/// `poll_ready` fails with [`LimiterClosed`] once the limiter is closed, and
/// with the inner service's error; the response future with the inner
/// service's error or [`Elapsed`](crate::Elapsed). Errors are boxed
/// ([`BoxError`]).
///
/// # Cancel safety
///
/// A service dropped while waiting in `poll_ready` gives up its place in
/// line; one dropped holding a permit releases it (recorded as dropped).
/// Dropping a response future releases its permit the same way (or records
/// a failure, past the layer's
/// [`drop_deadline`](crate::AdaptiveConcurrencyClientLayer::drop_deadline)).
///
/// # Panics
///
/// `call` panics if `poll_ready` has not returned `Ready(Ok(()))` since the
/// last `call`.
///
/// # Examples
///
/// ```
/// use adaptx::Limiter;
/// use adaptx_tower::AdaptiveConcurrencyClientLayer;
/// use tower::{Layer, Service, ServiceExt, service_fn};
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let limiter = Limiter::new();
/// let mut client = AdaptiveConcurrencyClientLayer::new(limiter.clone())
///     .layer(service_fn(|q: &'static str| async move { Ok::<_, std::io::Error>(q.len()) }));
/// // `ready` waits for a permit; call right after it.
/// let n = client.ready().await?.call("select 1").await?;
/// assert_eq!((n, limiter.stats().success), (8, 1));
/// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
/// # }).unwrap();
/// ```
pub struct AdaptiveConcurrencyClient<S, C> {
    inner: S,
    limiter: Limiter,
    classifier: C,
    deadlines: Deadlines,
    slot: Slot,
}

impl<S: Clone, C: Clone> Clone for AdaptiveConcurrencyClient<S, C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            limiter: self.limiter.clone(),
            classifier: self.classifier.clone(),
            deadlines: self.deadlines,
            slot: Slot::Empty,
        }
    }
}

impl<S: fmt::Debug, C> fmt::Debug for AdaptiveConcurrencyClient<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let slot = match self.slot {
            Slot::Empty => "empty",
            Slot::Acquiring(_) => "acquiring",
            Slot::Ready(_) => "ready",
        };
        f.debug_struct("AdaptiveConcurrencyClient")
            .field("inner", &self.inner)
            .field("limiter", &self.limiter)
            .field("deadlines", &self.deadlines)
            .field("permit", &slot)
            .finish_non_exhaustive()
    }
}

impl<S, C> AdaptiveConcurrencyClient<S, C> {
    pub(crate) fn new(inner: S, limiter: Limiter, classifier: C, deadlines: Deadlines) -> Self {
        Self {
            inner,
            limiter,
            classifier,
            deadlines,
            slot: Slot::Empty,
        }
    }

    /// The limiter.
    pub fn limiter(&self) -> &Limiter {
        &self.limiter
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, C, Req> Service<Req> for AdaptiveConcurrencyClient<S, C>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    C: Classify<S::Response, S::Error> + Clone,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ClientResponseFuture<S::Future, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        loop {
            match &mut self.slot {
                Slot::Ready(_) => break,
                Slot::Empty => self.slot = Slot::Acquiring(self.limiter.acquire_owned()),
                Slot::Acquiring(acquire) => match ready!(Pin::new(acquire).poll(cx)) {
                    Ok(permit) => self.slot = Slot::Ready(permit),
                    Err(_) => {
                        self.slot = Slot::Empty;
                        return Poll::Ready(Err(LimiterClosed::new().into()));
                    }
                },
            }
        }
        // The permit is held while the inner service gets ready, as in
        // tower's `ConcurrencyLimit`.
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let permit = match mem::replace(&mut self.slot, Slot::Empty) {
            Slot::Ready(permit) => permit,
            _ => panic!("AdaptiveConcurrencyClient: poll_ready must return Ready(Ok) before call"),
        };
        ClientResponseFuture::new(
            self.inner.call(req),
            permit,
            self.classifier.clone(),
            self.deadlines,
        )
    }
}
