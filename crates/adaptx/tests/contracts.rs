//! One test per Normative Contract of the seed's table (`seed-adaptx.txt`),
//! as this crate states it; one per numbered item of the README's
//! "Differences from Go adaptx" (where this crate is better than the Go
//! reference, `adaptx-behaviour.md` §11):
//!
//! 1. configuration is validated and errors name the field;
//! 2. every law backs off on failures and waits for the utilization gate;
//! 3. the Vegas band is continuous at `RTT_min = target`;
//! 4. jitter desynchronizes even +1 steps, from a seedable RNG;
//! 5. windows roll during warmup;
//! 6. close and admission are linearized;
//! 7. `rejected` means one thing, the stats snapshot keeps its invariant,
//!    percentiles come from a histogram within 1 %;
//! 8. the control law is a public trait, handed a window summary;
//! 9. completions record without a global lock, and exactly one of them
//!    closes a window;
//!
//! and one per "smaller" difference that no other test covers.

use std::convert::Infallible;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::task::Poll;
use std::time::Duration;

use adaptx::{
    AcquireTimeoutError, Algorithm, ControlLaw, ExecuteError, Limiter, ManualClock, Outcome,
    OwnedPermit, RateLimiter, TryAcquireError, TryExecuteError, Vegas, WindowSummary,
};

mod common;
use common::*;

// ===========================================================================
// Normative contracts
// ===========================================================================

/// A missing permit is never taken; in-flight never exceeds max; the live
/// limit stays in [min, max].
#[test]
fn contract_bounded_admission() {
    let mut rig = Rig::new(|b| {
        b.initial_limit(5)
            .min_limit(2)
            .max_limit(8)
            .increase_rate(3.0)
    });
    rig.saturate();
    assert_eq!(rig.held.len(), 5);
    assert_eq!(
        rig.limiter.try_acquire().err(),
        Some(TryAcquireError::NoCapacity)
    );
    assert!(poll_once(pin!(rig.limiter.acquire())).is_pending());

    let mut rng = Lcg(42);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..60 {
        let outcome = if rng.next() % 3 == 0 {
            Outcome::Failure
        } else {
            Outcome::Success
        };
        rig.record_saturated(outcome, MS);
        rig.advance();
        rig.record_saturated(outcome, MS);
        let l = &rig.limiter;
        assert!((2..=8).contains(&l.limit()), "limit {}", l.limit());
        assert!(l.in_flight() <= 8, "in flight {}", l.in_flight());
        assert_accounting(l);
        seen.insert(l.limit());
    }
    // The walk reached both bounds, so the clamps were exercised.
    assert!(seen.contains(&2) && seen.contains(&8), "{seen:?}");
}

/// After a shrink, in-flight may exceed the live limit until released
/// permits pay the debt.
#[test]
fn contract_shrink_debt() {
    let mut rig = Rig::new(|b| b.initial_limit(6));
    rig.saturate();
    rig.advance();
    rig.held
        .pop()
        .expect("held")
        .record_with_latency(Outcome::Failure, MS);
    let l = rig.limiter.clone();
    assert_eq!((l.limit(), l.in_flight(), l.debt()), (3, 5, 2));
    assert_accounting(&l);
    assert!(!l.allow());
    assert_eq!(l.try_acquire().err(), Some(TryAcquireError::NoCapacity));
    // Each release pays one unit of debt; only then do permits come free.
    for (debt, available) in [(1, 0), (0, 0), (0, 1), (0, 2), (0, 3)] {
        rig.held.pop();
        assert_eq!((l.debt(), l.available()), (debt, available));
        assert_accounting(&l);
    }
    assert_eq!(l.in_flight(), 0);
}

/// Allow does not claim a slot; a concurrent admission may change the
/// outcome.
#[test]
fn contract_allow_is_a_hint() {
    let l = Limiter::builder()
        .initial_limit(1)
        .build()
        .expect("valid configuration");
    assert!(l.allow());
    assert!(l.allow(), "asking twice claims nothing");
    assert_eq!((l.available(), l.in_flight()), (1, 0));
    let s = l.stats();
    assert_eq!((s.total, s.rejected), (0, 0));
    // Another handle admits in between: the earlier answer is stale.
    let other = l.clone();
    let p = other.try_acquire().expect("the only permit");
    assert_eq!(l.try_acquire().err(), Some(TryAcquireError::NoCapacity));
    assert!(!l.allow());
    p.success();
    assert!(l.allow());
}

/// The floor is at least 1, so the limiter always makes progress.
#[tokio::test]
async fn contract_limit_floor() {
    // Go floors min to 1 silently; ours rejects 0.
    let err = Limiter::builder()
        .min_limit(0)
        .build()
        .expect_err("min 0 is invalid");
    assert_eq!(err.field(), "min_limit");

    let rig = Rig::new(|b| b);
    let mut limits = Vec::new();
    for _ in 0..5 {
        limits.push(rig.idle_window(Outcome::Failure, MS));
    }
    assert_eq!(limits, vec![5, 2, 1, 1, 1]);
    let v = rig
        .limiter
        .execute(async |c| Ok::<_, Infallible>(c.limit()))
        .await
        .expect("progress at the floor");
    assert_eq!(v, 1);
}

/// Go: a pre-cancelled context returns an error without consuming a permit.
/// Ours: cancellation is dropping the future; a dropped acquire — never
/// polled, or waiting — consumes no permit.
#[tokio::test(start_paused = true)]
async fn contract_context_first() {
    let l = Limiter::builder()
        .initial_limit(1)
        .build()
        .expect("valid configuration");
    // Never polled: nothing happened at all.
    drop(l.acquire());
    assert_eq!((l.available(), l.in_flight()), (1, 0));
    assert_eq!(l.stats().rejected, 0);

    let held = l.try_acquire().expect("the only permit");
    // Waiting, then dropped.
    {
        let mut fut = pin!(l.acquire());
        assert!(poll_once(fut.as_mut()).is_pending());
    }
    // Waiting, then cancelled by a deadline.
    assert!(
        tokio::time::timeout(ms(5), l.acquire_owned())
            .await
            .is_err()
    );
    // An execute cancelled while waiting never runs its operation.
    let ran = AtomicBool::new(false);
    {
        let mut fut = pin!(l.execute(async |_c| {
            ran.store(true, Ordering::SeqCst);
            Ok::<_, Infallible>(())
        }));
        assert!(poll_once(fut.as_mut()).is_pending());
    }
    assert!(!ran.load(Ordering::SeqCst));
    held.success();
    // The released permit is free: no cancelled waiter took it.
    assert_eq!((l.available(), l.in_flight()), (1, 0));
    assert!(l.try_acquire().is_ok());
    assert_eq!(l.stats().rejected, 3);
}

