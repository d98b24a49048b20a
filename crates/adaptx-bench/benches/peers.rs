//! adaptx against its peers, all in one criterion run so the ratios are
//! measured on the same machine state. `scripts/bench-table` parses the
//! group / function names below; keep them in step.
//!
//! * `concurrency_uncontended` / `concurrency_contended_2_threads`: one
//!   permit taken, a success recorded, the permit released —
//!   `adaptx` (`try_acquire` + `success`), `tokio_semaphore_2_instants`
//!   (`try_acquire` + drop + the two `Instant::now()` a caller needs to
//!   measure latency itself) and `congestion_limiter` (its AIMD
//!   `DefaultLimiter`: `try_acquire` + `release(token, Some(Success))`, both
//!   `async_trait` futures polled once with a no-op waker). The contended
//!   variants run on two threads pinned to CPUs 0 and 1 sharing one limiter;
//!   the time is the wall time for both to finish `N` operations, over `N`.
//! * `concurrency_service_uncontended` / `concurrency_service_contended_2_threads`:
//!   `poll_ready` + `call` + the response future polled once (no-op waker)
//!   on a `service_fn` that answers at once — `bare`, wrapped in
//!   `tower_concurrency_limit` (`tower::limit::ConcurrencyLimit`) and in
//!   `adaptx_layer` (`AdaptiveConcurrencyLayer::server`); uncontended, also
//!   `adaptx_limiter_owned`, the limiter's share of `adaptx_layer` (the owned
//!   permit the service takes, recorded as a success), so that `adaptx_layer`
//!   − `bare` − `adaptx_limiter_owned` is the service's own overhead, and
//!   `adaptx_layer_coarse`, the layer with its limiter on a `CoarseClock`.
//! * `rate_1_thread` / `rate_2_threads`: `adaptx` (`RateLimiter::try_acquire`
//!   then `success`, a rate of 10^9/s that never rejects, 24 h adjust
//!   interval) versus `governor` (direct `RateLimiter::check()`, `u32::MAX`
//!   per second); `adaptx_drop` is admission alone (the permit dropped
//!   without an outcome), as close as adaptx gets to governor's work.
//!   `adaptx_coarse` and `governor_upkeep` are the same two on clocks read
//!   with one atomic load, stepped every 100 µs by a thread (adaptx's
//!   `CoarseClock`, governor's `QuantaUpkeepClock`): like for like when
//!   the clock read is taken out of both.
//!
//!   **Why adaptx cannot reach 1.0× on a precise clock.** Primitive costs measured on the
//!   2-vCPU Xeon VM of the README's table (2026-12-01, best of 5 × 5·10⁶,
//!   pinned to CPU 0): a TSC read scaled to ns through quanta 21.2 ns
//!   (`clock_gettime`: 31.1), a load + `lock cmpxchg` 13.1 ns, a
//!   `lock xadd` 9.2 ns, an `Arc` clone + drop 19.6 ns, a single-writer
//!   load + store 0.7 ns, a thread-local access 1.3 ns; governor's `check()`
//!   36.2 ns = one clock read (21.6) + one CAS (13.1) + 1.5. An admission
//!   with a recorded success must read the clock twice — at admission (the
//!   bucket's time, the latency's start) and at completion (the latency's
//!   end: the law's input, measured, not sampled) — and CAS the bucket
//!   once: 2 × 21.2 + 13.1 = 55.5 ns, 1.53× governor before anything
//!   else. adaptx measured 2.25× (README): above that floor, the TSC read's
//!   latency on the dependent chain (the token level, then the CAS, wait
//!   for it); the rest of the work — the token clock's arithmetic, one
//!   thread-local access at admission and one at completion, two interval
//!   checks, the lane counters (plain stores on an owned lane) — is what
//!   `adaptx_coarse` costs in all, 18 ns, 0.5× governor. With two threads
//!   both limiters pay the bucket word's cache line moving between the
//!   CPUs; adaptx's other work runs on each CPU's own lines. The floor is
//!   the clock: `adaptx_coarse` and `governor_upkeep` take it out of both.
//!
//!   **Why the axum rate layer cannot reach 1.5× tower's `ConcurrencyLimitLayer`.**
//!   `headers_only` does, with no limiter and nothing computed, what the rate
//!   layer adds to every admitted request — the `CurrentRate` extension and
//!   three `X-RateLimit-*` headers, their values clones of values made once —
//!   in one service and one future. In the same runs it costs more than
//!   tower's whole layer (`scripts/bench-table`'s last row: 1.64×, range
//!   1.46–1.92, three runs on 2026-12-01). A rate layer adds at least the
//!   limiter's floor above (two clock reads and a CAS, 55.5 ns): about 2.1×
//!   tower in those runs, before any work of its own.
//! * `middleware_axum`: a trivial axum handler called with
//!   `ServiceExt::oneshot` on a clone of the router and a fresh request —
//!   `bare`, `adaptx_concurrency`, `adaptx_rate` (with its default
//!   `X-RateLimit-*` headers), `adaptx_rate_no_headers` (`.headers(false)`),
//!   `adaptx_rate_coarse` (headers on, the limiter on a `CoarseClock`),
//!   `headers_only` (no limiter: what the rate layer adds to a request and
//!   its response — the `CurrentRate` extension and the three headers, with
//!   values made once, by a layer of one service and one future: the least
//!   those features cost with `http`'s types) and
//!   `tower_concurrency_limit`. Overhead = layered − bare. Each router is
//!   finished with `with_state(())` as `axum::serve` does, so its layers
//!   are applied once, not per request. Every future here
//!   is ready at once; they are polled with a no-op waker inside a
//!   current-thread tokio runtime's context rather than through `block_on`,
//!   so the runtime's own cost does not swamp the difference.
//!
//! * `overhead_service_paired` / `overhead_axum_paired`: the same layered
//!   services, each measured *against its bare service in one timing loop*:
//!   blocks of [`PAIR_BLOCK`] calls of the layered service alternate with
//!   blocks of the bare one, and the reported time per call is the
//!   difference — the layer's overhead. The `middleware_axum` rows subtract
//!   two medians measured seconds apart, and this VM's speed drifts by more
//!   than the overheads between them (a bare axum call read 560 and 790 ns
//!   in two runs); paired blocks a few µs long see the same machine, so the
//!   overhead ratios `scripts/bench-table` reports come from here.
//!
//! The window-close step and `stats()` are in `crates/adaptx/benches`.

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{LazyLock, Once};
use std::task::{Context, Poll, Waker, ready};
use std::thread;
use std::time::{Duration, Instant};

