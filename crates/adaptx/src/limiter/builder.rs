//! The limiter builder: every option, validated.

use std::fmt;
use std::sync::Arc as StdArc;
use std::time::Duration;

use super::runtime::{LawNames, Tuned, Tuning};
use super::{AdmissionConfig, Counters, Hot, Inner, Limiter};
use crate::clock::{AnyClock, Clock};
use crate::control::{Control, ControlConfig};
use crate::defaults::*;
use crate::error::{ConfigError, closed_closed, open_closed};
use crate::law::{Aimd, CEILING_DEFAULT_TOLERANCE, Ceiling, ControlLaw, Gradient, Vegas};
use crate::mode::ModeCell;
use crate::observe::{DEFAULT_NAME, LimitChange, Observer};
use crate::pool::{MAX_PERMITS, Partitions, Pool, QueuePolicy};
use crate::sync::Padded;
use crate::sync::{AtomicU64, Mutex};
use crate::window::{AdaptiveWindow, Window};

/// A callback run with the [`LimitChange`] whenever a window moves the
/// limit (see [`Builder::on_limit_change_with`]).
pub type LimitChangeHook = Box<dyn Fn(&LimitChange) + Send + Sync>;

/// The built-in control laws.
///
/// # Examples
///
/// ```
/// use adaptx::{Algorithm, Limiter};
///
/// let limiter = Limiter::builder().algorithm(Algorithm::Aimd).build()?;
/// assert_eq!(limiter.algorithm(), "aimd");
/// assert_eq!(Limiter::new().algorithm(), Algorithm::Ceiling.to_string()); // the default
/// # Ok::<(), adaptx::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Algorithm {
    /// Additive increase, multiplicative decrease on failures: see [`Aimd`].
    /// The seed's default; its synchronized overshoots even out the shares of
    /// clients that start far apart, at a quarter of a hard ceiling's
    /// capacity.
    Aimd,
    /// Queue estimation from RTT against RTT_min: see [`Vegas`]. For
    /// backends with a stable floor latency.
    Vegas,
    /// Window mean against its moving average: see [`Gradient`]. For backends
    /// whose floor latency drifts.
    Gradient,
    /// Finds the backend's best concurrency from overload failures and
    /// latency, rests at it and probes it rarely: see [`Ceiling`]. The
    /// default: the best goodput with the fewest overload calls on every
    /// scenario of the simulator.
    #[default]
    Ceiling,
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Algorithm::Aimd => "aimd",
            Algorithm::Vegas => "vegas",
            Algorithm::Gradient => "gradient",
            Algorithm::Ceiling => "ceiling",
        })
    }
}

/// Builds a [`Limiter`]. Every option has the reference's default;
/// [`build`](Builder::build) checks them all and names the first bad one.
///
/// # Examples
///
/// ```
/// use adaptx::{Algorithm, Limiter};
/// use std::time::Duration;
///
/// let limiter = Limiter::builder()
///     .algorithm(Algorithm::Vegas)
///     .initial_limit(20)
///     .max_limit(500)
///     .target_latency(Duration::from_millis(50))
///     .build()
///     .unwrap();
/// assert_eq!(limiter.limit(), 20);
///
/// let err = Limiter::builder().decrease_ratio(1.5).build().unwrap_err();
/// assert_eq!(err.field(), "decrease_ratio");
/// assert_eq!(err.to_string(), "invalid decrease_ratio: 1.5 (allowed: 0 < value < 1)");
/// ```
#[must_use = "a builder does nothing until built"]
pub struct Builder {
    algorithm: Algorithm,
    law: Option<Box<dyn ControlLaw>>,
    initial_limit: usize,
    min_limit: usize,
    max_limit: usize,
    smoothing: f64,
    increase_rate: f64,
    decrease_ratio: f64,
    utilization: f64,
    target_latency: Duration,
    tolerance: f64,
    sample_window: Duration,
    /// `(min_samples, rtt_multiple)` of `sample_window_adaptive`, unchecked.
    adaptive: Option<(u64, f64)>,
    warmup_samples: u64,
    min_latency_decay: f64,
    jitter: f64,
    op_name: Option<String>,
    name: Option<String>,
    hook: Option<LimitChangeHook>,
    clock: Option<AnyClock>,
    seed: Option<u64>,
    queue: QueuePolicy,
    partitions: Option<Partitions>,
    reject_delay: Option<Duration>,
    /// The first option set that only a build can set, for
    /// [`Limiter::reconfigure`] to refuse.
    fixed: Option<&'static str>,
    /// A reconfiguration's builder: keep the user's law in force unless
    /// [`algorithm`](Builder::algorithm) or [`law`](Builder::law) replaces it.
    keep_law: bool,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("algorithm", &self.algorithm)
            .field("law", &self.law)
            .field("initial_limit", &self.initial_limit)
            .field("min_limit", &self.min_limit)
            .field("max_limit", &self.max_limit)
            .field("sample_window", &self.sample_window)
            .field("adaptive", &self.adaptive)
            .finish_non_exhaustive()
    }
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

