use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use adaptx::{Acquire, OwnedPermit};
use http::Response;
use http_body::Body;
use pin_project_lite::pin_project;
use tokio::time::Sleep;
use tower_service::Service;

use super::ServerConfig;
use super::body::PermitBody;
use crate::classify::{Classify, finish_permit};
use crate::error::BoxError;

pin_project! {
    /// The admission of one server-side request: a permit at once, a bounded
    /// wait in the limiter's queue, or a rejection; then the inner call.
    ///
    /// Shared by [`ResponseFuture`] and [`BodyResponseFuture`], which differ
    /// only in where the permit ends.
    pub(super) struct Admit<S, Req>
    where
        S: Service<Req>,
    {
        #[pin]
        state: State<S, Req>,
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

/// How an [`Admit`] ended.
pub(super) enum Admitted<T, E> {
    /// The inner service answered while holding the permit.
    Ran(Result<T, E>, Option<OwnedPermit>),
    /// No permit: answer with the rejection response.
    Rejected,
}

impl<S, Req> Admit<S, Req>
where
    S: Service<Req>,
{
    pub(super) fn running(future: S::Future, permit: OwnedPermit) -> Self {
        Self {
            state: State::Running {
                future,
                permit: Some(permit),
            },
        }
    }

    pub(super) fn queued(
        service: S,
        req: Req,
        acquire: Acquire<'static>,
        timeout: Duration,
    ) -> Self {
        Self {
            state: State::Queued {
                sleep: tokio::time::sleep(timeout),
                acquire,
                call: Some((service, req)),
            },
        }
    }

    pub(super) fn rejected() -> Self {
        Self {
            state: State::Rejected,
        }
    }

    fn state_name(&self) -> &'static str {
        match self.state {
            State::Queued { .. } => "queued",
            State::Running { .. } => "running",
            State::Rejected => "rejected",
            State::Done => "done",
        }
    }

    fn poll_admit(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Admitted<S::Response, S::Error>> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Queued {
                    sleep,
                    acquire,
                    call,
                } => match Pin::new(acquire).poll(cx) {
                    Poll::Ready(Ok(permit)) => {
                        let Some((mut service, req)) = call.take() else {
                            state.set(State::Done);
                            continue;
                        };
                        let future = service.call(req);
                        state.set(State::Running {
                            future,
                            permit: Some(permit),
                        });
                    }
                    // Closed while queued: reject like a full limiter.
                    Poll::Ready(Err(_)) => state.set(State::Rejected),
                    Poll::Pending => {
                        ready!(sleep.poll(cx));
                        state.set(State::Rejected);
                    }
                },
                StateProj::Running { future, permit } => {
                    let result = ready!(future.poll(cx));
                    let permit = permit.take();
                    state.set(State::Done);
                    return Poll::Ready(Admitted::Ran(result, permit));
                }
                StateProj::Rejected => {
                    state.set(State::Done);
                    return Poll::Ready(Admitted::Rejected);
                }
                StateProj::Done => panic!("ResponseFuture polled after completion"),
            }
        }
    }
}

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
        admit: Admit<S, Req>,
        classifier: C,
        config: ServerConfig,
    }
}

impl<S, Req, C> ResponseFuture<S, Req, C>
where
    S: Service<Req>,
{
    pub(super) fn new(admit: Admit<S, Req>, classifier: C, config: ServerConfig) -> Self {
        Self {
            admit,
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
        f.debug_struct("ResponseFuture")
            .field("state", &self.admit.state_name())
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
        let this = self.project();
        Poll::Ready(match ready!(this.admit.poll_admit(cx)) {
            Admitted::Ran(result, permit) => {
                if let Some(permit) = permit {
                    finish_permit(permit, this.classifier.classify(result.as_ref()));
                }
                result
            }
            Admitted::Rejected => Ok(this.config.reject()),
        })
    }
}

pin_project! {
    /// The response future of
    /// [`AdaptiveConcurrencyAtBodyEnd`](crate::AdaptiveConcurrencyAtBodyEnd).
    ///
    /// Holds the request's permit until the inner response head is ready,
    /// then hands it to the response's [`PermitBody`] with the classifier's
    /// verdict on the head. An inner error ends the permit at once.
    ///
    /// # Cancel safety
    ///
    /// Dropping it (a client that disconnects) drops the inner future and
    /// releases the permit, recorded as dropped; a queued request gives up
    /// its place in line.
    pub struct BodyResponseFuture<S, Req, C>
    where
        S: Service<Req>,
    {
        #[pin]
        admit: Admit<S, Req>,
        classifier: C,
        config: ServerConfig,
    }
}

impl<S, Req, C> BodyResponseFuture<S, Req, C>
where
    S: Service<Req>,
{
    pub(super) fn new(admit: Admit<S, Req>, classifier: C, config: ServerConfig) -> Self {
        Self {
            admit,
            classifier,
            config,
        }
    }
}

impl<S, Req, C> fmt::Debug for BodyResponseFuture<S, Req, C>
where
    S: Service<Req>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BodyResponseFuture")
            .field("state", &self.admit.state_name())
            .finish_non_exhaustive()
    }
}

impl<S, Req, C, B> Future for BodyResponseFuture<S, Req, C>
where
    S: Service<Req, Response = Response<B>>,
    C: Classify<Response<B>, S::Error>,
    B: Body + Default,
{
    type Output = Result<Response<PermitBody<B>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        Poll::Ready(match ready!(this.admit.poll_admit(cx)) {
            Admitted::Ran(result, permit) => {
                let verdict = this.classifier.classify(result.as_ref());
                match (result, permit) {
                    (Ok(res), Some(permit)) => {
                        Ok(res.map(|body| PermitBody::new(body, permit, verdict)))
                    }
                    (Ok(res), None) => Ok(res.map(PermitBody::without_permit)),
                    (Err(e), permit) => {
                        if let Some(permit) = permit {
                            finish_permit(permit, verdict);
                        }
                        Err(e)
                    }
                }
            }
            Admitted::Rejected => Ok(this.config.reject::<B>().map(PermitBody::without_permit)),
        })
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