use adaptx::{CoarseClock, Limiter, RateLimiter};
use adaptx_tower::{
    AdaptiveConcurrencyLayer, AdaptiveRateLimitLayer, CurrentRate, X_RATELIMIT_LIMIT,
    X_RATELIMIT_REMAINING, X_RATELIMIT_RESET,
};
use axum::Router;
use axum::body::Body;
use axum::routing::get;
use congestion_limiter::limiter::{
    DefaultLimiter, Limiter as CongestionLimiter, Outcome as CongestionOutcome,
};
use congestion_limiter::limits::Aimd;
use criterion::{Criterion, criterion_group, criterion_main};
use governor::clock::QuantaUpkeepClock;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter as Governor};
use http::{HeaderValue, Request, Response};
use pin_project_lite::pin_project;
use tokio::sync::Semaphore;
use tower::limit::{ConcurrencyLimit, ConcurrencyLimitLayer};
use tower::{Layer, Service, ServiceExt, service_fn};

const PERMITS: usize = 1000;
const HUGE_RATE: u64 = 1_000_000_000;

/// initial = max = 1000, no warmup, default (1 s, system clock) windows: the
/// peak in flight stays far below the limit, so AIMD holds it.
fn limiter() -> Limiter {
    Limiter::builder()
        .initial_limit(PERMITS)
        .max_limit(PERMITS)
        .warmup_samples(0)
        .build()
        .expect("valid configuration")
}

/// [`limiter`] on a [`CoarseClock`] stepped every [`COARSE_STEP`].
fn limiter_coarse() -> Limiter {
    Limiter::builder()
        .initial_limit(PERMITS)
        .max_limit(PERMITS)
        .warmup_samples(0)
        .clock(CoarseClock::new(COARSE_STEP).expect("a valid resolution"))
        .build()
        .expect("valid configuration")
}

