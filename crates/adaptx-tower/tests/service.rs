//! The services without a network: `oneshot`, hand-driven `poll_ready`, and
//! tokio's paused time.

use std::convert::Infallible;
use std::future::Future;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use adaptx::{Limiter, ManualClock, RateLimiter};
use adaptx_tower::{
    AdaptiveConcurrency, AdaptiveConcurrencyClient, AdaptiveConcurrencyClientLayer,
    AdaptiveConcurrencyLayer, AdaptiveRateLimit, AdaptiveRateLimitLayer, ClientResponseFuture,
    CurrentRate, HeaderKey, HttpClassifier, LimiterClosed, RateLimitFuture, ResponseFuture,
    Verdict,
};
use http::{Request, Response, StatusCode};
use tokio::sync::oneshot;
use tower::{Layer, Service, ServiceExt, service_fn};

mod common;

use common::{Body, get, handler};

fn limiter(n: usize) -> Limiter {
    Limiter::builder()
        .initial_limit(n)
        .min_limit(1)
        .max_limit(n)
        .build()
        .expect("valid limiter")
}

fn noop_cx() -> Context<'static> {
    Context::from_waker(Waker::noop())
}

#[test]
fn bounds() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    type Fut = std::future::Ready<Result<Response<Body>, Infallible>>;
    type Svc = tower::util::ServiceFn<fn(Request<Body>) -> Fut>;
    send_sync::<AdaptiveConcurrencyLayer>();
    send_sync::<AdaptiveConcurrencyClientLayer>();
    send_sync::<AdaptiveConcurrency<Svc, HttpClassifier>>();
    send::<ResponseFuture<Svc, Request<Body>, HttpClassifier>>();
    send_sync::<AdaptiveConcurrencyClient<Svc, HttpClassifier>>();
    send_sync::<ClientResponseFuture<Fut, HttpClassifier>>();
    send_sync::<AdaptiveRateLimitLayer<RateLimiter>>();
    send_sync::<
        AdaptiveRateLimit<
            Svc,
            RateLimiter,
            HttpClassifier,
            adaptx_tower::DefaultRejection,
            adaptx_tower::NoSkip,
        >,
    >();
    send_sync::<RateLimitFuture<Fut, Body, HttpClassifier>>();
    send_sync::<LimiterClosed>();
    send_sync::<adaptx_tower::Elapsed>();
    send_sync::<adaptx_tower::Answered>();
}

// ---- client side ----

#[tokio::test(start_paused = true)]
async fn client_poll_ready_waits_for_a_permit_and_cancel_releases() {
    let limiter = limiter(1);
    let layer = AdaptiveConcurrencyClientLayer::new(limiter.clone());
    let inner =
        service_fn(
            |rx: oneshot::Receiver<u32>| async move { rx.await.map_err(|_| "sender dropped") },
        );
    let mut a = layer.layer(inner);
    let mut b = a.clone();

    // `a` takes the only permit; the call is in flight until `tx` sends.
    a.ready().await.expect("ready");
    let (tx, rx) = oneshot::channel();
    let fut_a = a.call(rx);
    assert_eq!(limiter.in_flight(), 1);

    // `b` (a clone starts without a permit) waits in poll_ready.
    let mut cx = noop_cx();
    assert!(b.poll_ready(&mut cx).is_pending());

    // The response completes: the permit goes to `b`.
    tx.send(7).expect("send");
    assert_eq!(fut_a.await.expect("ok"), 7);
    assert!(matches!(b.poll_ready(&mut cx), Poll::Ready(Ok(()))));
    assert_eq!(limiter.in_flight(), 1);

    // Dropping a service that holds a permit releases it, as dropped.
    drop(b);
    assert_eq!(limiter.in_flight(), 0);
    assert_eq!(limiter.stats().dropped, 1);
    assert_eq!(limiter.stats().success, 1);
}

