//! Helpers shared by the test files; each uses a part of them.
#![allow(dead_code)]

use std::convert::Infallible;
use std::time::Duration;

use adaptx::{Clock, Limiter, RateLimiter, RateLimiterBuilder};
use http::{Request, Response, StatusCode};
use tower::{Service, ServiceExt};

pub(crate) type Body = String;

/// Sleeps the milliseconds in the body, then answers by path: `/fail` is a
/// plain 500 (a bug), `/unavailable` a 503 (the backend says it is
/// overloaded), anything else 200.
pub(crate) async fn handler(req: Request<Body>) -> Result<Response<Body>, Infallible> {
    let ms: u64 = req.body().parse().unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(ms)).await;
    let status = match req.uri().path() {
        "/fail" => StatusCode::INTERNAL_SERVER_ERROR,
        "/unavailable" => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::OK,
    };
    Ok(Response::builder()
        .status(status)
        .body(String::new())
        .expect("response"))
}

/// A request for `path` whose body is `body`.
pub(crate) fn get(path: &str, body: &str) -> Request<Body> {
    Request::builder()
        .uri(path)
        .body(body.to_owned())
        .expect("request")
}

/// Sends `req` through a clone of the infallible service `svc`.
pub(crate) async fn send<S>(svc: &S, req: Request<Body>) -> S::Response
where
    S: Service<Request<Body>, Error = Infallible> + Clone,
{
    match svc.clone().oneshot(req).await {
        Ok(res) => res,
        Err(never) => match never {},
    }
}

/// A limiter whose limit cannot move.
pub(crate) fn fixed(n: usize) -> Limiter {
    fixed_on(adaptx::SystemClock::new(), n)
}

/// A limiter on `clock` whose limit cannot move.
pub(crate) fn fixed_on(clock: impl Clock, n: usize) -> Limiter {
    Limiter::builder()
        .initial_limit(n)
        .min_limit(n)
        .max_limit(n)
        .clock(clock)
        .build()
        .expect("valid limiter")
}

/// An AIMD limiter on `clock` starting at `initial`, free to move between
/// 1 and 100.
pub(crate) fn adaptive(clock: impl Clock, initial: usize) -> Limiter {
    Limiter::builder()
        .initial_limit(initial)
        .min_limit(1)
        .max_limit(100)
        .clock(clock)
        .build()
        .expect("valid limiter")
}

/// A rate limiter on `clock` starting at `initial` requests per second,
/// free to move from 5/s to 1 000/s: build it global or keyed.
pub(crate) fn rate_on(clock: impl Clock, initial: u64) -> RateLimiterBuilder {
    RateLimiter::builder()
        .initial_rate(initial)
        .min_rate(5)
        .max_rate(1000)
        .clock(clock)
}
