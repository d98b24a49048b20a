//! Loom models of the lease pool: the driver's grant and idle take-back
//! racing the hot path's takes. Built only under `--cfg adaptx_loom`, where
//! [`crate::sync`] hands the pool loom's atomics:
//!
//! ```text
//! RUSTFLAGS="--cfg adaptx_loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p adaptx-redis --lib --release loom
//! ```
//!
//! The driver's `Notify` is modelled by `woken`, its stored permit: a take
//! that reports [`Take::wake`] sets it; the driver consumed the wake that
//! started it before the model begins.

use ::loom::sync::Arc;
use ::loom::sync::atomic::AtomicBool;
use ::loom::thread;

use super::{LeasePool, Take};
use crate::sync::Ordering;

/// Every model: at most three preemptions, the core crate's setting.
fn model<F>(f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut b = ::loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

/// The pool and the driver's pending wake.
struct World {
    pool: LeasePool,
    woken: AtomicBool,
}

impl World {
    fn new(pool: LeasePool) -> Arc<Self> {
        Arc::new(Self {
            pool,
            woken: AtomicBool::new(false),
        })
    }

    /// The hot path: a take, and the wake it asks for.
    fn take(&self) -> Take {
        let t = self.pool.take();
        if t.wake {
            self.woken.store(true, Ordering::Release);
        }
        t
    }

    /// A pending refill request always has a wake pending (the driver
    /// cannot sleep on it).
    fn assert_no_lost_wake(&self) {
        if self.pool.refill_wanted() {
            assert!(
                self.woken.load(Ordering::Acquire),
                "refill wanted, driver not woken"
            );
        }
    }

    /// A take that left the pool at or below the low-water mark (or was
    /// refused) after the driver's last clear left the request set.
    fn assert_requested(&self) {
        assert!(self.pool.refill_wanted(), "a short take left no request");
        self.assert_no_lost_wake();
    }
}

/// Runs `n` threads of `takes` takes each; returns every take's result.
fn takers(w: &Arc<World>, n: usize, takes: usize) -> Vec<thread::JoinHandle<Vec<Take>>> {
    (0..n)
        .map(|_| {
            let w = Arc::clone(w);
            thread::spawn(move || (0..takes).map(|_| w.take()).collect())
        })
        .collect()
}

fn join(hs: Vec<thread::JoinHandle<Vec<Take>>>) -> Vec<Take> {
    hs.into_iter()
        .flat_map(|h| h.join().expect("taker panicked"))
        .collect()
}

/// The admitted takes' `left` values: each a distinct token (or debt step).
fn admitted(takes: &[Take]) -> Vec<i64> {
    let mut left: Vec<i64> = takes.iter().filter_map(|t| t.left).collect();
    left.sort_unstable();
    let n = left.len();
    left.dedup();
    assert_eq!(left.len(), n, "a token admitted twice: {takes:?}");
    left
}

fn count(n: usize) -> i64 {
    i64::try_from(n).expect("small")
}

/// Two takers race the driver's grant of a two-token lease into an empty
/// pool (the driver clears the request, then grants): no token is lost or
/// admitted twice, the credit stays within one lease, the grant pays the
/// debt first, and a take that found the new lease short left a request
/// with a wake.
#[test]
fn loom_two_takers_racing_a_grant_lose_no_token_and_no_request() {
    model(|| {
        let pool = LeasePool::new();
        pool.set_lease_size(2);
        // The request that woke the driver is set; its wake was consumed.
        let w = World::new(pool);
        let hs = takers(&w, 2, 1);
        let driver = {
            let w = Arc::clone(&w);
            thread::spawn(move || {
                w.pool.begin_refill();
                w.pool.grant(2);
            })
        };
        let takes = join(hs);
        driver.join().expect("driver panicked");
        let left = admitted(&takes);
        let level = w.pool.level();
        assert_eq!(level, 2 - count(left.len()), "tokens lost: {takes:?}");
        assert!(level >= -2, "credit beyond one lease: {level}");
        // Nothing is refused: the debt is at most one lease before the grant.
        assert_eq!(left.len(), 2);
        // A take that saw the grant (left >= 0; before it, left < 0) ran
        // after the clear; at or below the low-water mark (0) it must have
        // asked again.
        if left.contains(&0) {
            w.assert_requested();
        }
        w.assert_no_lost_wake();
    });
}

/// A taker (two takes) races the driver taking back an idle lease of three
/// tokens: the take-back takes exactly the tokens it saw (a lease untouched
/// since) or nothing, no
/// token is both admitted and taken back, the credit stays within one
/// lease, and a short take leaves a request with a wake.
#[test]
fn loom_take_back_races_a_taker_without_taking_its_token() {
    model(|| {
        let pool = LeasePool::new();
        pool.set_lease_size(4);
        pool.grant(3);
        pool.begin_refill();
        let w = World::new(pool);
        let hs = takers(&w, 1, 2);
        let driver = {
            let w = Arc::clone(&w);
            thread::spawn(move || {
                let seen = w.pool.level();
                (seen, w.pool.take_back_idle(seen))
            })
        };
        let takes = join(hs);
        let (seen, back) = driver.join().expect("driver panicked");
        let left = admitted(&takes);
        assert_eq!(left.len(), 2, "nothing refused within the credit");
        let back_n = back.map_or(0, |n| i64::try_from(n).expect("small"));
        assert!(
            back.is_none() || back_n == seen,
            "took back {back:?}, saw {seen}: a lease touched since"
        );
        let level = w.pool.level();
        assert_eq!(
            level,
            3 - count(left.len()) - back_n,
            "token both admitted and taken back: {takes:?}, back {back:?}"
        );
        assert!(level >= -4, "credit beyond one lease: {level}");
        // Low water is 4 / 4 = 1: every take to 1 or below asked.
        if left.iter().any(|&l| l <= 1) {
            w.assert_requested();
        }
        w.assert_no_lost_wake();
    });
}

/// Two takers at the credit line of a two-token lease (one token of credit
/// left): exactly one is admitted, the pool never goes below minus one
/// lease, and the two short takes send exactly one wake.
#[test]
fn loom_two_takers_at_the_credit_line_overdraw_at_most_one_lease() {
    model(|| {
        let pool = LeasePool::new();
        pool.set_lease_size(2);
        assert_eq!(pool.take().left, Some(-1));
        pool.begin_refill();
        let w = World::new(pool);
        let takes = join(takers(&w, 2, 1));
        let left = admitted(&takes);
        assert_eq!(left, [-2], "one admission on the last credit: {takes:?}");
        assert_eq!(w.pool.level(), -2, "credit beyond one lease");
        assert_eq!(
            takes.iter().filter(|t| t.wake).count(),
            1,
            "one wake per request"
        );
        w.assert_requested();
    });
}