#[tokio::test(start_paused = true)]
async fn client_dropped_response_future_releases_permit() {
    let limiter = limiter(2);
    let mut svc = AdaptiveConcurrencyClientLayer::new(limiter.clone()).layer(service_fn(
        |d: Duration| async move {
            tokio::time::sleep(d).await;
            Ok::<_, Infallible>(())
        },
    ));
    svc.ready().await.expect("ready");
    let fut = svc.call(Duration::from_secs(10));
    // Cancel mid-flight, like a caller's timeout.
    let res = tokio::time::timeout(Duration::from_millis(5), fut).await;
    assert!(res.is_err());
    assert_eq!(limiter.in_flight(), 0);
    assert_eq!(limiter.stats().dropped, 1);
}

#[tokio::test(start_paused = true)]
async fn client_waiter_dropped_in_poll_ready_gives_up_its_place() {
    let limiter = limiter(1);
    let layer = AdaptiveConcurrencyClientLayer::new(limiter.clone());
    let mut holder = layer.layer(service_fn(|(): ()| async { Ok::<_, Infallible>(()) }));
    holder.ready().await.expect("ready");
    let mut waiter = holder.clone();
    assert!(waiter.poll_ready(&mut noop_cx()).is_pending());
    drop(waiter);
    // The queue is empty again: the next caller gets the permit once free.
    drop(holder);
    assert_eq!(limiter.in_flight(), 0);
    assert_eq!(limiter.available(), 1);
    let svc = layer.layer(service_fn(|(): ()| async { Ok::<_, Infallible>(()) }));
    svc.oneshot(()).await.expect("ok");
}

#[tokio::test(start_paused = true)]
async fn client_classifier_records_failures() {
    let limiter = limiter(4);
    let svc = AdaptiveConcurrencyClientLayer::new(limiter.clone()).layer(service_fn(
        |fail: bool| async move { if fail { Err("boom") } else { Ok(1) } },
    ));
    svc.clone().oneshot(false).await.expect("ok");
    let err = svc.clone().oneshot(true).await.expect_err("err");
    assert_eq!(err.to_string(), "boom");
    let s = limiter.stats();
    assert_eq!((s.success, s.failures), (1, 1));

    // An HTTP client: 503 is a failure, 404 is skipped (no latency sample).
    let limiter = self::limiter(4);
    let http = AdaptiveConcurrencyClientLayer::new(limiter.clone())
        .classifier(HttpClassifier::new().client_errors(Verdict::Skip))
        .layer(service_fn(|status: StatusCode| async move {
            Ok::<_, Infallible>(
                Response::builder()
                    .status(status)
                    .body(())
                    .expect("response"),
            )
        }));
    for status in [
        StatusCode::OK,
        StatusCode::SERVICE_UNAVAILABLE,
        StatusCode::NOT_FOUND,
    ] {
        http.clone().oneshot(status).await.expect("response");
    }
    let s = limiter.stats();
    assert_eq!((s.success, s.failures), (2, 1));
    // Only the 200's latency is a successful sample: the 404 gave none.
    assert_eq!(s.latency_samples, 1);
}

#[tokio::test(start_paused = true)]
async fn client_closed_limiter_fails_poll_ready() {
    let limiter = limiter(1);
    let svc = AdaptiveConcurrencyClientLayer::new(limiter.clone())
        .layer(service_fn(|(): ()| async { Ok::<_, Infallible>(()) }));
    limiter.close();
    let err = svc.oneshot(()).await.expect_err("closed");
    assert!(err.is::<LimiterClosed>());
}

#[test]
#[should_panic(expected = "poll_ready must return Ready(Ok) before call")]
fn client_call_without_poll_ready_panics() {
    let mut svc = AdaptiveConcurrencyClientLayer::new(limiter(1))
        .layer(service_fn(|(): ()| async { Ok::<_, Infallible>(()) }));
    drop(svc.call(()));
}

// ---- server side ----

