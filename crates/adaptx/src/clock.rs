//! Time sources. Every component of the limiter reads time through a
//! [`Clock`], so tests can drive windows with a [`ManualClock`].

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
#[cfg(all(not(feature = "quanta"), not(unix)))]
use std::time::Instant;

/// A monotonic time source.
///
/// `now` returns the time elapsed since an arbitrary, fixed origin chosen by
/// the clock. It must never go backwards. The limiter reads it once at
/// admission and once at completion to measure latency, and compares it with
/// the start of the sample window.
///
/// # Examples
///
/// A clock of your own, here one that a test moves by hand (what
/// [`ManualClock`] already is):
///
/// ```
/// use adaptx::{Clock, Limiter};
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
///
/// #[derive(Debug, Clone, Default)]
/// struct Stepped(Arc<Mutex<Duration>>);
///
/// impl Clock for Stepped {
///     fn now(&self) -> Duration {
///         *self.0.lock().unwrap()
///     }
/// }
///
/// let clock = Stepped::default();
/// let limiter = Limiter::builder().clock(clock.clone()).build()?;
/// let permit = limiter.try_acquire()?;
/// *clock.0.lock().unwrap() += Duration::from_millis(30);
/// assert_eq!(permit.elapsed(), Duration::from_millis(30));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// Time since the clock's origin.
    fn now(&self) -> Duration;
}

/// The system's monotonic clock; the default.
///
/// With the `quanta` feature (on by default) it reads the CPU's invariant
/// time-stamp counter through [`quanta`](https://docs.rs/quanta), scaled to
/// nanoseconds by one multiplication — two thirds of the cost of
/// `clock_gettime` on x86-64 Linux (21 ns against 31 on the benchmark VM);
/// it is read once per admission and once per completion on the hot path. The counter is calibrated against the
/// OS clock once per process, when the first `SystemClock` is made (some
/// milliseconds). Where the CPU has no such counter, quanta reads the OS's
/// monotonic clock.
///
/// Without the feature, on Unix it reads `CLOCK_MONOTONIC` directly
/// (through `rustix`, which uses the vDSO on Linux): the same clock as
/// [`Instant`](std::time::Instant), without the subtraction and
/// normalization that turning an `Instant` into a number costs. Elsewhere
/// it measures from an [`Instant`](std::time::Instant) taken at
/// construction.
///
/// # Examples
///
/// ```
/// use adaptx::{Clock, SystemClock};
///
/// let clock = SystemClock::new();
/// let (a, b) = (clock.now(), clock.now());
/// assert!(b >= a); // monotonic
/// ```
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    #[cfg(feature = "quanta")]
    counter: &'static quanta::Clock,
    #[cfg(all(not(feature = "quanta"), not(unix)))]
    origin: Instant,
}

/// The process's calibrated counter clock.
#[cfg(feature = "quanta")]
static COUNTER: std::sync::OnceLock<quanta::Clock> = std::sync::OnceLock::new();

impl SystemClock {
    /// A system clock.
    pub fn new() -> Self {
        Self {
            #[cfg(feature = "quanta")]
            counter: COUNTER.get_or_init(quanta::Clock::new),
            #[cfg(all(not(feature = "quanta"), not(unix)))]
            origin: Instant::now(),
        }
    }

    /// Nanoseconds since the clock's origin (the counter's zero, or boot).
    #[inline]
    pub(crate) fn nanos(&self) -> u64 {
        #[cfg(feature = "quanta")]
        {
            self.counter.delta_as_nanos(0, self.counter.raw())
        }
        #[cfg(all(not(feature = "quanta"), unix))]
        {
            let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
            // A monotonic reading is never negative.
            (ts.tv_sec as u64)
                .saturating_mul(1_000_000_000)
                .saturating_add(ts.tv_nsec as u64)
        }
        #[cfg(all(not(feature = "quanta"), not(unix)))]
        {
            duration_nanos(self.origin.elapsed())
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos())
    }
}

/// `d` in nanoseconds, saturating (u64 nanoseconds last 584 years).
#[inline]
pub(crate) fn duration_nanos(d: Duration) -> u64 {
    d.as_secs()
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::from(d.subsec_nanos()))
}