impl Builder {
    /// A builder with every option at its default.
    pub fn new() -> Self {
        Self {
            algorithm: Algorithm::Ceiling,
            law: None,
            initial_limit: DEFAULT_INITIAL_LIMIT,
            min_limit: DEFAULT_MIN_LIMIT,
            max_limit: DEFAULT_MAX_LIMIT,
            smoothing: DEFAULT_SMOOTHING,
            increase_rate: DEFAULT_INCREASE_RATE,
            decrease_ratio: DEFAULT_DECREASE_RATIO,
            utilization: DEFAULT_UTILIZATION,
            target_latency: DEFAULT_TARGET_LATENCY,
            tolerance: DEFAULT_TOLERANCE,
            sample_window: DEFAULT_SAMPLE_WINDOW,
            adaptive: None,
            warmup_samples: DEFAULT_WARMUP_SAMPLES,
            min_latency_decay: DEFAULT_MIN_LATENCY_DECAY,
            jitter: DEFAULT_JITTER,
            op_name: None,
            name: None,
            hook: None,
            clock: None,
            seed: None,
            queue: QueuePolicy::new(),
            partitions: None,
            reject_delay: None,
            fixed: None,
            keep_law: false,
        }
    }

    /// The built-in control law (replaces a law set earlier with
    /// [`law`](Builder::law)). Default: [`Algorithm::Ceiling`] (the seed's
    /// default was AIMD).
    pub fn algorithm(mut self, algorithm: Algorithm) -> Self {
        self.algorithm = algorithm;
        self.law = None;
        self.keep_law = false;
        self
    }

    /// A control law of your own (replaces [`algorithm`](Builder::algorithm)).
    /// The law options of this builder (increase rate, decrease ratio,
    /// utilization, target latency, tolerance) configure only the built-in
    /// laws; smoothing, min-latency decay, jitter and warmup apply to every law.
    pub fn law(mut self, law: impl ControlLaw) -> Self {
        self.law = Some(Box::new(law));
        self
    }

    /// The limit before any adaptation; clamped into `[min, max]`.
    /// Default [`DEFAULT_INITIAL_LIMIT`] (10). Allowed: 1 ..= [`MAX_LIMIT_BOUND`].
    pub fn initial_limit(mut self, n: usize) -> Self {
        self.initial_limit = n;
        self
    }

    /// The floor of the limit. Default 1. Allowed: 1 ..= [`MAX_LIMIT_BOUND`].
    pub fn min_limit(mut self, n: usize) -> Self {
        self.min_limit = n;
        self
    }

    /// The ceiling of the limit and hard cap on in-flight operations. Default
    /// 1000. Allowed: `min_limit` ..= [`MAX_LIMIT_BOUND`] (below `min_limit`,
    /// [`build`](Builder::build) fails naming both).
    pub fn max_limit(mut self, n: usize) -> Self {
        self.max_limit = n;
        self
    }