/// A rate of 10^9/s (burst: one second of it) adjusted once a day: never
/// rejects within a benchmark.
fn rate_limiter() -> RateLimiter {
    RateLimiter::builder()
        .initial_rate(HUGE_RATE)
        .max_rate(HUGE_RATE)
        .adjust_interval(Duration::from_secs(24 * 3600))
        .build()
        .expect("valid configuration")
}

/// congestion-limiter's AIMD with the same limit range; a success at a
/// utilisation of 1/1000 leaves the limit alone (its threshold is 0.8).
fn congestion() -> DefaultLimiter<Aimd> {
    DefaultLimiter::new(Aimd::new(PERMITS, 1..=PERMITS))
}

fn governor() -> governor::DefaultDirectRateLimiter {
    Governor::direct(Quota::per_second(NonZeroU32::MAX))
}

/// The coarse clocks' step.
const COARSE_STEP: Duration = Duration::from_micros(100);

/// [`rate_limiter`] on a [`CoarseClock`] stepped every [`COARSE_STEP`].
fn rate_limiter_coarse() -> RateLimiter {
    RateLimiter::builder()
        .initial_rate(HUGE_RATE)
        .max_rate(HUGE_RATE)
        .adjust_interval(Duration::from_secs(24 * 3600))
        .clock(CoarseClock::new(COARSE_STEP).expect("a valid resolution"))
        .build()
        .expect("valid configuration")
}

type UpkeepGovernor = Governor<NotKeyed, InMemoryState, QuantaUpkeepClock>;

/// [`governor`] on its upkeep clock stepped every [`COARSE_STEP`].
fn governor_upkeep() -> UpkeepGovernor {
    let clock = QuantaUpkeepClock::from_interval(COARSE_STEP).expect("quanta's upkeep thread");
    Governor::direct_with_clock(Quota::per_second(NonZeroU32::MAX), clock)
}

