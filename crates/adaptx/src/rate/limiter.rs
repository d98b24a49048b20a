//! The [`RateLimiter`] facade.

use std::fmt;

use super::engine::{Core, Engine};
use super::{RateLimited, RateLimiterBuilder, RatePermit, RateStats};

/// An adaptive rate limiter: a token bucket whose rate a controller moves
/// from the latency and the errors of completed requests.
///
/// `RateLimiter` is a cheap handle: clones share one limiter. It is
/// `Send + Sync`, needs no runtime and runs no background task: the rate is
/// adjusted by the first admission or completion that finds the adjustment
/// interval over. [`try_acquire`](RateLimiter::try_acquire) never waits: it
/// admits with a [`RatePermit`] or rejects with a [`RateLimited`] that says
/// how long to wait. For one bucket per client, see
/// [`KeyedRateLimiter`](crate::KeyedRateLimiter).
///
/// # Algorithm
///
/// From mizu's `adaptive` middleware (`go-mizu/mizu`,
/// `middlewares/adaptive`), with its defects fixed.
///
/// **Token bucket.** The bucket holds at most `C` tokens, where `C` is the
/// configured [`burst`](RateLimiterBuilder::burst) or, by default, the
/// current rate `r` (one second of it, as in mizu). It starts full and earns
/// `r · Δt` tokens over `Δt`, counted exactly (to 1/512 token, with no
/// rounding carried from one call to the next), so traffic arriving faster
/// than `1/r` is admitted at `r`, not starved (mizu truncated each refill to
/// whole tokens and fell to almost nothing under load). Each admission
/// takes one token. A rejection reports the exact time until the bucket
/// holds one token at the current rate, `ceil((1 − tokens) / r)`, rounded
/// up to the nanosecond. The refill is capped at `C`, so any idle time,
/// even centuries, is safe.
///
/// The bucket is GCRA (the generic cell rate algorithm of ATM networks, as
/// in the `governor` crate) on a *token clock*: the limiter counts the
/// tokens minted since it was built, at the rate in force at each instant,
/// and a bucket is one word, the count at which it was last empty; an
/// admission is one compare-and-swap on it. A rate change — the
/// controller's, or [`set_rate`](RateLimiter::set_rate) — starts the clock
/// anew from where it stands, so no bucket gains or loses a token by it; a
/// lowered capacity clips the bucket, a raised one lets it refill further.
///
/// **Controller.** Requests are counted when they *complete* (their permit
/// records an outcome), so requests held by a hung backend say nothing until
/// they finish. Once per [`adjust_interval`](RateLimiterBuilder::adjust_interval)
/// (default 1 s), with `n` completions in the interval, `f` of them
/// failures, error rate `e = f / n` and mean latency `L`:
///
/// | condition | new rate |
/// |---|---|
/// | `n = 0` | unchanged |
/// | `e > error_threshold` | `floor(0.8 · r)` |
/// | else `L > target_latency` | `floor(0.9 · r)` |
/// | else `L < target_latency / 2` and `e < error_threshold / 2`, and the limit was binding | `ceil(1.1 · r)` |
/// | otherwise | unchanged |
///
/// and the result is clamped into `[min_rate, max_rate]`. The limit *was
/// binding* if a request was rejected in the interval or an admission left
/// the bucket with less than one token: without that rule (mizu's) a
/// lightly loaded limiter drifts to `max_rate`, and the first burst after
/// it floods the backend.
///
/// Rates are whole requests per second. Cuts truncate as mizu does
/// (100 → 80 or 90), growth rounds up (100 → 110, and 9 → 10: mizu's
/// truncation kept any rate below 10 stuck). Parameters and ranges:
/// rates 1 ..= 10⁹ per second, `target_latency > 0`,
/// `0 < error_threshold <= 1`, `adjust_interval` 1 ns ..= 24 h, burst
/// 1 ..= 10⁹ tokens.
///
/// # Memory after a drop
///
/// A thread that finishes a permit keeps a handle to that permit's lane, so
/// its next admission reuses it instead of counting a reference up and
/// down. A limiter dropped while permits are in flight is freed with its
/// last permit, and the dropping thread gives up its own handle at once;
/// but a handle another thread kept from before the drop holds the
/// limiter's engine (its counters and its clock, not a keyed limiter's key
/// table) until that thread finishes a permit of another rate limiter or
/// exits — at most one engine per thread. With a [`CoarseClock`](crate::CoarseClock),
/// that clock's thread runs until then too.
///
/// # Examples
///
/// ```
/// use adaptx::{ManualClock, Outcome, RateLimiter};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::builder()
///     .initial_rate(100)
///     .clock(clock.clone())
///     .build()?;
///
/// // A burst of 100 empties the bucket; the 101st request must wait 10 ms.
/// let permits: Vec<_> = (0..100).map(|_| limiter.try_acquire()).collect::<Result<_, _>>()?;
/// let limited = limiter.try_acquire().unwrap_err();
/// assert_eq!(limited.retry_after(), Duration::from_millis(10));
///
/// // Half of them fail: when the interval ends, the rate is cut by 20 %.
/// clock.advance(Duration::from_millis(50));
/// for (i, permit) in permits.into_iter().enumerate() {
///     permit.record(Outcome::from_success(i % 2 == 0));
/// }
/// clock.advance(Duration::from_secs(1));
/// let _ = limiter.try_acquire();
/// assert_eq!(limiter.current_rate(), 80);
/// assert_eq!(limiter.stats().decreases, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct RateLimiter {
    core: Engine,
}