    /// EMA weight of each window's mean latency. Default 0.2. Allowed: (0, 1].
    pub fn smoothing(mut self, f: f64) -> Self {
        self.smoothing = f;
        self
    }

    /// AIMD credit per eligible window (fractions accumulate). Default 1.0.
    /// Allowed: finite and > 0.
    pub fn increase_rate(mut self, r: f64) -> Self {
        self.increase_rate = r;
        self
    }

    /// Multiplicative backoff factor. Default 0.5. Allowed: (0, 1).
    pub fn decrease_ratio(mut self, r: f64) -> Self {
        self.decrease_ratio = r;
        self
    }

    /// Peak in-flight fraction of the limit a window must reach before any
    /// law grows the limit. Default 0.9. Allowed: (0, 1].
    pub fn utilization(mut self, f: f64) -> Self {
        self.utilization = f;
        self
    }

    /// Vegas' operating-point latency. Default 100 ms. Allowed: > 0.
    pub fn target_latency(mut self, d: Duration) -> Self {
        self.target_latency = d;
        self
    }

    /// Vegas' and Gradient's deviation band. Default 0.1. Allowed: (0, 1].
    pub fn tolerance(mut self, f: f64) -> Self {
        self.tolerance = f;
        self
    }

    /// Length of a sample window: the law runs at most once per window, and
    /// latency statistics cover about one window. Default 1 s. Allowed: 1 ns
    /// ..= [`MAX_SAMPLE_WINDOW`] (24 h).
    pub fn sample_window(mut self, d: Duration) -> Self {
        self.sample_window = d;
        self
    }