/// [`MAX_SAMPLE_LATENCY`](crate::MAX_SAMPLE_LATENCY) in nanoseconds.
pub(crate) const MAX_SAMPLE_NANOS: u64 = 1 << 44;
const _: () = assert!(crate::MAX_SAMPLE_LATENCY.as_nanos() == MAX_SAMPLE_NANOS as u128);

/// A latency sample in nanoseconds, clamped to
/// [`MAX_SAMPLE_LATENCY`](crate::MAX_SAMPLE_LATENCY) so that a window's or an
/// interval's latency sum cannot wrap: every permit records through this.
#[inline]
pub(crate) fn sample_nanos(nanos: u64) -> u64 {
    nanos.min(MAX_SAMPLE_NANOS)
}

/// A clock that moves only when told to: for deterministic tests and
/// simulations.
///
/// Clones share the same time.
///
/// # Examples
///
/// ```
/// use adaptx::{Clock, ManualClock};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let view = clock.clone();
/// clock.advance(Duration::from_millis(5));
/// assert_eq!(view.now(), Duration::from_millis(5));
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A manual clock at time zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock forward by `by` (saturating at `u64::MAX` nanoseconds).
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        let mut cur = self.nanos.load(Ordering::Acquire);
        loop {
            match self.nanos.compare_exchange_weak(
                cur,
                cur.saturating_add(by),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Sets the clock to `to`. A value earlier than the current time is
    /// ignored, so the clock stays monotonic.
    pub fn set(&self, to: Duration) {
        let to = u64::try_from(to.as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_max(to, Ordering::AcqRel);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::Acquire))
    }
}

/// Tokio's clock ([`tokio::time::Instant`]), which follows paused and advanced
/// time in tests (`#[tokio::test(start_paused = true)]`).
///
/// # Examples
///
/// ```
/// use adaptx::{Limiter, TokioClock};
/// use std::time::Duration;
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap().block_on(async {
/// let limiter = Limiter::builder().clock(TokioClock::new()).build()?;
/// let permit = limiter.try_acquire()?;
/// tokio::time::sleep(Duration::from_millis(40)).await; // paused time: instant
/// assert_eq!(permit.elapsed(), Duration::from_millis(40));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[cfg(feature = "tokio")]
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    origin: tokio::time::Instant,
}

#[cfg(feature = "tokio")]
impl TokioClock {
    /// A tokio clock whose origin is now.
    pub fn new() -> Self {
        Self {
            origin: tokio::time::Instant::now(),
        }
    }
}

#[cfg(feature = "tokio")]
impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "tokio")]
impl Clock for TokioClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// The shortest [`CoarseClock`] resolution: 10 µs.
pub const MIN_COARSE_RESOLUTION: Duration = Duration::from_micros(10);

/// The longest [`CoarseClock`] resolution: 100 ms.
pub const MAX_COARSE_RESOLUTION: Duration = Duration::from_millis(100);

