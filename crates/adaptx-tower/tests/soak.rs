//! A soak test: both layers on real loopback HTTP under sustained load.
//!
//! An axum server on 127.0.0.1:0 behind `AdaptiveRateLimitLayer` (keyed by
//! client IP, a rate high enough to bind little, free to move from 10/s to
//! 20 000/s) and
//! `AdaptiveConcurrencyLayer::server` (Gradient, 50 ms windows), driven by
//! 64 concurrent connections: warm-ups of 2 000 and 14 000 requests, then
//! 20 000 in two equal halves, the handler 5 ms in the first and 25 ms in
//! the second. Every tenth request is abandoned mid-flight (it asks the
//! handler for 1 s and gives up after 20 ms, so reqwest drops the
//! connection).
//!
//! Checked: no permit leaks (in-flight returns to 0 and the counters add
//! up), nothing but 200, 429 and 503 (each rejection with `Retry-After`),
//! the concurrency layer's 503s never cutting the rate,
//! resident memory flat across the run, and the limit backing off when the
//! handler slows down. About 10-15 s in a debug build on 2 cores.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use adaptx::{Algorithm, Limiter, RateLimiter};
use adaptx_tower::{AdaptiveConcurrencyLayer, AdaptiveRateLimitLayer, ClientIp};
use axum::Router;
use axum::extract::State;
use axum::routing::get;
use tokio::time::Instant;

const CONNECTIONS: usize = 64;
const MIN_LIMIT: usize = 2;
const WARMUP: u64 = 2_000;
/// RSS keeps rising after the first warm-up (measured: about +15 % over
/// the next 10 000 requests, then a slow creep of a few % per 20 000 that
/// levels off, allocator fragmentation from the connection churn), so the
/// baseline is taken after a second, longer one.
const SECOND_WARMUP: u64 = 14_000;
const HALF: u64 = 10_000;
const FAST_MS: u64 = 5;
const SLOW_MS: u64 = 25;
/// What an abandoned request asks the handler for, and how long the client
/// waits for it.
const ABANDON_HANDLER_MS: u64 = 1_000;
const ABANDON_AFTER: Duration = Duration::from_millis(20);

/// The backend the test steers.
#[derive(Default)]
struct Backend {
    delay_ms: AtomicU64,
    current: AtomicUsize,
}

/// Keeps `current` right even when hyper drops the handler mid-flight.
struct InFlight<'a>(&'a Backend);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.current.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn handler(State(b): State<Arc<Backend>>, uri: axum::http::Uri) -> &'static str {
    b.current.fetch_add(1, Ordering::SeqCst);
    let _guard = InFlight(&b);
    let ms = uri
        .query()
        .and_then(|q| q.strip_prefix("ms="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| b.delay_ms.load(Ordering::SeqCst));
    tokio::time::sleep(Duration::from_millis(ms)).await;
    "ok"
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

/// The resident set size of this process, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    ok: u64,
    too_many: u64,
    unavailable: u64,
    abandoned: u64,
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, o: Self) {
        self.ok += o.ok;
        self.too_many += o.too_many;
        self.unavailable += o.unavailable;
        self.abandoned += o.abandoned;
    }
}

impl Tally {
    fn total(&self) -> u64 {
        self.ok + self.too_many + self.unavailable + self.abandoned
    }
}

/// `CONNECTIONS` tasks share `total` requests; every tenth is abandoned.
async fn load(client: &reqwest::Client, url: &str, total: u64) -> Tally {
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..CONNECTIONS {
        let (client, url, next) = (client.clone(), url.to_owned(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut t = Tally::default();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    break t;
                }
                let req = if i % 10 == 0 {
                    client
                        .get(format!("{url}?ms={ABANDON_HANDLER_MS}"))
                        .timeout(ABANDON_AFTER)
                } else {
                    client.get(&url)
                };
                let res = match req.send().await {
                    Ok(res) => res,
                    Err(e) => {
                        assert!(e.is_timeout() && i % 10 == 0, "request {i}: {e}");
                        t.abandoned += 1;
                        continue;
                    }
                };
                let status = res.status().as_u16();
                let h = res.headers();
                match status {
                    200 => t.ok += 1,
                    429 | 503 => {
                        let retry = h
                            .get("retry-after")
                            .unwrap_or_else(|| panic!("{status} without Retry-After"))
                            .to_str()
                            .expect("ascii")
                            .parse::<u64>()
                            .expect("whole seconds");
                        assert!(retry >= 1, "{status} Retry-After {retry}");
                        if status == 429 {
                            assert_eq!(h["x-ratelimit-remaining"], "0");
                            t.too_many += 1;
                        } else {
                            assert_eq!(retry, 1);
                            t.unavailable += 1;
                        }
                    }
                    s => panic!("unexpected status {s} for request {i}"),
                }
                // Read the body so the connection goes back to the pool (an
                // abandoning request's timeout may cut even a short one).
                match res.bytes().await {
                    Ok(body) if status == 200 => assert_eq!(&body[..], b"ok"),
                    Ok(_) => {}
                    Err(e) => assert!(e.is_timeout() && i % 10 == 0, "request {i}: {e}"),
                }
                if status != 200 {
                    // A well-behaved client backs off a little.
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
        }));
    }
    let mut tally = Tally::default();
    for t in tasks {
        tally += t.await.expect("worker");
    }
    assert_eq!(tally.total(), total);
    tally
}

