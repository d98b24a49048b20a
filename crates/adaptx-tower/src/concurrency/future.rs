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

use super::body::PermitBody;
use super::lease::Lease;
use super::{Answers, Deadlines};
use crate::classify::{Answered, Classify, Verdict, classify_http};
use crate::error::{BoxError, Elapsed};

pin_project! {
    /// The admission of one server-side request: a permit at once, a bounded
    /// wait in the limiter's queue, or a rejection; then the inner call,
    /// under the layer's timeout if it has one.
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
        // Boxed: the wait (its timer, the readied service and the request)
        // is several times the size of a running call, and every future
        // would carry that size and copy it on each move. The queue path
        // allocates its waiter node already; a request admitted at once
        // allocates nothing.
        Queued {
            queued: Pin<Box<Queued<S, Req>>>,
        },
        Running {
            #[pin]
            future: S::Future,
            #[pin]
            timer: Option<Sleep>,
            lease: Lease,
        },
        Rejected,
        Done,
    }
}

pin_project! {
    /// A request waiting in the limiter's queue.
    struct Queued<S, Req> {
        #[pin]
        sleep: Sleep,
        acquire: Acquire<'static>,
        call: Option<(S, Req)>,
        deadlines: Deadlines,
    }
}

impl<S, Req> Admit<S, Req>
where
    S: Service<Req>,
{
    #[inline]
    pub(super) fn running(future: S::Future, permit: OwnedPermit, deadlines: Deadlines) -> Self {
        Self {
            state: State::running(future, permit, deadlines),
        }
    }

    pub(super) fn queued(
        service: S,
        req: Req,
        acquire: Acquire<'static>,
        timeout: Duration,
        deadlines: Deadlines,
    ) -> Self {
        Self {
            state: State::Queued {
                queued: Box::pin(Queued {
                    sleep: tokio::time::sleep(timeout),
                    acquire,
                    call: Some((service, req)),
                    deadlines,
                }),
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

    /// Polls the admission and the call. When the inner service answers,
    /// `ran` gets its result and the lease still holding the permit (and
    /// ends it in place, or takes it); when the layer answers itself (no
    /// permit, or the timeout ran out: its failure is already recorded),
    /// `answer` gets the mark. The result goes from the inner future to
    /// `ran` without passing through a value of this module's own.
    #[inline]
    fn poll_admit<O>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        ran: impl FnOnce(&mut Lease, Result<S::Response, S::Error>) -> O,
        answer: impl FnOnce(Answered) -> O,
    ) -> Poll<O> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Queued { queued } => {
                    let queued = queued.as_mut().project();
                    match Pin::new(queued.acquire).poll(cx) {
                        Poll::Ready(Ok(permit)) => {
                            let deadlines = *queued.deadlines;
                            let Some((mut service, req)) = queued.call.take() else {
                                state.set(State::Done);
                                continue;
                            };
                            let future = service.call(req);
                            state.set(State::running(future, permit, deadlines));
                        }
                        // Closed while queued: reject like a full limiter.
                        Poll::Ready(Err(_)) => state.set(State::Rejected),
                        Poll::Pending => {
                            ready!(queued.sleep.poll(cx));
                            state.set(State::Rejected);
                        }
                    }
                }
                StateProj::Running {
                    future,
                    timer,
                    lease,
                } => {
                    // The response wins a tie with the timer. Completed, the
                    // state stays `Running` (a future is not polled again
                    // once ready; tower's do the same): `ran` ends the
                    // lease in place, and the rest is dropped with the
                    // future, without a move or a state change per request.
                    if let Poll::Ready(result) = future.poll(cx) {
                        return Poll::Ready(ran(lease, result));
                    }
                    match timer.as_pin_mut() {
                        Some(timer) => ready!(timer.poll(cx)),
                        None => return Poll::Pending,
                    }
                    // The inner call goes first, then its permit, as a
                    // failure: the backend did not answer in time.
                    let lease = lease.take();
                    state.set(State::Done);
                    lease.finish(Verdict::Failure);
                    return Poll::Ready(answer(Answered::TimedOut));
                }
                StateProj::Rejected => {
                    state.set(State::Done);
                    return Poll::Ready(answer(Answered::ConcurrencyShed));
                }
                StateProj::Done => panic!("ResponseFuture polled after completion"),
            }
        }
    }
}

impl<S, Req> State<S, Req>
where
    S: Service<Req>,
{
    /// The inner call holding `permit`, its timer started now.
    #[inline]
    fn running(future: S::Future, permit: OwnedPermit, deadlines: Deadlines) -> Self {
        State::Running {
            future,
            timer: deadlines.timer(),
            lease: Lease::new(permit, deadlines.drop_deadline),
        }
    }
}

