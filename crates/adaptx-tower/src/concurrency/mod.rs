//! Adaptive concurrency limiting: a server-side layer that sheds load with
//! `503`, and a client-side layer that waits for a permit in `poll_ready`.

mod body;
mod class;
mod future;
mod layer;
mod lease;
mod service;

pub use body::PermitBody;
pub use class::{
    AdaptiveConcurrencyClassedClient, AdaptiveConcurrencyClassedClientLayer, ClassBy,
    ClassedResponseFuture,
};
pub use future::{BodyResponseFuture, ClientResponseFuture, ResponseFuture};
pub use layer::{
    AdaptiveConcurrencyAtBodyEndLayer, AdaptiveConcurrencyClientLayer, AdaptiveConcurrencyLayer,
};
pub use service::{AdaptiveConcurrency, AdaptiveConcurrencyAtBodyEnd, AdaptiveConcurrencyClient};

use std::time::Duration;

use http::StatusCode;
use tokio::time::Sleep;

use crate::classify::Answered;
use crate::header::{Field, number};

/// The `Retry-After` the server-side layer sends with its rejections, in
/// seconds, unless [`retry_after`](AdaptiveConcurrencyLayer::retry_after)
/// says otherwise.
pub const DEFAULT_RETRY_AFTER_SECS: u64 = 1;

/// The status of the server-side layer's rejections, unless
/// [`rejection_status`](AdaptiveConcurrencyLayer::rejection_status) says
/// otherwise.
pub const DEFAULT_REJECTION_STATUS: StatusCode = StatusCode::SERVICE_UNAVAILABLE;

/// The status the server-side layer answers with when its
/// [`timeout`](AdaptiveConcurrencyLayer::timeout) runs out, unless
/// [`timeout_status`](AdaptiveConcurrencyLayer::timeout_status) says
/// otherwise: `504 Gateway Timeout`, as a proxy that gave up on its
/// upstream would answer.
pub const DEFAULT_TIMEOUT_STATUS: StatusCode = StatusCode::GATEWAY_TIMEOUT;

/// What both sides do with time inside the permit.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Deadlines {
    /// How long the inner call may run holding the permit.
    pub(crate) timeout: Option<Duration>,
    /// Past this, a cancelled request counts as a failure, not as dropped.
    pub(crate) drop_deadline: Option<Duration>,
}

impl Deadlines {
    /// The timer of one call, started now (inside the permit).
    pub(crate) fn timer(&self) -> Option<Sleep> {
        self.timeout.map(tokio::time::sleep)
    }
}

/// How the server-side layer rejects and times out.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ServerConfig {
    pub(crate) answers: Answers,
    pub(crate) queue_timeout: Option<Duration>,
    pub(crate) deadlines: Deadlines,
}

/// What the server-side layer answers with when it answers itself: all a
/// response future needs of the layer's configuration (it is carried by
/// every future, so it is kept small).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Answers {
    pub(crate) status: StatusCode,
    pub(crate) timeout_status: StatusCode,
    pub(crate) retry_after: Option<u64>,
}

impl Default for Answers {
    fn default() -> Self {
        Self {
            status: DEFAULT_REJECTION_STATUS,
            timeout_status: DEFAULT_TIMEOUT_STATUS,
            retry_after: Some(DEFAULT_RETRY_AFTER_SECS),
        }
    }
}

impl Answers {
    /// The layer's own answer for `mark`: the rejection status (or the
    /// timeout status for [`Answered::TimedOut`]), `Retry-After`, an empty
    /// body, and the mark.
    pub(crate) fn answer<B: Default>(&self, mark: Answered) -> http::Response<B> {
        let mut res = http::Response::new(B::default());
        *res.status_mut() = match mark {
            Answered::TimedOut => self.timeout_status,
            _ => self.status,
        };
        if let Some(secs) = self.retry_after {
            res.headers_mut()
                .insert(http::header::RETRY_AFTER, number(Field::RetryAfter, secs));
        }
        mark.mark(res)
    }
}
