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

/// The clock a limiter holds: the system clock is called directly so the hot
/// path pays no dynamic dispatch; any other clock goes through the trait.
#[derive(Debug, Clone)]
pub(crate) enum AnyClock {
    System(SystemClock),
    Custom(Arc<dyn Clock>),
}

impl AnyClock {
    /// Nanoseconds since the clock's origin, saturating.
    #[inline]
    pub(crate) fn now_nanos(&self) -> u64 {
        match self {
            AnyClock::System(c) => c.nanos(),
            AnyClock::Custom(c) => duration_nanos(c.now()),
        }
    }
}
