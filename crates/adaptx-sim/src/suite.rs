//! Running many scenarios × policies × seeds on all cores: the laws, the
//! fixed-limit baselines and the oracle sweep, and the band checks.

use std::collections::BTreeMap;
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::band::{self, Check};
use crate::bounds::MAX_SEEDS;
use crate::measure::{Policy, Run};
use crate::scenario::{DemandKind, Law, Metric, Scenario, ScenarioError};
use crate::sim::{self, capacity};

/// The scenario files shipped in the repository's `scenarios/` directory,
/// compiled in: (file name, text).
pub const BUILTIN: [(&str, &str); 40] = [
    ("01-ramp.toml", include_str!("../scenarios/01-ramp.toml")),
    (
        "02-light-load.toml",
        include_str!("../scenarios/02-light-load.toml"),
    ),
    (
        "03-hard-limit.toml",
        include_str!("../scenarios/03-hard-limit.toml"),
    ),
    (
        "04-drop-timeout.toml",
        include_str!("../scenarios/04-drop-timeout.toml"),
    ),
    (
        "05-queueing.toml",
        include_str!("../scenarios/05-queueing.toml"),
    ),
    (
        "06-step-down-up.toml",
        include_str!("../scenarios/06-step-down-up.toml"),
    ),
    (
        "07-outage.toml",
        include_str!("../scenarios/07-outage.toml"),
    ),
    (
        "08-latency-step.toml",
        include_str!("../scenarios/08-latency-step.toml"),
    ),
    (
        "09-client-errors.toml",
        include_str!("../scenarios/09-client-errors.toml"),
    ),
    (
        "10-fairness.toml",
        include_str!("../scenarios/10-fairness.toml"),
    ),
    (
        "11-slow-backend.toml",
        include_str!("../scenarios/11-slow-backend.toml"),
    ),
    (
        "12-rate-overload.toml",
        include_str!("../scenarios/12-rate-overload.toml"),
    ),
    (
        "13-rate-recovery.toml",
        include_str!("../scenarios/13-rate-recovery.toml"),
    ),
    (
        "14-rate-light-load.toml",
        include_str!("../scenarios/14-rate-light-load.toml"),
    ),
    (
        "15-rate-keyed.toml",
        include_str!("../scenarios/15-rate-keyed.toml"),
    ),
    (
        "16-demand-ramp.toml",
        include_str!("../scenarios/16-demand-ramp.toml"),
    ),
    (
        "17-soft-ceiling.toml",
        include_str!("../scenarios/17-soft-ceiling.toml"),
    ),
    (
        "18-random-failures.toml",
        include_str!("../scenarios/18-random-failures.toml"),
    ),
    (
        "19-unequal-clients.toml",
        include_str!("../scenarios/19-unequal-clients.toml"),
    ),
    (
        "20-floor-drop.toml",
        include_str!("../scenarios/20-floor-drop.toml"),
    ),
    (
        "21-fast-backend.toml",
        include_str!("../scenarios/21-fast-backend.toml"),
    ),
    (
        "23-priority-surge.toml",
        include_str!("../scenarios/23-priority-surge.toml"),
    ),
    (
        "24-timeouts-adaptive-lifo.toml",
        include_str!("../scenarios/24-timeouts-adaptive-lifo.toml"),
    ),
    (
        "24-timeouts-fifo.toml",
        include_str!("../scenarios/24-timeouts-fifo.toml"),
    ),
    (
        "25-partitions.toml",
        include_str!("../scenarios/25-partitions.toml"),
    ),
    (
        "26-rate-quota.toml",
        include_str!("../scenarios/26-rate-quota.toml"),
    ),
    (
        "27-noise-onset.toml",
        include_str!("../scenarios/27-noise-onset.toml"),
    ),
    (
        "28-errors-appear.toml",
        include_str!("../scenarios/28-errors-appear.toml"),
    ),
    (
        "29-drop-slow-timeout.toml",
        include_str!("../scenarios/29-drop-slow-timeout.toml"),
    ),
    (
        "30-queue-below-start.toml",
        include_str!("../scenarios/30-queue-below-start.toml"),
    ),
    (
        "31-step-up-fivefold.toml",
        include_str!("../scenarios/31-step-up-fivefold.toml"),
    ),
    (
        "32-slow-queue.toml",
        include_str!("../scenarios/32-slow-queue.toml"),
    ),
    (
        "33-drop-open-step.toml",
        include_str!("../scenarios/33-drop-open-step.toml"),
    ),
    (
        "34-slow-queue-1s.toml",
        include_str!("../scenarios/34-slow-queue-1s.toml"),
    ),
    (
        "35-slow-queue-2s.toml",
        include_str!("../scenarios/35-slow-queue-2s.toml"),
    ),
    (
        "36-step-up-tenfold.toml",
        include_str!("../scenarios/36-step-up-tenfold.toml"),
    ),
    (
        "37-heavy-tail.toml",
        include_str!("../scenarios/37-heavy-tail.toml"),
    ),
    (
        "38-soft-noise.toml",
        include_str!("../scenarios/38-soft-noise.toml"),
    ),
    (
        "39-drop-long-timeout.toml",
        include_str!("../scenarios/39-drop-long-timeout.toml"),
    ),
    (
        "40-drop-step-down-long-timeout.toml",
        include_str!("../scenarios/40-drop-step-down-long-timeout.toml"),
    ),
];