/// A clock read with one atomic load: a background thread stores the
/// [`SystemClock`]'s time every `resolution`, and `now` returns the last
/// stored value (the idea of quanta's `Clock::recent` and of governor's
/// `QuantaUpkeepClock`, without their process-wide state: each `CoarseClock`
/// has its own thread, which ends when the last clone is dropped).
///
/// Reading the system clock is most of what an admission and a completion
/// cost (it is read once at each, to measure latency); this one costs about
/// as much as reading a shared variable. In exchange:
///
/// - **Resolution.** The time moves in steps of about `resolution` (the
///   thread sleeps that long between stores; the OS may wake it later, so a
///   step can be longer under load). A latency is the difference of two
///   readings, so a single one is off by up to one step either way, but the
///   error averages out: a request that starts at a uniformly random point
///   of a step measures, on average, exactly its latency, and the laws use
///   window means. Choose a resolution well below the latencies you limit on
///   (the default window is 1 s; a 1 ms backend wants 100 µs or less).
/// - **Lag.** A reading is at most one step (plus the thread's scheduling
///   delay) behind the system clock, and it never goes backwards. Its
///   thread reads the counter on its own CPU: where two CPUs' counters
///   disagree, it can read ahead of a [`SystemClock`] read just after on
///   another CPU by that skew (a hardware matter, far below a step).
/// - **A thread** per clock (and its clones), named `adaptx-coarse-clock`,
///   asleep between stores. Share one clock between limiters by cloning it.
///   A limiter holds a clone; a dropped rate limiter may be held a while
///   longer by another thread (see [`RateLimiter`](crate::RateLimiter)'s
///   "Memory after a drop"), and its clock with it.
///
/// A limiter built with a `CoarseClock` reads it without dynamic dispatch, as
/// it reads the [`SystemClock`].
///
/// # Examples
///
/// ```
/// use adaptx::{CoarseClock, RateLimiter};
/// use std::time::Duration;
///
/// let clock = CoarseClock::new(Duration::from_micros(100))?;
/// let limiter = RateLimiter::builder().clock(clock.clone()).build()?;
/// limiter.try_acquire()?.success();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct CoarseClock {
    shared: Arc<CoarseShared>,
}

/// What a [`CoarseClock`]'s handles share with its thread, which holds only a
/// weak reference: dropping the last handle ends the thread.
#[derive(Debug)]
struct CoarseShared {
    nanos: AtomicU64,
    resolution: Duration,
}

/// Coarse clock threads alive in this process (for the tests that they end).
#[cfg(test)]
static COARSE_THREADS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl CoarseClock {
    /// A coarse clock that steps about every `resolution`, and its thread.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`](crate::ConfigError) naming `resolution` when it is
    /// outside [`MIN_COARSE_RESOLUTION`] ..= [`MAX_COARSE_RESOLUTION`], or
    /// naming the thread when the OS refuses to start it.
    pub fn new(resolution: Duration) -> Result<Self, crate::ConfigError> {
        if !(MIN_COARSE_RESOLUTION..=MAX_COARSE_RESOLUTION).contains(&resolution) {
            return Err(crate::ConfigError::new(
                "resolution",
                resolution,
                "10µs ..= 100ms",
            ));
        }
        let source = SystemClock::new();
        let shared = Arc::new(CoarseShared {
            nanos: AtomicU64::new(source.nanos()),
            resolution,
        });
        let weak = Arc::downgrade(&shared);
        #[cfg(test)]
        COARSE_THREADS.fetch_add(1, Ordering::SeqCst);
        let spawned = std::thread::Builder::new()
            .name("adaptx-coarse-clock".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(resolution);
                    let Some(shared) = weak.upgrade() else { break };
                    // One writer storing a monotonic source: never backwards.
                    shared.nanos.store(source.nanos(), Ordering::Release);
                }
                #[cfg(test)]
                COARSE_THREADS.fetch_sub(1, Ordering::SeqCst);
            });
        if let Err(e) = spawned {
            #[cfg(test)]
            COARSE_THREADS.fetch_sub(1, Ordering::SeqCst);
            return Err(crate::ConfigError::new(
                "coarse clock thread",
                e,
                "a thread the OS can start",
            ));
        }
        Ok(Self { shared })
    }

    /// The resolution it was made with.
    pub fn resolution(&self) -> Duration {
        self.shared.resolution
    }

    /// Nanoseconds since the system clock's origin, as of the last step.
    #[inline]
    pub(crate) fn nanos(&self) -> u64 {
        self.shared.nanos.load(Ordering::Acquire)
    }
}

impl Clock for CoarseClock {
    #[inline]
    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos())
    }
}

/// The clock a limiter holds: the system and coarse clocks are called
/// directly so the hot path pays no dynamic dispatch; any other clock goes
/// through the trait.
#[derive(Debug, Clone)]
pub(crate) enum AnyClock {
    System(SystemClock),
    Coarse(CoarseClock),
    Custom(Arc<dyn Clock>),
}

impl AnyClock {
    /// The clock a builder was given, or the system clock.
    pub(crate) fn or_system(clock: Option<AnyClock>) -> Self {
        clock.unwrap_or_else(|| AnyClock::System(SystemClock::new()))
    }

