//! Band metrics and the median-seed / worst-seed check.
//!
//! # The rule
//!
//! A band bound is checked twice over the seeds' values of its metric:
//!
//! | bound | median seed must be | worst seed must be |
//! |---|---|---|
//! | lower `min ≥ 0` | `≥ min` | `≥ min / 1.5` |
//! | upper `max ≥ 0` | `≤ max` | `≤ max × 1.5` |
//! | lower `min < 0` | `≥ min` | `≥ min × 1.5` |
//! | upper `max < 0` | `≤ max` | `≤ max / 1.5` |
//!
//! That is, the looser bound moves 1.5× away from zero in the permissive
//! direction; a bound of 0 (an event that must never happen) stays 0. A
//! time-to bound (`≤ 10 windows`) becomes `≤ 15 windows`; a range `[10, 24]`
//! becomes `[6.67, 36]`; a deviation `≤ 0.15` becomes `≤ 0.225`.
//!
//! The *worst* seed is the one whose value is furthest on the failing side of
//! that bound (a missing or NaN value is the worst of all). The *median* is
//! taken conservatively: with the values ordered from worst to best for that
//! bound, it is the one at index ⌊(n − 1)/2⌋ — for 10 seeds the 5th worst, so
//! a median that passes means at least 6 of the 10 seeds pass.
//!
//! # What a metric reads
//!
//! An interval metric reads the whole seconds of the band's series (the
//! totals, or client `client`'s) that overlap `[from, to)`; see
//! [`Metric`] for the defaults. Percentiles merge the seconds' latency
//! histograms ([`crate::Latencies`]), so they are exact to the histogram's
//! precision over any range. Every fraction of capacity divides by the
//! capacity of [`crate::capacity`], from the mean service time as simulated
//! (`service_time × (1 + jitter)`); a client's capacity is its share.

use crate::measure::{self, Run, Second, mean};
use crate::scenario::{BandSpec, Law, Metric};
use crate::time::SECOND;

/// How much looser the worst seed's bound is than the median's.
pub const WORST_SEED_FACTOR: f64 = 1.5;

/// The other runs a band may read, all with the same law (for the
/// reference) and seed.
#[derive(Debug, Clone, Copy, Default)]
pub struct Refs<'a> {
    /// The run of the band's `reference` scenario, for
    /// [`Metric::ReferenceDeviation`].
    pub reference: Option<&'a Run>,
    /// The oracle's run, for [`Metric::GoodputVsOracle`].
    pub oracle: Option<&'a Run>,
    /// The capped oracle's run, for [`Metric::GoodputVsCappedOracle`].
    pub capped_oracle: Option<&'a Run>,
}

