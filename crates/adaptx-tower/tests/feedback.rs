//! Honest feedback end to end (issue #8, the middleware half): what each
//! layer tells its limiter, checked without a network, on tokio's paused
//! time and manual clocks. The loopback compositions of both layers are in
//! `http.rs`.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use adaptx::{Algorithm, Limiter, ManualClock, TokioClock};
use adaptx_tower::{
    AdaptiveConcurrencyClientLayer, AdaptiveConcurrencyLayer, AdaptiveRateLimitLayer, Answered,
    Classify, Elapsed, HttpClassifier, Verdict,
};
use http::{Request, Response, StatusCode};
use tower::{Layer, Service, ServiceBuilder, ServiceExt, service_fn};

mod common;

use common::{Body, adaptive, fixed, get, handler, rate_on, send};

// ---- 4: a request counts as rejected at most once ----

/// Issue #8, point 4: with `queue_timeout`, a request that queued and was
/// then served is not a rejection, and one that queued and gave up is one
/// rejection, not two. The test counts the 503s its callers received and
/// compares them with the limiter's count.
#[tokio::test(start_paused = true)]
async fn rejected_counts_a_queued_request_once() {
    let limiter = fixed(1);
    let svc = AdaptiveConcurrencyLayer::server(limiter.clone())
        .queue_timeout(Duration::from_millis(50))
        .layer(service_fn(handler));

    // One request holds the only permit for 30 ms; three queue behind it.
    // The first in line is admitted at 30 ms and holds the permit to 60 ms,
    // past the others' 50 ms wait: they give up.
    let holder = tokio::spawn(svc.clone().oneshot(get("/", "30")));
    tokio::task::yield_now().await;
    assert_eq!(limiter.in_flight(), 1);
    let queued: Vec<_> = (0..3)
        .map(|_| tokio::spawn(svc.clone().oneshot(get("/", "30"))))
        .collect();
    let (mut ok, mut unavailable) = (0u64, 0u64);
    for task in std::iter::once(holder).chain(queued) {
        match task.await.expect("join").expect("infallible").status() {
            StatusCode::OK => ok += 1,
            StatusCode::SERVICE_UNAVAILABLE => unavailable += 1,
            s => panic!("unexpected {s}"),
        }
    }
    assert_eq!((ok, unavailable), (2, 2));
    assert_eq!(
        limiter.stats().rejected,
        unavailable,
        "{:?}",
        limiter.stats()
    );

    // A request that finds the permit free is admitted without a rejection,
    // queue or not.
    let res = send(&svc, get("/", "0")).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(limiter.stats().rejected, unavailable);

    // Without a queue, a full limiter rejects once per request.
    let no_queue = AdaptiveConcurrencyLayer::server(limiter.clone()).layer(service_fn(handler));
    let held = limiter.try_acquire().expect("the permit is free");
    for _ in 0..3 {
        let res = send(&no_queue, get("/", "0")).await;
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
        unavailable += 1;
    }
    held.success();
    assert_eq!(limiter.stats().rejected, unavailable);

    // A closed limiter rejects a request of the queueing layer once.
    limiter.close();
    let res = svc.oneshot(get("/", "0")).await.expect("infallible");
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    unavailable += 1;
    let s = limiter.stats();
    assert_eq!(s.rejected, unavailable, "{s:?}");
    assert_eq!(s.in_flight, 0, "{s:?}");
}

// ---- 6: a bug in one handler is not overload ----

/// Issue #8, point 6: one caller hits a route that always answers 500,
/// once a second, among healthy traffic. With the default classification
/// the 500s are counted as failures but neither limiter backs off: a 500 is
/// a bug, not a sign of overload.
#[tokio::test(start_paused = true)]
async fn default_classification_skips_plain_500() {
    let clock = ManualClock::new();
    let limiter = adaptive(clock.clone(), 10);
    let rate = rate_on(clock.clone(), 100)
        .build()
        .expect("valid rate limiter");
    let svc = ServiceBuilder::new()
        .layer(AdaptiveRateLimitLayer::new(rate.clone()))
        .layer(AdaptiveConcurrencyLayer::server(limiter.clone()))
        .service_fn(handler);

    let mut errors = 0;
    for _second in 0..5 {
        let res = send(&svc, get("/fail", "0")).await;
        assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
        errors += 1;
        // A fifth of the traffic: above the rate limiter's 10 % threshold.
        for _ in 0..4 {
            let res = send(&svc, get("/", "0")).await;
            assert_eq!(res.status(), StatusCode::OK);
        }
        clock.advance(Duration::from_secs(1));
    }
    // One more request closes the last window and interval.
    send(&svc, get("/", "0")).await;

    let s = limiter.stats();
    assert_eq!(s.failures, errors, "the 500s are counted: {s:?}");
    assert_eq!(s.decreases, 0, "{s:?}");
    assert_eq!(limiter.limit(), 10, "{s:?}");
    let r = rate.stats();
    assert_eq!(r.decreases, 0, "{r:?}");
    assert_eq!(rate.current_rate(), 100, "{r:?}");

    // A 503 from the backend is overload, and still cuts both.
    for _ in 0..5 {
        send(&svc, get("/unavailable", "0")).await;
    }
    clock.advance(Duration::from_secs(1));
    send(&svc, get("/", "0")).await;
    assert_eq!(limiter.limit(), 5, "{:?}", limiter.stats());
    assert_eq!(rate.current_rate(), 80, "{:?}", rate.stats());
}

