//! How much work a suite will do, estimated before it starts, and the limits
//! that refuse a suite that would run for hours or exhaust memory.
//!
//! Field bounds ([`crate::bounds`]) keep every value meaningful, but not the
//! product of them: an open demand of 10⁸ requests per second for an hour is
//! within each bound and still 3.6 × 10¹¹ requests. So before running, the
//! command adds up an upper estimate of the events of every run the suite
//! will do — the laws × seeds, and with baselines the fixed limits and the
//! oracle sweep — and refuses, naming the scenario that costs most, when the
//! total exceeds [`Limits::max_events`] (`--max-events`), or when the series
//! the report keeps exceed [`Limits::max_memory`] (`--max-memory-mib`).
//!
//! # The estimate
//!
//! An *event* is one request sent (or one open-demand arrival shed), plus one
//! per client per measurement second; each costs a few `O(log n)` heap
//! operations. Per run, with `T` the duration in seconds and `N` the
//! clients:
//!
//! `events = N × (requests + T) + schedule entries`
//!
//! where `requests` is what one client can send at the **largest** rate of
//! any time of the run ([`peak_rate`]):
//!
//! - open demand: `rate × T` (the mean of its Poisson arrivals);
//! - closed demand: `min(p × (T / c + 1), w × (T / (c + think_time) + 1))`
//!   — each of the `p` permits is held at least `c` per request, each of the
//!   `w` workers is busy at least `c + think_time` — with `c` the shortest
//!   time in which the backend can answer: the smallest of `service_time`,
//!   the client `timeout` and — when the backend has a ceiling that rejects
//!   or a rate limit — `reject_latency`, over every backend state of the
//!   schedule. `p` is the workers, capped by the policy: `max_limit` for a
//!   law, the fixed limit for a baseline.
//!
//! For a closed demand this is a strict upper bound of what a run sends
//! (a property test checks it); it is close for runs that reject at the
//! backend (a worker then cycles at `reject_latency`) and some times above
//! the real count otherwise.
//!
//! **Demand that moves** (`[[client]]`, `[[demand.schedule]]`): [`peak_rate`]
//! takes the **largest** rate (open) or worker count and shortest think time
//! (closed) any client has at any time of the run, not the ones at time zero;
//! behind a `[rate_limiter]` a closed demand's refused workers try again at
//! each token, up to `workers × max_rate` tries per second. Anything new that
//! changes the demand must do the same: the estimate has to stay an upper
//! bound for the limit to mean anything.

use std::fmt;

use crate::measure::Second;
use crate::scenario::{DemandKind, OverLimit, Scenario};
use crate::suite::{self, Entry, Options};
use crate::time::SECOND;

/// Simulated events per second of one core that the estimate converts into
/// time: 2 million, a conservative figure (release builds do 2–5 million on
/// one core, depending on the scenario and the machine).
pub const EVENTS_PER_CORE_SECOND: f64 = 2e6;

/// Default `--max-events`: 3 × 10¹⁰ estimated events, at most 250
/// core-minutes at [`EVENTS_PER_CORE_SECOND`] — and usually far less, since
/// the estimate is an upper bound: the shipped suite's band check over ten
/// seeds (40 scenarios, every law) estimates 5.2 × 10⁹ events and simulates
/// 1.6 × 10⁸ requests (40–80 core-seconds); the demo, with the peers' laws,
/// the baselines and the oracle, estimates 6.4 × 10⁹ and simulates 5 × 10⁸
/// (one to three core-minutes). The default admits those with margins of
/// 5.8× and 4.7×, and refuses an open demand of 10⁸ requests per second for
/// two minutes run by adaptx's four concurrency laws (4.8 × 10¹⁰ events; one
/// law alone, 1.2 × 10¹⁰ events and about 100 core-minutes, is admitted).
pub const DEFAULT_MAX_EVENTS: f64 = 3e10;