/// The value of `band`'s metric for `run`, reading the other runs of `refs`
/// that the metric needs. NaN or infinite when the metric has no value (for
/// example a limit that never reaches its threshold is an infinite
/// time-to; a missing oracle is NaN).
pub fn metric(run: &Run, band: &BandSpec, refs: &Refs<'_>) -> f64 {
    let secs = |d: Option<crate::time::Nanos>| d.map_or(0, |d| d.0);
    let series = series_of(run, band);
    match band.metric {
        m @ (Metric::Goodput
        | Metric::MeanLimit
        | Metric::MaxLimit
        | Metric::OverloadFraction
        | Metric::ShedFraction
        | Metric::P50Ms
        | Metric::P99Ms) => measure_of(m, interval(run, band)),
        Metric::LimitDecreases => run.decreases as f64,
        Metric::LimitGrowth => {
            run.seconds.last().map_or(f64::NAN, |s| s.limit as f64) - run.initial_limit as f64
        }
        Metric::TimeToLimitAtMost | Metric::TimeToLimitAtLeast => {
            let th = band.threshold.unwrap_or(f64::NAN);
            let at_most = band.metric == Metric::TimeToLimitAtMost;
            // Brought down to a level is a state: the limit's median over
            // the second. Reached is an instant: the limit at its close.
            time_until(series, secs(band.after), 1, |w| {
                if at_most {
                    w[0].limit_median as f64 <= th
                } else {
                    w[0].limit as f64 >= th
                }
            })
        }
        Metric::RecoveryTime => {
            let base = mean(
                between(series, secs(band.baseline_from), secs(band.baseline_to))
                    .iter()
                    .map(|s| s.goodput as f64),
            );
            let want = band.fraction.unwrap_or(f64::NAN) * base;
            time_until(series, secs(band.after), 1, |w| w[0].goodput as f64 >= want)
        }
        Metric::MeanLimitRatio => {
            let m = |a, b| measure::mean_limit(between(series, a, b));
            m(secs(band.from), secs(band.to)) / m(secs(band.baseline_from), secs(band.baseline_to))
        }
        Metric::ReferenceDeviation => match refs.reference {
            Some(r) => (run.mean_limit() / r.mean_limit() - 1.0).abs(),
            None => f64::NAN,
        },
        Metric::ClientShareMin | Metric::ClientShareMax => {
            let per: Vec<f64> = (0..run.clients.len())
                .map(|c| {
                    let b = BandSpec {
                        client: Some(c),
                        ..band.clone()
                    };
                    goodput(interval(run, &b)) as f64
                })
                .collect();
            let fair = per.iter().sum::<f64>() / per.len() as f64;
            let pick = if band.metric == Metric::ClientShareMin {
                per.iter().copied().fold(f64::INFINITY, f64::min)
            } else {
                per.iter().copied().fold(f64::NEG_INFINITY, f64::max)
            };
            pick / fair
        }
        Metric::SuccessFraction => measure::success_fraction(interval(run, band)),
        Metric::GoodputShare => {
            let total = BandSpec {
                client: None,
                class: None,
                ..band.clone()
            };
            goodput(interval(run, band)) as f64 / goodput(interval(run, &total)) as f64
        }
        Metric::InvariantViolations => run.seconds.iter().map(|s| s.violations).sum::<u64>() as f64,
        Metric::WorstGoodput => {
            let k = window(band);
            interval(run, band)
                .windows(k)
                .map(measure::goodput_fraction)
                .fold(f64::NAN, f64::min)
        }
        Metric::TimeUntil => match &band.holds {
            Some(h) => time_until(series, secs(band.after), window(band), |w| {
                h.accepts(measure_of(h.measure, w))
            }),
            None => f64::NAN,
        },
        Metric::GoodputVsOracle | Metric::GoodputVsCappedOracle => {
            let oracle = if band.metric == Metric::GoodputVsOracle {
                refs.oracle
            } else {
                refs.capped_oracle
            };
            match oracle {
                Some(o) => goodput(interval(run, band)) as f64 / goodput(interval(o, band)) as f64,
                None => f64::NAN,
            }
        }
    }
}

/// The seconds a band's interval metric reads: the band's series (a
/// client's or the totals) over `[from, to)`, with the metric's defaults.
fn interval<'r>(run: &'r Run, band: &BandSpec) -> &'r [Second] {
    let from = match band.from {
        Some(f) => f.0,
        None if band.metric.whole_run_default() => 0,
        None => run.steady_from as u64 * SECOND,
    };
    let to = band.to.map_or(u64::MAX, |d| d.0);
    between(series_of(run, band), from, to)
}

/// The band's series: a class's, a client's or the totals.
fn series_of<'r>(run: &'r Run, band: &BandSpec) -> &'r [Second] {
    match band.class {
        Some(k) => run.classes.get(k).map_or(&[], Vec::as_slice),
        None => run.series(band.client),
    }
}

/// The whole seconds of `series` that overlap `[from, to)`.
fn between(series: &[Second], from: u64, to: u64) -> &[Second] {
    &series[measure::range(series.len(), from, to)]
}