/// The permit is released when the operation returns or panics.
#[tokio::test]
async fn contract_permit_release() {
    let l = Limiter::builder()
        .initial_limit(2)
        .build()
        .expect("valid configuration");
    let check = |l: &Limiter| {
        assert_eq!(l.in_flight(), 0);
        assert_eq!(l.available(), 2);
    };
    let r = l.execute(async |_c| Ok::<_, Sentinel>(1)).await;
    assert!(r.is_ok());
    check(&l);
    let r: Result<(), _> = l.execute(async |_c| Err(Sentinel)).await;
    assert!(matches!(r, Err(ExecuteError::Failed(Sentinel))));
    check(&l);
    let r: Result<(), ExecuteError<Sentinel>> = l.execute(async |_c| panic!("now")).await;
    assert!(matches!(r, Err(ExecuteError::Panicked(_))));
    check(&l);
    let r: Result<(), ExecuteError<Sentinel>> = l
        .execute(async |_c| {
            tokio::task::yield_now().await;
            panic!("after a suspension")
        })
        .await;
    assert!(matches!(r, Err(ExecuteError::Panicked(_))));
    check(&l);
    let r: Result<(), TryExecuteError<Sentinel>> = l.try_execute(async |_c| panic!("try")).await;
    assert!(matches!(r, Err(TryExecuteError::Panicked(_))));
    check(&l);
    let s = l.stats();
    assert_eq!((s.success, s.failures, s.dropped), (1, 4, 0));
}

/// The release runs its effect once. Ours holds by construction: recording
/// consumes the permit (a second call does not compile), and the drop that
/// follows a recorded outcome does nothing; an unrecorded drop releases once.
#[test]
fn contract_idempotent_release() {
    let l = Limiter::builder()
        .initial_limit(2)
        .build()
        .expect("valid configuration");
    let p = l.try_acquire().expect("a free permit");
    p.success();
    let s = l.stats();
    assert_eq!((s.total, s.success, s.dropped, s.in_flight), (1, 1, 0, 0));
    assert_eq!(l.available(), 2, "released exactly once");

    let p = l.try_acquire().expect("a free permit");
    drop(p);
    let s = l.stats();
    assert_eq!((s.total, s.success, s.dropped, s.in_flight), (2, 1, 1, 0));
    assert_eq!(l.available(), 2);

    let p = l.try_acquire_owned().expect("a free permit");
    std::thread::spawn(move || p.failure())
        .join()
        .expect("no panic");
    let s = l.stats();
    assert_eq!((s.total, s.failures, s.dropped), (3, 1, 1));
    assert_eq!(l.available(), 2);
}

/// The law runs at most once per sample window, after warmup.
#[test]
fn contract_windowed_adjust() {
    let mut rig = Rig::new(|b| b.warmup_samples(15));
    let mut changes = Vec::new();
    let mut last = rig.limiter.limit();
    // A saturated completion every 100 ms for 3.5 s: ten per window.
    for step in 0..=35u64 {
        rig.record_saturated(Outcome::Success, MS);
        let now = rig.limiter.limit();
        if now != last {
            changes.push((step * 100, now));
            last = now;
        }
        rig.clock.advance(ms(100));
    }
    // At 1 s only 11 samples were seen (< 15): no change. Then one per window.
    assert_eq!(changes, vec![(2000, 11), (3000, 12)]);
    assert_eq!(rig.limiter.stats().increases, 2);
}

/// `Permit::restart` moves the start of the latency measurement to now: the
/// time a permit sat unused is not recorded as the backend's latency.
#[test]
fn contract_permit_restart_measures_from_restart() {
    let clock = ManualClock::new();
    let l = Limiter::builder()
        .clock(clock.clone())
        .warmup_samples(0)
        .build()
        .expect("valid configuration");
    let mut permit = l.try_acquire().expect("free");
    clock.advance(Duration::from_secs(1));
    assert_eq!(permit.elapsed(), Duration::from_secs(1));
    permit.restart();
    clock.advance(ms(5));
    assert_eq!(permit.elapsed(), ms(5));
    permit.success();
    // The histogram reports within 1 %; without the restart it would be 1.005 s.
    let s = l.stats();
    assert!(s.max_latency.abs_diff(ms(5)) < ms(5) / 100, "{s:?}");
}

/// Skipping removes a call from latency feedback and history but not from
/// the success/failure totals.
#[tokio::test]
async fn contract_skip_honesty() {
    let mut rig = Rig::new(|b| b.warmup_samples(2));
    rig.saturate();
    rig.advance();
    // Five saturated, skipped completions after the window has run out.
    for i in 0..5 {
        let outcome = Outcome::from_success(i % 2 == 0);
        rig.held.pop().expect("held").record_skipped(outcome);
        rig.saturate();
    }
    let l = rig.limiter.clone();
    let s = l.stats();
    assert_eq!((s.success, s.failures), (3, 2), "totals count them");
    assert_eq!(s.max_latency, Duration::ZERO, "no latency history");
    assert_eq!(l.min_latency_estimate(), None, "no feedback");
    assert_eq!(l.limit(), 10, "no window was closed");
    // Nor do they count toward warmup: the first sample closes the window
    // with one sample seen (< 2), so no adaptation.
    rig.record_saturated(Outcome::Success, MS);
    assert_eq!(l.limit(), 10);
    assert_eq!(l.min_latency_estimate(), Some(MS));

    // The same through execute's controller.
    let clock = ManualClock::new();
    let e = Limiter::builder()
        .clock(clock.clone())
        .build()
        .expect("valid configuration");
    let _ = e
        .execute(async |c| {
            c.skip_sample();
            assert!(c.is_sample_skipped());
            clock.advance(ms(7));
            Err::<(), _>(Sentinel)
        })
        .await;
    let s = e.stats();
    assert_eq!((s.failures, s.success), (1, 0));
    assert_eq!(s.max_latency, Duration::ZERO);
}

/// No adaptation until `warmup_samples` samples have been recorded.
#[test]
fn contract_warmup() {
    let mut rig = Rig::new(|b| b.warmup_samples(5));
    // One sample per window: windows close at 1, 2, 3 s with 2, 3, 4 seen.
    rig.record_saturated(Outcome::Success, MS);
    for _ in 0..3 {
        rig.advance();
        rig.record_saturated(Outcome::Success, MS);
        assert_eq!(rig.limiter.limit(), 10);
    }
    assert_eq!(rig.limiter.smoothed_latency(), None, "the law never ran");
    assert_eq!(rig.limiter.stats().increases, 0);
    rig.advance();
    rig.record_saturated(Outcome::Success, MS);
    assert_eq!(rig.limiter.limit(), 11, "the fifth sample adapts");
}

