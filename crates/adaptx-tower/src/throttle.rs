//! Client-side adaptive throttling as a tower layer: a client that sheds its
//! own requests, before they leave, once the backend has been refusing
//! many of them ([`adaptx::Throttle`]: the Google SRE book's rule).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use adaptx::{Throttle, Throttled};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::classify::{Classify, ResultClassifier, Verdict};
use crate::error::BoxError;

/// Wraps a client service in [`AdaptiveThrottle`]: each request is first
/// put to an [`adaptx::Throttle`], which refuses it locally (an error,
/// [`Throttled`]) with the SRE book's probability
/// `max(0, (requests − k·accepts) / (requests + 1))`; the answer of each
/// request sent is classified and counted.
///
/// The classifier's verdicts count as: [`Verdict::Success`] and
/// [`Verdict::Fault`] — accepted (the backend took the request, even if
/// the handler failed); [`Verdict::Failure`] — refused (overload, a
/// timeout, no answer); [`Verdict::Skip`] — not counted. The default is
/// [`ResultClassifier`] (an error is a refusal); for HTTP use
/// [`HttpClassifier`](crate::HttpClassifier), which counts 503, 504, 408
/// and 429 as refusals and other answers as accepted.
///
/// Put it outside a retry layer's retries only if every retry should be
/// throttled too: the SRE book puts it closest to the network, so each
/// attempt is one request.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use adaptx::Throttle;
/// use adaptx_tower::{AdaptiveThrottleLayer, HttpClassifier};
/// use tower::{ServiceBuilder, service_fn};
///
/// let throttle = Arc::new(Throttle::builder().build()?);
/// let client = ServiceBuilder::new()
///     .layer(AdaptiveThrottleLayer::new(throttle).classifier(HttpClassifier::new()))
///     .service(service_fn(|_req: http::Request<String>| async {
///         Ok::<_, std::io::Error>(http::Response::new(String::new()))
///     }));
/// # drop(client);
/// # Ok::<(), adaptx::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct AdaptiveThrottleLayer<C = ResultClassifier> {
    throttle: Arc<Throttle>,
    classifier: C,
}

impl<C> fmt::Debug for AdaptiveThrottleLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveThrottleLayer")
            .field("throttle", &self.throttle)
            .finish_non_exhaustive()
    }
}

impl AdaptiveThrottleLayer {
    /// A layer over `throttle` (shared by every service it wraps), with
    /// [`ResultClassifier`].
    pub fn new(throttle: Arc<Throttle>) -> Self {
        Self {
            throttle,
            classifier: ResultClassifier,
        }
    }
}

impl<C> AdaptiveThrottleLayer<C> {
    /// Classifies answers with `classifier` instead.
    pub fn classifier<C2>(self, classifier: C2) -> AdaptiveThrottleLayer<C2> {
        AdaptiveThrottleLayer {
            throttle: self.throttle,
            classifier,
        }
    }
}

impl<S, C: Clone> Layer<S> for AdaptiveThrottleLayer<C> {
    type Service = AdaptiveThrottle<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        AdaptiveThrottle {
            inner,
            throttle: Arc::clone(&self.throttle),
            classifier: self.classifier.clone(),
        }
    }
}

/// A client service that sheds its own requests while the backend refuses
/// many of them; made by [`AdaptiveThrottleLayer`].
#[derive(Clone)]
pub struct AdaptiveThrottle<S, C = ResultClassifier> {
    inner: S,
    throttle: Arc<Throttle>,
    classifier: C,
}

impl<S: fmt::Debug, C> fmt::Debug for AdaptiveThrottle<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveThrottle")
            .field("inner", &self.inner)
            .field("throttle", &self.throttle)
            .finish_non_exhaustive()
    }
}

impl<S, C> AdaptiveThrottle<S, C> {
    /// The throttle.
    pub fn throttle(&self) -> &Throttle {
        &self.throttle
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, C, Req> Service<Req> for AdaptiveThrottle<S, C>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    C: Classify<S::Response, S::Error> + Clone,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ThrottleFuture<S::Future, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        // A refused request is dropped unsent; the inner service stays
        // ready for the next one (tower's `poll_ready` contract allows a
        // reservation to be kept for a later call).
        match self.throttle.try_admit() {
            Err(throttled) => ThrottleFuture {
                state: State::Refused {
                    throttled: Some(throttled),
                },
            },
            Ok(()) => ThrottleFuture {
                state: State::Sent {
                    future: self.inner.call(req),
                    throttle: Arc::clone(&self.throttle),
                    classifier: self.classifier.clone(),
                },
            },
        }
    }
}

pin_project! {
    /// The response future of [`AdaptiveThrottle`].
    pub struct ThrottleFuture<F, C> {
        #[pin]
        state: State<F, C>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, C> {
        Refused { throttled: Option<Throttled> },
        Sent {
            #[pin]
            future: F,
            throttle: Arc<Throttle>,
            classifier: C,
        },
    }
}

impl<F, C> fmt::Debug for ThrottleFuture<F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThrottleFuture").finish_non_exhaustive()
    }
}

impl<F, C, Res, E> Future for ThrottleFuture<F, C>
where
    F: Future<Output = Result<Res, E>>,
    E: Into<BoxError>,
    C: Classify<Res, E>,
{
    type Output = Result<Res, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Refused { throttled } => {
                let t = throttled
                    .take()
                    .expect("ThrottleFuture polled after completion");
                Poll::Ready(Err(t.into()))
            }
            StateProj::Sent {
                future,
                throttle,
                classifier,
            } => {
                let result = ready!(future.poll(cx));
                match classifier.classify(result.as_ref()) {
                    Verdict::Success | Verdict::Fault => throttle.record(true),
                    Verdict::Failure => throttle.record(false),
                    // Skip, and any verdict added later: says nothing.
                    _ => {}
                }
                Poll::Ready(result.map_err(Into::into))
            }
        }
    }
}
