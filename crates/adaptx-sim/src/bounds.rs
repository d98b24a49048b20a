//! The bounds of every scenario field and command-line value: what a
//! simulation can mean.
//!
//! A scenario is user input. Each bound below keeps one run finite and
//! meaningful: the engine keeps a per-second series per client, holds a
//! request slot per request in flight, and measures time in integer
//! nanoseconds, so a value past its bound either means nothing (an arrival
//! rate finer than the clock) or costs memory or hours before any output.
//! The *amount* of work a suite does — rate × duration × runs — is bounded
//! separately, by the estimate of [`crate::work`].
//!
//! Every check names the field, the value and the allowed range, as in
//! `backend.jitter: 1e300: expected 0 ..= 100`. `scenarios/README.md` has the
//! same table with the reasons.

use std::fmt::Display;

use crate::time::{Nanos, SECOND};

/// Nanoseconds in one microsecond.
const MICROSECOND: u64 = 1_000;

/// Nanoseconds in one hour.
const HOUR: u64 = 3_600 * SECOND;

/// Longest run: 24 h of virtual time. A run keeps one series entry per
/// client per second until the report is written; a day is beyond any
/// overload transient a limiter reacts to.
pub const MAX_DURATION: Nanos = Nanos(24 * HOUR);

/// Shortest run: 1 s (one measurement second).
pub const MIN_DURATION: Nanos = Nanos(SECOND);

/// Shortest latency-like value (`service_time`, `reject_latency`, `timeout`,
/// the limiter's `sample_window` and `target_latency`): 1 µs. Zero would let
/// a closed-loop worker be answered and resend at one instant forever;
/// below a microsecond the work estimate, not the model, is what matters.
pub const MIN_LATENCY: Nanos = Nanos(MICROSECOND);

/// Longest latency-like value (the same fields, and `think_time`): 1 h.
pub const MAX_LATENCY: Nanos = Nanos(HOUR);

/// Largest `backend.jitter`: the exponential term's mean is at most 100 ×
/// the service time.
pub const MAX_JITTER: f64 = 100.0;

/// Largest `backend.workers`, `backend.max_concurrency` and
/// `demand.workers`: one million.
pub const MAX_CONCURRENCY: u32 = 1_000_000;

/// Largest `demand.clients × demand.workers`: one million workers in all,
/// each of which may hold a request slot at once.
pub const MAX_TOTAL_WORKERS: u64 = 1_000_000;

/// Largest `demand.clients`: each client has its own limiter and its own
/// per-second series.
pub const MAX_CLIENTS: u32 = 1_000;

/// Largest rate, per second (`demand.rate`, `backend.rate_limit`): one per
/// nanosecond, the resolution of the virtual clock. Faster arrivals would
/// pile up on the same instant.
pub const MAX_RATE: f64 = 1e9;

/// Largest `initial_limit`, `min_limit` and `max_limit` of `[limiter]`: one
/// million (adaptx itself allows 2³¹ − 1; the oracle sweeps up to
/// `max_limit`).
pub const MAX_LIMIT: usize = 1_000_000;

/// Largest `limiter.warmup_samples`: one billion.
pub const MAX_WARMUP_SAMPLES: u64 = 1_000_000_000;

/// Most `[[schedule]]` entries in one file.
pub const MAX_SCHEDULE_ENTRIES: usize = 1_000;

/// Most `[[band]]`s in one file.
pub const MAX_BANDS: usize = 1_000;

/// Largest `|min|` and `|max|` of a band.
pub const MAX_BAND_BOUND: f64 = 1e12;

/// Largest band `threshold` (a limit, summed over clients:
/// [`MAX_CLIENTS`] × [`MAX_LIMIT`]).
pub const MAX_THRESHOLD: f64 = 1e9;

/// Largest band `fraction` (of a baseline goodput).
pub const MAX_FRACTION: f64 = 10.0;

/// Longest `name`, in characters.
pub const MAX_NAME_CHARS: usize = 64;

/// Longest `description` or band `note`, in characters.
pub const MAX_TEXT_CHARS: usize = 1_000;

/// Longest band `reference` (a bare file name), in bytes.
pub const MAX_REFERENCE_BYTES: usize = 255;

/// Largest scenario file read, in bytes: 1 MiB (the shipped files are a few
/// KiB; this keeps `/dev/zero` or a log file from being read whole).
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// Most seeds one command runs (`--seeds`).
pub const MAX_SEEDS: u64 = 1_000;

/// Most worker threads (`--threads`).
pub const MAX_THREADS: usize = 256;

/// `field: value: expected lo ..= hi` unless `lo <= value <= hi` (NaN is
/// never in range).
pub(crate) fn in_range<T: PartialOrd + Display>(
    field: &str,
    value: T,
    lo: T,
    hi: T,
) -> Result<(), String> {
    if lo <= value && value <= hi {
        Ok(())
    } else {
        Err(format!("{field}: {value}: expected {lo} ..= {hi}"))
    }
}

/// As [`in_range`], for a value that must also be above zero:
/// `expected > 0 ..= hi`.
pub(crate) fn positive_up_to(field: &str, value: f64, hi: f64) -> Result<(), String> {
    if value > 0.0 && value <= hi {
        Ok(())
    } else {
        Err(format!(
            "{field}: {}: expected > 0 ..= {}",
            num(value),
            num(hi)
        ))
    }
}

/// A latency-like duration within [`MIN_LATENCY`] ..= [`MAX_LATENCY`].
pub(crate) fn latency(field: &str, value: Nanos) -> Result<(), String> {
    in_range(field, value, MIN_LATENCY, MAX_LATENCY)
}

/// A run duration: whole seconds within [`MIN_DURATION`] ..=
/// [`MAX_DURATION`].
///
/// # Errors
///
/// `field: value: expected whole seconds, 1s ..= 24h`.
pub fn duration(field: &str, value: Nanos) -> Result<(), String> {
    if (MIN_DURATION..=MAX_DURATION).contains(&value) && value.0 % SECOND == 0 {
        Ok(())
    } else {
        Err(format!(
            "{field}: {value}: expected whole seconds, {MIN_DURATION} ..= {}h",
            MAX_DURATION.0 / HOUR
        ))
    }
}

/// `field: value: expected lo ..= hi` unless `lo <= value <= hi` (NaN is
/// never in range), with the numbers written short (`1e300`, not 301 digits).
pub(crate) fn f64_in_range(field: &str, value: f64, lo: f64, hi: f64) -> Result<(), String> {
    if lo <= value && value <= hi {
        Ok(())
    } else {
        Err(format!(
            "{field}: {}: expected {} ..= {}",
            num(value),
            num(lo),
            num(hi)
        ))
    }
}

/// `v` for a message: plain when moderate, in exponent form (`1e300`) when
/// very large or very small, so that no message prints hundreds of digits.
pub fn num(v: f64) -> String {
    if v != 0.0 && v.is_finite() && !(1e-4..1e7).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}