/// A scenario to run, and whether the report shows it (a scenario loaded
/// only because another one's band refers to it is run but not shown).
#[derive(Debug, Clone)]
pub struct Entry {
    /// The scenario.
    pub scenario: Scenario,
    /// Whether it was asked for (not only loaded as a reference).
    pub shown: bool,
}

/// The compiled-in scenarios.
///
/// # Errors
///
/// If a compiled-in file does not parse (a bug caught by the tests).
pub fn builtin() -> Result<Vec<Entry>, ScenarioError> {
    BUILTIN
        .iter()
        .map(|(name, text)| {
            Ok(Entry {
                scenario: builtin_scenario(name, text)?,
                shown: true,
            })
        })
        .collect()
}

/// A compiled-in scenario; its source reads `builtin/NAME`.
fn builtin_scenario(name: &str, text: &str) -> Result<Scenario, ScenarioError> {
    Scenario::from_toml(&format!("builtin/{name}"), text)
}

/// The compiled-in scenario file `name` (for example `"03-hard-limit.toml"`).
///
/// # Errors
///
/// If there is no such file.
pub fn builtin_named(name: &str) -> Result<Scenario, ScenarioError> {
    match BUILTIN.iter().find(|(n, _)| *n == name) {
        Some((n, text)) => builtin_scenario(n, text),
        None => Err(ScenarioError::new(
            format!("builtin/{name}"),
            "no built-in scenario of that name",
        )),
    }
}

/// Loads `paths` (files, or directories whose `*.toml` files are taken in
/// name order) and every scenario their bands refer to, relative to the
/// referring file's directory.
///
/// # Errors
///
/// The first file that cannot be read or does not fit the schema, or a
/// reference that cannot be found.
pub fn load(paths: &[PathBuf]) -> Result<Vec<Entry>, ScenarioError> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| {
                    ScenarioError::new(p.display().to_string(), format!("cannot read: {e}"))
                })?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect();
            found.sort();
            if found.is_empty() {
                return Err(ScenarioError::new(
                    p.display().to_string(),
                    "no *.toml scenario files in this directory",
                ));
            }
            files.extend(found);
        } else {
            files.push(p.clone());
        }
    }
    let mut out: Vec<Entry> = Vec::new();
    for f in files {
        let scenario = Scenario::load(&f)?;
        if !out.iter().any(|e| e.scenario.id() == scenario.id()) {
            out.push(Entry {
                scenario,
                shown: true,
            });
        }
    }
    resolve_references(&mut out, |from, name| {
        // The schema admits only a bare `*.toml` file name (checked when the
        // referring file was loaded); check again before touching the file
        // system, so that nothing but a file next to the referring one is
        // ever opened.
        let bare = Path::new(name);
        if bare.file_name() != Some(bare.as_os_str())
            || bare.extension().is_none_or(|x| x != "toml")
        {
            return Err(ScenarioError::new(
                name,
                "expected the bare file name of a scenario next to the referring one",
            ));
        }
        let dir = Path::new(&from.source).parent().unwrap_or(Path::new("."));
        Scenario::load(&dir.join(bare))
    })?;
    Ok(out)
}

