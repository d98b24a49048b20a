//! The scenario file schema: one TOML file per scenario.
//!
//! A file has six parts: a header (`name`, `description`, `duration`), the
//! `[backend]`, an optional list of `[[schedule]]` changes to the backend,
//! the `[demand]`, optional `[limiter]` options, and the `[[band]]`s the run
//! must meet. Every table rejects unknown keys. Durations are strings such as
//! `"50ms"` (see [`Nanos`]). `scenarios/README.md` in the repository shows a
//! complete file and explains each band metric.
//!
//! ```toml
//! name = "hard-limit"
//! description = "a backend that rejects beyond 20 concurrent requests"
//! duration = "180s"
//!
//! [backend]
//! service_time = "50ms"
//! jitter = 0.1
//! max_concurrency = 20
//! over_limit = "reject"
//!
//! [demand]
//! kind = "closed"
//! workers = 100
//!
//! [[band]]
//! laws = ["aimd"]
//! metric = "goodput"
//! min = 0.70
//! ```

use std::fmt;
use std::path::Path;

use serde::Deserialize;

use crate::time::{MILLISECOND, Nanos, SECOND};

/// Default latency of an overload error from a backend at its ceiling.
pub const DEFAULT_REJECT_LATENCY: Nanos = Nanos(2 * MILLISECOND);

/// Default client timeout: a request not answered by then is an overload
/// failure.
pub const DEFAULT_TIMEOUT: Nanos = Nanos(SECOND);

/// One scenario: a backend, its schedule, the demand, limiter options and
/// the bands a run must meet.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name, for tables and plots.
    pub name: String,
    /// One or two sentences: what the scenario shows.
    #[serde(default)]
    pub description: String,
    /// Length of a run in virtual time: whole seconds, at least 1 s.
    pub duration: Nanos,
    /// The backend at time zero.
    pub backend: BackendSpec,
    /// Changes to the backend at given times, in time order.
    #[serde(default)]
    pub schedule: Vec<ScheduleEntry>,
    /// Who sends requests.
    pub demand: DemandSpec,
    /// Options of each client's limiter; anything not set keeps adaptx's
    /// default.
    #[serde(default)]
    pub limiter: LimiterSpec,
    /// Pass bands, written `[[band]]`.
    #[serde(default, rename = "band")]
    pub bands: Vec<BandSpec>,
    /// Where the scenario came from (a path or a built-in name); set by the
    /// loader, not read from the file.
    #[serde(skip)]
    pub source: String,
}

/// What a backend does when a request finds it at `max_concurrency`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverLimit {
    /// Answer with an overload error after `reject_latency`; the request does
    /// not occupy the backend.
    #[default]
    Reject,
    /// Never answer: the client's timeout fires and counts as an overload
    /// failure.
    Drop,
}

/// The backend model at time zero.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendSpec {
    /// Base latency of one request (its work, at full speed).
    pub service_time: Nanos,
    /// Adds an exponential term with mean `jitter × service_time`.
    /// Default 0 (flat). Allowed: finite, ≥ 0.
    #[serde(default)]
    pub jitter: f64,
    /// Processor sharing over `workers` (c): with L requests inside and
    /// L > c, each one's remaining work progresses at c/L of normal speed.
    /// Default: unlimited. Allowed: ≥ 1.
    pub workers: Option<u32>,
    /// Requests inside beyond which new ones are refused as `over_limit`
    /// says. Default: unlimited. 0 refuses everything (an outage).
    pub max_concurrency: Option<u32>,
    /// What happens to a request over `max_concurrency`. Default `reject`.
    #[serde(default)]
    pub over_limit: OverLimit,
    /// Latency of an overload error (`reject`, and the rate limit). Default
    /// 2 ms.
    #[serde(default = "default_reject_latency")]
    pub reject_latency: Nanos,
    /// Requests accepted in the trailing second beyond which new ones are
    /// rejected (as `reject`, whatever `over_limit` says). Default:
    /// unlimited. Allowed: > 0.
    pub rate_limit: Option<f64>,
    /// Fraction of answers that are errors that do not signal overload (an
    /// HTTP 400): the client records them as successes for the limiter, and
    /// they are not goodput. Default 0. Allowed: 0 ..= 1.
    #[serde(default)]
    pub client_error_rate: f64,
}

