//! Deciding what a response says about the backend's capacity.

use adaptx::Outcome;
use http::{Response, StatusCode};

use crate::rate::RateToken;

/// What one response (or error) says about the backend's capacity.
///
/// # Examples
///
/// A classifier of one's own is any closure that returns a verdict:
///
/// ```
/// use adaptx::Limiter;
/// use adaptx_tower::{AdaptiveConcurrencyLayer, Verdict};
/// use http::{Response, StatusCode};
/// use std::convert::Infallible;
///
/// let layer = AdaptiveConcurrencyLayer::server(Limiter::new()).classifier(
///     |result: Result<&Response<String>, &Infallible>| match result {
///         Ok(res) if res.status() == StatusCode::SERVICE_UNAVAILABLE => Verdict::Failure,
///         Ok(res) if res.status().is_server_error() => Verdict::Fault, // a bug, not overload
///         Ok(res) if res.status() == StatusCode::NOT_FOUND => Verdict::Skip,
///         Ok(_) => Verdict::Success,
///         Err(never) => match *never {},
///     },
/// );
/// # let _ = layer;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Verdict {
    /// The backend coped: record a success with the request's latency.
    Success,
    /// A sign of overload (a 503, a timeout, a reset): record a failure with
    /// the request's latency.
    Failure,
    /// The request failed, but not for lack of capacity (a 500 from a bug in
    /// one handler): a concurrency permit counts it among the failures
    /// without a latency sample, so the control law never sees it
    /// ([`Permit::record_skipped`](adaptx::Permit::record_skipped) with
    /// [`Outcome::Failure`]); a rate permit is released without feedback
    /// (counted as dropped).
    Fault,
    /// Says nothing about capacity (a 404, a validation error, a response an
    /// adaptx layer shed). A concurrency permit records a success without a
    /// latency sample
    /// ([`Permit::record_skipped`](adaptx::Permit::record_skipped)); a rate
    /// permit is released without feedback (counted as dropped).
    Skip,
}

/// Marks a response that an adaptx layer answered itself instead of the
/// service behind it: inserted into the response's extensions.
///
/// An adaptx layer reads the mark before its [classifier](Classify), so
/// neither the default classifier nor a closure ever takes a response one
/// layer produced for a verdict on the backend:
///
/// | mark | made by | verdict in every adaptx layer outside |
/// |---|---|---|
/// | [`ConcurrencyShed`](Answered::ConcurrencyShed) | the concurrency layer had no permit (its 503) | [`Skip`](Verdict::Skip) |
/// | [`RateShed`](Answered::RateShed) | the rate layer had no token (its 429) | [`Skip`](Verdict::Skip) |
/// | [`TimedOut`](Answered::TimedOut) | the concurrency layer's [`timeout`](crate::AdaptiveConcurrencyLayer::timeout) ran out (its 504) | [`Failure`](Verdict::Failure) |
///
/// A shed is the layer's own decision and says nothing about the backend:
/// with the concurrency layer outside the rate layer, the rate layer's 429s
/// would otherwise halve the concurrency limit, and in the other order the
/// concurrency layer's 503s would cut the rate. A timeout is a measurement
/// of the backend (it was too slow), so it stays an overload signal for the
/// layers outside, as a 504 from a proxy would be.
///
/// # Examples
///
/// ```
/// use adaptx_tower::{Answered, Classify, HttpClassifier, Verdict};
/// use http::{Response, StatusCode};
///
/// let mut res = Response::builder().status(StatusCode::TOO_MANY_REQUESTS).body(()).unwrap();
/// // An upstream's 429 is overload...
/// assert_eq!(Classify::<_, ()>::classify(&HttpClassifier::new(), Ok(&res)), Verdict::Failure);
/// // ...the rate layer's own is not.
/// res.extensions_mut().insert(Answered::RateShed);
/// assert_eq!(Classify::<_, ()>::classify(&HttpClassifier::new(), Ok(&res)), Verdict::Skip);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Answered {
    /// The concurrency layer found no permit: the limit was full, the
    /// queue wait ran out, or the limiter was closed.
    ConcurrencyShed,
    /// The rate layer found no token in the request's bucket.
    RateShed,
    /// The concurrency layer's timeout ran out while the inner service was
    /// still working on the request.
    TimedOut,
}

impl Answered {
    /// The mark of `res`, if an adaptx layer answered it.
    pub fn of<B>(res: &Response<B>) -> Option<Self> {
        res.extensions().get::<Self>().copied()
    }

    /// What the mark says about the backend: [`Verdict::Skip`] for a shed,
    /// [`Verdict::Failure`] for a timeout.
    pub const fn verdict(self) -> Verdict {
        match self {
            Self::ConcurrencyShed | Self::RateShed => Verdict::Skip,
            Self::TimedOut => Verdict::Failure,
        }
    }

    /// Marks `res` as answered by an adaptx layer.
    pub(crate) fn mark<B>(self, mut res: Response<B>) -> Response<B> {
        res.extensions_mut().insert(self);
        res
    }
}