/// Adds to `entries` (not shown) every scenario a band refers to that is not
/// there yet, found with `find`.
///
/// # Errors
///
/// From `find`, with the referring file named.
pub fn resolve_references(
    entries: &mut Vec<Entry>,
    find: impl Fn(&Scenario, &str) -> Result<Scenario, ScenarioError>,
) -> Result<(), ScenarioError> {
    let mut i = 0;
    while i < entries.len() {
        let refs: Vec<(usize, String)> = entries[i]
            .scenario
            .bands
            .iter()
            .enumerate()
            .filter_map(|(k, b)| b.reference.clone().map(|r| (k, r)))
            .collect();
        for (k, r) in refs {
            let id = r.strip_suffix(".toml").unwrap_or(&r).to_string();
            if entries.iter().any(|e| e.scenario.id() == id) {
                continue;
            }
            let sc = find(&entries[i].scenario, &r).map_err(|e| {
                ScenarioError::new(
                    entries[i].scenario.source.clone(),
                    format!("band[{k}].reference: {e}"),
                )
            })?;
            entries.push(Entry {
                scenario: sc,
                shown: false,
            });
        }
        i += 1;
    }
    Ok(())
}

/// The seeds of `--seeds`: `N` is seeds `0..N`, `A..B` seeds `A` to `B − 1`
/// and `A..=B` seeds `A` to `B`; at most [`MAX_SEEDS`] of them.
///
/// # Errors
///
/// A message saying what was expected when `s` is not one of the three
/// forms, the range is empty or it holds more than [`MAX_SEEDS`] seeds.
///
/// # Examples
///
/// ```
/// use adaptx_sim::suite::parse_seeds;
///
/// assert_eq!(parse_seeds("3"), Ok(vec![0, 1, 2]));
/// assert_eq!(parse_seeds("10..13"), Ok(vec![10, 11, 12]));
/// assert_eq!(parse_seeds("7..=8"), Ok(vec![7, 8]));
/// assert!(parse_seeds("5..5").is_err());
/// ```
pub fn parse_seeds(s: &str) -> Result<Vec<u64>, String> {
    let expected = || {
        format!(
            "`{s}`: expected a seed count N (seeds 0..N) or a range A..B or A..=B of seeds (integers 0 ..= {})",
            u64::MAX
        )
    };
    let int = |t: &str| t.trim().parse::<u64>().map_err(|_| expected());
    let (start, count) = if let Some((a, b)) = s.split_once("..=") {
        let (a, b) = (int(a)?, int(b)?);
        (a, b.checked_sub(a).map(|n| n.saturating_add(1)))
    } else if let Some((a, b)) = s.split_once("..") {
        let (a, b) = (int(a)?, int(b)?);
        (a, b.checked_sub(a))
    } else {
        (0, Some(int(s)?))
    };
    match count {
        None | Some(0) => Err(format!("`{s}`: the range holds no seed")),
        Some(n) if n > MAX_SEEDS => Err(format!("`{s}`: {n} seeds: expected at most {MAX_SEEDS}")),
        Some(n) => Ok((0..n).map(|k| start + k).collect()),
    }
}

