//! The control laws behind the tower layers, on tokio's paused clock: an
//! in-process backend whose latency and failures the test steers, loaded by
//! closed-loop workers through the layer. Virtual time makes every window
//! the same on every machine, so these tests can hold the laws to their
//! documented steps (the loopback tests in `http.rs` run on the wall clock
//! and check only what scheduling noise cannot move).

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use adaptx::{Builder, Limiter, RateLimiter, TokioClock};
use adaptx_tower::{AdaptiveConcurrencyLayer, AdaptiveRateLimitLayer};
use http::{Request, Response};
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt, service_fn};

mod common;

use common::Backend;

/// A limiter on tokio's clock with 50 ms windows and no warmup, between
/// `min` and 40, starting at `initial`.
fn paused_limiter(initial: usize, min: usize) -> Builder {
    Limiter::builder()
        .initial_limit(initial)
        .min_limit(min)
        .max_limit(40)
        .sample_window(Duration::from_millis(50))
        .warmup_samples(0)
        .clock(TokioClock::new())
}

/// What a load phase saw.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    ok: u64,
    /// 503s of the backend (no `Retry-After`).
    failed: u64,
    /// The layer's own refusals (503 or 429 with `Retry-After`).
    refused: u64,
}

/// `workers` closed-loop clients calling `svc` for `dur` of virtual time; a
/// refused client waits 1 ms before its next request.
async fn load<S>(svc: &S, workers: usize, dur: Duration) -> Tally
where
    S: Service<Request<String>, Response = Response<String>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    let end = Instant::now() + dur;
    let tasks: Vec<_> = (0..workers)
        .map(|_| {
            let svc = svc.clone();
            tokio::spawn(async move {
                let mut t = Tally::default();
                while Instant::now() < end {
                    let req = Request::new(String::new());
                    let Ok(res) = svc.clone().oneshot(req).await;
                    if res.status().is_success() {
                        t.ok += 1;
                    } else if res.headers().contains_key(http::header::RETRY_AFTER) {
                        t.refused += 1;
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    } else {
                        t.failed += 1;
                    }
                }
                t
            })
        })
        .collect();
    let mut total = Tally::default();
    for task in tasks {
        let t = task.await.expect("worker");
        total.ok += t.ok;
        total.failed += t.failed;
        total.refused += t.refused;
    }
    total
}

/// The backend as a tower service.
fn backend_service(
    b: &Arc<Backend>,
) -> impl Service<Request<String>, Response = Response<String>, Error = Infallible, Future: Send>
+ Clone
+ Send
+ 'static {
    let b = Arc::clone(b);
    service_fn(move |_req: Request<String>| {
        let b = Arc::clone(&b);
        async move {
            let mut res = Response::new(String::new());
            *res.status_mut() = b.serve(None).await;
            Ok::<_, Infallible>(res)
        }
    })
}

#[tokio::test(start_paused = true)]
async fn default_law_falls_on_failures_and_rises_on_recovery() {
    let backend = Backend::new(5, 50);
    let limiter = paused_limiter(20, 2).build().expect("valid");
    assert_eq!(limiter.stats().algorithm, "ceiling");
    let svc = AdaptiveConcurrencyLayer::server(limiter.clone()).layer(backend_service(&backend));

    // Half the answers are 503s: overload every window, so the limit falls
    // to what the backend served (Ceiling's decrease), far below 20.
    let t = load(&svc, 24, Duration::from_millis(400)).await;
    let low = limiter.limit();
    assert!(t.failed > 0 && t.refused > 0, "{t:?}");
    assert!(low < 10, "limit after failures {low}");
    assert!(backend.peak.load(Ordering::SeqCst) <= 20);
    let decreases = limiter.stats().decreases;
    assert!(decreases >= 1);

    // Clean again: the limit climbs until it no longer holds back the 24
    // workers (Ceiling explores upward by 4, 8, 16, ... per clean window).
    backend.fail_pct.store(0, Ordering::SeqCst);
    load(&svc, 24, Duration::from_millis(800)).await;
    let high = limiter.limit();
    assert!(high >= 24, "limit {low} -> {high}");
    let s = limiter.stats();
    assert_eq!(s.decreases, decreases, "no decrease on clean windows");
    assert!(s.increases >= 1);
    // The demand fits under the limit now: a last phase sees no refusal.
    let t = load(&svc, 24, Duration::from_millis(200)).await;
    assert_eq!(t.refused, 0, "{t:?}");
    assert_eq!(limiter.in_flight(), 0);
}