impl fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("rate", &self.current_rate())
            .finish_non_exhaustive()
    }
}

impl RateLimiter {
    /// A builder with every option at its default.
    pub fn builder() -> RateLimiterBuilder {
        RateLimiterBuilder::new()
    }

    pub(crate) fn from_core(core: Core) -> Self {
        Self {
            core: Engine::new(core),
        }
    }

    /// Admits a request if the bucket holds a token, first adjusting the
    /// rate if the adjustment interval is over.
    ///
    /// # Errors
    ///
    /// [`RateLimited`], with the time until a token is available, if the
    /// bucket holds less than one token.
    #[inline(always)]
    pub fn try_acquire(&self) -> Result<RatePermit, RateLimited> {
        self.core.acquire(self.core.now())
    }

    /// The current rate, in requests per second.
    pub fn current_rate(&self) -> u64 {
        self.core.rate()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> RateStats {
        self.core.stats()
    }

    /// Sets the rate now, keeping the bucket's tokens: from this instant the
    /// bucket refills at `rate`. The law goes on moving the rate from there
    /// at the end of each interval. With the default capacity (one second of
    /// the rate) the capacity follows: a lower one clips the bucket when it
    /// is next used, a higher one lets it refill further; no token is added
    /// at once.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`](crate::ConfigError) naming `rate` if it is outside
    /// the law's `[min_rate, max_rate]` (or `1 ..=`
    /// [`MAX_RATE_BOUND`](crate::MAX_RATE_BOUND)), and nothing changes.
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptx::{ManualClock, RateLimiter};
    ///
    /// let limiter = RateLimiter::builder().initial_rate(100).burst(10).clock(ManualClock::new()).build()?;
    /// let _held: Vec<_> = (0..4).map(|_| limiter.try_acquire()).collect::<Result<_, _>>()?;
    /// limiter.set_rate(500)?;
    /// assert_eq!(limiter.current_rate(), 500);
    /// assert_eq!(limiter.try_acquire()?.remaining(), 5); // 6 tokens were kept
    /// assert_eq!(limiter.set_rate(5000).unwrap_err().field(), "rate");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_rate(&self, rate: u64) -> Result<(), crate::ConfigError> {
        self.core.set_rate(rate)
    }

    /// Sets the law's floor and ceiling now, checked as the builder's
    /// `min_rate` and `max_rate` are; a current rate outside them is brought
    /// inside (as by `set_rate`). What the law has learned is kept.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`](crate::ConfigError) naming `min_rate` or
    /// `max_rate`, and nothing changes.
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptx::RateLimiter;
    ///
    /// let limiter = RateLimiter::builder().initial_rate(100).build()?;
    /// limiter.set_bounds(10, 50)?;
    /// assert_eq!(limiter.current_rate(), 50);
    /// assert_eq!((limiter.stats().min_rate, limiter.stats().max_rate), (10, 50));
    /// let err = limiter.set_bounds(60, 20).unwrap_err();
    /// assert_eq!(err.field(), "max_rate");
    /// assert_eq!(limiter.stats().max_rate, 50); // unchanged
    /// # Ok::<(), adaptx::ConfigError>(())
    /// ```
    pub fn set_bounds(&self, min_rate: u64, max_rate: u64) -> Result<(), crate::ConfigError> {
        self.core.set_bounds(min_rate, max_rate)
    }

    /// Replaces the law that moves the rate, from the next interval's close
    /// on; a current rate outside its bounds is brought inside. A law of
    /// another kind starts from what it knows at the start; the interval in
    /// progress keeps its evidence.
    pub fn set_law(&self, law: crate::RateLaw) {
        self.core.set_law(law);
    }

    /// The law that moves the rate.
    pub fn law(&self) -> crate::RateLaw {
        self.core.law()
    }

    /// The admission mode (see [`Mode`](crate::Mode)).
    pub fn mode(&self) -> crate::Mode {
        self.core.mode()
    }

    /// Switches the admission mode at once; returns the mode it replaces.
    ///
    /// In [`Mode::Shadow`](crate::Mode::Shadow) and
    /// [`Mode::Bypass`](crate::Mode::Bypass) a request that finds its bucket
    /// empty is admitted anyway, counted in
    /// [`RateStats::would_reject`](crate::RateStats::would_reject) (and in
    /// `admitted`), and its permit records its outcome as any other; the
    /// bucket still gives the tokens it has. Shadow keeps adjusting the
    /// rate; bypass freezes it.
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptx::{ManualClock, Mode, RateLimiter};
    ///
    /// let limiter = RateLimiter::builder().initial_rate(10).clock(ManualClock::new()).build()?;
    /// limiter.set_mode(Mode::Shadow);
    /// for _ in 0..11 {
    ///     limiter.try_acquire()?.success();
    /// }
    /// let stats = limiter.stats();
    /// assert_eq!((stats.admitted, stats.would_reject, stats.rejected), (11, 1, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_mode(&self, mode: crate::Mode) -> crate::Mode {
        self.core.set_mode(mode)
    }
}
