//! The discrete-event engine: the real adaptx limiter, a modelled backend and
//! the demand, in virtual time.
//!
//! # Implementation details
//!
//! Time is integer nanoseconds. The engine moves from instant to instant;
//! the next instant is the earliest of: the backend's next departure, a
//! pending overload-error answer, a client timeout, the end of the current
//! measurement second, a schedule change, an open-demand arrival and a
//! worker's end of think time. At each instant it runs, in this order:
//!
//! 1. **completions** — departures from the backend (in virtual-finish
//!    order), then overload-error answers (in send order), then timeouts
//!    (client by client, in send order); each records its outcome through
//!    the request's real [`OwnedPermit`](adaptx::OwnedPermit), which is where
//!    the limiter closes its own sample windows and runs its law;
//! 2. **window closes** — the measurement second that ends now;
//! 3. **schedule changes** at this instant: the backend's, then each
//!    client's demand (worker count, think time; see [`crate::demand`]);
//! 4. **arrivals** — open-demand arrivals (admitted with `try_acquire_owned`
//!    or shed), workers back from thinking and rate-limited workers back to
//!    try again;
//! 5. **admission** — each closed-demand client admits its queue of waiting
//!    workers, in FIFO order, while a permit is free (the first client to try
//!    rotates from instant to instant so none is favoured on exact ties). With
//!    a `[rate_limiter]`, a worker that finds no token waits the limiter's
//!    `retry_after` and tries again (see [`crate::rate`]).
//!
//! The shared [`ManualClock`] is set to the instant before any limiter call,
//! so the permits measure latency in virtual time. Every source of
//! randomness has its own seeded stream ([`crate::rng`]), so a run is a pure
//! function of the scenario, the policy and the seed.
//!
//! Each event costs `O(log n)`: the backend keeps its requests in a heap by
//! virtual finish time (see [`crate::backend`]); overload-error answers and
//! think times go through one event heap; timeouts, whose deadlines are
//! monotone per client, sit in a FIFO per client and are skipped lazily once
//! their request is answered.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use std::sync::Arc;

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Wake, Waker};

use adaptx::{
    Acquire, AcquireError, Builder, Class, Limiter, ManualClock, Outcome, OwnedPermit, RatePermit,
    Throttle,
};

use crate::backend::{Backend, Offer};
use crate::demand::ClientDemand;
use crate::measure::{Hist, LimitMedian, Policy, Run, Second};
use crate::rate::RateAdmission;
use crate::rng::{self, streams};
use crate::scenario::{BackendSpec, DemandKind, Law, LimiterSpec, Scenario};
use crate::time::SECOND;

/// The adaptx builder for `spec` (and `policy`, if given), seeded and on
/// `clock`.
pub(crate) fn limiter_builder(
    spec: &LimiterSpec,
    policy: Option<Policy>,
    seed: u64,
    clock: ManualClock,
) -> Builder {
    let mut b = Limiter::builder().clock(clock).seed(seed);
    b = crate::class::configure(
        b,
        spec.queue.as_ref(),
        spec.partitions.as_deref(),
        spec.reserve,
    );
    if let Some(w) = spec.sample_window {
        b = b.sample_window(std::time::Duration::from_nanos(w.0));
    }
    if let Some(Policy::Fixed(n)) = policy {
        return b.initial_limit(n).min_limit(n).max_limit(n);
    }
    if let Some(Policy::Law(law)) = policy {
        match law.algorithm() {
            Some(a) => b = b.algorithm(a),
            None => return crate::peers::builder(b, law, spec, seed),
        }
    }
    if let (Some(n), Some(k)) = (
        spec.sample_window_min_samples,
        spec.sample_window_rtt_multiple,
    ) {
        b = b.sample_window_adaptive(n, k);
    }
    if let Some(v) = spec.initial_limit {
        b = b.initial_limit(v);
    }
    if let Some(v) = spec.min_limit {
        b = b.min_limit(v);
    }
    if let Some(v) = spec.max_limit {
        b = b.max_limit(v);
    }
    if let Some(v) = spec.warmup_samples {
        b = b.warmup_samples(v);
    }
    if let Some(v) = spec.target_latency {
        b = b.target_latency(std::time::Duration::from_nanos(v.0));
    }
    if let Some(v) = spec.tolerance {
        b = b.tolerance(v);
    }
    if let Some(v) = spec.increase_rate {
        b = b.increase_rate(v);
    }
    if let Some(v) = spec.decrease_ratio {
        b = b.decrease_ratio(v);
    }
    if let Some(v) = spec.utilization {
        b = b.utilization(v);
    }
    if let Some(v) = spec.smoothing {
        b = b.smoothing(v);
    }
    if let Some(v) = spec.jitter {
        b = b.jitter(v);
    }
    b
}

/// The goodput ceiling (per second) and the best concurrency C* of
/// `backend` under the scenario's demand at time zero; see
/// [`capacity_between`].
pub fn capacity(sc: &Scenario, backend: &BackendSpec) -> (f64, Option<f64>) {
    capacity_between(sc, backend, 0, 0)
}

