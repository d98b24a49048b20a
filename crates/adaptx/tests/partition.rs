//! Partitions: shares guaranteed under contention, idle shares borrowed, a
//! best-effort partition held to zero under overload, released permits
//! handed to the partition the rule admits, and the errors. Vectors from
//! `spec/peer-algorithms.md` §7 (L = 10, batch 0.3, live 0.7).

use std::time::Duration;

use adaptx::{Class, Limiter, Partitions, QueuePolicy, TokioClock, UnknownPartition};
use tokio::time::sleep;

fn limiter(limit: usize, parts: Partitions) -> Limiter {
    Limiter::builder()
        .initial_limit(limit)
        .min_limit(limit)
        .max_limit(limit)
        .clock(TokioClock::new())
        .partitions(parts)
        .build()
        .expect("valid configuration")
}

fn batch_live(rho: f64) -> (Limiter, Class, Class) {
    let l = limiter(
        10,
        Partitions::new()
            .share("batch", 0.3)
            .share("live", 0.7)
            .reserve(rho),
    );
    let (b, v) = (
        l.class("batch").expect("must succeed"),
        l.class("live").expect("must succeed"),
    );
    (l, b, v)
}

/// Takes permits of `class` until refused; returns them.
fn fill(l: &Limiter, class: Class) -> Vec<adaptx::Permit<'_>> {
    std::iter::from_fn(|| l.try_acquire_as(class).ok()).collect()
}

#[test]
fn partition_shares_are_guaranteed_when_contended() {
    // ρ = 1: hard isolation, 3 and 7.
    let (l, batch, live) = batch_live(1.0);
    let b = fill(&l, batch);
    let v = fill(&l, live);
    assert_eq!((b.len(), v.len()), (3, 7));
    // ρ = 0.5, batch first: it borrows up to 6, live still gets its 4.
    let (l, batch, live) = batch_live(0.5);
    let b = fill(&l, batch);
    let v = fill(&l, live);
    assert_eq!((b.len(), v.len()), (6, 4));
    assert_eq!((l.in_flight_of(batch), l.in_flight_of(live)), (6, 4));
}

#[test]
fn partition_idle_share_is_borrowed() {
    // ρ = 0: batch alone takes the whole limit.
    let (l, batch, live) = batch_live(0.0);
    assert_eq!(fill(&l, batch).len(), 10);
    assert_eq!(l.in_flight_of(live), 0);
    // ρ = 0.5: live alone takes everything but batch's reservation (1).
    let (l, _, live) = batch_live(0.5);
    assert_eq!(fill(&l, live).len(), 9);
}

#[test]
fn partition_best_effort_is_held_to_zero_under_overload() {
    // "default" has no share: best effort.
    let l = limiter(
        10,
        Partitions::new()
            .share("critical", 0.7)
            .share("batch", 0.3)
            .reserve(0.5),
    );
    let critical = l.class("critical").expect("must succeed");
    let best = Class::default();
    let c = fill(&l, critical);
    assert_eq!(c.len(), 9, "critical borrows all but batch's reservation");
    assert!(l.try_acquire_as(best).is_err());
    assert!(
        l.try_acquire().is_err(),
        "an unclassed request is best effort"
    );
    drop(c);
    // Idle, the best-effort partition may use what is not reserved.
    assert_eq!(fill(&l, best).len(), 5);
}

#[test]
fn partition_release_returns_the_permit_to_its_partition() {
    let (l, batch, live) = batch_live(1.0);
    let mut b = fill(&l, batch);
    b.pop().expect("must succeed").success();
    assert_eq!(l.in_flight_of(batch), 2);
    assert_eq!(l.in_flight(), 2);
    assert!(l.try_acquire_as(batch).is_ok());
    let owned = l.try_acquire_owned_as(live).expect("must succeed");
    drop(owned);
    assert_eq!(l.in_flight_of(live), 0);
}

