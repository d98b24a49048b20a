//! Small error types.

use std::fmt;

/// The boxed error of the client-side service, as in tower.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The limiter was closed while the client-side service waited for a permit.
///
/// Returned (boxed) by
/// [`AdaptiveConcurrencyClient::poll_ready`](crate::AdaptiveConcurrencyClient)
/// after [`Limiter::close`](adaptx::Limiter::close). Server-side layers answer
/// with a response instead.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimiterClosed(());

impl LimiterClosed {
    pub(crate) fn new() -> Self {
        Self(())
    }
}

impl fmt::Display for LimiterClosed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("concurrency limiter is closed")
    }
}

impl std::error::Error for LimiterClosed {}

/// The client-side layer's timeout ran out before the inner service
/// answered.
///
/// Returned (boxed) by
/// [`ClientResponseFuture`](crate::ClientResponseFuture) when
/// [`timeout`](crate::AdaptiveConcurrencyClientLayer::timeout) is set; the
/// request is recorded as a failure. Server-side layers answer with a
/// `504` instead.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Elapsed(());

impl Elapsed {
    pub(crate) fn new() -> Self {
        Self(())
    }
}

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("request timed out holding a concurrency permit")
    }
}

impl std::error::Error for Elapsed {}