/// The limit over a phase, sampled every 5 ms.
#[derive(Debug, Clone, Copy)]
struct LimitTrace {
    min: usize,
    max: usize,
    mean: f64,
}

fn sample_limit(limiter: Limiter, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<LimitTrace> {
    tokio::spawn(async move {
        let (mut min, mut max, mut sum, mut n) = (usize::MAX, 0, 0u64, 0u64);
        while !stop.load(Ordering::SeqCst) {
            let l = limiter.limit();
            min = min.min(l);
            max = max.max(l);
            sum += l as u64;
            n += 1;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        LimitTrace {
            min,
            max,
            mean: sum as f64 / n.max(1) as f64,
        }
    })
}

async fn phase(
    client: &reqwest::Client,
    url: &str,
    limiter: &Limiter,
    total: u64,
) -> (Tally, LimitTrace) {
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample_limit(limiter.clone(), stop.clone());
    let tally = load(client, url, total).await;
    stop.store(true, Ordering::SeqCst);
    (tally, sampler.await.expect("sampler"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn soak_both_layers_under_load_with_aborts_and_a_slowdown() {
    let started = Instant::now();
    let backend = Arc::new(Backend::default());
    backend.delay_ms.store(FAST_MS, Ordering::SeqCst);
    let limiter = Limiter::builder()
        .algorithm(Algorithm::Gradient)
        // A wide band so scheduling noise on the wall clock does not move it;
        // the 5x slowdown is far outside it.
        .tolerance(0.5)
        .initial_limit(16)
        .min_limit(MIN_LIMIT)
        .max_limit(48)
        .sample_window(Duration::from_millis(50))
        .warmup_samples(0)
        .jitter(0.0)
        .build()
        .expect("valid");
    // Realistic bounds: the rate may roam from 10/s to 20 000/s. The
    // concurrency layer's 503s are its own answers, which the rate layer
    // skips, and the handler never fails or comes near the 100 ms latency
    // target, so the rate has no reason to fall (it starts above what this
    // load reaches in a debug build, about 2 500-4 000 requests/s on 2
    // cores, so 429s are rare). Were the 503s taken for the backend's, the
    // rate would be cut by a fifth per 100 ms interval.
    let rate = RateLimiter::builder()
        .initial_rate(10_000)
        .min_rate(10)
        .max_rate(20_000)
        .adjust_interval(Duration::from_millis(100))
        // Wall-clock latency on a loaded machine may pass any target; with
        // this one only errors can cut the rate, which is what is checked.
        // The cut on latency is tested on paused time in `paused_laws.rs`.
        .target_latency(Duration::from_secs(60))
        .build_keyed()
        .expect("valid");
    let app = Router::new()
        .route("/", get(handler))
        .with_state(backend.clone())
        .layer(AdaptiveConcurrencyLayer::server(limiter.clone()))
        .layer(AdaptiveRateLimitLayer::keyed(rate.clone(), ClientIp));
    let url = serve(app).await;
    let client = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(CONNECTIONS)
        .build()
        .expect("client");

    // Warm-up: the same mix as the run, to grow the pool, the allocator's
    // arenas and the runtime's buffers to their working size.
    let t = Instant::now();
    let (mut warm, _) = phase(&client, &url, &limiter, WARMUP).await;
    let rss_first_warm = rss_kib();
    let (warm2, _) = phase(&client, &url, &limiter, SECOND_WARMUP).await;
    warm += warm2;
    let rss_warm = rss_kib();
    let warm_wall = t.elapsed();

    let t = Instant::now();
    let (fast, fast_limit) = phase(&client, &url, &limiter, HALF).await;
    let fast_wall = t.elapsed();
    let rss_half = rss_kib();
    let before = limiter.limit();
    let decreases_before = limiter.stats().decreases;

    backend.delay_ms.store(SLOW_MS, Ordering::SeqCst);
    let t = Instant::now();
    let (slow, slow_limit) = phase(&client, &url, &limiter, HALF).await;
    let slow_wall = t.elapsed();
    let after = limiter.limit();

    // Settle: abandoned requests' handlers are dropped when hyper sees the
    // connection close (or, at the latest, finish their 1 s sleep).
    let deadline = Instant::now() + Duration::from_secs(3);
    while (limiter.in_flight() > 0 || backend.current.load(Ordering::SeqCst) > 0)
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let rss_end = rss_kib();
    let wall = started.elapsed();

    let mut all = warm;
    all += fast;
    all += slow;
    let main_ok = fast.ok + slow.ok;
    let main_429 = fast.too_many + slow.too_many;
    let main_503 = fast.unavailable + slow.unavailable;
    let main_abandoned = fast.abandoned + slow.abandoned;
    let s = limiter.stats();
    println!(
        "soak: {} requests (+{WARMUP}+{SECOND_WARMUP} warm-up) ok {main_ok} 429 {main_429} 503 {main_503} \
         abandoned {main_abandoned} (server saw {} dropped; ok {}/{} per half); limit at {FAST_MS} ms \
         mean {:.1} [{}..{}] end {before} -> at {SLOW_MS} ms mean {:.1} [{}..{}] end {after} \
         (decreases {} -> {}); rate {}/s; RSS KiB warm-ups {rss_first_warm}/{rss_warm} half {rss_half} end {rss_end}; \
         wall {:.2?} (warm-up {:.2?}, fast {:.2?}, slow {:.2?})",
        2 * HALF,
        s.dropped,
        fast.ok,
        slow.ok,
        fast_limit.mean,
        fast_limit.min,
        fast_limit.max,
        slow_limit.mean,
        slow_limit.min,
        slow_limit.max,
        decreases_before,
        s.decreases,
        rate.current_rate(),
        wall,
        warm_wall,
        fast_wall,
        slow_wall,
    );

    // The concurrency layer's 503s are no feedback for the rate limiter
    // outside it: no failure, no cut.
    let r = rate.stats();
    assert_eq!(r.failures, 0, "{r:?}");
    assert_eq!(r.decreases, 0, "{r:?}");
    assert!(r.dropped >= all.unavailable, "{r:?} {all:?}");

    // No leaked permit: everything admitted was recorded or dropped.
    assert_eq!(limiter.in_flight(), 0, "{s:?}");
    assert_eq!(backend.current.load(Ordering::SeqCst), 0);
    assert_eq!(s.in_flight, 0, "{s:?}");
    // The handler never fails, every 200 the client got is a recorded
    // success and every 503 a rejection (the rate layer is outside, so its
    // 429s never reach the concurrency limiter).
    assert_eq!(s.failures, 0, "{s:?}");
    assert_eq!(s.success, all.ok, "{s:?} {all:?}");
    // An abandoning request can be rejected after its client gave up.
    assert!(
        s.rejected >= all.unavailable && s.rejected <= all.unavailable + all.abandoned,
        "{s:?} {all:?}"
    );
    // Abandoned requests that reached the handler were dropped, not
    // recorded; some always do (a 1 s handler against a 20 ms timeout).
    assert!(s.dropped > 0 && s.dropped <= all.abandoned, "{s:?} {all:?}");
    // Both halves served requests. (Alone on 2 cores about 80 % of the fast
    // half is a 200; with the slow handler the limiter sheds most requests,
    // 64 connections against a limit of a few. With another copy running,
    // scheduling noise can push the limit down in the fast half as well:
    // one such run served only 34 % of it.)
    assert!(fast.ok >= HALF / 10, "fast half {fast:?}");
    assert!(slow.ok > 0, "slow half {slow:?}");

    // Memory flat: after 20 000 requests within 10 % of after the warm-ups.
    assert!(
        rss_end * 10 <= rss_warm * 11,
        "RSS grew from {rss_warm} KiB to {rss_end} KiB"
    );

    // The limit tracks the slowdown: a 5x latency rise (g = 4 against the
    // fast phase's average; the tolerance is 0.5) cuts it at least once. How
    // far is printed, not compared: on the wall clock of a loaded machine
    // (load 8-10 on 2 cores) the fast half's latency is inflated by
    // scheduling, and the depth of the cut with it (alone: 48 -> 2..8; under
    // load: 48 -> 18, and once not a quarter off). Gradient's response to a
    // latency rise is pinned on a manual clock in adaptx's law tests, and
    // behind the layer on paused time in `paused_laws.rs`. A
    // limiter that ignored latency would never decrease (no failure ever
    // happens) and fail this.
    //
    // The means over the halves are printed, not compared: on a loaded
    // machine the fast half can dip to the floor early and recover late, so
    // its mean can end up below the slow half's.
    assert!(
        before == MIN_LIMIT || s.decreases > decreases_before,
        "the slowdown decreased the limit from {before}: {s:?}"
    );
}
