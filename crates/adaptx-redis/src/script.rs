//! The fleet's state on Redis: the Lua scripts and their typed calls.
//!
//! # Implementation details
//!
//! Every rule that touches the shared state lives in the Lua text under
//! `src/lua/`, once: `state.lua` (the clock guard, seeding, saving) is
//! prepended to `admit.lua` (GCRA leases and refunds), `report.lua`
//! (feedback, liveness, the interval claim) and `apply.lua` (the claimant's
//! new rate). Rust only packs the arguments and reads the integer replies.
//! The rate *law* is not in Lua: the claimant runs
//! [`RateLaw::next_rate`](adaptx::RateLaw::next_rate) on the interval's
//! sums, so the fleet moves by exactly the local limiter's law.
//!
//! Both keys of a limiter share the hash tag `{adaptx:<name>}`, so a
//! cluster keeps them on one shard; every key a script touches is in
//! `KEYS`. `Script` sends `EVALSHA` and falls back to `EVAL` on `NOSCRIPT`
//! (a restarted or failed-over server).

use redis::aio::ConnectionLike;
use redis::{RedisResult, Script};

/// The four arguments every script takes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Common {
    /// The rate a missing key is seeded with (tokens/s).
    pub(crate) seed_rate: u64,
    /// The bucket's burst in tokens, 0 for one second of the rate.
    pub(crate) burst: u64,
    /// The keys' TTL (ms).
    pub(crate) ttl_ms: u64,
    /// The adjustment interval (µs).
    pub(crate) interval_us: u64,
}

/// A lease reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grant {
    pub(crate) granted: u64,
    pub(crate) retry_after_us: u64,
    pub(crate) rate: u64,
    pub(crate) epoch: u64,
    pub(crate) remaining: u64,
}

/// A report reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reported {
    pub(crate) epoch: u64,
    pub(crate) rate: u64,
    pub(crate) live: u64,
    pub(crate) stale: bool,
    /// The interval this report closed, if it claimed one.
    pub(crate) claimed: Option<Claimed>,
}

/// The sums of an interval a report claimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Claimed {
    pub(crate) successes: u64,
    pub(crate) failures: u64,
    pub(crate) latency_sum_us: u64,
    pub(crate) binding: bool,
}

/// One instance's feedback since its last report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Feedback {
    pub(crate) successes: u64,
    pub(crate) failures: u64,
    pub(crate) latency_sum_us: u64,
}

/// The scripts and the keys of one limiter.
#[derive(Debug)]
pub(crate) struct FleetScripts {
    state_key: String,
    members_key: String,
    admit: Script,
    report: Script,
    apply: Script,
}

macro_rules! lua {
    ($file:literal) => {
        concat!(include_str!("lua/state.lua"), include_str!($file))
    };
}

/// The Lua text of the admit script (for tests that read it).
pub(crate) const ADMIT_LUA: &str = lua!("lua/admit.lua");
const REPORT_LUA: &str = lua!("lua/report.lua");
const APPLY_LUA: &str = lua!("lua/apply.lua");