pin_project! {
    /// The response future of [`AdaptiveConcurrency`](crate::AdaptiveConcurrency).
    ///
    /// Holds the request's permit until the inner response is ready (or
    /// the layer's timeout runs out).
    ///
    /// # Cancel safety
    ///
    /// Dropping it (a client that disconnects) drops the inner future and
    /// releases the permit, recorded as dropped (or as a failure past the
    /// layer's [`drop_deadline`](crate::AdaptiveConcurrencyLayer::drop_deadline));
    /// a queued request gives up its place in line.
    pub struct ResponseFuture<S, Req, C>
    where
        S: Service<Req>,
    {
        #[pin]
        admit: Admit<S, Req>,
        classifier: C,
        answers: Answers,
    }
}

impl<S, Req, C> ResponseFuture<S, Req, C>
where
    S: Service<Req>,
{
    pub(super) fn new(admit: Admit<S, Req>, classifier: C, answers: Answers) -> Self {
        Self {
            admit,
            classifier,
            answers,
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
        let (classifier, answers) = (this.classifier, this.answers);
        this.admit.poll_admit(
            cx,
            |lease, result| {
                lease.end(classify_http(classifier, result.as_ref()));
                result
            },
            |mark| Ok(answers.answer(mark)),
        )
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
    /// releases the permit, recorded as dropped (or as a failure past the
    /// layer's [`drop_deadline`](crate::AdaptiveConcurrencyLayer::drop_deadline));
    /// a queued request gives up its place in line.
    pub struct BodyResponseFuture<S, Req, C>
    where
        S: Service<Req>,
    {
        #[pin]
        admit: Admit<S, Req>,
        classifier: C,
        answers: Answers,
    }
}

impl<S, Req, C> BodyResponseFuture<S, Req, C>
where
    S: Service<Req>,
{
    pub(super) fn new(admit: Admit<S, Req>, classifier: C, answers: Answers) -> Self {
        Self {
            admit,
            classifier,
            answers,
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
        let (classifier, answers) = (this.classifier, this.answers);
        this.admit.poll_admit(
            cx,
            |lease, result| {
                let verdict = classify_http(classifier, result.as_ref());
                match result {
                    Ok(res) => {
                        let lease = lease.take();
                        Ok(res.map(|body| PermitBody::new(body, lease, verdict)))
                    }
                    Err(e) => {
                        lease.end(verdict);
                        Err(e)
                    }
                }
            },
            |mark| Ok(answers.answer::<B>(mark).map(PermitBody::without_permit)),
        )
    }
}

pin_project! {
    /// The response future of
    /// [`AdaptiveConcurrencyClient`](crate::AdaptiveConcurrencyClient).
    ///
    /// Holds the request's permit until the inner future completes (or the
    /// layer's timeout runs out), then records the classifier's verdict
    /// with the latency from `call`.
    ///
    /// # Errors
    ///
    /// The inner service's error, boxed, or [`Elapsed`] when the layer's
    /// [`timeout`](crate::AdaptiveConcurrencyClientLayer::timeout) runs out
    /// (recorded as a failure).
    ///
    /// # Cancel safety
    ///
    /// Dropping it drops the inner future and releases the permit, recorded
    /// as dropped (or as a failure past the layer's
    /// [`drop_deadline`](crate::AdaptiveConcurrencyClientLayer::drop_deadline)).
    pub struct ClientResponseFuture<F, C> {
        #[pin]
        future: F,
        #[pin]
        timer: Option<Sleep>,
        lease: Lease,
        classifier: C,
    }
}

impl<F, C> ClientResponseFuture<F, C> {
    /// The call's future; its latency and timer start now, at `call`, not
    /// when `poll_ready` took the permit.
    pub(super) fn new(future: F, permit: OwnedPermit, classifier: C, deadlines: Deadlines) -> Self {
        Self {
            future,
            timer: deadlines.timer(),
            lease: Lease::starting_now(permit, deadlines.drop_deadline),
            classifier,
        }
    }
}

impl<F, C> fmt::Debug for ClientResponseFuture<F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientResponseFuture")
            .field("lease", &self.lease)
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
        // The response wins a tie with the timer.
        let Poll::Ready(result) = this.future.poll(cx) else {
            match this.timer.as_pin_mut() {
                Some(timer) => ready!(timer.poll(cx)),
                None => return Poll::Pending,
            }
            this.lease.take().finish(Verdict::Failure);
            return Poll::Ready(Err(Elapsed::new().into()));
        };
        this.lease
            .take()
            .finish(this.classifier.classify(result.as_ref()));
        Poll::Ready(result.map_err(Into::into))
    }
}
