//! The fleet limiter against a real `redis-server` each test starts on a
//! free port. These run on the wall clock (Redis's `TIME` rules the
//! budget), so each keeps its windows short, and they run in parallel.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use adaptx::RateLimiter;
use adaptx_redis::{FleetMode, FleetRateLimiter};
use common::server::RedisServer;
use common::{Outcomes, fixed, offer, spawn_steady, wait_for};
use tokio::time::{Instant, sleep};

/// The fleet's budget in the budget tests, requests per second.
const BUDGET: u64 = 2000;
/// The measurement window of the budget tests (the 30 s).
const WINDOW: Duration = Duration::from_secs(30);
/// Mixed load: (offered per second, on, off) per instance. Two instances
/// ask for less than a fair share, one for more, one in bursts; together
/// they offer about twice the budget.
const LOADS: [(f64, u64, u64); 4] = [
    (300.0, 0, 0),
    (700.0, 0, 0),
    (1500.0, 0, 0),
    (3000.0, 400, 600),
];

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn admitted_sum(ls: &[FleetRateLimiter]) -> u64 {
    ls.iter().map(|l| l.stats().admitted).sum()
}

fn assert_within_budget(what: &str, admitted: u64, elapsed: Duration) {
    let rate = admitted as f64 / elapsed.as_secs_f64();
    let err = (rate - BUDGET as f64) / BUDGET as f64;
    println!(
        "{what}: fleet admitted {rate:.1}/s over {elapsed:?} (budget {BUDGET}/s, {:+.2} %)",
        err * 100.0
    );
    assert!(
        err.abs() <= 0.05,
        "{what}: fleet admitted {rate:.1}/s, not within ±5 % of {BUDGET}/s"
    );
}

