//! The layers on real loopback HTTP: an axum server on 127.0.0.1:0 whose
//! latency and failures the test controls, and a reqwest client.
//!
//! These tests run on the wall clock (real sockets), so they use short
//! sample windows, generous margins, and bounded loops of well under a
//! second each.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use adaptx::{Limiter, ManualClock, RateLimiter};
use adaptx_tower::{AdaptiveConcurrencyLayer, AdaptiveRateLimitLayer, ClientIp};
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use tokio::time::Instant;

mod common;

use common::{Backend, adaptive, fixed, fixed_on, rate_on};

async fn handler(State(b): State<Arc<Backend>>, uri: axum::http::Uri) -> StatusCode {
    let ms = uri
        .query()
        .and_then(|q| q.strip_prefix("ms="))
        .and_then(|v| v.parse().ok());
    b.serve(ms).await
}

async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .expect("serve");
    });
    format!("http://{addr}/")
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client")
}

fn app(backend: &Arc<Backend>) -> Router<()> {
    Router::new()
        .route("/", get(handler))
        .with_state(backend.clone())
}

/// Sends `n` GETs of `url` at once; returns their responses.
async fn burst(client: &reqwest::Client, url: &str, n: usize) -> Vec<reqwest::Response> {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (client, url) = (client.clone(), url.to_owned());
            tokio::spawn(async move { client.get(&url).send().await })
        })
        .collect();
    let mut responses = Vec::with_capacity(n);
    for t in tasks {
        responses.push(t.await.expect("join").expect("send"));
    }
    responses
}