/// How to run a suite.
///
/// # Examples
///
/// ```
/// use adaptx_sim::Law;
/// use adaptx_sim::suite::{self, Options};
///
/// let scenario = suite::builtin_named("02-light-load.toml")?;
/// let entries = vec![suite::Entry { scenario, shown: true }];
/// let options = Options { laws: vec![Law::Ceiling], seeds: vec![0, 1], threads: 1, ..Options::default() };
/// let result = suite::run(entries, &options);
/// assert!(result.outcomes[0].run(Law::Ceiling, 1).is_some());
/// # Ok::<(), adaptx_sim::ScenarioError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Options {
    /// Laws to run.
    pub laws: Vec<Law>,
    /// Seeds to run each law with.
    pub seeds: Vec<u64>,
    /// Also run the fixed-limit baselines and the oracle sweep (on the first
    /// seed only) for the report. A scenario with a band that reads the
    /// oracle ([`Metric::needs_oracle`]) has its sweep run on every seed
    /// whatever this says.
    pub baselines: bool,
    /// Sweep every grid point of the oracle instead of stopping once the
    /// goodput stops improving.
    pub full_oracle: bool,
    /// Worker threads.
    pub threads: usize,
    /// Print progress on stderr.
    pub progress: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            laws: Law::DEFAULT.to_vec(),
            seeds: vec![0],
            baselines: false,
            full_oracle: false,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            progress: false,
        }
    }
}

/// One point of an oracle sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepPoint {
    /// The fixed limit (per client).
    pub limit: usize,
    /// Steady goodput per second.
    pub goodput: f64,
    /// Steady goodput as a fraction of capacity.
    pub goodput_fraction: f64,
    /// Steady p99 latency of successes, ms.
    pub p99_ms: f64,
    /// Steady overload failures as a fraction of requests sent.
    pub overload_fraction: f64,
}

/// The fixed-limit baselines and the oracle of one scenario, on one seed.
#[derive(Debug, Clone)]
pub struct Baselines {
    /// The seed.
    pub seed: u64,
    /// C* per client at time zero, rounded, if the backend has one.
    pub c_star: Option<usize>,
    /// Runs with fixed limits C*/2, C*, 2·C*, 5·C* (per client).
    pub fixed: Vec<Run>,
    /// The run with the best fixed limit.
    pub oracle: Run,
    /// The run with the best fixed limit whose steady overload fraction is
    /// at most [`ORACLE_OVERLOAD_CAP`]; `None` if no limit tried meets it.
    pub capped_oracle: Option<Run>,
    /// Every fixed limit tried, in limit order.
    pub sweep: Vec<SweepPoint>,
}

/// Everything run for one scenario.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The scenario.
    pub scenario: Scenario,
    /// Whether the report shows it.
    pub shown: bool,
    /// Law runs, by law then seed.
    pub runs: BTreeMap<(Law, u64), Run>,
    /// Law runs that panicked: (law, seed, message).
    pub panics: Vec<(Law, u64, String)>,
    /// Baselines and oracle, if asked for (on the first seed).
    pub baselines: Option<Result<Baselines, String>>,
    /// Every oracle sweep run, by seed: the first seed's when baselines are
    /// asked for, and each seed's when a band reads the oracle (see
    /// [`Metric::needs_oracle`]).
    pub oracles: BTreeMap<u64, Result<Baselines, String>>,
    /// The band checks.
    pub checks: Vec<Check>,
}

impl Outcome {
    /// The run of `law` on `seed`, if it completed.
    pub fn run(&self, law: Law, seed: u64) -> Option<&Run> {
        self.runs.get(&(law, seed))
    }
}

/// A finished suite.
#[derive(Debug, Clone)]
pub struct Suite {
    /// One per scenario, in load order.
    pub outcomes: Vec<Outcome>,
    /// The options it ran with.
    pub options: Options,
    /// Wall time.
    pub wall: Duration,
    /// Sum of the time spent in each simulation (CPU time, roughly).
    pub busy: Duration,
    /// Requests simulated (sent to a backend), over every run.
    pub requests: u64,
}