// ---- 8: client latency starts at `call` ----

/// Issue #8, point 8: a client service held ready for a second (a
/// balancer's ready cache, a pool wait) and then called records the call's
/// own latency, not the time since `poll_ready` took the permit.
#[tokio::test(start_paused = true)]
async fn client_latency_starts_at_call() {
    let clock = ManualClock::new();
    let limiter = Limiter::builder()
        .clock(clock.clone())
        .sample_window(Duration::from_secs(3600))
        .build()
        .expect("valid limiter");
    let mut svc = {
        let clock = clock.clone();
        AdaptiveConcurrencyClientLayer::new(limiter.clone()).layer(service_fn(move |ms: u64| {
            let clock = clock.clone();
            async move {
                clock.advance(Duration::from_millis(ms));
                Ok::<_, Infallible>(())
            }
        }))
    };

    // Held ready for 1 s, then an instant call.
    svc.ready().await.expect("ready");
    clock.advance(Duration::from_secs(1));
    svc.call(0).await.expect("ok");
    let s = limiter.stats();
    assert_eq!((s.success, s.latency_samples), (1, 1), "{s:?}");
    assert_eq!(s.max_latency, Duration::ZERO, "{s:?}");

    // Held ready for 1 s, then a 20 ms call: 20 ms (histogram: within 1 %).
    svc.ready().await.expect("ready");
    clock.advance(Duration::from_secs(1));
    svc.call(20).await.expect("ok");
    let s = limiter.stats();
    assert_eq!(s.latency_samples, 2, "{s:?}");
    assert!(
        (s.max_latency.as_secs_f64() / 0.020 - 1.0).abs() < 0.01,
        "{s:?}"
    );
}

// ---- 5: a layer's own answers are marked, and only timeouts are overload ----

/// Issue #8, point 5: a user's classifier on the concurrency layer (here
/// one that calls everything a failure) is never asked about the rate
/// layer's 429 inside it: an adaptx layer's own answer is skipped before any
/// classifier runs.
#[tokio::test(start_paused = true)]
async fn own_rejections_are_not_overload_for_a_user_classifier() {
    let limiter = fixed(4);
    let rate = rate_on(ManualClock::new(), 10)
        .burst(1)
        .build()
        .expect("valid rate limiter");
    let everything_fails = |_: Result<&Response<Body>, &Infallible>| Verdict::Failure;
    let svc = ServiceBuilder::new()
        .layer(AdaptiveConcurrencyLayer::server(limiter.clone()).classifier(everything_fails))
        .layer(AdaptiveRateLimitLayer::new(rate.clone()))
        .service_fn(handler);
    let statuses = [
        send(&svc, get("/", "0")).await,
        send(&svc, get("/", "0")).await,
    ]
    .map(|res| res.status());
    assert_eq!(statuses, [StatusCode::OK, StatusCode::TOO_MANY_REQUESTS]);
    let s = limiter.stats();
    // The 200 went to the user's classifier (a failure, as it says); the
    // 429 did not: skipped, counted as a success without a sample.
    assert_eq!((s.failures, s.success), (1, 1), "{s:?}");
}