/// `workers` tasks send requests back to back for `dur`; returns
/// (ok, failures from the handler, 503 from the layer: with `Retry-After`).
async fn load(url: &str, workers: usize, dur: Duration) -> (u64, u64, u64) {
    let client = client();
    let end = Instant::now() + dur;
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let client = client.clone();
        let url = url.to_owned();
        tasks.push(tokio::spawn(async move {
            let (mut ok, mut failed, mut shed) = (0, 0, 0);
            while Instant::now() < end {
                let res = client.get(&url).send().await.expect("send");
                match res.status().as_u16() {
                    200 => ok += 1,
                    503 if res.headers().contains_key("retry-after") => {
                        assert_eq!(res.headers()["retry-after"], "1");
                        shed += 1;
                        // A well-behaved client backs off a little.
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    _ => failed += 1,
                }
            }
            (ok, failed, shed)
        }));
    }
    let mut total = (0, 0, 0);
    for t in tasks {
        let (a, b, c) = t.await.expect("worker");
        total = (total.0 + a, total.1 + b, total.2 + c);
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrency_sheds_with_503_and_retry_after() {
    let backend = Arc::new(Backend::default());
    backend.delay_ms.store(500, Ordering::SeqCst);
    let limiter = fixed(2);
    let url = serve(app(&backend).layer(AdaptiveConcurrencyLayer::server(limiter.clone()))).await;
    let (mut ok, mut shed) = (0, 0);
    for res in burst(&client(), &url, 6).await {
        match res.status() {
            StatusCode::OK => ok += 1,
            StatusCode::SERVICE_UNAVAILABLE => {
                assert_eq!(res.headers()["retry-after"], "1");
                shed += 1;
            }
            s => panic!("unexpected {s}"),
        }
    }
    assert_eq!((ok, shed), (2, 4));
    assert_eq!(backend.peak.load(Ordering::SeqCst), 2);
    assert_eq!(limiter.in_flight(), 0);
    assert_eq!(limiter.stats().rejected, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn in_flight_never_exceeds_the_limit() {
    let backend = Arc::new(Backend::default());
    backend.delay_ms.store(5, Ordering::SeqCst);
    let limiter = fixed(5);
    let url = serve(app(&backend).layer(AdaptiveConcurrencyLayer::server(limiter.clone()))).await;
    let (ok, _, shed) = load(&url, 20, Duration::from_millis(400)).await;
    let peak = backend.peak.load(Ordering::SeqCst);
    assert!(peak <= 5, "peak {peak}");
    assert!(ok > 20 && shed > 0, "ok {ok} shed {shed}");
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn limit_falls_on_failures_and_rises_on_recovery() {
    let backend = Arc::new(Backend::default());
    backend.delay_ms.store(5, Ordering::SeqCst);
    backend.fail_pct.store(50, Ordering::SeqCst);
    // AIMD's steps (×0.9 per failing window, +1 per clean saturated one)
    // are what this wall-clock test can count on; the default law's
    // steps are tested on tokio's paused clock (`paused_laws.rs`).
    let limiter = Limiter::builder()
        .algorithm(adaptx::Algorithm::Aimd)
        .initial_limit(20)
        .min_limit(2)
        .max_limit(40)
        .sample_window(Duration::from_millis(50))
        .warmup_samples(0)
        .build()
        .expect("valid");
    let layer = AdaptiveConcurrencyLayer::server(limiter.clone());
    let handle = layer.limiter().clone();
    let url = serve(app(&backend).layer(layer)).await;

    let (_, failed, _) = load(&url, 24, Duration::from_millis(400)).await;
    let low = handle.limit();
    assert!(failed > 0);
    assert!(low < 10, "limit after failures {low}");
    let peak = backend.peak.load(Ordering::SeqCst);
    assert!(peak <= 20, "peak {peak}");

    backend.fail_pct.store(0, Ordering::SeqCst);
    let (ok, _, _) = load(&url, 24, Duration::from_millis(800)).await;
    let high = handle.limit();
    assert!(ok > 0);
    assert!(high >= low + 4, "limit {low} -> {high}");
    let s = handle.stats();
    assert!(s.decreases >= 1 && s.increases >= 1, "{s:?}");
    assert_eq!(handle.in_flight(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn client_aborts_release_every_permit() {
    let backend = Arc::new(Backend::default());
    let limiter = fixed(64);
    let url = serve(app(&backend).layer(AdaptiveConcurrencyLayer::server(limiter.clone()))).await;
    let client = client();
    let (mut ok, mut aborted) = (0u32, 0u32);
    let mut tasks = Vec::new();
    for w in 0..20u32 {
        let (client, url) = (client.clone(), url.clone());
        tasks.push(tokio::spawn(async move {
            let (mut ok, mut aborted) = (0u32, 0u32);
            for i in 0..50u32 {
                // Every tenth request outlives the client's 30 ms timeout:
                // reqwest drops the connection mid-flight.
                let slow = (w * 50 + i) % 10 == 0;
                let req = if slow {
                    client
                        .get(format!("{url}?ms=300"))
                        .timeout(Duration::from_millis(30))
                } else {
                    client.get(format!("{url}?ms=0"))
                };
                match req.send().await {
                    Ok(res) => {
                        assert_eq!(res.status(), StatusCode::OK);
                        ok += 1;
                    }
                    Err(e) => {
                        assert!(e.is_timeout(), "{e}");
                        aborted += 1;
                    }
                }
            }
            (ok, aborted)
        }));
    }
    for t in tasks {
        let (a, b) = t.await.expect("worker");
        ok += a;
        aborted += b;
    }
    assert_eq!((ok, aborted), (900, 100));
    // The server notices the disconnects (or finishes the handlers): every
    // permit comes back.
    let deadline = Instant::now() + Duration::from_secs(3);
    while limiter.in_flight() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(limiter.in_flight(), 0);
    assert_eq!(backend.current.load(Ordering::SeqCst), 0);
    // Every fast request succeeded; the slow ones that reached the server
    // (under load, a 30 ms timeout can fire before the request arrives) were
    // dropped when hyper saw the connection close, not left holding permits.
    let s = limiter.stats();
    assert_eq!((s.success, s.failures, s.rejected), (900, 0, 0), "{s:?}");
    // Every slow request whose handler started was dropped with it; one
    // dropped before the handler ran never started it.
    let slow_started = backend.started.load(Ordering::SeqCst) - 900;
    assert!(s.dropped > 0 && s.dropped >= slow_started, "{s:?}");
    assert!(s.dropped <= u64::from(aborted), "{s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_answers_429_with_headers() {
    let backend = Arc::new(Backend::default());
    // On a manual clock that never moves: no token is earned during the
    // eight requests however slowly a loaded machine serves them (on the
    // wall clock a 5/s bucket refills one token per 200 ms, which shifted
    // the remaining counts and let an eighth request in).
    let limiter = RateLimiter::builder()
        .initial_rate(5)
        .min_rate(5)
        .max_rate(5)
        .clock(ManualClock::new())
        .build_keyed()
        .expect("valid");
    let layer = AdaptiveRateLimitLayer::keyed(limiter.clone(), ClientIp);
    let url = serve(app(&backend).layer(layer)).await;
    let client = client();
    let mut statuses = Vec::new();
    for i in 0..8 {
        let res = client.get(&url).send().await.expect("send");
        let h = res.headers();
        assert_eq!(h["x-ratelimit-limit"], "5");
        assert!(h.contains_key("x-ratelimit-reset"));
        // The first request comes from a newcomer bucket (5 tokens, 4 left);
        // the second gives the client a bucket of its own (5, 4 left).
        if res.status() == StatusCode::OK && i < 6 {
            let remaining = if i == 0 { 4 } else { 5 - i };
            assert_eq!(h["x-ratelimit-remaining"], remaining.to_string().as_str());
        }
        if res.status() == StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(h["retry-after"], "1");
            assert_eq!(h["x-ratelimit-remaining"], "0");
        }
        statuses.push(res.status().as_u16());
    }
    // A newcomer token, then the client's own five; nothing refills.
    assert_eq!(statuses, [200, 200, 200, 200, 200, 200, 429, 429]);
    // All requests came from 127.0.0.1, read from ConnectInfo: one bucket.
    assert_eq!(limiter.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_cuts_by_a_fifth_when_the_handler_fails() {
    let backend = Arc::new(Backend::default());
    backend.fail_pct.store(100, Ordering::SeqCst);
    // The intervals on a manual clock the test moves between batches: on the
    // wall clock, a loaded machine could close an interval at the completion
    // of the last request, after its `x-ratelimit-limit` was written (the
    // rate at admission), so the rate read after the loop was a cut ahead of
    // the last header.
    let clock = ManualClock::new();
    let limiter = RateLimiter::builder()
        .initial_rate(1000)
        .min_rate(10)
        .max_rate(1000)
        .adjust_interval(Duration::from_millis(100))
        .clock(clock.clone())
        .build()
        .expect("valid");
    let url = serve(app(&backend).layer(AdaptiveRateLimitLayer::new(limiter.clone()))).await;
    let client = client();
    let mut seen = Vec::new();
    for interval in 0..5 {
        if interval > 0 {
            clock.advance(Duration::from_millis(100));
        }
        for _ in 0..5 {
            let res = client.get(&url).send().await.expect("send");
            assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
            let limit: u64 = res.headers()["x-ratelimit-limit"]
                .to_str()
                .expect("ascii")
                .parse()
                .expect("number");
            if seen.last() != Some(&limit) {
                seen.push(limit);
            }
        }
    }
    // 1000, 800, 640, 512, 409: each interval full of failures cuts ×0.8.
    assert_eq!(seen, [1000, 800, 640, 512, 409], "{seen:?}");
    for w in seen.windows(2) {
        assert_eq!(w[1], w[0] * 8 / 10, "{seen:?}");
    }
    assert_eq!(limiter.current_rate(), *seen.last().expect("seen"));
}

// ---- issue #8, point 5: a layer's own rejections are not overload ----

/// Concurrency outside rate: the rate layer sheds most requests with 429
/// while the backend never fails; those 429s pass through the concurrency
/// layer, whose limit must not fall (they say nothing about the backend).
/// The limiters run on a manual clock the test advances, so the windows
/// close where the test says; the requests are real loopback HTTP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_rejections_are_not_overload_concurrency_outside() {
    let backend = Arc::new(Backend::default());
    let clock = ManualClock::new();
    let limiter = adaptive(clock.clone(), 10);
    let rate = rate_on(clock.clone(), 20).build_keyed().expect("valid");
    let app = app(&backend)
        .layer(AdaptiveRateLimitLayer::keyed(rate.clone(), ClientIp))
        .layer(AdaptiveConcurrencyLayer::server(limiter.clone()));
    let url = serve(app).await;
    let client = client();
    let (mut ok, mut limited) = (0u64, 0u64);
    for _second in 0..4 {
        for _ in 0..60 {
            let res = client.get(&url).send().await.expect("send");
            match res.status() {
                StatusCode::OK => ok += 1,
                StatusCode::TOO_MANY_REQUESTS => limited += 1,
                s => panic!("unexpected {s}"),
            }
        }
        clock.advance(Duration::from_secs(1));
    }
    // One more request closes the last window.
    client.get(&url).send().await.expect("send");
    assert!(limited >= 100 && ok >= 40, "ok {ok} limited {limited}");
    assert_eq!(backend.finished.load(Ordering::SeqCst), ok + 1);
    let s = limiter.stats();
    assert_eq!(s.failures, 0, "{s:?}");
    assert_eq!(s.decreases, 0, "{s:?}");
    assert!(limiter.limit() >= 10, "{s:?}");
}

/// Rate outside concurrency (the README's order): the concurrency layer
/// sheds most requests with 503 while the backend never fails; the rate
/// layer sees those 503s and must not cut its rate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_rejections_are_not_overload_rate_outside() {
    let backend = Arc::new(Backend::default());
    let clock = ManualClock::new();
    let limiter = fixed_on(clock.clone(), 2);
    let rate = rate_on(clock.clone(), 100).build_keyed().expect("valid");
    let app = app(&backend)
        .layer(AdaptiveConcurrencyLayer::server(limiter.clone()))
        .layer(AdaptiveRateLimitLayer::keyed(rate.clone(), ClientIp));
    let url = serve(app).await;
    let client = client();
    let (mut ok, mut shed) = (0u64, 0u64);
    for _second in 0..3 {
        // 30 at once against a limit of 2: the two admitted hold their
        // permits for 200 ms (wall time) while the rest are shed.
        for res in burst(&client, &format!("{url}?ms=200"), 30).await {
            match res.status() {
                StatusCode::OK => ok += 1,
                StatusCode::SERVICE_UNAVAILABLE => shed += 1,
                s => panic!("unexpected {s}"),
            }
        }
        clock.advance(Duration::from_secs(1));
    }
    // One more request closes the last interval.
    client.get(&url).send().await.expect("send");
    assert!(shed >= 30 && ok >= 6, "ok {ok} shed {shed}");
    assert_eq!(backend.finished.load(Ordering::SeqCst), ok + 1);
    let r = rate.stats();
    assert_eq!(r.failures, 0, "{r:?}");
    assert_eq!(r.decreases, 0, "{r:?}");
    assert!(rate.current_rate() >= 100, "{r:?}");
}

// ---- issue #8, point 4: a request counts as rejected at most once ----

/// Many clients against a small limit with a queue: each request is either
/// served (some after queueing) or answered 503 after its wait, and the
/// limiter's `rejected` equals the 503s the clients received.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_counts_a_queued_request_once_over_http() {
    let backend = Arc::new(Backend::default());
    let limiter = fixed(2);
    let layer =
        AdaptiveConcurrencyLayer::server(limiter.clone()).queue_timeout(Duration::from_millis(150));
    let url = serve(app(&backend).layer(layer)).await;
    let (mut ok, mut unavailable) = (0u64, 0u64);
    for res in burst(&client(), &format!("{url}?ms=100"), 40).await {
        match res.status() {
            StatusCode::OK => ok += 1,
            StatusCode::SERVICE_UNAVAILABLE => unavailable += 1,
            s => panic!("unexpected {s}"),
        }
    }
    // Two at once for 100 ms each, waits of 150 ms: some are served after
    // queueing, most give up.
    assert!(ok >= 2 && unavailable >= 10, "ok {ok} 503 {unavailable}");
    let s = limiter.stats();
    assert_eq!(s.success, ok, "{s:?}");
    assert_eq!(s.rejected, unavailable, "{s:?}");
}