/// Classifies the result of one request for the limiter.
///
/// Implemented by [`HttpClassifier`], [`ResultClassifier`] and every
/// `Fn(Result<&Res, &E>) -> Verdict`. The HTTP layers consult the
/// [`Answered`] mark before the classifier, so a closure never sees a
/// response an adaptx layer produced; the client layer, which wraps any
/// service, cannot (its responses need not be HTTP): there only
/// [`HttpClassifier`] reads the mark.
///
/// # Examples
///
/// ```
/// use adaptx_tower::{Classify, Verdict};
///
/// // A gRPC-style rule: only errors whose text says "unavailable" are overload.
/// let classify = |r: Result<&u32, &String>| match r {
///     Err(e) if e.contains("unavailable") => Verdict::Failure,
///     Err(_) => Verdict::Skip,
///     Ok(_) => Verdict::Success,
/// };
/// assert_eq!(classify.classify(Err(&"unavailable".to_string())), Verdict::Failure);
/// assert_eq!(classify.classify(Ok(&7)), Verdict::Success);
/// ```
pub trait Classify<Res, E> {
    /// The verdict on one request's result.
    fn classify(&self, result: Result<&Res, &E>) -> Verdict;
}

impl<F, Res, E> Classify<Res, E> for F
where
    F: Fn(Result<&Res, &E>) -> Verdict,
{
    fn classify(&self, result: Result<&Res, &E>) -> Verdict {
        self(result)
    }
}

/// The verdict of an HTTP layer on `result`: the [`Answered`] mark if an
/// adaptx layer produced the response, else the classifier's.
#[inline]
pub(crate) fn classify_http<C, B, E>(classifier: &C, result: Result<&Response<B>, &E>) -> Verdict
where
    C: Classify<Response<B>, E>,
{
    match result.ok().and_then(Answered::of) {
        Some(mark) => mark.verdict(),
        None => classifier.classify(result),
    }
}

/// The default classifier for HTTP responses.
///
/// Only what says "the backend has no capacity for this" moves the limit;
/// a request that failed for a reason of its own is counted but kept from
/// the control law, so one broken route cannot throttle every other.
///
/// | result | default verdict | why | change with |
/// |---|---|---|---|
/// | marked by an adaptx layer ([`Answered`]) | `Skip` (shed) / `Failure` (timed out) | a shed is the layer's own decision; a timeout measured the backend | — |
/// | inner error (connection refused or reset, tower's `Elapsed`, a hyper timeout) | `Failure` | no answer at all: the backend or the path to it is saturated | [`errors`](HttpClassifier::errors) |
/// | `503 Service Unavailable` | `Failure` | the backend says it is overloaded | [`service_unavailable`](HttpClassifier::service_unavailable) |
/// | `504 Gateway Timeout` | `Failure` | a proxy timed out waiting for the backend | [`gateway_timeout`](HttpClassifier::gateway_timeout) |
/// | `408 Request Timeout` | `Failure` | the server timed out reading the request: a saturated server reads slowly | [`request_timeout`](HttpClassifier::request_timeout) |
/// | `429 Too Many Requests` from upstream | `Failure` | the upstream sheds load | [`too_many_requests`](HttpClassifier::too_many_requests) |
/// | `502 Bad Gateway` | `Fault` | the upstream's answer was broken or missing: as often a crashed or misconfigured upstream as an overloaded one, and an overloaded proxy chain shows 503/504 first | [`bad_gateway`](HttpClassifier::bad_gateway) |
/// | other 5xx (`500`, `501`, `505`, ...) | `Fault` | a bug or an unsupported request in one handler, not overload | [`server_errors`](HttpClassifier::server_errors) |
/// | other 4xx | `Success` | the server answered quickly and correctly | [`client_errors`](HttpClassifier::client_errors) |
/// | 1xx, 2xx, 3xx | `Success` | | |
///
/// Inner errors are not told apart: the error type is the inner
/// service's, and at this layer an error means the request got no
/// response. To classify errors finely, use a closure.
///
/// # Examples
///
/// ```
/// use adaptx_tower::{Classify, HttpClassifier, Verdict};
/// use http::{Response, StatusCode};
///
/// let c = HttpClassifier::new().client_errors(Verdict::Skip);
/// let res = |s: StatusCode| Response::builder().status(s).body(()).unwrap();
/// let verdict = |c: &HttpClassifier, s| Classify::<_, ()>::classify(c, Ok(&res(s)));
/// assert_eq!(verdict(&c, StatusCode::OK), Verdict::Success);
/// assert_eq!(verdict(&c, StatusCode::NOT_FOUND), Verdict::Skip);
/// assert_eq!(verdict(&c, StatusCode::SERVICE_UNAVAILABLE), Verdict::Failure);
/// assert_eq!(verdict(&c, StatusCode::TOO_MANY_REQUESTS), Verdict::Failure);
/// assert_eq!(verdict(&c, StatusCode::INTERNAL_SERVER_ERROR), Verdict::Fault);
///
/// // A proxy in front of a fragile upstream: 502 is overload too.
/// let c = HttpClassifier::new().bad_gateway(Verdict::Failure);
/// assert_eq!(verdict(&c, StatusCode::BAD_GATEWAY), Verdict::Failure);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpClassifier {
    errors: Verdict,
    service_unavailable: Verdict,
    gateway_timeout: Verdict,
    request_timeout: Verdict,
    too_many_requests: Verdict,
    bad_gateway: Verdict,
    server_errors: Verdict,
    client_errors: Verdict,
}

