//! Run-time control of a running [`Limiter`]: its [`Mode`], a
//! reconfiguration checked by the builder's own validation, and a limit
//! forced by hand.
//!
//! # Implementation details
//!
//! Every change here takes the `tuning` mutex first (so changes apply in
//! one order, and a mode's two halves — the limiter's `mode` and the pool's
//! over-limit switch — never interleave with another change), then the
//! controller mutex where the controller's state changes, so a change never
//! lands in the middle of a window close. The limit moves through the
//! engine's one limit-change path (`Pool::set_limit_deferred`, the one the
//! law's decisions take): growth grants queued waiters in their order, a
//! shrink below the permits held becomes debt their releases retire, and
//! the waiters it grants are woken once no lock is held.
//!
//! Completions read what they need of the settings from [`Tuned`], three
//! relaxed atomic loads where they read three plain fields before; the rest
//! lives under the controller mutex, which only a window close takes.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::builder::{Builder, Checked, check_limit};
use super::{Inner, Limiter};
use crate::control::ControlConfig;
use crate::error::ConfigError;
use crate::law::ControlLaw;
use crate::mode::Mode;
use crate::observe::{Operated, Operation};
use crate::pool::{Woken, check_partitioned_limit};
use crate::sync::lock;

/// The most distinct law names a limiter can show over its life (each
/// reconfiguration to a law of a new name takes one).
pub(crate) const MAX_LAW_NAMES: usize = 16;

/// The settings completions read, as atomics a reconfiguration can store.
#[derive(Debug)]
pub(crate) struct Tuned {
    /// The sample window, ns.
    window_nanos: AtomicU64,
    /// The samples an adaptive window needs before it may close early (see
    /// [`Builder::sample_window_adaptive`]); `u64::MAX` when that is off.
    min_samples: AtomicU64,
    /// A fresh failure closes the window at once while the limit is above
    /// this: `min_limit` when the law reacts to the first failure
    /// ([`ControlLaw::reacts_to_first_failure`]) and no limit is forced,
    /// `usize::MAX` otherwise (a forced limit never moves, so every failure
    /// would stay fresh and close a window).
    react_above: AtomicUsize,
}

impl Tuned {
    pub(crate) fn new(cfg: &ControlConfig, law: &dyn ControlLaw) -> Self {
        let t = Self {
            window_nanos: AtomicU64::new(0),
            min_samples: AtomicU64::new(0),
            react_above: AtomicUsize::new(0),
        };
        t.set(cfg, law);
        t
    }

    fn set(&self, cfg: &ControlConfig, law: &dyn ControlLaw) {
        self.window_nanos.store(cfg.window_nanos, Ordering::Relaxed);
        self.min_samples.store(
            cfg.adaptive.map_or(u64::MAX, |a| a.min_samples),
            Ordering::Relaxed,
        );
        let react = law.reacts_to_first_failure() && cfg.forced.is_none();
        self.react_above.store(
            if react { cfg.min_limit } else { usize::MAX },
            Ordering::Relaxed,
        );
    }

