//! Deciding what a response says about the backend's capacity.

use adaptx::{Outcome, OwnedPermit, RatePermit};
use http::{Response, StatusCode};

/// What one response (or error) says about the backend's capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// The backend coped: record a success with the request's latency.
    Success,
    /// A sign of overload (a 503, a timeout, a reset): record a failure with
    /// the request's latency.
    Failure,
    /// Says nothing about capacity (a 404, a validation error). A concurrency
    /// permit records a success without a latency sample
    /// ([`Permit::record_skipped`](adaptx::Permit::record_skipped)); a rate
    /// permit is released without feedback (counted as dropped).
    Skip,
}

/// Classifies the result of one request for the limiter.
///
/// Implemented by [`HttpClassifier`], [`ResultClassifier`] and every
/// `Fn(Result<&Res, &E>) -> Verdict`.
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

/// The default classifier for HTTP responses.
///
/// | result | verdict |
/// |---|---|
/// | inner error (connection reset, timeout, ...) | `Failure` |
/// | `429 Too Many Requests`, `503 Service Unavailable`, any other 5xx | `Failure` |
/// | other 4xx | `Success` (or [`client_errors`](HttpClassifier::client_errors)) |
/// | 1xx, 2xx, 3xx | `Success` |
///
/// # Examples
///
/// ```
/// use adaptx_tower::{Classify, HttpClassifier, Verdict};
/// use http::{Response, StatusCode};
///
/// let c = HttpClassifier::new().client_errors(Verdict::Skip);
/// let res = |s: StatusCode| Response::builder().status(s).body(()).unwrap();
/// let verdict = |s| Classify::<_, ()>::classify(&c, Ok(&res(s)));
/// assert_eq!(verdict(StatusCode::OK), Verdict::Success);
/// assert_eq!(verdict(StatusCode::NOT_FOUND), Verdict::Skip);
/// assert_eq!(verdict(StatusCode::TOO_MANY_REQUESTS), Verdict::Failure);
/// assert_eq!(verdict(StatusCode::BAD_GATEWAY), Verdict::Failure);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpClassifier {
    client_errors: Verdict,
}

impl HttpClassifier {
    /// The classifier of the table above.
    pub const fn new() -> Self {
        Self {
            client_errors: Verdict::Success,
        }
    }

    /// The verdict on 4xx responses other than 429 (default
    /// [`Verdict::Success`]: the server answered quickly and correctly).
    pub const fn client_errors(mut self, verdict: Verdict) -> Self {
        self.client_errors = verdict;
        self
    }

    /// The verdict on a status code.
    pub fn classify_status(&self, status: StatusCode) -> Verdict {
        if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            Verdict::Failure
        } else if status.is_client_error() {
            self.client_errors
        } else {
            Verdict::Success
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
            Ok(res) => self.classify_status(res.status()),
            Err(_) => Verdict::Failure,
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

/// Ends a concurrency permit with `verdict` (latency from admission).
pub(crate) fn finish_permit(permit: OwnedPermit, verdict: Verdict) {
    match verdict {
        Verdict::Success => permit.record(Outcome::Success),
        Verdict::Failure => permit.record(Outcome::Failure),
        Verdict::Skip => permit.record_skipped(Outcome::Success),
    }
}

/// Ends a rate permit with `verdict` (latency from admission).
pub(crate) fn finish_rate_permit(permit: RatePermit, verdict: Verdict) {
    match verdict {
        Verdict::Success => permit.record(Outcome::Success),
        Verdict::Failure => permit.record(Outcome::Failure),
        Verdict::Skip => drop(permit),
    }
}