/// Four limiters on one key, in four tasks, under mixed load: the fleet
/// admits its budget within ±5 % over 30 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_tasks_hold_the_fleet_budget() {
    let server = RedisServer::start();
    let limiters: Vec<_> = (0..4)
        .map(|i| {
            fixed(&server.url(), "tasks", &format!("task-{i}"), BUDGET)
                .build()
                .unwrap()
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = limiters
        .iter()
        .zip(LOADS)
        .map(|(l, (rate, on, off))| {
            tokio::spawn(offer(
                l.clone(),
                rate,
                ms(on),
                ms(off),
                Arc::default(),
                Arc::clone(&stop),
            ))
        })
        .collect();
    sleep(Duration::from_secs(2)).await;
    let (t0, a0) = (Instant::now(), admitted_sum(&limiters));
    sleep(WINDOW).await;
    let (t1, a1) = (Instant::now(), admitted_sum(&limiters));
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    for l in &limiters {
        let s = l.stats();
        println!(
            "  {:?}: admitted {} rejected {} leases {} lease {} fallbacks {}",
            s.mode, s.admitted, s.rejected, s.leases, s.lease_size, s.fallbacks
        );
        assert_eq!(s.fallbacks, 0, "{s:?}");
    }
    assert_within_budget("4 tasks", a1 - a0, t1 - t0);
}

/// Four limiters in four processes (this test binary, re-run as children)
/// on one key, under the same mixed load: the fleet admits its budget
/// within ±5 % over 30 s.
#[test]
fn four_processes_hold_the_fleet_budget() {
    let server = RedisServer::start();
    let exe = std::env::current_exe().unwrap();
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    // Measure from 3 s on: the children start and warm up first.
    let t0 = now_ms + 3000;
    let children: Vec<_> = LOADS
        .iter()
        .enumerate()
        .map(|(i, (rate, on, off))| {
            Command::new(&exe)
                .args([
                    "fleet_child",
                    "--exact",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("ADAPTX_CHILD_URL", server.url())
                .env("ADAPTX_CHILD_ID", format!("proc-{i}"))
                .env("ADAPTX_CHILD_LOAD", format!("{rate},{on},{off}"))
                .env("ADAPTX_CHILD_T0", t0.to_string())
                .env("ADAPTX_CHILD_SECS", WINDOW.as_secs().to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut admitted = 0;
    let mut elapsed = Duration::ZERO;
    for child in children {
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "child failed: {text}");
        let line = text
            .lines()
            .find_map(|l| l.split_once("ADAPTX_CHILD ").map(|(_, r)| r))
            .unwrap_or_else(|| panic!("no result line in {text}"));
        println!("  {line}");
        let field = |name: &str| -> u64 {
            line.split_whitespace()
                .find_map(|kv| kv.strip_prefix(name))
                .and_then(|v| v.parse().ok())
                .unwrap()
        };
        admitted += field("admitted=");
        assert_eq!(field("fallbacks="), 0, "{line}");
        elapsed = elapsed.max(Duration::from_micros(field("elapsed_us=")));
    }
    assert_within_budget("4 processes", admitted, elapsed);
}

/// The child process of [`four_processes_hold_the_fleet_budget`]: one
/// limiter under one load; prints what it admitted within the shared
/// window. Without the parent's environment it does nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "child process of four_processes_hold_the_fleet_budget (run by it)"]
async fn fleet_child() {
    let Ok(url) = std::env::var("ADAPTX_CHILD_URL") else {
        return;
    };
    let var = |k: &str| std::env::var(k).unwrap();
    let load: Vec<f64> = var("ADAPTX_CHILD_LOAD")
        .split(',')
        .map(|v| v.parse().unwrap())
        .collect();
    let t0: u64 = var("ADAPTX_CHILD_T0").parse().unwrap();
    let secs: u64 = var("ADAPTX_CHILD_SECS").parse().unwrap();
    let limiter = fixed(&url, "procs", &var("ADAPTX_CHILD_ID"), BUDGET)
        .build()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let task = tokio::spawn(offer(
        limiter.clone(),
        load[0],
        ms(load[1] as u64),
        ms(load[2] as u64),
        Arc::default(),
        Arc::clone(&stop),
    ));
    let until = |at_ms: u64| {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        Duration::from_millis(at_ms.saturating_sub(now))
    };
    sleep(until(t0)).await;
    let (a0, i0) = (limiter.stats().admitted, Instant::now());
    sleep(until(t0 + secs * 1000)).await;
    let (a1, i1) = (limiter.stats().admitted, Instant::now());
    stop.store(true, Ordering::Relaxed);
    task.await.unwrap();
    let s = limiter.stats();
    println!(
        "ADAPTX_CHILD admitted={} elapsed_us={} fallbacks={} leases={} rejected={}",
        a1 - a0,
        (i1 - i0).as_micros(),
        s.fallbacks,
        s.leases,
        s.rejected
    );
}

/// The fleet's rate falls when the fleet's *combined* errors rise (one
/// instance of three fails all its requests: a third of the fleet's
/// traffic), and recovers once they stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_rate_falls_with_combined_errors_and_recovers() {
    let server = RedisServer::start();
    let limiters: Vec<_> = (0..3)
        .map(|i| {
            FleetRateLimiter::builder(&server.url(), "adaptive")
                .instance_id(format!("a{i}"))
                .redis_timeout(ms(500))
                .rate(
                    RateLimiter::builder()
                        .initial_rate(400)
                        .min_rate(50)
                        .max_rate(4000)
                        .adjust_interval(ms(300)),
                )
                .build()
                .unwrap()
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let faulty = Arc::new(Outcomes::default());
    let tasks: Vec<_> = limiters
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let outcomes = if i == 0 {
                Arc::clone(&faulty)
            } else {
                Arc::default()
            };
            spawn_steady(l, 1000.0, outcomes, &stop)
        })
        .collect();
    let rate = |ls: &[FleetRateLimiter]| ls[1].current_rate();
    sleep(Duration::from_millis(2500)).await;
    let healthy = rate(&limiters);
    faulty.failing.store(true, Ordering::Relaxed);
    sleep(Duration::from_secs(3)).await;
    let failing = rate(&limiters);
    faulty.failing.store(false, Ordering::Relaxed);
    // Recovery is ×1.1 per interval while the fleet is binding: wait for it
    // up to 8 s of wall time (a loaded machine stretches the intervals),
    // not a fixed 3 s.
    let deadline = std::time::Instant::now() + Duration::from_secs(8);
    let mut recovered = rate(&limiters);
    while recovered <= failing * 3 / 2 && std::time::Instant::now() < deadline {
        sleep(Duration::from_millis(100)).await;
        recovered = rate(&limiters);
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let (inc, dec): (u64, u64) = limiters
        .iter()
        .map(|l| (l.stats().increases, l.stats().decreases))
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    println!(
        "fleet rate: 400 -> {healthy} (healthy) -> {failing} (one instance failing) -> {recovered} (recovered); increases {inc}, decreases {dec}"
    );
    assert!(healthy > 400, "a healthy, saturated fleet grows: {healthy}");
    assert!(
        failing * 2 < healthy,
        "combined errors cut the rate: {healthy} -> {failing}"
    );
    assert!(
        recovered > failing * 3 / 2,
        "the rate recovers: {failing} -> {recovered}"
    );
    assert!(dec >= 3 && inc >= 3, "increases {inc}, decreases {dec}");
}

/// `kill -9` of the server mid-run: both instances fall back to their share
/// (the fleet's rate / the 2 live instances), admit no more than it, do not
/// panic, and rejoin without a burst when a new server comes up on the
/// same port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_falls_back_to_the_share_and_rejoins() {
    const RATE: u64 = 1000;
    let mut server = RedisServer::start();
    let port = server.port();
    let limiters: Vec<_> = (0..2)
        .map(|i| {
            fixed(&server.url(), "kill", &format!("k{i}"), RATE)
                .redis_timeout(ms(200))
                .reconnect_backoff(ms(50), ms(400))
                .build()
                .unwrap()
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = limiters
        .iter()
        .map(|l| spawn_steady(l, 2000.0, Arc::default(), &stop))
        .collect();
    assert!(
        wait_for(Duration::from_secs(5), || limiters
            .iter()
            .all(|l| l.stats().instances == 2))
        .await,
        "both instances seen"
    );
    sleep(Duration::from_secs(1)).await;

    server.kill9();
    let killed = Instant::now();
    assert!(
        wait_for(Duration::from_secs(3), || limiters
            .iter()
            .all(|l| l.mode() == FleetMode::Local))
        .await,
        "fallback engaged"
    );
    println!("fallback after {:?}", killed.elapsed());
    let share = RATE / 2;
    for l in &limiters {
        assert_eq!(l.stats().local_rate, Some(share), "{:?}", l.stats());
    }
    // The local bucket starts full (one second of the share); measure past it.
    sleep(Duration::from_millis(1500)).await;
    let t0 = Instant::now();
    let a0: Vec<u64> = limiters.iter().map(|l| l.stats().admitted_local).collect();
    sleep(Duration::from_secs(2)).await;
    let el = t0.elapsed().as_secs_f64();
    for (l, a0) in limiters.iter().zip(a0) {
        let rate = (l.stats().admitted_local - a0) as f64 / el;
        println!("  fallback: instance admitted {rate:.1}/s (share {share}/s)");
        assert!(
            rate <= share as f64 * 1.05,
            "fallback above the share: {rate}"
        );
        assert!(rate >= share as f64 * 0.9, "fallback starved: {rate}");
    }

    let _server = RedisServer::start_on(port);
    let restarted = Instant::now();
    assert!(
        wait_for(Duration::from_secs(5), || limiters
            .iter()
            .all(|l| l.mode() == FleetMode::Fleet))
        .await,
        "rejoined: {:?}",
        limiters[0].stats()
    );
    println!("rejoined {:?} after the restart", restarted.elapsed());
    // No burst on rejoin: the re-seeded bucket is empty, the fleet admits
    // at most its rate from here.
    let t0 = Instant::now();
    let a0 = admitted_sum(&limiters)
        - limiters
            .iter()
            .map(|l| l.stats().admitted_local)
            .sum::<u64>();
    sleep(Duration::from_secs(2)).await;
    let a1 = admitted_sum(&limiters)
        - limiters
            .iter()
            .map(|l| l.stats().admitted_local)
            .sum::<u64>();
    let rate = (a1 - a0) as f64 / t0.elapsed().as_secs_f64();
    println!("  after rejoin: fleet admitted {rate:.1}/s (rate {RATE}/s)");
    assert!(rate <= RATE as f64 * 1.05, "burst after rejoin: {rate}");
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    for l in &limiters {
        let s = l.stats();
        assert_eq!((s.fallbacks, s.rejoins), (1, 1), "{s:?}");
        assert!(s.redis_errors + s.redis_timeouts >= 1, "{s:?}");
    }
}

/// A stopped server (SIGSTOP: it accepts nothing and answers nothing)
/// trips the timeout: the instance falls back, and rejoins once the
/// server runs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_redis_trips_the_timeout() {
    let server = RedisServer::start();
    let limiter = fixed(&server.url(), "stop", "s0", 1000)
        .redis_timeout(ms(50))
        .reconnect_backoff(ms(50), ms(200))
        .build()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let task = spawn_steady(&limiter, 500.0, Arc::default(), &stop);
    assert!(wait_for(Duration::from_secs(3), || limiter.stats().leases > 5).await);
    server.signal("STOP");
    let stopped = Instant::now();
    let fell = wait_for(Duration::from_secs(3), || {
        limiter.mode() == FleetMode::Local
    })
    .await;
    let after = stopped.elapsed();
    server.signal("CONT");
    assert!(fell, "no fallback: {:?}", limiter.stats());
    println!("fallback {after:?} after SIGSTOP (timeout 50 ms)");
    assert!(limiter.stats().redis_timeouts >= 1, "{:?}", limiter.stats());
    assert!(
        wait_for(Duration::from_secs(5), || limiter.mode()
            == FleetMode::Fleet)
        .await,
        "rejoined: {:?}",
        limiter.stats()
    );
    stop.store(true, Ordering::Relaxed);
    task.await.unwrap();
    assert_eq!(limiter.stats().rejoins, 1);
}

/// The builder names a bad option, and needs a Tokio runtime.
#[test]
fn bad_configuration_is_named() {
    let b = || FleetRateLimiter::builder("redis://127.0.0.1:1/", "x");
    assert!(matches!(
        b().build(),
        Err(adaptx_redis::BuildError::NoRuntime)
    ));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let err = |b: adaptx_redis::FleetRateLimiterBuilder| b.build().unwrap_err().to_string();
    assert_eq!(
        err(b().max_lease(0)),
        "invalid max_lease: 0 (allowed: 1 ..= 1000000)"
    );
    assert_eq!(
        err(b().lease_window(ms(2000))),
        "invalid lease_window: 2s (allowed: 100µs ..= 1s)"
    );
    assert_eq!(
        err(b().expected_instances(0)),
        "invalid expected_instances: 0 (allowed: 1 ..= 100000)"
    );
    assert_eq!(
        err(b().reconnect_backoff(ms(10), ms(5))),
        "invalid reconnect_backoff.max: 5ms (allowed: min ..= 10min)"
    );
    assert_eq!(
        err(b().report_period(ms(5000))),
        "invalid report_period: 5s (allowed: 1ms ..= adjust_interval)"
    );
    assert_eq!(
        err(b().instance_id("")),
        "invalid instance_id: \"\" (allowed: 1 ..= 200 bytes)"
    );
    assert_eq!(
        err(FleetRateLimiter::builder("http://nope", "x")),
        "invalid redis_url: \"http://nope\" (allowed: a redis:// or unix:// URL)"
    );
    // An unreachable Redis at start is a fallback, not an error.
    assert!(b().build().is_ok());
}

/// A lease nobody uses for a report period goes back to the fleet; the
/// instance's next request is still admitted (on credit) at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_lease_goes_back_to_the_fleet() {
    let server = RedisServer::start();
    let limiter = fixed(&server.url(), "idle", "i0", 100_000).build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let task = spawn_steady(&limiter, 50_000.0, Arc::default(), &stop);
    assert!(
        wait_for(Duration::from_secs(3), || limiter.stats().lease_size >= 64).await,
        "{:?}",
        limiter.stats()
    );
    stop.store(true, Ordering::Relaxed);
    task.await.unwrap();
    assert!(
        wait_for(Duration::from_secs(2), || limiter.stats().tokens_returned
            > 0)
        .await,
        "{:?}",
        limiter.stats()
    );
    let s = limiter.stats();
    println!(
        "returned {} of {} granted ({} admitted)",
        s.tokens_returned, s.tokens_granted, s.admitted
    );
    assert_eq!(s.tokens_granted - s.tokens_returned, s.admitted, "{s:?}");
    assert!(limiter.try_acquire().is_ok());
}