/// Issue #8, point 5: every answer an adaptx layer makes itself carries the
/// mark, a custom rate rejection included, and the default classifier
/// skips a shed but counts an upstream's 429 and the concurrency layer's
/// timeout as overload.
#[tokio::test(start_paused = true)]
async fn own_rejections_are_marked() {
    let limiter = fixed(1);
    let svc = AdaptiveConcurrencyLayer::server(limiter.clone()).layer(service_fn(handler));
    let held = limiter.try_acquire().expect("permit");
    let res = svc.oneshot(get("/", "0")).await.expect("infallible");
    assert_eq!(Answered::of(&res), Some(Answered::ConcurrencyShed));
    held.success();

    let rate = rate_on(ManualClock::new(), 10)
        .burst(1)
        .build()
        .expect("valid rate limiter");
    let svc = AdaptiveRateLimitLayer::new(rate)
        .on_rate_limited(|_: &adaptx::RateLimited| {
            let mut res = Response::new(String::from("slow down"));
            *res.status_mut() = StatusCode::TOO_MANY_REQUESTS;
            res
        })
        .layer(service_fn(handler));
    let ok = send(&svc, get("/", "0")).await;
    assert_eq!(Answered::of(&ok), None);
    let limited = svc.oneshot(get("/", "0")).await.expect("infallible");
    assert_eq!(limited.body(), "slow down");
    assert_eq!(Answered::of(&limited), Some(Answered::RateShed));

    let c = HttpClassifier::new();
    let verdict = |res: &Response<String>| Classify::<_, Infallible>::classify(&c, Ok(res));
    assert_eq!(verdict(&limited), Verdict::Skip);
    let upstream = Response::builder()
        .status(StatusCode::TOO_MANY_REQUESTS)
        .body(String::new())
        .expect("response");
    assert_eq!(verdict(&upstream), Verdict::Failure);
    let timed_out = Answered::TimedOut.verdict();
    assert_eq!(timed_out, Verdict::Failure);
}

/// Issue #8, points 5 and 7: the concurrency layer's timeout is the
/// backend's slowness, not a shed: the rate layer outside counts its 504s
/// as failures and cuts the rate.
#[tokio::test(start_paused = true)]
async fn own_timeouts_are_overload_for_the_rate_layer() {
    let clock = ManualClock::new();
    let rate = rate_on(clock.clone(), 100)
        .build()
        .expect("valid rate limiter");
    let svc = ServiceBuilder::new()
        .layer(AdaptiveRateLimitLayer::new(rate.clone()))
        .layer(AdaptiveConcurrencyLayer::server(fixed(4)).timeout(Duration::from_secs(1)))
        .service_fn(hung);
    for _ in 0..4 {
        let res = send(&svc, get("/", "")).await;
        assert_eq!(res.status(), StatusCode::GATEWAY_TIMEOUT);
    }
    clock.advance(Duration::from_secs(1));
    // The request that closes the interval times out as well.
    svc.oneshot(get("/", "")).await.expect("infallible");
    let r = rate.stats();
    assert_eq!(r.failures, 5, "{r:?}");
    assert_eq!(rate.current_rate(), 80, "{r:?}");
}

// ---- 6: the default classification ----

/// Issue #8, point 6: the default classifier's table, class by class, and
/// each class configurable.
#[test]
fn default_classification_table() {
    let c = HttpClassifier::new();
    let status = |c: &HttpClassifier, code: u16| {
        c.classify_status(StatusCode::from_u16(code).expect("valid status"))
    };
    for code in [503, 504, 408, 429] {
        assert_eq!(status(&c, code), Verdict::Failure, "{code}");
    }
    for code in [500, 501, 502, 505, 507, 599] {
        assert_eq!(status(&c, code), Verdict::Fault, "{code}");
    }
    for code in [200, 204, 301, 400, 404, 422] {
        assert_eq!(status(&c, code), Verdict::Success, "{code}");
    }
    assert_eq!(
        Classify::<Response<()>, _>::classify(&c, Err(&"connection reset")),
        Verdict::Failure
    );

    let c = HttpClassifier::new()
        .service_unavailable(Verdict::Skip)
        .gateway_timeout(Verdict::Fault)
        .request_timeout(Verdict::Success)
        .too_many_requests(Verdict::Skip)
        .bad_gateway(Verdict::Failure)
        .server_errors(Verdict::Failure)
        .client_errors(Verdict::Skip)
        .errors(Verdict::Fault);
    let got = [503, 504, 408, 429, 502, 500, 404].map(|code| status(&c, code));
    assert_eq!(
        got,
        [
            Verdict::Skip,
            Verdict::Fault,
            Verdict::Success,
            Verdict::Skip,
            Verdict::Failure,
            Verdict::Failure,
            Verdict::Skip,
        ]
    );
    assert_eq!(
        Classify::<Response<()>, _>::classify(&c, Err(&"connection reset")),
        Verdict::Fault
    );
}

// ---- 7: time is a signal ----

/// A backend that never answers.
async fn hung(_req: Request<Body>) -> Result<Response<Body>, Infallible> {
    std::future::pending().await
}

