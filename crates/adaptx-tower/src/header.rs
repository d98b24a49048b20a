//! Header values of numbers (`Retry-After`, `X-RateLimit-*`) made without
//! allocating.
//!
//! `HeaderValue::from(u64)` formats into a fresh buffer: one allocation per
//! header, three or four per rate-limited response. Here a number comes
//! from one of two places instead:
//!
//! | number | header value | cost |
//! |---|---|---|
//! | `0..=`[`TABLE_MAX`] | a slice of [`DIGITS`], a static table of every such number's digits | a bounds check; no allocation, no reference count |
//! | above, and equal to the last one this thread sent for the same [`Field`] | a clone of that value, kept in a per-thread cache | one uncontended atomic increment |
//! | above, and new to this thread for that field | formatted (`HeaderValue::from`) | one allocation for the value and one for sharing it with the cache |
//!
//! The table covers every `Retry-After` a layer sends in practice and the
//! limit and remaining tokens of rates up to 99 999/s. The cache covers what
//! is above it but changes seldom: `X-RateLimit-Reset` (Unix seconds, which
//! change once a second), the limit of a faster rate (it changes only when a
//! window closes), and the remaining tokens of a bucket that stays full.
//!
//! The table is built by the compiler (`const` evaluation, about a second)
//! and costs [`DIGITS_LEN`] = 488 890 bytes of read-only data, paged in only
//! where read.

use std::cell::RefCell;

use bytes::Bytes;
use http::HeaderValue;

/// The largest number whose header value comes from the static table.
pub(crate) const TABLE_MAX: u64 = 99_999;

/// The number of decimal digits of `n`.
const fn width(n: u64) -> usize {
    let mut w = 1;
    let mut rest = n / 10;
    while rest > 0 {
        w += 1;
        rest /= 10;
    }
    w
}

/// Where the digits of `n` (at most [`TABLE_MAX`] + 1) start in
/// [`DIGITS`]: the digits of every smaller number come first.
const fn start(n: u64) -> usize {
    let mut total = 0;
    let mut low = 0; // the first number with `w` digits
    let mut high = 10; // the first with `w + 1`
    let mut w = 1;
    while low < n {
        let top = if n < high { n } else { high };
        // Lossless: at most TABLE_MAX + 1 numbers of at most 6 digits.
        total += (top - low) as usize * w;
        low = high;
        high *= 10;
        w += 1;
    }
    total
}

/// The length of [`DIGITS`].
pub(crate) const DIGITS_LEN: usize = start(TABLE_MAX + 1);

/// The decimal digits of 0, 1, 2, ..., [`TABLE_MAX`], one after the other
/// ("012345678910111213...").
static DIGITS: [u8; DIGITS_LEN] = {
    let mut table = [0u8; DIGITS_LEN];
    let mut n = 0;
    let mut at = 0;
    while n <= TABLE_MAX {
        let w = width(n);
        let mut rest = n;
        let mut i = w;
        while i > 0 {
            i -= 1;
            table[at + i] = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        at += w;
        n += 1;
    }
    table
};

/// The header value of `n` from the static table, if `n <= TABLE_MAX`.
fn from_table(n: u64) -> Option<HeaderValue> {
    if n > TABLE_MAX {
        return None;
    }
    let at = start(n);
    let digits = &DIGITS[at..at + width(n)];
    // Digits are valid header bytes: this never fails (and if it did, the
    // caller would format the number instead).
    HeaderValue::from_maybe_shared(Bytes::from_static(digits)).ok()
}

/// Which header a number is for: the per-thread cache keeps the last value
/// above the table of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Field {
    /// `X-RateLimit-Limit`.
    Limit,
    /// `X-RateLimit-Remaining`.
    Remaining,
    /// `X-RateLimit-Reset`.
    Reset,
    /// `Retry-After`.
    RetryAfter,
}

/// How many [`Field`]s there are.
const FIELDS: usize = 4;

thread_local! {
    /// The last number above the table this thread sent for each field,
    /// with its header value.
    static RECENT: RefCell<[Option<(u64, HeaderValue)>; FIELDS]> =
        const { RefCell::new([const { None }; FIELDS]) };
}

/// The header value of `n` sent as `field`: from the static table, the
/// per-thread cache, or (a number new to this thread above the table)
/// formatted.
#[inline]
pub(crate) fn number(field: Field, n: u64) -> HeaderValue {
    match from_table(n) {
        Some(value) => value,
        None => cached(field, n),
    }
}

/// The value of `n` from the per-thread cache, formatting it on a miss.
#[cold]
fn cached(field: Field, n: u64) -> HeaderValue {
    let slot = field as usize;
    RECENT
        .try_with(|recent| {
            let mut recent = recent.borrow_mut();
            match &recent[slot] {
                Some((last, value)) if *last == n => value.clone(),
                _ => {
                    let value = HeaderValue::from(n);
                    recent[slot] = Some((n, value.clone()));
                    value
                }
            }
        })
        // The thread is being torn down: format without the cache.
        .unwrap_or_else(|_| HeaderValue::from(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_number_of_the_table_reads_as_itself() {
        for n in 0..=TABLE_MAX {
            let value = from_table(n).expect("in the table");
            assert_eq!(value.to_str().unwrap(), n.to_string(), "{n}");
        }
        assert_eq!(DIGITS_LEN, 488_890);
        assert!(from_table(TABLE_MAX + 1).is_none());
    }

    #[test]
    fn numbers_above_the_table_read_as_themselves() {
        for n in [TABLE_MAX + 1, 1_764_547_200, u64::MAX] {
            for field in [
                Field::Limit,
                Field::Remaining,
                Field::Reset,
                Field::RetryAfter,
            ] {
                assert_eq!(number(field, n).to_str().unwrap(), n.to_string());
                // A hit gives the same digits.
                assert_eq!(number(field, n).to_str().unwrap(), n.to_string());
            }
        }
    }

    #[test]
    fn cached_values_stay_per_field() {
        let big = TABLE_MAX + 7;
        assert_eq!(number(Field::Limit, big), big.to_string().as_str());
        assert_eq!(
            number(Field::Remaining, big + 1),
            (big + 1).to_string().as_str()
        );
        // Another field's number did not evict the limit's.
        assert_eq!(number(Field::Limit, big), big.to_string().as_str());
        assert_eq!(
            number(Field::Limit, big + 2),
            (big + 2).to_string().as_str()
        );
    }
}