/// The goodput ceiling (per second) and the best concurrency C* of
/// `backend` under the scenario's demand over `[from, to)` (ns; `from ==
/// to` reads the demand at `from`).
///
/// With the mean service time `s̄ = service_time × (1 + jitter)` — the mean
/// of the simulated service time, `service_time` plus an exponential term of
/// mean `jitter × service_time` — the backend serves at most `min(L, workers,
/// max_concurrency) / s̄` requests per second with `L` in flight, of which a
/// fraction `p(L)` fail past a soft ceiling (0 without one). Its ceiling is
/// the best of that over `L` (without a soft ceiling: `min(workers,
/// max_concurrency) / s̄`), at most `rate_limit`; C* is the smallest `L`
/// that reaches it (or `rate_limit × s̄` if lower), undefined when the backend
/// bounds nothing. The demand's ceiling is, summed over clients, the mean
/// open rate over the interval, or for a closed demand the mean of
/// `min(workers, max_limit) / (s̄ + think_time)` (`workers` alone with a rate
/// limiter). Capacity is `min(backend ceiling, demand ceiling) × (1 −
/// client_error_rate) × (1 − failure_rate)`: the goodput a perfect policy
/// could get.
pub fn capacity_between(
    sc: &Scenario,
    backend: &BackendSpec,
    from: u64,
    to: u64,
) -> (f64, Option<f64>) {
    let s = backend.service_time.as_secs_f64() * (1.0 + backend.jitter);
    let (ceiling, c_star) = backend_ceiling(backend, s);
    let d = &sc.demand;
    let demand: f64 = (0..d.clients)
        .map(|i| {
            let max_limit = if sc.rate_limiter.is_some() {
                f64::INFINITY
            } else {
                sc.client_limiter(i)
                    .max_limit
                    .unwrap_or(adaptx::DEFAULT_MAX_LIMIT) as f64
            };
            sc.client_demand(i).ceiling(d.kind, from, to, s, max_limit)
        })
        .sum();
    let good = (1.0 - backend.client_error_rate) * (1.0 - backend.failure_rate);
    (ceiling.min(demand) * good, c_star)
}

/// The backend's own goodput ceiling (per second, before client errors and
/// random failures) and its best concurrency, with mean service time `s`.
fn backend_ceiling(b: &BackendSpec, s: f64) -> (f64, Option<f64>) {
    let hard = match (b.workers, b.max_concurrency) {
        (Some(c), Some(m)) => Some(c.min(m)),
        (c, m) => c.or(m),
    };
    let (mut ceiling, mut c_star) = match (b.soft_ceiling, b.soft_ceiling_full) {
        (Some(on), Some(full)) => {
            // Goodput with L in flight: min(L, c, m) / s · (1 − p(min(L, m))).
            let top = b.max_concurrency.map_or(full, |m| m.min(full));
            let mut best = (0.0, 1u32);
            for l in 1..=top.max(1) {
                let inside = b.max_concurrency.map_or(l, |m| l.min(m));
                let served = hard.map_or(l, |h| l.min(h));
                let g = f64::from(served) / s * (1.0 - soft_error(on, full, u64::from(inside)));
                if g > best.0 {
                    best = (g, l);
                }
            }
            (best.0, Some(f64::from(best.1)))
        }
        _ => match hard {
            Some(h) => (f64::from(h) / s, Some(f64::from(h))),
            None => (f64::INFINITY, None),
        },
    };
    if let Some(r) = b.rate_limit {
        ceiling = ceiling.min(r);
        c_star = Some(c_star.map_or(r * s, |c| c.min(r * s)));
    }
    (ceiling, c_star)
}

/// The soft ceiling's overload-error probability with `n` requests inside.
pub(crate) fn soft_error(onset: u32, full: u32, n: u64) -> f64 {
    if n <= u64::from(onset) {
        0.0
    } else {
        ((n - u64::from(onset)) as f64 / f64::from(full - onset)).min(1.0)
    }
}

/// What admitted a request: a concurrency permit or a rate permit.
#[derive(Debug)]
enum Held {
    Limit(OwnedPermit),
    Rate(RatePermit),
    /// Let through by the client-side throttle, which counts the answer.
    Throttle(Arc<Throttle>),
}

impl Held {
    fn record(self, outcome: Outcome) {
        match self {
            Held::Limit(p) => p.record(outcome),
            Held::Rate(p) => p.record(outcome),
            Held::Throttle(t) => t.record(outcome.is_success()),
        }
    }
}

/// What admits a client's requests.
#[derive(Debug)]
enum Admission {
    Limit(Limiter),
    Rate(RateAdmission),
    Throttle(Arc<Throttle>, ManualClock),
}

impl Admission {
    /// The limit in force: the concurrency limit, or the rate.
    fn limit(&self) -> usize {
        match self {
            Admission::Limit(l) => l.limit(),
            Admission::Rate(r) => usize::try_from(r.rate()).unwrap_or(usize::MAX),
            Admission::Throttle(t, clock) => throttle_rate(t, clock),
        }
    }
}

/// How long a closed-loop worker whose request the client-side throttle
/// refused waits before its next one (the throttle answers no time).
const THROTTLED_RETRY: u64 = 10_000_000;

/// The sending rate (requests/s) SRE throttling allows at the moment, the
/// "limit" the measures record for it: `k` times the accepts counted in its
/// window, per second of the window (of the run so far, while it is younger
/// than the window). Past it, the refusal probability is above 0.
fn throttle_rate(t: &Throttle, clock: &ManualClock) -> usize {
    use adaptx::Clock as _;
    let span = clock
        .now()
        .min(adaptx::DEFAULT_THROTTLE_WINDOW)
        .as_secs_f64()
        .max(1.0);
    let rate = adaptx::DEFAULT_THROTTLE_K * t.stats().accepts as f64 / span;
    // Lossless enough: a rate, rounded.
    rate.round() as usize
}