/// A limiter on tokio's (paused) clock, so the layer's timers and the
/// limiter's latencies run on the same time, running AIMD: its one decrease
/// per window lets [`hung_rounds`] send both rounds at the full limit.
fn on_tokio_time(initial: usize) -> Limiter {
    Limiter::builder()
        .algorithm(Algorithm::Aimd)
        .initial_limit(initial)
        .max_limit(100)
        .clock(TokioClock::new())
        .build()
        .expect("valid limiter")
}

/// The same with the default law, Ceiling, which closes its window at the
/// first fresh failure: the first timeouts past the warm-up lower the
/// limit while the rest of the round is still in flight, and the next
/// round meets the lower limit (503 before the backend, not 504 after it).
#[tokio::test(start_paused = true)]
async fn hung_backend_lowers_the_default_laws_limit_within_a_round() {
    let limiter = adaptive(TokioClock::new(), 20);
    assert_eq!(limiter.algorithm(), "ceiling");
    let svc = AdaptiveConcurrencyLayer::server(limiter.clone())
        .timeout(Duration::from_secs(2))
        .layer(service_fn(hung));
    let round: Vec<_> = (0..20)
        .map(|_| tokio::spawn(svc.clone().oneshot(get("/", ""))))
        .collect();
    for t in round {
        let res = t.await.expect("join").expect("infallible");
        assert_eq!(res.status(), StatusCode::GATEWAY_TIMEOUT);
    }
    let s = limiter.stats();
    assert_eq!((s.failures, s.dropped, s.in_flight), (20, 0, 0), "{s:?}");
    let limit = limiter.limit();
    assert!(limit < 20, "{s:?}");
    let statuses: Vec<_> = {
        let round: Vec<_> = (0..20)
            .map(|_| tokio::spawn(svc.clone().oneshot(get("/", ""))))
            .collect();
        let mut v = Vec::new();
        for t in round {
            v.push(t.await.expect("join").expect("infallible").status());
        }
        v
    };
    let rejected = statuses
        .iter()
        .filter(|&&c| c == StatusCode::SERVICE_UNAVAILABLE)
        .count();
    assert_eq!(rejected, 20 - limit, "{statuses:?}");
}

/// Two rounds of 20 concurrent calls to a hung backend, each waited out:
/// the second round's first completion closes a sample window holding the
/// first round's (more than the limiter's warm-up samples).
async fn hung_rounds<F>(call: impl Fn() -> F) -> Vec<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let mut results = Vec::new();
    for _round in 0..2 {
        let tasks: Vec<_> = (0..20).map(|_| tokio::spawn(call())).collect();
        for t in tasks {
            results.push(t.await.expect("join"));
        }
    }
    results
}

/// After [`hung_rounds`] against `limiter` (initial limit 20): every call
/// was a failure, none dropped or left in flight, and the limit fell.
fn assert_failures_lowered_the_limit(limiter: &Limiter) {
    let s = limiter.stats();
    assert_eq!((s.failures, s.dropped, s.in_flight), (40, 0, 0), "{s:?}");
    assert!(limiter.limit() < 20, "{s:?}");
}

