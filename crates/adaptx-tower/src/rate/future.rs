use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use adaptx::RatePermit;
use http::Response;
use pin_project_lite::pin_project;

use super::key::RateToken;
use super::{X_RATELIMIT_LIMIT, X_RATELIMIT_REMAINING, X_RATELIMIT_RESET};
use crate::classify::{Classify, classify_http, finish_rate_permit};
use crate::header::{Field, number};

/// The `X-RateLimit-*` values of one response.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RateHeaders {
    pub(crate) limit: u64,
    pub(crate) remaining: u64,
    pub(crate) reset: u64,
}

impl RateHeaders {
    pub(crate) fn apply<B>(self, res: &mut Response<B>) {
        let h = res.headers_mut();
        h.insert(X_RATELIMIT_LIMIT, number(Field::Limit, self.limit));
        h.insert(
            X_RATELIMIT_REMAINING,
            number(Field::Remaining, self.remaining),
        );
        h.insert(X_RATELIMIT_RESET, number(Field::Reset, self.reset));
    }
}

pin_project! {
    /// The response future of [`AdaptiveRateLimit`](crate::AdaptiveRateLimit).
    ///
    /// # Cancel safety
    ///
    /// Dropping it drops the inner future and the rate permit: no feedback,
    /// counted as dropped.
    pub struct RateLimitFuture<F, B, C, P = RatePermit> {
        #[pin]
        state: State<F, B, C, P>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, B, C, P> {
        Running {
            #[pin]
            future: F,
            permit: Option<P>,
            classifier: C,
            headers: Option<RateHeaders>,
        },
        Passthrough {
            #[pin]
            future: F,
        },
        Rejected {
            response: Option<Response<B>>,
        },
    }
}

impl<F, B, C, P> RateLimitFuture<F, B, C, P> {
    pub(super) fn running(
        future: F,
        permit: P,
        classifier: C,
        headers: Option<RateHeaders>,
    ) -> Self {
        Self {
            state: State::Running {
                future,
                permit: Some(permit),
                classifier,
                headers,
            },
        }
    }

    pub(super) fn passthrough(future: F) -> Self {
        Self {
            state: State::Passthrough { future },
        }
    }

    pub(super) fn rejected(response: Response<B>) -> Self {
        Self {
            state: State::Rejected {
                response: Some(response),
            },
        }
    }
}

impl<F, B, C, P> fmt::Debug for RateLimitFuture<F, B, C, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            State::Running { .. } => "running",
            State::Passthrough { .. } => "passthrough",
            State::Rejected { .. } => "rejected",
        };
        f.debug_struct("RateLimitFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}

impl<F, B, C, P, E> Future for RateLimitFuture<F, B, C, P>
where
    F: Future<Output = Result<Response<B>, E>>,
    C: Classify<Response<B>, E>,
    P: RateToken,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Running {
                future,
                permit,
                classifier,
                headers,
            } => {
                let mut result = ready!(future.poll(cx));
                if let Some(permit) = permit.take() {
                    finish_rate_permit(permit, classify_http(classifier, result.as_ref()));
                }
                if let (Ok(res), Some(h)) = (result.as_mut(), headers.take()) {
                    h.apply(res);
                }
                Poll::Ready(result)
            }
            StateProj::Passthrough { future } => future.poll(cx),
            StateProj::Rejected { response } => match response.take() {
                Some(res) => Poll::Ready(Ok(res)),
                None => panic!("RateLimitFuture polled after completion"),
            },
        }
    }
}