/// A latency law (Gradient) backs off when the handler slows down, with no
/// failure at all, and grows again when it speeds up.
#[tokio::test(start_paused = true)]
async fn gradient_falls_when_the_handler_slows_and_rises_when_it_recovers() {
    let backend = Backend::new(10, 0);
    let limiter = paused_limiter(16, 1)
        .algorithm(adaptx::Algorithm::Gradient)
        .jitter(0.0)
        .build()
        .expect("valid");
    let svc = AdaptiveConcurrencyLayer::server(limiter.clone()).layer(backend_service(&backend));

    load(&svc, 24, Duration::from_millis(300)).await;
    let before = limiter.limit();
    let decreases = limiter.stats().decreases;

    // A 15x slowdown: the lowest limit while it lasts shows the backoff.
    backend.delay_ms.store(150, Ordering::SeqCst);
    let sampler = {
        let limiter = limiter.clone();
        tokio::spawn(async move {
            let mut low = usize::MAX;
            let end = Instant::now() + Duration::from_millis(900);
            while Instant::now() < end {
                low = low.min(limiter.limit());
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            low
        })
    };
    let t = load(&svc, 24, Duration::from_millis(900)).await;
    let slow = sampler.await.expect("sampler");
    assert_eq!(t.failed, 0, "no failure: latency alone moves the limit");
    assert!(limiter.stats().decreases > decreases);
    assert!(
        slow * 2 <= before,
        "limit {before} -> {slow} after a 15x slowdown"
    );

    backend.delay_ms.store(10, Ordering::SeqCst);
    load(&svc, 24, Duration::from_millis(800)).await;
    let after = limiter.limit();
    assert!(after > slow, "limit {slow} -> {after} after the recovery");
    assert_eq!(limiter.stats().failures, 0);
}

/// The rate layer's law cuts the rate when the handler's mean latency
/// passes the target, with no failure. Composed under a concurrency layer
/// (outermost), the rate layer's own 429s reach that layer's classifier
/// marked as sheds: they are no feedback to either law.
#[tokio::test(start_paused = true)]
async fn rate_falls_when_the_handler_slows_past_the_target() {
    let backend = Backend::new(10, 0);
    let limiter = RateLimiter::builder()
        .initial_rate(200)
        .min_rate(10)
        .max_rate(1_000)
        .target_latency(Duration::from_millis(50))
        .adjust_interval(Duration::from_millis(100))
        .clock(TokioClock::new())
        .build()
        .expect("valid");
    let outer = paused_limiter(40, 1).build().expect("valid");
    let svc = AdaptiveConcurrencyLayer::server(outer.clone())
        .layer(AdaptiveRateLimitLayer::new(limiter.clone()).layer(backend_service(&backend)));

    // 8 workers at 10 ms offer about 800/s against 200/s: refused requests,
    // a binding limit, a fast backend: the rate grows.
    let t = load(&svc, 8, Duration::from_millis(1_000)).await;
    let before = limiter.stats().rate;
    assert!(t.refused > 0);
    assert!(before > 200, "rate 200 -> {before}");
    let s = limiter.stats();
    assert_eq!(
        (s.failures, s.decreases),
        (0, 0),
        "429s are no feedback: {s:?}"
    );
    let o = outer.stats();
    assert_eq!(
        (o.failures, o.decreases),
        (0, 0),
        "the rate layer's 429s are no failure to the concurrency layer: {o:?}"
    );

    // The handler slows to three times the target: every interval with a
    // completion cuts the rate by a tenth.
    backend.delay_ms.store(150, Ordering::SeqCst);
    let t = load(&svc, 8, Duration::from_millis(1_000)).await;
    let slow = limiter.stats().rate;
    let s = limiter.stats();
    assert_eq!((t.failed, s.failures), (0, 0));
    assert!(s.decreases >= 3, "{s:?}");
    assert!(
        slow * 4 <= before * 3,
        "rate {before} -> {slow} after a 15x slowdown"
    );
}