/// One request in flight (or answered by the client but still inside the
/// backend).
#[derive(Debug)]
struct Req {
    /// `None` once the client has its answer (or gave up).
    permit: Option<Held>,
    client: u32,
    start: u64,
    generation: u32,
    client_error: bool,
    /// Fails as overload after its work (at random or past a soft ceiling).
    overload_error: bool,
    /// The backend holds it, or its overload-error answer is pending.
    backend_holds: bool,
    /// Its class, if the scenario has classes.
    class: Option<usize>,
    /// A server-side permit kept after the client timed out, until the
    /// backend is done.
    lingering: Option<Held>,
}

/// An event of the event heap: (time, rank, sequence, kind). Rank orders
/// kinds at one instant: completions (0) before arrivals (1).
type Ev = Reverse<(u64, u8, u64, EvKind)>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum EvKind {
    /// An overload-error answer to request (slot, generation).
    Reply(u32, u32),
    /// A worker of this client is done thinking.
    Think(u32),
    /// A rate-limited worker of this client tries again.
    Retry(u32),
    /// A queued arrival (waiting slot, generation) reaches a deadline.
    Expire(u32, u32),
    /// The client timeout of request (slot, generation) sent after a wait
    /// in the limiter's queue (its deadline is out of the per-client FIFO's
    /// order).
    Timeout(u32, u32),
}

struct Client {
    admission: Admission,
    max_limit: usize,
    min_limit: usize,
    initial: usize,
    demand: ClientDemand,
    /// Closed: workers waiting for a permit.
    waiting: u64,
    /// Closed: workers alive (waiting, in flight, thinking, retrying) and
    /// how many there should be.
    workers: u64,
    workers_target: u64,
    think: u64,
    /// The next instant the worker count or the think time changes.
    demand_next: u64,
    /// Open: time of the next arrival, and the arrival stream.
    next_arrival: u64,
    arrivals_rng: fastrand::Rng,
    /// (deadline, slot, generation), in deadline order.
    timeouts: VecDeque<(u64, u32, u32)>,
    in_flight: u64,
    area_since: u64,
    area: u128,
    last_limit: usize,
    /// How long each limit held in the current second.
    held: LimitMedian,
    cur: Second,
    series: Vec<Second>,
    /// The limiter class of each scenario class.
    class_of: Vec<Class>,
}

impl Client {
    fn account(&mut self, t: u64) {
        let dt = t - self.area_since;
        self.area += u128::from(self.in_flight) * u128::from(dt);
        self.area_since = t;
    }

    /// Notes the live limit at `t`, after a completion (when it may have
    /// moved).
    fn observe_limit(&mut self, t: u64, decreases: &mut u64) {
        let l = self.admission.limit();
        if l != self.last_limit {
            if l < self.last_limit {
                *decreases += 1;
            }
            self.held.change(t, l);
            self.last_limit = l;
            let l = l as u64;
            self.cur.limit_min = self.cur.limit_min.min(l);
            self.cur.limit_max = self.cur.limit_max.max(l);
            if !(self.min_limit..=self.max_limit).contains(&self.last_limit) {
                self.cur.violations += 1;
            }
        }
    }

    /// A worker is ready to send: it queues, or retires if the client has
    /// more workers than it should.
    fn ready(&mut self) {
        if self.workers > self.workers_target {
            self.workers -= 1;
        } else {
            self.waiting += 1;
        }
    }

    /// The first arrival after `t` of the open demand: thinning of the rate
    /// curve (see [`crate::demand`]).
    fn arrival_after(&mut self, mut t: u64) -> u64 {
        loop {
            let (end, top) = self.demand.rate.piece(t);
            if top <= 0.0 {
                if end == u64::MAX {
                    return u64::MAX;
                }
                t = end;
                continue;
            }
            let next = t.saturating_add(gap_ns(&mut self.arrivals_rng, SECOND as f64 / top));
            if next >= end {
                t = end;
                continue;
            }
            let rate = self.demand.rate.at(next);
            if rate >= top || self.arrivals_rng.f64() * top < rate {
                return next;
            }
            t = next;
        }
    }
}

/// Runs `sc` once with `policy` and `seed`.
///
/// # Panics
///
/// If the scenario's limiter options are invalid for the policy (checked when
/// the scenario is loaded) — or if adaptx panics.
pub fn run(sc: &Scenario, policy: Policy, seed: u64) -> Run {
    Engine::new(sc, policy, seed).run()
}

struct Engine<'a> {
    sc: &'a Scenario,
    policy: Policy,
    seed: u64,
    clock: ManualClock,
    clients: Vec<Client>,
    reqs: Vec<Req>,
    free: Vec<u32>,
    backend: Backend,
    events: BinaryHeap<Ev>,
    seq: u64,
    sched: usize,
    next_tick: u64,
    end: u64,
    service_rng: fastrand::Rng,
    error_rng: fastrand::Rng,
    failure_rng: fastrand::Rng,
    hist: Hist,
    steady_hist: Hist,
    steady_from: u64,
    seconds: Vec<Second>,
    done: Vec<u32>,
    decreases: u64,
    rotate: usize,
    classes: Vec<ClassSeries>,
    class_rng: fastrand::Rng,
    /// Open arrivals waiting in a limiter's queue, by slot.
    queued: Vec<Option<Queued>>,
    queued_free: Vec<u32>,
    queued_generation: u32,
    /// Slots whose waiter was woken, to poll.
    woken: Arc<Mutex<Vec<u32>>>,
}

