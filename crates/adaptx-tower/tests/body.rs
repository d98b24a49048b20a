//! `record_at_body_end`: the server-side permit held until the response body
//! has been sent.

use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use adaptx::{Limiter, ManualClock};
use adaptx_tower::{
    AdaptiveConcurrencyAtBodyEnd, AdaptiveConcurrencyAtBodyEndLayer, AdaptiveConcurrencyLayer,
    BodyResponseFuture, HttpClassifier, PermitBody,
};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use tokio::sync::mpsc;
use tower::{Layer, Service, ServiceExt, service_fn};

/// A response body fed by the test through a channel; ends when the sender
/// is dropped.
struct ChanBody(mpsc::UnboundedReceiver<Result<Bytes, io::Error>>);

impl Default for ChanBody {
    fn default() -> Self {
        Self(mpsc::unbounded_channel().1)
    }
}

impl Body for ChanBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        self.0.poll_recv(cx).map(|r| r.map(|r| r.map(Frame::data)))
    }
}

type Tx = mpsc::UnboundedSender<Result<Bytes, io::Error>>;

fn limiter(n: usize, clock: &ManualClock) -> Limiter {
    Limiter::builder()
        .initial_limit(n)
        .min_limit(1)
        .max_limit(n)
        .clock(clock.clone())
        .build()
        .expect("valid limiter")
}

/// A service whose responses stream from a channel; it hands each body's
/// sender to the test, which feeds and ends the body.
#[derive(Clone)]
struct Streaming {
    status: StatusCode,
    senders: mpsc::UnboundedSender<Tx>,
}

impl Service<Request<()>> for Streaming {
    type Response = Response<ChanBody>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<ChanBody>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _req: Request<()>) -> Self::Future {
        let (tx, rx) = mpsc::unbounded_channel();
        self.senders.send(tx).expect("test alive");
        let res = Response::builder()
            .status(self.status)
            .body(ChanBody(rx))
            .expect("response");
        std::future::ready(Ok(res))
    }
}

fn streaming(
    limiter: &Limiter,
    status: StatusCode,
) -> (
    AdaptiveConcurrencyAtBodyEnd<Streaming, HttpClassifier>,
    mpsc::UnboundedReceiver<Tx>,
) {
    let (senders, rx) = mpsc::unbounded_channel();
    let layer = AdaptiveConcurrencyLayer::server(limiter.clone()).record_at_body_end();
    (layer.layer(Streaming { status, senders }), rx)
}

#[test]
fn bounds() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    type Fut = std::future::Ready<Result<Response<String>, Infallible>>;
    type Svc = tower::util::ServiceFn<fn(Request<String>) -> Fut>;
    send_sync::<AdaptiveConcurrencyAtBodyEndLayer>();
    send_sync::<AdaptiveConcurrencyAtBodyEnd<Svc, HttpClassifier>>();
    send::<BodyResponseFuture<Svc, Request<String>, HttpClassifier>>();
    send_sync::<PermitBody<String>>();
}

#[tokio::test(start_paused = true)]
async fn permit_is_held_until_the_body_ends_and_latency_runs_to_it() {
    let clock = ManualClock::new();
    let limiter = limiter(1, &clock);
    let (svc, mut senders) = streaming(&limiter, StatusCode::OK);

    let res = svc.oneshot(Request::new(())).await.expect("infallible");
    let tx = senders.recv().await.expect("sender");
    assert_eq!(res.status(), StatusCode::OK);
    let mut body = res.into_body();
    // The head is out; the body is not: the request still holds its permit.
    assert!(body.holds_permit());
    assert_eq!(limiter.in_flight(), 1);
    assert_eq!(limiter.available(), 0);

    clock.advance(Duration::from_millis(40));
    tx.send(Ok(Bytes::from_static(b"a"))).expect("send");
    let frame = body.frame().await.expect("frame").expect("ok");
    assert_eq!(frame.into_data().expect("data"), "a");
    assert_eq!(limiter.in_flight(), 1);

    clock.advance(Duration::from_millis(60));
    tx.send(Ok(Bytes::from_static(b"b"))).expect("send");
    drop(tx);
    let rest = body.collect().await.expect("ok").to_bytes();
    assert_eq!(rest, "b");

    let s = limiter.stats();
    assert_eq!(
        (s.in_flight, s.success, s.failures, s.dropped),
        (0, 1, 0, 0)
    );
    let want = Duration::from_millis(100).as_secs_f64();
    let got = s.max_latency.as_secs_f64();
    assert!(
        (got - want).abs() <= want * 0.01,
        "latency {got} s, want {want} s"
    );
}