#[tokio::test(start_paused = true)]
async fn server_rejects_with_503_and_retry_after_when_full() {
    let limiter = limiter(1);
    let svc = AdaptiveConcurrencyLayer::server(limiter.clone()).layer(service_fn(handler));
    let slow = tokio::spawn(svc.clone().oneshot(get("/", "100")));
    tokio::task::yield_now().await;
    assert_eq!(limiter.in_flight(), 1);

    let res = svc
        .clone()
        .oneshot(get("/", "0"))
        .await
        .expect("infallible");
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(res.headers()["retry-after"], "1");
    assert_eq!(limiter.stats().rejected, 1);

    assert_eq!(
        slow.await.expect("join").expect("ok").status(),
        StatusCode::OK
    );
    assert_eq!(limiter.in_flight(), 0);

    // Configurable status and header.
    let svc = AdaptiveConcurrencyLayer::server(limiter.clone())
        .rejection_status(StatusCode::TOO_MANY_REQUESTS)
        .retry_after(5)
        .layer(service_fn(handler));
    let _held = limiter.try_acquire().expect("permit");
    let res = svc.oneshot(get("/", "0")).await.expect("infallible");
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(res.headers()["retry-after"], "5");
}

#[tokio::test(start_paused = true)]
async fn server_queue_timeout_waits_then_admits_or_rejects() {
    let limiter = limiter(1);
    let svc = AdaptiveConcurrencyLayer::server(limiter.clone())
        .queue_timeout(Duration::from_millis(50))
        .layer(service_fn(handler));

    // Held for 30 ms < 50 ms: the queued request is admitted.
    let first = tokio::spawn(svc.clone().oneshot(get("/", "30")));
    tokio::task::yield_now().await;
    let res = svc
        .clone()
        .oneshot(get("/", "0"))
        .await
        .expect("infallible");
    assert_eq!(res.status(), StatusCode::OK);
    first.await.expect("join").expect("ok");

    // Held for 200 ms > 50 ms: rejected after the wait.
    let first = tokio::spawn(svc.clone().oneshot(get("/", "200")));
    tokio::task::yield_now().await;
    let start = tokio::time::Instant::now();
    let res = svc
        .clone()
        .oneshot(get("/", "0"))
        .await
        .expect("infallible");
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(start.elapsed(), Duration::from_millis(50));
    first.await.expect("join").expect("ok");
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn server_dropped_future_releases_permit_as_dropped() {
    let limiter = limiter(2);
    let svc = AdaptiveConcurrencyLayer::server(limiter.clone()).layer(service_fn(handler));
    let mut boxed = Box::pin(svc.oneshot(get("/", "1000")));
    assert!(boxed.as_mut().poll(&mut noop_cx()).is_pending());
    assert_eq!(limiter.in_flight(), 1);
    // Like a client that disconnects: hyper drops the response future.
    drop(boxed);
    let s = limiter.stats();
    assert_eq!((s.in_flight, s.dropped, s.success), (0, 1, 0), "{s:?}");
}

#[tokio::test(start_paused = true)]
async fn server_ready_future_has_recorded_its_permit_before_it_is_dropped() {
    let limiter = limiter(2);
    let mut svc = AdaptiveConcurrencyLayer::server(limiter.clone()).layer(service_fn(handler));
    svc.ready().await.expect("ready");
    let mut fut = Box::pin(svc.call(get("/", "0")));
    let res = match fut.as_mut().poll(&mut noop_cx()) {
        Poll::Ready(res) => res.expect("infallible"),
        Poll::Pending => panic!("a handler without delay answers at once"),
    };
    assert_eq!(res.status(), StatusCode::OK);
    // The outcome is recorded when the response is ready, not when the
    // future is dropped...
    let s = limiter.stats();
    assert_eq!((s.in_flight, s.success, s.dropped), (0, 1, 0), "{s:?}");
    // ...and dropping the finished future records nothing more.
    drop(fut);
    let s = limiter.stats();
    assert_eq!((s.in_flight, s.success, s.dropped), (0, 1, 0), "{s:?}");
}

#[tokio::test(start_paused = true)]
async fn server_counts_5xx_as_failures_and_samples_only_overload() {
    let limiter = limiter(4);
    let svc = AdaptiveConcurrencyLayer::server(limiter.clone()).layer(service_fn(handler));
    svc.clone().oneshot(get("/", "1")).await.expect("ok");
    svc.clone().oneshot(get("/fail", "1")).await.expect("ok");
    let s = limiter.stats();
    assert_eq!((s.success, s.failures, s.in_flight), (1, 1, 0));
    // The 500 is a `Fault`: counted, but no sample for the law.
    assert_eq!(s.latency_samples, 1);
    svc.clone()
        .oneshot(get("/unavailable", "1"))
        .await
        .expect("ok");
    let s = limiter.stats();
    assert_eq!((s.success, s.failures, s.in_flight), (1, 2, 0));
}

// ---- rate ----

#[tokio::test]
async fn rate_429_headers_and_current_rate() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::builder()
        .initial_rate(10)
        .burst(2)
        .clock(clock.clone())
        .build()
        .expect("valid");
    let svc = AdaptiveRateLimitLayer::new(limiter.clone()).layer(service_fn(
        |req: Request<Body>| async move {
            let rate = req.extensions().get::<CurrentRate>().copied();
            Ok::<_, Infallible>(Response::new(format!("{:?}", rate.map(|r| r.0))))
        },
    ));
    let res = svc.clone().oneshot(get("/", "")).await.expect("ok");
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.body(), "Some(10)");
    assert_eq!(res.headers()["x-ratelimit-limit"], "10");
    assert_eq!(res.headers()["x-ratelimit-remaining"], "1");
    assert!(res.headers().contains_key("x-ratelimit-reset"));
    svc.clone().oneshot(get("/", "")).await.expect("ok");
    let res = svc.clone().oneshot(get("/", "")).await.expect("ok");
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(res.headers()["retry-after"], "1");
    assert_eq!(res.headers()["x-ratelimit-remaining"], "0");
    assert_eq!(limiter.stats().rejected, 1);

    // Headers off; a custom rejection gets the retry-after.
    let svc = AdaptiveRateLimitLayer::new(limiter.clone())
        .headers(false)
        .on_rate_limited(|l: &adaptx::RateLimited| {
            let mut res = Response::new(format!("wait {}s", l.retry_after_secs()));
            *res.status_mut() = StatusCode::TOO_MANY_REQUESTS;
            res
        })
        .layer(service_fn(|_req: Request<Body>| async {
            Ok::<_, Infallible>(Response::new(String::new()))
        }));
    let res = svc.oneshot(get("/", "")).await.expect("ok");
    assert_eq!(res.body(), "wait 1s");
    assert_eq!(res.headers()["retry-after"], "1");
    assert!(!res.headers().contains_key("x-ratelimit-limit"));
}