/// Converts a Lua integer reply (never negative by construction) to u64.
fn u(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

impl FleetScripts {
    /// The scripts over the keys of limiter `name`.
    pub(crate) fn new(name: &str) -> Self {
        Self {
            state_key: format!("{{adaptx:{name}}}:s"),
            members_key: format!("{{adaptx:{name}}}:m"),
            admit: Script::new(ADMIT_LUA),
            report: Script::new(REPORT_LUA),
            apply: Script::new(APPLY_LUA),
        }
    }

    /// The hash holding the limiter's state.
    #[cfg(test)]
    pub(crate) fn state_key(&self) -> &str {
        &self.state_key
    }

    /// Returns `refund` unused tokens, then asks for `want`.
    pub(crate) async fn admit<C: ConnectionLike>(
        &self,
        conn: &mut C,
        common: Common,
        want: u64,
        refund: u64,
    ) -> RedisResult<Grant> {
        let r: (i64, i64, i64, i64, i64) = self
            .admit
            .key(&self.state_key)
            .arg(common.seed_rate)
            .arg(common.burst)
            .arg(common.ttl_ms)
            .arg(common.interval_us)
            .arg(want)
            .arg(refund)
            .invoke_async(conn)
            .await?;
        Ok(Grant {
            granted: u(r.0),
            retry_after_us: u(r.1),
            rate: u(r.2),
            epoch: u(r.3),
            remaining: u(r.4),
        })
    }

    /// Reports `feedback` gathered while the instance knew epoch `seen`.
    pub(crate) async fn report<C: ConnectionLike>(
        &self,
        conn: &mut C,
        common: Common,
        instance: &str,
        seen: u64,
        feedback: Feedback,
        live_us: u64,
    ) -> RedisResult<Reported> {
        let r: Vec<i64> = self
            .report
            .key(&self.state_key)
            .key(&self.members_key)
            .arg(common.seed_rate)
            .arg(common.burst)
            .arg(common.ttl_ms)
            .arg(common.interval_us)
            .arg(instance)
            .arg(seen)
            .arg(feedback.successes)
            .arg(feedback.failures)
            .arg(feedback.latency_sum_us)
            .arg(live_us)
            .invoke_async(conn)
            .await?;
        let at = |i: usize| u(r.get(i).copied().unwrap_or(0));
        Ok(Reported {
            epoch: at(0),
            rate: at(1),
            live: at(2),
            stale: at(3) == 1,
            claimed: (at(4) == 1).then(|| Claimed {
                successes: at(5),
                failures: at(6),
                latency_sum_us: at(7),
                binding: at(8) == 1,
            }),
        })
    }

    /// Writes `rate` if the claim that opened epoch `claim` is the latest.
    /// Returns whether it was applied, and the rate in force.
    pub(crate) async fn apply<C: ConnectionLike>(
        &self,
        conn: &mut C,
        common: Common,
        claim: u64,
        rate: u64,
    ) -> RedisResult<(bool, u64)> {
        let r: (i64, i64, i64) = self
            .apply
            .key(&self.state_key)
            .arg(common.seed_rate)
            .arg(common.burst)
            .arg(common.ttl_ms)
            .arg(common.interval_us)
            .arg(claim)
            .arg(rate)
            .invoke_async(conn)
            .await?;
        Ok((r.0 == 1, u(r.1)))
    }
}

#[cfg(test)]
#[path = "../tests/common/server.rs"]
mod test_server;

/// The scripts against a real `redis-server` of the test's own. Time is
/// the server's: the tests set the stored state (tat, now, win) around it.
#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use redis::AsyncCommands;
    use redis::aio::MultiplexedConnection;

    use super::test_server::RedisServer;

    const S: f64 = 1e6;

    fn common(seed_rate: u64) -> Common {
        Common {
            seed_rate,
            burst: 0,
            ttl_ms: 60_000,
            interval_us: 1_000_000,
        }
    }

    async fn connect(server: &RedisServer) -> MultiplexedConnection {
        let client = redis::Client::open(server.url()).unwrap();
        client.get_multiplexed_async_connection().await.unwrap()
    }

    /// The server's clock, in the scripts' µs since 2020-01-01.
    async fn server_now(c: &mut MultiplexedConnection) -> f64 {
        let (s, us): (i64, i64) = redis::cmd("TIME").query_async(c).await.unwrap();
        (s - 1_577_836_800) as f64 * S + us as f64
    }

    async fn field(c: &mut MultiplexedConnection, key: &str, f: &str) -> Option<f64> {
        let v: Option<String> = c.hget(key, f).await.unwrap();
        v.map(|s| s.parse().unwrap())
    }

    async fn set(c: &mut MultiplexedConnection, key: &str, f: &str, v: f64) {
        let _: () = c.hset(key, f, format!("{v:.0}")).await.unwrap();
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// A missing key is seeded with the caller's rate and an empty bucket:
    /// the first lease of a new (or lost) key is no burst.
    #[test]
    fn missing_key_is_seeded_empty() {
        let server = RedisServer::start();
        rt().block_on(async {
            let mut c = connect(&server).await;
            let f = FleetScripts::new("seed");
            let g = f.admit(&mut c, common(100), 50, 0).await.unwrap();
            assert_eq!((g.granted, g.rate, g.epoch), (0, 100, 0));
            // One token is due in about T = 10 ms.
            assert!((1..=10_000).contains(&g.retry_after_us), "{g:?}");
            let ttl: i64 = c.pttl(f.state_key()).await.unwrap();
            assert!((50_000..=60_000).contains(&ttl), "pttl {ttl}");
        });
    }

    /// A full bucket grants at most its depth (one second of the rate),
    /// partially; the short ask marks the interval binding, and the next
    /// ask is told the wait for one token. (At 10/s a token takes 100 ms:
    /// a loaded machine's delay between the two asks earns none.)
    #[test]
    fn lease_is_partial_at_the_bucket_depth() {
        let server = RedisServer::start();
        rt().block_on(async {
            let mut c = connect(&server).await;
            let f = FleetScripts::new("depth");
            f.admit(&mut c, common(10), 0, 0).await.unwrap();
            set(&mut c, f.state_key(), "tat", 0.0).await; // full bucket
            let g = f.admit(&mut c, common(10), 15, 0).await.unwrap();
            assert_eq!((g.granted, g.remaining), (10, 0), "{g:?}");
            assert_eq!(field(&mut c, f.state_key(), "bnd").await, Some(1.0));
            let g = f.admit(&mut c, common(10), 5, 0).await.unwrap();
            assert_eq!(g.granted, 0);
            assert!((1..=100_000).contains(&g.retry_after_us), "{g:?}");
        });
    }

    /// A refund moves the TAT back by the unused tokens, never below now:
    /// returning tokens to a full bucket mints nothing.
    #[test]
    fn refund_returns_tokens_but_never_beyond_a_full_bucket() {
        let server = RedisServer::start();
        rt().block_on(async {
            let mut c = connect(&server).await;
            let f = FleetScripts::new("refund");
            f.admit(&mut c, common(1000), 0, 0).await.unwrap();
            set(&mut c, f.state_key(), "tat", 0.0).await;
            let g = f.admit(&mut c, common(1000), 1000, 0).await.unwrap();
            assert_eq!(g.granted, 1000);
            // 400 come back: about 400 are available again.
            let g = f.admit(&mut c, common(1000), 1000, 400).await.unwrap();
            assert!((400..=420).contains(&g.granted), "{g:?}");
            // A refund into a full bucket: still one second's worth at most.
            set(&mut c, f.state_key(), "tat", 0.0).await;
            let g = f.admit(&mut c, common(1000), 5000, 5000).await.unwrap();
            assert_eq!(g.granted, 1000, "{g:?}");
        });
    }

    /// The server's clock stepping back (a failover to a host 5 s behind)
    /// does not move the key's time back: grants are charged from the last
    /// time the key saw, so nothing is minted when the clock catches up.
    #[test]
    fn clock_going_backwards_mints_nothing() {
        let server = RedisServer::start();
        rt().block_on(async {
            let mut c = connect(&server).await;
            let f = FleetScripts::new("clock");
            f.admit(&mut c, common(100), 0, 0).await.unwrap();
            let ahead = server_now(&mut c).await + 5.0 * S;
            // The key last saw `ahead`; the server now says 5 s less.
            set(&mut c, f.state_key(), "now", ahead).await;
            set(&mut c, f.state_key(), "tat", 0.0).await;
            let g = f.admit(&mut c, common(100), 100, 0).await.unwrap();
            assert_eq!(g.granted, 100);
            let now = field(&mut c, f.state_key(), "now").await.unwrap();
            let tat = field(&mut c, f.state_key(), "tat").await.unwrap();
            assert!(now >= ahead, "the key's time went back: {now} < {ahead}");
            // Charged from `ahead`: the bucket stays empty until ahead + 1 s.
            assert!(
                tat >= ahead + S,
                "tat {tat} charged from the stepped-back clock"
            );
            let g = f.admit(&mut c, common(100), 100, 0).await.unwrap();
            assert_eq!(g.granted, 0, "{g:?}");
            // A refund cannot move the TAT below the key's time either.
            let g = f.admit(&mut c, common(100), 0, 10_000).await.unwrap();
            assert_eq!(g.granted, 0);
            let tat = field(&mut c, f.state_key(), "tat").await.unwrap();
            assert!(tat >= ahead, "refund moved tat below the key's time");
        });
    }

    /// The key expiring (or lost) while an instance holds a lease: the next
    /// call re-seeds it from the caller's last known rate with an empty
    /// bucket and epoch 0, and the old lease's refund is not credited to
    /// the new bucket.
    #[test]
    fn key_expiring_mid_lease_reseeds_without_burst() {
        let server = RedisServer::start();
        rt().block_on(async {
            let mut c = connect(&server).await;
            let f = FleetScripts::new("expire");
            f.admit(&mut c, common(100), 0, 0).await.unwrap();
            set(&mut c, f.state_key(), "tat", 0.0).await;
            set(&mut c, f.state_key(), "ep", 7.0).await;
            let g = f.admit(&mut c, common(100), 50, 0).await.unwrap();
            assert_eq!(g.granted, 50);
            let _: () = c.del(f.state_key()).await.unwrap();
            // The instance hands back 50 unused tokens with its next ask; it
            // last saw rate 250.
            let g = f.admit(&mut c, common(250), 50, 50).await.unwrap();
            assert_eq!((g.granted, g.rate, g.epoch), (0, 250, 0), "{g:?}");
            // Its feedback tagged with the old epoch 7 still counts (the key
            // is newer than the instance's view).
            let r = f
                .report(
                    &mut c,
                    common(250),
                    "a",
                    7,
                    Feedback {
                        successes: 3,
                        failures: 0,
                        latency_sum_us: 30,
                    },
                    3_000_000,
                )
                .await
                .unwrap();
            assert!(!r.stale);
            assert_eq!(field(&mut c, f.state_key(), "ok").await, Some(3.0));
        });
    }

    /// Two instances report past the interval's end: exactly one claims it
    /// (the epoch moves once), and only the latest claim may write the rate.
    /// A batch two epochs old is dropped.
    #[test]
    fn epoch_claim_is_a_compare_and_set() {
        let server = RedisServer::start();
        rt().block_on(async {
            let mut c = connect(&server).await;
            let f = FleetScripts::new("claim");
            let fb = |ok, fail| Feedback {
                successes: ok,
                failures: fail,
                latency_sum_us: 1000 * (ok + fail),
            };
            let live = 3_000_000;
            let r = f
                .report(&mut c, common(100), "a", 0, fb(10, 0), live)
                .await
                .unwrap();
            assert_eq!((r.epoch, r.claimed, r.live), (0, None, 1));
            let r = f
                .report(&mut c, common(100), "b", 0, fb(5, 5), live)
                .await
                .unwrap();
            assert_eq!((r.epoch, r.claimed, r.live), (0, None, 2));
            // The interval ends.
            let now = server_now(&mut c).await;
            set(&mut c, f.state_key(), "win", now - 2.0 * S).await;
            let (mut ca, mut cb) = (c.clone(), c.clone());
            let (ra, rb) = tokio::join!(
                f.report(&mut ca, common(100), "a", 0, fb(1, 0), live),
                f.report(&mut cb, common(100), "b", 0, fb(0, 1), live)
            );
            let (ra, rb) = (ra.unwrap(), rb.unwrap());
            let claims: Vec<_> = [ra, rb].iter().filter_map(|r| r.claimed).collect();
            assert_eq!(claims.len(), 1, "{ra:?} {rb:?}");
            let claim = claims[0];
            // The claimant's sums: everything reported up to and with it;
            // the other report lands in the next interval.
            assert_eq!(claim.successes + claim.failures, 21, "{claim:?}");
            assert_eq!((ra.epoch, rb.epoch), (1, 1));
            assert_eq!(
                field(&mut c, f.state_key(), "ok").await.unwrap_or(0.0)
                    + field(&mut c, f.state_key(), "fail").await.unwrap_or(0.0),
                1.0
            );
            // A stale claimant (epoch 5 never opened) writes nothing; the
            // claimant of epoch 1 does, once.
            assert_eq!(
                f.apply(&mut c, common(100), 5, 10).await.unwrap(),
                (false, 100)
            );
            assert_eq!(
                f.apply(&mut c, common(100), 1, 80).await.unwrap(),
                (true, 80)
            );
            assert_eq!(
                f.apply(&mut c, common(100), 1, 60).await.unwrap(),
                (false, 80)
            );
            // Two more claims: epoch 3; a batch tagged epoch 1 is dropped.
            for _ in 0..2 {
                let now = server_now(&mut c).await;
                set(&mut c, f.state_key(), "win", now - 2.0 * S).await;
                f.report(&mut c, common(100), "a", 9, fb(0, 0), live)
                    .await
                    .unwrap();
            }
            let r = f
                .report(&mut c, common(100), "b", 1, fb(50, 0), live)
                .await
                .unwrap();
            assert_eq!((r.epoch, r.stale), (3, true));
            assert_eq!(field(&mut c, f.state_key(), "ok").await, None);
        });
    }

    /// `EVALSHA` after `SCRIPT FLUSH` (a restarted server) falls back to
    /// `EVAL`, and both keys carry a TTL.
    #[test]
    fn noscript_and_ttls() {
        let server = RedisServer::start();
        rt().block_on(async {
            let mut c = connect(&server).await;
            let f = FleetScripts::new("flush");
            f.report(&mut c, common(100), "a", 0, Feedback::default(), 1_000_000)
                .await
                .unwrap();
            let _: () = redis::cmd("SCRIPT")
                .arg("FLUSH")
                .query_async(&mut c)
                .await
                .unwrap();
            let g = f.admit(&mut c, common(100), 1, 0).await.unwrap();
            assert_eq!(g.rate, 100);
            for key in [f.state_key(), f.members_key.as_str()] {
                let ttl: i64 = c.pttl(key).await.unwrap();
                assert!(ttl > 0, "{key} has no TTL");
            }
        });
    }
}
