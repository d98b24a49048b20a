//! What a law has learned, for the user who wants to know why.

/// A control law's own state, from [`ControlLaw::state`](crate::ControlLaw::state)
/// and in [`Stats::law_state`](crate::Stats::law_state): what it has
/// learned that, with the window, decides the next limit.
///
/// Latencies are `f64` nanoseconds, as in [`WindowSummary`](crate::WindowSummary).
/// With the `serde` feature it serializes with a `"law"` tag
/// (`{"law":"ceiling","phase":"known",…}`).
///
/// # Examples
///
/// ```
/// use adaptx::{Algorithm, LawState, Limiter};
///
/// let limiter = Limiter::builder().algorithm(Algorithm::Ceiling).build()?;
/// match limiter.stats().law_state {
///     LawState::Ceiling { phase, ceiling, .. } => {
///         assert_eq!(phase, "slow_start");
///         assert_eq!(ceiling, None);
///     }
///     other => panic!("{other:?}"),
/// }
/// # Ok::<(), adaptx::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "law", rename_all = "snake_case"))]
#[non_exhaustive]
pub enum LawState {
    /// The law reports nothing (the default of
    /// [`ControlLaw::state`](crate::ControlLaw::state), for a law of your own).
    #[default]
    Unreported,
    /// [`Aimd`](crate::Aimd).
    #[non_exhaustive]
    Aimd {
        /// The increase credit earned and not yet spent (a fraction of one
        /// permit): with an increase rate below 1, how close the next step is.
        credit: f64,
    },
    /// [`Vegas`](crate::Vegas).
    #[non_exhaustive]
    Vegas {
        /// The floor the last re-probe measured (and every window since
        /// lowered), which the law reads instead of RTT_min when higher;
        /// `None` before the first re-probe.
        relearned_floor_nanos: Option<f64>,
        /// Whether a re-probe of the floor runs now (the limit is cut to
        /// measure it and will be restored).
        probing: bool,
        /// Busy windows in a row on which the law read a queue: at
        /// [`BASELINE_EXPIRY_WINDOWS`](crate::BASELINE_EXPIRY_WINDOWS) (and
        /// doubling) the floor is re-probed.
        queued_windows: u32,
    },
    /// [`Gradient`](crate::Gradient): the same baseline manager as Vegas.
    #[non_exhaustive]
    Gradient {
        /// As in [`LawState::Vegas`].
        relearned_floor_nanos: Option<f64>,
        /// As in [`LawState::Vegas`].
        probing: bool,
        /// As in [`LawState::Vegas`].
        queued_windows: u32,
    },
    /// [`Ceiling`](crate::Ceiling).
    #[non_exhaustive]
    Ceiling {
        /// `"slow_start"` (no overload seen: growing by half per window),
        /// `"known"` (resting below the remembered `ceiling`, probing it
        /// now and then) or `"explore"` (a probe was clean: climbing by
        /// `step`).
        phase: &'static str,
        /// The remembered ceiling: the lowest limit that failed, in phase
        /// `"known"`.
        ceiling: Option<usize>,
        /// The climb's next step, in phase `"explore"`.
        step: Option<usize>,
        /// The law's latency floor: the lowest mean success latency of a
        /// measured window since the floor was last probed, plus the
        /// standard errors by which the lowest of that many noisy means
        /// falls below their mean.
        floor_nanos: Option<f64>,
        /// The concurrency the backend served in the last window long
        /// enough to measure it (Little's law), and what the limit was then.
        served: Option<f64>,
        /// The limit at which `served` was measured.
        served_at: usize,
        /// The learned background failure probability per sample (failures
        /// that come at any load), below which failures are not overload.
        noise: f64,
        /// Whether a floor probe (one window at half the limit) runs now.
        probing_floor: bool,
        /// Whether the limit is climbing back after giving 7 % of itself
        /// away to share the ceiling.
        yielding: bool,
        /// Whether a neighbour sharing the ceiling showed itself in the last
        /// 60 windows (room this limit gave was taken, or room found at the
        /// ceiling on a quiet backend ran out before the third try): the
        /// limit then exchanges permits with it, giving them away for a
        /// window at one per 30 permits per window at rest, on a schedule,
        /// and otherwise trying for one more.
        neighbour: bool,
    },
}
