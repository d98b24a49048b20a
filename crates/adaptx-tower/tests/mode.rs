//! A layer's mode is its limiter's: in shadow and bypass mode no layer
//! answers 503 or 429 for want of capacity, the permits it takes above the
//! limit run and record like any other, and switching back to enforce
//! restores the rejection paths. One test per layer.

use std::convert::Infallible;
use std::time::Duration;

use adaptx::{Limiter, ManualClock, Mode, Partitions, RateLimiter};
use adaptx_tower::{
    AdaptiveConcurrencyClientLayer, AdaptiveConcurrencyLayer, AdaptiveRateLimitLayer, HeaderKey,
};
use http::{Request, Response, StatusCode};
use tower::{Layer, Service, ServiceExt, service_fn};

mod common;

use common::{Body, fixed, get, handler, send};

/// Starts a request that holds its permit for 100 ms; returns its task once
/// it is in flight.
async fn hold<S>(svc: &S) -> tokio::task::JoinHandle<Result<S::Response, Infallible>>
where
    S: Service<Request<Body>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
    S::Response: Send,
{
    let task = tokio::spawn(svc.clone().oneshot(get("/", "100")));
    tokio::task::yield_now().await;
    task
}

#[tokio::test(start_paused = true)]
async fn mode_server_layer_sheds_nothing_in_shadow_and_503s_again_in_enforce() {
    let limiter = fixed(1);
    let svc = AdaptiveConcurrencyLayer::server(limiter.clone()).layer(service_fn(handler));
    let slow = hold(&svc).await;
    assert_eq!(limiter.in_flight(), 1);
    limiter.set_mode(Mode::Shadow);
    assert_eq!(send(&svc, get("/", "0")).await.status(), StatusCode::OK);
    let s = limiter.stats();
    assert_eq!((s.would_reject, s.rejected, s.success), (1, 0, 1));
    limiter.set_mode(Mode::Enforce);
    assert_eq!(
        send(&svc, get("/", "0")).await.status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(limiter.stats().rejected, 1);
    slow.await.expect("join").expect("ok");
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn mode_server_layer_with_a_queue_admits_at_once_in_bypass() {
    let limiter = fixed(1);
    let svc = AdaptiveConcurrencyLayer::server(limiter.clone())
        .queue_timeout(Duration::from_millis(50))
        .layer(service_fn(handler));
    let slow = hold(&svc).await;
    limiter.set_mode(Mode::Bypass);
    let start = tokio::time::Instant::now();
    assert_eq!(send(&svc, get("/", "0")).await.status(), StatusCode::OK);
    assert_eq!(start.elapsed(), Duration::ZERO, "no wait in the queue");
    slow.await.expect("join").expect("ok");
    let s = limiter.stats();
    assert_eq!(
        (s.would_reject, s.rejected, s.success, s.in_flight),
        (1, 0, 2, 0)
    );
}

#[tokio::test(start_paused = true)]
async fn mode_queued_request_is_served_when_the_layer_switches_to_shadow() {
    let limiter = fixed(1);
    let svc = AdaptiveConcurrencyLayer::server(limiter.clone())
        .queue_timeout(Duration::from_secs(10))
        .layer(service_fn(handler));
    let slow = hold(&svc).await;
    let queued = tokio::spawn(svc.clone().oneshot(get("/", "0")));
    tokio::task::yield_now().await;
    assert_eq!(limiter.waiting(), 1);
    limiter.set_mode(Mode::Shadow);
    let res = queued.await.expect("join").expect("ok");
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(tokio::time::Instant::now().elapsed(), Duration::ZERO);
    slow.await.expect("join").expect("ok");
}

#[tokio::test(start_paused = true)]
async fn mode_body_end_layer_sheds_nothing_in_shadow() {
    let limiter = fixed(1);
    let svc = AdaptiveConcurrencyLayer::server(limiter.clone())
        .record_at_body_end()
        .layer(service_fn(handler));
    let held = limiter.try_acquire().expect("free");
    limiter.set_mode(Mode::Shadow);
    let res = svc.clone().oneshot(get("/", "0")).await.expect("ok");
    assert_eq!(res.status(), StatusCode::OK);
    // The empty body ended at once: its permit above the limit is back.
    assert_eq!(limiter.in_flight(), 1);
    drop(res);
    drop(held);
    let s = limiter.stats();
    assert_eq!((s.in_flight, s.would_reject, s.rejected), (0, 1, 0));
    assert_eq!(s.success, 1);
}

#[tokio::test(start_paused = true)]
async fn mode_server_layer_with_partitions_sheds_nothing_in_shadow() {
    let limiter = Limiter::builder()
        .initial_limit(2)
        .partitions(Partitions::new().share("batch", 0.5).reserve(1.0))
        .build()
        .expect("valid");
    let batch = limiter.class("batch").expect("known");
    let svc = AdaptiveConcurrencyLayer::server(limiter.clone())
        .class_by(move |_| batch)
        .layer(service_fn(handler));
    let held = limiter.try_acquire_as(batch).expect("its share");
    assert_eq!(
        send(&svc, get("/", "0")).await.status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    limiter.set_mode(Mode::Shadow);
    assert_eq!(send(&svc, get("/", "0")).await.status(), StatusCode::OK);
    drop(held);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn mode_client_layer_is_ready_at_once_in_bypass() {
    let limiter = fixed(1);
    let layer = AdaptiveConcurrencyClientLayer::new(limiter.clone());
    let mut svc = layer.layer(service_fn(|_: ()| async { Ok::<_, Infallible>(7) }));
    let held = limiter.try_acquire().expect("free");
    limiter.set_mode(Mode::Bypass);
    let ready = svc.ready().await.expect("ready without waiting");
    assert_eq!(ready.call(()).await.expect("ok"), 7);
    drop(held);
    let s = limiter.stats();
    assert_eq!((s.in_flight, s.success, s.would_reject), (0, 1, 1));
}

#[tokio::test(start_paused = true)]
async fn mode_classed_client_layer_is_served_at_once_in_shadow() {
    let limiter = fixed(1);
    let svc = AdaptiveConcurrencyClientLayer::new(limiter.clone())
        .class_by(|_| adaptx::Class::default().with_priority(1))
        .layer(service_fn(|_: Request<()>| async {
            Ok::<_, Infallible>("ok")
        }));
    let held = limiter.try_acquire().expect("free");
    limiter.set_mode(Mode::Shadow);
    let req = Request::builder().body(()).expect("request");
    assert_eq!(svc.oneshot(req).await.expect("served"), "ok");
    drop(held);
    assert_eq!(limiter.stats().would_reject, 1);
}

#[tokio::test(start_paused = true)]
async fn mode_closed_limiter_still_503s_in_shadow() {
    let limiter = fixed(1);
    let svc = AdaptiveConcurrencyLayer::server(limiter.clone()).layer(service_fn(handler));
    limiter.set_mode(Mode::Shadow);
    limiter.close();
    assert_eq!(
        send(&svc, get("/", "0")).await.status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
}

fn ok_service()
-> impl Service<Request<Body>, Response = Response<Body>, Error = Infallible, Future = impl Send> + Clone
{
    service_fn(|_req: Request<Body>| async { Ok::<_, Infallible>(Response::new(String::new())) })
}

#[tokio::test]
async fn mode_rate_layer_sends_no_429_in_shadow() {
    let limiter = RateLimiter::builder()
        .initial_rate(10)
        .burst(1)
        .clock(ManualClock::new())
        .build()
        .expect("valid");
    let svc = AdaptiveRateLimitLayer::new(limiter.clone()).layer(ok_service());
    assert_eq!(send(&svc, get("/", "")).await.status(), StatusCode::OK);
    assert_eq!(
        send(&svc, get("/", "")).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    limiter.set_mode(Mode::Shadow);
    let res = send(&svc, get("/", "")).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()["x-ratelimit-remaining"], "0");
    let s = limiter.stats();
    assert_eq!((s.admitted, s.rejected, s.would_reject), (2, 1, 1));
    assert_eq!(s.successes, 2, "the shadow admission recorded its outcome");
}

#[tokio::test]
async fn mode_keyed_rate_layer_sends_no_429_in_bypass() {
    let limiter = RateLimiter::builder()
        .initial_rate(10)
        .burst(1)
        .clock(ManualClock::new())
        .build_keyed::<String>()
        .expect("valid");
    let svc = AdaptiveRateLimitLayer::keyed(
        limiter.clone(),
        HeaderKey(http::HeaderName::from_static("x-api-key")),
    )
    .layer(ok_service());
    let alice = || {
        Request::builder()
            .header("x-api-key", "alice")
            .body(String::new())
            .expect("request")
    };
    limiter.set_mode(Mode::Bypass);
    for _ in 0..3 {
        assert_eq!(send(&svc, alice()).await.status(), StatusCode::OK);
    }
    limiter.set_mode(Mode::Enforce);
    assert_eq!(
        send(&svc, alice()).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    // The first request comes from a newcomer bucket, the second takes
    // alice's own token, the third is beyond it.
    let s = limiter.stats();
    assert_eq!((s.would_reject, s.rejected, s.successes), (1, 1, 3));
}
