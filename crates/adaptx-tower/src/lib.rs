//! Tower middleware for [`adaptx`]: adaptive concurrency limiting and
//! adaptive rate limiting for axum, hyper and any `tower::Service`.
//!
//! | layer | over | when full |
//! |---|---|---|
//! | [`AdaptiveConcurrencyLayer::server`] | [`adaptx::Limiter`] | `503` + `Retry-After` (optionally after a bounded wait) |
//! | [`AdaptiveConcurrencyLayer::record_at_body_end`] | [`adaptx::Limiter`] | as above; the permit is held until the response body has been sent |
//! | [`AdaptiveConcurrencyClientLayer`] | [`adaptx::Limiter`] | `poll_ready` waits for a permit |
//! | [`AdaptiveThrottleLayer`] | [`adaptx::Throttle`] (Google SRE client-side throttling) | refuses locally with [`adaptx::Throttled`] at the SRE book's probability |
//! | [`AdaptiveRateLimitLayer`] | [`adaptx::RateLimiter`], [`adaptx::KeyedRateLimiter`] or any [`RateSource`] (a fleet's limiter: `adaptx-redis`) | `429` + `Retry-After`, `X-RateLimit-*` headers |
//!
//! Server-side layers answer with a response rather than an error, so an
//! axum `Router` (whose services are `Infallible`) takes them as they are,
//! and mark the answers they make themselves ([`Answered`]) so that no
//! adaptx layer takes another's rejection for overload. A [`Classify`]
//! implementation decides what each response says about the backend's
//! capacity; [`HttpClassifier`] is the HTTP default: only 503, 504, 408, an
//! upstream's 429 and errors are overload, other 5xx are counted without
//! moving the limit. Both concurrency layers can time a request out
//! *inside* its permit (`timeout`) and count one cancelled late as a
//! failure (`drop_deadline`), so a hung backend lowers the limit.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod classify;
mod concurrency;
mod error;
mod header;
mod rate;
mod throttle;

pub use classify::{Answered, Classify, HttpClassifier, ResultClassifier, Verdict};
pub use concurrency::{
    AdaptiveConcurrency, AdaptiveConcurrencyAtBodyEnd, AdaptiveConcurrencyAtBodyEndLayer,
    AdaptiveConcurrencyClassedClient, AdaptiveConcurrencyClassedClientLayer,
    AdaptiveConcurrencyClient, AdaptiveConcurrencyClientLayer, AdaptiveConcurrencyLayer,
    BodyResponseFuture, ClassBy, ClassedResponseFuture, ClientResponseFuture,
    DEFAULT_REJECTION_STATUS, DEFAULT_RETRY_AFTER_SECS, DEFAULT_TIMEOUT_STATUS, PermitBody,
    ResponseFuture,
};
pub use error::{BoxError, Elapsed, LimiterClosed, MissingKey, Rejected};
pub use rate::{
    AdaptiveRateLimit, AdaptiveRateLimitLayer, ClientIp, CurrentRate, DefaultRejection, HeaderKey,
    KeyExtractor, Keyed, NoSkip, OnRateLimited, RateLimitFuture, RateSource, RateToken,
    SkipRequest, X_RATELIMIT_LIMIT, X_RATELIMIT_REMAINING, X_RATELIMIT_RESET,
};
pub use throttle::{AdaptiveThrottle, AdaptiveThrottleLayer, ThrottleFuture};

/// The crate's `README.md`, whose example compiles as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct Readme;
