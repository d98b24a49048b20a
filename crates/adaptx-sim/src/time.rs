//! Durations as integer nanoseconds, written in scenario files as strings
//! such as `"50ms"` or `"1.5s"`.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// Nanoseconds in one second.
pub const SECOND: u64 = 1_000_000_000;

/// Nanoseconds in one millisecond.
pub const MILLISECOND: u64 = 1_000_000;

/// A duration in integer nanoseconds of virtual time.
///
/// In a scenario file it is a string: a non-negative decimal number and a
/// unit, one of `ns`, `us`, `ms`, `s`, `m` (minutes) or `h` — for example
/// `"50ms"`, `"1.5s"`, `"2m"`. The value is rounded to the nearest
/// nanosecond.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Nanos(pub u64);

impl Nanos {
    /// `secs` whole seconds.
    ///
    /// # Panics
    ///
    /// If `secs` seconds do not fit in `u64` nanoseconds (about 584 years):
    /// at compile time in a constant, in debug builds otherwise. Input from a
    /// file goes through [`parse_duration`], which never overflows.
    pub const fn from_secs(secs: u64) -> Self {
        Self(secs * SECOND)
    }

    /// `ms` whole milliseconds.
    ///
    /// # Panics
    ///
    /// As [`from_secs`](Nanos::from_secs), past about 584 years.
    pub const fn from_millis(ms: u64) -> Self {
        Self(ms * MILLISECOND)
    }

    /// The value in seconds.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / SECOND as f64
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        if n == 0 {
            f.write_str("0s")
        } else if n % SECOND == 0 {
            write!(f, "{}s", n / SECOND)
        } else if n % MILLISECOND == 0 {
            write!(f, "{}ms", n / MILLISECOND)
        } else if n % 1_000 == 0 {
            write!(f, "{}us", n / 1_000)
        } else {
            write!(f, "{n}ns")
        }
    }
}

/// Parses `"50ms"`, `"1.5s"`, …; see [`Nanos`].
///
/// # Errors
///
/// A message saying what was expected when `s` is not a number followed by a
/// known unit, or the value does not fit in `u64` nanoseconds.
pub fn parse_duration(s: &str) -> Result<Nanos, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale: f64 = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" => 60e9,
        "h" => 3600e9,
        _ => return Err(expected(s)),
    };
    let value: f64 = num.parse().map_err(|_| expected(s))?;
    // In f64, so that a huge number is an infinity or a large value to
    // compare, never an integer that wraps.
    let nanos = (value * scale).round();
    if !nanos.is_finite() || nanos < 0.0 || nanos >= u64::MAX as f64 {
        return Err(format!(
            "duration `{s}` is out of range: more than 2^64 ns (about {}h)",
            u64::MAX / 3_600_000_000_000
        ));
    }
    Ok(Nanos(nanos as u64))
}

fn expected(s: &str) -> String {
    format!(
        "invalid duration `{s}`: expected a non-negative number and a unit (ns, us, ms, s, m, h), like \"50ms\""
    )
}

impl<'de> Deserialize<'de> for Nanos {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Nanos;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration string such as \"50ms\" or \"1.5s\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Nanos, E> {
                parse_duration(v).map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_duration("50ms"), Ok(Nanos(50_000_000)));
        assert_eq!(parse_duration("1.5s"), Ok(Nanos(1_500_000_000)));
        assert_eq!(parse_duration("2m"), Ok(Nanos(120 * SECOND)));
        assert_eq!(parse_duration("7ns"), Ok(Nanos(7)));
        assert_eq!(parse_duration("3us"), Ok(Nanos(3_000)));
        assert!(parse_duration("50").is_err());
        assert!(parse_duration("ms").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("5 parsecs").is_err());
    }

    #[test]
    fn huge_numbers_are_out_of_range_not_wrapped() {
        let many_nines = format!("{}h", "9".repeat(400));
        for s in [
            "99999999999999h",
            "18446744073709551616ns",
            many_nines.as_str(),
        ] {
            let e = parse_duration(s).unwrap_err();
            assert!(e.contains("out of range"), "{e}");
        }
        // The largest value that fits is accepted.
        assert_eq!(
            parse_duration("18446744073709549568ns"),
            Ok(Nanos(18_446_744_073_709_549_568))
        );
    }

    #[test]
    fn displays_round_units() {
        assert_eq!(Nanos(50_000_000).to_string(), "50ms");
        assert_eq!(Nanos(3 * SECOND).to_string(), "3s");
        assert_eq!(Nanos(1_500).to_string(), "1500ns");
    }
}
