//! Smoke tests of the public API.
use adaptx::{Algorithm, Limiter, ManualClock, Outcome};
use std::time::Duration;

#[test]
fn aimd_grows_when_saturated() {
    let clock = ManualClock::new();
    let l = Limiter::builder()
        .algorithm(Algorithm::Aimd)
        .clock(clock.clone())
        .warmup_samples(0)
        .jitter(0.0)
        .max_limit(100)
        .build()
        .unwrap();
    let permits: Vec<_> = (0..10).map(|_| l.try_acquire().unwrap()).collect();
    let mut it = permits.into_iter();
    it.next()
        .unwrap()
        .record_with_latency(Outcome::Success, Duration::from_millis(1));
    assert_eq!(l.limit(), 10);
    clock.advance(Duration::from_secs(1));
    let p = l.try_acquire().unwrap();
    p.record_with_latency(Outcome::Success, Duration::from_millis(1));
    assert_eq!(l.limit(), 11);
    drop(it);
    assert_eq!(l.in_flight(), 0);
    let s = l.stats();
    assert_eq!(s.increases, 1);
    assert_eq!(s.success, 2);
    assert_eq!(s.dropped, 9);
    assert_eq!(s.total, 11);
    println!("{s:?}");
}

#[tokio::test(start_paused = true)]
async fn acquire_waits_and_close_wakes() {
    let l = Limiter::builder().initial_limit(1).build().unwrap();
    let p = l.acquire().await.unwrap();
    let l2 = l.clone();
    let h = tokio::spawn(async move { l2.acquire().await.map(|p| p.success()) });
    tokio::task::yield_now().await;
    assert!(l.acquire_timeout(Duration::from_millis(10)).await.is_err());
    l.close();
    assert!(h.await.unwrap().is_err());
    assert!(
        l.close_with_timeout(Duration::from_millis(5))
            .await
            .is_err()
    );
    p.success();
    l.close_with_timeout(Duration::from_millis(5))
        .await
        .unwrap();
    assert_eq!(l.stats().rejected, 2);
}

#[tokio::test]
async fn execute_catches_panic() {
    let l = Limiter::new();
    let r: Result<(), adaptx::ExecuteError<std::io::Error>> =
        l.execute(async |_c| panic!("boom")).await;
    match r {
        Err(adaptx::ExecuteError::Panicked(p)) => {
            assert_eq!(p.op(), "adaptx::execute");
            assert_eq!(p.message(), "boom");
        }
        _ => panic!("expected panic error"),
    }
    assert_eq!(l.in_flight(), 0);
    assert_eq!(l.stats().failures, 1);
}

/// `TokioClock` follows tokio's paused time, so windows close on
/// `tokio::time::advance` without any wall-clock wait.
#[tokio::test(start_paused = true)]
async fn tokio_clock_follows_paused_time() {
    let l = Limiter::builder()
        .clock(adaptx::TokioClock::new())
        .warmup_samples(0)
        .jitter(0.0)
        .initial_limit(2)
        .build()
        .unwrap();
    let a = l.acquire().await.unwrap();
    let b = l.acquire().await.unwrap();
    tokio::time::advance(Duration::from_millis(30)).await;
    a.success();
    assert_eq!(l.limit(), 2, "the window is still open");
    tokio::time::advance(Duration::from_secs(1)).await;
    let c = l.acquire().await.unwrap();
    b.success(); // closes the window saturated (in flight 2 of 2)
    assert_eq!(l.limit(), 3);
    let s = l.stats();
    assert_eq!(s.latency_samples, 2);
    // Histogram buckets are within 1 % of the exact value.
    assert!((s.max_latency.as_secs_f64() / 1.030 - 1.0).abs() < 0.01);
    c.success();
}
