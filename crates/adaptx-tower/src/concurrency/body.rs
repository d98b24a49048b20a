use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use super::lease::Lease;
use crate::classify::Verdict;

pin_project! {
    /// A response body that holds the request's concurrency permit until the
    /// body has been sent.
    ///
    /// The body of
    /// [`AdaptiveConcurrencyAtBodyEnd`](crate::AdaptiveConcurrencyAtBodyEnd)'s
    /// responses. The verdict is decided from the response head by the
    /// classifier; the latency is measured from admission to the end of the
    /// body, so a streaming response counts for as long as the backend is
    /// busy sending it.
    ///
    /// | the body | the permit |
    /// |---|---|
    /// | reports its end (`poll_frame` gives `None`, or `is_end_stream` after a frame or when empty) | records the head's verdict |
    /// | yields an error | records a failure |
    /// | is dropped before its end (the client went away) | released, counted as dropped (a failure past the layer's [`drop_deadline`](crate::AdaptiveConcurrencyLayer::drop_deadline)) |
    ///
    /// Rejections carry a `PermitBody` without a permit. Data, errors,
    /// [`is_end_stream`](Body::is_end_stream) and
    /// [`size_hint`](Body::size_hint) are the inner body's.
    ///
    /// # Examples
    ///
    /// See [`AdaptiveConcurrencyAtBodyEndLayer`](crate::AdaptiveConcurrencyAtBodyEndLayer):
    /// its responses' bodies are `PermitBody`s.
    ///
    /// ```
    /// use adaptx::Limiter;
    /// use adaptx_tower::{AdaptiveConcurrencyLayer, PermitBody};
    /// use http::{Request, Response};
    /// use tower::{ServiceBuilder, ServiceExt, service_fn};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let limiter = Limiter::new();
    /// let svc = ServiceBuilder::new()
    ///     .layer(AdaptiveConcurrencyLayer::server(limiter.clone()).record_at_body_end())
    ///     .service(service_fn(|_: Request<()>| async {
    ///         Ok::<_, std::io::Error>(Response::new(String::from("partial")))
    ///     }));
    /// let res: Response<PermitBody<String>> = svc.oneshot(Request::new(())).await?;
    /// assert_eq!(res.body().get_ref(), "partial");
    /// drop(res); // the client went away mid-body
    /// assert_eq!((limiter.in_flight(), limiter.stats().dropped), (0, 1));
    /// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    /// # }).unwrap();
    /// ```
    pub struct PermitBody<B> {
        #[pin]
        inner: B,
        lease: Lease,
        verdict: Verdict,
    }
}

impl<B: Body> PermitBody<B> {
    /// `inner`, holding `lease` until its end; an already empty body
    /// records `verdict` at once, since a server will not poll it.
    pub(crate) fn new(inner: B, mut lease: Lease, verdict: Verdict) -> Self {
        if inner.is_end_stream() {
            lease.take().finish(verdict);
        }
        Self {
            inner,
            lease,
            verdict,
        }
    }
}

impl<B> PermitBody<B> {
    /// `inner` without a permit (a rejection).
    pub(crate) fn without_permit(inner: B) -> Self {
        Self {
            inner,
            lease: Lease::empty(),
            verdict: Verdict::Skip,
        }
    }

    /// The inner body.
    pub fn get_ref(&self) -> &B {
        &self.inner
    }

    /// Whether the body still holds its permit (its end has not been seen).
    pub fn holds_permit(&self) -> bool {
        self.lease.is_held()
    }
}

impl<B: Default> Default for PermitBody<B> {
    fn default() -> Self {
        Self::without_permit(B::default())
    }
}

impl<B> fmt::Debug for PermitBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermitBody")
            .field("lease", &self.lease)
            .field("verdict", &self.verdict)
            .finish_non_exhaustive()
    }
}

impl<B: Body> Body for PermitBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let mut this = self.project();
        let frame = ready!(this.inner.as_mut().poll_frame(cx));
        let ending = match &frame {
            // A server stops polling once `is_end_stream` says so, so the
            // end may show right after the last frame.
            Some(Ok(_)) if !this.inner.is_end_stream() => None,
            Some(Ok(_)) | None => Some(*this.verdict),
            Some(Err(_)) => Some(Verdict::Failure),
        };
        if let Some(verdict) = ending {
            this.lease.take().finish(verdict);
        }
        Poll::Ready(frame)
    }

    #[inline]
    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    #[inline]
    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
