//! `AdaptiveThrottleLayer`: a client that sheds its own requests once the
//! backend refuses many, counting answers by the classifier's verdicts.
#![allow(clippy::unwrap_used)]

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use adaptx::{ManualClock, Throttle, Throttled};
use adaptx_tower::{AdaptiveThrottleLayer, HttpClassifier, Verdict};
use http::{Request, Response, StatusCode};
use tower::{Layer, Service, ServiceExt, service_fn};

fn throttle() -> Arc<Throttle> {
    Arc::new(
        Throttle::builder()
            .clock(ManualClock::new())
            .seed(4)
            .build()
            .unwrap(),
    )
}

/// A backend answering every request with `status`, counting the requests
/// that reach it.
fn backend(
    status: StatusCode,
    reached: Arc<AtomicU64>,
) -> impl Service<Request<()>, Response = Response<()>, Error = Infallible> + Clone {
    service_fn(move |_req: Request<()>| {
        reached.fetch_add(1, Ordering::Relaxed);
        let res = Response::builder().status(status).body(()).unwrap();
        async move { Ok::<_, Infallible>(res) }
    })
}

/// Sends `n` requests; returns how many came back `Throttled`.
async fn send<S>(svc: &mut S, n: u64) -> u64
where
    S: Service<Request<()>, Error = adaptx_tower::BoxError>,
{
    let mut throttled = 0;
    for _ in 0..n {
        let r = svc.ready().await.unwrap().call(Request::new(())).await;
        if let Err(e) = r {
            assert!(e.downcast_ref::<Throttled>().is_some(), "{e}");
            throttled += 1;
        }
    }
    throttled
}

#[tokio::test]
async fn throttle_layer_sheds_locally_when_the_backend_refuses_everything() {
    let t = throttle();
    let reached = Arc::new(AtomicU64::new(0));
    let mut svc = AdaptiveThrottleLayer::new(Arc::clone(&t))
        .classifier(HttpClassifier::new())
        .layer(backend(
            StatusCode::SERVICE_UNAVAILABLE,
            Arc::clone(&reached),
        ));
    let throttled = send(&mut svc, 2_000).await;
    let reached = reached.load(Ordering::Relaxed);
    assert_eq!(throttled + reached, 2_000);
    // Σ 1/(n + 1) over 2000 requests ≈ 8.2 probes reach the backend.
    assert!((2..=30).contains(&reached), "{reached} reached the backend");
    let s = t.stats();
    assert_eq!((s.requests, s.accepts), (2_000, 0));
}

/// Server errors other than overload (500) mean the backend took the
/// request: accepted, never throttled; 503 is a refusal.
#[tokio::test]
async fn throttle_layer_counts_a_500_as_accepted_and_a_503_as_refused() {
    let t = throttle();
    let reached = Arc::new(AtomicU64::new(0));
    let mut svc = AdaptiveThrottleLayer::new(Arc::clone(&t))
        .classifier(HttpClassifier::new())
        .layer(backend(StatusCode::INTERNAL_SERVER_ERROR, reached));
    assert_eq!(send(&mut svc, 500).await, 0);
    assert_eq!((t.stats().requests, t.stats().accepts), (500, 500));
}

/// The default classifier (`ResultClassifier`): an inner error is a
/// refusal, and is passed through boxed.
#[tokio::test]
async fn throttle_layer_default_counts_errors_as_refusals() {
    let t = throttle();
    let mut svc =
        AdaptiveThrottleLayer::new(Arc::clone(&t)).layer(service_fn(|_: Request<()>| async {
            Err::<Response<()>, _>(std::io::Error::other("connection refused"))
        }));
    let e = svc
        .ready()
        .await
        .unwrap()
        .call(Request::new(()))
        .await
        .unwrap_err();
    assert_eq!(e.to_string(), "connection refused");
    assert_eq!((t.stats().requests, t.stats().accepts), (1, 0));
}

/// A `Skip` verdict says nothing about capacity: not counted.
#[tokio::test]
async fn throttle_layer_skip_verdict_is_not_counted() {
    let t = throttle();
    let reached = Arc::new(AtomicU64::new(0));
    let skip = |_: Result<&Response<()>, &Infallible>| Verdict::Skip;
    let mut svc = AdaptiveThrottleLayer::new(Arc::clone(&t))
        .classifier(skip)
        .layer(backend(StatusCode::SERVICE_UNAVAILABLE, reached));
    assert_eq!(send(&mut svc, 100).await, 0);
    assert_eq!(t.stats().requests, 0);
}