fn default_reject_latency() -> Nanos {
    DEFAULT_REJECT_LATENCY
}

fn default_timeout() -> Nanos {
    DEFAULT_TIMEOUT
}

fn default_clients() -> u32 {
    1
}

/// A change to the backend at time `at`: every field given replaces the
/// backend's value from then on (requests already inside keep the work they
/// were given). A ceiling cannot be removed, only set.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleEntry {
    /// When the change happens (after the completions and the measurement
    /// window that end at the same instant, before its arrivals).
    pub at: Nanos,
    /// New [`BackendSpec::service_time`].
    pub service_time: Option<Nanos>,
    /// New [`BackendSpec::jitter`].
    pub jitter: Option<f64>,
    /// New [`BackendSpec::workers`].
    pub workers: Option<u32>,
    /// New [`BackendSpec::max_concurrency`].
    pub max_concurrency: Option<u32>,
    /// New [`BackendSpec::over_limit`].
    pub over_limit: Option<OverLimit>,
    /// New [`BackendSpec::reject_latency`].
    pub reject_latency: Option<Nanos>,
    /// New [`BackendSpec::rate_limit`].
    pub rate_limit: Option<f64>,
    /// New [`BackendSpec::client_error_rate`].
    pub client_error_rate: Option<f64>,
}

/// How demand arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DemandKind {
    /// `workers` loops per client: wait for a permit (FIFO), send, wait for
    /// the answer, think, repeat.
    Closed,
    /// Poisson arrivals at `rate` per second per client; an arrival that
    /// finds no free permit is shed.
    Open,
}

/// The demand: `clients` clients, each with its own limiter, alike.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DemandSpec {
    /// `closed` or `open`.
    pub kind: DemandKind,
    /// Clients sharing the backend, each with its own limiter. Default 1.
    #[serde(default = "default_clients")]
    pub clients: u32,
    /// Closed only, required: workers per client.
    pub workers: Option<u32>,
    /// Closed only: a worker's pause between an answer and its next request.
    /// Default 0.
    pub think_time: Option<Nanos>,
    /// Open only, required: arrivals per second per client.
    pub rate: Option<f64>,
    /// Client timeout: a request not answered by then fails as overload (the
    /// backend, if it accepted the request, still does the work). Default 1 s.
    #[serde(default = "default_timeout")]
    pub timeout: Nanos,
}

/// Options for each client's limiter; unset ones keep adaptx's defaults.
/// A fixed-limit baseline ignores them except `sample_window`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimiterSpec {
    /// `Builder::initial_limit`.
    pub initial_limit: Option<usize>,
    /// `Builder::min_limit`.
    pub min_limit: Option<usize>,
    /// `Builder::max_limit`; also the top of the oracle's sweep.
    pub max_limit: Option<usize>,
    /// `Builder::sample_window`.
    pub sample_window: Option<Nanos>,
    /// `Builder::warmup_samples`.
    pub warmup_samples: Option<u64>,
    /// `Builder::target_latency` (Vegas).
    pub target_latency: Option<Nanos>,
    /// `Builder::tolerance` (Vegas, Gradient).
    pub tolerance: Option<f64>,
    /// `Builder::increase_rate` (AIMD).
    pub increase_rate: Option<f64>,
    /// `Builder::decrease_ratio`.
    pub decrease_ratio: Option<f64>,
    /// `Builder::utilization`.
    pub utilization: Option<f64>,
    /// `Builder::smoothing`.
    pub smoothing: Option<f64>,
    /// `Builder::jitter`.
    pub jitter: Option<f64>,
}