/// One class's measures.
struct ClassSeries {
    cur: Second,
    series: Vec<Second>,
    hist: Hist,
}

/// An open arrival waiting for a permit in its client's limiter queue.
struct Queued {
    acquire: Pin<Box<Acquire<'static>>>,
    waker: Waker,
    client: usize,
    class: Option<usize>,
    arrived: u64,
    generation: u32,
}

/// Wakes a queued arrival: notes its slot for the engine to poll.
struct SlotWaker {
    slot: u32,
    woken: Arc<Mutex<Vec<u32>>>,
}

impl Wake for SlotWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(self.slot);
    }
}

/// Client `i`'s admission under `policy`, and its `[min, max]` limit.
fn admission(
    sc: &Scenario,
    policy: Policy,
    seed: u64,
    i: u32,
    clock: &ManualClock,
    keyed: &mut Option<Arc<adaptx::KeyedRateLimiter<u32>>>,
) -> (Admission, usize, usize) {
    let fail = |field: &str, e: adaptx::ConfigError| -> ! {
        panic!("{}: {field}.{}: {e}", sc.source, e.field())
    };
    if policy == Policy::Law(Law::Throttle) {
        let throttle = Throttle::builder()
            .clock(clock.clone())
            .seed(rng::stream_seed(seed, streams::LIMITER + u64::from(i)))
            .build()
            .unwrap_or_else(|e| fail("throttle", e));
        return (
            Admission::Throttle(Arc::new(throttle), clock.clone()),
            0,
            usize::MAX,
        );
    }
    let Some(spec) = &sc.rate_limiter else {
        let lseed = rng::stream_seed(seed, streams::LIMITER + u64::from(i));
        let limiter = limiter_builder(&sc.client_limiter(i), Some(policy), lseed, clock.clone())
            .build()
            .unwrap_or_else(|e| fail("limiter", e));
        let stats = limiter.stats();
        return (Admission::Limit(limiter), stats.min_limit, stats.max_limit);
    };
    let (fixed, algorithm) = match policy {
        Policy::Fixed(r) => (Some(r as u64), adaptx::RateAlgorithm::default()),
        Policy::Law(law) => (None, law.rate_algorithm().unwrap_or_default()),
    };
    let spec = match sc.client(i).and_then(|c| c.rate_limiter.as_ref()) {
        Some(over) => spec.overlaid(over),
        None => spec.clone(),
    };
    let (min, max) = match fixed {
        Some(r) => (r, r),
        None => (spec.min_rate(), spec.max_rate()),
    };
    let bounds = (
        usize::try_from(min).unwrap_or(usize::MAX),
        usize::try_from(max).unwrap_or(usize::MAX),
    );
    let a = if spec.is_keyed() {
        let shared = keyed.get_or_insert_with(|| {
            Arc::new(
                spec.builder(algorithm, fixed, clock.clone())
                    .build_keyed()
                    .unwrap_or_else(|e| fail("rate_limiter", e)),
            )
        });
        RateAdmission::Keyed(Arc::clone(shared), i)
    } else {
        RateAdmission::Own(
            spec.builder(algorithm, fixed, clock.clone())
                .build()
                .unwrap_or_else(|e| fail("rate_limiter", e)),
        )
    };
    (Admission::Rate(a), bounds.0, bounds.1)
}

impl<'a> Engine<'a> {
    fn new(sc: &'a Scenario, policy: Policy, seed: u64) -> Self {
        let clock = ManualClock::new();
        let d = &sc.demand;
        let mut keyed = None;
        let clients = (0..d.clients)
            .map(|i| {
                let (admission, min_limit, max_limit) =
                    admission(sc, policy, seed, i, &clock, &mut keyed);
                let demand = sc.client_demand(i);
                let arrivals_rng = rng::stream(seed, streams::ARRIVALS + u64::from(i));
                let (workers, think) = match d.kind {
                    DemandKind::Closed => (demand.workers.count_at(0), demand.think_at(0)),
                    DemandKind::Open => (0, 0),
                };
                let l = admission.limit();
                let mut c = Client {
                    max_limit,
                    min_limit,
                    initial: l,
                    admission,
                    waiting: workers,
                    workers,
                    workers_target: workers,
                    think,
                    demand_next: u64::MAX,
                    next_arrival: u64::MAX,
                    arrivals_rng,
                    demand,
                    timeouts: VecDeque::new(),
                    in_flight: 0,
                    area_since: 0,
                    area: 0,
                    last_limit: l,
                    held: LimitMedian::new(l),
                    cur: fresh(l as u64, 0),
                    series: Vec::with_capacity((sc.duration.0 / SECOND) as usize),
                    class_of: Vec::new(),
                };
                if let Admission::Limit(lim) = &c.admission {
                    c.class_of = sc
                        .classes
                        .iter()
                        .map(|k| {
                            let name = k.partition.as_deref().unwrap_or(adaptx::DEFAULT_PARTITION);
                            // Validation checked the name against the partitions.
                            lim.class(name)
                                .unwrap_or_default()
                                .with_priority(k.priority)
                        })
                        .collect();
                }
                match d.kind {
                    DemandKind::Closed => {
                        c.demand_next = c
                            .demand
                            .workers
                            .next_count_change(0)
                            .min(c.demand.next_think_change(0));
                    }
                    DemandKind::Open => c.next_arrival = c.arrival_after(0),
                }
                c
            })
            .collect();
        Self {
            sc,
            policy,
            seed,
            clock,
            clients,
            reqs: Vec::new(),
            free: Vec::new(),
            backend: Backend::new(sc.backend.clone()),
            events: BinaryHeap::new(),
            seq: 0,
            sched: 0,
            next_tick: SECOND,
            end: sc.duration.0 / SECOND * SECOND,
            service_rng: rng::stream(seed, streams::SERVICE),
            error_rng: rng::stream(seed, streams::CLIENT_ERROR),
            failure_rng: rng::stream(seed, streams::FAILURE),
            hist: Hist::new(),
            steady_hist: Hist::new(),
            steady_from: sc.steady_from().0,
            seconds: Vec::with_capacity((sc.duration.0 / SECOND) as usize),
            done: Vec::new(),
            decreases: 0,
            rotate: 0,
            classes: sc
                .classes
                .iter()
                .map(|_| ClassSeries {
                    cur: Second::default(),
                    series: Vec::with_capacity((sc.duration.0 / SECOND) as usize),
                    hist: Hist::new(),
                })
                .collect(),
            class_rng: rng::stream(seed, streams::CLASS),
            queued: Vec::new(),
            queued_free: Vec::new(),
            queued_generation: 0,
            woken: Arc::default(),
        }
    }

