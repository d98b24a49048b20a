//! The keyed rate limiter against keys an attacker chooses (issue 13): the
//! table's memory is bounded in bytes whatever the keys' size, a flood of
//! spoofed keys takes no slot, grows no memory, is admitted at most what the
//! newcomer buckets allow and leaves the clients that use their buckets
//! alone; new clients get in during and after a flood; keys sent twice or
//! more buy no burst.
//!
//! Deterministic: a manual clock moved by the test, keys from a seeded
//! splitmix64. The limiter's hash key is random per run, so every assertion
//! is one that holds whatever the hash (or fails with a probability stated
//! where it is not zero).
//!
//! Memory is measured by a counting global allocator: net bytes and
//! allocations per thread (a const-initialized thread-local), so the other
//! tests of this binary, on other threads, do not disturb a count.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt::Write as _;
use std::time::Duration;

mod common;

use common::SplitMix;

use adaptx::{KeyedRateLimiter, MAX_BYTES_PER_KEY, ManualClock, RateLimiter, RateLimiterBuilder};

thread_local! {
    /// Bytes allocated minus bytes freed by this thread.
    static NET: Cell<i64> = const { Cell::new(0) };
    /// Allocations (`alloc`, `alloc_zeroed`, `realloc`) by this thread.
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn note(bytes: i64, alloc: bool) {
    // `try_with`: the allocator also runs while thread-locals are torn down.
    let _ = NET.try_with(|n| n.set(n.get() + bytes));
    if alloc {
        let _ = ALLOCS.try_with(|a| a.set(a.get() + 1));
    }
}

fn signed(n: usize) -> i64 {
    i64::try_from(n).expect("an allocation fits in i64")
}

struct Counting;

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged; the bookkeeping touches only thread-local cells.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(signed(layout.size()), true);
        // SAFETY: forwarded as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(signed(layout.size()), true);
        // SAFETY: forwarded as is.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(-signed(layout.size()), false);
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(signed(new_size) - signed(layout.size()), true);
        // SAFETY: forwarded as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Net bytes and allocations of this thread so far.
fn heap() -> (i64, u64) {
    (NET.with(Cell::get), ALLOCS.with(Cell::get))
}

const US: Duration = Duration::from_micros(1);
const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);
/// An adjustment interval longer than any test: the rate holds still.
const NEVER: Duration = Duration::from_secs(3600);
/// The per-key rate (and burst: one second of it) of every test here.
const RATE: u64 = 100;

/// Writes a fresh spoofed API key (32 hex digits) into `buf`, which holds
/// its capacity: no allocation.
fn spoof(rng: &mut SplitMix, buf: &mut String) {
    buf.clear();
    write!(buf, "{:016x}{:016x}", rng.next(), rng.next()).expect("writing to a String");
}

fn builder(clock: &ManualClock) -> RateLimiterBuilder {
    RateLimiter::builder()
        .initial_rate(RATE)
        .adjust_interval(NEVER)
        .clock(clock.clone())
}

/// Legitimate clients, each sending at a fixed rate from its start time.
struct Clients {
    keys: Vec<String>,
    /// (next request time, client), earliest first.
    due: BinaryHeap<Reverse<(Duration, usize)>>,
    gap: Duration,
    sent: u64,
    refused: Vec<(Duration, String)>,
}

impl Clients {
    fn new(prefix: &str, n: usize, start: Duration, stagger: Duration, per_sec: u32) -> Self {
        let mut due = BinaryHeap::with_capacity(n);
        for i in 0..n {
            due.push(Reverse((
                start + stagger * u32::try_from(i).expect("few"),
                i,
            )));
        }
        Self {
            keys: (0..n).map(|i| format!("{prefix}-{i:04}")).collect(),
            due,
            gap: SEC / per_sec,
            sent: 0,
            refused: Vec::new(),
        }
    }

    /// Sends every request due by `now`, in time order, each at its time.
    fn run_until(&mut self, l: &KeyedRateLimiter<String>, clock: &ManualClock, now: Duration) {
        while let Some(mut next) = self.due.peek_mut() {
            let Reverse((at, i)) = *next;
            if at > now {
                break;
            }
            clock.set(at);
            self.sent += 1;
            if l.try_acquire(self.keys[i].as_str()).is_err() {
                self.refused.push((at, self.keys[i].clone()));
            }
            *next = Reverse((at + self.gap, i));
        }
        clock.set(now);
    }
}