/// Polls `fut` with a no-op waker until it is ready (every future benched
/// here is ready on the first poll).
#[inline]
fn poll_now<F: Future>(fut: F) -> F::Output {
    let mut cx = Context::from_waker(Waker::noop());
    let mut fut = pin!(fut);
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

#[inline]
fn adaptx_success(l: &Limiter) {
    l.try_acquire().expect("a permit is free").success();
}

#[inline]
fn tokio_2_instants(sem: &Semaphore) {
    let t0 = Instant::now();
    let p = sem.try_acquire().expect("a permit is free");
    let t1 = Instant::now();
    black_box(t1 - t0);
    drop(p);
}

#[inline]
fn congestion_success(l: &DefaultLimiter<Aimd>) {
    let token = poll_now(l.try_acquire()).expect("a permit is free");
    black_box(poll_now(l.release(token, Some(CongestionOutcome::Success))));
}

#[inline]
fn adaptx_rate(l: &RateLimiter) {
    l.try_acquire().expect("never rejects").success();
}

/// Admission only: the permit is dropped without an outcome (no second clock
/// read, no completion counters), the closest match to governor's work.
#[inline]
fn adaptx_rate_drop(l: &RateLimiter) {
    drop(l.try_acquire().expect("never rejects"));
}

#[inline]
fn governor_check(l: &governor::DefaultDirectRateLimiter) {
    l.check().expect("never rejects");
}

#[inline]
fn governor_upkeep_check(l: &UpkeepGovernor) {
    l.check().expect("never rejects");
}

/// Pins the calling thread to CPU `cpu`; prints a note once if it cannot.
fn pin_to(cpu: usize) {
    static NOTE: Once = Once::new();
    let pinned = core_affinity::get_core_ids()
        .and_then(|ids| ids.into_iter().find(|c| c.id == cpu))
        .is_some_and(core_affinity::set_for_current);
    if !pinned {
        NOTE.call_once(|| {
            eprintln!("note: could not pin a benchmark thread to CPU {cpu}; running unpinned");
        });
    }
}

/// A start line for two threads that spin rather than park: both leave
/// within a few nanoseconds of each other. (`std::sync::Barrier` parks the
/// first thread to arrive and wakes it tens of microseconds after the
/// second has left: for a short batch the second thread then finishes before
/// the first starts, the two never contend, and the batch measures an
/// uncontended regime — the cause of 2-thread figures 4× apart between runs
/// of the same binary.)
struct SpinStart(AtomicUsize);

impl SpinStart {
    fn new(threads: usize) -> Self {
        Self(AtomicUsize::new(threads))
    }

    fn wait(&self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
        while self.0.load(Ordering::Acquire) != 0 {
            std::hint::spin_loop();
        }
    }
}

/// Runs `op` `iters` times on each of two threads pinned to CPUs 0 and 1,
/// each on its own state from `make` (built before the start), released
/// together by a spinning start line. Returns the wall time from the first
/// thread's start to the last thread's end.
/// Calls per block of a paired measurement: a few µs of calls, long enough
/// that the two clock reads around a block are noise, short enough that the
/// machine's speed holds still across a pair of blocks.
const PAIR_BLOCK: u64 = 32;

/// Times `f` called [`PAIR_BLOCK`] times, in ns.
#[inline]
fn time_block(f: &mut impl FnMut()) -> i128 {
    let t = Instant::now();
    for _ in 0..PAIR_BLOCK {
        f();
    }
    i128::try_from(t.elapsed().as_nanos()).unwrap_or(i128::MAX)
}

/// Pairs of blocks a sample runs at least, however few iterations criterion
/// asks for: one pair's difference is too noisy to be a sample.
const MIN_PAIRS: u64 = 16;

/// The time of `iters` calls of `layered` less that of `iters` calls of
/// `bare`: blocks of the two alternate (the order swapped every pair), so a
/// drift of the machine's speed cancels in the difference, which criterion
/// then reads as the per-call overhead. At least [`MIN_PAIRS`] pairs run,
/// scaled to `iters`; a difference below 1 ns (noise around an overhead
/// near zero) counts as 1 ns, since criterion refuses a zero.
fn paired(iters: u64, mut layered: impl FnMut(), mut bare: impl FnMut()) -> Duration {
    let blocks = iters.div_ceil(PAIR_BLOCK).max(2 * MIN_PAIRS);
    let mut diff = 0i128;
    for k in 0..blocks {
        if k % 2 == 0 {
            diff += time_block(&mut layered);
            diff -= time_block(&mut bare);
        } else {
            diff -= time_block(&mut bare);
            diff += time_block(&mut layered);
        }
    }
    let ran = u128::from(blocks * PAIR_BLOCK);
    let per_iters = u128::try_from(diff.max(0)).unwrap_or(0) * u128::from(iters) / ran;
    Duration::from_nanos(u64::try_from(per_iters).unwrap_or(u64::MAX).max(1))
}

fn two_threads<T, M, F>(iters: u64, make: M, op: F) -> Duration
where
    M: Fn() -> T + Sync,
    F: Fn(&mut T) + Sync,
{
    let start_line = SpinStart::new(2);
    let spans: Vec<(Instant, Instant)> = thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|cpu| {
                let (start_line, make, op) = (&start_line, &make, &op);
                s.spawn(move || {
                    pin_to(cpu);
                    let mut state = make();
                    start_line.wait();
                    let start = Instant::now();
                    for _ in 0..iters {
                        op(black_box(&mut state));
                    }
                    (start, Instant::now())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("benchmark thread panicked"))
            .collect()
    });
    let start = spans.iter().map(|s| s.0).min().expect("two threads");
    let end = spans.iter().map(|s| s.1).max().expect("two threads");
    end - start
}

fn concurrency(c: &mut Criterion) {
    let l = limiter();
    let sem = Semaphore::new(PERMITS);
    let cl = congestion();

    let mut g = c.benchmark_group("concurrency_uncontended");
    g.bench_function("adaptx", |b| b.iter(|| adaptx_success(black_box(&l))));
    g.bench_function("tokio_semaphore_2_instants", |b| {
        b.iter(|| tokio_2_instants(black_box(&sem)));
    });
    g.bench_function("congestion_limiter", |b| {
        b.iter(|| congestion_success(black_box(&cl)));
    });
    g.finish();

    let mut g = c.benchmark_group("concurrency_contended_2_threads");
    g.bench_function("adaptx", |b| {
        b.iter_custom(|iters| two_threads(iters, || &l, |l| adaptx_success(l)));
    });
    g.bench_function("tokio_semaphore_2_instants", |b| {
        b.iter_custom(|iters| two_threads(iters, || &sem, |s| tokio_2_instants(s)));
    });
    g.bench_function("congestion_limiter", |b| {
        b.iter_custom(|iters| two_threads(iters, || &cl, |l| congestion_success(l)));
    });
    g.finish();
}

type Req = Request<()>;
type Res = Response<()>;

/// A service that answers at once.
fn inner()
-> impl Service<Req, Response = Res, Error = Infallible, Future = Ready<Result<Res, Infallible>>> + Clone
{
    service_fn(|_req: Req| ready(Ok::<_, Infallible>(Response::new(()))))
}

/// One request through `svc`: `poll_ready`, `call`, the future polled to
/// completion, all with a no-op waker.
#[inline]
fn call_service<S>(svc: &mut S)
where
    S: Service<Req, Response = Res>,
    S::Error: std::fmt::Debug,
{
    poll_now(std::future::poll_fn(|cx| svc.poll_ready(cx))).expect("ready");
    let res = poll_now(svc.call(Request::new(()))).expect("answered");
    assert!(res.status().is_success(), "not rejected");
    black_box(res);
}

fn concurrency_service(c: &mut Criterion) {
    let bare = inner();
    let tower_svc = ConcurrencyLimitLayer::new(PERMITS).layer(inner());
    let adaptx_svc = AdaptiveConcurrencyLayer::server(limiter()).layer(inner());

    let mut g = c.benchmark_group("concurrency_service_uncontended");
    let mut s = bare.clone();
    g.bench_function("bare", |b| b.iter(|| call_service(&mut s)));
    let mut s = tower_svc.clone();
    g.bench_function("tower_concurrency_limit", |b| {
        b.iter(|| call_service(&mut s));
    });
    let mut s = adaptx_svc.clone();
    g.bench_function("adaptx_layer", |b| b.iter(|| call_service(&mut s)));
    {
        // Built for its own row only: a `CoarseClock`'s thread wakes every
        // step, and would run beside every other row of the group.
        let mut s = AdaptiveConcurrencyLayer::server(limiter_coarse()).layer(inner());
        g.bench_function("adaptx_layer_coarse", |b| b.iter(|| call_service(&mut s)));
    }
    // The limiter's share of `adaptx_layer`: the owned permit the service
    // takes, recorded as a success. `adaptx_layer` − `bare` − this is the
    // service's own overhead.
    let l = adaptx_svc.limiter().clone();
    g.bench_function("adaptx_limiter_owned", |b| {
        b.iter(|| {
            black_box(&l)
                .try_acquire_owned()
                .expect("a permit is free")
                .success();
        });
    });
    g.finish();

    // Each thread drives its own clone; the clones share one semaphore / limiter.
    let mut g = c.benchmark_group("concurrency_service_contended_2_threads");
    g.bench_function("bare", |b| {
        b.iter_custom(|iters| two_threads(iters, || bare.clone(), call_service));
    });
    g.bench_function("tower_concurrency_limit", |b| {
        b.iter_custom(|iters| {
            two_threads(
                iters,
                || -> ConcurrencyLimit<_> { tower_svc.clone() },
                call_service,
            )
        });
    });
    g.bench_function("adaptx_layer", |b| {
        b.iter_custom(|iters| two_threads(iters, || adaptx_svc.clone(), call_service));
    });
    g.finish();

    let mut g = c.benchmark_group("overhead_service_paired");
    // Each row's wall time is its bare and layered calls, several times the
    // overhead criterion sees: a shorter measurement keeps the run short.
    g.measurement_time(Duration::from_secs(1)).sample_size(50);
    let mut b_svc = bare.clone();
    let mut s = tower_svc.clone();
    g.bench_function("tower_concurrency_limit", |b| {
        b.iter_custom(|iters| paired(iters, || call_service(&mut s), || call_service(&mut b_svc)));
    });
    let mut s = adaptx_svc.clone();
    g.bench_function("adaptx_layer", |b| {
        b.iter_custom(|iters| paired(iters, || call_service(&mut s), || call_service(&mut b_svc)));
    });
    {
        let mut s = AdaptiveConcurrencyLayer::server(limiter_coarse()).layer(inner());
        g.bench_function("adaptx_layer_coarse", |b| {
            b.iter_custom(|iters| {
                paired(iters, || call_service(&mut s), || call_service(&mut b_svc))
            });
        });
    }
    g.finish();
}

fn rate(c: &mut Criterion) {
    let l = rate_limiter();
    let gov = governor();
    let mut g = c.benchmark_group("rate_1_thread");
    g.bench_function("adaptx", |b| b.iter(|| adaptx_rate(black_box(&l))));
    g.bench_function("adaptx_drop", |b| {
        b.iter(|| adaptx_rate_drop(black_box(&l)));
    });
    g.bench_function("governor", |b| b.iter(|| governor_check(black_box(&gov))));
    // The clocks with a thread of their own are built for their rows only
    // (and dropped after, which ends the thread), so that no other row runs
    // beside a thread that wakes every 100 µs.
    {
        let coarse = rate_limiter_coarse();
        g.bench_function("adaptx_coarse", |b| {
            b.iter(|| adaptx_rate(black_box(&coarse)));
        });
    }
    {
        let gov_upkeep = governor_upkeep();
        g.bench_function("governor_upkeep", |b| {
            b.iter(|| governor_upkeep_check(black_box(&gov_upkeep)));
        });
    }
    g.finish();

    let mut g = c.benchmark_group("rate_2_threads");
    g.bench_function("adaptx", |b| {
        b.iter_custom(|iters| two_threads(iters, || &l, |l| adaptx_rate(l)));
    });
    g.bench_function("adaptx_drop", |b| {
        b.iter_custom(|iters| two_threads(iters, || &l, |l| adaptx_rate_drop(l)));
    });
    g.bench_function("governor", |b| {
        b.iter_custom(|iters| two_threads(iters, || &gov, |g| governor_check(g)));
    });
    {
        let coarse = rate_limiter_coarse();
        g.bench_function("adaptx_coarse", |b| {
            b.iter_custom(|iters| two_threads(iters, || &coarse, |l| adaptx_rate(l)));
        });
    }
    {
        let gov_upkeep = governor_upkeep();
        g.bench_function("governor_upkeep", |b| {
            b.iter_custom(|iters| two_threads(iters, || &gov_upkeep, |g| governor_upkeep_check(g)));
        });
    }
    g.finish();
}

fn app() -> Router {
    Router::new().route("/", get(|| async { "ok" }))
}

/// `router` as `axum::serve` runs it: `into_make_service` calls
/// `with_state(())`, which turns every handler into a route once, so that
/// the layers are applied when the server starts rather than on every
/// request (a router called as a service without it applies them per
/// request: a new layered service built and dropped each time).
fn served(router: Router) -> Router {
    router.with_state(())
}

/// The `X-RateLimit-*` values of [`headers_only`], made once: shared
/// `Bytes`, as the rate layer's per-thread cache holds numbers above its
/// static table (10^9/s, its remaining tokens and a Unix time are all
/// above it).
static RATE_VALUES: LazyLock<[HeaderValue; 3]> = LazyLock::new(|| {
    let values = [1_000_000_000_u64, 999_999_999, 1_764_547_200].map(HeaderValue::from);
    // The first clone makes a formatted value's buffer shared; from then on
    // a clone counts a reference up.
    drop(values.clone());
    values
});

/// What the rate layer adds to a request besides its limiter, with nothing
/// computed: the `CurrentRate` extension and three `X-RateLimit-*` headers
/// whose values are clones of values made once — the least any layer
/// sending them pays with `http`'s types (an extension is a boxed value in a
/// hash map; a custom header name is hashed byte by byte; a value above a
/// static table is a reference-counted buffer). One service and one future,
/// as the rate layer has.
#[derive(Clone)]
struct HeadersOnly<S>(S);

impl<S> Service<Request<Body>> for HeadersOnly<S>
where
    S: Service<Request<Body>, Response = Response<Body>>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = HeadersOnlyFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<Body>) -> Self::Future {
        req.extensions_mut().insert(CurrentRate(HUGE_RATE));
        HeadersOnlyFuture {
            inner: self.0.call(req),
        }
    }
}