    #[inline]
    pub(crate) fn window_nanos(&self) -> u64 {
        self.window_nanos.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn min_samples(&self) -> u64 {
        self.min_samples.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn react_above(&self) -> usize {
        self.react_above.load(Ordering::Relaxed)
    }
}

/// The names of the laws a limiter has run, and which one runs now: read
/// without a lock (`execute` hands it to every operation), written only
/// under the `tuning` mutex. A `&'static str` cannot live in an atomic
/// without `unsafe`, so the names sit in write-once cells and the atomic
/// holds an index.
#[derive(Debug)]
pub(crate) struct LawNames {
    names: [OnceLock<&'static str>; MAX_LAW_NAMES],
    current: AtomicUsize,
}

impl LawNames {
    pub(crate) fn new(first: &'static str) -> Self {
        let names: [OnceLock<&'static str>; MAX_LAW_NAMES] =
            std::array::from_fn(|_| OnceLock::new());
        let _ = names[0].set(first);
        Self {
            names,
            current: AtomicUsize::new(0),
        }
    }

    /// The name of the law in force.
    #[inline]
    pub(crate) fn current(&self) -> &'static str {
        self.names[self.current.load(Ordering::Acquire)]
            .get()
            .copied()
            .unwrap_or_default()
    }

    /// The index of `name`, registering it if new. Under the `tuning` mutex.
    fn index(&self, name: &'static str) -> Result<usize, ConfigError> {
        for (i, cell) in self.names.iter().enumerate() {
            match cell.get() {
                Some(n) if *n == name => return Ok(i),
                Some(_) => {}
                None => {
                    let _ = cell.set(name);
                    return Ok(i);
                }
            }
        }
        Err(ConfigError::new(
            "law",
            name,
            "at most 16 distinct law names over a limiter's life",
        ))
    }

    fn select(&self, i: usize) {
        self.current.store(i, Ordering::Release);
    }
}

/// The run-time options as last built or reconfigured.
#[derive(Debug)]
pub(crate) struct Tuning {
    /// The builder's run-time options (no law object, hook or clock).
    settings: Builder,
    /// `initial_limit`, clamped: where [`Limiter::reset_stats`] goes back to.
    initial: usize,
    /// Whether the law in force is a user's ([`Builder::law`]).
    custom_law: bool,
}

impl Tuning {
    pub(crate) fn new(settings: Builder, initial: usize, custom_law: bool) -> Self {
        Self {
            settings,
            initial,
            custom_law,
        }
    }

    pub(crate) fn initial_limit(&self) -> usize {
        self.initial
    }
}

impl Inner {
    /// Moves the limit to `limit` through the engine's limit-change path
    /// (under the controller mutex, held by the caller): a decrease starts a
    /// new decrease epoch, as a law's does, so the failures of operations
    /// admitted under the old limit do not count against the new one.
    fn move_limit(&self, limit: usize) -> Woken {
        let pool = self.pool();
        if limit < pool.limit() {
            self.hot.window.bump_epoch();
        }
        pool.set_limit_deferred(limit).1
    }

    /// Tells the observer about an operator's change whose configuration is
    /// now `cfg` (under the controller mutex, held by the caller); the
    /// returned operation logs it once the mutex is released.
    fn operated(&self, what: Operated, cfg: &ControlConfig) -> Operation<'_> {
        self.observe
            .operated(what, self.pool(), cfg.min_limit, cfg.max_limit, cfg.forced)
    }
}

impl Limiter {
    /// The admission mode (see [`Mode`]).
    pub fn mode(&self) -> Mode {
        self.inner.mode.get()
    }

    /// Switches the admission mode at once; returns the mode it replaces.
    ///
    /// To [`Mode::Shadow`] or [`Mode::Bypass`]: every later request the
    /// limit refuses is admitted anyway (a permit above the limit, held and
    /// released like any other, counted in [`Stats::would_reject`](crate::Stats::would_reject)),
    /// and every request waiting in the queue is granted now. Back to
    /// [`Mode::Enforce`]: the permits above the limit stay valid; they count
    /// as [`debt`](Limiter::debt) that their releases retire, so nothing is
    /// admitted until the in-flight count is under the limit again. A
    /// closed limiter refuses in every mode.
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptx::{Limiter, Mode};
    ///
    /// let limiter = Limiter::builder().initial_limit(1).build()?;
    /// let held = limiter.try_acquire()?;
    /// assert_eq!(limiter.set_mode(Mode::Bypass), Mode::Enforce);
    /// let over = limiter.try_acquire()?; // admitted above the limit
    /// limiter.set_mode(Mode::Enforce);
    /// assert_eq!(limiter.debt(), 1);
    /// assert!(limiter.try_acquire().is_err());
    /// drop((held, over));
    /// assert!(limiter.try_acquire().is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_mode(&self, mode: Mode) -> Mode {
        let inner = &*self.inner;
        let (old, woken) = {
            let _tuning = lock(&inner.tuning);
            let old = inner.mode.set(mode);
            (old, inner.pool().set_over_limit(mode.admits_over_limit()))
        };
        woken.wake_all();
        old
    }

    /// Changes the options of the running limiter: `f` is handed a
    /// [`Builder`] holding the limiter's current run-time options, changes
    /// some, and the result is checked by the builder's own validation —
    /// a bad value is refused with the same [`ConfigError`] as
    /// [`Builder::build`], and then nothing changes.
    ///
    /// What can change: `min_limit`, `max_limit`, `initial_limit` (where
    /// [`reset_stats`](Limiter::reset_stats) goes back to), the law
    /// ([`algorithm`](Builder::algorithm), [`law`](Builder::law)) and its
    /// parameters, `smoothing`, `warmup_samples`, `min_latency_decay`,
    /// `jitter`, and the window ([`sample_window`](Builder::sample_window),
    /// [`sample_window_adaptive`](Builder::sample_window_adaptive),
    /// [`sample_window_fixed`](Builder::sample_window_fixed)). The options
    /// only a build can set (`queue`, `partitions`, `reject_delay`, `clock`,
    /// `seed`, `op_name`, `on_limit_change`) are refused, naming the option.
    ///
    /// What is kept: every permit (in-flight permits stay valid and are
    /// released into the resized pool), the queue and each waiter's place in
    /// it, the partitions, the counters, the window in progress, the
    /// controller's estimators (RTT_min, the moving average) and the mode.
    /// The law object is kept, with its state, unless the algorithm, one of
    /// its parameters, or the law itself changes; a new law starts fresh.
    ///
    /// The limit is clamped into the new `[min_limit, max_limit]` at once
    /// (unless a limit is [forced](Limiter::force_limit)): growth grants
    /// queued waiters in their order, a shrink below the permits held
    /// becomes [debt](Limiter::debt). A change of the adaptive window
    /// applies from the next window with a success (until then windows run
    /// the full sample window).
    ///
    /// A clamp is not a window's decision: no increase or decrease is
    /// counted and the limit-change hook is not called. A reconfiguration
    /// is rare: it takes the controller's lock and may allocate; admission
    /// and completions never wait for it.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first bad option, as from
    /// [`Builder::build`]; also for an option only a build can set, for a
    /// `max_limit` above [`MAX_PARTITIONED_LIMIT`](crate::MAX_PARTITIONED_LIMIT)
    /// on a partitioned limiter, and for a law whose name would be the
    /// 17th distinct one of this limiter's life.
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptx::{Algorithm, Limiter};
    ///
    /// let limiter = Limiter::builder().initial_limit(50).max_limit(100).build()?;
    /// limiter.reconfigure(|b| b.max_limit(20).algorithm(Algorithm::Vegas))?;
    /// assert_eq!(limiter.limit(), 20);
    /// assert_eq!(limiter.algorithm(), "vegas");
    ///
    /// // The builder's error, and nothing changes.
    /// let err = limiter.reconfigure(|b| b.min_limit(5).decrease_ratio(1.5)).unwrap_err();
    /// assert_eq!(err.to_string(), "invalid decrease_ratio: 1.5 (allowed: 0 < value < 1)");
    /// assert_eq!(limiter.stats().min_limit, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reconfigure(&self, f: impl FnOnce(Builder) -> Builder) -> Result<(), ConfigError> {
        let inner = &*self.inner;
        let (woken, operation) = {
            let mut tuning = lock(&inner.tuning);
            let seed = tuning
                .settings
                .runtime_copy()
                .keeping_law(tuning.custom_law);
            let mut b = f(seed);
            b.check_no_fixed()?;
            let new_law = b.has_law() || tuning.custom_law || tuning.settings.law_differs(&b);
            let Checked {
                initial,
                cfg,
                law,
                custom_law,
            } = b.check_runtime()?;
            if inner.pool().table().is_some() {
                check_partitioned_limit("max_limit", cfg.max_limit)?;
            }
            let law = law.filter(|_| new_law);
            let name = match &law {
                Some(l) => Some(inner.names.index(l.name())?),
                None => None,
            };
            // Checked: from here on nothing fails.
            tuning.settings = b.runtime_copy();
            tuning.initial = initial;
            tuning.custom_law = custom_law;
            let mut control = lock(&inner.control);
            let old = control.cfg;
            let cfg = ControlConfig {
                forced: old.forced,
                ..cfg
            };
            control.cfg = cfg;
            if let (Some(law), Some(i)) = (law, name) {
                control.set_law(law);
                inner.names.select(i);
            }
            inner.tuned.set(&cfg, control.law.as_ref());
            if cfg.adaptive != old.adaptive {
                inner.hot.window.set_early(u64::MAX);
            }
            let limit = inner.pool().limit();
            let woken = match cfg.forced {
                None if !(cfg.min_limit..=cfg.max_limit).contains(&limit) => {
                    inner.move_limit(limit.clamp(cfg.min_limit, cfg.max_limit))
                }
                _ => Woken::default(),
            };
            (woken, inner.operated(Operated::Reconfigured, &cfg))
        };
        woken.wake_all();
        operation.emit();
        Ok(())
    }

