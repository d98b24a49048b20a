//! The driver task: leases, reports, the law for the fleet, fallback and
//! rejoin. One per limiter; it owns every Redis call and every mode
//! transition, so transitions need no lock among themselves.
//!
//! # Implementation details
//!
//! The loop wakes on the hot path's refill request or at the next due
//! time (report, retry, probe), whichever is first; `Notify` keeps a wake
//! sent while the driver was busy. Each Redis call runs under the
//! configured timeout; any failure switches the instance to its local
//! share (see [`FleetRateLimiter`](crate::FleetRateLimiter)'s
//! `# Algorithm`). Every transition is a `tracing` event and a counter.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use adaptx::{IntervalSummary, RateLimiter};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::time::{Instant, sleep_until, timeout};

use crate::BuildError;
use crate::builder::Config;
use crate::limiter::{FLEET, LOCAL, Shared};
use crate::script::{Common, Feedback, FleetScripts, Grant, Reported};
use crate::stats::add;

/// Why a Redis call did not answer.
#[derive(Debug)]
enum CallError {
    Timeout,
    Redis(redis::RedisError),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Timeout => f.write_str("timed out"),
            Self::Redis(e) => e.fmt(f),
        }
    }
}

pub(crate) struct Driver {
    shared: Arc<Shared>,
    conn: ConnectionManager,
    scripts: FleetScripts,
    config: Config,
    /// The cumulative feedback counters at the last report.
    mark: Feedback,
    next_report: Instant,
    /// No lease is asked for before this (the bucket was empty).
    refill_not_before: Instant,
    /// The pool and when it was last seen to change (lease expiry).
    pool_seen: (i64, Instant),
    /// The lease sizer: demand (admitted + rejected) at the last lease.
    demand_mark: (u64, Instant),
    backoff: Duration,
    next_probe: Instant,
    rng: fastrand::Rng,
}

