//! The scenario file schema: one TOML file per scenario.
//!
//! A file has six parts: a header (`name`, `description`, `duration`), the
//! `[backend]`, an optional list of `[[schedule]]` changes to the backend,
//! the `[demand]`, optional `[limiter]` options, and the `[[band]]`s the run
//! must meet. Every table rejects unknown keys. Durations are strings such as
//! `"50ms"` (see [`Nanos`]). Every value has a range ([`crate::bounds`]).
//! `scenarios/README.md` in the repository shows a complete file, explains
//! each band metric and lists the ranges.
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
use std::io::Read;
use std::path::Path;

use serde::Deserialize;

use crate::class::{ClassSpec, PartitionSpec, QueueSpec};

use crate::bounds::{
    self, MAX_BAND_BOUND, MAX_BANDS, MAX_CLIENTS, MAX_CONCURRENCY, MAX_FILE_BYTES, MAX_FRACTION,
    MAX_JITTER, MAX_LATENCY, MAX_LIMIT, MAX_NAME_CHARS, MAX_RATE, MAX_REFERENCE_BYTES,
    MAX_SCHEDULE_ENTRIES, MAX_TEXT_CHARS, MAX_THRESHOLD, MAX_TOTAL_WORKERS, MAX_WARMUP_SAMPLES,
};
use crate::demand::{ClientSpec, DemandChange};
use crate::rate::RateLimiterSpec;
use crate::time::{MILLISECOND, Nanos, SECOND};

/// Default latency of an overload error from a backend at its ceiling.
pub const DEFAULT_REJECT_LATENCY: Nanos = Nanos(2 * MILLISECOND);

/// Default client timeout: a request not answered by then is an overload
/// failure.
pub const DEFAULT_TIMEOUT: Nanos = Nanos(SECOND);

/// One scenario: a backend, its schedule, the demand, limiter options and
/// the bands a run must meet.
///
/// # Examples
///
/// ```
/// use adaptx_sim::{Policy, Scenario, run};
///
/// let sc = Scenario::from_toml("mine.toml", r#"
///     name = "mine"
///     duration = "20s"
///     [backend]
///     service_time = "10ms"
///     max_concurrency = 8
///     over_limit = "reject"
///     [demand]
///     kind = "closed"
///     workers = 40
/// "#)?;
/// assert_eq!(sc.name, "mine");
/// let fixed = run(&sc, Policy::Fixed(8), 0);
/// assert_eq!(fixed.seconds[10].goodput, 800); // 8 in flight / 10 ms
/// # Ok::<(), adaptx_sim::ScenarioError>(())
/// ```
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
    /// Admit through adaptx's adaptive rate limiter instead of the
    /// concurrency limiter (see [`RateLimiterSpec`]).
    pub rate_limiter: Option<RateLimiterSpec>,
    /// Per-client settings, written `[[client]]`: the i-th entry describes
    /// client i (see [`ClientSpec`]).
    #[serde(default, rename = "client")]
    pub clients: Vec<ClientSpec>,
    /// Request classes, written `[[class]]` (see [`ClassSpec`]): open
    /// demand only.
    #[serde(default, rename = "class")]
    pub classes: Vec<ClassSpec>,
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
#[non_exhaustive]
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
    /// Default 0 (flat). Allowed: 0 ..= 100.
    #[serde(default)]
    pub jitter: f64,
    /// Processor sharing over `workers` (c): with L requests inside and
    /// L > c, each one's remaining work progresses at c/L of normal speed.
    /// Default: unlimited. Allowed: 1 ..= 1000000.
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
    /// unlimited. Allowed: > 0 ..= 1e9.
    pub rate_limit: Option<f64>,
    /// Fraction of answers that are errors that do not signal overload (an
    /// HTTP 400): the client records them as successes for the limiter, and
    /// they are not goodput. Default 0. Allowed: 0 ..= 1.
    #[serde(default)]
    pub client_error_rate: f64,
    /// Fraction of accepted requests that fail as overload after their
    /// work, at random, whatever the load (a flaky network). Default 0.
    /// Allowed: 0 ..= 1.
    #[serde(default)]
    pub failure_rate: f64,
    /// A soft ceiling: with `n` requests inside (the new one included) and
    /// `n > soft_ceiling`, an accepted request fails as overload after its
    /// work with probability `(n − soft_ceiling) / (soft_ceiling_full −
    /// soft_ceiling)`, capped at 1 — errors that rise gradually with load.
    /// Default: none. Set both or neither.
    pub soft_ceiling: Option<u32>,
    /// Where the soft ceiling's error probability reaches 1; above
    /// `soft_ceiling`.
    pub soft_ceiling_full: Option<u32>,
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
    /// New [`BackendSpec::failure_rate`].
    pub failure_rate: Option<f64>,
    /// New [`BackendSpec::soft_ceiling`].
    pub soft_ceiling: Option<u32>,
    /// New [`BackendSpec::soft_ceiling_full`].
    pub soft_ceiling_full: Option<u32>,
}