    /// Pins the limit at `limit` until [`release_forced_limit`](Limiter::release_forced_limit).
    ///
    /// The law keeps observing — every window still closes, the estimators
    /// and the law's state follow the traffic at the forced limit — but what
    /// it decides is not applied. The forced limit overrides `min_limit` and
    /// `max_limit` (an operator may pin a limit below the floor in an
    /// incident); the bounds apply again on release. It is applied at once,
    /// through the same path as the law's changes: growth grants queued
    /// waiters, a shrink below the permits held becomes
    /// [debt](Limiter::debt). Forcing again replaces the forced value;
    /// [`reset_stats`](Limiter::reset_stats) and
    /// [`reconfigure`](Limiter::reconfigure) keep it. It is not a window's
    /// decision: no increase or decrease is counted and the limit-change
    /// hook is not called; the `metrics` feature's level gauges follow at
    /// once and the `tracing` feature logs `limit forced` (see
    /// [`observe`](crate::observe)), as for `reconfigure` and
    /// `release_forced_limit`.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] for field `forced_limit` if `limit` is outside
    /// 1 ..= [`MAX_LIMIT_BOUND`](crate::MAX_LIMIT_BOUND) (1 ..= 65535 with
    /// partitions); nothing changes then.
    ///
    /// # Examples
    ///
    /// ```
    /// let limiter = adaptx::Limiter::builder().initial_limit(10).build()?;
    /// limiter.force_limit(3)?;
    /// assert_eq!((limiter.limit(), limiter.forced_limit()), (3, Some(3)));
    /// assert_eq!(limiter.release_forced_limit(), Some(3));
    /// assert_eq!(limiter.limit(), 3); // the law moves it from here
    /// assert!(limiter.force_limit(0).is_err());
    /// # Ok::<(), adaptx::ConfigError>(())
    /// ```
    pub fn force_limit(&self, limit: usize) -> Result<(), ConfigError> {
        let inner = &*self.inner;
        let limit = check_limit("forced_limit", limit)?;
        if inner.pool().table().is_some() {
            check_partitioned_limit("forced_limit", limit)?;
        }
        let (woken, operation) = {
            let _tuning = lock(&inner.tuning);
            let mut control = lock(&inner.control);
            control.cfg.forced = Some(limit);
            inner.tuned.set(&control.cfg, control.law.as_ref());
            let woken = inner.move_limit(limit);
            (woken, inner.operated(Operated::Forced, &control.cfg))
        };
        woken.wake_all();
        operation.emit();
        Ok(())
    }