/// The attacker: one spoofed key per request, `gap` apart, `requests`
/// requests, each key sent `repeat` times in a row (written into `key`);
/// the clients' requests interleaved at their own times. Returns the
/// attacker's admitted count.
#[allow(clippy::too_many_arguments)]
fn attack(
    key: &mut String,
    l: &KeyedRateLimiter<String>,
    clock: &ManualClock,
    clients: &mut [&mut Clients],
    from: Duration,
    gap: Duration,
    requests: u64,
    repeat: u64,
) -> u64 {
    let mut rng = SplitMix::new(0x5EED);
    let mut admitted = 0;
    for i in 0..requests {
        let now = from + gap * u32::try_from(i).expect("fewer than 2³² requests");
        for c in clients.iter_mut() {
            c.run_until(l, clock, now);
        }
        clock.set(now);
        if i % repeat == 0 {
            spoof(&mut rng, key);
        }
        admitted += u64::from(l.try_acquire(key.as_str()).is_ok());
    }
    admitted
}

/// Keys of 100 KiB took the old table to 100 KiB each (10 000 of them:
/// 3.6 MB → 1 031 MB); the table stores a hash of the key, so 1 000 keys of
/// 100 KiB, each with a bucket of its own, cost what 1 000 short keys do.
#[test]
fn table_memory_does_not_depend_on_the_keys_size() {
    let clock = ManualClock::new();
    let mut big = "k".repeat(100 * 1024);
    let (net0, _) = heap();
    let l = builder(&clock).build_keyed::<String>().expect("valid");
    for i in 0..1_000u32 {
        big.replace_range(..8, &format!("{i:08}"));
        for _ in 0..2 {
            drop(l.try_acquire(big.as_str()));
        }
    }
    assert_eq!(l.len(), 1_000);
    let bytes = heap().0 - net0;
    eprintln!("1 000 keys of 100 KiB: {bytes} bytes for the limiter");
    // The fixed part for 10 000 keys (about 500 KB) and 1 000 slots; the
    // keys themselves would be 100 MB.
    assert!(bytes < signed(MAX_BYTES_PER_KEY * 10_000), "{bytes}");
    drop(l);
}

/// `MAX_BYTES_PER_KEY` holds for a full table of 10 000 keys (the default
/// `max_keys`) and of 100 000.
#[test]
fn a_full_table_takes_at_most_max_bytes_per_key() {
    for max_keys in [10_000usize, 100_000] {
        let clock = ManualClock::new();
        let mut key = String::with_capacity(64);
        let mut rng = SplitMix::new(1);
        let (net0, _) = heap();
        let l = builder(&clock)
            .max_keys(max_keys)
            .build_keyed::<String>()
            .expect("valid");
        let fixed = heap().0 - net0;
        while l.len() < max_keys {
            spoof(&mut rng, &mut key);
            for _ in 0..2 {
                drop(l.try_acquire(key.as_str()));
            }
        }
        let bytes = heap().0 - net0 - signed(key.capacity());
        let per_key = bytes as f64 / max_keys as f64;
        eprintln!(
            "max_keys {max_keys}: fixed {fixed} bytes, full {bytes} bytes = {per_key:.1} per key"
        );
        assert!(bytes <= signed(MAX_BYTES_PER_KEY * max_keys), "{bytes}");
        drop(l);
    }
}