/// A panicking operation becomes a `PanicError`; the permit is still freed.
#[tokio::test]
async fn contract_panic_safety() {
    let l = Limiter::new();
    let code = 7;
    let r: Result<(), ExecuteError<Infallible>> =
        l.execute(async |_c| panic!("formatted {code}")).await;
    let Err(ExecuteError::Panicked(p)) = r else {
        panic!("expected a caught panic, got {r:?}");
    };
    assert_eq!((p.op(), p.message()), ("adaptx::execute", "formatted 7"));

    let r: Result<(), ExecuteError<Infallible>> =
        l.execute(async |_c| std::panic::panic_any(42_u32)).await;
    let Err(ExecuteError::Panicked(p)) = r else {
        panic!("expected a caught panic, got {r:?}");
    };
    assert_eq!(p.message(), "non-string panic payload");
    assert_eq!(l.in_flight(), 0);
    assert_eq!(l.stats().failures, 2);

    // The builder's op name applies to both entry points.
    let named = Limiter::builder()
        .op_name("svc.call")
        .build()
        .expect("valid configuration");
    let r: Result<(), ExecuteError<Infallible>> = named.execute(async |_c| panic!("a")).await;
    assert!(matches!(r, Err(ExecuteError::Panicked(p)) if p.op() == "svc.call"));
    let r: Result<(), TryExecuteError<Infallible>> =
        named.try_execute(async |_c| panic!("b")).await;
    assert!(matches!(r, Err(TryExecuteError::Panicked(p)) if p.op() == "svc.call"));
    assert_eq!(named.in_flight(), 0);
}

/// After close, admission fails with a closed error and blocked waiters wake
/// at once. In-flight work continues and is counted.
#[tokio::test(start_paused = true)]
async fn contract_close_semantics() {
    let l = Limiter::builder()
        .initial_limit(1)
        .build()
        .expect("valid configuration");
    let held = l.try_acquire_owned().expect("the only permit");
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let l = l.clone();
            tokio::spawn(async move { l.acquire().await.map(|p| p.success()) })
        })
        .collect();
    tokio::task::yield_now().await;
    let t0 = tokio::time::Instant::now();
    assert!(l.close());
    for w in waiters {
        assert!(w.await.expect("no panic").is_err());
    }
    assert_eq!(t0.elapsed(), Duration::ZERO, "woken at once");

    assert!(!l.allow());
    assert_eq!(l.try_acquire().err(), Some(TryAcquireError::Closed));
    assert!(l.acquire().await.is_err());
    assert_eq!(
        l.acquire_timeout(WINDOW).await.err(),
        Some(AcquireTimeoutError::Closed)
    );
    assert!(l.acquire_blocking().is_err());
    let r = l.execute(async |_c| Ok::<_, Infallible>(())).await;
    assert!(matches!(r, Err(ExecuteError::Closed)));
    let r = l.try_execute(async |_c| Ok::<_, Infallible>(())).await;
    assert!(matches!(r, Err(TryExecuteError::Closed)));

    // The operation admitted before the close finishes normally.
    held.success();
    assert_eq!(l.in_flight(), 0);
    assert_eq!(l.stats().success, 1);
}

/// Closing again is harmless. Go's `Close()` returns nil every time; ours
/// returns `true` on the first call only, and later drains succeed.
#[tokio::test(start_paused = true)]
async fn contract_idempotent_close() {
    let l = Limiter::new();
    assert!(l.close());
    assert!(!l.close());
    assert!(!l.close());
    assert!(l.is_closed());
    l.close_and_drain().await;
    assert_eq!(l.close_with_timeout(Duration::ZERO).await, Ok(()));
    assert_eq!(l.close_with_timeout(WINDOW).await, Ok(()));
    assert_eq!(l.close_blocking(Duration::ZERO), Ok(()));
    assert!(l.is_closed());
}

/// The drain returns a timeout error if work remains in flight; the limiter
/// stays closed and the work is not cancelled.
#[tokio::test(start_paused = true)]
async fn contract_drain_timeout() {
    let l = Limiter::new();
    let p = l.try_acquire().expect("a free permit");
    let t0 = tokio::time::Instant::now();
    let err = l
        .close_with_timeout(ms(50))
        .await
        .expect_err("one in flight");
    assert_eq!(err.in_flight(), 1);
    assert_eq!(t0.elapsed(), ms(50), "waited the full timeout");
    assert!(l.is_closed());
    assert_eq!(l.try_acquire().err(), Some(TryAcquireError::Closed));
    assert!(l.close_blocking(Duration::ZERO).is_err());
    // The work goes on and finishes; now the drain succeeds at once.
    p.success();
    let t1 = tokio::time::Instant::now();
    assert_eq!(l.close_with_timeout(ms(50)).await, Ok(()));
    assert_eq!(t1.elapsed(), Duration::ZERO);
    assert_eq!(l.stats().success, 1);
}

/// The hook runs synchronously, once per change, and a panic in it is
/// swallowed.
#[test]
fn contract_limit_change_hook() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let sink = calls.clone();
    let mut rig = Rig::new(move |b| {
        b.on_limit_change(move |old, new| {
            sink.lock()
                .expect("not poisoned")
                .push((old, new, std::thread::current().id()));
        })
    });
    let me = std::thread::current().id();
    let count = || calls.lock().expect("not poisoned").len();
    rig.record_saturated(Outcome::Success, MS);
    rig.advance();
    rig.held
        .pop()
        .expect("held")
        .record_with_latency(Outcome::Success, MS);
    // Synchronous: done, on this thread, before the record returned.
    assert_eq!(*calls.lock().expect("not poisoned"), vec![(10, 11, me)]);
    // A window that holds the limit does not call it.
    rig.held.clear();
    assert_eq!(rig.idle_window(Outcome::Success, MS), 11);
    assert_eq!(count(), 1);
    // A shrink calls it once; reset_stats does not.
    rig.advance();
    rig.record_idle(Outcome::Failure, MS);
    assert_eq!(count(), 2);
    rig.limiter.reset_stats();
    assert_eq!(rig.limiter.limit(), 10);
    assert_eq!(count(), 2);
    let s = rig.limiter.stats();
    assert_eq!((s.increases, s.decreases), (0, 0));
    assert_eq!(
        calls
            .lock()
            .expect("not poisoned")
            .get(1)
            .map(|c| (c.0, c.1)),
        Some((11, 5))
    );

    // A hook that always panics: the panic stops at the limiter, the limit
    // moves anyway, and the hook keeps being called.
    let fired = Arc::new(AtomicUsize::new(0));
    let f = fired.clone();
    let mut rig = Rig::new(move |b| {
        b.on_limit_change(move |_, _| {
            f.fetch_add(1, Ordering::SeqCst);
            panic!("observer bug");
        })
    });
    assert_eq!(rig.saturated_window(MS), 11);
    assert_eq!(rig.saturated_window(MS), 12);
    assert_eq!(fired.load(Ordering::SeqCst), 2);
}

