//! Per-request classes: a closure over the request picks its partition and
//! priority ([`adaptx::Class`]), on the server layer and on the client layer.

use std::fmt;
use std::future::Future;
use std::mem;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use adaptx::{Acquire, Class, Limiter};
use http::Request;
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use super::Deadlines;
use super::future::ClientResponseFuture;
use crate::classify::Classify;
use crate::error::{BoxError, LimiterClosed};

/// Picks a request's [`Class`] from its head: method, URI (the route),
/// headers and extensions. Made from a closure by
/// [`AdaptiveConcurrencyLayer::class_by`](crate::AdaptiveConcurrencyLayer::class_by)
/// and
/// [`AdaptiveConcurrencyClientLayer::class_by`](crate::AdaptiveConcurrencyClientLayer::class_by).
///
/// # Examples
///
/// ```
/// use adaptx::{Class, Limiter, Partitions};
/// use adaptx_tower::AdaptiveConcurrencyLayer;
///
/// let limiter = Limiter::builder()
///     .partitions(Partitions::new().share("batch", 0.2))
///     .build()?;
/// let batch = limiter.class("batch")?;
/// let layer = AdaptiveConcurrencyLayer::server(limiter).class_by(move |parts| {
///     if parts.uri.path().starts_with("/export") { batch } else { Class::default() }
/// });
/// # let _ = layer;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct ClassBy(Arc<dyn Fn(&http::request::Parts) -> Class + Send + Sync>);

impl fmt::Debug for ClassBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClassBy(..)")
    }
}

impl ClassBy {
    pub(crate) fn new(f: impl Fn(&http::request::Parts) -> Class + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// The class of `req`. The closure sees the request's head; the body is
    /// moved out and back, so nothing is copied.
    pub(crate) fn of<B>(&self, req: Request<B>) -> (Class, Request<B>) {
        let (parts, body) = req.into_parts();
        let class = (self.0)(&parts);
        (class, Request::from_parts(parts, body))
    }
}

/// [`AdaptiveConcurrencyClientLayer`](crate::AdaptiveConcurrencyClientLayer)
/// with a class per request, made by
/// [`class_by`](crate::AdaptiveConcurrencyClientLayer::class_by).
///
/// # Examples
///
/// ```
/// use adaptx::{Class, Limiter};
/// use adaptx_tower::{AdaptiveConcurrencyClassedClientLayer, AdaptiveConcurrencyClientLayer};
///
/// let layer: AdaptiveConcurrencyClassedClientLayer<_> =
///     AdaptiveConcurrencyClientLayer::new(Limiter::new())
///         .class_by(|parts| Class::default().with_priority(u8::from(parts.method == "GET")));
/// assert_eq!(layer.limiter().limit(), 10);
/// ```
#[derive(Debug, Clone)]
pub struct AdaptiveConcurrencyClassedClientLayer<C> {
    pub(crate) limiter: Limiter,
    pub(crate) classifier: C,
    pub(crate) deadlines: Deadlines,
    pub(crate) class_by: ClassBy,
}

impl<C> AdaptiveConcurrencyClassedClientLayer<C> {
    /// The limiter.
    pub fn limiter(&self) -> &Limiter {
        &self.limiter
    }
}

impl<S, C: Clone> Layer<S> for AdaptiveConcurrencyClassedClientLayer<C> {
    type Service = AdaptiveConcurrencyClassedClient<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        AdaptiveConcurrencyClassedClient {
            inner,
            limiter: self.limiter.clone(),
            classifier: self.classifier.clone(),
            deadlines: self.deadlines,
            class_by: self.class_by.clone(),
        }
    }
}

/// The client-side service with a class per request: `poll_ready` is the
/// inner service's, and `call` waits for a permit of the request's class
/// (its partition, and its priority in the limiter's queue) before calling
/// the readied inner service. The latency starts when the permit is granted.
///
/// # Errors
///
/// The response future fails with [`LimiterClosed`] once the limiter is
/// closed, with the limiter's [`AcquireError`](adaptx::AcquireError) when
/// its queue refuses the request (full, timed out, shed), and as
/// [`ClientResponseFuture`] otherwise.
///
/// # Cancel safety
///
/// Dropping the response future while it waits gives up its place in line.
#[derive(Debug, Clone)]
pub struct AdaptiveConcurrencyClassedClient<S, C> {
    inner: S,
    limiter: Limiter,
    classifier: C,
    deadlines: Deadlines,
    class_by: ClassBy,
}

impl<S, C, B> Service<Request<B>> for AdaptiveConcurrencyClassedClient<S, C>
where
    S: Service<Request<B>> + Clone,
    S::Error: Into<BoxError>,
    C: Classify<S::Response, S::Error> + Clone,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ClassedResponseFuture<S, Request<B>, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let (class, req) = self.class_by.of(req);
        // The readied service goes with the request; this one is left a
        // fresh clone (tower's usual way to call a service later).
        let clone = self.inner.clone();
        let ready = mem::replace(&mut self.inner, clone);
        ClassedResponseFuture {
            state: ClassedState::Waiting {
                acquire: self.limiter.acquire_owned_as(class),
                call: Some((ready, req, self.classifier.clone())),
                deadlines: self.deadlines,
            },
        }
    }
}

pin_project! {
    /// The response future of [`AdaptiveConcurrencyClassedClient`]: the
    /// wait for a permit of the request's class, then the call.
    pub struct ClassedResponseFuture<S, Req, C>
    where
        S: Service<Req>,
    {
        #[pin]
        state: ClassedState<S, Req, C>,
    }
}

pin_project! {
    #[project = ClassedProj]
    enum ClassedState<S, Req, C>
    where
        S: Service<Req>,
    {
        Waiting {
            acquire: Acquire<'static>,
            call: Option<(S, Req, C)>,
            deadlines: Deadlines,
        },
        Calling {
            #[pin]
            future: ClientResponseFuture<S::Future, C>,
        },
    }
}

impl<S: Service<Req>, Req, C> fmt::Debug for ClassedResponseFuture<S, Req, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClassedResponseFuture")
            .finish_non_exhaustive()
    }
}

impl<S, Req, C> Future for ClassedResponseFuture<S, Req, C>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    C: Classify<S::Response, S::Error>,
{
    type Output = Result<S::Response, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                ClassedProj::Waiting {
                    acquire,
                    call,
                    deadlines,
                } => {
                    let permit = match ready!(Pin::new(acquire).poll(cx)) {
                        Ok(permit) => permit,
                        Err(e) if e.is_closed() => {
                            return Poll::Ready(Err(LimiterClosed::new().into()));
                        }
                        Err(e) => return Poll::Ready(Err(e.into())),
                    };
                    let Some((mut svc, req, classifier)) = call.take() else {
                        unreachable!("the call is taken once, with the permit");
                    };
                    let deadlines = *deadlines;
                    let future =
                        ClientResponseFuture::new(svc.call(req), permit, classifier, deadlines);
                    state.set(ClassedState::Calling { future });
                }
                ClassedProj::Calling { future } => return future.poll(cx),
            }
        }
    }
}
