//! How a limiter treats admission: enforce its limit, shadow it, or bypass
//! it. One type for every limiter ([`Limiter`](crate::Limiter),
//! [`RateLimiter`](crate::RateLimiter),
//! [`KeyedRateLimiter`](crate::KeyedRateLimiter)), switchable at run time.

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};

/// What a limiter does with a request its limit would refuse.
///
/// Switch it at run time with `set_mode` on any limiter; the tower layers
/// follow the limiter they wrap. A closed limiter refuses in every mode.
///
/// | mode | refuses over the limit | the law moves the limit | measured (stats, latency) |
/// |---|---|---|---|
/// | [`Enforce`](Mode::Enforce) | yes | yes | yes |
/// | [`Shadow`](Mode::Shadow) | no: admitted, counted as `would_reject` | yes | yes |
/// | [`Bypass`](Mode::Bypass) | no: admitted, counted as `would_reject` | no: the limit is frozen | yes |
///
/// **Shadow** is how a limiter is rolled out: it runs in front of real
/// traffic, learns its limit and reports what it would have refused, while
/// refusing nothing. **Bypass** is the kill switch: everything is admitted
/// and the limit stays where it was, so switching back to `Enforce` resumes
/// from the limit in force before the switch; outcomes and latencies are
/// still recorded.
///
/// # Examples
///
/// ```
/// use adaptx::{Limiter, Mode};
///
/// let limiter = Limiter::builder().initial_limit(1).build()?;
/// limiter.set_mode(Mode::Shadow);
/// let a = limiter.try_acquire()?;
/// let b = limiter.try_acquire()?; // over the limit: admitted anyway
/// assert_eq!(limiter.stats().would_reject, 1);
/// assert_eq!(limiter.stats().rejected, 0);
/// # drop((a, b));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
#[non_exhaustive]
pub enum Mode {
    /// Refuse what the limit refuses (the default).
    #[default]
    Enforce,
    /// Admit everything; the law still runs and moves the limit, and each
    /// admission the limit would have refused is counted.
    Shadow,
    /// Admit everything; the limit is frozen (the law does not run), and
    /// outcomes, latencies and admissions over the limit are still counted.
    Bypass,
}

impl Mode {
    fn code(self) -> u8 {
        match self {
            Mode::Enforce => 0,
            Mode::Shadow => 1,
            Mode::Bypass => 2,
        }
    }

    fn from_code(c: u8) -> Self {
        match c {
            1 => Mode::Shadow,
            2 => Mode::Bypass,
            _ => Mode::Enforce,
        }
    }

    /// Whether requests over the limit are admitted.
    pub(crate) fn admits_over_limit(self) -> bool {
        self != Mode::Enforce
    }

    /// Whether the control law runs.
    pub(crate) fn adapts(self) -> bool {
        self != Mode::Bypass
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Enforce => "enforce",
            Mode::Shadow => "shadow",
            Mode::Bypass => "bypass",
        })
    }
}

/// A [`Mode`] that can be switched while the limiter runs: one byte, read
/// with a relaxed load only off the fast paths (a refusal, a window close).
#[derive(Debug, Default)]
pub(crate) struct ModeCell(AtomicU8);

impl ModeCell {
    pub(crate) fn get(&self) -> Mode {
        Mode::from_code(self.0.load(Ordering::Relaxed))
    }

    /// Stores `mode`; returns the one it replaces.
    pub(crate) fn set(&self, mode: Mode) -> Mode {
        Mode::from_code(self.0.swap(mode.code(), Ordering::Relaxed))
    }
}

#[cfg(all(test, not(adaptx_loom)))]
mod tests {
    use super::*;

    #[test]
    fn mode_cell_round_trips_every_mode() {
        let c = ModeCell::default();
        assert_eq!(c.get(), Mode::Enforce);
        for m in [Mode::Shadow, Mode::Bypass, Mode::Enforce] {
            let before = c.get();
            assert_eq!(c.set(m), before);
            assert_eq!(c.get(), m);
        }
        assert_eq!(Mode::Shadow.to_string(), "shadow");
    }
}