    /// Hands the limit back to the law: returns the limit that was forced,
    /// or `None` if none was. The limit stays where it was forced, clamped
    /// into `[min_limit, max_limit]`, and the next window's decision moves
    /// it.
    pub fn release_forced_limit(&self) -> Option<usize> {
        let inner = &*self.inner;
        let (released, woken, operation) = {
            let _tuning = lock(&inner.tuning);
            let mut control = lock(&inner.control);
            let released = control.cfg.forced.take();
            inner.tuned.set(&control.cfg, control.law.as_ref());
            let cfg = control.cfg;
            let limit = inner.pool().limit();
            let woken = match released {
                Some(_) if !(cfg.min_limit..=cfg.max_limit).contains(&limit) => {
                    inner.move_limit(limit.clamp(cfg.min_limit, cfg.max_limit))
                }
                _ => Woken::default(),
            };
            let operation = released.map(|_| inner.operated(Operated::Released, &cfg));
            (released, woken, operation)
        };
        woken.wake_all();
        if let Some(operation) = operation {
            operation.emit();
        }
        released
    }

    /// The limit forced by hand, if any (see [`force_limit`](Limiter::force_limit)).
    pub fn forced_limit(&self) -> Option<usize> {
        lock(&self.inner.control).cfg.forced
    }
}