    fn run(mut self) -> Run {
        let mut t = 0;
        loop {
            self.step(t);
            t = self.next_time();
            if t > self.end {
                break;
            }
        }
        let initial_limit = self.clients.iter().map(|c| c.initial as u64).sum();
        let bounds = self
            .clients
            .first()
            .map_or((0, 0), |c| (c.min_limit, c.max_limit));
        Run {
            scenario: self.sc.id().to_string(),
            policy: self.policy,
            seed: self.seed,
            steady_from: (self.steady_from / SECOND) as usize,
            steady_p50_ns: self.steady_hist.quantile(0.5),
            steady_p99_ns: self.steady_hist.quantile(0.99),
            decreases: self.decreases,
            initial_limit,
            limit_bounds: bounds,
            seconds: self.seconds,
            clients: self.clients.into_iter().map(|c| c.series).collect(),
            classes: self.classes.into_iter().map(|c| c.series).collect(),
        }
    }

    /// The earliest pending instant.
    fn next_time(&mut self) -> u64 {
        let mut t = self.backend.next_completion().min(self.next_tick);
        if let Some(Reverse((at, ..))) = self.events.peek() {
            t = t.min(*at);
        }
        if let Some(e) = self.sc.schedule.get(self.sched) {
            t = t.min(e.at.0);
        }
        for c in &mut self.clients {
            t = t.min(c.next_arrival).min(c.demand_next);
            while let Some(&(deadline, slot, generation)) = c.timeouts.front() {
                let r = &self.reqs[slot as usize];
                if r.generation != generation || r.permit.is_none() {
                    c.timeouts.pop_front();
                } else {
                    t = t.min(deadline);
                    break;
                }
            }
        }
        t
    }

    fn step(&mut self, t: u64) {
        self.clock.set(std::time::Duration::from_nanos(t));
        // 1. Completions.
        if self.backend.next_completion() == t {
            let mut done = std::mem::take(&mut self.done);
            self.backend.complete(t, &mut done);
            for &slot in &done {
                self.departed(slot, t);
            }
            done.clear();
            self.done = done;
        }
        while let Some(&Reverse((at, 0, _, kind))) = self.events.peek() {
            if at != t {
                break;
            }
            self.events.pop();
            match kind {
                EvKind::Reply(slot, generation) => self.rejected(slot, generation, t),
                EvKind::Expire(slot, generation) => self.expire(slot, generation, t),
                EvKind::Timeout(slot, generation) => self.timed_out(slot, generation, t),
                _ => {}
            }
        }
        for i in 0..self.clients.len() {
            while let Some(&(deadline, slot, generation)) = self.clients[i].timeouts.front() {
                if deadline != t {
                    break;
                }
                self.clients[i].timeouts.pop_front();
                self.timed_out(slot, generation, t);
            }
        }
        self.poll_woken(t);
        // 2. The measurement second that ends now.
        if t == self.next_tick {
            self.close_second(t);
            self.next_tick += SECOND;
        }
        // 3. Schedule changes: the backend's, then the demand's.
        while let Some(e) = self.sc.schedule.get(self.sched) {
            if e.at.0 != t {
                break;
            }
            let mut spec = self.backend.spec().clone();
            e.apply(&mut spec);
            self.backend.set_spec(t, spec);
            self.sched += 1;
        }
        for c in &mut self.clients {
            if c.demand_next == t {
                c.think = c.demand.think_at(t);
                let target = c.demand.workers.count_at(t);
                c.workers_target = target;
                if target > c.workers {
                    c.waiting += target - c.workers;
                    c.workers = target;
                } else {
                    let retire = (c.workers - target).min(c.waiting);
                    c.waiting -= retire;
                    c.workers -= retire;
                }
                c.demand_next = c
                    .demand
                    .workers
                    .next_count_change(t)
                    .min(c.demand.next_think_change(t));
            }
        }
        // 4. Arrivals.
        for i in 0..self.clients.len() {
            while self.clients[i].next_arrival == t {
                let c = &mut self.clients[i];
                c.cur.arrivals += 1;
                c.next_arrival = c.arrival_after(t);
                self.arrive(i, t);
            }
        }
        while let Some(&Reverse((at, 1, _, kind))) = self.events.peek() {
            if at != t {
                break;
            }
            self.events.pop();
            if let EvKind::Think(c) | EvKind::Retry(c) = kind {
                self.clients[c as usize].ready();
            }
        }
        // 5. Admission of waiting workers.
        let n = self.clients.len();
        self.rotate = (self.rotate + 1) % n;
        for k in 0..n {
            let i = (self.rotate + k) % n;
            if matches!(
                self.clients[i].admission,
                Admission::Rate(_) | Admission::Throttle(..)
            ) {
                self.admit_rated(i, t);
                continue;
            }
            while self.clients[i].waiting > 0 {
                let Admission::Limit(l) = &self.clients[i].admission else {
                    break;
                };
                if !l.allow() {
                    break;
                }
                let Ok(p) = l.try_acquire_owned() else {
                    break;
                };
                self.clients[i].waiting -= 1;
                self.send(i, Held::Limit(p), t, t, None);
            }
        }
        self.poll_woken(t);
    }

