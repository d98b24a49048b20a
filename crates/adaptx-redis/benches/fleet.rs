//! Admissions per second of one instance on a loopback Redis (started by
//! the bench): leases against one round trip per admission.
//!
//! Both run the same `FleetRateLimiter` on a budget far above what one
//! instance can take (10⁹/s), so Redis round trips are the only limit:
//! `leases` sizes its leases to ~10 ms of demand (up to 256 tokens);
//! `one round trip per admission` sets `max_lease(1)`, so every token costs
//! a round trip, like a limiter that calls Redis per request. The ratio of
//! the two is the point (README, "Beyond one machine").
#![allow(missing_docs, clippy::unwrap_used)]

#[path = "../tests/common/server.rs"]
mod server;

use std::time::{Duration, Instant};

use adaptx::RateLimiter;
use adaptx_redis::FleetRateLimiter;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use server::RedisServer;

const RATE: u64 = 1_000_000_000;

fn limiter(url: &str, name: &str, max_lease: u64) -> FleetRateLimiter {
    FleetRateLimiter::builder(url, name)
        .max_lease(max_lease)
        .redis_timeout(Duration::from_millis(500))
        .rate(
            RateLimiter::builder()
                .initial_rate(RATE)
                .min_rate(RATE)
                .max_rate(RATE),
        )
        .build()
        .unwrap()
}

/// Admits `n` requests as fast as the limiter lets one task.
async fn admit(l: &FleetRateLimiter, n: u64) {
    let mut done = 0;
    while done < n {
        match l.try_acquire() {
            Ok(p) => {
                p.success();
                done += 1;
            }
            Err(_) => tokio::task::yield_now().await,
        }
    }
}

fn bench(c: &mut Criterion) {
    let server = RedisServer::start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut g = c.benchmark_group("fleet_admissions");
    g.throughput(Throughput::Elements(1));
    g.sample_size(10).measurement_time(Duration::from_secs(3));
    for (name, max_lease) in [("leases", 256), ("one round trip per admission", 1)] {
        let l = rt.block_on(async { limiter(&server.url(), name, max_lease) });
        rt.block_on(admit(&l, 2000)); // warm up: connect, size the lease
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let t = Instant::now();
                    admit(&l, iters).await;
                    t.elapsed()
                })
            });
        });
        println!("{name}: {:?}", l.stats());
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