/// The band's window in whole seconds (default 1).
fn window(band: &BandSpec) -> usize {
    band.window.map_or(1, |w| (w.0 / SECOND).max(1) as usize)
}

fn goodput(seconds: &[Second]) -> u64 {
    seconds.iter().map(|s| s.goodput).sum()
}

/// The interval metric `m` over `seconds` (a metric that is not one is
/// NaN; validation keeps them out).
fn measure_of(m: Metric, seconds: &[Second]) -> f64 {
    let ms = |v: Option<u64>| v.map_or(f64::NAN, |v| v as f64 / 1e6);
    match m {
        Metric::Goodput => measure::goodput_fraction(seconds),
        Metric::MeanLimit => measure::mean_limit(seconds),
        Metric::MaxLimit => seconds
            .iter()
            .map(|s| s.limit_max)
            .max()
            .map_or(f64::NAN, |v| v as f64),
        Metric::OverloadFraction => measure::overload_fraction(seconds),
        Metric::ShedFraction => measure::shed_fraction(seconds),
        Metric::P50Ms => ms(measure::quantile(seconds, 0.5)),
        Metric::P99Ms => ms(measure::quantile(seconds, 0.99)),
        _ => f64::NAN,
    }
}

/// Seconds from `after` to the end of the first `k`-second window of
/// `series` whose seconds all end after `after` and for which `ok` holds;
/// infinite if none does.
fn time_until(series: &[Second], after: u64, k: usize, ok: impl Fn(&[Second]) -> bool) -> f64 {
    // Second j ends at (j + 1) s, after `after` from j = ⌊after / 1 s⌋ on.
    let first = ((after / SECOND) as usize).min(series.len());
    match series[first..].windows(k).position(ok) {
        Some(p) => {
            let end = (first + p + k) as u64 * SECOND;
            (end - after) as f64 / SECOND as f64
        }
        None => f64::INFINITY,
    }
}

/// A band bound.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Bound {
    /// The value must be at least this.
    Min(f64),
    /// The value must be at most this.
    Max(f64),
    /// No bound: the value is only reported.
    Report,
}

impl Bound {
    /// The bound the worst seed must meet (see the [module docs](self)).
    pub fn looser(self) -> Bound {
        let f = WORST_SEED_FACTOR;
        match self {
            Bound::Min(b) if b >= 0.0 => Bound::Min(b / f),
            Bound::Min(b) => Bound::Min(b * f),
            Bound::Max(b) if b >= 0.0 => Bound::Max(b * f),
            Bound::Max(b) => Bound::Max(b / f),
            Bound::Report => Bound::Report,
        }
    }

    /// Whether `v` meets the bound; NaN never does.
    pub fn holds(self, v: f64) -> bool {
        match self {
            Bound::Min(b) => v >= b,
            Bound::Max(b) => v <= b,
            Bound::Report => true,
        }
    }

    /// "≥ 0.7", "≤ 24", "-".
    pub fn describe(self) -> String {
        match self {
            Bound::Min(b) => format!(">= {}", num(b)),
            Bound::Max(b) => format!("<= {}", num(b)),
            Bound::Report => "reported".into(),
        }
    }
}

/// A number for a table: up to 3 decimals, no trailing zeros; `never` for
/// infinity.
pub fn num(v: f64) -> String {
    if v.is_nan() {
        return "n/a".into();
    }
    if v.is_infinite() {
        return if v > 0.0 {
            "never".into()
        } else {
            "-inf".into()
        };
    }
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" { "0".into() } else { s.into() }
}

/// One bound of one band for one law, checked over the seeds.
#[derive(Debug, Clone)]
pub struct Check {
    /// The scenario's id.
    pub scenario: String,
    /// The law.
    pub law: Law,
    /// The band's index in its file.
    pub band: usize,
    /// The metric and its parameters.
    pub what: String,
    /// The band's note.
    pub note: String,
    /// The median seed's bound.
    pub bound: Bound,
    /// The median value (conservative, see the module docs) and its seed.
    pub median: (f64, u64),
    /// The worst value and its seed.
    pub worst: (f64, u64),
    /// Seeds that had no run (a panic), with the message.
    pub failed_seeds: Vec<(u64, String)>,
    /// Number of seeds.
    pub seeds: usize,
}