/// A control law: one of adaptx's three, or a peer re-implementation (see
/// [`crate::peers`]) run beside them for comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Law {
    /// `Algorithm::Aimd`.
    Aimd,
    /// `Algorithm::Vegas`.
    Vegas,
    /// `Algorithm::Gradient`.
    Gradient,
    /// Peer: Netflix concurrency-limits' Gradient2 ([`crate::peers::NetflixGradient2`]).
    NetflixGradient2,
    /// Peer: Netflix concurrency-limits' AIMD ([`crate::peers::NetflixAimd`]).
    NetflixAimd,
    /// Peer: Vector's adaptive request concurrency ([`crate::peers::VectorArc`]).
    VectorArc,
    /// Peer: Envoy's adaptive concurrency gradient controller
    /// ([`crate::peers::EnvoyGradient`]).
    EnvoyGradient,
}

impl Law {
    /// adaptx's three laws, in table order.
    pub const ALL: [Law; 3] = [Law::Aimd, Law::Vegas, Law::Gradient];

    /// The peer re-implementations, in table order.
    pub const PEERS: [Law; 4] = [
        Law::NetflixGradient2,
        Law::NetflixAimd,
        Law::VectorArc,
        Law::EnvoyGradient,
    ];

    /// Whether this is a peer re-implementation rather than one of adaptx's laws.
    pub fn is_peer(self) -> bool {
        self.algorithm().is_none()
    }

    /// The adaptx algorithm; `None` for a peer.
    pub fn algorithm(self) -> Option<adaptx::Algorithm> {
        match self {
            Law::Aimd => Some(adaptx::Algorithm::Aimd),
            Law::Vegas => Some(adaptx::Algorithm::Vegas),
            Law::Gradient => Some(adaptx::Algorithm::Gradient),
            Law::NetflixGradient2 | Law::NetflixAimd | Law::VectorArc | Law::EnvoyGradient => None,
        }
    }

    /// The name as written in files and on the command line (snake_case).
    pub fn name(self) -> &'static str {
        match self {
            Law::Aimd => "aimd",
            Law::Vegas => "vegas",
            Law::Gradient => "gradient",
            Law::NetflixGradient2 => "netflix_gradient2",
            Law::NetflixAimd => "netflix_aimd",
            Law::VectorArc => "vector_arc",
            Law::EnvoyGradient => "envoy_gradient",
        }
    }

    /// The law named `name` (as [`name`](Law::name) writes it), if any.
    pub fn from_name(name: &str) -> Option<Law> {
        Law::ALL
            .into_iter()
            .chain(Law::PEERS)
            .find(|l| l.name() == name)
    }
}

/// The name, with " (peer)" after a peer re-implementation's, so that no
/// table or chart can pass a peer off as adaptx's.
impl fmt::Display for Law {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())?;
        if self.is_peer() {
            f.write_str(" (peer)")?;
        }
        Ok(())
    }
}