    /// Nanoseconds since the clock's origin, saturating.
    #[inline]
    pub(crate) fn now_nanos(&self) -> u64 {
        match self {
            AnyClock::System(c) => c.nanos(),
            AnyClock::Coarse(c) => c.nanos(),
            AnyClock::Custom(c) => duration_nanos(c.now()),
        }
    }
}

impl<C: Clock> From<C> for AnyClock {
    /// The clock in the variant that reads it fastest.
    fn from(clock: C) -> Self {
        let any: &dyn std::any::Any = &clock;
        if let Some(c) = any.downcast_ref::<SystemClock>() {
            AnyClock::System(*c)
        } else if let Some(c) = any.downcast_ref::<CoarseClock>() {
            AnyClock::Coarse(c.clone())
        } else {
            AnyClock::Custom(Arc::new(clock))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_and_coarse_clocks_are_read_without_dynamic_dispatch() {
        let coarse = CoarseClock::new(MAX_COARSE_RESOLUTION).unwrap();
        assert!(matches!(
            AnyClock::from(coarse.clone()),
            AnyClock::Coarse(_)
        ));
        assert!(matches!(
            AnyClock::from(SystemClock::new()),
            AnyClock::System(_)
        ));
        assert!(matches!(
            AnyClock::from(ManualClock::new()),
            AnyClock::Custom(_)
        ));
        // Through the variant, the same time as through the trait (within
        // the one step the thread may take between the two readings).
        let through_any = Duration::from_nanos(AnyClock::from(coarse.clone()).now_nanos());
        let through_trait = coarse.now();
        assert!(through_any <= through_trait);
        assert!(through_trait - through_any <= 2 * MAX_COARSE_RESOLUTION);
    }

    #[test]
    fn coarse_clock_refuses_a_resolution_out_of_range() {
        for bad in [
            Duration::ZERO,
            Duration::from_micros(9),
            Duration::from_millis(101),
        ] {
            let e = CoarseClock::new(bad).unwrap_err().to_string();
            assert!(
                e.contains("resolution") && e.contains("10µs ..= 100ms"),
                "{e}"
            );
        }
    }

    /// The most two CPUs' counters may disagree by in the tests.
    const CPU_SKEW_NANOS: u64 = 50_000;

    #[test]
    fn coarse_clock_steps_forward_and_never_back() {
        let clock = CoarseClock::new(Duration::from_micros(200)).unwrap();
        let system = SystemClock::new();
        let first = clock.nanos();
        let mut last = first;
        let started = system.nanos();
        // Until it has stepped a few times (bounded, not a fixed sleep).
        while clock.nanos() < first + 2_000_000 {
            let now = clock.nanos();
            assert!(now >= last, "went back from {last} to {now}");
            // Never ahead of the clock it copies, but for the skew between
            // two CPUs' counters (its thread reads the counter on another
            // CPU: asserted exactly, this test failed in two runs of six
            // on a 2-core machine), far less than a step.
            let sys = system.nanos();
            assert!(
                now <= sys + CPU_SKEW_NANOS,
                "ahead of the system clock by {} ns",
                now - sys
            );
            last = now;
            assert!(
                system.nanos() - started < 10_000_000_000,
                "the coarse clock did not move in 10 s"
            );
            std::thread::yield_now();
        }
    }

    #[test]
    fn coarse_clock_thread_ends_with_the_last_clone() {
        let clock = CoarseClock::new(Duration::from_micros(50)).unwrap();
        let other = clock.clone();
        let system = SystemClock::new();
        drop(clock);
        // A clone keeps it running: the clone's time still moves.
        let t = other.nanos();
        while other.nanos() == t {
            std::thread::yield_now();
        }
        drop(other);
        // The thread holds only a weak reference: it notices within a step.
        let started = system.nanos();
        while COARSE_THREADS.load(Ordering::SeqCst) > 0 {
            assert!(
                system.nanos() - started < 10_000_000_000,
                "a coarse clock thread outlived its clocks"
            );
            std::thread::yield_now();
        }
    }
}
