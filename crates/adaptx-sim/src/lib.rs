//! A deterministic overload simulator for [`adaptx`].
//!
//! It drives the **real** [`adaptx::Limiter`] — the control laws, the permit
//! engine, the sample windows — through an [`adaptx::ManualClock`] against a
//! modelled backend, in integer-nanosecond virtual time, and measures what
//! each law does to goodput, latency and overload failures. A run is a pure
//! function of the [`Scenario`], the [`Policy`] and the seed: the same three
//! give the same per-second series to the bit.
//!
//! # The model
//!
//! (From the project's scenario spec; [`Scenario`] documents every field.)
//!
//! - **Backend**: a service time plus an exponential jitter term; optional
//!   processor sharing over `workers` (with `L > c` inside, each request
//!   progresses at `c/L`); an optional `max_concurrency` that rejects (an
//!   overload error after `reject_latency`) or drops (never answered: the
//!   client's timeout fires); an optional rate limit over the trailing
//!   second; a fraction of client errors that are not overload. A schedule
//!   changes any of it at given times.
//! - **Demand**: `closed` (workers that wait for a permit in FIFO order, send,
//!   wait, think, repeat) or `open` (Poisson arrivals, shed without a free
//!   permit), for one or several clients, each with its own limiter.
//! - **Outcomes** go through the real permits: successes and client errors
//!   are `Outcome::Success`, rejections and timeouts `Outcome::Failure`, with
//!   latency measured on the virtual clock.
//! - **Measures**, per second and per run ([`Second`], [`Run`]): limit,
//!   in-flight, goodput, overload failures, shed, p50/p99 of successes
//!   (and their histogram, [`Latencies`]), capacity and C*; summaries over
//!   the *steady* interval.
//! - **Bands** ([`band`]): each scenario file carries pass bands per law,
//!   checked on the median of seeds 0–9 and, 1.5× looser, on the worst. A
//!   band measures any interval of the run, the totals or one client, and
//!   may compare a law with the oracles (the best fixed limits, [`suite`]).
//!
//! - **Input** is bounded ([`bounds`]): every field of a scenario has a range
//!   a simulation can mean, and the work of a suite is estimated before it
//!   runs ([`work`]), so hostile input is an error, not hours or an abort.
//!
//! The engine ([`run`]) handles each event in `O(log n)` and simulates
//! several million requests per second of real time on one core in release
//! builds.
//!
//! # Examples
//!
//! ```
//! use adaptx_sim::{Law, Policy, Scenario, run};
//!
//! let sc = Scenario::from_toml("example.toml", r#"
//!     name = "hard-limit"
//!     duration = "40s"
//!     [backend]
//!     service_time = "50ms"
//!     max_concurrency = 20
//!     over_limit = "reject"
//!     [demand]
//!     kind = "closed"
//!     workers = 100
//! "#)?;
//!
//! let aimd = run(&sc, Policy::Law(Law::Aimd), 0);
//! assert_eq!(aimd.seconds.len(), 40);
//! assert!(aimd.seconds.iter().all(|s| s.limit <= 21));
//!
//! // A fixed limit at C* serves the full capacity: 20 / 50 ms.
//! let fixed = run(&sc, Policy::Fixed(20), 0);
//! assert_eq!(fixed.seconds[30].goodput, 400);
//! assert_eq!(fixed, run(&sc, Policy::Fixed(20), 0));
//! # Ok::<(), adaptx_sim::ScenarioError>(())
//! ```
//!
//! The `adaptx-sim` command runs the shipped scenarios, prints the tables,
//! checks the bands and writes an HTML report: see `adaptx-sim --help`.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod backend;
pub mod band;
pub mod bounds;
pub mod class;
mod demand;
mod measure;
pub mod peers;
mod rate;
pub mod report;
mod rng;
mod scenario;
mod sim;
pub mod suite;
mod time;
pub mod work;

pub use demand::{ClientSpec, DemandChange};
pub use measure::{Latencies, Policy, Run, Second};
pub use rate::RateLimiterSpec;
pub use scenario::{
    BackendSpec, BandSpec, DEFAULT_REJECT_LATENCY, DEFAULT_TIMEOUT, DemandKind, DemandSpec, Holds,
    Law, LimiterSpec, Metric, OverLimit, Scenario, ScenarioError, ScheduleEntry,
};
pub use sim::{capacity, capacity_between, run};
pub use time::{MILLISECOND, Nanos, SECOND, parse_duration};

/// The crate's `README.md`, whose example runs as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct Readme;