/// The controller shows the state at the instant of admission, read in the
/// same atomic step (Go reads it afterwards, racily: §11 #22), for every way
/// a permit is obtained.
#[tokio::test]
async fn contract_controller_scope() {
    // Immediate admission, with three others in flight.
    let l = Limiter::new();
    let others: Vec<_> = (0..3).map(|_| l.try_acquire().expect("free")).collect();
    let seen = l
        .execute(async |c| {
            let before = (c.limit(), c.in_flight());
            // More admissions while it runs do not change the snapshot.
            let more: Vec<_> = (0..2).map(|_| l.try_acquire().expect("free")).collect();
            let after = (c.limit(), c.in_flight());
            drop(more);
            Ok::<_, Infallible>((before, after, c.algorithm()))
        })
        .await
        .expect("runs");
    assert_eq!(seen, ((10, 3), (10, 3), "ceiling"));
    drop(others);

    // A waiter granted a permit by growth: limit 2, the completing operation
    // still in flight at the hand-over.
    let mut rig = Rig::new(|b| b.initial_limit(1));
    rig.saturate();
    let snapshot = |l: &Limiter| {
        let l = l.clone();
        async move {
            l.execute(async |c| Ok::<_, Infallible>((c.limit(), c.in_flight())))
                .await
                .expect("runs")
        }
    };
    {
        let mut fut = pin!(snapshot(&rig.limiter));
        assert!(poll_once(fut.as_mut()).is_pending());
        rig.advance();
        rig.held
            .pop()
            .expect("held")
            .record_with_latency(Outcome::Success, MS);
        assert_eq!(rig.limiter.limit(), 2);
        assert_eq!(poll_once(fut.as_mut()), Poll::Ready((2, 1)));
    }

    // A waiter handed the permit of a completing operation: limit 1, and no
    // other operation in flight (the releaser's is over; the permit is now
    // the waiter's own, which the snapshot does not count).
    let l = Limiter::builder()
        .initial_limit(1)
        .build()
        .expect("valid configuration");
    let held = l.try_acquire().expect("the only permit");
    let mut fut = pin!(snapshot(&l));
    assert!(poll_once(fut.as_mut()).is_pending());
    held.success();
    assert_eq!(poll_once(fut.as_mut()), Poll::Ready((1, 0)));
}

// ===========================================================================
// Better than the reference
// ===========================================================================

/// 1. Every option is validated; the error names the field, the value and
///    the allowed range. The cross-field rules of the reference stay.
#[test]
fn improvement_1_config_validated_names_field() {
    let err = Limiter::builder()
        .decrease_ratio(1.5)
        .build()
        .expect_err("ratio must be < 1");
    assert_eq!(err.field(), "decrease_ratio");
    assert_eq!(err.value(), "1.5");
    assert_eq!(err.allowed(), "0 < value < 1");
    assert_eq!(
        err.to_string(),
        "invalid decrease_ratio: 1.5 (allowed: 0 < value < 1)"
    );
    // NaN is not a silent default.
    let err = Limiter::builder()
        .smoothing(f64::NAN)
        .build()
        .expect_err("NaN");
    assert_eq!(err.field(), "smoothing");
    // A law's option is checked even when another law is chosen.
    let err = Limiter::builder()
        .algorithm(Algorithm::Vegas)
        .increase_rate(-1.0)
        .build()
        .expect_err("negative rate");
    assert_eq!(err.field(), "increase_rate");
    // Upper bounds too.
    let err = Limiter::builder()
        .max_limit(adaptx::MAX_LIMIT_BOUND + 1)
        .build()
        .expect_err("too large");
    assert_eq!(err.field(), "max_limit");
    let err = Limiter::builder()
        .sample_window(adaptx::MAX_SAMPLE_WINDOW + Duration::from_nanos(1))
        .build()
        .expect_err("too long");
    assert_eq!(err.field(), "sample_window");
    // The laws' own constructors validate the same way.
    assert_eq!(
        Vegas::new(0.1, Duration::ZERO, 0.5, 0.9)
            .expect_err("zero target")
            .field(),
        "target_latency"
    );
    // Cross-field rules: initial clamped into [min, max]; a max below the
    // min is refused (Go raised it: `both_builders_refuse_a_max_below_the_min_naming_both`).
    let l = Limiter::builder()
        .min_limit(50)
        .max_limit(60)
        .initial_limit(5)
        .build()
        .expect("an initial limit out of [min, max] is clamped, not refused");
    let s = l.stats();
    assert_eq!((s.limit, s.min_limit, s.max_limit), (50, 50, 60));
}

/// 1 (cross-field). `Limiter::builder()` and `RateLimiter::builder()` treat
/// a maximum below the minimum the same way: an error on the maximum whose
/// allowed range names the minimum and its value (Go raised `max_limit` to
/// `min_limit`, ignoring one of the two settings without a word). Equal
/// bounds are a fixed limit / rate, not an error.
#[test]
fn both_builders_refuse_a_max_below_the_min_naming_both() {
    let err = Limiter::builder()
        .min_limit(50)
        .max_limit(10)
        .build()
        .expect_err("max_limit < min_limit");
    assert_eq!(
        (err.field(), err.value(), err.allowed()),
        ("max_limit", "10", "min_limit (50) ..= 2147483647")
    );
    assert_eq!(
        err.to_string(),
        "invalid max_limit: 10 (allowed: min_limit (50) ..= 2147483647)"
    );

    let err = RateLimiter::builder()
        .min_rate(20)
        .max_rate(10)
        .build()
        .expect_err("max_rate < min_rate");
    assert_eq!(
        (err.field(), err.value(), err.allowed()),
        ("max_rate", "10", "min_rate (20) ..= 1000000000")
    );
    assert_eq!(
        err.to_string(),
        "invalid max_rate: 10 (allowed: min_rate (20) ..= 1000000000)"
    );
    // The keyed build and the fleet's settings refuse the same way.
    let keyed = RateLimiter::builder()
        .min_rate(20)
        .max_rate(10)
        .build_keyed::<u32>()
        .expect_err("max_rate < min_rate");
    assert_eq!(keyed, err);

    let fixed = Limiter::builder().min_limit(7).max_limit(7).build();
    assert_eq!(fixed.expect("min == max is a fixed limit").limit(), 7);
    let fixed = RateLimiter::builder().min_rate(7).max_rate(7).build();
    assert_eq!(fixed.expect("min == max is a fixed rate").current_rate(), 7);
}

/// 2. Every law backs off on failures, and none grows unless the window
///    used the limit (Go: Vegas ignores failures; Vegas and Gradient climb
///    under light load).
#[test]
fn improvement_2_all_laws_back_off_and_gate_growth() {
    for algorithm in [Algorithm::Aimd, Algorithm::Vegas, Algorithm::Gradient] {
        let rig = Rig::new(|b| b.algorithm(algorithm));
        assert_eq!(
            rig.idle_window(Outcome::Failure, MS),
            5,
            "{algorithm} backs off on failures"
        );

        let rig = Rig::new(|b| b.algorithm(algorithm));
        for _ in 0..5 {
            assert_eq!(
                rig.idle_window(Outcome::Success, MS),
                10,
                "{algorithm} holds under light load"
            );
        }

        // The same windows, saturated, do grow (Gradient after its first
        // window has set the average).
        let mut rig = Rig::new(|b| b.algorithm(algorithm));
        let first = rig.saturated_window(MS);
        let second = rig.saturated_window(MS);
        assert!(second > 10, "{algorithm}: {first} then {second}");
    }
}