impl Suite {
    /// Simulated requests per second of one core.
    pub fn requests_per_core_second(&self) -> f64 {
        self.requests as f64 / self.busy.as_secs_f64().max(1e-9)
    }

    /// Every check, in scenario and band order.
    pub fn checks(&self) -> impl Iterator<Item = &Check> {
        self.outcomes
            .iter()
            .filter(|o| o.shown)
            .flat_map(|o| &o.checks)
    }

    /// Whether every band check passed.
    pub fn passed(&self) -> bool {
        self.checks().all(Check::passed)
    }
}

enum Job {
    Law(usize, Law, u64),
    Baselines(usize, u64),
}

enum Output {
    Run(Result<Run, String>),
    Baselines(Result<(Box<Baselines>, u64), String>),
}

fn panic_message(e: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = e.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = e.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}

/// Runs `entries` as `options` says, on `options.threads` threads, and
/// checks the bands.
pub fn run(entries: Vec<Entry>, options: &Options) -> Suite {
    let start = Instant::now();
    let mut jobs = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        // A band that reads the oracle needs its sweep on every seed.
        let banded = e.shown
            && e.scenario.bands.iter().any(|b| {
                b.metric.needs_oracle() && b.laws.iter().any(|l| options.laws.contains(l))
            });
        for (k, &seed) in options.seeds.iter().enumerate() {
            if banded || (k == 0 && options.baselines && e.shown) {
                jobs.push(Job::Baselines(i, seed));
            }
        }
    }
    let first_seed = options.seeds.first().copied();
    for (i, e) in entries.iter().enumerate() {
        for &law in &options.laws {
            if !law.applies_to(&e.scenario) {
                continue;
            }
            for &seed in &options.seeds {
                jobs.push(Job::Law(i, law, seed));
            }
        }
    }
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<(Output, Duration)>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    let threads = options.threads.clamp(1, jobs.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(k) else { break };
                    let t = Instant::now();
                    let (out, label, requests) = match *job {
                        Job::Law(i, law, seed) => {
                            let sc = &entries[i].scenario;
                            let r = catch_unwind(AssertUnwindSafe(|| {
                                sim::run(sc, Policy::Law(law), seed)
                            }))
                            .map_err(panic_message);
                            let n = r.as_ref().map_or(0, Run::requests);
                            (Output::Run(r), format!("{} {law} seed {seed}", sc.id()), n)
                        }
                        Job::Baselines(i, seed) => {
                            let sc = &entries[i].scenario;
                            let r = catch_unwind(AssertUnwindSafe(|| {
                                let (b, n) = baselines(sc, seed, options.full_oracle);
                                (Box::new(b), n)
                            }))
                            .map_err(panic_message);
                            let n = r.as_ref().map_or(0, |(_, n)| *n);
                            let what = match &r {
                                Ok((b, _)) => format!(
                                    "{} baselines + oracle seed {seed} ({} fixed limits)",
                                    sc.id(),
                                    b.sweep.len()
                                ),
                                Err(_) => format!("{} baselines seed {seed}", sc.id()),
                            };
                            (Output::Baselines(r), what, n)
                        }
                    };
                    let took = t.elapsed();
                    let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                    if options.progress {
                        // A closed stderr must not end the run.
                        let _ = writeln!(
                            std::io::stderr().lock(),
                            "[{d:>4}/{}] {label}: {:.2} s, {} requests",
                            jobs.len(),
                            took.as_secs_f64(),
                            requests
                        );
                    }
                    let mut res = results.lock().unwrap_or_else(|e| e.into_inner());
                    res[k] = Some((out, took));
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());

    let mut outcomes: Vec<Outcome> = entries
        .into_iter()
        .map(|e| Outcome {
            scenario: e.scenario,
            shown: e.shown,
            runs: BTreeMap::new(),
            panics: Vec::new(),
            baselines: None,
            oracles: BTreeMap::new(),
            checks: Vec::new(),
        })
        .collect();
    let mut busy = Duration::ZERO;
    let mut requests = 0u64;
    for (job, res) in jobs.iter().zip(results) {
        let Some((out, took)) = res else { continue };
        busy += took;
        match (job, out) {
            (Job::Law(i, law, seed), Output::Run(Ok(r))) => {
                requests += r.requests();
                outcomes[*i].runs.insert((*law, *seed), r);
            }
            (Job::Law(i, law, seed), Output::Run(Err(m))) => {
                outcomes[*i].panics.push((*law, *seed, m));
            }
            (Job::Baselines(i, seed), Output::Baselines(r)) => {
                let r = r.map(|(b, n)| {
                    requests += n;
                    *b
                });
                if options.baselines && Some(*seed) == first_seed {
                    outcomes[*i].baselines = Some(r.clone());
                }
                outcomes[*i].oracles.insert(*seed, r);
            }
            _ => {}
        }
    }
    for i in 0..outcomes.len() {
        let checks = checks(&outcomes, i, options);
        outcomes[i].checks = checks;
    }
    Suite {
        outcomes,
        options: options.clone(),
        wall: start.elapsed(),
        busy,
        requests,
    }
}

