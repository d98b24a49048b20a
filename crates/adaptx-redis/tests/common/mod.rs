//! Shared test helpers: the server, and a load generator.
#![allow(dead_code, unreachable_pub)]

pub mod server;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use adaptx::RateLimiter;
use adaptx_redis::{FleetRateLimiter, FleetRateLimiterBuilder};
use tokio::time::Instant;

/// A limiter on `url` and key `name` at a fixed `rate` (min = max).
pub fn fixed(url: &str, name: &str, id: &str, rate: u64) -> FleetRateLimiterBuilder {
    FleetRateLimiter::builder(url, name)
        .instance_id(id)
        .seed(7)
        .redis_timeout(Duration::from_millis(500))
        .rate(
            RateLimiter::builder()
                .initial_rate(rate)
                .min_rate(rate)
                .max_rate(rate)
                .adjust_interval(Duration::from_millis(400)),
        )
}

/// How a load task's requests end.
#[derive(Debug, Default)]
pub struct Outcomes {
    /// While set, every request of this task fails.
    pub failing: AtomicBool,
}

/// Spawns [`offer`] of a steady `rate` (always on) on `limiter`.
pub fn spawn_steady(
    limiter: &FleetRateLimiter,
    rate: f64,
    outcomes: Arc<Outcomes>,
    stop: &Arc<AtomicBool>,
) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(offer(
        limiter.clone(),
        rate,
        Duration::ZERO,
        Duration::ZERO,
        outcomes,
        Arc::clone(stop),
    ))
}

/// Offers `rate` requests per second to `limiter` (on for `on`, off for
/// `off`, repeating; `off` zero = always on) until `stop`, recording each
/// admitted request at once (a success unless `outcomes.failing`).
/// Returns the requests offered.
pub async fn offer(
    limiter: FleetRateLimiter,
    rate: f64,
    on: Duration,
    off: Duration,
    outcomes: Arc<Outcomes>,
    stop: Arc<AtomicBool>,
) -> u64 {
    let start = Instant::now();
    let offered = AtomicU64::new(0);
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut active_time = Duration::ZERO;
    let mut last = start;
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let now = Instant::now();
        let t = now - start;
        let period = on + off;
        let active = off.is_zero() || t.as_nanos() % period.as_nanos() < on.as_nanos();
        if active {
            active_time += now - last;
        }
        last = now;
        let due = (active_time.as_secs_f64() * rate) as u64;
        while offered.load(Ordering::Relaxed) < due {
            offered.fetch_add(1, Ordering::Relaxed);
            if let Ok(permit) = limiter.try_acquire() {
                if outcomes.failing.load(Ordering::Relaxed) {
                    permit.failure();
                } else {
                    permit.success();
                }
            }
        }
    }
    offered.load(Ordering::Relaxed)
}

/// Waits until `cond` holds, polling every 20 ms, for at most `limit`.
pub async fn wait_for(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cond()
}