    /// An open arrival of client `i` at `t`: its class, then a permit, a
    /// place in the limiter's queue, or shed.
    fn arrive(&mut self, i: usize, t: u64) {
        let class = if self.sc.classes.is_empty() {
            None
        } else {
            Some(crate::class::pick(
                &self.sc.classes,
                t,
                self.class_rng.f64(),
            ))
        };
        if let Some(k) = class {
            self.classes[k].cur.arrivals += 1;
        }
        let Admission::Limit(l) = &self.clients[i].admission else {
            match self.admit(i) {
                Ok(p) => self.send(i, p, t, t, None),
                Err(_) => self.clients[i].cur.shed += 1,
            }
            return;
        };
        let cls = class.map_or(Class::default(), |k| self.clients[i].class_of[k]);
        let queue = self.sc.client_limiter(i as u32).queue;
        let Some(queue) = queue else {
            match l.try_acquire_owned_as(cls) {
                Ok(p) => self.send(i, Held::Limit(p), t, t, class),
                Err(_) => self.shed(i, class),
            }
            return;
        };
        let slot = match self.queued_free.pop() {
            Some(s) => s,
            None => {
                self.queued.push(None);
                (self.queued.len() - 1) as u32
            }
        };
        self.queued_generation = self.queued_generation.wrapping_add(1);
        let waker = Waker::from(Arc::new(SlotWaker {
            slot,
            woken: self.woken.clone(),
        }));
        self.queued[slot as usize] = Some(Queued {
            acquire: Box::pin(l.acquire_owned_as(cls)),
            waker,
            client: i,
            class,
            arrived: t,
            generation: self.queued_generation,
        });
        if self.poll_queued(slot, t) {
            let generation = self.queued_generation;
            let mut deadlines = vec![t.saturating_add(self.sc.demand.timeout.0)];
            if let Some(q) = queue.timeout {
                deadlines.push(t.saturating_add(q.0));
            }
            for at in deadlines {
                self.seq += 1;
                self.events
                    .push(Reverse((at, 0, self.seq, EvKind::Expire(slot, generation))));
            }
        }
    }

    /// Polls queued arrival `slot`; returns whether it still waits.
    fn poll_queued(&mut self, slot: u32, t: u64) -> bool {
        let Some(q) = self.queued[slot as usize].as_mut() else {
            return false;
        };
        let waker = q.waker.clone();
        let r = q.acquire.as_mut().poll(&mut Context::from_waker(&waker));
        let Poll::Ready(r) = r else {
            return true;
        };
        let Some(q) = self.queued[slot as usize].take() else {
            return false;
        };
        self.queued_free.push(slot);
        match r {
            Ok(p) => self.send(q.client, Held::Limit(p), t, q.arrived, q.class),
            Err(e) => self.refused(q.client, q.class, &e),
        }
        false
    }