/// What a band measures. Each metric is a number per run; the parameters
/// it needs are fields of the [`BandSpec`]. "Steady" is the interval from
/// the later of half the run and 30 s after the last schedule change, to the
/// end. With several clients, "limit" is the sum of the clients' limits
/// unless said otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Steady goodput as a fraction of steady capacity.
    Goodput,
    /// Steady mean of the limit at the end of each second.
    MeanLimit,
    /// The highest limit of any client at any instant in `[from, to)`
    /// (default: the whole run).
    MaxLimit,
    /// How many times any client's limit went down during the run.
    LimitDecreases,
    /// Limit at the end of the run minus the initial limit.
    LimitGrowth,
    /// Steady overload failures (rejections and timeouts) as a fraction of
    /// the requests sent.
    OverloadFraction,
    /// Arrivals shed (no free permit) as a fraction of all arrivals, whole run.
    ShedFraction,
    /// Steady median latency of successful requests, in milliseconds.
    P50Ms,
    /// Steady 99th-percentile latency of successful requests, in milliseconds.
    P99Ms,
    /// Seconds from `after` to the end of the first second (ending after
    /// `after`) whose closing limit is ≤ `threshold`; infinite if never.
    TimeToLimitAtMost,
    /// As `time_to_limit_at_most`, for a limit ≥ `threshold`.
    TimeToLimitAtLeast,
    /// Seconds from `after` to the end of the first second whose goodput is
    /// ≥ `fraction` × the mean goodput over `[baseline_from, baseline_to)`;
    /// infinite if never.
    RecoveryTime,
    /// Mean limit over `[from, to)` divided by the mean limit over
    /// `[baseline_from, baseline_to)`.
    MeanLimitRatio,
    /// `|L̄ / L̄_ref − 1|`: how far the steady mean limit is from the steady
    /// mean limit of the `reference` scenario run with the same law and seed.
    ReferenceDeviation,
    /// The smallest client's steady goodput divided by the fair share (total
    /// steady goodput / clients).
    ClientShareMin,
    /// The largest client's steady goodput divided by the fair share.
    ClientShareMax,
    /// Seconds in which a limit was outside `[min_limit, max_limit]`, or
    /// in-flight exceeded `max_limit`, or a measure was not finite.
    InvariantViolations,
}

/// A band parameter: which field of [`BandSpec`] a metric reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Param {
    After,
    From,
    To,
    BaselineFrom,
    BaselineTo,
    Threshold,
    Fraction,
    Reference,
}

impl Param {
    fn name(self) -> &'static str {
        match self {
            Param::After => "after",
            Param::From => "from",
            Param::To => "to",
            Param::BaselineFrom => "baseline_from",
            Param::BaselineTo => "baseline_to",
            Param::Threshold => "threshold",
            Param::Fraction => "fraction",
            Param::Reference => "reference",
        }
    }
}