/// The band checks of scenario `i`.
fn checks(outcomes: &[Outcome], i: usize, options: &Options) -> Vec<Check> {
    let o = &outcomes[i];
    let mut out = Vec::new();
    for (k, b) in o.scenario.bands.iter().enumerate() {
        let reference = b.reference.as_ref().and_then(|r| {
            let id = r.strip_suffix(".toml").unwrap_or(r);
            outcomes.iter().find(|x| x.scenario.id() == id)
        });
        for &law in &b.laws {
            if !options.laws.contains(&law) {
                continue;
            }
            let mut values = Vec::new();
            let mut failed = Vec::new();
            for &seed in &options.seeds {
                match o.run(law, seed) {
                    Some(r) => {
                        let rf = reference.and_then(|x| x.run(law, seed));
                        let sweep = o.oracles.get(&seed);
                        let refs = band::Refs {
                            reference: rf,
                            oracle: sweep.and_then(|s| s.as_ref().ok()).map(|s| &s.oracle),
                            capped_oracle: sweep
                                .and_then(|s| s.as_ref().ok())
                                .and_then(|s| s.capped_oracle.as_ref()),
                        };
                        if b.metric == Metric::ReferenceDeviation && rf.is_none() {
                            failed.push((seed, "the reference run is missing".to_string()));
                        } else if b.metric.needs_oracle() && refs.oracle.is_none() {
                            let m = match sweep {
                                Some(Err(e)) => format!("the oracle sweep panicked: {e}"),
                                _ => "the oracle sweep is missing".to_string(),
                            };
                            failed.push((seed, m));
                        } else {
                            values.push((band::metric(r, b, &refs), seed));
                        }
                    }
                    None => {
                        let m = o
                            .panics
                            .iter()
                            .find(|p| p.0 == law && p.1 == seed)
                            .map_or("no run".to_string(), |p| format!("panicked: {}", p.2));
                        failed.push((seed, m));
                    }
                }
            }
            out.extend(band::check(o.scenario.id(), k, b, law, &values, &failed));
        }
    }
    out
}

/// At most this many fixed limits (+1) are tried between the best grid
/// point's neighbours.
pub const REFINE_POINTS: usize = 32;

/// How close to the best goodput found a smaller fixed limit must come to be
/// the oracle: 0.5 %.
pub const ORACLE_TOLERANCE: f64 = 0.005;

/// The most steady overload (rejections and timeouts as a fraction of the
/// requests sent) the capped oracle may have: 2 %. On a ceiling that
/// rejects cheaply (a rate limit) the plain oracle can win by sending far
/// more than the backend takes and failing most of it; the capped oracle is
/// the best fixed limit that does not.
pub const ORACLE_OVERLOAD_CAP: f64 = 0.02;