    /// Lets a window close before the [sample window](Builder::sample_window)
    /// ends, as soon as it holds at least `min_samples` latency samples
    /// *and* is at least `rtt_multiple` recent latencies old, so that a fast
    /// backend is not held to one decision per sample window (a 5 ms
    /// backend with `(20, 4.0)` and 20 in flight: a decision every 20 ms
    /// instead of every second). The sample window stays the upper bound,
    /// and what closes a window early anyway (a fresh failure, for a law
    /// that [reacts to the first one](crate::ControlLaw::reacts_to_first_failure))
    /// still does. Default: off.
    ///
    /// The recent latency is the mean latency of the successes of the
    /// previous window, queueing included: a window must outlast the
    /// operations admitted under the limit the previous one decided, or
    /// the law would judge a limit by operations admitted under the one
    /// before. RTT_min would be shorter than that whenever a queue
    /// stretches the latency, which is when decisions matter most. Until a
    /// window with a success has closed (after construction or
    /// [`reset_stats`](crate::Limiter::reset_stats)) windows run the full
    /// sample window, and a window without successes keeps the last value.
    ///
    /// The check on a completion stays lock-free and allocation-free: one
    /// more load on the line it already reads and, once the window is old
    /// enough, a relaxed read of the sample count.
    ///
    /// Allowed: `min_samples` 1 ..= [`MAX_WINDOW_MIN_SAMPLES`], `rtt_multiple`
    /// 1 ..= [`MAX_WINDOW_RTT_MULTIPLE`] (a window shorter than one latency
    /// sees none of the operations its limit admitted).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let limiter = adaptx::Limiter::builder()
    ///     .sample_window(Duration::from_secs(1))
    ///     .sample_window_adaptive(20, 4.0)
    ///     .build()
    ///     .unwrap();
    /// # drop(limiter);
    ///
    /// let err = adaptx::Limiter::builder()
    ///     .sample_window_adaptive(20, 0.5)
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err.field(), "sample_window_rtt_multiple");
    /// assert_eq!(
    ///     err.to_string(),
    ///     "invalid sample_window_rtt_multiple: 0.5 (allowed: 1 <= value <= 1000)"
    /// );
    /// ```
    pub fn sample_window_adaptive(mut self, min_samples: u64, rtt_multiple: f64) -> Self {
        self.adaptive = Some((min_samples, rtt_multiple));
        self
    }

    /// Turns [`sample_window_adaptive`](Builder::sample_window_adaptive)
    /// off: every window runs the full [sample window](Builder::sample_window).
    /// The default; for [`Limiter::reconfigure`] on a limiter built with an
    /// adaptive window.
    pub fn sample_window_fixed(mut self) -> Self {
        self.adaptive = None;
        self
    }

    /// Latency samples to see before the law first runs; 0 disables warmup.
    /// Default 10. Windows keep rolling during warmup.
    pub fn warmup_samples(mut self, n: u64) -> Self {
        self.warmup_samples = n;
        self
    }

    /// Fraction by which RTT_min drifts toward the average per evaluated
    /// window; 0 disables. Default 0.001. Allowed: [0, 1].
    pub fn min_latency_decay(mut self, f: f64) -> Self {
        self.min_latency_decay = f;
        self
    }

    /// Fraction of an increase that may be randomly withheld, so fleets of
    /// limiters do not step up in lockstep; 0 disables. Default 0.1.
    /// Allowed: [0, 1].
    pub fn jitter(mut self, f: f64) -> Self {
        self.jitter = f;
        self
    }

    /// Seeds the jitter RNG and, through [`ControlLaw::seed`], the law's own
    /// draws, for reproducible runs. Default: a random seed, so a fleet's
    /// limiters do not draw in step.
    pub fn seed(mut self, seed: u64) -> Self {
        self.fixed.get_or_insert("seed");
        self.seed = Some(seed);
        self
    }

    /// The operation name in [`PanicError`](crate::PanicError)s from both
    /// `execute` and `try_execute`. Default `"adaptx::execute"` /
    /// `"adaptx::try_execute"`. Must not be empty.
    pub fn op_name(mut self, name: impl Into<String>) -> Self {
        self.fixed.get_or_insert("op_name");
        self.op_name = Some(name.into());
        self
    }

    /// The limiter's name: the `limiter` label of its metrics (feature
    /// `metrics`) and the `limiter` field of its log events (feature
    /// `tracing`); see [`observe`](crate::observe). Give each limiter of a
    /// process its own. Default [`DEFAULT_NAME`](crate::observe::DEFAULT_NAME)
    /// (`"default"`). Must not be empty.
    ///
    /// # Examples
    ///
    /// ```
    /// let limiter = adaptx::Limiter::builder().name("db").build()?;
    /// assert_eq!(limiter.name(), "db");
    ///
    /// let err = adaptx::Limiter::builder().name("").build().unwrap_err();
    /// assert_eq!(err.to_string(), "invalid name: \"\" (allowed: a non-empty name)");
    /// # Ok::<(), adaptx::ConfigError>(())
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.fixed.get_or_insert("name");
        self.name = Some(name.into());
        self
    }

    /// A callback run with `(old, new)` each time a window moves the limit:
    /// [`on_limit_change_with`](Builder::on_limit_change_with) for a hook
    /// that needs only the two limits. The two set the same hook: the later
    /// call wins.
    pub fn on_limit_change(self, hook: impl Fn(usize, usize) + Send + Sync + 'static) -> Self {
        self.on_limit_change_with(move |c: &LimitChange| hook(c.old, c.new))
    }

    /// A callback run with the [`LimitChange`] — old and new limit, the law
    /// and the window that decided — each time a window moves the limit.
    ///
    /// It runs synchronously on the thread whose completion closed the
    /// window, after the controller's lock is released. It must not block;
    /// a panic in it is caught and discarded. [`reset_stats`](Limiter::reset_stats)
    /// does not call it. It replaces a hook set earlier by either method.
    ///
    /// # Examples
    ///
    /// See [`LimitChange`].
    pub fn on_limit_change_with(
        mut self,
        hook: impl Fn(&LimitChange) + Send + Sync + 'static,
    ) -> Self {
        self.fixed.get_or_insert("on_limit_change");
        self.hook = Some(Box::new(hook));
        self
    }

    /// The wait queue of [`acquire`](Limiter::acquire): bound, per-waiter
    /// timeout and order. Default: unbounded FIFO, no timeout.
    pub fn queue(mut self, policy: QueuePolicy) -> Self {
        self.fixed.get_or_insert("queue");
        self.queue = policy;
        self
    }

    /// Splits the limit into named shares; see [`Partitions`]. Requests are
    /// classed with [`Limiter::class`]. `max_limit` is then at most
    /// [`MAX_PARTITIONED_LIMIT`](crate::MAX_PARTITIONED_LIMIT). Default: none.
    pub fn partitions(mut self, partitions: Partitions) -> Self {
        self.fixed.get_or_insert("partitions");
        self.partitions = Some(partitions);
        self
    }

    /// Holds a refused [`acquire`](Limiter::acquire) back for `delay` before
    /// it returns its error (Netflix's reject delay), to slow a client that
    /// retries at once. At most [`MAX_DELAYED_REJECTIONS`](crate::MAX_DELAYED_REJECTIONS)
    /// are held back at a time; beyond, and for `try_acquire`, which never
    /// waits, a refusal returns at once. Default: none. Allowed: > 0.
    #[cfg(feature = "tokio")]
    pub fn reject_delay(mut self, delay: Duration) -> Self {
        self.fixed.get_or_insert("reject_delay");
        self.reject_delay = Some(delay);
        self
    }

    /// The time source. Default [`SystemClock`](crate::SystemClock); a
    /// [`CoarseClock`](crate::CoarseClock) makes every reading one atomic
    /// load.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.fixed.get_or_insert("clock");
        self.clock = Some(AnyClock::from(clock));
        self
    }

    /// Checks every option and builds the limiter.
    ///
    /// After the per-field checks, `max_limit` below `min_limit` is an error
    /// naming both (as [`RateLimiterBuilder`](crate::RateLimiterBuilder)
    /// does for its rates; the Go reference raised the maximum to the
    /// minimum, silently ignoring one of the two), and `initial_limit` is
    /// clamped into `[min_limit, max_limit]`.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first option out of its range; for
    /// `max_limit < min_limit`, one naming `max_limit` whose allowed range
    /// names `min_limit` and its value.
    pub fn build(mut self) -> Result<Limiter, ConfigError> {
        let Checked {
            initial,
            cfg,
            law,
            custom_law,
        } = self.check_runtime()?;
        let Some(law) = law else {
            unreachable!("a builder from `Limiter::builder` always names a law");
        };
        if self.op_name.as_deref() == Some("") {
            return Err(ConfigError::new("op_name", "", "a non-empty name"));
        }
        if self.name.as_deref() == Some("") {
            return Err(ConfigError::new("name", "", "a non-empty name"));
        }

        let discipline = self.queue.discipline()?;
        let table = match &self.partitions {
            Some(p) => Some(p.table(cfg.max_limit)?),
            None => None,
        };
        if self.reject_delay.is_some_and(|d| d.is_zero()) {
            return Err(ConfigError::new("reject_delay", Duration::ZERO, "> 0"));
        }

        let clock = AnyClock::or_system(self.clock.take());
        let (execute_op, try_execute_op): (StdArc<str>, StdArc<str>) = match self.op_name.take() {
            Some(name) => {
                let name: StdArc<str> = name.into();
                (name.clone(), name)
            }
            None => (DEFAULT_EXECUTE_OP.into(), DEFAULT_TRY_EXECUTE_OP.into()),
        };
        let now = clock.now_nanos();
        let seed = self.seed.unwrap_or_else(|| fastrand::u64(..));
        let pool = Pool::with(initial, discipline, table, Some(clock.clone()));
        let name: Box<str> = self.name.as_deref().unwrap_or(DEFAULT_NAME).into();
        let observe = Observer::new(&name, &pool, cfg.min_limit, cfg.max_limit);
        Ok(Limiter::from_inner(Inner {
            hot: Padded(Hot {
                pool,
                window: Window::new(now),
            }),
            clock,
            tuned: Tuned::new(&cfg, law.as_ref()),
            names: LawNames::new(law.name()),
            execute_op,
            try_execute_op,
            control: Mutex::new(Control::new(law, seed, cfg)),
            hook: self.hook.take(),
            counters: Counters::default(),
            name,
            observe,
            admission: AdmissionConfig {
                queue_timeout: self.queue.waiter_timeout(),
                reject_delay: self.reject_delay,
                ..AdmissionConfig::default()
            },
            mode: ModeCell::default(),
            tuning: Mutex::new(Tuning::new(self.runtime_copy(), initial, custom_law)),
            handles: AtomicU64::new(1),
        }))
    }

    /// Checks every option a running limiter can change (the limits, the
    /// law and its parameters, the controller's parameters, the window) and
    /// returns them ready to use: the one validation of
    /// [`build`](Builder::build) and [`Limiter::reconfigure`]. The law is
    /// taken out of the builder; `None` when a reconfiguration keeps the
    /// user's law in force.
    pub(crate) fn check_runtime(&mut self) -> Result<Checked, ConfigError> {
        let initial = check_limit("initial_limit", self.initial_limit)?;
        let min = check_limit("min_limit", self.min_limit)?;
        let max = check_limit("max_limit", self.max_limit)?;
        if max < min {
            return Err(ConfigError::below_min(
                "max_limit",
                max as u64,
                "min_limit",
                min as u64,
                MAX_LIMIT_BOUND as u64,
            ));
        }
        let initial = initial.clamp(min, max);
        debug_assert!(max <= MAX_PERMITS);

        let smoothing = open_closed("smoothing", self.smoothing, 0.0, 1.0, "0 < value <= 1")?;
        let decay = closed_closed(
            "min_latency_decay",
            self.min_latency_decay,
            0.0,
            1.0,
            "0 <= value <= 1",
        )?;
        let jitter = closed_closed("jitter", self.jitter, 0.0, 1.0, "0 <= value <= 1")?;
        if self.sample_window.is_zero() || self.sample_window > MAX_SAMPLE_WINDOW {
            return Err(ConfigError::new(
                "sample_window",
                self.sample_window,
                "1ns ..= 24h",
            ));
        }
        let adaptive = match self.adaptive {
            None => None,
            Some((n, _)) if !(1..=MAX_WINDOW_MIN_SAMPLES).contains(&n) => {
                return Err(ConfigError::new(
                    "sample_window_min_samples",
                    n,
                    "1 ..= 1000000",
                ));
            }
            Some((min_samples, k)) => Some(AdaptiveWindow {
                min_samples,
                rtt_multiple: closed_closed(
                    "sample_window_rtt_multiple",
                    k,
                    1.0,
                    MAX_WINDOW_RTT_MULTIPLE,
                    "1 <= value <= 1000",
                )?,
            }),
        };
        // Every built-in law's options are checked, even those of a law not
        // chosen: a bad value is an error wherever it is.
        let aimd = Aimd::new(self.increase_rate, self.decrease_ratio, self.utilization)?;
        let vegas = Vegas::new(
            self.tolerance,
            self.target_latency,
            self.decrease_ratio,
            self.utilization,
        )?;
        let gradient = Gradient::new(self.tolerance, self.decrease_ratio, self.utilization)?;
        let custom_law = self.law.is_some() || self.keep_law;
        let law: Option<Box<dyn ControlLaw>> = match (self.law.take(), self.algorithm) {
            (Some(law), _) => Some(law),
            (None, _) if self.keep_law => None,
            (None, Algorithm::Aimd) => Some(Box::new(aimd)),
            (None, Algorithm::Vegas) => Some(Box::new(vegas)),
            (None, Algorithm::Gradient) => Some(Box::new(gradient)),
            (None, Algorithm::Ceiling) => Some(Box::new(Ceiling::new(
                CEILING_DEFAULT_TOLERANCE,
                self.utilization,
            ))),
        };
        let window_nanos = u64::try_from(self.sample_window.as_nanos()).unwrap_or(u64::MAX);
        Ok(Checked {
            initial,
            cfg: ControlConfig {
                min_limit: min,
                max_limit: max,
                warmup: self.warmup_samples,
                smoothing,
                min_latency_decay: decay,
                jitter,
                window_nanos,
                adaptive,
                forced: None,
            },
            law,
            custom_law,
        })
    }
}