impl Metric {
    /// The metric's name as written in a file.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Goodput => "goodput",
            Metric::MeanLimit => "mean_limit",
            Metric::MaxLimit => "max_limit",
            Metric::LimitDecreases => "limit_decreases",
            Metric::LimitGrowth => "limit_growth",
            Metric::OverloadFraction => "overload_fraction",
            Metric::ShedFraction => "shed_fraction",
            Metric::P50Ms => "p50_ms",
            Metric::P99Ms => "p99_ms",
            Metric::TimeToLimitAtMost => "time_to_limit_at_most",
            Metric::TimeToLimitAtLeast => "time_to_limit_at_least",
            Metric::RecoveryTime => "recovery_time",
            Metric::MeanLimitRatio => "mean_limit_ratio",
            Metric::ReferenceDeviation => "reference_deviation",
            Metric::ClientShareMin => "client_share_min",
            Metric::ClientShareMax => "client_share_max",
            Metric::InvariantViolations => "invariant_violations",
        }
    }

    /// (required, optional) parameters.
    fn params(self) -> (&'static [Param], &'static [Param]) {
        use Param::*;
        match self {
            Metric::MaxLimit => (&[], &[From, To]),
            Metric::TimeToLimitAtMost | Metric::TimeToLimitAtLeast => (&[After, Threshold], &[]),
            Metric::RecoveryTime => (&[After, Fraction, BaselineFrom, BaselineTo], &[]),
            Metric::MeanLimitRatio => (&[From, To, BaselineFrom, BaselineTo], &[]),
            Metric::ReferenceDeviation => (&[Reference], &[]),
            _ => (&[], &[]),
        }
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A pass band: for each of `laws`, the `metric` must be ≥ `min` and ≤ `max`
/// (either may be left out; with neither, the metric is only reported).
///
/// Every scenario runs with seeds 0–9. A bound must hold for the *median
/// seed* and a 1.5× looser bound for the *worst seed*:
///
/// - a lower bound `min` is checked as `min` on the median and `min / 1.5`
///   on the worst seed;
/// - an upper bound `max` is checked as `max` on the median and `max × 1.5`
///   on the worst seed (so a bound of 0 — "never" — stays 0).
///
/// The median is conservative: with the seeds' values ordered from worst to
/// best for that bound, it is the one at index ⌊(n − 1) / 2⌋ (the 5th worst of
/// 10), so a median that passes means more than half the seeds pass. See
/// [`crate::band`].
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BandSpec {
    /// The laws the band applies to (`aimd`, `vegas`, `gradient`).
    pub laws: Vec<Law>,
    /// What is measured.
    pub metric: Metric,
    /// Lower bound.
    pub min: Option<f64>,
    /// Upper bound.
    pub max: Option<f64>,
    /// Start of a time-to measurement.
    pub after: Option<Nanos>,
    /// Start of the measured interval.
    pub from: Option<Nanos>,
    /// End of the measured interval.
    pub to: Option<Nanos>,
    /// Start of the baseline interval.
    pub baseline_from: Option<Nanos>,
    /// End of the baseline interval.
    pub baseline_to: Option<Nanos>,
    /// A limit to reach.
    pub threshold: Option<f64>,
    /// A fraction of the baseline to reach.
    pub fraction: Option<f64>,
    /// Another scenario file, relative to this one's directory.
    pub reference: Option<String>,
    /// Where the band comes from, for the report.
    #[serde(default)]
    pub note: String,
}

impl BandSpec {
    fn param_set(&self, p: Param) -> bool {
        match p {
            Param::After => self.after.is_some(),
            Param::From => self.from.is_some(),
            Param::To => self.to.is_some(),
            Param::BaselineFrom => self.baseline_from.is_some(),
            Param::BaselineTo => self.baseline_to.is_some(),
            Param::Threshold => self.threshold.is_some(),
            Param::Fraction => self.fraction.is_some(),
            Param::Reference => self.reference.is_some(),
        }
    }

    /// A one-line description of what the band measures, with its parameters.
    pub fn describe(&self) -> String {
        let mut s = self.metric.name().to_string();
        let mut ps = Vec::new();
        let all = [
            Param::After,
            Param::From,
            Param::To,
            Param::BaselineFrom,
            Param::BaselineTo,
            Param::Threshold,
            Param::Fraction,
            Param::Reference,
        ];
        for p in all {
            let v = match p {
                Param::After => self.after.map(|d| d.to_string()),
                Param::From => self.from.map(|d| d.to_string()),
                Param::To => self.to.map(|d| d.to_string()),
                Param::BaselineFrom => self.baseline_from.map(|d| d.to_string()),
                Param::BaselineTo => self.baseline_to.map(|d| d.to_string()),
                Param::Threshold => self.threshold.map(|v| format!("{v}")),
                Param::Fraction => self.fraction.map(|v| format!("{v}")),
                Param::Reference => self.reference.clone(),
            };
            if let Some(v) = v {
                ps.push(format!("{}={v}", p.name()));
            }
        }
        if !ps.is_empty() {
            s.push('(');
            s.push_str(&ps.join(", "));
            s.push(')');
        }
        s
    }
}

/// A scenario file that could not be read or does not fit the schema.
#[derive(Debug)]
pub struct ScenarioError {
    file: String,
    message: String,
}

impl ScenarioError {
    pub(crate) fn new(file: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            file: file.into(),
            message: message.into(),
        }
    }

    /// The file (or built-in name) at fault.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// What is wrong, naming the field and what was expected.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file, self.message.trim_end())
    }
}

impl std::error::Error for ScenarioError {}