impl Driver {
    pub(crate) fn new(shared: Arc<Shared>, config: Config) -> Result<Self, BuildError> {
        let client = redis::Client::open(config.url.as_str()).map_err(BuildError::Redis)?;
        let manager = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(config.redis_timeout))
            // Ours (in `call`) trips first; this one only recycles a
            // connection that never answers.
            .set_response_timeout(Some(config.redis_timeout * 2))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(10))
            .set_max_delay(config.backoff_min);
        let conn =
            ConnectionManager::new_lazy_with_config(client, manager).map_err(BuildError::Redis)?;
        let now = Instant::now();
        Ok(Self {
            shared,
            conn,
            scripts: FleetScripts::new(&config.name),
            rng: fastrand::Rng::with_seed(config.seed),
            backoff: config.backoff_min,
            config,
            mark: Feedback::default(),
            next_report: now,
            refill_not_before: now,
            pool_seen: (0, now),
            demand_mark: (0, now),
            next_probe: now,
        })
    }

    fn common(&self) -> Common {
        let s = &self.config.settings;
        Common {
            seed_rate: self.shared.rate.load(Ordering::Relaxed).max(1),
            burst: s.burst.unwrap_or(0),
            ttl_ms: u64::try_from(self.config.key_ttl.as_millis()).unwrap_or(u64::MAX),
            interval_us: u64::try_from(s.adjust_interval.as_micros()).unwrap_or(u64::MAX),
        }
    }

    pub(crate) async fn run(mut self) {
        tracing::debug!(name = %self.config.name, instance = %self.config.instance_id, "fleet rate limiter started");
        loop {
            if self.shared.stop.load(Ordering::Acquire) {
                self.shutdown().await;
                return;
            }
            let now = Instant::now();
            if self.shared.mode.load(Ordering::Acquire) == LOCAL {
                if now >= self.next_probe {
                    self.probe().await;
                }
            } else {
                // The report first: a busy instance wants a lease on every
                // pass, and its feedback and heartbeat must not starve.
                if now >= self.next_report {
                    self.report().await;
                    self.expire_lease(now).await;
                }
                if self.shared.mode.load(Ordering::Acquire) == FLEET
                    && self.shared.pool.refill_wanted()
                    && Instant::now() >= self.refill_not_before
                {
                    self.lease(0).await;
                }
            }
            let due = self.next_due();
            if due > Instant::now() {
                tokio::select! {
                    () = self.shared.wake.notified() => {}
                    () = sleep_until(due) => {}
                }
            }
        }
    }

    /// When the loop has something to do without a wake.
    fn next_due(&self) -> Instant {
        if self.shared.mode.load(Ordering::Acquire) == LOCAL {
            return self.next_probe;
        }
        let mut due = self.next_report;
        if self.shared.pool.refill_wanted() {
            due = due.min(self.refill_not_before);
        }
        due
    }

    /// Runs one Redis call under the timeout.
    async fn call<T>(
        &self,
        fut: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, CallError> {
        match timeout(self.config.redis_timeout, fut).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) if e.is_timeout() => Err(CallError::Timeout),
            Ok(Err(e)) => Err(CallError::Redis(e)),
            Err(_) => Err(CallError::Timeout),
        }
    }

    /// The lease size from the demand since the last lease: the tokens
    /// taken in one lease window, changed at most twofold per lease.
    fn size_lease(&mut self, now: Instant) -> u64 {
        let c = &self.shared.counters;
        let demand = c.admitted.load(Ordering::Relaxed) + c.rejected.load(Ordering::Relaxed);
        let (last, at) = std::mem::replace(&mut self.demand_mark, (demand, now));
        let elapsed = now.saturating_duration_since(at).as_secs_f64();
        let old = self.shared.pool.lease_size().max(1);
        let want = if elapsed > 0.0 {
            let per_sec = demand.saturating_sub(last) as f64 / elapsed;
            (per_sec * self.config.lease_window.as_secs_f64()).ceil() as u64
        } else {
            old
        };
        let k = want
            .clamp((old / 2).max(1), old.saturating_mul(2))
            .clamp(1, self.config.max_lease);
        self.shared.pool.set_lease_size(k);
        k
    }

    /// Takes a lease (handing back `refund` unused tokens first).
    async fn lease(&mut self, refund: u64) {
        let now = Instant::now();
        // Only a lease that asks for tokens answers the refill request: a
        // take-back's refund must not clear one a taker made meanwhile.
        let want = if refund > 0 {
            0
        } else {
            self.shared.pool.begin_refill();
            self.size_lease(now)
        };
        let common = self.common();
        let mut conn = self.conn.clone();
        let result = self
            .call(self.scripts.admit(&mut conn, common, want, refund))
            .await;
        match result {
            Ok(grant) => self.granted(grant, refund),
            Err(e) => {
                if refund > 0 {
                    // Not returned: abandoned.
                    add(&self.shared.counters.tokens_abandoned, refund);
                }
                self.fail(e, "lease");
            }
        }
    }

    fn granted(&mut self, g: Grant, refund: u64) {
        let s = &self.shared;
        let c = &s.counters;
        add(&c.leases, 1);
        add(&c.tokens_granted, g.granted);
        add(&c.tokens_returned, refund);
        s.rate.store(g.rate, Ordering::Relaxed);
        s.epoch.store(g.epoch, Ordering::Relaxed);
        s.pool.grant(g.granted);
        let now = Instant::now();
        if g.granted == 0 && g.retry_after_us > 0 {
            s.retry_hint_us.store(g.retry_after_us, Ordering::Relaxed);
            self.refill_not_before = now + Duration::from_micros(g.retry_after_us);
        } else {
            s.retry_hint_us
                .store((1_000_000 / g.rate.max(1)).max(1), Ordering::Relaxed);
        }
    }

    /// Hands back a lease nobody touched for a report period.
    async fn expire_lease(&mut self, now: Instant) {
        let pool = self.shared.pool.level();
        if pool != self.pool_seen.0 || pool <= 0 {
            self.pool_seen = (pool, now);
            return;
        }
        if now.saturating_duration_since(self.pool_seen.1) < self.config.report_period {
            return;
        }
        // Only if still untouched: a take in between keeps the lease.
        if let Some(refund) = self.shared.pool.take_back_idle(pool) {
            self.pool_seen = (0, now);
            self.lease(refund).await;
        }
    }

    /// Sends the feedback since the last report; runs the law if this
    /// report claimed the interval.
    async fn report(&mut self) {
        let period = self.config.report_period;
        self.next_report = Instant::now() + period;
        let c = &self.shared.counters;
        // Counts first (Acquire), then the latency: see FleetPermit::record.
        let now_fb = Feedback {
            successes: c.successes.load(Ordering::Acquire),
            failures: c.failures.load(Ordering::Acquire),
            latency_sum_us: c.latency_sum_us.load(Ordering::Relaxed),
        };
        let batch = Feedback {
            successes: now_fb.successes.wrapping_sub(self.mark.successes),
            failures: now_fb.failures.wrapping_sub(self.mark.failures),
            latency_sum_us: now_fb.latency_sum_us.wrapping_sub(self.mark.latency_sum_us),
        };
        let seen = self.shared.epoch.load(Ordering::Relaxed);
        let live_us = u64::try_from(self.config.live_window.as_micros()).unwrap_or(u64::MAX);
        let common = self.common();
        let mut conn = self.conn.clone();
        let result = self
            .call(self.scripts.report(
                &mut conn,
                common,
                &self.config.instance_id,
                seen,
                batch,
                live_us,
            ))
            .await;
        match result {
            Ok(r) => {
                self.mark = now_fb;
                self.reported(r).await;
            }
            Err(e) => self.fail(e, "report"),
        }
    }

    async fn reported(&mut self, r: Reported) {
        let s = &self.shared;
        s.rate.store(r.rate, Ordering::Relaxed);
        s.epoch.store(r.epoch, Ordering::Relaxed);
        s.instances.store(r.live.max(1), Ordering::Relaxed);
        if r.stale {
            add(&s.counters.stale_reports, 1);
            tracing::debug!(name = %self.config.name, epoch = r.epoch, "stale feedback dropped by the fleet");
        }
        let Some(claim) = r.claimed else { return };
        add(&s.counters.intervals_closed, 1);
        let summary = IntervalSummary::new(
            claim.successes.saturating_add(claim.failures),
            claim.failures,
            Duration::from_micros(claim.latency_sum_us),
            claim.binding,
        );
        let new = self.config.settings.law.next_rate(r.rate, &summary);
        tracing::debug!(
            name = %self.config.name, epoch = r.epoch, old = r.rate, new,
            completed = summary.completed, failures = summary.failures,
            binding = summary.binding, "fleet interval closed"
        );
        if new == r.rate {
            return;
        }
        let common = self.common();
        let mut conn = self.conn.clone();
        match self
            .call(self.scripts.apply(&mut conn, common, r.epoch, new))
            .await
        {
            Ok((true, rate)) => {
                s.rate.store(rate, Ordering::Relaxed);
                let counter = if new > r.rate {
                    &s.counters.increases
                } else {
                    &s.counters.decreases
                };
                add(counter, 1);
                tracing::info!(name = %self.config.name, epoch = r.epoch, old = r.rate, new, "fleet rate changed");
            }
            Ok((false, rate)) => {
                s.rate.store(rate, Ordering::Relaxed);
                tracing::debug!(name = %self.config.name, epoch = r.epoch, "fleet rate change superseded");
            }
            Err(e) => self.fail(e, "apply"),
        }
    }

    /// A call failed: count it, and fall back if still on the fleet.
    fn fail(&mut self, e: CallError, during: &'static str) {
        let c = &self.shared.counters;
        match &e {
            CallError::Timeout => add(&c.redis_timeouts, 1),
            CallError::Redis(_) => add(&c.redis_errors, 1),
        }
        if self.shared.mode.load(Ordering::Acquire) == FLEET {
            self.fall_back(&e, during);
        }
    }

    /// Switches to the local bucket at this instance's share.
    fn fall_back(&mut self, e: &CallError, during: &'static str) {
        let s = &self.shared;
        let n = s.instances.load(Ordering::Relaxed).max(1);
        let rate = s.rate.load(Ordering::Relaxed).max(1);
        let local = self.local_limiter(rate, n);
        let share = local.as_ref().map_or(0, RateLimiter::current_rate);
        *s.local() = local;
        s.mode.store(LOCAL, Ordering::Release);
        // Leased tokens are dropped (the fleet already counted them);
        // a debt is forgiven.
        let left = s.pool.drain();
        add(
            &s.counters.tokens_abandoned,
            u64::try_from(left).unwrap_or(0),
        );
        s.pool.set_lease_size(1);
        add(&s.counters.fallbacks, 1);
        self.backoff = self.config.backoff_min;
        self.next_probe = Instant::now() + self.jittered(self.backoff);
        tracing::warn!(
            name = %self.config.name, during, error = %e, fleet_rate = rate, instances = n,
            share, "redis unavailable: falling back to the local share"
        );
    }

    /// The fallback bucket: the local law with the fleet's range divided by
    /// `n`, so it never exceeds the share `rate / n`.
    fn local_limiter(&self, rate: u64, n: u64) -> Option<RateLimiter> {
        let law = &self.config.settings.law;
        let share = (rate / n).max(1);
        let min = (law.min_rate() / n).clamp(1, share);
        let mut b = self
            .config
            .rate
            .clone()
            .initial_rate(share)
            .min_rate(min)
            .max_rate(share);
        if let Some(burst) = self.config.settings.burst {
            b = b.burst((burst / n).max(1));
        }
        // Every value is within the ranges the fleet's own settings passed,
        // so this cannot fail; if it did, the instance would admit nothing
        // beyond its credit until it rejoins (never more than its share).
        b.build()
            .inspect_err(|e| tracing::error!(error = %e, "fallback bucket not built"))
            .ok()
    }

    fn jittered(&mut self, d: Duration) -> Duration {
        d.mul_f64(0.8 + 0.4 * self.rng.f64())
    }

    /// In fallback: one call to Redis; rejoin on an answer.
    async fn probe(&mut self) {
        let common = self.common();
        let mut conn = self.conn.clone();
        match self.call(self.scripts.admit(&mut conn, common, 0, 0)).await {
            Ok(g) => self.rejoin(g),
            Err(e) => {
                let c = &self.shared.counters;
                add(&c.failed_probes, 1);
                match &e {
                    CallError::Timeout => add(&c.redis_timeouts, 1),
                    CallError::Redis(_) => add(&c.redis_errors, 1),
                }
                self.backoff = (self.backoff * 2).min(self.config.backoff_max);
                self.next_probe = Instant::now() + self.jittered(self.backoff);
                tracing::debug!(name = %self.config.name, error = %e, next = ?self.backoff, "redis probe failed");
            }
        }
    }

    fn rejoin(&mut self, g: Grant) {
        let s = &self.shared;
        s.rate.store(g.rate, Ordering::Relaxed);
        s.epoch.store(g.epoch, Ordering::Relaxed);
        s.pool.reset();
        s.mode.store(FLEET, Ordering::Release);
        *s.local() = None;
        // Feedback gathered meanwhile belongs to no interval the fleet has.
        let c = &s.counters;
        self.mark = Feedback {
            successes: c.successes.load(Ordering::Acquire),
            failures: c.failures.load(Ordering::Acquire),
            latency_sum_us: c.latency_sum_us.load(Ordering::Relaxed),
        };
        let now = Instant::now();
        self.next_report = now;
        self.refill_not_before = now;
        self.demand_mark = (
            c.admitted.load(Ordering::Relaxed) + c.rejected.load(Ordering::Relaxed),
            now,
        );
        add(&c.rejoins, 1);
        tracing::info!(name = %self.config.name, fleet_rate = g.rate, epoch = g.epoch, "redis reachable: rejoined the fleet");
    }

    /// The last handle is gone: hand back the unused lease.
    async fn shutdown(&mut self) {
        if self.shared.mode.load(Ordering::Acquire) == FLEET {
            let left = self.shared.pool.drain();
            if left > 0 {
                self.lease(u64::try_from(left).unwrap_or(0)).await;
            }
        }
        tracing::debug!(name = %self.config.name, "fleet rate limiter stopped");
    }
}
