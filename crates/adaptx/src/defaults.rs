//! Named defaults and bounds. The defaults are those of the reference
//! implementation (Go adaptx v1.5.2).

use std::time::Duration;

/// The limit a limiter starts at before any adaptation.
pub const DEFAULT_INITIAL_LIMIT: usize = 10;
/// The floor the adaptive limit is never driven below.
pub const DEFAULT_MIN_LIMIT: usize = 1;
/// The ceiling the adaptive limit is never driven above, and the hard cap on
/// concurrently admitted operations.
pub const DEFAULT_MAX_LIMIT: usize = 1000;
/// The largest `max_limit` a limiter accepts (the permit engine packs the
/// limit and the in-flight count into one 64-bit word).
pub const MAX_LIMIT_BOUND: usize = (1 << 31) - 1;
/// EMA weight given to each window's mean latency.
pub const DEFAULT_SMOOTHING: f64 = 0.2;
/// Additive credit AIMD earns per eligible window.
pub const DEFAULT_INCREASE_RATE: f64 = 1.0;
/// Multiplicative factor applied to the limit on a backoff window.
pub const DEFAULT_DECREASE_RATIO: f64 = 0.5;
/// Fraction of the limit that a window's peak in-flight must reach before any
/// law may grow the limit.
pub const DEFAULT_UTILIZATION: f64 = 0.9;
/// The latency Vegas treats as its operating point.
pub const DEFAULT_TARGET_LATENCY: Duration = Duration::from_millis(100);
/// Fractional latency deviation Vegas and Gradient tolerate before reacting.
pub const DEFAULT_TOLERANCE: f64 = 0.1;
/// The interval over which samples are aggregated into one adjustment.
pub const DEFAULT_SAMPLE_WINDOW: Duration = Duration::from_secs(1);
/// The longest sample window a limiter accepts.
pub const MAX_SAMPLE_WINDOW: Duration = Duration::from_secs(24 * 60 * 60);
/// The largest `min_samples` of `Builder::sample_window_adaptive`.
pub const MAX_WINDOW_MIN_SAMPLES: u64 = 1_000_000;
/// The largest `rtt_multiple` of `Builder::sample_window_adaptive`.
pub const MAX_WINDOW_RTT_MULTIPLE: f64 = 1000.0;
/// Number of latency samples recorded before adaptation begins.
pub const DEFAULT_WARMUP_SAMPLES: u64 = 10;
/// Fraction by which RTT_min drifts toward the average on each evaluated window.
pub const DEFAULT_MIN_LATENCY_DECAY: f64 = 0.001;
/// Fraction of a limit increase that may be randomly withheld.
pub const DEFAULT_JITTER: f64 = 0.1;
/// A suggested drain bound for `Limiter::close_with_timeout` (feature `tokio`).
pub const DEFAULT_CLOSE_TIMEOUT: Duration = Duration::from_secs(30);
/// The operation name attached to panics caught by `execute`.
pub const DEFAULT_EXECUTE_OP: &str = "adaptx::execute";
/// The operation name attached to panics caught by `try_execute`.
pub const DEFAULT_TRY_EXECUTE_OP: &str = "adaptx::try_execute";
/// The longest latency a sample records (2^44 ns, about 4.9 hours); longer
/// ones are recorded as this, which keeps a window's latency sum exact.
pub const MAX_SAMPLE_LATENCY: std::time::Duration = std::time::Duration::from_nanos(1 << 44);
/// The most rejections a limiter holds back at once for its reject delay
/// (`Builder::reject_delay`); beyond, a rejection returns at once.
pub const MAX_DELAYED_REJECTIONS: u64 = 100;