/// 200 000 spoofed keys at a million requests per second against a table
/// with 20 clients in it, who go on at 50 requests per second each: the
/// flood allocates nothing (no slot, no growth: the heap is the same byte
/// for byte), the clients are never refused, and the attacker is admitted
/// at most `newcomer_buckets · (burst + rate · t)` times.
#[test]
fn a_flood_of_200k_spoofed_keys_takes_no_slot_allocates_nothing_and_spares_the_clients() {
    let clock = ManualClock::new();
    let l = builder(&clock).build_keyed::<String>().expect("valid");
    let mut clients = Clients::new("client", 20, Duration::ZERO, MS, 50);
    // Two requests each: a slot of their own.
    clients.run_until(&l, &clock, 45 * MS);
    assert_eq!(l.len(), 20);

    let flood = 200_000;
    let start = 50 * MS;
    let mut key = String::with_capacity(64);
    let (net0, allocs0) = heap();
    let admitted = attack(
        &mut key,
        &l,
        &clock,
        &mut [&mut clients],
        start,
        US,
        flood,
        1,
    );
    let (net1, allocs1) = heap();
    let t = (US * flood as u32).as_secs_f64();
    let bound = l.newcomer_buckets() as f64 * (RATE as f64 + RATE as f64 * t);
    eprintln!(
        "flood of {flood} keys in {t} s: {admitted} admitted (bound {bound}), \
         {} client requests, {} refused",
        clients.sent,
        clients.refused.len()
    );
    assert_eq!(
        (net1 - net0, allocs1 - allocs0),
        (0, 0),
        "the flood allocated"
    );
    assert!(clients.refused.is_empty(), "{:?}", clients.refused);
    assert!(clients.sent >= 20 * 10);
    assert_eq!(l.len(), 20);
    assert!(admitted as f64 <= bound, "{admitted} > {bound}");
    // The flood drained the newcomer buckets: that bound is what it got.
    assert!(admitted as f64 >= 0.9 * bound, "{admitted}");
}

/// The failure: after a flood of spoofed keys, 10 of 20 new
/// clients were refused on their first request (they shared one overflow
/// bucket). Now: 20 new clients who arrive together (within 2 ms) 100 ms
/// after a flood of 10 000 keys (and of 200 000), at 10 requests per
/// second, are never refused and each take a slot.
#[test]
fn new_clients_after_a_flood_are_never_refused() {
    for flood in [10_000u64, 200_000] {
        let clock = ManualClock::new();
        let l = builder(&clock).build_keyed::<String>().expect("valid");
        let end = attack(
            &mut String::with_capacity(64),
            &l,
            &clock,
            &mut [],
            Duration::ZERO,
            US,
            flood,
            1,
        );
        assert!(end > 0);
        let after = US * flood as u32 + 100 * MS;
        let mut clients = Clients::new("late", 20, after, 100 * US, 10);
        clients.run_until(&l, &clock, after + 3 * SEC);
        assert!(clients.refused.is_empty(), "{flood}: {:?}", clients.refused);
        assert_eq!(l.len(), 20, "{flood}");
    }
}

/// During a flood at half the newcomer buckets' rate, 20 clients who arrive
/// one after another, at 10 requests per second, are never refused, and
/// every one of them ends with a slot of its own while no spoofed key gets
/// one.
#[test]
fn new_clients_during_a_flood_at_half_the_newcomer_rate_are_never_refused() {
    let clock = ManualClock::new();
    let l = builder(&clock).build_keyed::<String>().expect("valid");
    let per_sec = l.newcomer_buckets() as u64 * RATE / 2;
    let gap = SEC / u32::try_from(per_sec).expect("a rate");
    let mut clients = Clients::new("newcomer", 20, 100 * MS, 250 * MS, 10);
    let flood = 200_000;
    attack(
        &mut String::with_capacity(64),
        &l,
        &clock,
        &mut [&mut clients],
        Duration::ZERO,
        gap,
        flood,
        1,
    );
    eprintln!(
        "flood of {flood} keys at {per_sec}/s: {} client requests, {} refused",
        clients.sent,
        clients.refused.len()
    );
    assert!(clients.refused.is_empty(), "{:?}", clients.refused);
    assert_eq!(l.len(), 20);
}

/// The attacker sends each key twice (its second request would take a free
/// slot) and then three times, at full speed, against a table full of 1 000
/// clients at 10 requests per second: every duel is lost (a client's hits
/// outnumber the attacker's sightings), so no client loses its slot or sees
/// a refusal, and the attacker gets no slot, hence no burst: at most the
/// newcomer buckets' `B · (burst + rate · t)`.
#[test]
fn keys_sent_again_take_no_slot_from_clients_that_use_theirs() {
    for repeat in [2u64, 3] {
        let clock = ManualClock::new();
        let l = builder(&clock)
            .max_keys(1_000)
            .build_keyed::<String>()
            .expect("valid");
        let mut clients = Clients::new("client", 1_000, Duration::ZERO, 100 * US, 10);
        clients.run_until(&l, &clock, SEC);
        assert_eq!(l.len(), 1_000);
        assert!(clients.refused.is_empty());

        let requests = 200_000;
        let gap = 2 * US;
        let admitted = attack(
            &mut String::with_capacity(64),
            &l,
            &clock,
            &mut [&mut clients],
            SEC,
            gap,
            requests,
            repeat,
        );
        let t = (gap * requests as u32).as_secs_f64();
        let bound = l.newcomer_buckets() as f64 * (RATE as f64 + RATE as f64 * t);
        eprintln!(
            "each key {repeat}×, {requests} requests: {admitted} admitted (bound {bound}), \
             {} client requests",
            clients.sent
        );
        assert!(clients.refused.is_empty(), "{:?}", clients.refused);
        assert_eq!(l.len(), 1_000);
        assert!(admitted as f64 <= bound, "{admitted} > {bound}");
    }
}