    /// Polls every queued arrival whose waiter was woken.
    fn poll_woken(&mut self, t: u64) {
        loop {
            let slots = std::mem::take(
                &mut *self
                    .woken
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
            if slots.is_empty() {
                return;
            }
            for slot in slots {
                self.poll_queued(slot, t);
            }
        }
    }

    /// A deadline of queued arrival `slot`: the limiter's queue timeout (a
    /// poll resolves it) or the client's (it gives up).
    fn expire(&mut self, slot: u32, generation: u32, t: u64) {
        let matches = self.queued[slot as usize]
            .as_ref()
            .is_some_and(|q| q.generation == generation);
        if !matches || !self.poll_queued(slot, t) {
            return;
        }
        let Some(q) = self.queued[slot as usize].as_ref() else {
            return;
        };
        if t >= q.arrived.saturating_add(self.sc.demand.timeout.0) {
            let Some(q) = self.queued[slot as usize].take() else {
                return;
            };
            self.queued_free.push(slot);
            // Dropping the wait gives up the place in line.
            drop(q.acquire);
            self.clients[q.client].cur.timeouts += 1;
            if let Some(k) = q.class {
                self.classes[k].cur.timeouts += 1;
            }
        }
    }

    /// An arrival refused by the limiter's queue: a queue timeout is a
    /// timeout, anything else shed.
    fn refused(&mut self, i: usize, class: Option<usize>, e: &AcquireError) {
        if e.is_timeout() {
            self.clients[i].cur.timeouts += 1;
            if let Some(k) = class {
                self.classes[k].cur.timeouts += 1;
            }
        } else {
            self.shed(i, class);
        }
    }

    fn shed(&mut self, i: usize, class: Option<usize>) {
        self.clients[i].cur.shed += 1;
        if let Some(k) = class {
            self.classes[k].cur.shed += 1;
        }
    }

    /// One admission attempt of client `i`: `Err(retry_after_ns)` when
    /// refused (0 for a concurrency limiter).
    fn admit(&mut self, i: usize) -> Result<Held, u64> {
        match &self.clients[i].admission {
            Admission::Limit(l) => l.try_acquire_owned().map(Held::Limit).map_err(|_| 0),
            Admission::Rate(r) => r
                .try_acquire()
                .map(Held::Rate)
                .map_err(|e| u64::try_from(e.retry_after().as_nanos()).unwrap_or(u64::MAX)),
            Admission::Throttle(t, _) => t
                .try_admit()
                .map(|()| Held::Throttle(Arc::clone(t)))
                .map_err(|_| THROTTLED_RETRY),
        }
    }

    /// Client `i`'s waiting workers each try the rate limiter (or the
    /// client-side throttle) once; a refused one tries again after
    /// `retry_after` (after [`THROTTLED_RETRY`] for the throttle).
    fn admit_rated(&mut self, i: usize, t: u64) {
        while self.clients[i].waiting > 0 {
            self.clients[i].waiting -= 1;
            self.clients[i].cur.arrivals += 1;
            match self.admit(i) {
                Ok(p) => self.send(i, p, t, t, None),
                Err(wait) => {
                    self.clients[i].cur.shed += 1;
                    self.seq += 1;
                    let at = t.saturating_add(wait.max(1));
                    self.events
                        .push(Reverse((at, 1, self.seq, EvKind::Retry(i as u32))));
                }
            }
        }
    }

    /// Sends a request of client `i` (and `class`) at `t`, which arrived at
    /// `start` (earlier when it waited in the limiter's queue): its latency
    /// and its client timeout run from `start`.
    fn send(&mut self, i: usize, permit: Held, t: u64, start: u64, class: Option<usize>) {
        if let Some(k) = class {
            self.classes[k].cur.sent += 1;
        }
        let c = &mut self.clients[i];
        c.account(t);
        c.in_flight += 1;
        c.cur.in_flight_peak = c.cur.in_flight_peak.max(c.in_flight);
        c.cur.sent += 1;
        if matches!(c.admission, Admission::Limit(_)) && c.in_flight > c.max_limit as u64 {
            c.cur.violations += 1;
        }
        let deadline = start.saturating_add(self.sc.demand.timeout.0);
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.reqs.push(Req {
                    permit: None,
                    client: 0,
                    start: 0,
                    generation: 0,
                    client_error: false,
                    overload_error: false,
                    backend_holds: false,
                    class: None,
                    lingering: None,
                });
                (self.reqs.len() - 1) as u32
            }
        };
        let rng = &mut self.service_rng;
        let offer = self.backend.offer(t, slot, |b| {
            let base = b.service_time.0;
            if b.jitter > 0.0 {
                base + rng::exponential(rng, b.jitter * base as f64).round() as u64
            } else {
                base
            }
        });
        let overload_error = offer == Offer::Accepted && {
            let b = self.backend.spec();
            let soft = match (b.soft_ceiling, b.soft_ceiling_full) {
                (Some(on), Some(full)) => soft_error(on, full, self.backend.inside()),
                _ => 0.0,
            };
            let p = 1.0 - (1.0 - b.failure_rate) * (1.0 - soft);
            p > 0.0 && self.failure_rng.f64() < p
        };
        let client_error = offer == Offer::Accepted && !overload_error && {
            let rate = self.backend.spec().client_error_rate;
            rate > 0.0 && self.error_rng.f64() < rate
        };
        let r = &mut self.reqs[slot as usize];
        r.permit = Some(permit);
        r.client = i as u32;
        r.start = start;
        r.class = class;
        r.generation = r.generation.wrapping_add(1);
        r.client_error = client_error;
        r.overload_error = overload_error;
        r.backend_holds = offer != Offer::Dropped;
        let generation = r.generation;
        if offer == Offer::Rejected {
            let at = t.saturating_add(self.backend.spec().reject_latency.0);
            self.seq += 1;
            self.events
                .push(Reverse((at, 0, self.seq, EvKind::Reply(slot, generation))));
        }
        if start == t {
            self.clients[i]
                .timeouts
                .push_back((deadline, slot, generation));
        } else {
            self.seq += 1;
            self.events.push(Reverse((
                deadline,
                0,
                self.seq,
                EvKind::Timeout(slot, generation),
            )));
        }
    }

    /// The client side of a request ends with `outcome` at `t`.
    fn finish(&mut self, slot: u32, t: u64, outcome: Outcome) -> usize {
        let r = &mut self.reqs[slot as usize];
        let i = r.client as usize;
        if let Some(p) = r.permit.take() {
            p.record(outcome);
        }
        let c = &mut self.clients[i];
        c.account(t);
        c.in_flight -= 1;
        c.observe_limit(t, &mut self.decreases);
        if self.sc.demand.kind == DemandKind::Closed {
            if c.think == 0 {
                c.ready();
            } else {
                self.seq += 1;
                let at = t.saturating_add(c.think);
                self.events
                    .push(Reverse((at, 1, self.seq, EvKind::Think(i as u32))));
            }
        }
        i
    }

    fn release_slot(&mut self, slot: u32) {
        let r = &self.reqs[slot as usize];
        if r.permit.is_none() && !r.backend_holds {
            self.free.push(slot);
        }
    }

    fn departed(&mut self, slot: u32, t: u64) {
        let r = &mut self.reqs[slot as usize];
        r.backend_holds = false;
        if let Some(p) = r.lingering.take() {
            // The server finished work whose client had left: it saw a
            // success.
            p.record(Outcome::Success);
        }
        if r.permit.is_some() {
            let latency = t - r.start;
            let client_error = r.client_error;
            let class = r.class;
            if r.overload_error {
                let i = self.finish(slot, t, Outcome::Failure);
                self.clients[i].cur.rejects += 1;
                if let Some(k) = class {
                    self.classes[k].cur.rejects += 1;
                }
                self.release_slot(slot);
                return;
            }
            // A client error says nothing about capacity: a success for the
            // limiter, but not goodput.
            let i = self.finish(slot, t, Outcome::Success);
            let c = &mut self.clients[i];
            if client_error {
                c.cur.client_errors += 1;
                if let Some(k) = class {
                    self.classes[k].cur.client_errors += 1;
                }
            } else {
                c.cur.goodput += 1;
                self.hist.record(latency);
                if t > self.steady_from {
                    self.steady_hist.record(latency);
                }
                if let Some(k) = class {
                    self.classes[k].cur.goodput += 1;
                    self.classes[k].hist.record(latency);
                }
            }
        }
        self.release_slot(slot);
    }

    fn rejected(&mut self, slot: u32, generation: u32, t: u64) {
        let r = &mut self.reqs[slot as usize];
        if r.generation != generation {
            return;
        }
        r.backend_holds = false;
        let class = r.class;
        if r.permit.is_some() {
            let i = self.finish(slot, t, Outcome::Failure);
            self.clients[i].cur.rejects += 1;
            if let Some(k) = class {
                self.classes[k].cur.rejects += 1;
            }
        }
        self.release_slot(slot);
    }

    fn timed_out(&mut self, slot: u32, generation: u32, t: u64) {
        let server_side = self.sc.limiter.server_side.unwrap_or(false);
        let r = &mut self.reqs[slot as usize];
        if r.generation != generation || r.permit.is_none() {
            return;
        }
        if server_side && r.backend_holds {
            r.lingering = r.permit.take();
        }
        let class = r.class;
        let i = self.finish(slot, t, Outcome::Failure);
        self.clients[i].cur.timeouts += 1;
        if let Some(k) = class {
            self.classes[k].cur.timeouts += 1;
        }
        self.release_slot(slot);
    }

    fn close_second(&mut self, t: u64) {
        let (capacity, c_star) =
            capacity_between(self.sc, self.backend.spec(), t.saturating_sub(SECOND), t);
        let n = self.clients.len() as f64;
        let mut total = Second {
            capacity,
            c_star,
            p50_ns: self.hist.quantile(0.5),
            p99_ns: self.hist.quantile(0.99),
            ..Second::default()
        };
        total.latency = self.hist.take();
        for c in &mut self.clients {
            c.account(t);
            // A limit that moved without a completion (a rate moves on
            // acquire and with the clock) is noted before the second closes.
            c.observe_limit(t, &mut self.decreases);
            let mut s = std::mem::take(&mut c.cur);
            s.in_flight = c.area as f64 / SECOND as f64;
            c.area = 0;
            let l = c.admission.limit();
            s.limit = l as u64;
            s.limit_median = c.held.close(t);
            s.capacity = capacity / n;
            s.c_star = c_star.map(|x| x / n);
            c.cur = fresh(l as u64, c.in_flight);
            total.limit += s.limit;
            total.limit_min += s.limit_min;
            total.limit_median += s.limit_median;
            total.limit_max = total.limit_max.max(s.limit_max);
            total.in_flight += s.in_flight;
            total.in_flight_peak += s.in_flight_peak;
            total.goodput += s.goodput;
            total.client_errors += s.client_errors;
            total.rejects += s.rejects;
            total.timeouts += s.timeouts;
            total.shed += s.shed;
            total.arrivals += s.arrivals;
            total.sent += s.sent;
            total.violations += s.violations;
            c.series.push(s);
        }
        if !total.in_flight.is_finite() {
            total.violations += 1;
        }
        for k in &mut self.classes {
            let mut s = std::mem::take(&mut k.cur);
            s.capacity = capacity;
            s.c_star = c_star;
            s.p50_ns = k.hist.quantile(0.5);
            s.p99_ns = k.hist.quantile(0.99);
            s.latency = k.hist.take();
            k.series.push(s);
        }
        self.seconds.push(total);
    }
}

/// A fresh second that opens with limit `l` and `in_flight` permits held.
fn fresh(l: u64, in_flight: u64) -> Second {
    Second {
        limit_min: l,
        limit_max: l,
        in_flight_peak: in_flight,
        ..Second::default()
    }
}

/// An exponential gap with mean `mean_ns`, at least 1 ns.
fn gap_ns(rng: &mut fastrand::Rng, mean_ns: f64) -> u64 {
    (rng::exponential(rng, mean_ns).round() as u64).max(1)
}