/// How demand arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
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
    /// Open only, required: arrivals per second per client (0 with a
    /// schedule that starts it later).
    pub rate: Option<f64>,
    /// Client timeout: a request not answered by then fails as overload (the
    /// backend, if it accepted the request, still does the work). Default 1 s.
    #[serde(default = "default_timeout")]
    pub timeout: Nanos,
    /// Changes to the demand over time, written `[[demand.schedule]]` (see
    /// [`DemandChange`]).
    #[serde(default)]
    pub schedule: Vec<DemandChange>,
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
    /// `Builder::sample_window_adaptive`'s `min_samples`; requires
    /// `sample_window_rtt_multiple`.
    pub sample_window_min_samples: Option<u64>,
    /// `Builder::sample_window_adaptive`'s `rtt_multiple`; requires
    /// `sample_window_min_samples`.
    pub sample_window_rtt_multiple: Option<f64>,
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
    /// `Builder::queue`: open arrivals wait in the limiter's queue instead
    /// of being shed (see [`QueueSpec`]).
    pub queue: Option<QueueSpec>,
    /// `Builder::partitions`: named shares of the limit.
    pub partitions: Option<Vec<PartitionSpec>>,
    /// `Partitions::reserve` (with `partitions`).
    pub reserve: Option<f64>,
    /// The limiter sits at the server: a request whose client timed out
    /// keeps its permit until the backend has done its work (a server does
    /// not see its client leave). Default false: the client's limiter
    /// releases at the timeout.
    pub server_side: Option<bool>,
}