pin_project! {
    struct HeadersOnlyFuture<F> {
        #[pin]
        inner: F,
    }
}

impl<F, E> Future for HeadersOnlyFuture<F>
where
    F: Future<Output = Result<Response<Body>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let mut res = ready!(self.project().inner.poll(cx))?;
        let [limit, remaining, reset] = RATE_VALUES.clone();
        let h = res.headers_mut();
        h.insert(X_RATELIMIT_LIMIT, limit);
        h.insert(X_RATELIMIT_REMAINING, remaining);
        h.insert(X_RATELIMIT_RESET, reset);
        Poll::Ready(Ok(res))
    }
}

/// `router` with [`HeadersOnly`] around its handlers.
fn headers_only(router: Router) -> Router {
    router.layer(tower::layer::layer_fn(HeadersOnly))
}

fn request() -> Request<Body> {
    Request::get("/")
        .body(Body::empty())
        .expect("valid request")
}

/// One request through a clone of `router` with `oneshot`.
#[inline]
fn oneshot(router: &Router) {
    let res = poll_now(router.clone().oneshot(request())).expect("infallible");
    assert!(res.status().is_success(), "not rejected");
    black_box(res);
}

fn middleware(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let _guard = rt.enter();

    let bare = served(app());
    let concurrency = served(app().layer(AdaptiveConcurrencyLayer::server(limiter())));
    let rate = served(app().layer(AdaptiveRateLimitLayer::new(rate_limiter())));
    let rate_no_headers =
        served(app().layer(AdaptiveRateLimitLayer::new(rate_limiter()).headers(false)));
    let headers_only = served(headers_only(app()));
    let tower_limit = served(app().layer(ConcurrencyLimitLayer::new(PERMITS)));

    let mut g = c.benchmark_group("middleware_axum");
    g.bench_function("bare", |b| b.iter(|| oneshot(&bare)));
    g.bench_function("adaptx_concurrency", |b| b.iter(|| oneshot(&concurrency)));
    g.bench_function("adaptx_rate", |b| b.iter(|| oneshot(&rate)));
    g.bench_function("adaptx_rate_no_headers", |b| {
        b.iter(|| oneshot(&rate_no_headers));
    });
    g.bench_function("headers_only", |b| b.iter(|| oneshot(&headers_only)));
    {
        let rate_coarse = served(app().layer(AdaptiveRateLimitLayer::new(rate_limiter_coarse())));
        g.bench_function("adaptx_rate_coarse", |b| b.iter(|| oneshot(&rate_coarse)));
    }
    g.bench_function("tower_concurrency_limit", |b| {
        b.iter(|| oneshot(&tower_limit));
    });
    g.finish();

    let mut g = c.benchmark_group("overhead_axum_paired");
    g.measurement_time(Duration::from_secs(1)).sample_size(50);
    let rows = [
        ("tower_concurrency_limit", &tower_limit),
        ("headers_only", &headers_only),
        ("adaptx_concurrency", &concurrency),
        ("adaptx_rate", &rate),
        ("adaptx_rate_no_headers", &rate_no_headers),
    ];
    for (name, layered) in rows {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| paired(iters, || oneshot(layered), || oneshot(&bare)));
        });
    }
    {
        let rate_coarse = served(app().layer(AdaptiveRateLimitLayer::new(rate_limiter_coarse())));
        g.bench_function("adaptx_rate_coarse", |b| {
            b.iter_custom(|iters| paired(iters, || oneshot(&rate_coarse), || oneshot(&bare)));
        });
    }
    g.finish();
}

criterion_group!(benches, concurrency, concurrency_service, rate, middleware);
criterion_main!(benches);