/// 3. The Vegas band does not collapse as RTT_min nears the target. Go's
///    α = L·tol·(1 − m/T) goes to 0 there and halves the limit (§11 #2).
#[test]
fn improvement_3_vegas_band_continuous() {
    // §11 #2: L 100, m 99 ms, T 100 ms, r 99.2 ms. Go: q ≈ 0.20 > β ≈ 0.20,
    // halve. Ours: α = 100 · 0.1 · max(0.01, 0.99) = 9.9, q < α: grow.
    let window = |m: Duration, r: Duration| {
        Rig::new(|b| {
            b.algorithm(Algorithm::Vegas)
                .initial_limit(100)
                .target_latency(ms(100))
        })
        .saturated_window2(m, 2 * r - m)
    };
    assert_eq!(window(ms(99), Duration::from_micros(99_200)), 101);
    // m 90 ms, r 92 ms also halves in Go.
    assert_eq!(window(ms(90), ms(92)), 101);

    // A sweep of floors across the target with the queue fixed at
    // q = L · (1 − 1/1.05) ≈ 4.76: ours never backs off (α ≥ L·tol/2 = 5);
    // Go, with β = 2·L·tol·(1 − m/T), would halve for every floor from 77 ms
    // to 99 ms.
    let mut law = Vegas::new(0.1, ms(100), 0.5, 0.9).expect("valid parameters");
    for m_ms in 50..=150u32 {
        let m = f64::from(m_ms) * 1e6;
        let r = m * 1.05;
        // The latencies set as the exact floats of the sweep.
        let mut w = WindowSummary::new(Duration::from_secs(1), 10, 0, 100, Duration::ZERO)
            .expect("a consistent window");
        w.mean_rtt_nanos = r;
        w.mean_ok_rtt_nanos = r;
        w.min_rtt_nanos = m;
        w.rtt_floor_nanos = Some(m);
        w.rtt_average_nanos = Some(r);
        assert_eq!(law.next_limit(100, &w), 101, "floor {m_ms} ms");
    }
}

/// Runs `windows` saturated windows from limit 100 and returns the limits.
fn jitter_run(jitter: f64, seed: u64, windows: usize) -> Vec<usize> {
    let mut rig = Rig::new(|b| {
        b.initial_limit(100)
            .max_limit(1000)
            .jitter(jitter)
            .seed(seed)
    });
    (0..windows).map(|_| rig.saturated_window(MS)).collect()
}

/// 4. Jitter withholds even +1 steps (probability jitter/2), from an RNG
///    that `.seed()` makes reproducible (Go: never for steps ≤ 10 at the
///    default, from a global RNG).
#[test]
fn improvement_4_jitter_desynchronizes_small_steps() {
    let plain = jitter_run(0.0, 7, 40);
    assert_eq!(plain, (101..=140).collect::<Vec<_>>(), "no jitter: +1 each");

    let jittered = jitter_run(0.5, 7, 40);
    let mut prev = 100;
    let mut withheld = 0;
    for &l in &jittered {
        assert!(l == prev || l == prev + 1, "a step is +1 or withheld");
        if l == prev {
            withheld += 1;
        }
        prev = l;
    }
    assert!(
        (1..40).contains(&withheld),
        "some, not all, +1 steps withheld: {withheld}"
    );
    assert_eq!(jitter_run(0.5, 7, 40), jittered, "same seed, same sequence");
}

/// 5. Windows roll during warmup, so the first adjustment judges one
///    window, not everything since construction (Go keeps one window open
///    through warmup, §11 #6).
#[test]
fn improvement_5_warmup_windows_roll() {
    let mut rig = Rig::new(|b| b.warmup_samples(3));
    // Window 1, during warmup: a failure, then a success that closes it.
    rig.record_idle(Outcome::Failure, MS);
    rig.advance();
    rig.record_idle(Outcome::Success, MS);
    assert_eq!(rig.limiter.limit(), 10);
    // Window 2: one saturated success; warmup is over. Had window 1 stayed
    // open, its failure would halve the limit to 5.
    rig.advance();
    rig.record_saturated(Outcome::Success, MS);
    assert_eq!(rig.limiter.limit(), 11);
}

/// 6. Close and admission are linearized: once a drain succeeds no
///    operation is running and none can start (Go's race, §11 #14).
#[test]
fn improvement_6_close_and_admission_linearized() {
    let l = Limiter::builder()
        .initial_limit(8)
        .build()
        .expect("valid configuration");
    let drained = AtomicBool::new(false);
    let admitted = AtomicUsize::new(0);
    let late = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                loop {
                    match l.try_acquire() {
                        Ok(p) => {
                            if drained.load(Ordering::SeqCst) {
                                late.fetch_add(1, Ordering::SeqCst);
                            }
                            admitted.fetch_add(1, Ordering::SeqCst);
                            p.success();
                        }
                        Err(TryAcquireError::Closed) => break,
                        Err(TryAcquireError::NoCapacity) => std::hint::spin_loop(),
                        Err(e) => panic!("unexpected {e}"),
                    }
                }
            });
        }
        while admitted.load(Ordering::SeqCst) < 10_000 {
            std::hint::spin_loop();
        }
        l.close_blocking(Duration::from_secs(60))
            .expect("drains once running operations end");
        drained.store(true, Ordering::SeqCst);
        assert_eq!(l.in_flight(), 0);
    });
    assert_eq!(late.load(Ordering::SeqCst), 0, "admitted after the drain");
    assert_eq!(l.in_flight(), 0);
}

/// Smaller difference: after close the limit stops adapting and the hook
/// stays quiet; completions are still counted (Go kept running the law,
/// §11 #15).
#[test]
fn difference_closed_limiter_stops_adapting() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let mut rig = Rig::new(move |b| {
        b.on_limit_change(move |_, _| {
            c.fetch_add(1, Ordering::SeqCst);
        })
    });
    rig.saturate();
    rig.limiter.close();
    rig.advance();
    rig.held
        .pop()
        .expect("held")
        .record_with_latency(Outcome::Success, MS);
    rig.advance();
    rig.held
        .pop()
        .expect("held")
        .record_with_latency(Outcome::Failure, MS);
    assert_eq!(rig.limiter.limit(), 10);
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    let s = rig.limiter.stats();
    assert_eq!(
        (s.success, s.failures, s.increases, s.decreases),
        (1, 1, 0, 0)
    );
}