/// A control law: one of adaptx's three, or a peer re-implementation (see
/// [`crate::peers`]) run beside them for comparison.
///
/// # Examples
///
/// ```
/// use adaptx_sim::Law;
///
/// assert_eq!(Law::from_name("ceiling"), Some(Law::Ceiling));
/// assert_eq!(Law::Ceiling.algorithm(), Some(adaptx::Algorithm::Ceiling));
/// assert!(Law::NetflixGradient2.is_peer());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Law {
    /// `Algorithm::Aimd`.
    Aimd,
    /// `Algorithm::Vegas`.
    Vegas,
    /// `Algorithm::Gradient`.
    Gradient,
    /// `Algorithm::Ceiling`.
    Ceiling,
    /// The adaptive rate limiter (`RateLimiter`, mizu's law): the policy of
    /// a scenario with a `[rate_limiter]`.
    Rate,
    /// The adaptive rate limiter on the AWS SDKs' adaptive retry law
    /// (`RateAlgorithm::Cubic`): also a policy of a `[rate_limiter]` scenario.
    RateCubic,
    /// Google SRE client-side adaptive throttling (`adaptx::Throttle`, the
    /// book's defaults: a 2-minute window, `k = 2`) in place of the rate
    /// limiter: each client refuses a request with probability
    /// `max(0, (requests − k · accepts) / (requests + 1))` and counts the
    /// backend's answer (an overload failure is not an accept). A policy of
    /// a `[rate_limiter]` scenario, whose table it does not read.
    Throttle,
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
    /// adaptx's three concurrency laws, in table order.
    pub const ALL: [Law; 4] = [Law::Aimd, Law::Vegas, Law::Gradient, Law::Ceiling];

    /// Every adaptx policy a suite runs by default, in table order; each
    /// scenario runs those that [apply](Law::applies_to) to it.
    pub const DEFAULT: [Law; 7] = [
        Law::Aimd,
        Law::Vegas,
        Law::Gradient,
        Law::Ceiling,
        Law::Rate,
        Law::RateCubic,
        Law::Throttle,
    ];

    /// The peer re-implementations, in table order.
    pub const PEERS: [Law; 4] = [
        Law::NetflixGradient2,
        Law::NetflixAimd,
        Law::VectorArc,
        Law::EnvoyGradient,
    ];

    /// Whether this is a peer re-implementation rather than one of adaptx's laws.
    pub fn is_peer(self) -> bool {
        Law::PEERS.contains(&self)
    }

    /// The adaptx algorithm of a concurrency law; `None` for the rate
    /// limiter and for a peer.
    pub fn algorithm(self) -> Option<adaptx::Algorithm> {
        match self {
            Law::Aimd => Some(adaptx::Algorithm::Aimd),
            Law::Vegas => Some(adaptx::Algorithm::Vegas),
            Law::Gradient => Some(adaptx::Algorithm::Gradient),
            Law::Ceiling => Some(adaptx::Algorithm::Ceiling),
            Law::Rate | Law::RateCubic | Law::Throttle => None,
            Law::NetflixGradient2 | Law::NetflixAimd | Law::VectorArc | Law::EnvoyGradient => None,
        }
    }

    /// Whether the law runs on `sc`: the rate laws on a scenario with a
    /// `[rate_limiter]`, the concurrency laws (adaptx's and the peers') on
    /// the others.
    pub fn applies_to(self, sc: &Scenario) -> bool {
        self.is_rate_policy() == sc.rate_limiter.is_some()
    }

    /// Whether this is a policy of the `[rate_limiter]` scenarios: a rate
    /// law, or the client-side throttle.
    pub fn is_rate_policy(self) -> bool {
        self.rate_algorithm().is_some() || self == Law::Throttle
    }

    /// The rate limiter's law, for a rate law; `None` for the others.
    pub fn rate_algorithm(self) -> Option<adaptx::RateAlgorithm> {
        match self {
            Law::Rate => Some(adaptx::RateAlgorithm::Mizu),
            Law::RateCubic => Some(adaptx::RateAlgorithm::Cubic),
            _ => None,
        }
    }

    /// The name as written in files and on the command line (snake_case).
    pub fn name(self) -> &'static str {
        match self {
            Law::Aimd => "aimd",
            Law::Vegas => "vegas",
            Law::Gradient => "gradient",
            Law::Ceiling => "ceiling",
            Law::Rate => "rate",
            Law::RateCubic => "rate_cubic",
            Law::Throttle => "throttle",
            Law::NetflixGradient2 => "netflix_gradient2",
            Law::NetflixAimd => "netflix_aimd",
            Law::VectorArc => "vector_arc",
            Law::EnvoyGradient => "envoy_gradient",
        }
    }

    /// The law named `name` (as [`name`](Law::name) writes it), if any.
    pub fn from_name(name: &str) -> Option<Law> {
        Law::DEFAULT
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
///
/// # Intervals and clients
///
/// The *interval metrics* — `goodput`, `mean_limit`, `max_limit`,
/// `overload_fraction`, `shed_fraction`, `p50_ms`, `p99_ms`,
/// `client_share_min`/`max`, `worst_goodput` and the `goodput_vs_*` ones —
/// take optional `from` and `to`: the measured interval is every whole second
/// overlapping `[from, to)`. Left out, `from` is the start of the steady
/// interval (of the run for `max_limit` and `shed_fraction`) and `to` the
/// end of the run.
///
/// `client = k` (0-based) measures client k's series instead of the totals,
/// for every interval metric except the percentiles (latency is recorded
/// for the totals only) and the client shares, and for the time-to metrics.
/// A client's capacity is its share, capacity / clients.
///
/// # Capacity
///
/// Every ratio to capacity (here and in the report) uses the capacity of
/// [`crate::capacity`]: from the *mean* of the service time as simulated,
/// `service_time × (1 + jitter)` (the base plus an exponential term of mean
/// `jitter × service_time`), so a fixed limit of C* on a rejecting ceiling
/// serves it in full, jitter included (tested in `tests/capacity.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Metric {
    /// Goodput over the interval (default steady) as a fraction of capacity
    /// over it.
    Goodput,
    /// Mean over the interval (default steady) of the limit at the end of
    /// each second.
    MeanLimit,
    /// The highest limit of any client at any instant in the interval
    /// (default: the whole run).
    MaxLimit,
    /// How many times any client's limit went down during the run.
    LimitDecreases,
    /// Limit at the end of the run minus the initial limit.
    LimitGrowth,
    /// Overload failures (rejections and timeouts) over the interval
    /// (default steady) as a fraction of the requests sent.
    OverloadFraction,
    /// Arrivals shed (no free permit) as a fraction of all arrivals over the
    /// interval (default: the whole run).
    ShedFraction,
    /// Median latency of the successes over the interval (default steady),
    /// in milliseconds.
    P50Ms,
    /// 99th-percentile latency of the successes over the interval (default
    /// steady), in milliseconds.
    P99Ms,
    /// Seconds from `after` to the end of the first second (ending after
    /// `after`) whose time-weighted median limit ([`Second::limit_median`])
    /// is ≤ `threshold` — the limit was at or below it for at least half the
    /// second; infinite if never. Brought down is a state: a one-window
    /// probe above the level at the second's close does not delay it, and a
    /// one-window dip below it does not count.
    ///
    /// [`Second::limit_median`]: crate::Second::limit_median
    TimeToLimitAtMost,
    /// Seconds from `after` to the end of the first second whose closing
    /// limit is ≥ `threshold` (reached is an instant); infinite if never.
    /// The same as `time_until` with `holds = { measure = "mean_limit", min
    /// = threshold }`.
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
    /// The smallest client's goodput over the interval (default steady)
    /// divided by the fair share (total goodput / clients).
    ClientShareMin,
    /// The largest client's goodput over the interval divided by the fair
    /// share.
    ClientShareMax,
    /// Seconds in which a limit was outside `[min_limit, max_limit]`, or
    /// in-flight exceeded `max_limit`, or a measure was not finite.
    InvariantViolations,
    /// The lowest goodput over any `window`-second window (whole seconds)
    /// inside the interval (default steady), as a fraction of the capacity
    /// over that window.
    WorstGoodput,
    /// Seconds from `after` to the end of the first `window`-second window
    /// (default 1 s) whose seconds all end after `after` and over which the
    /// measure of `holds` is within its bounds; infinite if never.
    TimeUntil,
    /// Goodput over the interval (default steady) divided by the oracle's
    /// (the best fixed limit, see [`crate::suite::baselines`]) over the same
    /// interval, the oracle run on the same seed.
    GoodputVsOracle,
    /// As `goodput_vs_oracle`, against the best fixed limit whose steady
    /// overload fraction is ≤ [`crate::suite::ORACLE_OVERLOAD_CAP`].
    GoodputVsCappedOracle,
    /// Successes over the interval (default steady) as a fraction of the
    /// arrivals (open demand) or of the requests sent (closed).
    SuccessFraction,
    /// The series' goodput over the interval (default steady) as a fraction
    /// of the total goodput over it (with `class`: the class's share of the
    /// goodput).
    GoodputShare,
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
    Window,
    Client,
    Class,
    Holds,
}

impl Param {
    const ALL: [Param; 12] = [
        Param::After,
        Param::From,
        Param::To,
        Param::BaselineFrom,
        Param::BaselineTo,
        Param::Threshold,
        Param::Fraction,
        Param::Reference,
        Param::Window,
        Param::Client,
        Param::Class,
        Param::Holds,
    ];

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
            Param::Window => "window",
            Param::Client => "client",
            Param::Class => "class",
            Param::Holds => "holds",
        }
    }
}