#[tokio::test]
async fn rate_reset_header_is_unix_seconds_when_a_token_is_due() {
    let unix = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs()
    };
    let rate = RateLimiter::builder()
        .initial_rate(1)
        .min_rate(1)
        .burst(1)
        .build()
        .expect("valid limiter");
    let svc = AdaptiveRateLimitLayer::new(rate).layer(service_fn(handler));
    let number = |res: &Response<Body>, name: &str| -> u64 {
        res.headers()[name]
            .to_str()
            .expect("ascii")
            .parse()
            .expect("a number")
    };
    let before = unix();
    let admitted = svc.clone().oneshot(get("/", "0")).await.expect("ok");
    let limited = svc.oneshot(get("/", "0")).await.expect("ok");
    let after = unix();
    assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait = number(&limited, "retry-after");
    let reset = |res: &Response<Body>| number(res, "x-ratelimit-reset");
    // Whole seconds from a clock that may lag the precise one by a tick.
    assert!(
        (before..=after + 1).contains(&reset(&admitted)),
        "{admitted:?}"
    );
    assert!(
        (before + wait - 1..=after + wait).contains(&reset(&limited)),
        "{limited:?}"
    );
}

#[tokio::test]
async fn rate_keyed_by_header_and_skip() {
    let limiter = RateLimiter::builder()
        .initial_rate(10)
        .burst(1)
        .clock(ManualClock::new())
        .build_keyed::<String>()
        .expect("valid");
    let svc = AdaptiveRateLimitLayer::keyed(
        limiter,
        HeaderKey(http::HeaderName::from_static("x-api-key")),
    )
    .skip(|req: &Request<Body>| req.uri().path() == "/health")
    .layer(service_fn(|_req: Request<Body>| async {
        Ok::<_, Infallible>(Response::new(String::new()))
    }));
    let with_key = |k: &str, path: &str| {
        Request::builder()
            .uri(path)
            .header("x-api-key", k)
            .body(String::new())
            .expect("request")
    };
    let status = |svc: &AdaptiveRateLimit<_, _, _, _, _>, req| {
        let svc = svc.clone();
        async move { svc.oneshot(req).await.expect("ok").status() }
    };
    // Alice's first request comes from a newcomer bucket; her second takes a
    // bucket of her own (burst 1); her third finds it empty.
    assert_eq!(status(&svc, with_key("alice", "/")).await, StatusCode::OK);
    assert_eq!(status(&svc, with_key("alice", "/")).await, StatusCode::OK);
    assert_eq!(
        status(&svc, with_key("alice", "/")).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(status(&svc, with_key("bob", "/")).await, StatusCode::OK);
    let res = svc
        .clone()
        .oneshot(with_key("alice", "/health"))
        .await
        .expect("ok");
    assert_eq!(res.status(), StatusCode::OK);
    assert!(!res.headers().contains_key("x-ratelimit-limit"));
}

#[tokio::test]
async fn rate_failures_cut_the_rate() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::builder()
        .initial_rate(100)
        .clock(clock.clone())
        .build()
        .expect("valid");
    let svc = AdaptiveRateLimitLayer::new(limiter.clone()).layer(service_fn(handler));
    for _ in 0..10 {
        let res = svc
            .clone()
            .oneshot(get("/unavailable", ""))
            .await
            .expect("ok");
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
    clock.advance(Duration::from_secs(1));
    let res = svc.clone().oneshot(get("/", "")).await.expect("ok");
    assert_eq!(res.headers()["x-ratelimit-limit"], "80");
    assert_eq!(limiter.stats().failures, 10);
}

#[test]
fn client_ip_reads_connect_info_then_socket_addr() {
    use adaptx_tower::{ClientIp, KeyExtractor, MissingKey};
    use std::net::{IpAddr, SocketAddr};

    let addr: SocketAddr = "10.1.2.3:4567".parse().expect("addr");
    let mut req = get("/", "");
    let ip = |req: &Request<Body>| -> Result<IpAddr, MissingKey> { ClientIp.extract(req) };
    let missing = ip(&req).expect_err("no address: no key");
    assert!(
        missing
            .to_string()
            .contains("into_make_service_with_connect_info::<SocketAddr>()"),
        "{missing}"
    );
    req.extensions_mut().insert(addr);
    assert_eq!(ip(&req), Ok(addr.ip()));
    let proxy: SocketAddr = "192.0.2.9:1".parse().expect("addr");
    req.extensions_mut()
        .insert(axum::extract::ConnectInfo(proxy));
    assert_eq!(ip(&req), Ok(proxy.ip()));
    // Forwarding headers are not trusted.
    req.headers_mut()
        .insert("x-forwarded-for", http::HeaderValue::from_static("1.1.1.1"));
    assert_eq!(ip(&req), Ok(proxy.ip()));
}

/// A server that does not give `ClientIp` the client's address (axum served
/// without `into_make_service_with_connect_info`) is a clear error: every
/// request is answered 500, none is admitted or limited, instead of all
/// clients silently sharing one bucket.
#[tokio::test]
async fn client_ip_without_connect_info_answers_500_instead_of_one_shared_bucket() {
    use adaptx_tower::ClientIp;
    use std::net::SocketAddr;

    let limiter = RateLimiter::builder()
        .initial_rate(10)
        .clock(ManualClock::new())
        .build_keyed()
        .expect("valid");
    let svc = AdaptiveRateLimitLayer::keyed(limiter.clone(), ClientIp).layer(service_fn(handler));
    for _ in 0..3 {
        let res = svc.clone().oneshot(get("/", "")).await.expect("ok");
        assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!res.headers().contains_key("retry-after"));
    }
    let s = limiter.stats();
    assert_eq!((s.admitted, s.rejected), (0, 0));
    assert!(limiter.is_empty());
    // With the address (what `into_make_service_with_connect_info` inserts),
    // the same service admits.
    let mut req = get("/", "");
    let addr: SocketAddr = "10.1.2.3:4567".parse().expect("addr");
    req.extensions_mut()
        .insert(axum::extract::ConnectInfo(addr));
    let res = svc.clone().oneshot(req).await.expect("ok");
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(limiter.stats().admitted, 1);
}