/// The fixed limits the oracle tries: a geometric grid (×1.25, at least +1)
/// from 1 to `cap`, `cap` included.
pub fn oracle_grid(cap: usize) -> Vec<usize> {
    let mut g = Vec::new();
    let mut v = 1usize;
    while v < cap {
        g.push(v);
        v = (v + 1).max((v as f64 * 1.25).ceil() as usize);
    }
    g.push(cap.max(1));
    g
}

/// The largest fixed limit worth trying: `max_limit` (`max_rate` with a
/// rate limiter, where the fixed limits are fixed rates), and for a closed
/// demand through a concurrency limiter no more than the workers (a limit
/// above them never binds).
pub fn oracle_cap(sc: &Scenario) -> usize {
    if let Some(r) = &sc.rate_limiter {
        return usize::try_from(r.max_rate()).unwrap_or(usize::MAX).max(1);
    }
    let m = sc.max_limit();
    match sc.demand.kind {
        DemandKind::Closed => m.min(sc.demand.workers.unwrap_or(1) as usize).max(1),
        DemandKind::Open => m,
    }
}

fn point(limit: usize, r: &Run) -> SweepPoint {
    SweepPoint {
        limit,
        goodput: r.steady_goodput(),
        goodput_fraction: r.goodput_fraction(),
        p99_ms: r.steady_p99_ns.map_or(f64::NAN, |v| v as f64 / 1e6),
        overload_fraction: r.overload_fraction(),
    }
}