impl Metric {
    /// The measures a `time_until`'s `holds` can test over a window.
    pub const HOLDS_MEASURES: [Metric; 7] = [
        Metric::Goodput,
        Metric::OverloadFraction,
        Metric::ShedFraction,
        Metric::MeanLimit,
        Metric::MaxLimit,
        Metric::P50Ms,
        Metric::P99Ms,
    ];

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
            Metric::WorstGoodput => "worst_goodput",
            Metric::TimeUntil => "time_until",
            Metric::GoodputVsOracle => "goodput_vs_oracle",
            Metric::GoodputVsCappedOracle => "goodput_vs_capped_oracle",
            Metric::SuccessFraction => "success_fraction",
            Metric::GoodputShare => "goodput_share",
        }
    }

    /// Whether the metric reads the oracle sweep of its seed.
    pub fn needs_oracle(self) -> bool {
        matches!(
            self,
            Metric::GoodputVsOracle | Metric::GoodputVsCappedOracle
        )
    }

    /// Whether the metric's interval defaults to the whole run rather than
    /// the steady interval.
    pub fn whole_run_default(self) -> bool {
        matches!(self, Metric::MaxLimit | Metric::ShedFraction)
    }

    /// (required, optional) parameters.
    fn params(self) -> (&'static [Param], &'static [Param]) {
        use Param::*;
        match self {
            Metric::Goodput
            | Metric::MeanLimit
            | Metric::MaxLimit
            | Metric::OverloadFraction
            | Metric::ShedFraction
            | Metric::GoodputVsOracle
            | Metric::GoodputVsCappedOracle => (&[], &[From, To, Client, Class]),
            Metric::SuccessFraction | Metric::GoodputShare => (&[], &[From, To, Client, Class]),
            Metric::P50Ms | Metric::P99Ms => (&[], &[From, To, Class]),
            Metric::ClientShareMin | Metric::ClientShareMax => (&[], &[From, To]),
            Metric::WorstGoodput => (&[Window], &[From, To, Client]),
            Metric::TimeUntil => (&[After, Holds], &[Window, Client]),
            Metric::TimeToLimitAtMost | Metric::TimeToLimitAtLeast => {
                (&[After, Threshold], &[Client])
            }
            Metric::RecoveryTime => (&[After, Fraction, BaselineFrom, BaselineTo], &[Client]),
            Metric::MeanLimitRatio => (&[From, To, BaselineFrom, BaselineTo], &[Client]),
            Metric::ReferenceDeviation => (&[Reference], &[]),
            Metric::LimitDecreases | Metric::LimitGrowth | Metric::InvariantViolations => {
                (&[], &[])
            }
        }
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What `time_until` waits for: `measure`, over a window, within `[min,
/// max]` (at least one of them given), written `holds = { measure =
/// "goodput", min = 0.9 }`.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Holds {
    /// One of [`Metric::HOLDS_MEASURES`], computed over the window as the
    /// interval metric of that name (`goodput` as a fraction of capacity,
    /// `mean_limit` over one second is the closing limit).
    pub measure: Metric,
    /// The measure must be at least this.
    pub min: Option<f64>,
    /// The measure must be at most this.
    pub max: Option<f64>,
}

impl Holds {
    /// Whether `v` is within the bounds; NaN never is.
    pub fn accepts(&self, v: f64) -> bool {
        self.min.is_none_or(|m| v >= m) && self.max.is_none_or(|m| v <= m) && !v.is_nan()
    }
}

impl fmt::Display for Holds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.min, self.max) {
            (Some(lo), Some(hi)) => write!(f, "{lo}<={}<={hi}", self.measure),
            (Some(lo), None) => write!(f, "{}>={lo}", self.measure),
            (None, Some(hi)) => write!(f, "{}<={hi}", self.measure),
            (None, None) => write!(f, "{}", self.measure),
        }
    }
}

