//! Demand that moves: per-client settings (`[[client]]`), changes over time
//! (`[[demand.schedule]]`: steps and linear ramps of the open rate and the
//! closed-loop worker count, think time steps, clients joining and leaving),
//! and the piecewise-linear curves the engine follows.
//!
//! ```toml
//! [demand]
//! kind = "open"
//! rate = 50.0
//!
//! [[demand.schedule]]     # a ramp through capacity: 50/s at 30 s to 800/s at 150 s
//! at = "30s"
//! rate = 800.0
//! ramp = "120s"
//! ```
//!
//! # Implementation details
//!
//! Each client's rate and worker count is a [`Curve`]: a piecewise-linear
//! function of time, built once from the schedule (a step is two points at
//! one instant). A change that starts while an earlier ramp is under way
//! starts from the value the ramp has reached.
//!
//! Open arrivals follow the rate curve by *thinning*: on each linear piece
//! the engine draws candidates at the piece's highest rate `λ̂` and keeps one
//! at time `t` with probability `λ(t) / λ̂`; a candidate past the piece's end
//! is discarded and drawing restarts at the end (the exponential gap is
//! memoryless, so this is exact). On a flat piece every candidate is kept
//! without a draw, so a constant rate consumes the random stream exactly as a
//! plain Poisson process does.
//!
//! The closed-loop worker count is the curve rounded to the nearest integer;
//! the engine is woken at each instant the rounded value changes. Added
//! workers start at once; removed ones retire from the queue of waiting
//! workers first, then each as it next becomes ready (after its answer and
//! think time), so no request is abandoned.

use serde::Deserialize;

use crate::bounds::{
    self, MAX_CONCURRENCY, MAX_LATENCY, MAX_RATE, MAX_SCHEDULE_ENTRIES, MAX_TOTAL_WORKERS,
};
use crate::scenario::{DemandKind, LimiterSpec, Scenario};
use crate::time::{Nanos, SECOND};

/// A change to the demand at time `at`: `rate` and `workers` move to their
/// new value at once, or linearly over `ramp`; `think_time` steps.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DemandChange {
    /// When the change starts.
    pub at: Nanos,
    /// Only this client (an index from 0); default: every client.
    pub client: Option<u32>,
    /// Open demand: the new arrival rate per second (0 = the client stops
    /// sending).
    pub rate: Option<f64>,
    /// Closed demand: the new worker count (0 = the client leaves).
    pub workers: Option<u32>,
    /// Closed demand: the new think time (always a step).
    pub think_time: Option<Nanos>,
    /// Move `rate` / `workers` linearly from their value at `at` to the new
    /// one over this long (default: a step).
    pub ramp: Option<Nanos>,
}

impl DemandChange {
    /// When the change is complete: `at + ramp`.
    pub fn end(&self) -> Nanos {
        Nanos(self.at.0.saturating_add(self.ramp.map_or(0, |r| r.0)))
    }

    fn applies_to(&self, client: u32) -> bool {
        self.client.is_none_or(|c| c == client)
    }
}

/// Settings of one client (`[[client]]`, the i-th entry describing client
/// i); anything not set keeps the `[demand]`, `[limiter]` or
/// `[rate_limiter]` value.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientSpec {
    /// Closed demand: this client's workers at time zero (0: it joins later
    /// through a schedule change).
    pub workers: Option<u32>,
    /// Open demand: this client's arrival rate at time zero (0: it joins
    /// later).
    pub rate: Option<f64>,
    /// Closed demand: this client's think time at time zero.
    pub think_time: Option<Nanos>,
    /// Limiter options for this client, over `[limiter]`'s.
    #[serde(default)]
    pub limiter: LimiterSpec,
    /// Rate limiter options for this client, over `[rate_limiter]`'s.
    pub rate_limiter: Option<crate::rate::RateLimiterSpec>,
}

/// A piecewise-linear function of time: `(t, value)` points in time order;
/// two points at one instant make a step (the later one holds from then
/// on); constant before the first point and after the last.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Curve {
    points: Vec<(u64, f64)>,
}

impl Curve {
    /// The constant `v`.
    pub(crate) fn constant(v: f64) -> Self {
        Self {
            points: vec![(0, v)],
        }
    }

    /// The value at `t` (after any step at `t`).
    pub(crate) fn at(&self, t: u64) -> f64 {
        let k = self.points.partition_point(|p| p.0 <= t);
        if k == 0 {
            return self.points[0].1;
        }
        let (t0, v0) = self.points[k - 1];
        match self.points.get(k) {
            None => v0,
            Some(&(t1, v1)) => v0 + (v1 - v0) * ((t - t0) as f64 / (t1 - t0) as f64),
        }
    }