/// Default `--max-memory-mib`: 4 GiB of per-second series kept for the
/// report.
pub const DEFAULT_MAX_MEMORY: u64 = 4 << 30;

/// Bytes one per-second series entry takes ([`Second`]).
const SECOND_BYTES: f64 = std::mem::size_of::<Second>() as f64;

/// The limits a suite's estimate must stay within.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Most estimated events over every run.
    pub max_events: f64,
    /// Most bytes of per-second series held until the report is written.
    pub max_memory: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_events: DEFAULT_MAX_EVENTS,
            max_memory: DEFAULT_MAX_MEMORY,
        }
    }
}

/// The estimated work of one scenario in a suite.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioWork {
    /// The scenario's source (file or built-in name).
    pub source: String,
    /// Runs: laws × seeds, plus baselines and oracle if asked for.
    pub runs: u64,
    /// Estimated events over those runs.
    pub events: f64,
    /// Bytes of per-second series those runs keep.
    pub memory: f64,
    /// The largest per-client request rate of one of its runs, per second.
    pub peak_rate: f64,
}

/// The estimated work of a suite.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// One per scenario, in the order given.
    pub scenarios: Vec<ScenarioWork>,
}

impl Estimate {
    /// Estimated events of the whole suite.
    pub fn events(&self) -> f64 {
        self.scenarios.iter().map(|s| s.events).sum()
    }

    /// Bytes of per-second series of the whole suite.
    pub fn memory(&self) -> f64 {
        self.scenarios.iter().map(|s| s.memory).sum()
    }

    /// The scenario that costs most events.
    pub fn largest(&self) -> Option<&ScenarioWork> {
        self.scenarios
            .iter()
            .max_by(|a, b| a.events.total_cmp(&b.events))
    }

    /// Estimated core-minutes at [`EVENTS_PER_CORE_SECOND`].
    pub fn core_minutes(&self) -> f64 {
        self.events() / EVENTS_PER_CORE_SECOND / 60.0
    }
}

/// The suite's work is over a limit.
#[derive(Debug, Clone, PartialEq)]
pub struct TooMuchWork {
    message: String,
}