/// Both layers compose with `tower::ServiceBuilder`, and the stack keeps the
/// inner's `Infallible` error type (what `axum::Router::layer` requires).
#[tokio::test(start_paused = true)]
async fn layers_compose_with_service_builder() {
    let limiter = limiter(1);
    let rate = RateLimiter::builder()
        .initial_rate(100)
        .build()
        .expect("valid rate limiter");
    let svc = tower::ServiceBuilder::new()
        .layer(AdaptiveRateLimitLayer::new(rate.clone()))
        .layer(AdaptiveConcurrencyLayer::server(limiter.clone()))
        .service_fn(handler);
    fn infallible<S: Service<Request<Body>, Error = Infallible>>(s: S) -> S {
        s
    }
    let svc = infallible(svc);
    let res = svc
        .clone()
        .oneshot(get("/", "0"))
        .await
        .expect("infallible");
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.headers().contains_key("x-ratelimit-limit"));
    let _held = limiter.try_acquire().expect("permit");
    let res = svc.oneshot(get("/", "0")).await.expect("infallible");
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(limiter.stats().success, 1);
    // The concurrency layer's 503 is its own answer: no feedback for the
    // rate limiter outside it.
    let r = rate.stats();
    assert_eq!((r.completed, r.failures, r.dropped), (1, 0, 1), "{r:?}");
}