/// 7. Accounting: rejected counts every admission that ends without a
///    permit; the snapshot keeps `total = success + failures + dropped +
///    in_flight`; percentiles come from a histogram within 1 % of exact.
#[tokio::test(start_paused = true)]
async fn improvement_7_rejected_means_one_thing_stats_consistent() {
    let l = Limiter::builder()
        .initial_limit(1)
        .build()
        .expect("valid configuration");
    let rejected = |l: &Limiter| l.stats().rejected;
    let held = l.try_acquire_owned().expect("the only permit");

    assert!(l.try_acquire().is_err());
    assert_eq!(rejected(&l), 1, "try_acquire, no capacity");
    let r = l.try_execute(async |_c| Ok::<_, Infallible>(())).await;
    assert!(matches!(r, Err(TryExecuteError::NoCapacity)));
    assert_eq!(rejected(&l), 2, "try_execute, no capacity");
    assert_eq!(
        l.acquire_timeout(ms(5)).await.err(),
        Some(AcquireTimeoutError::Timeout)
    );
    assert_eq!(rejected(&l), 3, "acquire_timeout, timed out");
    {
        let mut fut = pin!(l.acquire());
        assert!(poll_once(fut.as_mut()).is_pending());
    }
    assert_eq!(rejected(&l), 4, "waiting acquire dropped");
    drop(l.acquire());
    assert_eq!(rejected(&l), 4, "a never-polled acquire is no attempt");
    assert!(l.acquire_blocking_timeout(Duration::ZERO).is_err());
    assert_eq!(rejected(&l), 5, "acquire_blocking_timeout, timed out");
    let l2 = l.clone();
    let waiter = tokio::spawn(async move { l2.acquire().await.is_err() });
    tokio::task::yield_now().await;
    l.close();
    assert!(waiter.await.expect("no panic"));
    assert_eq!(rejected(&l), 6, "waiting acquire, closed");
    assert!(l.try_acquire().is_err());
    assert!(l.acquire().await.is_err());
    assert!(l.acquire_timeout(ms(5)).await.is_err());
    assert!(l.acquire_blocking().is_err());
    assert!(l.execute(async |_c| Ok::<_, Infallible>(())).await.is_err());
    assert!(
        l.try_execute(async |_c| Ok::<_, Infallible>(()))
            .await
            .is_err()
    );
    assert_eq!(rejected(&l), 12, "every closed path");
    drop(held);

    // The snapshot invariant, with every kind of ending and work in flight.
    let l = Limiter::new();
    l.try_acquire().expect("free").success();
    l.try_acquire().expect("free").failure();
    l.try_acquire()
        .expect("free")
        .record_skipped(Outcome::Success);
    l.try_acquire()
        .expect("free")
        .record_skipped(Outcome::Failure);
    drop(l.try_acquire().expect("free"));
    let running: Vec<_> = (0..3).map(|_| l.try_acquire().expect("free")).collect();
    let s = l.stats();
    assert_eq!(
        (s.success, s.failures, s.dropped, s.in_flight),
        (2, 2, 1, 3)
    );
    assert_eq!(
        s.total,
        s.success + s.failures + s.dropped + s.in_flight as u64
    );
    assert_eq!(s.total, 8);
    drop(running);

    // Percentiles of 1000 known latencies (1 µs to about 1 s), recorded in
    // a scrambled order inside one long window.
    let clock = ManualClock::new();
    let l = Limiter::builder()
        .clock(clock)
        .sample_window(Duration::from_secs(3600))
        .build()
        .expect("valid configuration");
    let mut exact: Vec<u64> = (0..1000u64).map(|i| 1_000 + i * i * 997).collect();
    let mut order = exact.clone();
    let mut rng = Lcg(9);
    for i in (1..order.len()).rev() {
        let j = (rng.next() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    for &ns in &order {
        l.try_acquire()
            .expect("free")
            .record_with_latency(Outcome::Success, Duration::from_nanos(ns));
    }
    exact.sort_unstable();
    let near = |got: Duration, want: u64, what: &str| {
        let got = got.as_nanos() as f64;
        let want = want as f64;
        assert!(
            (got - want).abs() <= want * 0.01,
            "{what}: {got} vs exact {want}"
        );
    };
    let s = l.stats();
    // Lower nearest rank: sorted index floor((n − 1) · p).
    near(s.p50_latency, exact[499], "p50");
    near(s.p99_latency, exact[989], "p99");
    near(s.min_latency, exact[0], "min");
    near(s.max_latency, exact[999], "max");
    let mean = exact.iter().sum::<u64>() / 1000;
    near(s.avg_latency, mean, "avg");
}

/// 8. The control law is a public trait: a law of one's own is handed the
///    window's summary once per window, its proposal is clamped into
///    `[min, max]`, its name is the limiter's algorithm, and `reset_stats`
///    resets it.
#[test]
fn improvement_8_control_law_is_a_public_trait() {
    #[derive(Debug)]
    struct Recorder {
        seen: Arc<Mutex<Vec<(usize, WindowSummary)>>>,
        resets: Arc<AtomicUsize>,
    }
    impl ControlLaw for Recorder {
        fn name(&self) -> &'static str {
            "recorder"
        }
        fn next_limit(&mut self, limit: usize, window: &WindowSummary) -> usize {
            self.seen
                .lock()
                .expect("not poisoned")
                .push((limit, *window));
            if window.failures > 0 { 0 } else { limit + 1000 }
        }
        fn reset(&mut self) {
            self.resets.fetch_add(1, Ordering::SeqCst);
        }
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let resets = Arc::new(AtomicUsize::new(0));
    let law = Recorder {
        seen: seen.clone(),
        resets: resets.clone(),
    };
    let rig = Rig::new(|b| {
        b.law(law)
            .min_limit(2)
            .max_limit(50)
            .min_latency_decay(0.0)
            .smoothing(0.2)
    });
    assert_eq!(rig.limiter.algorithm(), "recorder");
    assert_eq!(rig.limiter.stats().algorithm, "recorder");
    let mut held: Vec<_> = (0..4)
        .map(|_| rig.limiter.try_acquire().expect("free"))
        .collect();
    let mut next = || held.pop().expect("held");
    next().record_with_latency(Outcome::Success, ms(2));
    rig.advance();
    next().record_with_latency(Outcome::Failure, ms(4));
    assert_eq!(rig.limiter.limit(), 2, "0 clamped to min");
    rig.advance();
    next().record_with_latency(Outcome::Success, ms(6));
    assert_eq!(rig.limiter.limit(), 50, "limit + 1000 clamped to max");

    // The slowest success is read from the latency histogram: the midpoint
    // of the bucket holding it (2 ms → 2.007 ms; 6 ms → 5.997 ms, which is
    // under the successes' mean and so reads as the mean).
    let base = WindowSummary::new(Duration::from_secs(1), 2, 1, 4, ms(3))
        .and_then(|w| w.with_min_rtt(ms(2)))
        .expect("a consistent window")
        .with_mean_ok_rtt(ms(2))
        .with_max_ok_rtt(Duration::from_nanos(2_007_040))
        .expect("a consistent window")
        .with_rtt_floor(ms(2));
    let second = WindowSummary::new(Duration::from_secs(1), 1, 0, 2, ms(6))
        .and_then(|w| w.with_max_ok_rtt(ms(6)))
        .expect("a consistent window")
        .with_rtt_floor(ms(2))
        .with_rtt_average(ms(3));
    assert_eq!(
        *seen.lock().expect("not poisoned"),
        vec![(10, base), (2, second)]
    );
    rig.limiter.reset_stats();
    assert_eq!(resets.load(Ordering::SeqCst), 1);
}

/// Smaller difference: a measured latency of zero is a real sample (Go
/// treats 0 as "skip", §11 #9); skipping is explicit.
#[test]
fn difference_zero_latency_is_a_sample() {
    let mut rig = Rig::new(|b| b.warmup_samples(1));
    rig.saturate();
    rig.advance();
    // The zero sample counts toward warmup, closes the window, and feeds
    // the law: the saturated window grows.
    rig.record_saturated(Outcome::Success, Duration::ZERO);
    assert_eq!(rig.limiter.limit(), 11);
    // It is not a service time, though: RTT_min ignores zero readings (a
    // floor of 0 would freeze Vegas).
    assert_eq!(rig.limiter.min_latency_estimate(), None);
    // An explicit skip does none of that.
    rig.advance();
    rig.held
        .pop()
        .expect("held")
        .record_skipped(Outcome::Success);
    assert_eq!(rig.limiter.limit(), 11);
    assert_eq!(rig.limiter.stats().success, 2);
}

/// 9. Completions record without a global lock, and of all the completions
///    that find a window over, exactly one closes it: many threads completing in
///    one window change the limit once and count one increase.
#[test]
fn improvement_9_completions_lock_free_single_closer() {
    const THREADS: usize = 8;
    let hook_calls = Arc::new(AtomicUsize::new(0));
    let h = hook_calls.clone();
    let mut rig = Rig::new(move |b| {
        // A gate of 1 in flight: any extra close would show as an extra +1.
        b.initial_limit(64)
            .utilization(0.01)
            .on_limit_change(move |_, _| {
                h.fetch_add(1, Ordering::SeqCst);
            })
    });
    for round in 1..=20usize {
        rig.saturate();
        let limit = rig.limiter.limit();
        assert_eq!(rig.held.len(), limit);
        rig.advance();
        // Every completion below finds the window over.
        let mut batches: Vec<Vec<OwnedPermit>> = (0..THREADS).map(|_| Vec::new()).collect();
        for (i, p) in rig.held.drain(..).enumerate() {
            batches[i % THREADS].push(p);
        }
        let start = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for batch in batches {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    for p in batch {
                        p.record_with_latency(Outcome::Success, MS);
                    }
                });
            }
        });
        assert_eq!(rig.limiter.limit(), 64 + round, "one +1 per window");
        assert_eq!(rig.limiter.stats().increases, round as u64);
        assert_eq!(hook_calls.load(Ordering::SeqCst), round);
        assert_eq!(rig.limiter.in_flight(), 0);
    }
    let s = rig.limiter.stats();
    assert_eq!(s.success, (64..84).sum::<usize>() as u64);
    assert_eq!(s.decreases, 0);
}