impl fmt::Display for TooMuchWork {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TooMuchWork {}

/// The largest per-client request rate (per second) of a run of `sc` whose
/// policy lets at most `concurrency` requests per client in flight (`None`:
/// only the demand bounds it). See the [module docs](self).
pub fn peak_rate(sc: &Scenario, concurrency: Option<usize>) -> f64 {
    match closed_cycles(sc, concurrency) {
        // The highest rate any client reaches at any time of the run.
        None => (0..sc.demand.clients)
            .map(|i| sc.client_demand(i).rate.max())
            .fold(0.0, f64::max),
        Some(c) => (c.permits / c.per_permit)
            .min(c.workers / c.per_worker)
            .max(c.workers * rate_cap(sc, concurrency)),
    }
}

/// Estimated events of one run of `sc` (see [`peak_rate`] for
/// `concurrency`).
pub fn run_events(sc: &Scenario, concurrency: Option<usize>) -> f64 {
    let secs = sc.duration.as_secs_f64().ceil();
    let clients = f64::from(sc.demand.clients);
    let requests = match closed_cycles(sc, concurrency) {
        // Poisson arrivals: the mean count.
        None => peak_rate(sc, concurrency) * secs,
        // Each permit and each worker sends at most once per cycle, plus
        // once at the start.
        // Behind a rate limiter every refused worker tries again at the next
        // token: up to `workers` tries per token.
        Some(c) => (c.permits * (secs / c.per_permit + 1.0))
            .min(c.workers * (secs / c.per_worker + 1.0))
            .max(c.workers * (rate_cap(sc, concurrency) * secs + 1.0)),
    };
    clients * (requests + secs) + sc.schedule.len() as f64 + sc.demand.schedule.len() as f64
}

/// With a `[rate_limiter]`, the highest rate a policy can run at per client:
/// `cap` (a fixed rate) if given, else `max_rate` or the fastest fixed
/// baseline (5 × the backend's ceiling), whichever is higher; 0 without a
/// rate limiter.
fn rate_cap(sc: &Scenario, cap: Option<usize>) -> f64 {
    let Some(r) = &sc.rate_limiter else {
        return 0.0;
    };
    if let Some(c) = cap {
        return c as f64;
    }
    let (ceiling, _) = crate::sim::capacity(sc, &sc.backend);
    let baseline = if ceiling.is_finite() {
        5.0 * ceiling
    } else {
        0.0
    };
    (r.max_rate() as f64).max(baseline)
}

/// How fast a closed demand's permits and workers can cycle.
struct Cycles {
    /// Permits per client: the workers, up to the policy's cap.
    permits: f64,
    /// Seconds a permit is held at least per request: the shortest answer.
    per_permit: f64,
    /// Workers per client.
    workers: f64,
    /// Seconds a worker takes at least per request: the shortest answer and
    /// the think time.
    per_worker: f64,
}

/// `None` for an open demand.
fn closed_cycles(sc: &Scenario, concurrency: Option<usize>) -> Option<Cycles> {
    let d = &sc.demand;
    if d.kind != DemandKind::Closed {
        return None;
    }
    // The most workers and the shortest think time any client has at any
    // time of the run.
    let (workers, think) = (0..d.clients)
        .map(|i| {
            let c = sc.client_demand(i);
            let think = c.think.iter().map(|p| p.1).min().unwrap_or(0);
            (c.workers.max(), think)
        })
        .fold((0.0_f64, u64::MAX), |(w, t), (cw, ct)| {
            (w.max(cw), t.min(ct))
        });
    let think = if think == u64::MAX { 0 } else { think };
    // The shortest answer over every backend state of the run.
    let answer = sc
        .backend_states()
        .map(|b| {
            let mut c = b.service_time.min(d.timeout);
            let rejects = b.rate_limit.is_some()
                || (b.max_concurrency.is_some() && b.over_limit == OverLimit::Reject);
            if rejects {
                c = c.min(b.reject_latency);
            }
            c.0
        })
        .min()
        .unwrap_or(d.timeout.0);
    let secs = |ns: u64| ns.max(1) as f64 / SECOND as f64;
    Some(Cycles {
        permits: concurrency.map_or(workers, |c| workers.min(c as f64)),
        per_permit: secs(answer),
        workers,
        per_worker: secs(answer.saturating_add(think)),
    })
}

/// Bytes of per-second series one run of `sc` keeps (the total and one per
/// client).
pub fn run_memory(sc: &Scenario) -> f64 {
    let secs = sc.duration.as_secs_f64().ceil();
    secs * (f64::from(sc.demand.clients) + 1.0) * SECOND_BYTES
}

/// Most runs a baselines job does: every point of the oracle's grid, every
/// limit between the two grid points around the best one (the widest such
/// gap), and the four fixed limits.
pub fn baseline_runs(sc: &Scenario) -> u64 {
    let grid = suite::oracle_grid(suite::oracle_cap(sc));
    let widest = grid
        .windows(3)
        .map(|w| (w[2] - w[0]).saturating_sub(1))
        .chain(grid.get(1).copied())
        .max()
        .unwrap_or(1)
        .min(suite::REFINE_POINTS + 1);
    (grid.len() + widest + 4) as u64
}

/// The work `options` will do on `entries`.
pub fn estimate(entries: &[Entry], options: &Options) -> Estimate {
    let seeds = options.seeds.len() as u64;
    let scenarios = entries
        .iter()
        .map(|e| {
            let sc = &e.scenario;
            let laws = options.laws.iter().filter(|l| l.applies_to(sc)).count() as u64;
            let law_runs = laws * seeds;
            // The most a client's policy lets in flight: its max_limit (a
            // rate limiter bounds no concurrency).
            let cap = if sc.rate_limiter.is_some() {
                None
            } else {
                (0..sc.demand.clients)
                    .map(|i| {
                        let l = sc.client_limiter(i);
                        let max = l.max_limit.unwrap_or(adaptx::DEFAULT_MAX_LIMIT);
                        max.max(l.min_limit.unwrap_or(1))
                    })
                    .max()
            };
            let mut runs = law_runs;
            let mut events = law_runs as f64 * run_events(sc, cap);
            // Every run of a law keeps its series until the report.
            let mut memory = law_runs as f64 * run_memory(sc);
            let mut peak = peak_rate(sc, cap);
            // Baselines: on the first seed for the report, and on every seed
            // for a band that reads an oracle.
            let banded = sc.bands.iter().any(|b| {
                b.metric.needs_oracle() && b.laws.iter().any(|l| options.laws.contains(l))
            });
            let sweeps = if banded {
                seeds
            } else {
                u64::from(options.baselines && e.shown && seeds > 0)
            };
            if sweeps > 0 {
                // A fixed limit of 5·C* may pass max_limit: only the demand
                // bounds a baseline's concurrency.
                let b = sweeps * baseline_runs(sc);
                runs += b;
                events += b as f64 * run_events(sc, None);
                memory += b as f64 * run_memory(sc);
                peak = peak.max(peak_rate(sc, None));
            }
            ScenarioWork {
                source: sc.source.clone(),
                runs,
                events,
                memory,
                peak_rate: peak,
            }
        })
        .collect();
    Estimate { scenarios }
}

/// Estimates the work of `options` on `entries` and checks it against
/// `limits`.
///
/// # Errors
///
/// [`TooMuchWork`] naming the scenario that costs most, the estimate and the
/// limit, and the flag that raises it.
pub fn check(
    entries: &[Entry],
    options: &Options,
    limits: Limits,
) -> Result<Estimate, TooMuchWork> {
    let est = estimate(entries, options);
    let events = est.events();
    if events > limits.max_events {
        let worst = est.largest().map_or(String::new(), |w| {
            format!(
                "; most of it {}: {} runs x up to {} requests/s per client, {} events",
                w.source,
                w.runs,
                crate::bounds::num(w.peak_rate.round()),
                sci(w.events)
            )
        });
        return Err(TooMuchWork {
            message: format!(
                "the work estimate is {} events (about {} core-minutes at {} events/s per core), over the limit of {}{worst}; shorten the run or lower the rate, or raise the limit with --max-events",
                sci(events),
                sci(est.core_minutes()),
                sci(EVENTS_PER_CORE_SECOND),
                sci(limits.max_events),
            ),
        });
    }
    let memory = est.memory();
    if memory > limits.max_memory as f64 {
        let mib = |b: f64| (b / f64::from(1 << 20)).ceil();
        let worst = est
            .scenarios
            .iter()
            .max_by(|a, b| a.memory.total_cmp(&b.memory))
            .map_or(String::new(), |w| {
                format!(
                    "; most of it {}: {} runs x {} MiB",
                    w.source,
                    w.runs,
                    mib(w.memory / w.runs.max(1) as f64)
                )
            });
        return Err(TooMuchWork {
            message: format!(
                "the runs would keep {} MiB of per-second series, over the limit of {} MiB{worst}; shorten the run, use fewer clients or seeds, or raise the limit with --max-memory-mib",
                mib(memory),
                mib(limits.max_memory as f64)
            ),
        });
    }
    Ok(est)
}

/// A count for a message: three significant digits, exponent form when
/// large (`1.2e14`).
fn sci(v: f64) -> String {
    if v.abs() >= 1e6 {
        let s = format!("{v:.2e}");
        // 1.20e14 → 1.2e14, 2.00e10 → 2e10
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let m = m.trim_end_matches('0').trim_end_matches('.');
        format!("{m}e{e}")
    } else if v.abs() >= 100.0 || v == v.round() {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}