    /// Moves to `v` from `at`, linearly over `ramp` ns (0: a step), from the
    /// value the curve has at `at`; everything planned after `at` is
    /// replaced.
    pub(crate) fn change(&mut self, at: u64, v: f64, ramp: u64) {
        let from = self.at(at);
        self.points.retain(|p| p.0 < at);
        self.points.push((at, from));
        self.points.push((at.saturating_add(ramp), v));
    }

    /// The linear piece that holds just after `t`: its end (`u64::MAX` for
    /// the last, constant piece) and its highest value.
    pub(crate) fn piece(&self, t: u64) -> (u64, f64) {
        let k = self.points.partition_point(|p| p.0 <= t);
        match self.points.get(k) {
            None => (u64::MAX, self.at(t)),
            Some(&(t1, v1)) => (t1, self.at(t).max(v1)),
        }
    }

    /// The mean value over `[a, b)` (exact: the integral of the pieces).
    pub(crate) fn mean(&self, a: u64, b: u64) -> f64 {
        if b <= a {
            return self.at(a);
        }
        let mut knots: Vec<u64> = vec![a];
        knots.extend(self.points.iter().map(|p| p.0).filter(|&t| t > a && t < b));
        knots.push(b);
        let mut area = 0.0;
        for w in knots.windows(2) {
            let (x, y) = (w[0], w[1]);
            // Just inside the piece on both ends: a step at `x` counts from
            // its new value, a step at `y` not at all.
            let vx = self.at(x);
            let vy = self.at_left(y);
            area += (vx + vy) / 2.0 * (y - x) as f64;
        }
        area / (b - a) as f64
    }

    /// The highest value anywhere.
    pub(crate) fn max(&self) -> f64 {
        self.points.iter().map(|p| p.1).fold(0.0, f64::max)
    }

    /// The value just before `t` (before any step at `t`).
    fn at_left(&self, t: u64) -> f64 {
        let k = self.points.partition_point(|p| p.0 < t);
        if k == 0 {
            return self.points[0].1;
        }
        let (t0, v0) = self.points[k - 1];
        match self.points.get(k) {
            None => v0,
            Some(&(t1, v1)) if t1 > t0 => v0 + (v1 - v0) * ((t - t0) as f64 / (t1 - t0) as f64),
            Some(_) => v0,
        }
    }

    /// The rounded value at `t`, as a worker count.
    pub(crate) fn count_at(&self, t: u64) -> u64 {
        self.at(t).round().max(0.0) as u64
    }

    /// The first instant after `t` at which [`count_at`](Curve::count_at)
    /// differs from its value at `t`; `u64::MAX` if never.
    pub(crate) fn next_count_change(&self, t: u64) -> u64 {
        let now = self.count_at(t);
        let count = |v: f64| v.round().max(0.0) as u64;
        let mut from = t;
        loop {
            let k = self.points.partition_point(|p| p.0 <= from);
            let Some(&(end, _)) = self.points.get(k) else {
                return u64::MAX;
            };
            // On [from, end) the curve runs linearly (so monotonically) from
            // at(from) to at_left(end).
            let (v0, v1) = (self.at(from), self.at_left(end));
            if count(v1) != now {
                // The crossing of the half-integer next to `now` in the
                // direction of travel.
                let edge = if v1 > v0 {
                    now as f64 + 0.5
                } else {
                    now as f64 - 0.5
                };
                let frac = ((edge - v0) / (v1 - v0)).clamp(0.0, 1.0);
                let mut c = from + ((end - from) as f64 * frac).ceil() as u64;
                c = c.clamp(t + 1, end);
                // Rounding of the float: step to the first instant whose
                // count has moved (a few nanoseconds at most).
                while c < end && self.count_at(c) == now {
                    c += 1;
                }
                return c;
            }
            if self.count_at(end) != now {
                return end;
            }
            from = end;
        }
    }
}

/// One client's demand over the run.
#[derive(Debug, Clone)]
pub(crate) struct ClientDemand {
    /// Open: arrivals per second.
    pub(crate) rate: Curve,
    /// Closed: workers.
    pub(crate) workers: Curve,
    /// Closed: think time steps `(from, ns)`, in time order, the first at 0.
    pub(crate) think: Vec<(u64, u64)>,
}

impl ClientDemand {
    /// The think time in force at `t`.
    pub(crate) fn think_at(&self, t: u64) -> u64 {
        let k = self.think.partition_point(|p| p.0 <= t);
        self.think[k.saturating_sub(1)].1
    }

    /// The next think-time step after `t`, `u64::MAX` if none.
    pub(crate) fn next_think_change(&self, t: u64) -> u64 {
        self.think
            .iter()
            .map(|p| p.0)
            .find(|&a| a > t)
            .unwrap_or(u64::MAX)
    }