/// The options [`Builder::check_runtime`] checked, ready to use.
pub(crate) struct Checked {
    /// `initial_limit`, clamped into `[min, max]`.
    pub(crate) initial: usize,
    pub(crate) cfg: ControlConfig,
    /// The law to run; `None`: keep the user's law in force.
    pub(crate) law: Option<Box<dyn ControlLaw>>,
    /// Whether that law is a user's ([`Builder::law`]).
    pub(crate) custom_law: bool,
}

/// Checks a limit given as option `field`: 1 ..= [`MAX_LIMIT_BOUND`].
pub(crate) fn check_limit(field: &'static str, n: usize) -> Result<usize, ConfigError> {
    if (1..=MAX_LIMIT_BOUND).contains(&n) {
        Ok(n)
    } else {
        Err(ConfigError::new(field, n, "1 ..= 2147483647"))
    }
}

/// What [`Limiter::reconfigure`] needs of a builder.
impl Builder {
    /// A builder holding this one's run-time options (everything
    /// [`check_runtime`](Builder::check_runtime) reads but the law object)
    /// and the defaults otherwise.
    pub(crate) fn runtime_copy(&self) -> Builder {
        Builder {
            algorithm: self.algorithm,
            initial_limit: self.initial_limit,
            min_limit: self.min_limit,
            max_limit: self.max_limit,
            smoothing: self.smoothing,
            increase_rate: self.increase_rate,
            decrease_ratio: self.decrease_ratio,
            utilization: self.utilization,
            target_latency: self.target_latency,
            tolerance: self.tolerance,
            sample_window: self.sample_window,
            adaptive: self.adaptive,
            warmup_samples: self.warmup_samples,
            min_latency_decay: self.min_latency_decay,
            jitter: self.jitter,
            ..Builder::new()
        }
    }

    /// Marks a reconfiguration's builder: the user's law in force stays
    /// unless replaced.
    pub(crate) fn keeping_law(mut self, keep: bool) -> Builder {
        self.keep_law = keep;
        self
    }

    /// Whether the built-in law `other` describes differs from this one's
    /// (the algorithm or one of the law parameters).
    pub(crate) fn law_differs(&self, other: &Builder) -> bool {
        self.algorithm != other.algorithm
            || self.increase_rate.to_bits() != other.increase_rate.to_bits()
            || self.decrease_ratio.to_bits() != other.decrease_ratio.to_bits()
            || self.utilization.to_bits() != other.utilization.to_bits()
            || self.target_latency != other.target_latency
            || self.tolerance.to_bits() != other.tolerance.to_bits()
    }

    /// Whether a law object was given ([`law`](Builder::law)).
    pub(crate) fn has_law(&self) -> bool {
        self.law.is_some()
    }

    /// Refuses an option that only a build can set, naming it.
    pub(crate) fn check_no_fixed(&self) -> Result<(), ConfigError> {
        match self.fixed {
            Some(field) => Err(ConfigError::new(
                field,
                "a new value",
                "set only when building the limiter",
            )),
            None => Ok(()),
        }
    }
}
