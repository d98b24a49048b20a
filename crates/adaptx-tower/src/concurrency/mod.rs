//! Adaptive concurrency limiting: a server-side layer that sheds load with
//! `503`, and a client-side layer that waits for a permit in `poll_ready`.

mod body;
mod future;
mod layer;
mod service;

pub use body::PermitBody;
pub use future::{BodyResponseFuture, ClientResponseFuture, ResponseFuture};
pub use layer::{
    AdaptiveConcurrencyAtBodyEndLayer, AdaptiveConcurrencyClientLayer, AdaptiveConcurrencyLayer,
};
pub use service::{AdaptiveConcurrency, AdaptiveConcurrencyAtBodyEnd, AdaptiveConcurrencyClient};

use std::time::Duration;

use http::StatusCode;

/// The `Retry-After` the server-side layer sends with its rejections, in
/// seconds, unless [`retry_after`](AdaptiveConcurrencyLayer::retry_after)
/// says otherwise.
pub const DEFAULT_RETRY_AFTER_SECS: u64 = 1;

/// The status of the server-side layer's rejections, unless
/// [`rejection_status`](AdaptiveConcurrencyLayer::rejection_status) says
/// otherwise.
pub const DEFAULT_REJECTION_STATUS: StatusCode = StatusCode::SERVICE_UNAVAILABLE;

/// How the server-side layer rejects.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ServerConfig {
    pub(crate) status: StatusCode,
    pub(crate) retry_after: Option<u64>,
    pub(crate) queue_timeout: Option<Duration>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            status: DEFAULT_REJECTION_STATUS,
            retry_after: Some(DEFAULT_RETRY_AFTER_SECS),
            queue_timeout: None,
        }
    }
}

impl ServerConfig {
    /// The rejection: the configured status, `Retry-After`, an empty body.
    pub(crate) fn reject<B: Default>(&self) -> http::Response<B> {
        let mut res = http::Response::new(B::default());
        *res.status_mut() = self.status;
        if let Some(secs) = self.retry_after {
            res.headers_mut()
                .insert(http::header::RETRY_AFTER, http::HeaderValue::from(secs));
        }
        res
    }
}
