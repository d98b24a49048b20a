//! Helpers shared by the test files; each uses a part of them.
#![allow(dead_code)]

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use adaptx::{Clock, Limiter, RateLimiter, RateLimiterBuilder};
use http::{Request, Response, StatusCode};
use tower::{Service, ServiceExt};

pub(crate) type Body = String;

/// A backend the test steers: its latency, the share of its answers that
/// are 503s (overloaded), and what it saw (requests in it, their peak, how
/// many started and finished).
#[derive(Debug, Default)]
pub(crate) struct Backend {
    pub(crate) delay_ms: AtomicU64,
    /// Answer this many requests of every 100 with a 503 (overloaded).
    pub(crate) fail_pct: AtomicU64,
    pub(crate) seq: AtomicU64,
    pub(crate) current: AtomicUsize,
    pub(crate) peak: AtomicUsize,
    pub(crate) started: AtomicU64,
    pub(crate) finished: AtomicU64,
}

/// Keeps `current` right even when the request is dropped mid-flight.
struct InFlight<'a>(&'a Backend);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.current.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Backend {
    pub(crate) fn new(delay_ms: u64, fail_pct: u64) -> Arc<Self> {
        let b = Self::default();
        b.delay_ms.store(delay_ms, Ordering::SeqCst);
        b.fail_pct.store(fail_pct, Ordering::SeqCst);
        Arc::new(b)
    }

    /// Serves one request: sleeps `ms` (the steered delay if `None`), then
    /// answers 200 or, for `fail_pct` of every 100, 503.
    pub(crate) async fn serve(&self, ms: Option<u64>) -> StatusCode {
        self.started.fetch_add(1, Ordering::SeqCst);
        let now = self.current.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        let _guard = InFlight(self);
        let ms = ms.unwrap_or_else(|| self.delay_ms.load(Ordering::SeqCst));
        tokio::time::sleep(Duration::from_millis(ms)).await;
        self.finished.fetch_add(1, Ordering::SeqCst);
        let n = self.seq.fetch_add(1, Ordering::SeqCst);
        if n % 100 < self.fail_pct.load(Ordering::SeqCst) {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::OK
        }
    }
}

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