/// Issue #8, point 7: a hung backend behind the server layer, with the
/// layer's timeout, lowers the limit: each request is answered 504 (marked)
/// after the timeout and recorded as a failure. In axum the timeout covers
/// reading the request body, so slow uploads cannot hold the permits
/// either.
#[tokio::test(start_paused = true)]
async fn hung_backend_lowers_limit_server() {
    let limiter = on_tokio_time(20);
    let svc = AdaptiveConcurrencyLayer::server(limiter.clone())
        .timeout(Duration::from_secs(2))
        .layer(service_fn(hung));
    let start = tokio::time::Instant::now();
    for res in hung_rounds(|| svc.clone().oneshot(get("/", ""))).await {
        let res = res.expect("infallible");
        assert_eq!(res.status(), StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(res.headers()["retry-after"], "1");
        assert_eq!(Answered::of(&res), Some(Answered::TimedOut));
    }
    assert_eq!(start.elapsed(), Duration::from_secs(4));
    assert_failures_lowered_the_limit(&limiter);

    // Slow uploads through axum: the handler reads a body that never
    // ends. The timeout frees the permits; other clients get through.
    use axum::routing::{get as axum_get, post};
    let limiter = on_tokio_time(2);
    let app = axum::Router::new()
        .route("/upload", post(|body: String| async move { body }))
        .route("/", axum_get(|| async { "hi" }))
        .layer(
            AdaptiveConcurrencyLayer::server(limiter.clone())
                .timeout(Duration::from_secs(5))
                .timeout_status(StatusCode::SERVICE_UNAVAILABLE),
        );
    let upload = || {
        Request::post("/upload")
            .body(axum::body::Body::new(Hang))
            .expect("request")
    };
    let fetch = || {
        Request::get("/")
            .body(axum::body::Body::empty())
            .expect("request")
    };
    let uploads: Vec<_> = (0..2)
        .map(|_| tokio::spawn(app.clone().oneshot(upload())))
        .collect();
    tokio::task::yield_now().await;
    assert_eq!(limiter.in_flight(), 2);
    let res = app.clone().oneshot(fetch()).await.expect("infallible");
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(Answered::of(&res), Some(Answered::ConcurrencyShed));
    for t in uploads {
        let res = t.await.expect("join").expect("infallible");
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(Answered::of(&res), Some(Answered::TimedOut));
    }
    let res = app.oneshot(fetch()).await.expect("infallible");
    assert_eq!(res.status(), StatusCode::OK);
    let s = limiter.stats();
    assert_eq!(
        (s.failures, s.dropped, s.in_flight, s.rejected),
        (2, 0, 0, 1),
        "{s:?}"
    );
}

/// A request body that never sends a byte.
struct Hang;

impl http_body::Body for Hang {
    type Data = bytes::Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, Infallible>>> {
        Poll::Pending
    }
}

/// Issue #8, point 7: a hung backend behind the client layer, with the
/// layer's timeout, lowers the limit: each call fails with `Elapsed` after
/// the timeout and is recorded as a failure.
#[tokio::test(start_paused = true)]
async fn hung_backend_lowers_limit_client() {
    let limiter = on_tokio_time(20);
    let svc = AdaptiveConcurrencyClientLayer::new(limiter.clone())
        .timeout(Duration::from_secs(2))
        .layer(service_fn(|(): ()| {
            std::future::pending::<Result<(), Infallible>>()
        }));
    for res in hung_rounds(|| svc.clone().oneshot(())).await {
        let err = res.expect_err("timed out");
        assert!(err.is::<Elapsed>(), "{err}");
    }
    assert_failures_lowered_the_limit(&limiter);
}

/// Issue #8, point 7: with a timeout *outside* the server layer, a request
/// cancelled past the layer's `drop_deadline` is a failure, one cancelled
/// before it is dropped; a streaming body dropped past it too.
#[tokio::test(start_paused = true)]
async fn dropped_after_deadline_is_a_failure_server() {
    let limiter = on_tokio_time(20);
    let layer =
        AdaptiveConcurrencyLayer::server(limiter.clone()).drop_deadline(Duration::from_secs(2));
    let svc = layer.clone().layer(service_fn(hung));
    let outer = |after: u64| {
        tokio::time::timeout(
            Duration::from_secs(after),
            svc.clone().oneshot(get("/", "")),
        )
    };
    for res in hung_rounds(|| outer(3)).await {
        assert!(res.is_err(), "the outer timeout fired");
    }
    assert_failures_lowered_the_limit(&limiter);
    // Cancelled before the deadline: dropped, as before.
    assert!(outer(1).await.is_err());
    let s = limiter.stats();
    assert_eq!((s.failures, s.dropped), (40, 1), "{s:?}");

    // A response body abandoned mid-stream past the deadline.
    let svc = layer
        .record_at_body_end()
        .layer(service_fn(|_req: Request<Body>| async {
            Ok::<_, Infallible>(Response::new(axum::body::Body::new(Hang)))
        }));
    let res = svc.oneshot(get("/", "")).await.expect("infallible");
    assert!(res.body().holds_permit());
    tokio::time::sleep(Duration::from_secs(3)).await;
    drop(res);
    let s = limiter.stats();
    assert_eq!((s.failures, s.dropped, s.in_flight), (41, 1, 0), "{s:?}");
}

/// Issue #8, point 7: with a timeout *outside* the client layer (the
/// setup that left the limit at 40 with 200 dropped), a call abandoned past
/// the layer's `drop_deadline` is a failure and the limit falls.
#[tokio::test(start_paused = true)]
async fn dropped_after_deadline_is_a_failure_client() {
    let limiter = on_tokio_time(20);
    let svc = AdaptiveConcurrencyClientLayer::new(limiter.clone())
        .drop_deadline(Duration::from_secs(2))
        .layer(service_fn(|(): ()| {
            std::future::pending::<Result<(), Infallible>>()
        }));
    let outer =
        |after: u64| tokio::time::timeout(Duration::from_secs(after), svc.clone().oneshot(()));
    for res in hung_rounds(|| outer(3)).await {
        assert!(res.is_err(), "the outer timeout fired");
    }
    assert_failures_lowered_the_limit(&limiter);
    assert!(outer(1).await.is_err());
    assert_eq!(limiter.stats().dropped, 1);
}