impl Scenario {
    /// Parses and checks a scenario from TOML text; `source` names it in
    /// errors.
    ///
    /// # Errors
    ///
    /// A [`ScenarioError`] naming `source`, the field and what was expected:
    /// TOML syntax, unknown keys, wrong types, and values out of range.
    pub fn from_toml(source: &str, text: &str) -> Result<Self, ScenarioError> {
        let mut s: Scenario =
            toml::from_str(text).map_err(|e| ScenarioError::new(source, e.to_string()))?;
        s.source = source.to_string();
        s.validate().map_err(|m| ScenarioError::new(source, m))?;
        Ok(s)
    }

    /// Reads and checks a scenario file.
    ///
    /// # Errors
    ///
    /// As [`from_toml`](Scenario::from_toml), plus the file not being readable.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ScenarioError::new(&name, format!("cannot read: {e}")))?;
        Self::from_toml(&name, &text)
    }

    /// The scenario's identifier: its file name without `.toml`.
    pub fn id(&self) -> &str {
        let base = self
            .source
            .rsplit(['/', '\\'])
            .next()
            .unwrap_or(&self.source);
        base.strip_suffix(".toml").unwrap_or(base)
    }

    /// The time of the last schedule change, if any.
    pub fn last_change(&self) -> Option<Nanos> {
        self.schedule.iter().map(|e| e.at).max()
    }

    /// Start of the steady interval: the later of half the run and 30 s
    /// after the last schedule change, rounded down to a whole second and
    /// never past the last second.
    pub fn steady_from(&self) -> Nanos {
        let half = self.duration.0 / 2;
        let after = self
            .last_change()
            .map_or(0, |t| t.0.saturating_add(30 * SECOND));
        let from = half.max(after) / SECOND * SECOND;
        let last = (self.duration.0 / SECOND).saturating_sub(1) * SECOND;
        Nanos(from.min(last))
    }

    /// The configured `max_limit`, or adaptx's default.
    pub fn max_limit(&self) -> usize {
        self.limiter.max_limit.unwrap_or(adaptx::DEFAULT_MAX_LIMIT)
    }

    fn validate(&self) -> Result<(), String> {
        if self.duration.0 < SECOND || self.duration.0 % SECOND != 0 {
            return Err(format!(
                "duration: {}: expected whole seconds, at least \"1s\"",
                self.duration
            ));
        }
        validate_backend("backend", &self.backend)?;
        let mut prev = Nanos(0);
        for (i, e) in self.schedule.iter().enumerate() {
            let at = format!("schedule[{i}]");
            if e.at < prev {
                return Err(format!("{at}.at: entries must be in time order"));
            }
            if e.at >= self.duration {
                return Err(format!(
                    "{at}.at: {} is not before the end of the run ({})",
                    e.at, self.duration
                ));
            }
            prev = e.at;
            let mut b = self.backend.clone();
            e.apply(&mut b);
            validate_backend(&at, &b)?;
        }
        let d = &self.demand;
        if d.clients == 0 {
            return Err("demand.clients: expected at least 1".into());
        }
        if d.timeout.0 == 0 {
            return Err("demand.timeout: expected more than 0".into());
        }
        match d.kind {
            DemandKind::Closed => {
                match d.workers {
                    None => {
                        return Err("demand.workers: required for a closed demand".into());
                    }
                    Some(0) => return Err("demand.workers: expected at least 1".into()),
                    Some(_) => {}
                }
                if d.rate.is_some() {
                    return Err("demand.rate: only for an open demand".into());
                }
            }
            DemandKind::Open => {
                match d.rate {
                    None => return Err("demand.rate: required for an open demand".into()),
                    Some(r) if !(r.is_finite() && r > 0.0) => {
                        return Err(format!("demand.rate: {r}: expected a finite rate > 0"));
                    }
                    Some(_) => {}
                }
                if d.workers.is_some() {
                    return Err("demand.workers: only for a closed demand".into());
                }
                if d.think_time.is_some() {
                    return Err("demand.think_time: only for a closed demand".into());
                }
            }
        }
        // The limiter options: let adaptx's builder check them.
        crate::sim::limiter_builder(&self.limiter, None, 0, adaptx::ManualClock::new())
            .build()
            .map_err(|e| format!("limiter.{}: {e}", e.field()))?;
        for (i, b) in self.bands.iter().enumerate() {
            let at = format!("band[{i}]");
            if b.laws.is_empty() {
                return Err(format!("{at}.laws: expected at least one law"));
            }
            for bound in [("min", b.min), ("max", b.max)] {
                if let (name, Some(v)) = bound {
                    if !v.is_finite() {
                        return Err(format!("{at}.{name}: expected a finite number"));
                    }
                }
            }
            if let (Some(lo), Some(hi)) = (b.min, b.max) {
                if lo > hi {
                    return Err(format!("{at}: min {lo} is above max {hi}"));
                }
            }
            let (required, optional) = b.metric.params();
            for p in required {
                if !b.param_set(*p) {
                    return Err(format!(
                        "{at}.{}: required by metric `{}`",
                        p.name(),
                        b.metric
                    ));
                }
            }
            for p in [
                Param::After,
                Param::From,
                Param::To,
                Param::BaselineFrom,
                Param::BaselineTo,
                Param::Threshold,
                Param::Fraction,
                Param::Reference,
            ] {
                if b.param_set(p) && !required.contains(&p) && !optional.contains(&p) {
                    return Err(format!(
                        "{at}.{}: not a parameter of metric `{}`",
                        p.name(),
                        b.metric
                    ));
                }
            }
            for (name, t) in [
                ("after", b.after),
                ("from", b.from),
                ("to", b.to),
                ("baseline_from", b.baseline_from),
                ("baseline_to", b.baseline_to),
            ] {
                if let Some(t) = t {
                    if t > self.duration {
                        return Err(format!(
                            "{at}.{name}: {t} is past the end of the run ({})",
                            self.duration
                        ));
                    }
                }
            }
            for (a, b2, name) in [
                (b.from, b.to, "to"),
                (b.baseline_from, b.baseline_to, "baseline_to"),
            ] {
                if let (Some(a), Some(z)) = (a, b2) {
                    if z.0 < a.0 + SECOND {
                        return Err(format!("{at}.{name}: expected at least 1s after its start"));
                    }
                }
            }
        }
        Ok(())
    }
}