impl Check {
    /// Whether the median seed meets the bound.
    pub fn median_ok(&self) -> bool {
        self.failed_seeds.is_empty() && self.bound.holds(self.median.0)
    }

    /// Whether the worst seed meets the looser bound.
    pub fn worst_ok(&self) -> bool {
        self.failed_seeds.is_empty() && self.bound.looser().holds(self.worst.0)
    }

    /// Both.
    pub fn passed(&self) -> bool {
        self.median_ok() && self.worst_ok()
    }
}

/// Orders `values` (value, seed) from worst to best for `bound` and returns
/// (median, worst). NaN is the worst of all.
pub fn median_and_worst(values: &[(f64, u64)], bound: Bound) -> ((f64, u64), (f64, u64)) {
    let mut v = values.to_vec();
    let key = |x: f64| -> f64 {
        if x.is_nan() {
            return f64::NEG_INFINITY;
        }
        // Higher key = better.
        match bound {
            Bound::Max(_) => -x,
            _ => x,
        }
    };
    v.sort_by(|a, b| key(a.0).total_cmp(&key(b.0)).then(a.1.cmp(&b.1)));
    if v.is_empty() {
        return ((f64::NAN, 0), (f64::NAN, 0));
    }
    (v[(v.len() - 1) / 2], v[0])
}

/// Checks `band` (index `idx` of scenario `scenario`) for `law` over
/// `values` (one per seed that ran) and `failed` seeds.
pub fn check(
    scenario: &str,
    idx: usize,
    band: &BandSpec,
    law: Law,
    values: &[(f64, u64)],
    failed: &[(u64, String)],
) -> Vec<Check> {
    let mut bounds = Vec::new();
    if let Some(b) = band.min {
        bounds.push(Bound::Min(b));
    }
    if let Some(b) = band.max {
        bounds.push(Bound::Max(b));
    }
    if bounds.is_empty() {
        bounds.push(Bound::Report);
    }
    bounds
        .into_iter()
        .map(|bound| {
            let (median, worst) = median_and_worst(values, bound);
            Check {
                scenario: scenario.to_string(),
                law,
                band: idx,
                what: band.describe(),
                note: band.note.clone(),
                bound,
                median,
                worst,
                failed_seeds: failed.to_vec(),
                seeds: values.len() + failed.len(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looser_moves_away_from_zero() {
        assert_eq!(Bound::Min(0.6).looser(), Bound::Min(0.6 / 1.5));
        assert_eq!(Bound::Max(10.0).looser(), Bound::Max(15.0));
        assert_eq!(Bound::Max(0.0).looser(), Bound::Max(0.0));
        assert_eq!(Bound::Min(-2.0).looser(), Bound::Min(-3.0));
    }

    #[test]
    fn median_is_conservative_and_worst_is_worst() {
        let v: Vec<(f64, u64)> = (0..10).map(|s| (s as f64, s)).collect();
        let (m, w) = median_and_worst(&v, Bound::Min(0.0));
        assert_eq!((m, w), ((4.0, 4), (0.0, 0)));
        let (m, w) = median_and_worst(&v, Bound::Max(0.0));
        assert_eq!((m, w), ((5.0, 5), (9.0, 9)));
        let mut v = v;
        v[3].0 = f64::NAN;
        let (_, w) = median_and_worst(&v, Bound::Max(0.0));
        assert!(w.0.is_nan());
    }

    #[test]
    fn nan_fails() {
        assert!(!Bound::Min(0.0).holds(f64::NAN));
        assert!(!Bound::Max(0.0).holds(f64::NAN));
        assert!(!Bound::Max(10.0).holds(f64::INFINITY));
    }
}