/// A backend that serves 20 at a time and rejects the rest at once, driven
/// in 50 ms ticks by as many requests as the limit admits: the mean limit
/// and the overload failures over `windows` 1 s windows after the first 20.
fn hard_ceiling_run(algorithm: Algorithm, windows: u64) -> (f64, u64) {
    const CEILING: usize = 20;
    let clock = ManualClock::new();
    let l = Limiter::builder()
        .algorithm(algorithm)
        .clock(clock.clone())
        .seed(7)
        .build()
        .expect("valid configuration");
    let (mut limit_sum, mut ticks, mut failures) = (0usize, 0u64, 0u64);
    for tick in 0..(20 + windows) * 20 {
        let held: Vec<_> = std::iter::from_fn(|| l.try_acquire().ok()).collect();
        clock.advance(ms(50));
        for (i, p) in held.into_iter().enumerate() {
            if i < CEILING {
                p.record_with_latency(Outcome::Success, ms(50));
            } else {
                p.record_with_latency(Outcome::Failure, ms(1));
                failures += u64::from(tick >= 400);
            }
        }
        if tick >= 400 {
            limit_sum += l.limit();
            ticks += 1;
        }
    }
    (limit_sum as f64 / ticks as f64, failures)
}

/// The default law is Ceiling, not the seed's AIMD: on a hard ceiling it
/// rests at the backend's concurrency and pays one rejection per probe,
/// where AIMD's sawtooth leaves capacity unused and fails a window's worth.
#[test]
fn improvement_13_the_default_law_rests_at_a_hard_ceiling() {
    assert_eq!(Algorithm::default(), Algorithm::Ceiling);
    let (mean, failures) = hard_ceiling_run(Algorithm::default(), 60);
    assert!((19.0..=20.5).contains(&mean), "default: mean limit {mean}");
    // One probe every 2–4 windows, each failing once: at most 30 in 60.
    assert!(failures <= 30, "default: {failures} overload failures");
    let (aimd_mean, aimd_failures) = hard_ceiling_run(Algorithm::Aimd, 60);
    assert!(aimd_mean < 18.0, "AIMD: mean limit {aimd_mean}");
    assert!(aimd_failures > failures, "AIMD: {aimd_failures} failures");
}

/// Latency statistics describe successes; failures still count and still
/// reach the control law's window mean.
#[test]
fn difference_latency_stats_describe_successes() {
    let rig = Rig::new(|b| b.sample_window(Duration::from_secs(3600)));
    for _ in 0..10 {
        rig.record_idle(Outcome::Success, ms(40));
    }
    for _ in 0..30 {
        rig.record_idle(Outcome::Failure, ms(2));
    }
    let s = rig.limiter.stats();
    assert_eq!((s.success, s.failures, s.latency_samples), (10, 30, 10));
    let within = |d: Duration| (d.as_secs_f64() / 0.040 - 1.0).abs() < 0.01;
    assert!(within(s.p50_latency), "{:?}", s.p50_latency);
    assert!(within(s.min_latency), "{:?}", s.min_latency);
    assert!(within(s.avg_latency), "{:?}", s.avg_latency);
}

/// A control law that panics holds the limit for that window: the completing
/// operation's permit is still released and the panic does not reach it.
#[test]
fn difference_panicking_law_holds_and_releases() {
    #[derive(Debug)]
    struct Panics;
    impl ControlLaw for Panics {
        fn name(&self) -> &'static str {
            "panics"
        }
        fn next_limit(&mut self, _limit: usize, _w: &WindowSummary) -> usize {
            panic!("law bug")
        }
    }
    let rig = Rig::new(|b| b.law(Panics));
    rig.record_idle(Outcome::Success, MS);
    rig.advance();
    rig.record_idle(Outcome::Success, MS); // closes the window: the law panics
    assert_eq!(rig.limiter.limit(), 10);
    assert_eq!(rig.limiter.in_flight(), 0);
    assert_eq!(rig.limiter.stats().success, 2);
    rig.limiter
        .close_blocking(Duration::ZERO)
        .expect("nothing in flight");
}

/// Latencies above `MAX_SAMPLE_LATENCY` are recorded as that bound, so a
/// window's latency sum cannot wrap and make a slow window look fast.
#[test]
fn difference_huge_latency_is_clamped() {
    let mut rig = Rig::new(|b| b.algorithm(Algorithm::Gradient));
    // First window sets the average.
    rig.saturated_window(ms(10));
    let before = rig.limiter.limit();
    rig.record_saturated(Outcome::Success, ms(10));
    rig.record_saturated(Outcome::Success, Duration::MAX);
    rig.advance();
    rig.record_saturated(Outcome::Success, ms(10));
    assert!(
        rig.limiter.limit() < before,
        "a huge latency is slow, not fast"
    );
    assert_eq!(adaptx::MAX_SAMPLE_LATENCY, Duration::from_nanos(1 << 44));
}