impl ScheduleEntry {
    /// Applies the change to `b`.
    pub fn apply(&self, b: &mut BackendSpec) {
        if let Some(v) = self.service_time {
            b.service_time = v;
        }
        if let Some(v) = self.jitter {
            b.jitter = v;
        }
        if let Some(v) = self.workers {
            b.workers = Some(v);
        }
        if let Some(v) = self.max_concurrency {
            b.max_concurrency = Some(v);
        }
        if let Some(v) = self.over_limit {
            b.over_limit = v;
        }
        if let Some(v) = self.reject_latency {
            b.reject_latency = v;
        }
        if let Some(v) = self.rate_limit {
            b.rate_limit = Some(v);
        }
        if let Some(v) = self.client_error_rate {
            b.client_error_rate = v;
        }
    }
}

fn validate_backend(at: &str, b: &BackendSpec) -> Result<(), String> {
    if b.service_time.0 == 0 {
        return Err(format!("{at}.service_time: expected more than 0"));
    }
    if !(b.jitter.is_finite() && b.jitter >= 0.0) {
        return Err(format!(
            "{at}.jitter: {}: expected a finite value >= 0",
            b.jitter
        ));
    }
    if b.workers == Some(0) {
        return Err(format!("{at}.workers: expected at least 1"));
    }
    if let Some(r) = b.rate_limit {
        if !(r.is_finite() && r > 0.0) {
            return Err(format!("{at}.rate_limit: {r}: expected a finite rate > 0"));
        }
    }
    if !(0.0..=1.0).contains(&b.client_error_rate) {
        return Err(format!(
            "{at}.client_error_rate: {}: expected 0 <= value <= 1",
            b.client_error_rate
        ));
    }
    Ok(())
}