impl HttpClassifier {
    /// The classifier of the table above.
    pub const fn new() -> Self {
        Self {
            errors: Verdict::Failure,
            service_unavailable: Verdict::Failure,
            gateway_timeout: Verdict::Failure,
            request_timeout: Verdict::Failure,
            too_many_requests: Verdict::Failure,
            bad_gateway: Verdict::Fault,
            server_errors: Verdict::Fault,
            client_errors: Verdict::Success,
        }
    }

    /// The verdict on an inner error (default [`Verdict::Failure`]).
    pub const fn errors(mut self, verdict: Verdict) -> Self {
        self.errors = verdict;
        self
    }

    /// The verdict on `503 Service Unavailable` (default
    /// [`Verdict::Failure`]).
    pub const fn service_unavailable(mut self, verdict: Verdict) -> Self {
        self.service_unavailable = verdict;
        self
    }

    /// The verdict on `504 Gateway Timeout` (default [`Verdict::Failure`]).
    pub const fn gateway_timeout(mut self, verdict: Verdict) -> Self {
        self.gateway_timeout = verdict;
        self
    }

    /// The verdict on `408 Request Timeout` (default [`Verdict::Failure`]).
    pub const fn request_timeout(mut self, verdict: Verdict) -> Self {
        self.request_timeout = verdict;
        self
    }

    /// The verdict on a `429 Too Many Requests` that no adaptx layer
    /// produced (default [`Verdict::Failure`]).
    pub const fn too_many_requests(mut self, verdict: Verdict) -> Self {
        self.too_many_requests = verdict;
        self
    }

    /// The verdict on `502 Bad Gateway` (default [`Verdict::Fault`]).
    pub const fn bad_gateway(mut self, verdict: Verdict) -> Self {
        self.bad_gateway = verdict;
        self
    }

    /// The verdict on 5xx other than 502, 503 and 504 (default
    /// [`Verdict::Fault`]).
    pub const fn server_errors(mut self, verdict: Verdict) -> Self {
        self.server_errors = verdict;
        self
    }

    /// The verdict on 4xx other than 408 and 429 (default
    /// [`Verdict::Success`]: the server answered quickly and correctly).
    pub const fn client_errors(mut self, verdict: Verdict) -> Self {
        self.client_errors = verdict;
        self
    }

    /// The verdict on a status code (of a response no adaptx layer marked).
    pub fn classify_status(&self, status: StatusCode) -> Verdict {
        match status {
            StatusCode::SERVICE_UNAVAILABLE => self.service_unavailable,
            StatusCode::GATEWAY_TIMEOUT => self.gateway_timeout,
            StatusCode::REQUEST_TIMEOUT => self.request_timeout,
            StatusCode::TOO_MANY_REQUESTS => self.too_many_requests,
            StatusCode::BAD_GATEWAY => self.bad_gateway,
            s if s.is_server_error() => self.server_errors,
            s if s.is_client_error() => self.client_errors,
            _ => Verdict::Success,
        }
    }
}

impl Default for HttpClassifier {
    fn default() -> Self {
        Self::new()
    }
}

impl<B, E> Classify<Response<B>, E> for HttpClassifier {
    fn classify(&self, result: Result<&Response<B>, &E>) -> Verdict {
        match result {
            Ok(res) => match Answered::of(res) {
                Some(mark) => mark.verdict(),
                None => self.classify_status(res.status()),
            },
            Err(_) => self.errors,
        }
    }
}

/// The default classifier for any service: `Ok` is a success, `Err` a
/// failure.
///
/// # Examples
///
/// ```
/// use adaptx_tower::{Classify, ResultClassifier, Verdict};
///
/// assert_eq!(ResultClassifier.classify(Ok::<_, &()>(&1)), Verdict::Success);
/// assert_eq!(ResultClassifier.classify(Err::<&u8, _>(&())), Verdict::Failure);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResultClassifier;

impl<Res, E> Classify<Res, E> for ResultClassifier {
    fn classify(&self, result: Result<&Res, &E>) -> Verdict {
        match result {
            Ok(_) => Verdict::Success,
            Err(_) => Verdict::Failure,
        }
    }
}

/// Ends a rate permit with `verdict` (latency from admission).
pub(crate) fn finish_rate_permit<P: RateToken>(permit: P, verdict: Verdict) {
    match verdict {
        Verdict::Success => permit.record(Outcome::Success),
        Verdict::Failure => permit.record(Outcome::Failure),
        // A rate permit has no sample-less record: released unrecorded.
        Verdict::Fault | Verdict::Skip => drop(permit),
    }
}