/// Latency is measured per attempt: a retry (a second `ready` + `call` after
/// a failed attempt) gets its own permit and its own sample, so the success
/// reports only its own time, not the failed attempt's before it.
#[tokio::test(start_paused = true)]
async fn client_latency_is_measured_per_attempt() {
    let clock = ManualClock::new();
    let limiter = Limiter::builder()
        .clock(clock.clone())
        .sample_window(Duration::from_secs(3600))
        .build()
        .expect("valid limiter");
    let attempts = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let svc = {
        let clock = clock.clone();
        let attempts = attempts.clone();
        AdaptiveConcurrencyClientLayer::new(limiter.clone()).layer(service_fn(move |(): ()| {
            let clock = clock.clone();
            let n = attempts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async move {
                if n == 0 {
                    clock.advance(Duration::from_millis(300));
                    Err("timed out")
                } else {
                    clock.advance(Duration::from_millis(20));
                    Ok(())
                }
            }
        }))
    };
    // A retry loop outside the layer, as the README advises.
    let mut svc = svc;
    let mut result = Err::<(), _>(adaptx_tower::BoxError::from("not run"));
    for _ in 0..2 {
        result = svc.ready().await.expect("ready").call(()).await;
        if result.is_ok() {
            break;
        }
    }
    result.expect("the retry succeeds");
    let s = limiter.stats();
    assert_eq!((s.success, s.failures, s.in_flight), (1, 1, 0));
    // The successful attempt's own 20 ms (histogram: within 1 %), not 320 ms.
    assert!(
        (s.max_latency.as_secs_f64() / 0.020 - 1.0).abs() < 0.01,
        "{:?}",
        s.max_latency
    );
}