    /// The demand ceiling of this client over `[a, b)`, per second, with mean
    /// service time `s` seconds and at most `max_limit` requests in flight:
    /// the mean rate (open), or `min(workers, max_limit) / (s + think)`
    /// averaged over the interval (closed).
    pub(crate) fn ceiling(&self, kind: DemandKind, a: u64, b: u64, s: f64, max_limit: f64) -> f64 {
        match kind {
            DemandKind::Open => self.rate.mean(a, b),
            DemandKind::Closed => {
                let think = self.think_at(a) as f64 / SECOND as f64;
                self.workers.mean(a, b).min(max_limit) / (s + think)
            }
        }
    }
}

impl Scenario {
    /// Client `i`'s settings, if a `[[client]]` entry gives any.
    pub fn client(&self, i: u32) -> Option<&ClientSpec> {
        self.clients.get(i as usize)
    }

    /// Client `i`'s demand over the run.
    pub(crate) fn client_demand(&self, i: u32) -> ClientDemand {
        let d = &self.demand;
        let c = self.client(i);
        let rate0 = c.and_then(|c| c.rate).or(d.rate).unwrap_or(0.0);
        let workers0 = c.and_then(|c| c.workers).or(d.workers).unwrap_or(0);
        let think0 = c
            .and_then(|c| c.think_time)
            .or(d.think_time)
            .map_or(0, |t| t.0);
        let mut out = ClientDemand {
            rate: Curve::constant(rate0),
            workers: Curve::constant(f64::from(workers0)),
            think: vec![(0, think0)],
        };
        for ch in d.schedule.iter().filter(|ch| ch.applies_to(i)) {
            let ramp = ch.ramp.map_or(0, |r| r.0);
            if let Some(r) = ch.rate {
                out.rate.change(ch.at.0, r, ramp);
            }
            if let Some(w) = ch.workers {
                out.workers.change(ch.at.0, f64::from(w), ramp);
            }
            if let Some(t) = ch.think_time {
                out.think.retain(|p| p.0 < ch.at.0);
                out.think.push((ch.at.0, t.0));
            }
        }
        out
    }

    /// The limiter options of client `i`: `[limiter]` with the client's
    /// `[client.limiter]` over it.
    pub fn client_limiter(&self, i: u32) -> LimiterSpec {
        match self.client(i) {
            Some(c) => self.limiter.overlaid(&c.limiter),
            None => self.limiter.clone(),
        }
    }
}

/// Checks `[[client]]` and `[[demand.schedule]]` against the demand.
pub(crate) fn validate(sc: &Scenario) -> Result<(), String> {
    let d = &sc.demand;
    if sc.clients.len() > d.clients as usize {
        return Err(format!(
            "client: {} entries for {} client(s) (demand.clients): expected at most one per client",
            sc.clients.len(),
            d.clients
        ));
    }
    let open = d.kind == DemandKind::Open;
    for (i, c) in sc.clients.iter().enumerate() {
        let at = format!("client[{i}]");
        check_fields(&at, open, c.rate, c.workers, c.think_time)?;
    }
    if d.schedule.len() > MAX_SCHEDULE_ENTRIES {
        return Err(format!(
            "demand.schedule: {} entries: expected at most {MAX_SCHEDULE_ENTRIES}",
            d.schedule.len()
        ));
    }
    let mut prev = Nanos(0);
    for (i, ch) in d.schedule.iter().enumerate() {
        let at = format!("demand.schedule[{i}]");
        if ch.at < prev {
            return Err(format!(
                "{at}.at: {}: entries must be in time order (the previous one is at {prev})",
                ch.at
            ));
        }
        prev = ch.at;
        if ch.at >= sc.duration {
            return Err(format!(
                "{at}.at: {} is not before the end of the run ({})",
                ch.at, sc.duration
            ));
        }
        if let Some(c) = ch.client {
            if c >= d.clients {
                return Err(format!(
                    "{at}.client: {c}: expected a client index 0 ..= {}",
                    d.clients - 1
                ));
            }
        }
        check_fields(&at, open, ch.rate, ch.workers, ch.think_time)?;
        if ch.rate.is_none() && ch.workers.is_none() && ch.think_time.is_none() {
            return Err(format!(
                "{at}: changes nothing: expected {}",
                if open {
                    "rate"
                } else {
                    "workers or think_time"
                }
            ));
        }
        if let Some(r) = ch.ramp {
            if r.0 == 0 {
                return Err(format!(
                    "{at}.ramp: 0s: expected more than 0 (leave it out for a step)"
                ));
            }
            if ch.rate.is_none() && ch.workers.is_none() {
                return Err(format!(
                    "{at}.ramp: ramps move rate or workers; think_time always steps"
                ));
            }
            if ch.end() > sc.duration {
                return Err(format!(
                    "{at}.ramp: {r}: the ramp ends at {}, past the end of the run ({})",
                    ch.end(),
                    sc.duration
                ));
            }
        }
    }
    if !open {
        // Every worker that can be alive at once, over all clients.
        let total: f64 = (0..d.clients)
            .map(|i| sc.client_demand(i).workers.max())
            .sum();
        if total > MAX_TOTAL_WORKERS as f64 {
            return Err(format!(
                "demand: up to {total} workers in all (demand.workers, [[client]] and \
                 [[demand.schedule]]): expected at most {MAX_TOTAL_WORKERS}"
            ));
        }
    }
    Ok(())
}