#[tokio::test(start_paused = true)]
async fn partition_queue_hands_a_release_to_the_partition_the_rule_admits() {
    // ρ = 1, limit 10: batch 3, live 7. Batch is full and queued; a live
    // waiter queues behind it once live is full too. A batch release goes
    // to the batch waiter, a live release to the live waiter: a full
    // partition at the head never blocks the other (no head-of-line).
    let l = Limiter::builder()
        .initial_limit(10)
        .min_limit(10)
        .max_limit(10)
        .clock(TokioClock::new())
        .partitions(
            Partitions::new()
                .share("batch", 0.3)
                .share("live", 0.7)
                .reserve(1.0),
        )
        .queue(QueuePolicy::new())
        .build()
        .expect("must succeed");
    let (batch, live) = (
        l.class("batch").expect("must succeed"),
        l.class("live").expect("must succeed"),
    );
    let mut b: Vec<_> = (0..3)
        .map(|_| l.try_acquire_owned_as(batch).expect("must succeed"))
        .collect();
    let mut v: Vec<_> = (0..7)
        .map(|_| l.try_acquire_owned_as(live).expect("must succeed"))
        .collect();
    let bw = tokio::spawn({
        let l = l.clone();
        async move { l.acquire_owned_as(batch).await }
    });
    sleep(Duration::from_millis(1)).await;
    let vw = tokio::spawn({
        let l = l.clone();
        async move { l.acquire_owned_as(live).await }
    });
    sleep(Duration::from_millis(1)).await;
    assert_eq!(l.waiting(), 2);
    drop(v.pop());
    let got = vw
        .await
        .expect("must succeed")
        .expect("live waiter granted");
    assert_eq!(l.in_flight_of(live), 7);
    assert_eq!(l.waiting(), 1, "the batch waiter still waits");
    drop(b.pop());
    let got_b = bw
        .await
        .expect("must succeed")
        .expect("batch waiter granted");
    assert_eq!((l.in_flight_of(batch), l.in_flight()), (3, 10));
    drop((got, got_b, b, v));
    assert_eq!(l.in_flight(), 0);
}

#[test]
fn partition_unknown_name_at_admission_is_an_error() {
    let (l, _, _) = batch_live(0.5);
    let e: UnknownPartition = l.class("prefetch").expect_err("must fail");
    assert_eq!(e.name(), "prefetch");
    assert_eq!(
        e.to_string(),
        "unknown partition \"prefetch\" (known: default, batch, live)"
    );
    // Without partitions only "default" exists.
    let plain = Limiter::new();
    assert!(plain.class("default").is_ok());
    assert_eq!(
        plain.class("batch").expect_err("must fail").to_string(),
        "unknown partition \"batch\" (known: default)"
    );
}

#[test]
fn partition_shares_above_100_percent_are_a_build_error() {
    let e = Limiter::builder()
        .partitions(Partitions::new().share("a", 0.7).share("b", 0.5))
        .build()
        .expect_err("must fail");
    assert_eq!(e.field(), "partitions");
    assert_eq!(
        e.to_string(),
        "invalid partitions: shares summing to 120.0 % (allowed: shares summing to at most 100 %)"
    );
    let e = Limiter::builder()
        .max_limit(100_000)
        .partitions(Partitions::new().share("a", 0.5))
        .build()
        .expect_err("must fail");
    assert_eq!(e.field(), "max_limit");
}

#[test]
fn partition_limit_changes_recompute_the_reservations() {
    // The limit moves through the law: a failure halves 10 → 5 (AIMD).
    let clock = adaptx::ManualClock::new();
    let l = Limiter::builder()
        .algorithm(adaptx::Algorithm::Aimd)
        .initial_limit(10)
        .warmup_samples(0)
        .jitter(0.0)
        .clock(clock.clone())
        .partitions(
            Partitions::new()
                .share("batch", 0.3)
                .share("live", 0.7)
                .reserve(1.0),
        )
        .build()
        .expect("must succeed");
    let (batch, live) = (
        l.class("batch").expect("must succeed"),
        l.class("live").expect("must succeed"),
    );
    let p = l.try_acquire_as(live).expect("must succeed");
    clock.advance(Duration::from_secs(1));
    p.failure();
    assert_eq!(l.limit(), 5);
    // R at 5: batch 1.5, live 3.5 → (1, 4) by largest remainder, tie to live.
    assert_eq!(fill(&l, batch).len(), 1);
    assert_eq!(fill(&l, live).len(), 4);
}