/// A key that wins a slot from a key in use starts with one token and earns
/// the rest at the rate: evicting buys no burst. A key that takes a free or
/// idle slot starts full.
#[test]
fn a_key_that_evicts_a_key_in_use_starts_with_one_token() {
    let clock = ManualClock::new();
    // 320 keys: every shard holds some (each of the 16 is empty with
    // probability (15/16)³²⁰ = 10⁻⁹).
    let l = builder(&clock)
        .max_keys(320)
        .build_keyed::<String>()
        .expect("valid");
    for i in 0..320 {
        let k = format!("incumbent-{i}");
        drop(l.try_acquire(&k));
        drop(l.try_acquire(&k)); // a slot, 2 hits
    }
    assert_eq!(l.len(), 320);
    clock.advance(MS);
    // Sightings 1 and 2 go to newcomer buckets (2 does not beat 2 hits);
    // sighting 3 beats the weakest incumbent and takes its slot with one
    // token, taken at once. The frequency sketch may over-count the
    // challenger (its hash shares counters with incumbents': a count-min
    // sketch never under-counts), which gives it the slot a sighting or
    // two early, still with one token: admitted 1 to 3 times, then
    // refused. (A slot taken with a full bucket would admit 100 more.)
    let mut admitted = 0;
    let limited = loop {
        match l.try_acquire("challenger") {
            Ok(permit) => {
                drop(permit);
                admitted += 1;
                assert!(admitted <= 3, "admitted past sighting 3: a burst");
            }
            Err(limited) => break limited,
        }
    };
    assert!(admitted >= 1, "the first sighting takes a newcomer token");
    // Empty again: a whole token's time to wait, less the part of one
    // 1/512 token (the bucket's resolution) already earned.
    let token = SEC / RATE as u32;
    let wait = limited.retry_after();
    assert!(wait <= token && wait > token - token / 512, "{wait:?}");
    assert_eq!(l.len(), 320);
    // It earns its burst at the rate: one second later, 100 tokens.
    clock.advance(SEC);
    let burst = (0..200)
        .filter(|_| l.try_acquire("challenger").is_ok())
        .count();
    assert_eq!(burst, RATE as usize);
}

/// The number of newcomer buckets is `16 · ceil(ceil(max_keys / 16) / 16)`:
/// about `max_keys / 16`, at least 16.
#[test]
fn newcomer_buckets_are_about_max_keys_over_16() {
    for (max_keys, buckets) in [(1, 16), (256, 16), (10_000, 640), (100_000, 6_256)] {
        let l = RateLimiter::builder()
            .max_keys(max_keys)
            .build_keyed::<u64>()
            .expect("valid");
        assert_eq!(l.newcomer_buckets(), buckets, "{max_keys}");
    }
}

/// Memory is paid as the table grows: building a limiter for ten million
/// keys allocates its newcomer buckets (capped at 65 536) and sketches for
/// 256 keys per shard, about 1.3 MB, not the 490 MB its full sketch takes.
#[test]
fn building_a_table_for_ten_million_keys_allocates_little() {
    let (net0, _) = heap();
    let l = RateLimiter::builder()
        .max_keys(10_000_000)
        .build_keyed::<String>()
        .expect("valid");
    let bytes = heap().0 - net0;
    eprintln!("built for 10 000 000 keys: {bytes} bytes");
    assert_eq!(l.newcomer_buckets(), 65_536);
    assert!(bytes < 1_500_000, "{bytes}");
    drop(l);
}