/// The demand fields of a client or a change: only those of the demand's
/// kind, each within its bounds.
fn check_fields(
    at: &str,
    open: bool,
    rate: Option<f64>,
    workers: Option<u32>,
    think: Option<Nanos>,
) -> Result<(), String> {
    if open {
        if workers.is_some() {
            return Err(format!("{at}.workers: only for a closed demand"));
        }
        if think.is_some() {
            return Err(format!("{at}.think_time: only for a closed demand"));
        }
    } else if rate.is_some() {
        return Err(format!("{at}.rate: only for an open demand"));
    }
    if let Some(r) = rate {
        bounds::f64_in_range(&format!("{at}.rate"), r, 0.0, MAX_RATE)?;
    }
    if let Some(w) = workers {
        bounds::in_range(&format!("{at}.workers"), w, 0, MAX_CONCURRENCY)?;
    }
    if let Some(t) = think {
        bounds::in_range(&format!("{at}.think_time"), t, Nanos(0), MAX_LATENCY)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = SECOND;

    #[test]
    fn a_ramp_is_linear_and_a_step_is_immediate() {
        let mut c = Curve::constant(50.0);
        c.change(30 * S, 800.0, 120 * S);
        assert_eq!(c.at(0), 50.0);
        assert_eq!(c.at(30 * S), 50.0);
        assert_eq!(c.at(90 * S), 425.0);
        assert_eq!(c.at(150 * S), 800.0);
        assert_eq!(c.at(1000 * S), 800.0);
        c.change(200 * S, 10.0, 0);
        assert_eq!(c.at(200 * S - 1), 800.0);
        assert_eq!(c.at(200 * S), 10.0);
    }

    #[test]
    fn a_change_during_a_ramp_starts_from_where_the_ramp_is() {
        let mut c = Curve::constant(0.0);
        c.change(0, 100.0, 100 * S);
        c.change(50 * S, 0.0, 50 * S);
        assert_eq!(c.at(50 * S), 50.0);
        assert_eq!(c.at(75 * S), 25.0);
        assert_eq!(c.at(100 * S), 0.0);
    }

    #[test]
    fn the_mean_is_the_integral() {
        let mut c = Curve::constant(50.0);
        c.change(30 * S, 800.0, 120 * S);
        // Over [30 s, 31 s): from 50 to 56.25, mean 53.125.
        assert!((c.mean(30 * S, 31 * S) - 53.125).abs() < 1e-9);
        // Across the step at 200 s: half at 800, half at 10.
        c.change(200 * S, 10.0, 0);
        let m = c.mean(199 * S + S / 2, 200 * S + S / 2);
        assert!((m - 405.0).abs() < 1e-6, "{m}");
        assert_eq!(c.mean(0, 10 * S), 50.0);
    }

    #[test]
    fn pieces_report_their_end_and_highest_value() {
        let mut c = Curve::constant(10.0);
        c.change(10 * S, 30.0, 10 * S);
        assert_eq!(c.piece(0), (10 * S, 10.0));
        assert_eq!(c.piece(15 * S), (20 * S, 30.0));
        assert_eq!(c.piece(25 * S), (u64::MAX, 30.0));
    }

    #[test]
    fn worker_counts_change_at_each_half_integer_crossing() {
        let mut c = Curve::constant(10.0);
        c.change(0, 14.0, 4 * S);
        // 10 → 14 over 4 s: the count becomes 11 at 0.5 s, 12 at 1.5 s, ...
        let mut t = 0;
        let mut seen = Vec::new();
        while t != u64::MAX {
            seen.push((t, c.count_at(t)));
            t = c.next_count_change(t);
        }
        assert_eq!(
            seen,
            [
                (0, 10),
                (S / 2, 11),
                (3 * S / 2, 12),
                (5 * S / 2, 13),
                (7 * S / 2, 14)
            ]
        );
        let mut down = Curve::constant(5.0);
        down.change(10 * S, 0.0, 0);
        assert_eq!(down.next_count_change(0), 10 * S);
        assert_eq!(down.count_at(10 * S), 0);
        assert_eq!(down.next_count_change(10 * S), u64::MAX);
    }
}
