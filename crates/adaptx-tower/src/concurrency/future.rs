use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use adaptx::{Acquire, OwnedPermit};
use http::Response;
use pin_project_lite::pin_project;
use tokio::time::Sleep;
use tower_service::Service;

use super::ServerConfig;
use crate::classify::{Classify, finish_permit};
use crate::error::BoxError;

pin_project! {
    /// The response future of [`AdaptiveConcurrency`](crate::AdaptiveConcurrency).
    ///
    /// Holds the request's permit until the inner response is ready.
    ///
    /// # Cancel safety
    ///
    /// Dropping it (a client that disconnects) drops the inner future and
    /// releases the permit, recorded as dropped; a queued request gives up
    /// its place in line.
    pub struct ResponseFuture<S, Req, C>
    where
        S: Service<Req>,
    {
        #[pin]
        state: State<S, Req>,
        classifier: C,
        config: ServerConfig,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, Req>
    where
        S: Service<Req>,
    {
        Queued {
            #[pin]
            sleep: Sleep,
            acquire: Acquire<'static>,
            call: Option<(S, Req)>,
        },
        Running {
            #[pin]
            future: S::Future,
            permit: Option<OwnedPermit>,
        },
        Rejected,
        Done,
    }
}

impl<S, Req, C> ResponseFuture<S, Req, C>
where
    S: Service<Req>,
{
    pub(super) fn running(future: S::Future, permit: OwnedPermit, classifier: C) -> Self {
        Self {
            state: State::Running {
                future,
                permit: Some(permit),
            },
            classifier,
            config: ServerConfig::default(),
        }
    }

    pub(super) fn queued(
        service: S,
        req: Req,
        acquire: Acquire<'static>,
        timeout: Duration,
        classifier: C,
        config: ServerConfig,
    ) -> Self {
        Self {
            state: State::Queued {
                sleep: tokio::time::sleep(timeout),
                acquire,
                call: Some((service, req)),
            },
            classifier,
            config,
        }
    }

    pub(super) fn rejected(classifier: C, config: ServerConfig) -> Self {
        Self {
            state: State::Rejected,
            classifier,
            config,
        }
    }
}

impl<S, Req, C> fmt::Debug for ResponseFuture<S, Req, C>
where
    S: Service<Req>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            State::Queued { .. } => "queued",
            State::Running { .. } => "running",
            State::Rejected => "rejected",
            State::Done => "done",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}

impl<S, Req, C, B> Future for ResponseFuture<S, Req, C>
where
    S: Service<Req, Response = Response<B>>,
    C: Classify<Response<B>, S::Error>,
    B: Default,
{
    type Output = Result<Response<B>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Queued {
                    sleep,
                    acquire,
                    call,
                } => match Pin::new(acquire).poll(cx) {
                    Poll::Ready(Ok(permit)) => {
                        let Some((mut service, req)) = call.take() else {
                            this.state.set(State::Done);
                            continue;
                        };
                        let future = service.call(req);
                        this.state.set(State::Running {
                            future,
                            permit: Some(permit),
                        });
                    }
                    // Closed while queued: reject like a full limiter.
                    Poll::Ready(Err(_)) => this.state.set(State::Rejected),
                    Poll::Pending => {
                        ready!(sleep.poll(cx));
                        this.state.set(State::Rejected);
                    }
                },
                StateProj::Running { future, permit } => {
                    let result = ready!(future.poll(cx));
                    if let Some(permit) = permit.take() {
                        finish_permit(permit, this.classifier.classify(result.as_ref()));
                    }
                    this.state.set(State::Done);
                    return Poll::Ready(result);
                }
                StateProj::Rejected => {
                    this.state.set(State::Done);
                    return Poll::Ready(Ok(this.config.reject()));
                }
                StateProj::Done => panic!("ResponseFuture polled after completion"),
            }
        }
    }
}

pin_project! {
    /// The response future of
    /// [`AdaptiveConcurrencyClient`](crate::AdaptiveConcurrencyClient).
    ///
    /// Holds the request's permit until the inner future completes, then
    /// records the classifier's verdict with the latency from admission.
    ///
    /// # Cancel safety
    ///
    /// Dropping it drops the inner future and releases the permit, recorded
    /// as dropped.
    pub struct ClientResponseFuture<F, C> {
        #[pin]
        future: F,
        permit: Option<OwnedPermit>,
        classifier: C,
    }
}

impl<F, C> ClientResponseFuture<F, C> {
    pub(super) fn new(future: F, permit: OwnedPermit, classifier: C) -> Self {
        Self {
            future,
            permit: Some(permit),
            classifier,
        }
    }
}

impl<F, C> fmt::Debug for ClientResponseFuture<F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientResponseFuture")
            .field("permit", &self.permit)
            .finish_non_exhaustive()
    }
}

impl<F, C, T, E> Future for ClientResponseFuture<F, C>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
    C: Classify<T, E>,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = ready!(this.future.poll(cx));
        if let Some(permit) = this.permit.take() {
            finish_permit(permit, this.classifier.classify(result.as_ref()));
        }
        Poll::Ready(result.map_err(Into::into))
    }
}