/// The fixed-limit baselines and the oracle of `sc` on `seed`, and the
/// number of requests simulated.
///
/// The oracle is the smallest fixed limit (per client) whose steady goodput
/// is within [`ORACLE_TOLERANCE`] of the highest found: on a plateau, where
/// more concurrency buys nothing but queueing or rejections, noise does not
/// pick a random point of it. The sweep runs the grid of
/// [`oracle_grid`] up to [`oracle_cap`] in increasing order and — unless
/// `full` — stops climbing once three grid points in a row fail to beat the
/// best goodput so far by 0.5 %; it then tries every limit between the best
/// grid point's neighbours (at most [`REFINE_POINTS`] of them, evenly spaced,
/// where they are far apart).
///
/// The capped oracle is the same rule among the limits whose steady
/// overload fraction is at most [`ORACLE_OVERLOAD_CAP`]: after the plain
/// oracle, the sweep tries every limit between the grid points on either
/// side of the best limit within the cap (about 0.45 × that limit more runs
/// at most, none when the highest goodput tried is within the cap), and
/// picks the smallest limit within the cap whose goodput is within
/// [`ORACLE_TOLERANCE`] of the best within the cap. It is `None` when no
/// limit tried is within the cap.
pub fn baselines(sc: &Scenario, seed: u64, full: bool) -> (Baselines, u64) {
    let mut tried: BTreeMap<usize, Run> = BTreeMap::new();
    let mut requests = 0u64;
    let mut eval = |l: usize, tried: &mut BTreeMap<usize, Run>| -> f64 {
        if let Some(r) = tried.get(&l) {
            return r.steady_goodput();
        }
        let r = sim::run(sc, Policy::Fixed(l), seed);
        requests += r.requests();
        let g = r.steady_goodput();
        tried.insert(l, r);
        g
    };
    let clients = sc.demand.clients as f64;
    // With a rate limiter the fixed baselines are rates: "C*" is the
    // backend's ceiling in requests per second.
    let c_star = if sc.rate_limiter.is_some() {
        let (cap, _) = capacity(sc, &sc.backend);
        let good = (1.0 - sc.backend.client_error_rate) * (1.0 - sc.backend.failure_rate);
        let rate = cap / good.max(f64::MIN_POSITIVE) / clients;
        rate.is_finite().then(|| (rate.round() as usize).max(1))
    } else {
        capacity(sc, &sc.backend)
            .1
            .map(|c| ((c / clients).round() as usize).max(1))
    };
    let cap = oracle_cap(sc);
    let grid = oracle_grid(cap);
    let mut best = (f64::NEG_INFINITY, 0usize);
    let mut best_idx = 0;
    let mut stale = 0;
    for (idx, &l) in grid.iter().enumerate() {
        let g = eval(l, &mut tried);
        if g > best.0 * (1.0 + ORACLE_TOLERANCE) || best.0 <= 0.0 {
            stale = 0;
        } else {
            stale += 1;
        }
        if g > best.0 {
            best = (g, l);
            best_idx = idx;
        }
        if !full && stale >= 3 {
            break;
        }
    }
    let lo = if best_idx == 0 {
        1
    } else {
        grid[best_idx - 1] + 1
    };
    let hi = grid.get(best_idx + 1).map_or(cap, |&h| h - 1);
    // Every limit between them, or — where they are far apart, as fixed
    // rates are — REFINE_POINTS evenly spaced ones.
    let step = ((hi.saturating_sub(lo)) / REFINE_POINTS).max(1);
    for l in (lo..=hi).step_by(step) {
        let g = eval(l, &mut tried);
        if g > best.0 || (g == best.0 && l < best.1) {
            best = (g, l);
        }
    }
    if let Some(l) = pick(&tried, |_| true) {
        best.1 = l;
    }
    // The capped oracle: the same rule among the limits whose overload is
    // within the cap, after trying every limit between the grid neighbours of
    // the best such limit (the sweep refined around the plain oracle only).
    let capped = |r: &Run| r.overload_fraction() <= ORACLE_OVERLOAD_CAP;
    let capped_best = tried
        .iter()
        .filter(|(_, r)| capped(r))
        .max_by(|a, b| a.1.steady_goodput().total_cmp(&b.1.steady_goodput()))
        .map(|(&l, _)| l);
    if let Some(c) = capped_best {
        let lo = grid.iter().rev().find(|&&g| g < c).map_or(1, |&g| g + 1);
        let hi = grid.iter().find(|&&g| g > c).map_or(cap, |&g| g - 1);
        let step = (hi.saturating_sub(lo) / REFINE_POINTS).max(1);
        for l in (lo..=hi).step_by(step) {
            eval(l, &mut tried);
        }
    }
    let capped_limit = pick(&tried, capped);
    let mut fixed_limits = Vec::new();
    if let Some(c) = c_star {
        for l in [(c / 2).max(1), c, 2 * c, 5 * c] {
            if !fixed_limits.contains(&l) {
                fixed_limits.push(l);
            }
        }
    }
    for &l in &fixed_limits {
        eval(l, &mut tried);
    }
    let sweep = tried.iter().map(|(&l, r)| point(l, r)).collect();
    let fixed = fixed_limits
        .iter()
        .filter_map(|l| tried.get(l).cloned())
        .collect();
    let capped_oracle = capped_limit.and_then(|l| tried.get(&l).cloned());
    let oracle = tried
        .remove(&best.1)
        .unwrap_or_else(|| sim::run(sc, Policy::Fixed(best.1.max(1)), seed));
    (
        Baselines {
            seed,
            c_star,
            fixed,
            oracle,
            capped_oracle,
            sweep,
        },
        requests,
    )
}

/// The smallest limit of `tried` that passes `eligible` and whose steady
/// goodput is within [`ORACLE_TOLERANCE`] of the best eligible one.
fn pick(tried: &BTreeMap<usize, Run>, eligible: impl Fn(&Run) -> bool) -> Option<usize> {
    let top = tried
        .values()
        .filter(|r| eligible(r))
        .map(Run::steady_goodput)
        .fold(f64::NEG_INFINITY, f64::max);
    tried
        .iter()
        .find(|(_, r)| eligible(r) && r.steady_goodput() >= top * (1.0 - ORACLE_TOLERANCE))
        .map(|(&l, _)| l)
}