/// A pass band: for each of `laws`, the `metric` must be ≥ `min` and ≤ `max`
/// (either may be left out; with neither, the metric is only reported).
///
/// Every scenario runs with seeds 0–9 (or the seeds `--seeds` names). A bound
/// must hold for the *median seed* and a 1.5× looser bound for the *worst
/// seed*:
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
    /// The laws the band applies to (`aimd`, `vegas`, `gradient`, `ceiling`,
    /// a peer law, or `rate` on a scenario with a `[rate_limiter]`).
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
    /// A window length, whole seconds (`worst_goodput`, `time_until`).
    pub window: Option<Nanos>,
    /// Measure this client's series (0-based) instead of the totals.
    pub client: Option<usize>,
    /// Measure this request class's series (0-based, `[[class]]` order)
    /// instead of the totals.
    pub class: Option<usize>,
    /// What `time_until` waits for.
    pub holds: Option<Holds>,
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
            Param::Window => self.window.is_some(),
            Param::Client => self.client.is_some(),
            Param::Class => self.class.is_some(),
            Param::Holds => self.holds.is_some(),
        }
    }

    /// A one-line description of what the band measures, with its parameters.
    pub fn describe(&self) -> String {
        let mut s = self.metric.name().to_string();
        let mut ps = Vec::new();
        for p in Param::ALL {
            let v = match p {
                Param::After => self.after.map(|d| d.to_string()),
                Param::From => self.from.map(|d| d.to_string()),
                Param::To => self.to.map(|d| d.to_string()),
                Param::BaselineFrom => self.baseline_from.map(|d| d.to_string()),
                Param::BaselineTo => self.baseline_to.map(|d| d.to_string()),
                Param::Threshold => self.threshold.map(|v| format!("{v}")),
                Param::Fraction => self.fraction.map(|v| format!("{v}")),
                Param::Reference => self.reference.clone(),
                Param::Window => self.window.map(|d| d.to_string()),
                Param::Client => self.client.map(|c| c.to_string()),
                Param::Class => self.class.map(|c| c.to_string()),
                Param::Holds => self.holds.map(|h| h.to_string()),
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

    /// The measured interval `[from, to)` in ns for a run of `sc`, with the
    /// metric's defaults for what is left out.
    pub(crate) fn interval(&self, sc: &Scenario) -> (Nanos, Nanos) {
        let from = self.from.unwrap_or(if self.metric.whole_run_default() {
            Nanos(0)
        } else {
            sc.steady_from()
        });
        (from, self.to.unwrap_or(sc.duration))
    }
}

/// A scenario file that could not be read or does not fit the schema.
///
/// # Examples
///
/// ```
/// use adaptx_sim::Scenario;
///
/// let err = Scenario::from_toml("bad.toml", "name = 3").unwrap_err();
/// assert!(err.to_string().starts_with("bad.toml"), "{err}");
/// ```
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
            toml::from_str(text).map_err(|e| ScenarioError::new(source, toml_error(text, e)))?;
        s.source = source.to_string();
        s.validate().map_err(|m| ScenarioError::new(source, m))?;
        Ok(s)
    }

    /// Reads and checks a scenario file of at most
    /// [`MAX_FILE_BYTES`](crate::bounds::MAX_FILE_BYTES).
    ///
    /// # Errors
    ///
    /// As [`from_toml`](Scenario::from_toml), plus the file not being
    /// readable, not UTF-8 or too large.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let name = path.display().to_string();
        let text = read_bounded(path).map_err(|m| ScenarioError::new(&name, m))?;
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
    /// A demand change counts at its end (a ramp's `at + ramp`).
    pub fn last_change(&self) -> Option<Nanos> {
        let backend = self.schedule.iter().map(|e| e.at);
        let demand = self.demand.schedule.iter().map(DemandChange::end);
        backend.chain(demand).max()
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

    /// Every backend the run sees: the one at time zero, then the one after
    /// each schedule entry (entries applied in order).
    pub fn backend_states(&self) -> impl Iterator<Item = BackendSpec> + '_ {
        let mut b = self.backend.clone();
        std::iter::once(b.clone()).chain(self.schedule.iter().map(move |e| {
            e.apply(&mut b);
            b.clone()
        }))
    }

    /// Checks every field against [`crate::bounds`] and the rules between
    /// fields.
    fn validate(&self) -> Result<(), String> {
        let name_chars = self.name.chars().count();
        if name_chars == 0 || name_chars > MAX_NAME_CHARS || self.name.chars().any(char::is_control)
        {
            return Err(format!(
                "name: expected 1 ..= {MAX_NAME_CHARS} characters, no control characters"
            ));
        }
        text_len("description", &self.description)?;
        bounds::duration("duration", self.duration)?;
        validate_backend("backend", &self.backend)?;
        if self.schedule.len() > MAX_SCHEDULE_ENTRIES {
            return Err(format!(
                "schedule: {} entries: expected at most {MAX_SCHEDULE_ENTRIES}",
                self.schedule.len()
            ));
        }
        let mut prev = Nanos(0);
        for (i, (e, b)) in self
            .schedule
            .iter()
            .zip(self.backend_states().skip(1))
            .enumerate()
        {
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
            validate_backend(&at, &b)?;
        }
        self.validate_demand()?;
        crate::demand::validate(self)?;
        self.validate_limiter()?;
        self.validate_rate_limiter()?;
        crate::class::validate(self)?;
        if self.bands.len() > MAX_BANDS {
            return Err(format!(
                "band: {} bands: expected at most {MAX_BANDS}",
                self.bands.len()
            ));
        }
        for (i, b) in self.bands.iter().enumerate() {
            self.validate_band(&format!("band[{i}]"), b)?;
        }
        Ok(())
    }

    fn validate_demand(&self) -> Result<(), String> {
        let d = &self.demand;
        bounds::in_range("demand.clients", d.clients, 1, MAX_CLIENTS)?;
        bounds::latency("demand.timeout", d.timeout)?;
        match d.kind {
            DemandKind::Closed => {
                let Some(w) = d.workers else {
                    return Err("demand.workers: required for a closed demand".into());
                };
                if w == 0 {
                    return Err("demand.workers: expected at least 1".into());
                }
                bounds::in_range("demand.workers", w, 1, MAX_CONCURRENCY)?;
                let total = u64::from(w) * u64::from(d.clients);
                if total > MAX_TOTAL_WORKERS {
                    return Err(format!(
                        "demand.workers: {w} x {} clients = {total} workers: expected at most {MAX_TOTAL_WORKERS} in all",
                        d.clients
                    ));
                }
                if let Some(t) = d.think_time {
                    bounds::in_range("demand.think_time", t, Nanos(0), MAX_LATENCY)?;
                }
                if d.rate.is_some() {
                    return Err("demand.rate: only for an open demand".into());
                }
            }
            DemandKind::Open => {
                let Some(r) = d.rate else {
                    return Err("demand.rate: required for an open demand".into());
                };
                bounds::positive_up_to("demand.rate", r, MAX_RATE)?;
                if d.workers.is_some() {
                    return Err("demand.workers: only for a closed demand".into());
                }
                if d.think_time.is_some() {
                    return Err("demand.think_time: only for a closed demand".into());
                }
            }
        }
        Ok(())
    }

    fn validate_rate_limiter(&self) -> Result<(), String> {
        let Some(r) = &self.rate_limiter else {
            if let Some(i) = self.clients.iter().position(|c| c.rate_limiter.is_some()) {
                return Err(format!(
                    "client[{i}].rate_limiter: only with a [rate_limiter] table"
                ));
            }
            return Ok(());
        };
        let err = |at: &str, e: adaptx::ConfigError| {
            format!(
                "{at}.{}: {}: expected {}",
                e.field(),
                e.value(),
                e.allowed()
            )
        };
        r.check().map_err(|e| err("rate_limiter", e))?;
        if self.limiter.is_set() || self.clients.iter().any(|c| c.limiter.is_set()) {
            return Err(
                "limiter: a scenario with [rate_limiter] admits through the rate \
                 limiter; [limiter] options do not apply there"
                    .into(),
            );
        }
        for (i, c) in self.clients.iter().enumerate() {
            if let Some(over) = &c.rate_limiter {
                if over.keyed.is_some() {
                    return Err(format!(
                        "client[{i}].rate_limiter.keyed: set it in [rate_limiter], for every client"
                    ));
                }
                if r.is_keyed() {
                    return Err(format!(
                        "client[{i}].rate_limiter: the clients share one keyed limiter; \
                         per-client options need keyed = false"
                    ));
                }
                r.overlaid(over)
                    .check()
                    .map_err(|e| err(&format!("client[{i}].rate_limiter"), e))?;
            }
        }
        Ok(())
    }

    fn validate_limiter(&self) -> Result<(), String> {
        validate_limiter_spec("limiter", &self.limiter)?;
        for i in 0..self.clients.len() {
            validate_limiter_spec(
                &format!("client[{i}].limiter"),
                &self.client_limiter(i as u32),
            )?;
        }
        Ok(())
    }

    fn validate_band(&self, at: &str, b: &BandSpec) -> Result<(), String> {
        if b.laws.is_empty() {
            return Err(format!("{at}.laws: expected at least one law"));
        }
        for (k, law) in b.laws.iter().enumerate() {
            if b.laws[..k].contains(law) {
                return Err(format!("{at}.laws: `{law}` appears twice"));
            }
        }
        text_len(&format!("{at}.note"), &b.note)?;
        for (name, v) in [("min", b.min), ("max", b.max)] {
            if let Some(v) = v {
                bounds::f64_in_range(&format!("{at}.{name}"), v, -MAX_BAND_BOUND, MAX_BAND_BOUND)?;
            }
        }
        if let (Some(lo), Some(hi)) = (b.min, b.max) {
            if lo > hi {
                return Err(format!("{at}: min {lo} is above max {hi}"));
            }
        }
        if let Some(v) = b.threshold {
            bounds::f64_in_range(&format!("{at}.threshold"), v, 0.0, MAX_THRESHOLD)?;
        }
        if let Some(v) = b.fraction {
            bounds::positive_up_to(&format!("{at}.fraction"), v, MAX_FRACTION)?;
        }
        if let Some(r) = &b.reference {
            check_reference(&format!("{at}.reference"), r)?;
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
        for p in Param::ALL {
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
        for (a, z, name) in [
            (b.from, b.to, "to"),
            (b.baseline_from, b.baseline_to, "baseline_to"),
        ] {
            if let (Some(a), Some(z)) = (a, z) {
                if z.0 < a.0.saturating_add(SECOND) {
                    return Err(format!("{at}.{name}: expected at least 1s after its start"));
                }
            }
        }
        if let Some(law) = b.laws.iter().find(|l| !l.applies_to(self)) {
            return Err(format!(
                "{at}.laws: `{law}` does not run on this scenario ({})",
                if self.rate_limiter.is_some() {
                    "it has a [rate_limiter]: its policy is `rate`"
                } else {
                    "`rate` needs a [rate_limiter] table"
                }
            ));
        }
        self.validate_band_extras(at, b)
    }
}

impl Scenario {
    /// The checks of `client`, `window`, `holds` and of an interval with a
    /// default end.
    fn validate_band_extras(&self, at: &str, b: &BandSpec) -> Result<(), String> {
        let (from, to) = b.interval(self);
        // The whole seconds the interval overlaps, as the metrics read it.
        let range = Nanos(to.0.div_ceil(SECOND) * SECOND - from.0 / SECOND * SECOND);
        if (b.from.is_some() || b.to.is_some()) && to.0 < from.0 + SECOND {
            let (name, t) = match b.from {
                Some(f) => ("from", f),
                None => ("to", to),
            };
            return Err(format!(
                "{at}.{name}: {t}: expected an interval of at least 1s ([{from}, {to}))"
            ));
        }
        if let Some(c) = b.client {
            let n = self.demand.clients as usize;
            if c >= n {
                return Err(format!(
                    "{at}.client: {c}: expected a client index from 0 to {} (demand.clients = {n})",
                    n - 1
                ));
            }
        }
        if let Some(k) = b.class {
            if k >= self.classes.len() {
                return Err(format!(
                    "{at}.class: {k}: expected a class index below {} (the [[class]] entries)",
                    self.classes.len()
                ));
            }
            if b.client.is_some() {
                return Err(format!("{at}.class: not with `client`"));
            }
        }
        if let Some(w) = b.window {
            let measured = match b.metric {
                Metric::TimeUntil => {
                    let after = b.after.map_or(0, |a| a.0 / SECOND * SECOND);
                    Nanos(self.duration.0.saturating_sub(after))
                }
                _ => range,
            };
            if w.0 < SECOND || w.0 % SECOND != 0 || w > measured {
                return Err(format!(
                    "{at}.window: {w}: expected whole seconds, at least 1s and at most the measured range ({measured})"
                ));
            }
        }
        if let Some(h) = &b.holds {
            if !Metric::HOLDS_MEASURES.contains(&h.measure) {
                let names: Vec<&str> = Metric::HOLDS_MEASURES.iter().map(|m| m.name()).collect();
                return Err(format!(
                    "{at}.holds.measure: {}: expected one of {}",
                    h.measure,
                    names.join(", ")
                ));
            }
            if b.client.is_some() && matches!(h.measure, Metric::P50Ms | Metric::P99Ms) {
                return Err(format!(
                    "{at}.holds.measure: {}: not available per client (latency is recorded for the totals only)",
                    h.measure
                ));
            }
            if h.min.is_none() && h.max.is_none() {
                return Err(format!("{at}.holds: expected `min`, `max` or both"));
            }
            for (name, v) in [("min", h.min), ("max", h.max)] {
                if let Some(v) = v {
                    if !v.is_finite() {
                        return Err(format!("{at}.holds.{name}: {v}: expected a finite number"));
                    }
                }
            }
            if let (Some(lo), Some(hi)) = (h.min, h.max) {
                if lo > hi {
                    return Err(format!("{at}.holds: min {lo} is above max {hi}"));
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
        if let Some(v) = self.failure_rate {
            b.failure_rate = v;
        }
        if let Some(v) = self.soft_ceiling {
            b.soft_ceiling = Some(v);
        }
        if let Some(v) = self.soft_ceiling_full {
            b.soft_ceiling_full = Some(v);
        }
    }
}

fn validate_backend(at: &str, b: &BackendSpec) -> Result<(), String> {
    bounds::latency(&format!("{at}.service_time"), b.service_time)?;
    bounds::f64_in_range(&format!("{at}.jitter"), b.jitter, 0.0, MAX_JITTER)?;
    if let Some(w) = b.workers {
        bounds::in_range(&format!("{at}.workers"), w, 1, MAX_CONCURRENCY)?;
    }
    if let Some(m) = b.max_concurrency {
        bounds::in_range(&format!("{at}.max_concurrency"), m, 0, MAX_CONCURRENCY)?;
    }
    bounds::latency(&format!("{at}.reject_latency"), b.reject_latency)?;
    if let Some(r) = b.rate_limit {
        bounds::positive_up_to(&format!("{at}.rate_limit"), r, MAX_RATE)?;
    }
    bounds::f64_in_range(
        &format!("{at}.client_error_rate"),
        b.client_error_rate,
        0.0,
        1.0,
    )?;
    validate_failures(at, b)
}

fn text_len(field: &str, text: &str) -> Result<(), String> {
    let n = text.chars().count();
    if n > MAX_TEXT_CHARS {
        return Err(format!(
            "{field}: {n} characters: expected at most {MAX_TEXT_CHARS}"
        ));
    }
    Ok(())
}

/// The bounds of limiter options (`at` names them: `limiter`, or
/// `client[i].limiter` for a client's options over `[limiter]`'s).
fn validate_limiter_spec(at: &str, l: &LimiterSpec) -> Result<(), String> {
    for (field, v) in [
        ("initial_limit", l.initial_limit),
        ("min_limit", l.min_limit),
        ("max_limit", l.max_limit),
    ] {
        if let Some(v) = v {
            bounds::in_range(&format!("{at}.{field}"), v, 1, MAX_LIMIT)?;
        }
    }
    for (field, v) in [
        ("sample_window", l.sample_window),
        ("target_latency", l.target_latency),
    ] {
        if let Some(v) = v {
            bounds::latency(&format!("{at}.{field}"), v)?;
        }
    }
    if let Some(v) = l.warmup_samples {
        bounds::in_range(&format!("{at}.warmup_samples"), v, 0, MAX_WARMUP_SAMPLES)?;
    }
    match (l.sample_window_min_samples, l.sample_window_rtt_multiple) {
        (Some(_), None) => {
            return Err(format!(
                "{at}.sample_window_rtt_multiple: required with sample_window_min_samples"
            ));
        }
        (None, Some(_)) => {
            return Err(format!(
                "{at}.sample_window_min_samples: required with sample_window_rtt_multiple"
            ));
        }
        _ => {}
    }
    if let Some(q) = &l.queue {
        q.policy().map_err(|e| format!("{at}.queue.{e}"))?;
    }
    if l.reserve.is_some() && l.partitions.is_none() {
        return Err(format!("{at}.reserve: only with partitions"));
    }
    // The remaining options: adaptx's builder knows their ranges. Its error
    // names the option, the value and the range; keep all three.
    crate::sim::limiter_builder(l, None, 0, adaptx::ManualClock::new())
        .build()
        .map_err(|e| {
            format!(
                "{at}.{}: {}: expected {}",
                e.field(),
                e.value(),
                e.allowed()
            )
        })?;
    Ok(())
}

/// The random and load-driven overload errors of a backend.
fn validate_failures(at: &str, b: &BackendSpec) -> Result<(), String> {
    bounds::f64_in_range(&format!("{at}.failure_rate"), b.failure_rate, 0.0, 1.0)?;
    for (name, v) in [
        ("soft_ceiling", b.soft_ceiling),
        ("soft_ceiling_full", b.soft_ceiling_full),
    ] {
        if let Some(v) = v {
            bounds::in_range(&format!("{at}.{name}"), v, 0, MAX_CONCURRENCY)?;
        }
    }
    match (b.soft_ceiling, b.soft_ceiling_full) {
        (None, None) => Ok(()),
        (Some(on), Some(full)) if full > on => Ok(()),
        (Some(on), Some(full)) => Err(format!(
            "{at}.soft_ceiling_full: {full}: expected above soft_ceiling ({on})"
        )),
        (Some(_), None) => Err(format!(
            "{at}.soft_ceiling_full: required with soft_ceiling"
        )),
        (None, Some(_)) => Err(format!(
            "{at}.soft_ceiling: required with soft_ceiling_full"
        )),
    }
}

impl LimiterSpec {
    /// `self` with every option `over` sets replaced by `over`'s.
    pub fn overlaid(&self, over: &LimiterSpec) -> LimiterSpec {
        LimiterSpec {
            initial_limit: over.initial_limit.or(self.initial_limit),
            min_limit: over.min_limit.or(self.min_limit),
            max_limit: over.max_limit.or(self.max_limit),
            sample_window: over.sample_window.or(self.sample_window),
            sample_window_min_samples: over
                .sample_window_min_samples
                .or(self.sample_window_min_samples),
            sample_window_rtt_multiple: over
                .sample_window_rtt_multiple
                .or(self.sample_window_rtt_multiple),
            warmup_samples: over.warmup_samples.or(self.warmup_samples),
            target_latency: over.target_latency.or(self.target_latency),
            tolerance: over.tolerance.or(self.tolerance),
            increase_rate: over.increase_rate.or(self.increase_rate),
            decrease_ratio: over.decrease_ratio.or(self.decrease_ratio),
            utilization: over.utilization.or(self.utilization),
            smoothing: over.smoothing.or(self.smoothing),
            jitter: over.jitter.or(self.jitter),
            queue: over.queue.or(self.queue),
            partitions: over.partitions.clone().or_else(|| self.partitions.clone()),
            reserve: over.reserve.or(self.reserve),
            server_side: over.server_side.or(self.server_side),
        }
    }

    /// Whether any option is set.
    pub fn is_set(&self) -> bool {
        let LimiterSpec {
            initial_limit,
            min_limit,
            max_limit,
            sample_window,
            sample_window_min_samples,
            sample_window_rtt_multiple,
            warmup_samples,
            target_latency,
            tolerance,
            increase_rate,
            decrease_ratio,
            utilization,
            smoothing,
            jitter,
            queue,
            partitions,
            reserve,
            server_side,
        } = self;
        initial_limit.is_some()
            || min_limit.is_some()
            || max_limit.is_some()
            || sample_window.is_some()
            || sample_window_min_samples.is_some()
            || sample_window_rtt_multiple.is_some()
            || warmup_samples.is_some()
            || target_latency.is_some()
            || tolerance.is_some()
            || increase_rate.is_some()
            || decrease_ratio.is_some()
            || utilization.is_some()
            || smoothing.is_some()
            || jitter.is_some()
            || queue.is_some()
            || partitions.is_some()
            || reserve.is_some()
            || server_side.is_some()
    }
}

/// A band's `reference` must be a bare scenario file name: it is resolved in
/// the referring file's directory and nowhere else, so it cannot name a file
/// elsewhere (`/etc/passwd`, `../x.toml`) that would then be read.
fn check_reference(field: &str, r: &str) -> Result<(), String> {
    let bare = !r.is_empty()
        && r.len() <= MAX_REFERENCE_BYTES
        && !r.starts_with('.')
        && r.ends_with(".toml")
        && r.len() > ".toml".len()
        && !r
            .chars()
            .any(|c| matches!(c, '/' | '\\' | ':') || c.is_control());
    if bare {
        Ok(())
    } else {
        Err(format!(
            "{field}: {:?}: expected the bare file name of a scenario next to this one, like \"03-hard-limit.toml\" (no directory, at most {MAX_REFERENCE_BYTES} bytes)",
            truncate(r, 80)
        ))
    }
}

/// The first `max` characters of `s`, with `…` if cut.
fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// A TOML or schema error as `line L, column C: message` (and the key, when
/// toml knows it), without the source line toml would quote: a file that is
/// not a scenario at all (a reference gone wrong, a password file) must not
/// have its content printed.
fn toml_error(text: &str, mut e: toml::de::Error) -> String {
    let at = e.span().map(|span| {
        let start = span.start.min(text.len());
        let before = text.get(..start).unwrap_or("");
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        format!("line {line}, column {column}: ")
    });
    // Without its input, toml's error prints only its message and the key.
    e.set_input(None);
    let message = e.to_string().trim_end().replace('\n', " ");
    format!(
        "{}{}",
        at.unwrap_or_default(),
        truncate(&message, MAX_ERROR_CHARS)
    )
}

/// Longest toml message quoted in an error, in characters.
const MAX_ERROR_CHARS: usize = 500;

/// Reads at most [`MAX_FILE_BYTES`] of a UTF-8 file.
fn read_bounded(path: &Path) -> Result<String, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read: {e}"))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!(
            "cannot read: larger than {MAX_FILE_BYTES} bytes; a scenario file is a few KiB"
        ));
    }
    String::from_utf8(bytes).map_err(|_| "cannot read: not UTF-8 text".to_string())
}