/// A permit handed to a waiter that is dropped before it sees it was admitted
/// and released without an outcome: it counts as dropped, not rejected, so
/// `total` (admissions) never goes back.
#[tokio::test(start_paused = true)]
async fn difference_granted_then_dropped_waiter_counts_as_dropped() {
    let l = Limiter::builder().initial_limit(1).build().expect("valid");
    let held = l.try_acquire().expect("free");
    let mut waiter = Box::pin(l.acquire());
    assert!(poll_once(waiter.as_mut()).is_pending());
    held.success(); // hands the permit to the waiter
    let before = l.stats();
    assert_eq!((before.total, before.in_flight), (2, 1));
    drop(waiter);
    let after = l.stats();
    assert_eq!(after.total, 2, "total never goes back");
    assert_eq!((after.dropped, after.rejected, after.in_flight), (1, 0, 0));
}

/// RTT_min is the lowest window mean of successful samples: one lucky fast
/// sample in a noisy window, or fast failures, do not lower it.
#[test]
fn difference_rtt_floor_is_lowest_success_window_mean() {
    let rig = Rig::new(|b| b.algorithm(Algorithm::Vegas).min_latency_decay(0.0));
    // A window with samples 40 ms and 60 ms, and a fast failure: mean of
    // successes 50 ms.
    rig.record_idle(Outcome::Success, ms(40));
    rig.record_idle(Outcome::Failure, Duration::from_micros(50));
    rig.advance();
    rig.record_idle(Outcome::Success, ms(60));
    assert_eq!(rig.limiter.min_latency_estimate(), Some(ms(50)));
    // A slower window does not raise it; a faster one lowers it.
    rig.idle_window(Outcome::Success, ms(70));
    assert_eq!(rig.limiter.min_latency_estimate(), Some(ms(50)));
    rig.idle_window(Outcome::Success, ms(45));
    assert_eq!(rig.limiter.min_latency_estimate(), Some(ms(45)));
}

/// Runs `windows` rounds through `rig`: each takes every free permit, lets
/// a window pass and completes them all with latency `r(i)` for round `i`.
/// A cut limit is thus drained by the next round. Returns the limits.
fn floor_step_run(rig: &Rig, windows: usize, r: impl Fn(usize) -> Duration) -> Vec<usize> {
    (0..windows)
        .map(|i| {
            let held: Vec<_> = std::iter::from_fn(|| rig.limiter.try_acquire().ok()).collect();
            rig.advance();
            for p in held {
                p.record_with_latency(Outcome::Success, r(i));
            }
            rig.limiter.limit()
        })
        .collect()
}

/// 12. The delay laws relearn a floor that moves: a backend that becomes
///     slower without becoming busier (every concurrency, the same latency)
///     is not read as a queue for good (Go: Vegas cut to 1 and stayed).
#[test]
fn improvement_12_delay_laws_relearn_a_floor_that_moves() {
    // Vegas: 5 ms, then 10 ms from round 10 on. The step cuts the limit; a
    // re-probe finds 10 ms at half the concurrency and adopts it; the limit
    // grows back.
    let rig = Rig::new(|b| b.algorithm(Algorithm::Vegas).initial_limit(20));
    let limits = floor_step_run(&rig, 70, |i| if i < 10 { ms(5) } else { ms(10) });
    let low = *limits[10..20].iter().min().expect("rounds");
    assert!(low <= 5, "the step reads as a queue at first: {limits:?}");
    assert!(limits[69] >= 30, "and the limit grows back: {limits:?}");
    // The limiter's RTT_min itself only drifted by the min-latency decay.
    let rtt_min = rig.limiter.min_latency_estimate().expect("a floor");
    assert!(rtt_min < ms(6), "{rtt_min:?}");

    // Gradient: 5 ms, then 15 ms, three times the floor (above its
    // standing-queue bound of 2): growth resumes once the floor is re-probed.
    let rig = Rig::new(|b| b.algorithm(Algorithm::Gradient).initial_limit(20));
    let limits = floor_step_run(&rig, 70, |i| if i < 10 { ms(5) } else { ms(15) });
    let after_step = limits[20];
    assert!(limits[69] >= after_step + 20, "growth resumed: {limits:?}");
}

/// The error-chain convention: `ExecuteError`'s and `TryExecuteError`'s
/// `Display` describe their own level and never repeat their `source()`, so
/// a reporter that prints the chain (`anyhow`'s `{:#}`, `tracing`'s error
/// fields) prints each cause once.
#[tokio::test]
async fn execute_errors_display_their_level_only_and_chain_the_cause() {
    use std::error::Error as _;

    #[derive(Debug)]
    struct Boom;
    impl std::fmt::Display for Boom {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("boom")
        }
    }
    impl std::error::Error for Boom {}

    /// Each level's text, outermost first.
    fn chain(e: &(dyn std::error::Error + 'static)) -> Vec<String> {
        let mut levels = vec![e.to_string()];
        let mut next = e.source();
        while let Some(cause) = next {
            levels.push(cause.to_string());
            next = cause.source();
        }
        levels
    }

    let l = Limiter::builder()
        .initial_limit(1)
        .queue(adaptx::QueuePolicy::new().max_waiters(0))
        .build()
        .expect("valid configuration");
    let failed = l.execute(async |_| Err::<(), _>(Boom)).await.unwrap_err();
    assert_eq!(chain(&failed), ["operation failed", "boom"]);
    let panicked = l
        .execute(async |_| -> Result<(), Boom> { panic!("kaput") })
        .await
        .unwrap_err();
    assert_eq!(
        chain(&panicked),
        ["operation panicked", "panic in adaptx::execute: kaput"]
    );
    let held = l.try_acquire().expect("a free permit");
    let rejected = l.execute(async |_| Ok::<(), Boom>(())).await.unwrap_err();
    assert!(
        matches!(rejected, ExecuteError::Rejected(_)),
        "{rejected:?}"
    );
    assert_eq!(
        chain(&rejected),
        ["rejected by the wait queue", "wait queue is full"]
    );
    let none = l
        .try_execute(async |_| Ok::<(), Boom>(()))
        .await
        .unwrap_err();
    assert_eq!(chain(&none), ["no permit available"]);
    drop(held);

    let failed = l
        .try_execute(async |_| Err::<(), _>(Boom))
        .await
        .unwrap_err();
    assert_eq!(chain(&failed), ["operation failed", "boom"]);
    let panicked = l
        .try_execute(async |_| -> Result<(), Boom> { panic!("kaput") })
        .await
        .unwrap_err();
    assert_eq!(
        chain(&panicked),
        ["operation panicked", "panic in adaptx::try_execute: kaput"]
    );

    l.close();
    let closed = l.execute(async |_| Ok::<(), Boom>(())).await.unwrap_err();
    assert_eq!(chain(&closed), ["limiter is closed"]);
    let closed = l
        .try_execute(async |_| Ok::<(), Boom>(()))
        .await
        .unwrap_err();
    assert_eq!(chain(&closed), ["limiter is closed"]);
    assert!(closed.source().is_none());
}
