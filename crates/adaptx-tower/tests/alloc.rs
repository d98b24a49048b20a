//! What the layers allocate per request, counted on the test's own thread
//! (`allocation_counter` replaces the global allocator in this test binary;
//! other tests' threads do not disturb a count).

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{SystemTime, UNIX_EPOCH};

use adaptx::{Limiter, ManualClock, RateLimiter};
use adaptx_tower::{AdaptiveConcurrencyLayer, AdaptiveRateLimitLayer};
use http::{Request, Response, StatusCode};
use tower::{Layer, Service, service_fn};

/// The allocations this thread makes while running `f`, and its result.
fn allocations<T>(f: impl FnOnce() -> T) -> (u64, T) {
    let mut out = None;
    let info = allocation_counter::measure(|| out = Some(f()));
    (info.count_total, out.expect("ran"))
}

/// Polls `f` once with a no-op waker; every future here is ready at once.
fn poll_now<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("not ready at once"),
    }
}

type Req = Request<()>;
type Res = Response<()>;

/// A service that answers at once, with room for a few headers in its
/// response (as a real one has: its header map is already allocated for
/// `content-type` and the like), so that only the values a layer makes
/// count.
fn answer()
-> impl Service<Req, Response = Res, Error = Infallible, Future = Ready<Result<Res, Infallible>>> + Clone
{
    service_fn(|_req: Req| {
        let mut res = Response::new(());
        *res.headers_mut() = http::HeaderMap::with_capacity(8);
        ready(Ok::<_, Infallible>(res))
    })
}

/// One request through `svc`: `poll_ready`, `call`, the response.
fn request<S>(svc: &mut S) -> Res
where
    S: Service<Req, Response = Res, Error = Infallible>,
{
    poll_now(std::future::poll_fn(|cx| svc.poll_ready(cx))).expect("ready");
    poll_now(svc.call(Request::new(()))).expect("infallible")
}

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
}

/// The allocations of one request through `on` minus those through `off`,
/// each after a warm-up request; measured again if the Unix second (the
/// `X-RateLimit-Reset` value) changed meanwhile, since a new second is
/// formatted once per thread.
fn extra_allocations<S>(on: &mut S, off: &mut S, expect: StatusCode) -> u64
where
    S: Service<Req, Response = Res, Error = Infallible>,
{
    for _ in 0..5 {
        let second = unix_secs();
        let (_, warm) = allocations(|| request(on));
        let (with, res) = allocations(|| request(on));
        let (_, _) = allocations(|| request(off));
        let (without, bare) = allocations(|| request(off));
        if unix_secs() != second {
            continue;
        }
        assert_eq!(
            (warm.status(), res.status(), bare.status()),
            (expect, expect, expect)
        );
        assert!(res.headers().contains_key("x-ratelimit-limit"), "{res:?}");
        assert!(
            !bare.headers().contains_key("x-ratelimit-limit"),
            "{bare:?}"
        );
        return with.saturating_sub(without);
    }
    panic!("the Unix second changed during five measurements in a row");
}

/// A rate limiter at 100/s, in the header table, on a manual clock (a
/// burst of 1000 tokens, so it never runs dry in these tests).
fn rate_limiter_in_table() -> RateLimiter {
    RateLimiter::builder()
        .initial_rate(100)
        .burst(1000)
        .clock(ManualClock::new())
        .build()
        .expect("valid configuration")
}

#[test]
fn rate_headers_allocate_nothing_on_admission() {
    let layer = |headers| AdaptiveRateLimitLayer::new(rate_limiter_in_table()).headers(headers);
    let mut on = layer(true).layer(answer());
    let mut off = layer(false).layer(answer());
    assert_eq!(extra_allocations(&mut on, &mut off, StatusCode::OK), 0);
}

#[test]
fn rate_headers_allocate_nothing_on_rejection() {
    let empty = || {
        let rate = RateLimiter::builder()
            .initial_rate(1)
            .min_rate(1)
            .burst(1)
            .clock(ManualClock::new())
            .build()
            .expect("valid configuration");
        assert!(rate.try_acquire().is_ok(), "the only token");
        rate
    };
    let mut on = AdaptiveRateLimitLayer::new(empty()).layer(answer());
    let mut off = AdaptiveRateLimitLayer::new(empty())
        .headers(false)
        .layer(answer());
    let extra = extra_allocations(&mut on, &mut off, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(extra, 0);
    assert_eq!(request(&mut on).headers()["retry-after"], "1");
}

#[test]
fn rate_headers_above_the_table_allocate_nothing_when_repeated() {
    // 10^9/s: the limit is above the table, and repeats from one request
    // to the next (as the Unix second of the reset does).
    let huge = || {
        RateLimiter::builder()
            .initial_rate(1_000_000_000)
            .max_rate(1_000_000_000)
            .burst(1000)
            .clock(ManualClock::new())
            .build()
            .expect("valid configuration")
    };
    let mut on = AdaptiveRateLimitLayer::new(huge()).layer(answer());
    let mut off = AdaptiveRateLimitLayer::new(huge())
        .headers(false)
        .layer(answer());
    assert_eq!(extra_allocations(&mut on, &mut off, StatusCode::OK), 0);
    let res = request(&mut on);
    assert_eq!(res.headers()["x-ratelimit-limit"], "1000000000");
}

#[test]
fn concurrency_service_allocates_nothing_on_admission() {
    let limiter = Limiter::builder()
        .initial_limit(10)
        .clock(ManualClock::new())
        .build()
        .expect("valid configuration");
    let mut bare = answer();
    let mut layered = AdaptiveConcurrencyLayer::server(limiter.clone()).layer(answer());
    request(&mut layered); // warm-up
    let (with, res) = allocations(|| request(&mut layered));
    let (without, _) = allocations(|| request(&mut bare));
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(with, without);
    assert_eq!(limiter.stats().success, 2);
}

#[test]
fn concurrency_rejection_formats_no_retry_after() {
    let full = || {
        let limiter = Limiter::builder()
            .initial_limit(1)
            .clock(ManualClock::new())
            .build()
            .expect("valid configuration");
        std::mem::forget(limiter.try_acquire_owned().expect("the only permit"));
        limiter
    };
    let mut with = AdaptiveConcurrencyLayer::server(full())
        .retry_after(3)
        .layer(answer());
    let mut without = AdaptiveConcurrencyLayer::server(full())
        .no_retry_after()
        .layer(answer());
    request(&mut with);
    request(&mut without);
    let (a, res) = allocations(|| request(&mut with));
    let (b, _) = allocations(|| request(&mut without));
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(res.headers()["retry-after"], "3");
    // Only the header map's own storage, which the response without the
    // header does not need.
    let map_storage = {
        let (n, _) = allocations(|| {
            let mut map = http::HeaderMap::new();
            map.insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static("3"),
            );
            map
        });
        n
    };
    assert_eq!(a, b + map_storage);
}

#[test]
fn the_allocator_counts() {
    let (n, v) = allocations(|| vec![1u8; 16]);
    assert_eq!((n, v.len()), (1, 16));
    let (n, _) = allocations(|| http::HeaderValue::from(123_456_u64));
    assert!(n >= 1, "{n}");
}
