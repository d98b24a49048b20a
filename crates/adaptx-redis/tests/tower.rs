//! The tower layer over the fleet: adaptx-tower's `AdaptiveRateLimitLayer`
//! with a `FleetRateLimiter` as its source.
#![cfg(feature = "tower")]
#![allow(clippy::unwrap_used)]

mod common;

use std::convert::Infallible;
use std::time::Duration;

use adaptx_tower::{Answered, X_RATELIMIT_LIMIT, X_RATELIMIT_REMAINING};
use common::server::RedisServer;
use common::{fixed, wait_for};
use http::{Request, Response, StatusCode, header};
use tower::{ServiceBuilder, ServiceExt, service_fn};

/// Admitted requests get the fleet's rate in `X-RateLimit-Limit`; once the
/// lease and its credit are spent on an empty fleet bucket, the layer
/// answers 429 with `Retry-After` and its mark; the handler's 503s reach
/// the fleet's feedback as failures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_layer_answers_429_with_headers() {
    let server = RedisServer::start();
    let limiter = fixed(&server.url(), "tower", "t0", 1).build().unwrap();
    let svc = ServiceBuilder::new()
        .layer(limiter.layer())
        .service(service_fn(|_req: Request<()>| async {
            let mut res = Response::new(());
            *res.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            Ok::<_, Infallible>(res)
        }));
    // The first request is admitted on credit while the first lease is on
    // its way (the fleet's bucket starts empty).
    let res = svc.clone().oneshot(Request::new(())).await.unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(res.headers()[X_RATELIMIT_LIMIT], "1");
    assert_eq!(res.headers()[X_RATELIMIT_REMAINING], "0");
    let res = svc.clone().oneshot(Request::new(())).await.unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(res.headers()[header::RETRY_AFTER], "1");
    assert_eq!(res.headers()[X_RATELIMIT_LIMIT], "1");
    assert_eq!(Answered::of(&res), Some(Answered::RateShed));
    let s = limiter.stats();
    assert_eq!((s.admitted, s.rejected, s.failures), (1, 1, 1), "{s:?}");
    // The failure is reported to the fleet.
    assert!(wait_for(Duration::from_secs(2), || limiter.stats().leases >= 1).await);
}