#[tokio::test(start_paused = true)]
async fn head_verdict_is_recorded_at_the_body_end() {
    let clock = ManualClock::new();
    let limiter = limiter(2, &clock);
    let (svc, mut senders) = streaming(&limiter, StatusCode::SERVICE_UNAVAILABLE);
    let res = svc.oneshot(Request::new(())).await.expect("infallible");
    drop(senders.recv().await.expect("sender"));
    assert_eq!(limiter.stats().failures, 0);
    res.into_body().collect().await.expect("ok");
    let s = limiter.stats();
    assert_eq!((s.in_flight, s.success, s.failures), (0, 0, 1));
}

#[tokio::test(start_paused = true)]
async fn body_error_records_a_failure() {
    let clock = ManualClock::new();
    let limiter = limiter(2, &clock);
    let (svc, mut senders) = streaming(&limiter, StatusCode::OK);
    let res = svc.oneshot(Request::new(())).await.expect("infallible");
    let tx = senders.recv().await.expect("sender");
    tx.send(Ok(Bytes::from_static(b"part"))).expect("send");
    tx.send(Err(io::Error::other("backend reset")))
        .expect("send");
    let err = res.into_body().collect().await.expect_err("body error");
    assert_eq!(err.to_string(), "backend reset");
    let s = limiter.stats();
    assert_eq!(
        (s.in_flight, s.success, s.failures, s.dropped),
        (0, 0, 1, 0)
    );
}

#[tokio::test(start_paused = true)]
async fn body_dropped_midway_releases_the_permit_as_dropped() {
    let clock = ManualClock::new();
    let limiter = limiter(1, &clock);
    let (svc, mut senders) = streaming(&limiter, StatusCode::OK);
    let res = svc
        .clone()
        .oneshot(Request::new(()))
        .await
        .expect("infallible");
    let tx = senders.recv().await.expect("sender");
    let mut body = res.into_body();
    tx.send(Ok(Bytes::from_static(b"a"))).expect("send");
    body.frame().await.expect("frame").expect("ok");

    // While the body streams, the limiter is full: the next request is shed.
    let rejected = svc
        .clone()
        .oneshot(Request::new(()))
        .await
        .expect("infallible");
    assert_eq!(rejected.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(rejected.headers()["retry-after"], "1");
    assert!(!rejected.body().holds_permit());

    // The client goes away mid-body.
    drop(body);
    let s = limiter.stats();
    assert_eq!(
        (s.in_flight, s.success, s.dropped, s.rejected),
        (0, 0, 1, 1),
        "{s:?}"
    );
    assert_eq!(limiter.available(), 1);
}

#[tokio::test(start_paused = true)]
async fn empty_body_records_at_once() {
    let clock = ManualClock::new();
    let limiter = limiter(1, &clock);
    let svc = AdaptiveConcurrencyLayer::server(limiter.clone())
        .record_at_body_end()
        .layer(service_fn(|_req: Request<()>| async {
            Ok::<_, Infallible>(Response::new(String::new()))
        }));
    let res = svc.oneshot(Request::new(())).await.expect("infallible");
    // A server never polls a body that is already at its end.
    assert!(res.body().is_end_stream());
    assert!(!res.body().holds_permit());
    let s = limiter.stats();
    assert_eq!((s.in_flight, s.success), (0, 1));
}

#[tokio::test(start_paused = true)]
async fn works_as_an_axum_router_layer() {
    use axum::{Router, body::Body as AxumBody, routing::get};

    let clock = ManualClock::new();
    let limiter = limiter(4, &clock);
    let layer = AdaptiveConcurrencyLayer::server(limiter.clone()).record_at_body_end();
    let (tx, rx) = mpsc::unbounded_channel::<Result<Bytes, io::Error>>();
    let rx = std::sync::Arc::new(std::sync::Mutex::new(Some(rx)));
    let app = Router::new()
        .route("/", get(|| async { "hi" }))
        .route(
            "/stream",
            get(move || {
                let rx = rx.lock().expect("lock").take().expect("one call");
                async move { AxumBody::new(ChanBody(rx)) }
            }),
        )
        .layer(layer);

    let res = app
        .clone()
        .oneshot(Request::get("/").body(AxumBody::empty()).expect("request"))
        .await
        .expect("infallible");
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        res.into_body().collect().await.expect("ok").to_bytes(),
        "hi"
    );
    assert_eq!(limiter.stats().success, 1);

    let res = app
        .oneshot(
            Request::get("/stream")
                .body(AxumBody::empty())
                .expect("request"),
        )
        .await
        .expect("infallible");
    assert_eq!(limiter.in_flight(), 1);
    tx.send(Ok(Bytes::from_static(b"chunk"))).expect("send");
    drop(tx);
    clock.advance(Duration::from_millis(10));
    assert_eq!(
        res.into_body().collect().await.expect("ok").to_bytes(),
        "chunk"
    );
    let s = limiter.stats();
    assert_eq!((s.in_flight, s.success), (0, 2));
}
