//! Per-request classes on the server and client layers: a closure over the
//! request picks the partition and priority; the 503 path is unchanged.

use std::time::Duration;

use adaptx::{Class, Limiter, Partitions, TokioClock};
use adaptx_tower::{
    AdaptiveConcurrencyClassedClient, AdaptiveConcurrencyClientLayer, AdaptiveConcurrencyLayer,
    ClassedResponseFuture, HttpClassifier, ResultClassifier,
};
use http::{Request, Response, StatusCode};
use tower::{Layer, ServiceExt, service_fn};

/// Limit 10, live 70 % and batch 30 %, fully reserved.
fn partitioned() -> Limiter {
    Limiter::builder()
        .initial_limit(10)
        .min_limit(10)
        .max_limit(10)
        .clock(TokioClock::new())
        .partitions(
            Partitions::new()
                .share("live", 0.7)
                .share("batch", 0.3)
                .reserve(1.0),
        )
        .build()
        .expect("valid limiter")
}

fn req(prefetch: bool) -> Request<String> {
    let b = Request::builder().uri("/");
    let b = if prefetch {
        b.header("x-prefetch", "1")
    } else {
        b
    };
    b.body(String::new()).expect("valid request")
}

#[tokio::test]
async fn server_class_by_routes_requests_to_their_partition_and_keeps_the_503_path() {
    let limiter = partitioned();
    let live = limiter.class("live").expect("known");
    let batch = limiter.class("batch").expect("known");
    let layer = AdaptiveConcurrencyLayer::server(limiter.clone()).class_by(move |parts| {
        if parts.headers.contains_key("x-prefetch") {
            batch
        } else {
            live
        }
    });
    let svc = layer.layer(service_fn(|_req: Request<String>| async {
        Ok::<_, std::convert::Infallible>(Response::new(String::from("ok")))
    }));
    // Batch's 3 are taken: a prefetch request is refused, a live one served.
    let held: Vec<_> = (0..3)
        .map(|_| limiter.try_acquire_as(batch).expect("batch share"))
        .collect();
    let refused = svc.clone().oneshot(req(true)).await.expect("infallible");
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.headers()["retry-after"], "1");
    let served = svc.clone().oneshot(req(false)).await.expect("infallible");
    assert_eq!(served.status(), StatusCode::OK);
    assert_eq!(limiter.in_flight_of(live), 0, "the live permit came back");
    drop(held);
    let served = svc.oneshot(req(true)).await.expect("infallible");
    assert_eq!(served.status(), StatusCode::OK);
}

#[tokio::test(start_paused = true)]
async fn client_class_by_waits_for_a_permit_of_the_request_class() {
    let limiter = partitioned();
    let live = limiter.class("live").expect("known");
    let batch = limiter.class("batch").expect("known");
    let layer = AdaptiveConcurrencyClientLayer::new(limiter.clone())
        .classifier(HttpClassifier::new())
        .class_by(move |parts| {
            if parts.headers.contains_key("x-prefetch") {
                batch
            } else {
                live
            }
        });
    let svc = layer.layer(service_fn(|_req: Request<String>| async {
        Ok::<_, std::io::Error>(Response::new(String::from("ok")))
    }));
    let held: Vec<_> = (0..3)
        .map(|_| limiter.try_acquire_owned_as(batch).expect("batch share"))
        .collect();
    let waiting = tokio::spawn(svc.clone().oneshot(req(true)));
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(limiter.waiting(), 1, "the prefetch request waits");
    let live_res = svc.clone().oneshot(req(false)).await.expect("served");
    assert_eq!(live_res.status(), StatusCode::OK);
    drop(held);
    let res = waiting
        .await
        .expect("joined")
        .expect("served after a release");
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(limiter.stats().success, 2);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test]
async fn client_class_by_reports_a_closed_limiter() {
    let limiter = Limiter::new();
    let svc = AdaptiveConcurrencyClientLayer::new(limiter.clone())
        .class_by(|_| Class::default())
        .layer(service_fn(|_req: Request<String>| async {
            Ok::<_, std::io::Error>(())
        }));
    limiter.close();
    let e = svc.oneshot(req(false)).await.expect_err("closed");
    assert!(e.is::<adaptx_tower::LimiterClosed>(), "{e}");
}

#[test]
fn classed_client_types_are_send() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    type Fut = std::future::Ready<Result<Response<String>, std::io::Error>>;
    type Svc = tower::util::ServiceFn<fn(Request<String>) -> Fut>;
    send_sync::<AdaptiveConcurrencyClassedClient<Svc, ResultClassifier>>();
    send::<ClassedResponseFuture<Svc, Request<String>, ResultClassifier>>();
}
