//! Ceiling: find the backend's best concurrency, rest at it, probe it
//! rarely.

use super::baseline::BASELINE_PROBE_DROP;
use super::{ControlLaw, LawState, WindowSummary, app_limited, utilized};
use crate::defaults::DEFAULT_UTILIZATION;
use crate::rng::{GOLDEN_GAMMA, splitmix64};

/// How much the mean latency of successes may exceed the latency floor
/// before Ceiling reads it as a queue: 20 %.
pub const CEILING_DEFAULT_TOLERANCE: f64 = 0.2;

/// At least this many windows between two floor probes.
const PROBE_SPACING: u32 = 5;

/// A success latency this far above the allowed one (×) is a step of the
/// floor, not a queue the limit built: probe the floor before cutting.
const PROBE_JUMP: f64 = 1.5;

/// Cutting on latency this many windows in a row probes the floor too.
const PROBE_AFTER_CUTS: u32 = 3;

/// A window's mean success latency is a queue only where it exceeds the
/// floor by this many of its standard errors too, not only by the
/// tolerance: where the successes' latencies spread wide and a window holds
/// few of them, noise alone takes a mean past the tolerance. A backend of
/// 150 ms plus an exponential 300 ms behind a sharp ceiling of 12 holds
/// some 20 successes a window, whose mean strays by 15 %: judged by the
/// tolerance of 20 % alone, one window in ten read as a queue (one in six
/// at 10 successes), each cut left fewer successes and more noise, and on
/// one seed in eleven the limit sank to 1 with no failure at all (0.25 of
/// the oracle; median 0.90). The test runs on every window, and a mean of
/// a heavy tail is skewed toward slow: past 2 standard errors one window
/// in 30 by chance (that worst seed 0.66, median 0.97), past 3 one in 200
/// (0.90, median 0.98). Where the spread is small (a queue of 1 s calls
/// ±10 %, whose window means stray by 3 %), the tolerance is the stricter
/// test and nothing changes.
const QUEUE_SIGMAS: f64 = 3.0;

/// A window's fresh failures are overload when background noise at the
/// learned rate would have produced that many this rarely.
const NOISE_SIGNIFICANCE: f64 = 0.05;

/// The fresh failures of the windows since the last overload, all together,
/// are overload when background noise would have produced that many this
/// rarely (stricter than one window's test: the count is tested again every
/// window).
const RUN_SIGNIFICANCE: f64 = 0.01;

/// The background failure rate learns over about this many samples.
const NOISE_SAMPLES: f64 = 1000.0;

/// Before it has seen that many, the rate is what the windows taught, as if
/// this many samples without a failure came first (a prior of no noise,
/// which the evidence outweighs as it grows). The prior was the whole
/// average's weight, 1000 samples: 1 % of random failures read as 0.5 % after
/// 10 s at 70 calls a second, and as 0.1–0.4 % after two minutes at 30 (3 s
/// calls), so that each lone failure at rest cut by a tenth: 0.45 of the
/// best fixed limit with calls of 3 s (`scenarios/variants/slow-noise/`),
/// and where a client timeout cuts a heavy tail
/// (`scenarios/variants/tail-timeouts/`) worst seeds of 0.21–0.76 of it.
/// Worth 300: 0.89, and worst seeds of 0.32–0.82.
const NOISE_PRIOR_SAMPLES: f64 = 300.0;

/// The windows below the resting level bound the background rate once they
/// carry this much of the learning's weight (about 360 samples of 1000)...
const NOISE_BELOW_WEIGHT: f64 = 0.3;

/// ...below the lowest resting level of the last this many windows (or
/// more: the reference restarts at the current level after this many).
const NOISE_BELOW_WINDOWS: u32 = 200;

/// A window in which more than this fraction failed teaches the background
/// rate nothing: it was overload.
const NOISE_MAX_FRACTION: f64 = 0.05;

/// ... or more than this many of the samples of a full window (one that
/// closed without a fresh failure), when that is more.
const NOISE_FULL_WINDOW_FAILURES: f64 = 2.0;

/// ... but never more than this fraction: where a full window holds a sample
/// or two, a window that failed is overload, not a rate.
const NOISE_FEW_SAMPLES_MAX_FRACTION: f64 = 0.2;

/// Slow start multiplies the limit by this per clean, busy window: one step
/// past the ceiling overshoots it by at most half.
const SLOW_START_GROWTH: f64 = 1.5;

/// The least first step of a climb above a ceiling that moved up (after the
/// probe's +1 came back clean three times); where a try found the room
/// quietly and no neighbour shows itself, the first step is the limit when
/// that is more (half the limit where the backend drops or has queued, or a
/// neighbour showed itself before), and each next one doubles.
const EXPLORE_FIRST_STEP: usize = 4;

/// A limit resting at a ceiling gives 7 % of itself away (keeps this
/// fraction, rounded down) for one window...
const YIELD_KEEP: f64 = 0.93;

/// ...after this many permit-windows at rest: `YIELD_PERMITS / limit`
/// resting windows, rounded (a limit of 2 after 150; of 10 after 30; of 30
/// after 10; of 40 after 8), so a bigger limit, with more to give,
/// gives sooner (as in the exchange, where it gives more often). The period
/// follows the limit as it moves. Clients count their resting windows from
/// the same start, so with one period for every size they yielded in the
/// same windows, each holding its own room free while the other's was free:
/// two clients of 10 and 40 on a ceiling of 50 never took each other's room
/// and never saw a neighbour (smallest share 0.40). Equal limits still
/// yield together, and so do not trade...
const YIELD_PERMITS: f64 = 300.0;

/// ...but after 5 resting windows at least (a limit of 55 or more: 300 / 55
/// rounds to 5)...
const YIELD_EVERY_MIN: u32 = 5;

/// ...twice as many after each time nobody took the room, up to this many...
const YIELD_EVERY_MAX: u32 = 160;

/// ...when it is at least this large: a limit of 1 has nothing to give (its
/// yield keeps 0). A limit below 10 gives one permit. (Yielding only from
/// 10, a limit below it kept what it had for good: four clients starting at
/// 10 on a ceiling of 8, the first to start held all 8 and the other three
/// failed every call for the whole run, shares 0 / 4; from 2, 0.70 / 1.37.)
const YIELD_FROM: usize = 2;

/// After the window of a yield, one permit of it stays free this many
/// windows more: a neighbour at rest probes every 3 to 5 windows (see
/// `draw_rest`), so it finds the room whatever its phase. With the room free
/// for one window only, a neighbour whose probes kept missing the yields saw
/// them back off to one in 160 windows and stayed starved (one client of two
/// on a ceiling of 20 held 1 permit for a whole run, in ~2 % of runs whose
/// clients draw independent random streams).
const YIELD_HOLD: u32 = 4;

/// ...from a limit this large. A smaller one gives a fifth to a half of
/// itself, and held, that cost a lone limit on a ceiling of 2 or 3 up to
/// 0.97 of the capacity; its yield lasts its own window. A neighbour that
/// small a share leaves out has no permit the backend takes at all (its
/// calls fail as they come) and takes the room the moment it frees.
const YIELD_HOLD_FROM: usize = 10;

/// A neighbour sharing the ceiling counts as present for this many windows
/// after the last sign of it (room given away was taken, or room found at
/// the ceiling on a quiet backend ran out before the third try)...
const NEIGHBOUR_WINDOWS: u32 = 60;

/// ...and while it is, the limit exchanges permits with it: at rest it gives
/// its permits away for a window at one per this many permits per window,
/// and otherwise tries for one more.
const EXCHANGE_WINDOWS: f64 = 30.0;

/// Windows in a row that end in overload (stale-only windows between them
/// not counted) after which no neighbour is believed in: the ceiling fell
/// for everyone.
const OVERLOADS_NO_NEIGHBOUR: u32 = 5;

/// Windows after the last failure that came back at a timeout for which the
/// backend counts as one that drops (see [`Ceiling::no_room`]).
const DROPS_WINDOWS: u32 = 300;

/// Where the backend drops, tries of the ceiling from rest are at least this
/// many timeouts apart.
const TRY_TIMEOUTS: f64 = 2.0;

/// Probes of the ceiling from rest are at least this many calls apart: a
/// probe where the ceiling is still there costs about one failed call, so
/// probes cost at most a third of a percent of the calls wherever a window
/// holds 60 calls or more (see `PROBE_WINDOWS`). Counted only in windows
/// (2–4 apart), a backend of 400 ms with a ceiling of 25 — 57 calls a
/// window — failed 0.5–0.6 % of its calls on probes alone; the overload
/// goal is 0.5 %. Where the backend answers 150 calls a window or more, the
/// windows space the probes as before...
const PROBE_CALLS: u64 = 300;

/// ...from a limit this large. A smaller one probes every 2–4 windows
/// whatever that costs: it may be the share of a client squeezed by
/// neighbours at start-up, whose probes find the room they give (paced too,
/// six clients on a ceiling of 36 ended with a smallest share of 0.80 of
/// the fair one, 0.59 on the worst of ten seeds, against 0.86 and 0.72).
const PROBE_CALLS_FROM: usize = 10;

/// ...and no more than this many full windows' calls apart: a probe is how
/// a ceiling that moved up is found, and the step-up goal (at the new
/// ceiling within 10 s) leaves room for a probe every 5 windows at most
/// besides the three tries and the climb. Where a window holds fewer than
/// 60 calls the two goals cannot both hold: a ceiling of 10 at 200 ms (45
/// calls a window) that steps to 100 needs 8 windows after the probe that
/// finds the room (three tries, five steps of the climb), so a probe every 2
/// windows, 1.1 % of the calls, would be needed for 10 s; every 300 calls
/// (7 windows) it took 16 s on the worst of 90 seeds, every 5 windows 15 s
/// (10 s at the median, 9 s with probes 2–4 windows apart).
const PROBE_WINDOWS: u64 = 5;

/// Where the backend drops, a try whose window served no more than the
/// level below (or an exploration's step that found no room) holds its limit
/// until the calls the backend dropped come back at the timeout, for at most
/// this many timeouts (see [`Ceiling::await_dropped`]).
const TRY_AWAIT_TIMEOUTS: f64 = 1.5;

/// The exchange gives in turns of three windows at rest that give (or may
/// give: a window that earned no whole permit tries instead): the first of
/// each turn waits, trying for one more meanwhile, until
/// [`EXCHANGE_FIRST_GIFT`] permits are earned. A gift of one goes to the
/// neighbour whose window opens first after the giver's, every time
/// (windows of one length drift only milliseconds apart): a gift of two
/// lets a second taker win one.
const EXCHANGE_TURN: u32 = 3;

/// The permits the first gift of a turn of the exchange waits for.
const EXCHANGE_FIRST_GIFT: f64 = 2.0;

/// A gift of the exchange this big or bigger that a neighbour took costs the
/// giver the whole gift, not one permit: neighbours take a gift one permit
/// at a time, and what they did not take stays free for their next tries
/// instead of going back to the giver. Only a limit above 30 can give three
/// at once; resting one below, it took the rest back at once, and a share 40
/// permits short grew by one in two windows (2 on 130 from 40 / 120: 0.51 of
/// the fair share, 0.76 with this). A gift of one or two still costs one:
/// losing two for one taken left a permit idle that cost 0.2–0.3 % of the
/// capacity on ceilings of 20 (0.980 → 0.978) for shares no closer to fair.
const EXCHANGE_TAKEN_WHOLE: usize = 3;

/// Room found at the ceiling this many times in a row is a ceiling that
/// moved up rather than a neighbour's permit: explore.
const EXCHANGE_EXPLORE_AFTER: u32 = 3;

/// An exploration that fails above its last clean level descends from the
/// failing level toward it in steps of this part of the gap between them
/// (rounded up), one fresh failure a step (see [`Ceiling::overloaded`]):
/// after a step from 10 to 100 (or 20 to 200), a gap of 16 parts reached the
/// new ceiling in 10–12 s at the median seed, of 64 parts in 8–10 s, for a
/// few hundred more rejections (under 0.1 % of the calls).
const DESCEND_STEPS: usize = 64;

/// Where background noise could explain a return's failure, a neighbour is
/// believed when room was taken at two of this many returns from room given
/// away in a row: noise, which takes it one return in twenty, does that at
/// one return in 140 (`0.05 · (1 − 0.95³)`); a neighbour, which takes what
/// it is given, nearly always (see [`Ceiling::neighbour_sign`]).
const SIGN_RETURNS: u32 = 4;
const SIGN_RETURNS_MASK: u8 = (1 << SIGN_RETURNS) - 1;

/// Past the onset of a soft ceiling (errors that rise gently with load), a
/// level is worth resting at when its probes show that it fails fewer than
/// this share of its calls above the background rate (at
/// [`SOFT_ACCEPT_SIGNIFICANCE`]) and that it adds at least half a permit of
/// goodput: the best fixed limit whose overload is at most 2 % is the
/// reference there, and resting where the errors start gives less than 0.95
/// of it once they reach all calls past 4.65 × the onset.
const SOFT_BUDGET: f64 = 0.02;
const SOFT_ACCEPT_SIGNIFICANCE: f64 = 0.05;

/// ...from at least this many failures of its probes: one probe that ran
/// long before its failure is no rate (a neighbour that gave room for a
/// while, at a sharp ceiling they share).
const SOFT_ACCEPT_FAILURES: f64 = 3.0;

/// A level accepted past a soft ceiling's onset is given up when the windows
/// resting there, together, fail more than the budget at this significance
/// (tested every window), or one window fails two calls or more beyond it at
/// [`NOISE_SIGNIFICANCE`] (a window closes on its first failure: one alone
/// comes early one time in twenty).
const SOFT_GIVE_UP_SIGNIFICANCE: f64 = 0.001;

/// A level's probes are counted over at most about this many samples (the
/// counts are halved beyond it), so an old verdict can change.
const SOFT_PROBE_SAMPLES: f64 = 20_000.0;

/// The seed of a law that no limiter seeded.
const DEFAULT_SEED: u64 = 0x2545_F491_4F6C_DD1D;

/// The largest decrease factor of an overload below a known ceiling.
const DECREASE: f64 = 0.9;

/// A window measures the concurrency the backend served only with at least
/// this many successes.
const MEASURE_MIN_OK: u64 = 10;

/// The least share of its limit a clean measure serves where only the
/// demand's gaps between arrivals left it short (see
/// [`Ceiling::served_ceiling`]; an open demand's are a few percent): less
/// is a backend that took no more, its refusals yet to come.
const SHARE_MIN: f64 = 0.9;

/// Standard deviations of the count of calls a full limit completes by
/// which a clean window must fall short of that count, beside
/// [`SHARE_MIN`], before its demand counts as short of the limit (see
/// [`Ceiling::note_demand`]): a closed loop's windows of 20–30 calls of
/// 400 ms stray by a tenth on their own.
const DEMAND_SHORT_SIGMAS: f64 = 3.0;

/// Round trips a window that a raise of the limit began, and a failure
/// ended, must hold to measure what the backend served: the fill of the
/// permits the raise added biases a shorter one low.
const RAISED_MEASURE_ROUND_TRIPS: f64 = 4.0;

/// Late failures beyond an answered overload's that show a ceiling fell
/// (see [`Ceiling::fell_below`]): the edges of a window can add one.
const STALE_FELL_MIN: u64 = 2;

/// Clean windows in a row are pooled until they hold two round trips and at
/// least this many successes; their mean latency is a floor measure (where
/// one window is shorter than two round trips, the only one). (Fewer, and the lowest of many pooled means fell below the floor
/// on a jittery 1 s backend: its latency cuts cost 1.5 % of the goodput.)
const FLOOR_POOL_OK: u64 = 60;

/// A limit shedding permits the backend never takes stops this many
/// timeouts after the last it shed (see [`Ceiling::shedding`]).
const SHED_TIMEOUTS: f64 = 2.0;

/// Failures that waited this many times the mean success on average were
/// dropped and timed out (a rejection is faster than a success; an error
/// past a soft ceiling takes the service time). (At four times, a 500 ms
/// timeout on 200 ms calls read as failures answered at once: two clients
/// sharing a ceiling of 20 that drops failed 3.5 % of their calls, and the
/// smaller share was 0.28 of the fair one, 1.2 % and 0.80 at twice.)
const DROPPED_WAIT: f64 = 2.0;

/// Where the backend drops, a call back at its timeout within this
/// fraction of it from the start of a return from a gift or a yield is that
/// return's call (see [`Ceiling::return_dropped`]).
const RETURN_CALL_SLACK: f64 = 0.05;

/// What a window without a significant failure is judged by.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Judge {
    /// The limit has not run long enough: hold it.
    Hold,
    /// This mean latency (nanoseconds) of this many successes (`None`
    /// without a success).
    By(Option<(f64, u64)>),
}

/// Where a limit is and what it has learned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No overload seen yet: grow by half per window, at most once per
    /// round trip.
    SlowStart,
    /// Overload was seen at `ceiling`: rest just below it, probe it every few
    /// windows.
    Known { ceiling: usize },
    /// A probe of the known ceiling was clean: the ceiling moved up; climb
    /// by `step`, doubling it per clean window.
    Explore { step: usize },
}

/// Ceiling: a law that finds the backend's best concurrency C*, rests there
/// and probes it rarely, from overload failures *and* latency.
///
/// - **Slow start.** Until the first overload it grows the limit by half per
///   clean, busy window, at most once per round trip (its latency judged
///   over the windows of that round trip), so the first overshoot is at
///   most 1.5 × C* past the last level whose calls came back.
/// - **Decrease to what was served.** On a fresh overload failure (the
///   limiter closes the window at once: [`reacts_to_first_failure`]) it uses
///   the concurrency the backend actually served in the last window long
///   enough to measure it, `N = successes / window time × mean success
///   latency` (Little's law): the concurrency in use, not a fixed fraction,
///   so a ceiling costs no sawtooth. Measured where the limit was higher
///   than `N` and something failed (or the backend drops), `N` is the
///   ceiling's level: the limit goes there. Measured where the limit itself
///   bound it, or in a window where no call admitted in it failed at a
///   backend that does not drop (it took the whole limit), the ceiling lies
///   between that limit and the failing one: the limit tries halfway. A measure at or
///   above the failing limit is older than the ceiling: a cut by a tenth.
///   The first window of a raise, ended by a failure before it ran four
///   round trips, measures nothing: the permits the raise added came back a
///   whole number of times where the others turned a fraction more, and
///   Little's law read it short (36.6 of a ceiling of 40).
///   Where the demand leaves the limit unfilled (a clean window under a
///   settled limit completed clearly fewer calls than the limit carries),
///   `N` is the demand's mean and only its bursts reach the ceiling: a
///   failure answered at once cuts to one below the window's peak in flight
///   (by a tenth at least), which is the ceiling it remembers.
/// - **Noise.** Fresh failures count as overload only when background noise
///   could not explain them: the law learns the rate of failures that come at
///   any load (from windows where at most 5 % failed, or at most two of a
///   full window's samples where a full window holds fewer than 40, at or
///   below the resting level: probes, tries, explorations and slow start's
///   overshoot fail with the load they add), and a
///   window whose
///   failures a Poisson count at that rate would reach with probability 5 %
///   or more is clean — a flaky network costs no capacity. Noise fails at any
///   load, so the rate is no higher than what the windows below the lowest
///   resting level of the last 200 windows fail, once they have said enough
///   (~360 samples; forgotten when the limit comes to rest lower still): a
///   soft ceiling, whose errors rise with load, fails less there, and its
///   failures at rest are overload. The windows since the last overload
///   count together too: when their fresh failures, all together (decayed
///   over about 1000 samples), are more than noise explains at the 1 %
///   level, the window with the last of them is overload — a soft ceiling
///   fails a few calls in every window above it, too few in any one (the
///   window closes on the first).
/// - **Soft ceilings.** Where errors start at a level and rise gently with
///   load past it, resting where they start gives up goodput that the few
///   errors of the next levels do not cost (errors from 30 that reach every
///   call at 240: 0.89 of the best fixed limit failing at most 2 % of its
///   calls). The probes of the level above the resting one are counted
///   together; once they have failed three calls or more and show it fails
///   significantly fewer than 2 % of its calls above the background rate
///   (at the 5 % level), and that its
///   failures hold so little of the permits' time that it serves at least
///   half a permit more than the level below, the law rests there, and a
///   failure there is the budget's, not overload — until the windows
///   resting there fail more than the budget. A sharp ceiling never passes:
///   one permit past it fails most of its calls where rejections come back
///   at once, and holds a failing call all the time where they are slow.
/// - **Ceiling memory.** It remembers the lowest limit that failed, rests one
///   below it, and every 2–4 windows (jittered; from a limit of 10, at least
///   300 calls or 5 windows apart) probes it: the probe costs one rejection
///   when the ceiling is still there. A clean probe takes the permit and
///   tries one more the next window; room found three times in a
///   row means the ceiling moved up, and the limit climbs by itself (by
///   half itself where the backend drops or has queued, or a neighbour
///   showed itself before; by 4 where that is
///   more, where no try found its room quietly — background noise could
///   have made it — or while a neighbour shows itself — its gifts could
///   have), doubling the step per window until it fails. Where the backend
///   answers overload at once, it then
///   descends from the failing level toward the last clean one by a 64th of
///   the gap per fresh failure until a window is clean: a failure costs
///   milliseconds, a clean window a second, so the new ceiling is found in
///   about one window rather than by halving the gap up, a window a step
///   (a step from 10 to 100: 13 s → 8 s). Once failures have come back at
///   a timeout (a backend that drops what it cannot take; the dropped
///   calls hold their permits, so their windows look clean and busy), a try
///   or a step finds room only where the backend served more than the level
///   below it (for a try, half a permit more than the window at that level
///   served, which an open demand leaves short of its limit; for a step,
///   more than its limit less half the step).
///   Below the resting level it returns halfway per window. A failure at a
///   resting level that held cuts to what was served and by a tenth at
///   least, and so does a failed probe that served more than a tenth less
///   than the resting level's clean window before it (the ceiling fell
///   under the probe; where the backend drops, its answer comes a timeout
///   later, when the window has measured it).
/// - **Sharing.** After `300 / limit` resting windows (rounded, at least 5: a
///   limit of 10 after 30, of 30 after 10, of 60 after 5; the period follows
///   the limit as it moves; the first time after 5 while no resting window
///   has failed, so a neighbour squeezed to one permit at start-up is not
///   left failing every call for half a minute) a limit of 10 or more gives
///   7 % of itself away for one window, keeps one permit of it free four windows more (a
///   neighbour probing every 3–5 windows cannot miss it) and climbs back: a
///   client sharing the ceiling may take the room (a bigger limit gives more,
///   and sooner), so clients that started unequal move toward equal shares,
///   and clients of different sizes do not yield in the same windows. When
///   nobody took it (the climb back met no failure) it waits twice as long
///   the next time, up to 160 windows, so a client alone pays almost
///   nothing; when the room was taken, it gives again at its own period.
///   A limit its demand does not fill never meets a ceiling and never
///   yields: the calls its demand keeps in flight keep their places, and a
///   neighbour that shares the backend gets only what they leave (it cannot
///   tell that from a light load, where a yield would refuse calls at the
///   busiest moments with nothing overloaded).
/// - **Exchange.** While a neighbour has shown itself in the last 60 windows
///   — it took room this limit gave (where background noise could have failed
///   the return, at two of the last four returns), or room found at the
///   ceiling ran out before the third try (a ceiling that moved up would have
///   lasted) on a quiet backend (background noise would fail fewer than one
///   sample in twenty such windows and nothing failed late, so a flaky
///   network or a timeout on its way is not taken for one) — the limit at
///   rest gives its permits away for a window at one per 30 permits per
///   window (a limit of 15 two and one permits every six windows, 45 three,
///   one and two every four) and otherwise tries for one more. Its neighbours
///   do the same, so each client gives in proportion to its share and tries
///   for more whenever it gives nothing: shares drift toward equal whatever
///   the start. The gifts follow a schedule, not a coin: a limit earns `limit
///   / 30` permits of credit per window at rest and gives the whole ones it
///   holds, in turns of three windows that give or may give (a window that
///   earned no whole permit tries instead); the first of each turn waits,
///   trying, until two permits are earned. A gift of one goes to the
///   neighbour whose window opens first after the giver's, every time, so a
///   neighbour later in that order would never win one; a gift of two lets a
///   second taker win one. (A limit of 30 to 59 earns a permit or more every
///   window, so whether it tries at all depends on the fraction of a permit
///   it carries into a turn: 45 tries one window in four, 40 and 50 never;
///   from 60 up none tries.) Given at random, permits would wander between
///   the clients like balls between Ehrenfest's urns, each share spread about
///   `√share` around the fair one; on a schedule only who takes a gift is
///   left to chance. A gift lasts one window: the limit returns to rest in
///   one step. A return that fails counts as taken only if it failed more
///   than the windows at that resting level fail (a soft ceiling fails some
///   calls at every level above it, and a single client there would take its
///   own failures for a neighbour's); otherwise it is a failure at rest. Room
///   given and taken costs a permit (a return that fails rests one lower, or
///   at what was served if the backend served less; one that fails again cuts
///   again), or the whole gift when it was three or more (only a limit above
///   30 gives that many, and small neighbours take it one permit at a time:
///   what they did not take stays free for their next tries instead of going
///   back). Room given and not taken costs a window of it.
/// - **Latency.** The floor is the lowest mean success latency of a measured
///   window, or of clean windows pooled until they hold two round trips and
///   60 successes (a backend slower than half a window has no other), since
///   the floor was last probed, plus the standard errors by which the
///   lowest of that many means falls below their mean (`√(2 ln n) − 0.6`
///   of a mean of as many successes: 1.5 for 10 means, 2.8 for 300). The
///   law learns how far one success's latency strays from the mean from
///   consecutive clean windows at one limit, begun two round trips after it
///   took force. (Read as the floor, the lowest of a few hundred noisy means
///   of a backend of 50 ms plus an exponential 100 ms made every window a
///   queue, and the limit sank to 1: scenario 37.) A busy window whose
///   success mean exceeds the floor by more than `tolerance`, and by more
///   than three standard errors of a mean of its successes (where they
///   spread wide and a window holds few, noise alone crosses the
///   tolerance), is a queue: the limit moves to
///   `L · floor · (1 + tolerance) / mean`, and that level becomes the
///   ceiling.
///   A mean more than 1.5 × the allowed one, or three such cuts in a row,
///   first *probes* the floor (at most every 5 windows): half the limit for
///   a window, or as many as two round trips take, whose last mean becomes
///   the floor — so a backend that got slower, not
///   busier, keeps its limit. Where that mean is more than a tenth below
///   the latency that started the probe, the queue was ours: it only lowers
///   the floor, and the limit is cut on that latency if it is above the
///   tolerance. The first window slower than the floor allows
///   also checks it with such a window at the next busy, clean window, and
///   so does each check that finds it lower: the first windows may have
///   taught it above C*.
///
/// Stale failures — calls admitted before the window that fail in it — are
/// the drain of an overload already answered where the limit was cut since
/// they were admitted: they neither cut nor stop a climb, and teach no
/// background rate. Admitted at the window's limit or below it, they are
/// the same evidence as its own failures. More of them than the cut since
/// explains show, without a fresh failure, that the ceiling fell below the
/// limit (a permit holds one call at a time: of the calls in flight as the
/// window began, at most the limit then in force less the ceiling were to
/// fail). Where they come back within a window, they were admitted in the
/// window before; where they came back at a longer timeout, a timeout
/// before, under the highest limit in force then (the law keeps its last
/// 16 windows). There the limit in force sent as many calls again as came
/// back, and the backend dropped those too: they hold their permits until
/// their own timeout, and a cut below them would leave the backend only
/// what they left free. So the limit holds until the first of them is back
/// (at most 1.5 timeouts) and goes down then, before its permit is free.
/// An exploration's step or a try that found no room where the backend
/// drops holds the same way. Fresh failures
/// that came back at a timeout answer the limit in force a timeout before
/// the window closed on them (the law keeps its last 16 windows): where that
/// was below the present limit (tries climbed since), the ceiling is below
/// it, and the limit rests under it. A limit resting over the ceiling of a
/// backend that drops, whose permits the backend never takes each fail a
/// call per timeout (failures that read as background noise), sheds them
/// one at each fresh timeout, at the instant it comes back, down to what
/// it served — unless its successes reached halfway from their mean
/// latency to the timeout: then a heavy tail the timeout cuts fails those
/// calls at any load, and no permit is unfilled. A window that used less than
/// `utilization` of the limit never grows it, and one that used less than
/// half of it never cuts on latency.
///
/// # Examples
///
/// ```
/// use adaptx::{Ceiling, ControlLaw, WindowSummary};
/// use std::time::Duration;
///
/// let mut law = Ceiling::default();
/// let (second, ms50) = (Duration::from_secs(1), Duration::from_millis(50));
/// let busy = WindowSummary::new(second, 200, 0, 10, ms50)?
///     .with_rtt_floor(ms50)
///     .with_rtt_average(ms50);
/// // Slow start: half again per clean, busy window.
/// assert_eq!(law.next_limit(10, &busy), 15);
/// // 300 successes of 50 ms in a second: 15 were served at a time; a fresh
/// // failure finds 15 served at a limit of 22, so the limit goes to 15.
/// let failing = WindowSummary::new(second, 301, 1, 22, ms50)?
///     .with_rtt_floor(ms50)
///     .with_rtt_average(ms50);
/// assert_eq!(law.next_limit(22, &failing), 15);
/// # Ok::<(), adaptx::ConfigError>(())
/// ```
///
/// [`reacts_to_first_failure`]: ControlLaw::reacts_to_first_failure
#[derive(Debug, Clone)]
pub struct Ceiling {
    tolerance: f64,
    utilization: f64,
    phase: Phase,
    /// Windows spent at the resting level since the last probe.
    rested: u32,
    /// Windows to rest before the next probe.
    rest: u32,
    /// Windows rested since the limit last gave room away, the factor (1, 2,
    /// 4, ...) its period has grown by since room was last taken, and whether
    /// it is climbing back from one.
    since_yield: u32,
    yield_backoff: u32,
    yielding: bool,
    /// Whether the limit has given room away since it started, and whether
    /// a window at its resting level has failed since then (see
    /// [`Ceiling::yield_every`]).
    yielded: bool,
    rest_failed: bool,
    /// Windows left to keep one permit of a yield free.
    yield_hold: u32,
    /// Windows since the last sign of a neighbour sharing the ceiling
    /// (`u32::MAX`: none yet).
    since_neighbour: u32,
    /// Permits given away in the exchange for the current gift, and whether
    /// the gift has run one window already (where the backend drops, a gift
    /// lasts two; see [`Ceiling::grow`]).
    given: usize,
    gift_held: bool,
    /// Whether the last sign of a neighbour was room this limit gave away
    /// being taken, not room it found running out (a lone limit one short of
    /// its ceiling finds and loses room once, after slow start).
    neighbour_took: bool,
    /// The last return from a gift or a yield, until a timeout's worth of
    /// nanoseconds (and [`RETURN_CALL_SLACK`]) has passed since it began:
    /// where the backend drops, its call back at the timeout says a
    /// neighbour took the room (see [`Ceiling::return_dropped`]).
    returned: Option<Returned>,
    /// Whether room was taken at each of the last eight returns from a gift
    /// or a yield (bit 0 the last).
    returns: u8,
    /// Clean tries of the ceiling in a row, and whether the room they found
    /// came on a quiet backend.
    found: u32,
    room: bool,
    /// The limit this law last asked for, and whether it asked again for a
    /// try in a run of tries that the limiter withheld.
    asked: usize,
    reasked: bool,
    /// Whether the limiter withheld a probe of the ceiling this law asked
    /// for from rest, and none has run since.
    owed: bool,
    /// The exchange's credit: permits earned toward the next gift (below 1,
    /// or below 2 while the first window of a turn waits).
    credit: f64,
    /// Windows of the exchange's current turn of [`EXCHANGE_TURN`] that
    /// gave (or could have: a window that earned no whole permit counts).
    turn: u32,
    /// The law's splitmix64 stream, and the seed it started from (kept
    /// through a reset).
    rng: u64,
    seed: u64,
    /// The lowest mean success latency of a measured window, or of a pool
    /// of shorter clean windows, since the last floor probe (see
    /// [`Ceiling::floor`]).
    floor: Floor,
    /// The clean windows since the last floor taken from them.
    pool: LatencyPool,
    /// How far one success's latency strays from the mean.
    spread: Spread,
    since_floor_probe: u32,
    /// Consecutive windows cut on latency.
    latency_cuts: u32,
    /// The limit to restore after a floor probe in progress.
    floor_probe: Option<usize>,
    /// The mean success latency of the window that started it.
    probe_from: Option<f64>,
    /// The concurrency served in the last measured window, and the limit
    /// it was measured at.
    served: Option<f64>,
    served_at: usize,
    /// How far the measure before the last one fell short of its limit,
    /// when that limit was one below the last one's: an open demand's gaps
    /// between arrivals, or what the backend did not take.
    short_before: f64,
    /// The share of its limit the measure before the last one served, where
    /// nothing failed in it, and that limit.
    share_before: Option<(f64, usize)>,
    /// Background failure probability per sample (failures that come at any
    /// load: a flaky network), learned from every window (against
    /// [`NOISE_PRIOR_SAMPLES`]' prior, see [`Ceiling::learned_noise`])...
    noise: Decayed,
    /// ...and from the windows below the lowest recent resting level alone:
    /// noise fails there as often, a soft ceiling less.
    noise_below: Decayed,
    /// That lowest recent resting level, and the windows since it was set.
    lowest_rest: usize,
    lowest_rest_age: u32,
    /// Fresh failures and samples of the windows spent at the resting level
    /// `rest_level` (not a gift's windows nor its return), overload
    /// included: what the backend fails there.
    rest_level: usize,
    at_rest: Tally,
    /// Fresh failures and samples since the last overload.
    run: Tally,
    /// Samples of the last window without a fresh failure.
    full_samples: u64,
    /// Nanoseconds of the longest busy window: how long a full window runs
    /// where none has run clean (see [`Ceiling::held`]).
    full_nanos: u64,
    /// The window that measured `served` had no fresh failure (late ones,
    /// of calls admitted before it, do not count).
    served_clean: bool,
    /// Windows in a row that ended in overload.
    overloads: u32,
    /// A descent from an exploration's failure in progress: its step (0:
    /// none) and the exploration's last clean level, where it ends.
    descend: usize,
    descend_to: usize,
    /// A window at half the limit is due to check the floor (see
    /// `latency`).
    floor_due: bool,
    /// A window has been slower than the floor allows.
    latency_seen: bool,
    /// Windows since failures came back long after the service time (see
    /// [`Ceiling::drops`]).
    since_drop: u32,
    /// What the last failures that timed out waited, in nanoseconds.
    drop_wait: f64,
    /// Nanoseconds since the law last asked for a probe of the ceiling from
    /// rest. Counted from the ask, not from the window at the ceiling as the
    /// calls are: where the backend drops, a try holds its limit at the
    /// ceiling for windows until the calls it lost come back, and counted
    /// from those windows the next try came later (a ceiling that stepped
    /// down behind a 10 s timeout, scenario 40: the worst goodput of seeds
    /// 0–9 fell from 0.999 to 0.986 of the capacity).
    since_try_nanos: u64,
    /// Calls since the limit last ran at its remembered ceiling (a probe, or
    /// a try of room found).
    since_try_calls: u64,
    /// The try whose window served no more than the level below, held until
    /// the call the backend dropped comes back (see
    /// [`Ceiling::await_dropped`]); 0 when none is.
    awaiting: usize,
    /// Where the held limit goes when it ends, and nanoseconds since the
    /// hold began (its first window included).
    await_to: usize,
    awaited_nanos: u64,
    /// The hold awaits calls sent again as late timeouts came back (see
    /// the overload branch of [`Ceiling::decide`]).
    await_sent_again: bool,
    /// The limit of the last window, and how long it has been in force
    /// (nanoseconds, that window included).
    in_force: usize,
    in_force_nanos: u64,
    /// Fresh failures and samples of the windows at that limit, halved
    /// past two full windows of samples so they tell of the recent ones.
    in_force_failures: u64,
    in_force_samples: u64,
    /// The limits of the windows before this one and their lengths.
    recent: Recent,
    /// Slow start's successes at that limit.
    slow_start_pool: LatencyPool,
    /// The windows at the resting level and its probes since the last
    /// timeout's worth of them (see [`Ceiling::unfilled`]).
    unfilled: Unfilled,
    /// The level a limit sheds permits toward, one per fresh timeout (0:
    /// none; see [`Ceiling::shedding`]), and nanoseconds since the last.
    shed_to: usize,
    shed_step: usize,
    shed_nanos: u64,
    /// The levels accepted past a soft ceiling's onset.
    soft: SoftRest,
    /// Whether the last clean window under a settled limit completed
    /// clearly fewer calls than the limit carries (see
    /// [`Ceiling::note_demand`]): the demand left permits free, and what
    /// it served is the demand's concurrency, not the ceiling's.
    demand_short: bool,
}

impl Default for Ceiling {
    fn default() -> Self {
        Self::new(CEILING_DEFAULT_TOLERANCE, DEFAULT_UTILIZATION)
    }
}

impl Ceiling {
    /// A Ceiling law with latency `tolerance` (the queue it allows above the
    /// floor, as a fraction) and the `utilization` a window needs to grow the
    /// limit. The builder checks both.
    pub fn new(tolerance: f64, utilization: f64) -> Self {
        let mut law = Self {
            tolerance,
            utilization,
            phase: Phase::SlowStart,
            rested: 0,
            rest: 0,
            since_yield: 0,
            yield_backoff: 1,
            yielding: false,
            yielded: false,
            rest_failed: false,
            yield_hold: 0,
            since_neighbour: u32::MAX,
            given: 0,
            gift_held: false,
            neighbour_took: false,
            returned: None,
            returns: 0,
            found: 0,
            room: false,
            asked: 0,
            reasked: false,
            owed: false,
            // Half a permit to start with: the first gift, which waits for
            // two permits, comes within two periods of
            // `EXCHANGE_WINDOWS / limit` windows.
            credit: 0.5,
            turn: 0,
            rng: DEFAULT_SEED,
            seed: DEFAULT_SEED,
            floor: Floor::default(),
            pool: LatencyPool::default(),
            spread: Spread::default(),
            since_floor_probe: PROBE_SPACING,
            probe_from: None,
            latency_cuts: 0,
            floor_probe: None,
            served: None,
            served_at: 0,
            short_before: 0.0,
            noise: Decayed::default(),
            noise_below: Decayed::default(),
            lowest_rest: usize::MAX,
            lowest_rest_age: 0,
            rest_level: 0,
            at_rest: Tally::default(),
            run: Tally::default(),
            full_samples: 0,
            full_nanos: 0,
            served_clean: false,
            share_before: None,
            overloads: 0,
            descend: 0,
            descend_to: 0,
            floor_due: false,
            latency_seen: false,
            since_drop: u32::MAX,
            drop_wait: 0.0,
            since_try_nanos: 0,
            since_try_calls: 0,
            awaiting: 0,
            await_to: 0,
            awaited_nanos: 0,
            await_sent_again: false,
            in_force: 0,
            in_force_nanos: 0,
            in_force_failures: 0,
            in_force_samples: 0,
            recent: Recent::default(),
            slow_start_pool: LatencyPool::default(),
            soft: SoftRest::default(),
            demand_short: false,
            unfilled: Unfilled::default(),
            shed_to: 0,
            shed_step: 1,
            shed_nanos: 0,
        };
        law.rest = law.draw_rest();
        law
    }

    /// The next number of the law's splitmix64 stream.
    fn draw(&mut self) -> u64 {
        let x = self.rng;
        self.rng = x.wrapping_add(GOLDEN_GAMMA);
        splitmix64(x)
    }

    /// 2, 3 or 4 windows: probes of clients that started together drift
    /// apart.
    fn draw_rest(&mut self) -> u32 {
        2 + (self.draw() % 3) as u32
    }

    /// The permits a limit at rest gives away this window in the exchange:
    /// it earns `limit / EXCHANGE_WINDOWS` permits of credit and gives the
    /// whole ones it holds, keeping one permit — except that the first
    /// window of each turn of [`EXCHANGE_TURN`] waits until
    /// [`EXCHANGE_FIRST_GIFT`] permits are earned (a limit of 15 tries,
    /// tries, gives 2, tries, gives 1, tries; 45 gives 3, 1 and 2, then
    /// tries). A limit of 2 or less does not wait: it could give only one,
    /// and the rest of the credit would be lost.
    fn gift(&mut self, limit: usize) -> usize {
        self.credit += limit as f64 / EXCHANGE_WINDOWS;
        if self.turn == 0 && self.credit < EXCHANGE_FIRST_GIFT && limit > 2 {
            return 0;
        }
        self.turn = (self.turn + 1) % EXCHANGE_TURN;
        let whole = self.credit.floor();
        self.credit -= whole;
        (whole as usize).min(limit.saturating_sub(1))
    }

    /// The concurrency the backend served, rounded, when it was measured
    /// where the limit had a permit or more the backend did not fill — the
    /// ceiling's level (an open demand keeps a fraction of one free between
    /// arrivals: that does not count).
    fn served_below_limit(&self) -> Option<usize> {
        self.served
            .filter(|&n| self.served_at as f64 - n >= 1.0)
            .map(|n| n.round() as usize)
    }

    /// [`Ceiling::served_below_limit`] as a share of what the measure
    /// before it served, where that one ran clean at a lower limit and left
    /// a permit or more of it unfilled, but no more than [`SHARE_MIN`]
    /// allows: it fell short of its limit only by the demand's gaps between
    /// arrivals, and so did the last one beside the permits the backend did
    /// not fill. At most the limit it was measured at. (Taken as it was, an
    /// exploration under an open demand 5 % short at every step cut to 36
    /// of a ceiling of 40 at a backend that drops, and the tries above it,
    /// measured within the noise of a second's calls, found no room for
    /// 20 s.)
    fn served_ceiling(&self) -> Option<usize> {
        let served = self
            .served
            .filter(|_| self.served_below_limit().is_some())?;
        let share = self
            .share_before
            .filter(|&(share, at)| {
                at < self.served_at && share >= SHARE_MIN && (1.0 - share) * at as f64 >= 1.0
            })
            .map_or(1.0, |(share, _)| share.min(1.0));
        Some(((served / share).round() as usize).min(self.served_at))
    }

    /// Resting windows between two yields at a limit of `limit`: its own
    /// period, `YIELD_PERMITS / limit` rounded and at least
    /// `YIELD_EVERY_MIN`, times the back-off, at most `YIELD_EVERY_MAX` —
    /// but `YIELD_EVERY_MIN` for the first yield while no window at the
    /// resting level has failed. Clients that start above a ceiling they
    /// share cut unequally: some fell to 1 and failed every call until a
    /// holder first gave room away, 30 windows after it came to rest at 10
    /// (six clients from 10 on a ceiling of 36: two of them got no call
    /// through for 31 s; two on a ceiling of 3: 55 % of all calls failed).
    /// A lone limit pays for one yield more. Where its resting windows fail
    /// (background noise), the return of a yield may fail too, and an
    /// early one, before the noise is learned, was taken for a neighbour's
    /// sign: a lone limit under 3 % of random failures then exchanged with
    /// nobody (0.97 of the capacity fell to 0.85).
    fn yield_every(&self, limit: usize) -> u32 {
        if !self.yielded && !self.rest_failed {
            return YIELD_EVERY_MIN;
        }
        let own = (YIELD_PERMITS / limit.max(1) as f64).round() as u32;
        own.max(YIELD_EVERY_MIN)
            .saturating_mul(self.yield_backoff)
            .min(YIELD_EVERY_MAX)
    }

    /// Starts a yield at `limit`: its resting count restarts, and one permit
    /// of it stays free `YIELD_HOLD` windows more from a limit of
    /// `YIELD_HOLD_FROM`.
    fn start_yield(&mut self, limit: usize) -> u32 {
        self.since_yield = 0;
        self.yielding = true;
        self.yielded = true;
        if limit >= YIELD_HOLD_FROM {
            YIELD_HOLD
        } else {
            0
        }
    }

    /// Room a yield gave away was taken: a neighbour shares the ceiling.
    /// Keep giving at the limit's own period.
    fn yield_taken(&mut self) {
        self.yielding = false;
        self.yield_backoff = 1;
        self.neighbour_sign();
    }

    /// Back from a yield at `limit` without a failure: nobody took the room.
    /// Give it less often.
    fn yield_untaken(&mut self, limit: usize) {
        self.returns <<= 1;
        self.yielding = false;
        if self.yield_every(limit) < YIELD_EVERY_MAX {
            self.yield_backoff = self.yield_backoff.saturating_mul(2);
        }
    }

    /// Whether the backend drops what it cannot take: failures (overload, or
    /// its drain) came back at a timeout, far past the service time, in the
    /// last [`DROPS_WINDOWS`] windows.
    fn drops(&self) -> bool {
        self.since_drop < DROPS_WINDOWS
    }

    /// Whether a neighbour sharing the ceiling showed itself in the last
    /// [`NEIGHBOUR_WINDOWS`] windows.
    fn neighbour(&self) -> bool {
        self.since_neighbour < NEIGHBOUR_WINDOWS
    }

    /// Whether background noise fails one sample in twenty windows of
    /// `samples` or more.
    fn noise_shows_in(&self, samples: u64) -> bool {
        self.noise_rate() * samples as f64 >= NOISE_SIGNIFICANCE
    }

    /// Room this limit gave away was taken: a sign of a neighbour. Believed
    /// at once on a quiet backend; where background noise fails a sample in
    /// twenty full windows or more, only when room was taken at two of the
    /// last [`SIGN_RETURNS`] returns. There a return's failure in its first
    /// few calls is noise one time in twenty (the window closes on it, and
    /// `k` calls before a failure are significant at a rate `r` while
    /// `k · r` < 5 %): under 1 % of random failures, single signs kept a
    /// lone limit on a ceiling of 100 exchanging with nobody, losing a
    /// permit at each, at 0.6–0.8 of its ceiling.
    fn neighbour_sign(&mut self) {
        self.returns = (self.returns << 1) | 1;
        self.believe_sign();
    }

    /// Believes the sign in bit 0 of `returns` (see
    /// [`Ceiling::neighbour_sign`]).
    fn believe_sign(&mut self) {
        if !self.noise_shows_in(self.full_samples)
            || (self.returns & SIGN_RETURNS_MASK).count_ones() >= 2
        {
            self.since_neighbour = 0;
            self.neighbour_took = true;
        }
    }

    /// Where the backend drops, a fresh failure of this window came back at
    /// the timeout: when that timeout, counted from the start of the last
    /// return from a gift or a yield, ends with this window (within
    /// [`RETURN_CALL_SLACK`] of it), the failed call is one the return sent
    /// into room a neighbour had taken — a sign of it, a timeout late, and
    /// the level the return ran at. (The window closes on the failure, so its
    /// end is the failure's time; a call the return sent went out as it
    /// began. Read from the window the return served instead, a measure
    /// short by a permit or more — one permit of 20 at 200 ms calls is within
    /// a second's spread — showed lone limits neighbours, and their worst
    /// goodput fell from 0.993 to 0.965.) The sign takes the place of the
    /// "untaken" the return's window noted in `returns`; a yield's return
    /// read so was taken, and the next yield comes at its own period again.
    fn return_dropped(&mut self) -> Option<usize> {
        let r = self.returned?;
        if (r.nanos as f64 - self.drop_wait).abs() > RETURN_CALL_SLACK * self.drop_wait {
            return None;
        }
        self.returned = None;
        if r.from_yield {
            self.yield_backoff = 1;
        }
        self.returns |= 1;
        self.believe_sign();
        Some(r.level)
    }

    /// Whether a window at `limit` probes the remembered ceiling at a
    /// backend that answers at once: what [`SoftRest`] counts.
    fn probing(&self, limit: usize) -> bool {
        self.at_ceiling(limit) && !self.drops()
    }

    /// Whether `limit` is the remembered ceiling: a probe or a try.
    fn at_ceiling(&self, limit: usize) -> bool {
        matches!(self.phase, Phase::Known { ceiling } if limit == ceiling)
    }

    /// Whether `limit` is the resting level, one below the remembered
    /// ceiling.
    fn resting(&self, limit: usize) -> bool {
        matches!(self.phase, Phase::Known { ceiling } if limit + 1 == ceiling)
    }

    /// Whether the fresh failures of the windows at the limit in force,
    /// together, are more than background noise explains (at
    /// `alpha`).
    fn significant_at_limit(&self, alpha: f64) -> bool {
        significant_with(
            self.noise_rate(),
            self.in_force_failures,
            self.in_force_samples,
            alpha,
        )
    }

    /// Rest just below `ceiling` from now on.
    fn remember(&mut self, ceiling: usize) {
        self.phase = Phase::Known { ceiling };
        self.rested = 0;
        // A new resting level ends the hold of a yield (kept one below the
        // old one) and the probe owed to the old one.
        self.yield_hold = 0;
        self.owed = false;
    }

    /// Whether `failures` of `samples` are more than background noise could
    /// explain: `P(F ≥ failures) < NOISE_SIGNIFICANCE` for `F` Poisson with
    /// mean `noise · samples`.
    fn significant(&self, failures: u64, samples: u64) -> bool {
        significant_at(self.noise_rate(), failures, samples)
    }

    /// The background failure rate: the one learned from every window, but
    /// no more than the windows below the lowest recent resting level fail
    /// once they have said enough. Noise fails at any load; a soft ceiling
    /// fails some calls in every window above it, and learned from them
    /// alone the rate rose with the limit (to 2–4 % on a ceiling whose
    /// errors start at 20 and reach all calls at 80), so that one failure in
    /// a window was never overload and the limit rested where a quarter of
    /// its calls failed.
    fn noise_rate(&self) -> f64 {
        if self.noise_below.weight >= NOISE_BELOW_WEIGHT {
            self.learned_noise().min(self.noise_below.rate(0.0))
        } else {
            self.learned_noise()
        }
    }

    /// The rate every window taught, against a prior of
    /// [`NOISE_PRIOR_SAMPLES`] samples without a failure.
    fn learned_noise(&self) -> f64 {
        self.noise.rate(NOISE_PRIOR_SAMPLES / NOISE_SAMPLES)
    }

    /// Notes a window at `limit`: at the resting level, and neither a gift's
    /// window nor its return, its failures tell what the backend fails there.
    fn note_rest(&mut self, limit: usize, failures: u64, samples: u64) {
        if !self.resting(limit) || self.given > 0 {
            return;
        }
        if self.rest_level != limit {
            self.rest_level = limit;
            self.at_rest = Tally::default();
        }
        // A failure at a level that has rested there before: one of a
        // cascade of cuts at start-up fails every level once.
        self.rest_failed |= failures > 0 && self.at_rest.samples > 0.0;
        self.at_rest.fold(failures, samples);
    }

    /// Folds a window into the run since the last overload and tells
    /// whether the run, all together, failed more than background noise
    /// explains: a soft ceiling fails a few calls in every window above it,
    /// too few in any one window.
    fn lossy_run(&mut self, failures: u64, samples: u64) -> bool {
        self.run.fold(failures, samples);
        significant_with(
            self.noise_rate(),
            self.run.failures.floor() as u64,
            self.run.samples.round() as u64,
            RUN_SIGNIFICANCE,
        )
    }

    /// Whether `failures` of `samples` in the window that returned from a
    /// gift at `limit` are more than the backend fails at that level anyway
    /// (a soft ceiling fails some calls at every level above it; noise at
    /// any level): only then did a neighbour take the gift.
    fn taken(&self, limit: usize, failures: u64, samples: u64) -> bool {
        let rate = if self.rest_level == limit && self.at_rest.samples > 0.0 {
            self.at_rest.failures / self.at_rest.samples
        } else {
            0.0
        };
        significant_at(rate.max(self.noise_rate()), failures, samples)
    }

    /// Whether a window at `limit` ran below the lowest resting level of the
    /// last [`NOISE_BELOW_WINDOWS`] windows (or so). Below the current
    /// resting level alone was not enough: when the limit crept up a soft
    /// ceiling, the levels just below it failed almost as much, and the
    /// bound rose with it.
    fn below_lowest_rest(&mut self, limit: usize) -> bool {
        let Phase::Known { ceiling } = self.phase else {
            return false;
        };
        let rest = ceiling.saturating_sub(1);
        self.lowest_rest_age += 1;
        if rest < self.lowest_rest && self.lowest_rest != usize::MAX {
            // A new lowest resting level: what failed below the old one is
            // not evidence about the levels below this one. Kept, a rate of
            // zero learned while the network was clean bound the noise that
            // began later, and each of its failures cut the limit further
            // (to a tenth of the capacity, for good).
            self.noise_below = Decayed::default();
        }
        if rest < self.lowest_rest || self.lowest_rest_age > NOISE_BELOW_WINDOWS {
            self.lowest_rest = rest;
            self.lowest_rest_age = 0;
        }
        limit < self.lowest_rest
    }

    /// Folds a window's failure fraction into the background rate; `below`:
    /// the window ran below the lowest recent resting level.
    fn learn_noise(&mut self, failures: u64, samples: u64, below: bool) {
        if samples == 0 {
            return;
        }
        let fraction = failures as f64 / samples as f64;
        // At most NOISE_MAX_FRACTION, or NOISE_FULL_WINDOW_FAILURES of a full
        // window's samples where a full window holds fewer than 40: at a
        // limit of 1 (18 samples a window) one failure was always over 5 %,
        // the rate was never learned, and 2 % of random failures held the
        // limit at 1 for a minute.
        let most = if self.full_samples > 0 {
            let few = NOISE_FULL_WINDOW_FAILURES / self.full_samples as f64;
            NOISE_MAX_FRACTION.max(few.min(NOISE_FEW_SAMPLES_MAX_FRACTION))
        } else {
            NOISE_MAX_FRACTION
        };
        if fraction > most {
            return;
        }
        let keep = keep(samples);
        self.noise.fold(fraction, keep);
        if below {
            self.noise_below.fold(fraction, keep);
        }
    }

    /// An overload failure: `failures` fresh ones of `samples` at limit
    /// `limit`; `burst`, the window's peak in flight where the failure came
    /// back at once and the demand leaves the limit unfilled (see
    /// [`Ceiling::note_demand`]).
    fn overloaded(
        &mut self,
        limit: usize,
        failures: u64,
        samples: u64,
        burst: Option<usize>,
    ) -> usize {
        self.found = 0;
        if std::mem::take(&mut self.room) {
            // Room found at the ceiling ran out within two windows: it was
            // a neighbour's permit, not a ceiling that moved.
            self.since_neighbour = 0;
            self.neighbour_took = false;
        }
        let given = std::mem::take(&mut self.given);
        if given > 0 && self.taken(limit, failures, samples) {
            // The climb back from an exchange failed: a neighbour took the
            // permits given. Rest one below this, or the whole gift below it
            // when that was EXCHANGE_TAKEN_WHOLE or more — or, when the
            // backend served less than that, the ceiling came down: to what
            // was served, below a ceiling one above the rest level.
            self.neighbour_sign();
            let lose = if given >= EXCHANGE_TAKEN_WHOLE {
                given
            } else {
                1
            };
            let rest = limit.saturating_sub(lose);
            let next = self.served_below_limit().unwrap_or(rest).min(rest).max(1);
            self.remember(rest.max(1) + 1);
            return next;
        }
        if self.yielding {
            // The room given away was taken: a neighbour shares the ceiling.
            self.yield_taken();
        }
        let tenth = (limit as f64 * DECREASE) as usize;
        let descend = std::mem::take(&mut self.descend);
        // Not where the demand leaves the limit unfilled: its bursts meet a
        // hard ceiling less often at each level above it, as a soft
        // ceiling's errors rise with the load, but a level above a hard
        // ceiling adds no call the backend serves. (Accepted, levels of
        // 11–13 over a ceiling of 10 under an open demand of 5 in flight
        // refused 1.4 % of the calls.)
        if descend == 0
            && !self.demand_short
            && self.probing(limit)
            && self.soft.accept(limit, self.noise_rate())
        {
            // A probe past a soft ceiling's onset failed, but its probes
            // together show the level worth its failures: rest there.
            self.remember(limit + 1);
            return limit;
        }
        let probe = matches!(self.phase, Phase::Known { ceiling } if limit >= ceiling);
        if let Some(met) = burst
            .map(|peak| peak.min(limit))
            .filter(|&met| met > 1 && !probe)
        {
            // A burst of a demand that leaves the limit unfilled met the
            // ceiling at `met` calls in flight at most: down by a tenth at
            // least, to one below it, and the ceiling is `met`. What was
            // served is the demand's mean, not the ceiling. (Cut to it, an
            // open demand of 13 calls in flight on average under a ceiling
            // of 26 rested at 13–15 after every burst that reached 27, and
            // its limit shed 9 % of the calls the backend had room for.)
            let next = (met - 1).min(tenth).max(1);
            self.remember(met.max(next + 1));
            return next;
        }
        let (next, ceiling) = match self.phase {
            // An exploration failed at a backend that answers at once: the
            // ceiling lies between its last clean level and this one.
            // Descend one fresh failure a step, each a few milliseconds,
            // rather than bisecting up, a clean window of a second a step
            // (after a step from 10 to 100, a failure at 103 above a clean
            // 55 took 5 windows to climb back to 100).
            Phase::Explore { .. } if self.descends(limit) => {
                self.descend = (limit - self.descend_to).div_ceil(DESCEND_STEPS);
                (limit - self.descend, limit)
            }
            // The next step of the descent.
            Phase::Known { ceiling } if descend > 0 && limit < ceiling && self.descends(limit) => {
                self.descend = descend;
                ((limit - descend).max(self.descend_to), limit)
            }
            // A probe failed: the ceiling is still there — unless the probe
            // served more than a tenth less than the resting level just
            // served, clean: the ceiling fell under the probe (a backend
            // that drops answers it a timeout later, when the window has
            // measured it). Then down to what was served. (Read as the
            // ceiling still there, a step from 40 to 20 during a probe came
            // down a second later, 2 s after the step.) Not where a burst of
            // a demand short of the limit met it: the probe's window, closed
            // by the failure, served the demand's mean over a fraction of a
            // second. (Read as a fall, a probe of 11 over a ceiling of 10
            // under a demand of 7 in flight cut to 4.)
            Phase::Known { ceiling } if limit >= ceiling => {
                match self.fell_under_probe(limit).filter(|_| burst.is_none()) {
                    Some(served) => (served, served + 1),
                    None => (limit - 1, limit),
                }
            }
            // Hit while resting at a level that held: the ceiling came down
            // (or a neighbour sharing it probed). Down to what was served,
            // and by a tenth at least, so a bigger client gives up more room.
            Phase::Known { .. } if self.resting(limit) && self.rested > 0 => {
                let next = self
                    .served
                    .map_or(tenth, |n| (n.round() as usize).min(tenth));
                (next, limit)
            }
            // Climbing (slow start, exploring, or back toward the resting
            // level): down to what was served. Measured at a limit the
            // backend could not fill, that is the ceiling; measured at one it
            // did fill, the ceiling is somewhere up to here. Served at or
            // above `limit`, it is older than the ceiling: cut by a tenth.
            // (Cut to one below, a limit whose calls all failed held for
            // good when a window of the calls admitted before the cut came
            // between: an error ceiling that appeared under a limit of 116,
            // after 100 were served there.)
            _ => match (
                self.served_below_limit(),
                self.served,
                self.served_ceiling(),
            ) {
                // Measured where nothing failed, at a backend that does not
                // drop: it took all `served_at` (what it served short of that
                // was the measure's edges, or the demand), so that is no
                // ceiling; try between. (After a step from 20 to 100, an
                // exploration clean at 80, where 78.9 was measured, and
                // failing at 144 cut to 79, and took 20 s to reach 100.)
                (Some(_), _, _) if self.served_clean && !self.drops() && self.served_at < limit => {
                    (self.served_at.midpoint(limit), limit)
                }
                (Some(_), _, Some(served)) if served < limit => (served, served + 1),
                // `served` held and `limit` failed: try between.
                (None, Some(n), _) if (n.round() as usize) < limit => {
                    ((n.round() as usize).midpoint(limit), limit)
                }
                _ => (tenth, limit),
            },
        };
        let next = next.min(limit - 1).max(1);
        self.remember(ceiling.max(next + 1));
        next
    }

    /// What the probe at `limit` served, rounded, when it was measured in
    /// the probe's own window and fell more than a tenth below what the
    /// resting level's clean window before it served.
    fn fell_under_probe(&self, limit: usize) -> Option<usize> {
        let (share, at) = self.share_before.filter(|&(_, at)| at + 1 == limit)?;
        let served = self.served.filter(|_| self.served_at == limit)?;
        (served < share * at as f64 * DECREASE).then(|| (served.round() as usize).max(1))
    }

    /// Whether an exploration that failed at `limit` descends (or a descent
    /// goes on): the backend
    /// answers at once (it does not drop), and its last clean level
    /// `descend_to` is below `limit` — unless a window at that level measured
    /// the ceiling itself (it served a permit or more short of its limit
    /// while something failed). The measure does not decide otherwise: under
    /// noise, whose failures close windows early, the last one long enough
    /// to measure may be levels old (the steps from 30 to 90 under 0.5 %
    /// noise cut to the 54 served long before, and reached 90 in 11 s at
    /// the median seed, 6 s with this).
    fn descends(&self, limit: usize) -> bool {
        let measured_ceiling = !self.served_clean
            && self.served_at >= self.descend_to
            && self.served_below_limit().is_some();
        !self.drops() && self.descend_to < limit && !measured_ceiling
    }

    /// Whether a window without a fresh failure at `limit` shows, by the
    /// calls admitted before it that failed in it, that the ceiling fell
    /// below `limit`; the level the ceiling is at most, if so.
    ///
    /// A permit holds one call at a time, so the calls in flight as the
    /// window began that were to fail — over a ceiling `C`, at most the
    /// limit then in force `L'` less `C` — bound the ceiling: `C ≤ L' −
    /// stale`. An overload already answered (a cut from `L'` to `limit`)
    /// explains `L' − limit` of them and the edges of the window one more;
    /// beyond that, and beyond what the background rate fails of `L'`
    /// calls, the ceiling is below `limit`. (Where the backend drops, a cut
    /// waits for a fresh failure, a timeout after the first call it
    /// admitted: after a step from 40 to 20 under a 1 s timeout, the window
    /// that began as the step came failed 20 calls admitted at 41 and was
    /// read as the drain of the probe the window before, and the limit came
    /// down a second later, 2 s after the step.)
    fn fell_below(&self, limit: usize, w: &WindowSummary, late: Option<usize>) -> Option<usize> {
        if w.failures > 0 {
            return None;
        }
        let admitted = late?;
        let answered = admitted.saturating_sub(limit) as u64 + 1;
        let beyond = w.stale_failures.saturating_sub(answered);
        self.late_show_fall(beyond, admitted)
            .then(|| admitted.saturating_sub(w.stale_failures as usize).max(1))
            .filter(|&below| below < limit)
    }

    /// Whether `late` failures of the calls admitted under a limit of
    /// `admitted` show a ceiling that fell: at least [`STALE_FELL_MIN`] of
    /// them, more than the background rate fails of `admitted` calls.
    fn late_show_fall(&self, late: u64, admitted: usize) -> bool {
        late >= STALE_FELL_MIN && significant_at(self.noise_rate(), late, admitted as u64)
    }

    /// The highest limit in force while the calls that failed late in this
    /// window (of `limit`) were admitted; `None` where that is not known.
    /// Where failures come back within a window's length, they were admitted
    /// in the window before it. Where they came back at a timeout longer
    /// than that (`timed_out`), a timeout before they came back: at a
    /// backend that drops, every window that gives room away is a decrease,
    /// so the calls its timeouts answer are all late, and read only from the
    /// window before (where slower ones may have been admitted under other
    /// limits), a lone limit that believed in a neighbour after a ceiling
    /// stepped down from 30 to 10 behind a 3 s timeout kept giving and
    /// climbing back at 3 × the ceiling for a minute. Slower still than the
    /// windows kept reach: unknown. Late failures of another kind where the
    /// backend drops (answered at once, with the timeouts not yet back) may
    /// have been admitted windows earlier, under other limits, and held their
    /// permits through the windows between while the backend had room: not
    /// known either. (Read as admitted in the window before, a 3 s timeout's
    /// drain after a cut from 60 to 40 cut again to 20, and on to 40 % of the
    /// capacity.)
    fn late_admitted_under(
        &self,
        limit: usize,
        w: &WindowSummary,
        timed_out: bool,
    ) -> Option<usize> {
        if self.recent.is_empty() {
            return None;
        }
        if self.late_from_last_window() {
            return Some(self.recent.last_limit());
        }
        if !timed_out {
            return None;
        }
        let (first, last) = (
            BLAME_EARLY * self.drop_wait,
            w.duration_nanos as f64 + self.drop_wait / BLAME_EARLY,
        );
        self.recent.highest(limit, w.duration_nanos, first, last)
    }

    /// Where late timeouts behind a timeout longer than a window show a
    /// ceiling below the one remembered, though not below the limit (a cut
    /// already answered them): remember it. (Kept, the limit climbed back to
    /// rest under the old memory after a cut at rest, 20 to 39 on a ceiling
    /// that fell from 40 to 20 behind 10 s, and every permit above 20 it
    /// climbed through held a dropped call for the timeout.)
    fn lower_memory(&mut self, limit: usize, w: &WindowSummary, late: Option<usize>) {
        if self.late_from_last_window() || w.failures > 0 {
            return;
        }
        let Phase::Known { ceiling } = self.phase else {
            return;
        };
        let Some(admitted) = late else {
            return;
        };
        let shown = self.late_show_fall(w.stale_failures, admitted);
        // The edges of a window can add one, as in `fell_below`.
        let below = (admitted + 1)
            .saturating_sub(w.stale_failures as usize)
            .max(limit);
        if shown && below + 1 < ceiling {
            self.remember(below + 1);
        }
    }

    /// Whether failures come back within a window's length: at a backend
    /// that does not drop, or whose timeout is no longer than the window
    /// before this one.
    fn late_from_last_window(&self) -> bool {
        !self.drops() || self.drop_wait <= self.recent.last_nanos() as f64
    }

    /// The calls admitted before this window at `limit` that failed in it,
    /// where they were admitted at `limit` or below it (see
    /// [`Ceiling::late_admitted_under`]): the same evidence as the window's
    /// own failures. (Left out, a window that closed on its first fresh
    /// failure counted one failure of the samples every call admitted
    /// before it gave, and at a soft ceiling a third of whose calls failed
    /// it read 1 of 45: noise.)
    fn late_at_most(limit: usize, w: &WindowSummary, late: Option<usize>) -> u64 {
        match late {
            Some(admitted) if admitted <= limit => w.stale_failures,
            _ => 0,
        }
    }

    /// After a window of the floor probe at half the limit (`limit`; `ok`
    /// successes of mean `mean_ok`): the limit for the next window. The
    /// probe holds until it has run two
    /// round trips and its window's peak in flight is within its limit (the
    /// calls admitted before it have drained: the delay laws' baseline
    /// test), so that its last window's successes were admitted under it;
    /// four round trips if they never drain (a dropping backend's calls
    /// hold their permits until the timeout). Then that window's mean
    /// `mean_ok` is the floor, and the limit
    /// goes back to where it was, unless a fresh failure makes that the
    /// overload's decision. Where the mean is more than
    /// [`BASELINE_PROBE_DROP`] below the latency of the window that started
    /// the probe, the queue was ours: the mean only lowers the floor, and
    /// the limit the probe started from is cut on that latency, as in
    /// [`Ceiling::latency_limit`], if it is above the tolerance (else
    /// restored). Counts the windows since the last check.
    fn floor_probed(
        &mut self,
        limit: usize,
        w: &WindowSummary,
        ok: u64,
        mean_ok: Option<f64>,
    ) -> Option<usize> {
        self.since_floor_probe = self.since_floor_probe.saturating_add(1);
        let saved = self.floor_probe.take()?;
        // The probe's limit has been in force since it started. Two round
        // trips alone were not enough: a probe at 4 on 5 shared 300 ms
        // workers, whose first 1.2 s window still served the queue of the
        // 8 before it, took 363 ms for the floor (300 ms), and the limit
        // rested where tries cost 1.6 × the unloaded latency.
        let drained = w.peak_in_flight <= limit;
        let spanned =
            mean_ok.filter(|&m| self.has_run(2.0, m) && (drained || self.has_run(4.0, m)));
        if w.failures == 0 && mean_ok.is_some() && spanned.is_none() {
            // Too short to have seen its own calls come back: those that did
            // were admitted before it, at the full limit. (Taken as the
            // floor, a 600 ms queueing backend's floor rose to what the
            // queue made, and its p99 stayed at 4.4 s on some seeds; kept
            // out of it for good, a floor that truly rose, 500 ms to 1 s,
            // was never relearned, and the limit fell to 1.)
            self.floor_probe = Some(saved);
            return Some(limit);
        }
        // Ended early by a failure (not spanned), it measured nothing of its
        // own.
        let mut cut = None;
        if let Some(m) = spanned {
            // The windows before the probe measured the old floor.
            self.pool = LatencyPool::default();
            if self
                .floor()
                .is_some_and(|f| m * (1.0 + self.tolerance / 2.0) < f)
            {
                // Lower by more than half the tolerance: it may be lower
                // still. Check again.
                self.floor_due = true;
            }
            match self
                .probe_from
                .filter(|&from| m < (1.0 - BASELINE_PROBE_DROP) * from)
            {
                // Half the limit took more than a tenth off the latency: the
                // queue was ours, not a slower backend (the delay laws'
                // baseline rule). Adopted, a probe at 28 on 20 shared 1 s
                // workers took 1.5 s for the floor, read the 3 s of the
                // limit of 57 it restored as a jump to probe again, and
                // looped between the two: p99 3.6 s.
                Some(from) => {
                    self.lower_floor(m, ok);
                    // A fresh failure makes the decision the overload's,
                    // against the ceiling as it was.
                    cut = self
                        .allowed()
                        .filter(|&allowed| w.failures == 0 && from > allowed)
                        .map(|allowed| self.cut_to(saved, allowed / from));
                }
                None => self.floor.set(m, ok),
            }
        }
        self.since_floor_probe = 0;
        self.latency_cuts = 0;
        if w.failures > 0 {
            return None;
        }
        Some(cut.unwrap_or(saved))
    }

    /// Cuts `limit` by the ratio of the latency allowed to the latency
    /// measured, `ratio`, to at least one permit less (and at least 1), and
    /// remembers the ceiling one above the cut.
    fn cut_to(&mut self, limit: usize, ratio: f64) -> usize {
        let next = ((limit as f64 * ratio) as usize)
            .min(limit.saturating_sub(1))
            .max(1);
        self.remember(next + 1);
        next
    }

    /// Measures the concurrency the backend served by Little's law (`ok`
    /// successes of mean latency `mean_ok`), over a window long enough to
    /// hold a few round trips, and lowers the floor to their latency;
    /// whether it did. Clean windows shorter than that are pooled for the
    /// floor: a backend slower than half a window had none, and no latency
    /// control (a 600 ms queueing backend: p99 4.4 s against 0.9 s
    /// unloaded).
    fn measure(&mut self, limit: usize, w: &WindowSummary, ok: u64, mean_ok: Option<f64>) -> bool {
        self.pool_floor(w, ok, mean_ok);
        let Some(m) = mean_ok else {
            return false;
        };
        if ok < MEASURE_MIN_OK || !spans_two_round_trips(w.duration_nanos, m) {
            return false;
        }
        // In force since this window began, and above the window before's.
        if self.in_force_nanos == w.duration_nanos
            && limit > self.recent.last_limit()
            && !self.has_run(RAISED_MEASURE_ROUND_TRIPS, m)
            && self.significant(w.failures, w.samples)
        {
            // The first window of a raise, closed early by a failure: the
            // permits the raise added were filled at its start and came back
            // a whole number of times (twice in 150 ms of 55 ms calls) where
            // the others turned 2.7 times, so Little's law reads it short
            // (36.6 of a ceiling of 40, after a step up from 20: the rest,
            // three tries and a second exploration took 16 s where the
            // descent takes 6). Not a measure of the ceiling.
            return false;
        }
        self.lower_floor(m, ok);
        // Only a measure at the level below this window's says what a try
        // here should beat.
        self.short_before = self
            .served
            .filter(|_| self.served_at + 1 == limit)
            .map_or(0.0, |n| (self.served_at as f64 - n).max(0.0));
        self.share_before = self
            .served
            .filter(|_| self.served_clean && self.served_at > 0)
            .map(|n| (n / self.served_at as f64, self.served_at));
        self.served = Some(ok as f64 / w.duration_nanos as f64 * m);
        self.served_at = limit;
        // Clean: no call admitted in the window failed (late failures of
        // calls admitted before it, the drain of an overload already
        // answered, say nothing of what it took).
        self.served_clean = w.failures == 0;
        true
    }

    /// Notes whether the demand left a clean window's limit unfilled:
    /// `settled` is its success latency where the limit was in force two
    /// round trips before it began (so no raise is still filling) and no
    /// fresh failure came (see [`Ceiling::decide`]); a late one, too, makes
    /// it no clean window. It completed fewer than [`SHARE_MIN`] of the
    /// calls the limit carries at that latency, and fewer by
    /// [`DEMAND_SHORT_SIGMAS`] standard deviations of that count. Any other
    /// window leaves the last reading. A demand that fills the limit (a
    /// closed loop, or an open one above the capacity) serves what the
    /// backend takes; one short of it serves its own mean, and only its
    /// bursts reach the ceiling.
    fn note_demand(&mut self, limit: usize, w: &WindowSummary, settled: Option<f64>) {
        let Some(m) = settled.filter(|_| w.stale_failures == 0) else {
            return;
        };
        let full = limit as f64 * w.duration_nanos as f64 / m;
        let n = w.samples as f64;
        self.demand_short = n < SHARE_MIN * full && full - n > DEMAND_SHORT_SIGMAS * full.sqrt();
    }

    /// Adds a clean window (`ok` successes of mean latency `mean_ok`) to the
    /// floor's pool, and lowers the floor to the pool's mean once it holds
    /// enough; a window with a fresh failure, or without a success, starts
    /// the pool again.
    fn pool_floor(&mut self, w: &WindowSummary, ok: u64, mean_ok: Option<f64>) {
        match mean_ok {
            Some(m) if w.failures == 0 => {
                if let Some((pooled, n)) = self.pool.push_for_floor(ok, m, w.duration_nanos) {
                    self.lower_floor(pooled, n);
                }
            }
            _ => self.pool = LatencyPool::default(),
        }
    }

    /// Lowers the floor to a mean `m` of `ok` successes if that is lower
    /// (see [`Floor::lower`]).
    fn lower_floor(&mut self, m: f64, ok: u64) {
        self.floor.lower(m, ok, &self.spread);
    }

    /// The floor the law judges latency by (see [`Floor::value`]).
    fn floor(&self) -> Option<f64> {
        self.floor.value(&self.spread)
    }

    /// Whether the window's `all_failed` failures (fresh and late) waited more than
    /// [`DROPPED_WAIT`] times its successes' mean latency `mean_ok` (the
    /// floor's where it has none): a backend that drops what it cannot take
    /// answers at the client's timeout, far past its service. Remembers what
    /// they waited, the timeout, when they did.
    ///
    /// A window that closed on a call back at its timeout just after another
    /// closed holds it alone. Compared with no success, it read as a
    /// failure answered at once: above the resting level, one too early to
    /// be significant, held and then read as room (a try held for its
    /// dropped call took the next permit when the call came back, to 40 on a
    /// ceiling of 30).
    fn timed_out(
        &mut self,
        w: &WindowSummary,
        ok: u64,
        all_failed: u64,
        mean_ok: Option<f64>,
    ) -> bool {
        let Some(m) = mean_ok.or(self.floor()).filter(|_| all_failed > 0) else {
            return false;
        };
        let waited = (w.mean_rtt_nanos * w.samples as f64 - m * ok as f64) / all_failed as f64;
        let dropped = waited > DROPPED_WAIT * m;
        if dropped {
            self.drop_wait = waited;
        }
        dropped
    }

    /// Where the backend drops, a permit of the limit the backend does not
    /// take fails one call per timeout whatever the load: each call it admits
    /// is dropped, comes back at the timeout and goes out again into a full
    /// backend (a neighbour's calls, sent as their own come back, keep their
    /// places). Those failures read as background noise — a limit resting two
    /// or three permits over a ceiling of 30 behind a 2 s timeout taught
    /// itself a rate of 0.5 % and failed 0.5–0.6 % of the calls; clients
    /// sharing a backend that drops each held such permits, and their shares
    /// drifted apart as they won the room freed now and then.
    ///
    /// So: whether the windows at the resting level and
    /// its probes over the last timeout failed only by permits of the limit
    /// the backend never took: what they served (measured, on average) fell a
    /// permit or more short of their limits, and by about the permits their
    /// timeouts held (`timeouts × timeout / their length`, from half of that
    /// to half as much again and half a permit). If so, the ceiling is
    /// remembered one above what was served and the limit, held this
    /// window, sheds toward it ([`Ceiling::shedding`]). Not where the span's
    /// successes reached [`TAIL_REACH`] of the way from their mean latency
    /// to the timeout: a heavy tail the timeout cuts fails a share of the
    /// calls at every level, and its timeouts held permits as unfilled ones
    /// do, by Little's law exactly (a call timing out held its permit for
    /// the timeout). Read as unfilled permits, a tail of 50 ms plus an
    /// exponential of 100 ms behind a 400 ms timeout (3 % of the calls) shed
    /// a permit a span, again and again, to 0.46 of the best fixed limit;
    /// told apart, 0.75. A window at another
    /// level, or a new ceiling remembered, starts the count again; so does
    /// each timeout's worth of windows counted (windows judged overload are
    /// not counted).
    ///
    /// Counted window by window (a window whose fresh failures all timed out,
    /// none late, twice in a row), it never held where a limit resting over
    /// the ceiling probed one above it every few windows: each such decrease
    /// made the timeouts after it late, and a window without a timeout (one
    /// permit's call times out once a timeout) broke the run. A lone limit on
    /// a ceiling that fell from 20 to 8 behind a 5 s timeout rested at 13–14
    /// for a minute, 0.9 % of its calls timing out.
    fn unfilled(
        &mut self,
        limit: usize,
        w: &WindowSummary,
        ok: u64,
        timed_out: bool,
        measured: bool,
        late: Option<usize>,
    ) -> Option<usize> {
        let ceiling = match self.phase {
            Phase::Known { ceiling }
                if self.drops() && limit + 1 >= ceiling && limit <= ceiling =>
            {
                ceiling
            }
            _ => {
                self.unfilled = Unfilled::default();
                return None;
            }
        };
        if self.unfilled.ceiling != ceiling {
            self.unfilled = Unfilled {
                ceiling,
                ..Unfilled::default()
            };
        }
        // Late timeouts count where they were sent at this level or its probe:
        // sent at a level cut since, they held permits the backend took.
        let late = late
            .filter(|&under| under <= ceiling)
            .map_or(0, |_| w.stale_failures);
        let span = &mut self.unfilled;
        span.nanos = span.nanos.saturating_add(w.duration_nanos);
        span.ok += ok;
        span.ok_nanos += ok as f64 * w.mean_ok_rtt_nanos;
        span.reach = span.reach.max(w.max_ok_rtt_nanos);
        if timed_out {
            span.timeouts += w.failures + late;
            span.peak = span.peak.max(w.failures + late);
        }
        if let Some(n) = self.served.filter(|_| measured && self.served_at == limit) {
            span.served += n;
            span.short += limit as f64 - n;
            span.measures += 1;
        }
        if (span.nanos as f64) < BLAME_EARLY * self.drop_wait || span.measures == 0 {
            return None;
        }
        let span = std::mem::take(&mut self.unfilled);
        if span.tail_reaches(self.drop_wait) {
            return None;
        }
        let held = span.timeouts as f64 * self.drop_wait / span.nanos as f64;
        let short = span.short / f64::from(span.measures);
        if !(short >= 1.0 && short >= 0.5 * held && short <= 1.5 * held + 0.5) {
            return None;
        }
        let next = ((span.served / f64::from(span.measures)).round() as usize).max(1);
        self.remember(next + 1);
        self.shed_to = next;
        self.shed_step = usize::try_from(span.peak).unwrap_or(usize::MAX).max(1);
        self.shed_nanos = 0;
        Some(limit)
    }

    /// While the limit sheds permits the backend never takes (see
    /// [`Ceiling::unfilled`]), the limit after a window: one permit less per
    /// call that timed out fresh, at the moment it came back (the window
    /// closes on it, and the limiter takes the permit before it is sent
    /// again); otherwise held. `None` where it does not shed, or stops: at
    /// its target, where a failure came back at once (overload that is not
    /// this), or two timeouts after the last permit shed.
    ///
    /// Cut at once to what was served, the limit was below the calls those
    /// permits had sent, which held them until their timeout: the backend
    /// served that many fewer for up to a timeout (a ceiling that fell from
    /// 20 to 8 behind a 5 s timeout: 0.996 → 0.989 of the capacity). One at
    /// each fresh timeout, none is held: after a cut the others' timeouts
    /// come back late (sent before it) and their permits send again, but
    /// those calls, sent under the new limit, come back fresh a timeout
    /// later.
    fn shedding(&mut self, limit: usize, w: &WindowSummary, timed_out: bool) -> Option<usize> {
        if self.shed_to == 0 {
            return None;
        }
        if limit <= self.shed_to || !self.drops() || (w.failures > 0 && !timed_out) {
            self.shed_to = 0;
            return None;
        }
        self.shed_nanos = self.shed_nanos.saturating_add(w.duration_nanos);
        if w.failures > 0 {
            self.shed_nanos = 0;
            let step = usize::try_from(w.failures)
                .unwrap_or(usize::MAX)
                .max(self.shed_step);
            let next = limit.saturating_sub(step).max(self.shed_to);
            if next == self.shed_to {
                self.shed_to = 0;
            }
            return Some(next);
        }
        if self.shed_nanos as f64 > SHED_TIMEOUTS * self.drop_wait {
            self.shed_to = 0;
            return None;
        }
        Some(limit)
    }

    /// Whether a clean window, at a backend whose latency has risen with load
    /// (`latency_seen`), came too soon after the limit last moved to judge
    /// it where its latency is above the floor's tolerance (a cut, or a
    /// probe of the floor, follows where it is also past the noise of its
    /// successes, [`Ceiling::queued`]; holding only on those windows measured
    /// no better on the heavy-tailed variants, 13 of 48 bands failing either
    /// way) or where it would take a
    /// multiplicative step (an exploration, or the try of the ceiling that
    /// would start one): the limit has not been in force for two round trips (the
    /// window's latency `mean_ok`, else the floor), so the successes of the
    /// window were mostly admitted under the limit before. The law then
    /// holds the limit. Slow start waits one round trip instead
    /// ([`Ceiling::before_round_trip`]), and a window with a fresh failure
    /// is judged by it.
    ///
    /// Judged at once, 1 s calls in 1 s windows saw each change a window
    /// late: the exploration after three tries took a second step before
    /// the first came back (20 to 50 on 20 workers), and the cut that
    /// followed was cut again on the same stale latency (to 16): p99 2.4 s
    /// against 1.0 s unloaded, and 0.93 of the capacity. The tries of one
    /// permit and the climbs back after a cut are not held: a jittery
    /// backend's window means cross the tolerance now and then, which is
    /// enough to set `latency_seen`, and with them held for two round trips
    /// while cuts on failures came at once, the limit of a 1 s backend with
    /// 1 % of random failures sank (0.96 of the capacity to 0.90), and
    /// step-ups took twice as long. Nor is a backend that has not queued
    /// held: it answers its overload by failures, which come back at once
    /// (rejects) or are spaced by the drop rule. Nor is a window closed on a
    /// failure the background rate explains: under 1 % noise the windows
    /// last tens of milliseconds, and held on them, the climbs back from
    /// the cuts never came (0.97 of the capacity fell to 0.78).
    fn settling(&self, limit: usize, w: &WindowSummary, mean_ok: Option<f64>) -> bool {
        let slow = mean_ok
            .zip(self.allowed())
            .is_some_and(|(m, allowed)| m > allowed);
        let exploring = match self.phase {
            Phase::Explore { .. } => true,
            Phase::Known { ceiling } => {
                limit >= ceiling && self.found + 1 >= EXCHANGE_EXPLORE_AFTER
            }
            Phase::SlowStart => false,
        };
        (slow || exploring)
            && self.latency_seen
            && w.failures == 0
            && mean_ok
                .or(self.floor())
                .is_some_and(|m| !self.has_run(2.0, m))
    }

    /// Whether the limit in force has run `round_trips` round trips of
    /// `rtt` nanoseconds.
    fn has_run(&self, round_trips: f64, rtt: f64) -> bool {
        self.in_force_nanos as f64 >= round_trips * rtt
    }

    /// The latency the floor's tolerance allows, once there is a floor.
    fn allowed(&self) -> Option<f64> {
        self.floor().map(|f| f * (1.0 + self.tolerance))
    }

    /// The latency the floor's tolerance allows, where a mean latency `m`
    /// of `ok` successes is a queue: above it, and above the floor by more
    /// than [`QUEUE_SIGMAS`] standard errors of a mean of that many
    /// successes (at the spread learned; none where none is). `None` where
    /// it is no queue, or there is no floor yet.
    fn queued(&self, m: f64, ok: u64) -> Option<f64> {
        let floor = self.floor()?;
        let allowed = self.allowed()?;
        (m > allowed && m > floor + QUEUE_SIGMAS * self.spread.error(ok)).then_some(allowed)
    }

    /// Whether a clean window in slow start came before the limit has run
    /// one round trip (the window's latency `mean_ok`, else the floor): its
    /// calls have not come back yet. Slow start then holds the limit and
    /// pools the latency of its windows, and judges it over the round trip
    /// (as TCP's slow start grows once per round trip). The first window
    /// closes only when a call comes back, so it has run a round trip.
    ///
    /// Grown on every 1 s window, slow start on 2 s queueing calls was at
    /// 8 × C\* before the latency of its first steps came back (p99 5.4 s
    /// against 4.4 s for 1.5 × unloaded). Judged on single windows over the
    /// round trip, a window of eight 3 s calls ±30 % read as a queue once
    /// every few levels, and a backend with no ceiling was held at 33 for the
    /// run (0.67 of the capacity).
    fn before_round_trip(&self, w: &WindowSummary, mean_ok: Option<f64>) -> bool {
        w.failures == 0
            && mean_ok
                .or(self.floor())
                .is_some_and(|m| !self.has_run(1.0, m))
    }

    /// The limit after a window whose latency says something: a check of
    /// the floor at half the limit when one is due, or a cut on latency
    /// above the floor's tolerance (a jump, or cuts that went on, probe the
    /// floor first: slower, or busier?). `None` where the latency (a mean
    /// and its successes) is within the tolerance or within the noise of
    /// that many successes ([`Ceiling::queued`]), or the window did not fill
    /// the limit.
    fn latency_limit(
        &mut self,
        limit: usize,
        w: &WindowSummary,
        latency: Option<(f64, u64)>,
        busy: bool,
    ) -> Option<usize> {
        let mean_ok = latency.map(|(m, _)| m);
        if self.floor_due
            && w.failures == 0
            && self.since_floor_probe >= PROBE_SPACING
            && limit >= 2
            && busy
        {
            // Check the floor: the first windows may have taught it above
            // C* (a limiter that starts at 10 on 5 shared workers learns a
            // floor of twice the service time and rests at 2 × C*). After
            // the first window slower than it allows, and again while each
            // check finds it lower.
            self.floor_due = false;
            self.floor_probe = Some(limit);
            self.probe_from = mean_ok;
            return Some((limit / 2).max(1));
        }
        let queue = latency
            .and_then(|(m, ok)| self.queued(m, ok).map(|allowed| (m, allowed)))
            .filter(|_| !app_limited(limit, w.peak_in_flight));
        if let Some((m, allowed)) = queue {
            if !std::mem::replace(&mut self.latency_seen, true) {
                self.floor_due = true;
            }
            let suspect = m > PROBE_JUMP * allowed || self.latency_cuts >= PROBE_AFTER_CUTS;
            if suspect && self.since_floor_probe >= PROBE_SPACING {
                // Slower, or busier? One window at half the limit tells.
                self.floor_probe = Some(limit);
                self.probe_from = mean_ok;
                return Some((limit / 2).max(1));
            }
            self.latency_cuts += 1;
            return Some(self.cut_to(limit, allowed / m));
        }
        self.latency_cuts = 0;
        None
    }

    /// After a clean, busy window whose served concurrency was measured: the
    /// limit when that window tried the ceiling or explored above it and the
    /// backend served no more than half a permit beyond the level below (an
    /// exploration's step: no more than its limit less half the step).
    /// Room is what the backend serves, not what the limiter lets in: a
    /// backend that drops what it cannot take answers nothing until the
    /// client's timeout, so its windows come back clean and busy (the
    /// dropped calls hold their permits). Counted as room, tries and
    /// explores climbed to four times a ceiling of 20 behind a 5 s timeout,
    /// and when the timeouts came the permits they held let nothing through
    /// for seconds (0.63 of the oracle). Judged so only once failures have
    /// come back long after the service time ([`Ceiling::drops`]): an open
    /// demand that does not fill the limit serves less than it too, and
    /// with every try judged so the limit lagged a demand ramp (0.88 of the
    /// oracle on scenario 16).
    fn no_room(&mut self, limit: usize) -> Option<usize> {
        // The level below this window's: one under a try, the step under an
        // exploration's (what a step's window serves falls short of its
        // limit by about the step × RTT / 2 at its start: measured against
        // the limit itself, the climb after a 10 s outage of a ceiling of
        // 200 stopped at every step, 0.96 of the capacity).
        // Under a try, what the window before served where that fell short
        // of its limit (an open demand keeps ~0.6 of a permit free between
        // arrivals: measured against the level itself, no try found room,
        // and after a step from 20 to 60 the limit crept up one permit per
        // 5 s, 0.46 of the capacity).
        // An exploration's step finds room only where it served more than
        // half of itself, too: behind a long timeout, a step whose window
        // served a few permits more than the level below (a ceiling between
        // the two) but far short of its own limit (its other permits held
        // dropped calls) counted as room, and the next step, twice as big,
        // dropped every call it added (26 → 42 serving 29 of a ceiling of
        // 30 went on to 74 behind a 10 s timeout, and the 44 dropped calls
        // held their permits, serving nothing, for 8 s).
        let below = self.room_above(limit)?;
        let served = self.served.filter(|&n| n < below + 0.5)?;
        let next = if let Phase::Explore { .. } = self.phase {
            // Exploring: the ceiling is what was served.
            let next = self
                .served_ceiling()
                .unwrap_or(served.round() as usize)
                .min(limit.saturating_sub(1))
                .max(1);
            self.remember(next + 1);
            next
        } else {
            // A try: back to rest, as after a failed probe; the ceiling
            // stands.
            limit.saturating_sub(1).max(1)
        };
        // Once the calls it dropped are back.
        self.hold(limit, next, self.in_force_nanos, false);
        self.await_dropped(limit)
    }

    /// What a window at a try or an exploration's step must serve more than
    /// (by half a permit) to have found room where the backend drops (see
    /// [`Ceiling::no_room`]); `None` at any other window.
    fn room_above(&self, limit: usize) -> Option<f64> {
        match self.phase {
            Phase::Known { ceiling } if limit >= ceiling => {
                Some((limit - 1) as f64 - self.short_before)
            }
            Phase::Explore { step } => Some(limit as f64 - (step / 2) as f64 / 2.0),
            _ => None,
        }
    }

    /// Where the backend drops, the limit after a window at a try or an
    /// exploration's step that found no room ([`Ceiling::no_room`]): held
    /// until the calls the backend dropped come back at the timeout (the
    /// first failure, fresh at this limit, cuts it before its permit is
    /// free), for at most [`TRY_AWAIT_TIMEOUTS`] timeouts; then back to rest
    /// (a try) or to what the step served (an exploration). `None` where no
    /// limit awaits at `limit`. Where nothing was dropped (a window
    /// that measured the try short by its latency's spread, the late fill of
    /// the permit it added, or an open demand's gap), nothing comes back,
    /// and the hold lasts the 1.5 timeouts — unless a clean window at the
    /// try serves the room meanwhile (see [`Ceiling::decide`]).
    ///
    /// Cut back while that call was out, the limit was full of it and of
    /// the calls the backend served: the next to come back was not sent
    /// again, and its place in the backend went to whoever sent first — a
    /// neighbour's call, or this client's dropped one back from its timeout.
    /// A lone limit on a ceiling of 30 behind a 3 s timeout lost a place
    /// for up to 3 s at every try (0.980 of the capacity, 0.995 held); a
    /// client sharing the backend lost it for good, and a share of one
    /// whose one call was then dropped at every timeout served nothing for
    /// seconds on end (six clients on 36 behind a 3 s timeout: the smallest
    /// at 0.06 of the fair share). Cut at once to what it served, a step
    /// past the ceiling left the calls it dropped holding more permits than
    /// the cut left: the backend served what was free of them until they
    /// timed out (a step from 53 to 79 to 127 on a ceiling that rose from 50
    /// to 100 behind a 5 s timeout: next to nothing for 4 s).
    fn await_dropped(&mut self, limit: usize) -> Option<usize> {
        if self.awaiting != limit {
            return None;
        }
        if (self.awaited_nanos as f64) < TRY_AWAIT_TIMEOUTS * self.drop_wait {
            return Some(limit);
        }
        Some(self.try_over(limit))
    }

    /// Holds `limit` until the calls the backend dropped are back (see
    /// [`Ceiling::await_dropped`]), then goes to `to`; `nanos` the hold has
    /// already run, and whether it awaits calls sent again as late timeouts
    /// came back (a fresh timeout earlier than those is not one of them).
    fn hold(&mut self, limit: usize, to: usize, nanos: u64, sent_again: bool) {
        self.awaiting = limit;
        self.await_to = to;
        self.awaited_nanos = nanos;
        self.await_sent_again = sent_again;
    }

    /// A held limit ([`Ceiling::await_dropped`]) ends: a try's back to rest,
    /// one below `limit`, below the same ceiling; an exploration's to what
    /// its step served. The run of tries that found room is over.
    fn try_over(&mut self, limit: usize) -> usize {
        self.awaiting = 0;
        self.found = 0;
        self.room = false;
        std::mem::take(&mut self.await_to).clamp(1, limit.saturating_sub(1).max(1))
    }

    /// The limit after a clean, busy window; `quiet`: nothing failed late in
    /// the window and the learned background rate would fail fewer than one
    /// sample in twenty such windows, so room a probe finds is a neighbour's
    /// (or a ceiling that moved), not a timeout yet to come or noise.
    fn grow(&mut self, limit: usize, quiet: bool) -> usize {
        match self.phase {
            // Rounded down: up, 15 grew to 23 and a ceiling of 15 saw 1.53 ×
            // itself. (At 1 the one permit more is twice.)
            Phase::SlowStart => ((limit as f64 * SLOW_START_GROWTH) as usize).max(limit + 1),
            Phase::Known { ceiling } => {
                let rest_at = ceiling - 1;
                let asked_probe = self.asked == ceiling && limit == rest_at;
                let withheld = self.found > 0 && asked_probe;
                // A plain probe withheld: postponed to the next one (see
                // below), which is owed.
                self.owed |= self.found == 0 && asked_probe;
                if withheld && !std::mem::replace(&mut self.reasked, true) {
                    // In a run of tries that found room, the limiter withheld
                    // the next step this law asked for (its increase jitter):
                    // that try did not happen. Ask once more, keeping the
                    // run, or a ceiling that moved up is explored a rest and
                    // three tries later. (A plain probe withheld is only
                    // postponed to the next one: asked again at once, the
                    // probes of clients that started together stayed in step
                    // and shares came out further from fair, 0.899 → 0.881
                    // at the smallest over 24 variants.)
                    return ceiling;
                }
                self.reasked = false;
                if limit < ceiling {
                    // Not a try of the ceiling: the tries in a row, if any,
                    // have ended.
                    self.found = 0;
                    self.room = false;
                }
                if limit < rest_at {
                    if self.yielding && self.yield_hold > 0 {
                        // Keep one permit of the yield free a while longer:
                        // a neighbour at rest probes within YIELD_HOLD + 1
                        // windows, so it cannot miss the room.
                        self.yield_hold -= 1;
                        return (rest_at - 1).max(limit);
                    }
                    if self.given > 0 {
                        // A gift lasts one window: back to rest in one step.
                        // Climbing back halfway per window, a limit above 30
                        // (gifts of 2 or 3 permits) spent two windows of
                        // three climbing, and its cycle locked in step with a
                        // neighbour's tries: the try fell in its last
                        // climbing window every time (2 on 100 from 10 / 150).
                        // Where the backend drops, and a neighbour was last
                        // seen taking room this limit gave, two windows: a
                        // try there is not answered until its call times
                        // out, so windows do not close early, limits at rest
                        // act every other window, and windows of one length
                        // keep their phase to each other for minutes — one
                        // client's gifts fell in the other's resting windows
                        // every time (two clients on 20 from 5 and 40: the
                        // smaller share 0.60 of the fair one, 0.94 with two;
                        // held three windows, shares came out further from
                        // fair again). Not on a sign of room found running
                        // out: a lone limit a permit short of its ceiling
                        // shows one, and gave twice as long for nothing.
                        if self.drops()
                            && self.neighbour_took
                            && !std::mem::replace(&mut self.gift_held, true)
                        {
                            return limit;
                        }
                        // Held once: a return the limiter withholds (its
                        // jitter) is asked for again, not held again. The
                        // next gift starts unheld.
                        return rest_at;
                    }
                    limit + (rest_at - limit).div_ceil(2)
                } else if limit == rest_at {
                    if self.yielding || self.given > 0 {
                        // The return's first window: its calls went out as
                        // it began (see `return_dropped`).
                        self.returned = Some(Returned {
                            nanos: self.in_force_nanos,
                            level: limit,
                            from_yield: self.yielding,
                        });
                    }
                    // Back at rest without a failure: nobody took what the
                    // exchange gave.
                    if self.yielding {
                        // Back at rest without a failure: nobody took the
                        // room.
                        self.given = 0;
                        self.yield_untaken(limit);
                    } else if std::mem::take(&mut self.given) > 0 {
                        self.returns <<= 1;
                    }
                    self.rested += 1;
                    if self.neighbour() {
                        // The exchange: give permits away for a window at
                        // one per EXCHANGE_WINDOWS permits per window, on a
                        // schedule, or try for one more. A neighbour does
                        // the same: a bigger limit gives more, and shares
                        // even out.
                        self.since_yield = 0;
                        let gift = self.gift(limit);
                        if gift > 0 {
                            self.given = gift;
                            self.gift_held = false;
                            return limit - gift;
                        }
                        return ceiling;
                    }
                    // Where the backend drops, a try that finds no room
                    // holds its permit until the timeout: tries at least
                    // TRY_TIMEOUTS timeouts apart (a 3 s timeout on a
                    // ceiling of 20: 0.974 → 0.981 of the capacity).
                    // Probes at least PROBE_CALLS calls apart from a limit
                    // of PROBE_CALLS_FROM, unless background noise fails
                    // more calls than that anyway.
                    let paced = limit < PROBE_CALLS_FROM
                        || self.since_try_calls
                            >= PROBE_CALLS.min(PROBE_WINDOWS * self.full_samples)
                        || self.noise_rate() * PROBE_CALLS as f64 >= 1.0;
                    let spaced = (!self.drops()
                        || self.since_try_nanos as f64 >= TRY_TIMEOUTS * self.drop_wait)
                        && paced;
                    // A yield due with an owed probe waits for the probe,
                    // which is due at once (the rest drawn when it was asked
                    // does not count): the yield and its hold would put it
                    // off six windows more (a probe withheld a window before
                    // a step from 20 to 100, then a yield: the new ceiling
                    // met 16 s after the step, 8 s at the median seed; with
                    // the probe due only once that rest was over, a yield two
                    // windows after a withheld probe still came first: 18 s
                    // on the worst of seeds 130–139).
                    self.since_yield += 1;
                    let yield_due =
                        self.since_yield >= self.yield_every(limit) && limit >= YIELD_FROM;
                    let probe_first = yield_due && self.owed && spaced;
                    let probe_due = self.rested >= self.rest && spaced || probe_first;
                    if yield_due && !probe_first {
                        // Give 7 % of the room away for a window and climb
                        // back: a neighbour sharing the ceiling may take it
                        // (the bigger the limit, the more it gives), so
                        // shares even out.
                        self.yield_hold = self.start_yield(limit);
                        return (limit as f64 * YIELD_KEEP) as usize;
                    }
                    if probe_due {
                        self.rested = 0;
                        self.rest = self.draw_rest();
                        self.since_try_nanos = 0;
                        ceiling
                    } else {
                        limit
                    }
                } else {
                    // A clean, busy window at (or above) the remembered
                    // ceiling: a neighbour gave room, or the ceiling moved
                    // up. Take the permit and try one more next window; room
                    // found three times in a row is a ceiling that moved:
                    // explore. Room that runs out before that was a
                    // neighbour's (see `overloaded`), unless noise or late
                    // failures could have made it.
                    if self.soft.tolerates(limit) {
                        // A level accepted past a soft ceiling's onset,
                        // climbed back to after a cut: its failures are the
                        // budget's, and a try there finds no room the law
                        // did not know of. Rest there. (Counted, three tries
                        // from below the onset read the soft ceiling as one
                        // that moved up, and the exploration ran away to
                        // where a third of the calls failed.)
                        self.found = 0;
                        self.room = false;
                        self.remember(limit + 1);
                        return limit;
                    }
                    self.found += 1;
                    self.room |= quiet;
                    if self.found < EXCHANGE_EXPLORE_AFTER {
                        self.remember(limit + 1);
                        return limit + 1;
                    }
                    // The first step is the limit (at least
                    // EXPLORE_FIRST_STEP) when a try found room quietly at a
                    // backend that answers at once and has not queued, where
                    // no neighbour has shown itself since the limit started
                    // (or last read overload as a ceiling that fell for
                    // everyone; a neighbour seen long ago can still give
                    // three gifts in a row, and from the limit itself those
                    // explorations failed 1–4 % of the calls of two clients
                    // on 130 on some seeds, 0.3–1.1 % from half of it): the
                    // limit doubles every window, and a ceiling ten times
                    // higher is reached in four (a step from 10 to 100
                    // behind 200 ms: 10 → 8 s at the median of 90 seeds; from
                    // half the limit, a step from 20 to 100 under an open
                    // demand took 8 s, one step at a time 20 s). A step past
                    // the ceiling costs a failed call per permit of it on the
                    // way back down. Half the limit where the backend drops
                    // (a step past the ceiling drops calls that hold their
                    // permits until their timeout) or has queued (a step
                    // past it queues: 2 s calls, p99 on the worst of ten
                    // seeds 6.8–7.2 s against 6.6 s allowed): there the first
                    // step overshoots a ceiling it passes by at most half,
                    // the later ones (doubling) by less than twice. Where the
                    // background rate could
                    // have made the room, EXPLORE_FIRST_STEP: under 1 % of
                    // random failures a window closes on every one, one
                    // that closed just after the limit rose holds ten
                    // samples and its rejection reads as noise, and from
                    // half the limit such false explorations reached 2.5 ×
                    // C* every few seconds (overload 1.2 % → 2.3 %). And
                    // while a neighbour is believed: three of its gifts in a
                    // row make the same run of tries, and from half the
                    // limit each such exploration failed a call per permit
                    // of its step on the way back down (eight variants with
                    // shares of 25–65 permits: 0.5 % of the calls on the
                    // worst seed on average, 0.2 % from a step of 4).
                    let first = if self.room
                        && self.since_neighbour == u32::MAX
                        && !self.drops()
                        && !self.latency_seen
                    {
                        limit.max(EXPLORE_FIRST_STEP)
                    } else if self.room && !self.neighbour() {
                        (limit / 2).max(EXPLORE_FIRST_STEP)
                    } else {
                        EXPLORE_FIRST_STEP
                    };
                    self.found = 0;
                    self.room = false;
                    // The windows rested under the old ceiling do not count
                    // toward giving room away at the new one: counted, a
                    // yield came the window after the limit landed (a step
                    // from 20 to 100: at 100 after 8 s, then 93 and 99 for
                    // five windows).
                    self.since_yield = 0;
                    self.phase = Phase::Explore { step: 2 * first };
                    self.descend_to = limit;
                    limit + first
                }
            }
            Phase::Explore { step } => {
                self.phase = Phase::Explore {
                    step: step.saturating_mul(2),
                };
                self.descend_to = limit;
                limit.saturating_add(step)
            }
        }
    }
}

impl ControlLaw for Ceiling {
    fn name(&self) -> &'static str {
        "ceiling"
    }

    fn reacts_to_first_failure(&self) -> bool {
        true
    }

    fn next_limit(&mut self, limit: usize, w: &WindowSummary) -> usize {
        let next = self.decide(limit, w);
        self.asked = next;
        self.recent.push(limit, w.duration_nanos);
        next
    }

    fn reset(&mut self) {
        let seed = self.seed;
        *self = Self::new(self.tolerance, self.utilization);
        self.seed(seed);
    }

    /// Its draws: the spacing of probes (2–4 windows). Laws of one fleet
    /// seeded apart do not probe in step.
    fn seed(&mut self, seed: u64) {
        self.seed = seed;
        self.rng = seed;
        self.rest = self.draw_rest();
    }

    fn state(&self) -> LawState {
        self.law_state()
    }
}

impl Ceiling {
    /// [`ControlLaw::next_limit`], before it notes what it asked for.
    fn decide(&mut self, limit: usize, w: &WindowSummary) -> usize {
        self.since_neighbour = self.since_neighbour.saturating_add(1);
        if let Some(r) = &mut self.returned {
            r.nanos = r.nanos.saturating_add(w.duration_nanos);
            if self.drop_wait > 0.0 && r.nanos as f64 > (1.0 + RETURN_CALL_SLACK) * self.drop_wait {
                self.returned = None;
            }
        }
        let busy = utilized(limit, w.peak_in_flight, self.utilization);
        self.note_in_force(limit, w, busy);
        let ok = w
            .samples
            .saturating_sub(w.failures)
            .saturating_sub(w.stale_failures);
        let mean_ok = (ok > 0 && w.mean_ok_rtt_nanos > 0.0).then_some(w.mean_ok_rtt_nanos);
        // Settled: the limit was in force two round trips before the window
        // began, so the window's successes were admitted under it and the
        // queue it makes had formed.
        let settled = mean_ok.filter(|&m| {
            w.failures == 0
                && self.in_force_nanos.saturating_sub(w.duration_nanos) as f64 >= 2.0 * m
        });
        self.spread.push(limit, settled, ok);
        if let Some(saved) = self.floor_probed(limit, w, ok, mean_ok) {
            return saved;
        }
        self.note_demand(limit, w, settled);
        let all_failed = w.failures + w.stale_failures;
        let measured = self.measure(limit, w, ok, mean_ok);
        // Counted for overload and for the drain of one, below; not for a
        // failure judged noise.
        let timed_out = self.timed_out(w, ok, all_failed, mean_ok);
        if let Some(next) = self.shedding(limit, w, timed_out) {
            return next;
        }
        // Fresh failures that came back at a timeout were admitted a timeout
        // before the window closed on them: the limit then is the one they
        // answer (see `BLAME_EARLY`).
        let blamed = (timed_out && w.failures > 0 && w.stale_failures == 0)
            .then(|| {
                let back = BLAME_EARLY * self.drop_wait;
                self.recent.at(limit, w.duration_nanos, back)
            })
            .flatten();
        self.since_try_nanos = self.since_try_nanos.saturating_add(w.duration_nanos);
        // The calls since a try are counted from the window that ran at the
        // ceiling, not from the decision that asked for it (the nanoseconds
        // are, see `since_try_nanos`): the limiter withholds some increases
        // (its jitter), and a probe withheld is owed, not paced again.
        // (Counted from the ask, two withheld in a row kept a limit of 10
        // from a ceiling that had moved to 100 for 14 s.)
        if matches!(self.phase, Phase::Known { ceiling } if limit >= ceiling) {
            self.owed = false;
            self.since_try_calls = 0;
        } else {
            self.since_try_calls = self.since_try_calls.saturating_add(w.samples);
        }
        if self.awaiting == limit {
            self.awaited_nanos = self.awaited_nanos.saturating_add(w.duration_nanos);
        }
        self.since_drop = self.since_drop.saturating_add(1);
        // The highest limit the calls that failed late were admitted under.
        let late = self.late_admitted_under(limit, w, timed_out);
        let below = self.below_lowest_rest(limit);
        self.note_rest(limit, w.failures, w.samples);
        if self.probing(limit) {
            self.soft.probe(limit, w, ok);
        }
        // Past a soft ceiling's onset, at a level accepted there, failures
        // are overload only beyond the budget. Only windows at or below the
        // resting level, and not past the onset, teach the background rate:
        // above it (a probe, a try, an exploration) failures come with the
        // load the limit added. (Learned from every window, a soft ceiling's
        // errors in its probes and tries raised the rate until they were
        // all noise, and on 4 of 40 seeds of scenario 17 the limit ran away
        // to where 23–53 % of the calls failed.)
        let soft = self.soft.tolerates(limit);
        let above_rest = match self.phase {
            Phase::Known { ceiling } => limit >= ceiling,
            Phase::Explore { .. } => true,
            Phase::SlowStart => false,
        };
        let teaches = !above_rest && (self.soft.onset == 0 || limit <= self.soft.onset);
        // A window above the resting level (a try, a probe, an exploration)
        // that closed on a fresh failure answered at once, too few calls in
        // for one failure to be significant: judged together with the
        // windows before it at this limit, and the limit holds until they
        // have sampled a full window (see `Ceiling::held`). One failure
        // that is significant alone is overload only where it is with them
        // too: held for longer, a level had more windows in which one came
        // early, and explorations under 0.5–2 % of random failures ended
        // short more often (a step from 20 to 40 took 13–14 s, not 9).
        let inconclusive =
            above_rest && !soft && !timed_out && w.failures > 0 && w.stale_failures == 0;
        let mut excused = false;
        let fell = (!soft).then(|| self.fell_below(limit, w, late)).flatten();
        if fell.is_none() && !soft {
            self.lower_memory(limit, w, late);
        }
        let overload = if soft {
            let at_rest = (self.rest_level == limit).then_some(&self.at_rest);
            w.failures > 0 && self.soft.exceeded(w.failures, w.samples, at_rest)
        } else {
            let counted = w.failures + Self::late_at_most(limit, w, late);
            let lossy = self.lossy_run(counted, w.samples);
            let alone = self.significant(counted, w.samples);
            let lone = alone && counted == 1;
            excused = lone && self.resting(limit) && self.excused(w, timed_out);
            let above_excused =
                lone && inconclusive && !self.significant_at_limit(NOISE_SIGNIFICANCE);
            fell.is_some()
                || w.failures > 0 && ((alone && !excused && !above_excused) || lossy)
                || inconclusive && self.significant_at_limit(RUN_SIGNIFICANCE)
        };
        if overload {
            let returned = if timed_out && w.failures > 0 {
                self.return_dropped()
            } else {
                None
            };
            if let Some(level) = returned {
                // The return's call: a neighbour took the room at `level`.
                // As where a return's failure comes at once (see
                // `overloaded`): rest one below it, below a ceiling of it;
                // a gift in progress ends there. (Answered as an overload of
                // the window it closed — often the next gift's, now two
                // windows long — the ceiling fell two permits, not one.)
                self.since_drop = 0;
                self.given = 0;
                self.remember(level);
                return limit.min(level - 1).max(1);
            }
            // Slow start's overload is its overshoot.
            let teaches = teaches && self.phase != Phase::SlowStart && fell.is_none();
            if soft {
                // The level failed more than its budget: the errors past the
                // onset rose. Start again from the ceiling's memory.
                self.soft = SoftRest::default();
            }
            if teaches {
                self.learn_noise(all_failed, w.samples, below);
            }
            self.run = Tally::default();
            if timed_out {
                self.since_drop = 0;
            }
            // The steps of a descent are one overload, not a ceiling that
            // fell at every level.
            if self.descend == 0 {
                self.overloads += 1;
            }
            if timed_out && fell.is_none() && self.awaiting == limit {
                if self.await_sent_again
                    && (self.awaited_nanos as f64) < BLAME_EARLY * self.drop_wait
                {
                    // Held for the calls sent again as late timeouts came
                    // back: this one was sent before them, and answers the
                    // same overload.
                    return limit;
                }
                // A call timed out at a try held for its dropped call: read
                // as that call, and to rest below the same ceiling, as the
                // try's window said; a ceiling that fell under the try is
                // left to the windows after. (Judged as a failure of its
                // own, by what the window served, at a backend whose calls
                // time out now and then at any load, a jittery one, each try
                // cut a permit or more off the ceiling.)
                return self.try_over(limit);
            }
            // A fresh failure answered at once, where the demand left the
            // limit unfilled: a burst met the ceiling at its peak at most.
            let burst =
                (!timed_out && w.failures > 0 && self.demand_short).then_some(w.peak_in_flight);
            let mut next = self.overloaded(limit, w.failures, w.samples, burst);
            if let Some(at) = blamed.filter(|&at| at < limit) {
                // A call admitted under `at` was dropped: the backend was
                // full with at most `at` of this client's calls in flight,
                // so the ceiling is below `at`, whatever the limit climbed
                // to since. (Read as the failure of the present limit, a
                // try one over the ceiling of 30 behind a 2 s timeout found
                // room by its measure, the next one took the blame for its
                // timeout, and the limit rested at 31 to 33: 0.5–0.8 % of
                // the calls timed out.)
                next = next.min(at.saturating_sub(1)).max(1);
                let ceiling = match self.phase {
                    Phase::Known { ceiling } => ceiling.min(at),
                    _ => at,
                };
                self.remember(ceiling.max(next + 1));
            }
            if let Some(below) = fell {
                // The calls that failed late say the ceiling is at most
                // `below`: no climb back above it, nor above what was served.
                next = next.min(below).max(1);
                self.remember(next + 1);
            }
            if self.overloads >= OVERLOADS_NO_NEIGHBOUR {
                // Overload at every level the cuts went to: the ceiling fell
                // for everyone, which no neighbour taking room explains.
                // Believed, the sign a yield's climb-back left when an outage
                // began under it held a lone limit at 81 of 200 for 40 s,
                // giving permits away every other window.
                self.since_neighbour = u32::MAX;
            }
            if fell.is_some() && !self.late_from_last_window() && next < limit {
                // Late timeouts came back in this window, and the limit in
                // force sent as many calls again, which the backend dropped
                // too: cut now, below the permits they hold, the backend
                // would serve what they left free until they time out. Hold
                // the limit until the first of them is back (fresh at this
                // limit, it cuts before its permit is free).
                let to = if self.awaiting == limit {
                    next.min(self.await_to)
                } else {
                    next
                };
                // The lower of the two ceilings they showed is remembered.
                self.remember(to + 1);
                self.hold(limit, to, w.duration_nanos, true);
                return limit;
            }
            return next;
        }
        if let Some(next) = self.unfilled(limit, w, ok, timed_out, measured, late) {
            return next;
        }
        if inconclusive && self.held() || excused {
            return limit;
        }
        let drain = w.failures == 0 && w.stale_failures > 0;
        if drain {
            // Only the drain of an overload already answered: it neither
            // cuts nor ends a run of overloads.
            if timed_out {
                self.since_drop = 0;
            }
        } else {
            self.overloads = 0;
        }
        // No fresh failure, or no more than the background rate explains:
        // the window counts as clean, and ends a descent. The drain of an
        // overload teaches nothing of the background rate (taught, the 19
        // calls a cut from 40 to 20 left to time out, 5 % of the window,
        // set the rate to 1.6 %) where failures come back within a window.
        // (Slower ones drain over windows that also fail what a neighbour's
        // share took: untaught, two clients on a ceiling of 12 with a 1.5 s
        // timeout read each such failure as overload, and the smaller share
        // fell from 0.33 to 0.11.)
        self.descend = 0;
        if teaches && !(drain && self.overloads > 0 && self.late_from_last_window()) {
            self.learn_noise(all_failed, w.samples, below);
        }
        if w.failures == 0 && busy {
            // A full window: busy, and closed on time, not on a failure.
            self.full_samples = w.samples;
        }
        let latency = match self.latency_to_judge(limit, w, ok, mean_ok) {
            Judge::By(latency) => latency,
            Judge::Hold => return limit,
        };
        if let Some(next) = self.latency_limit(limit, w, latency, busy) {
            return next;
        }
        if !busy {
            return limit;
        }
        // Quiet: background noise would fail fewer than one sample in twenty
        // windows like this one (the rate learned from the first windows
        // decays toward zero but never reaches it), and nothing failed late.
        let quiet = !self.noise_shows_in(w.samples) && w.stale_failures == 0;
        if !measured
            && (w.failures == 0 || self.full_samples > 0 && !self.held())
            && w.stale_failures == 0
            && self.served.is_some_and(|n| n + 1.0 < limit as f64)
        {
            // A clean, busy window above what was served (or, under noise,
            // the last of windows at this limit that together sampled a full
            // window and failed no more than noise explains): the backend
            // took more than that since. Measured a while ago, before the
            // ceiling moved up, it would set the next cut (a 500 ms backend,
            // whose 1 s windows are too short to measure, cut from 49 to the
            // 19 served before a step from 20 to 40, every 8 s to the end;
            // under 2 % of random failures, which close nearly every window,
            // an exploration from 55 to 555 on a ceiling of 400 cut back to
            // the 55 served before it).
            self.served = None;
        }
        // A try held as if it found no room (see `no_room`) whose clean
        // window now serves more than the level below by half a permit:
        // nothing was dropped, and the room is there. The hold ends and the
        // try counts as room found. (Held to the end, 1 s windows of 110 ms
        // calls read a try of 11 at 10.2 — its permit filled late — then
        // 10.9, and the try went back to rest: a ceiling that stepped from
        // 10 to 40 behind a 1 s timeout was met after 22 s.)
        if self.awaiting == limit
            && measured
            && w.failures == 0
            && self.at_ceiling(limit)
            && self
                .room_above(limit)
                .zip(self.served)
                .is_some_and(|(below, n)| n >= below + 0.5)
        {
            self.awaiting = 0;
        }
        if let Some(next) = self.await_dropped(limit) {
            return next;
        }
        if measured && self.drops() {
            if let Some(next) = self.no_room(limit) {
                return next;
            }
        }
        if matches!(self.phase, Phase::Explore { .. }) && w.failures == 0 && limit > self.soft.top {
            // An exploration served a level above those accepted past a
            // soft ceiling's onset without a failure: the ceiling moved.
            // (Forgotten as the exploration began, the windows past the
            // onset taught the background rate its errors, and the limit
            // ran away to where a third of the calls failed.)
            self.soft = SoftRest::default();
        }
        self.grow(limit, quiet)
    }

    /// Notes that `limit` was in force for a window of `nanos`; a new limit
    /// starts its clock and slow start's pool again.
    fn note_in_force(&mut self, limit: usize, w: &WindowSummary, busy: bool) {
        if limit != self.in_force {
            self.in_force = limit;
            self.awaiting = 0;
            self.in_force_nanos = 0;
            self.in_force_failures = 0;
            self.in_force_samples = 0;
            self.slow_start_pool = LatencyPool::default();
        }
        self.in_force_nanos = self.in_force_nanos.saturating_add(w.duration_nanos);
        if busy {
            self.full_nanos = self.full_nanos.max(w.duration_nanos);
        }
        self.in_force_failures = self.in_force_failures.saturating_add(w.failures);
        self.in_force_samples = self.in_force_samples.saturating_add(w.samples);
        if self.full_samples > 0 && self.in_force_samples > 2 * self.full_samples {
            self.in_force_failures /= 2;
            self.in_force_samples /= 2;
        }
    }

    /// Whether a limit above the resting level whose window closed on a
    /// failure too soon to say anything is held for another window: its
    /// windows together have sampled less than a full window. Under random
    /// failures a window closes on each one, and a failure in a window's
    /// first few calls is significant only below `5 % / rate` of them
    /// (five at 1 %): an exploration that read each such window as clean
    /// doubled its step at every one, to where every call failed (a soft
    /// ceiling whose errors start at 30 and reach all calls at 60, under 1 %
    /// of random failures: tries and explorations to 60–155, the rate learned
    /// at 2 %, 0.83 of the best fixed limit; 0.99 held). Held, the failures
    /// at the level add up, and a level that fails a tenth of its calls is
    /// significant within a few windows.
    ///
    /// Where no window has run clean and busy (`full_samples` 0), a full
    /// window is the longest busy one seen, in time: calls of 15 ms on a
    /// soft ceiling of 20 under 1 % of random failures complete some 1300 a
    /// second, and a clean second comes once in half a million. Measured in
    /// samples, nothing was ever held there: explorations doubled at every
    /// failure, 25 → 137 within 10 ms, the rate was learned at 1.6–2.7 %
    /// from the soft ceiling's errors, and on 4 seeds of 11 the limit ran
    /// between 7 and 260, failing 19–26 % of the calls (0.82 of the best
    /// fixed limit failing at most 2 %; held, 0.99–1.00 on every seed).
    fn held(&self) -> bool {
        if self.full_samples == 0 {
            return self.in_force_nanos < self.full_nanos;
        }
        self.in_force_samples < self.full_samples
    }

    /// Whether the one fresh failure of a window at the resting level,
    /// significant alone, is excused as background noise: it came back at
    /// once, not at a timeout, noise fails calls here, and the windows at
    /// this limit, this one among them, together fail no more than noise
    /// explains. A window closes on its first failure, and one that does
    /// within `5 % / rate` calls is significant alone one time in twenty
    /// at rest: each cut a tenth, and the tries back up under noise need a
    /// full window of calls each (see [`Ceiling::held`]). (Cut, a lone limit
    /// on a ceiling of 400 behind 200 ms calls with 1 % of them failing at
    /// random kept 0.62–0.87 of the capacity on four seeds of ten; excused,
    /// 0.88–1.00 on every one.) A ceiling
    /// that comes down under the limit fails the calls over it at once:
    /// the windows after close within a few calls each, and their
    /// failures add up to significance within a few milliseconds.
    fn excused(&self, w: &WindowSummary, timed_out: bool) -> bool {
        !timed_out
            && w.stale_failures == 0
            && self.noise_rate() > 0.0
            && !self.significant_at_limit(NOISE_SIGNIFICANCE)
    }

    /// The latency to judge a window without a significant failure by (its
    /// successes' mean `mean_ok`, or in slow start the mean over the round
    /// trip), or a hold of the limit: it has not run long enough
    /// ([`Ceiling::settling`], [`Ceiling::before_round_trip`]).
    fn latency_to_judge(
        &mut self,
        limit: usize,
        w: &WindowSummary,
        ok: u64,
        mean_ok: Option<f64>,
    ) -> Judge {
        if self.settling(limit, w, mean_ok) {
            return Judge::Hold;
        }
        if !matches!(self.phase, Phase::SlowStart) {
            return Judge::By(mean_ok.map(|m| (m, ok)));
        }
        if let Some(m) = mean_ok {
            self.slow_start_pool.push(ok, m, w.duration_nanos);
        }
        if self.before_round_trip(w, mean_ok) {
            return Judge::Hold;
        }
        Judge::By(self.slow_start_pool.take())
    }

    /// [`ControlLaw::state`].
    fn law_state(&self) -> LawState {
        let (phase, ceiling, step) = match self.phase {
            Phase::SlowStart => ("slow_start", None, None),
            Phase::Known { ceiling } => ("known", Some(ceiling), None),
            Phase::Explore { step } => ("explore", None, Some(step)),
        };
        LawState::Ceiling {
            phase,
            ceiling,
            step,
            floor_nanos: self.floor(),
            served: self.served,
            served_at: self.served_at,
            noise: self.noise_rate(),
            probing_floor: self.floor_probe.is_some(),
            yielding: self.yielding,
            neighbour: self.neighbour(),
        }
    }
}

/// Whether `failures` of `samples` are more than a failure rate of `rate`
/// per sample could explain: `P(F ≥ failures) < NOISE_SIGNIFICANCE` for `F`
/// Poisson with mean `rate · samples`.
fn significant_at(rate: f64, failures: u64, samples: u64) -> bool {
    significant_with(rate, failures, samples, NOISE_SIGNIFICANCE)
}

/// [`significant_at`] at the level `alpha`.
fn significant_with(rate: f64, failures: u64, samples: u64, alpha: f64) -> bool {
    if failures == 0 {
        return false;
    }
    let mu = rate * samples as f64;
    if mu <= 0.0 {
        return true;
    }
    // At or below the mean, P(F ≥ f) is near a half or more (the median of
    // a Poisson count lies within one of its mean).
    if failures as f64 <= mu {
        return false;
    }
    1.0 - poisson_below(mu, failures) < alpha
}

/// Whether `failures` of `samples` are fewer than a failure rate of `rate`
/// per sample would give: `P(F ≤ failures) < alpha` for `F` Poisson with
/// mean `rate · samples`.
fn fewer_than(rate: f64, failures: u64, samples: u64, alpha: f64) -> bool {
    let mu = rate * samples as f64;
    // At or above the mean, P(F ≤ f) is near a half or more.
    if failures as f64 >= mu {
        return false;
    }
    poisson_below(mu, failures + 1) < alpha
}

/// `P(F < f)` for `F` Poisson with mean `mu` > 0, from ten deviations below
/// the mean (what lies below is about 2e-20 at most) to ten above (what
/// lies above, too), each term from its logarithm: at a large `mu` the
/// first terms underflow to zero, and a product from them would stay zero.
fn poisson_below(mu: f64, f: u64) -> f64 {
    let spread = 10.0 * mu.sqrt() + 10.0;
    if f as f64 > mu + spread {
        return 1.0;
    }
    let ln_mu = mu.ln();
    let start = (mu - spread).max(0.0).floor() as u64;
    let mut ln_term = -mu + start as f64 * ln_mu - ln_factorial(start);
    let mut below = 0.0;
    for k in start..f {
        below += ln_term.exp();
        ln_term += ln_mu - ((k + 1) as f64).ln();
    }
    below
}

/// `ln n!`: summed below 20, Stirling's series above (error 3e-10 at 20,
/// falling as n⁻⁵).
fn ln_factorial(n: u64) -> f64 {
    if n < 20 {
        return (2..=n).map(|k| (k as f64).ln()).sum();
    }
    let n = n as f64;
    n * n.ln() - n + 0.5 * (2.0 * std::f64::consts::PI * n).ln() + 1.0 / (12.0 * n)
        - 1.0 / (360.0 * n.powi(3))
}

/// The share of a decayed count kept over `samples` more samples: counts
/// decay over about [`NOISE_SAMPLES`] samples.
fn keep(samples: u64) -> f64 {
    (1.0 - 1.0 / NOISE_SAMPLES).powf(samples as f64)
}

/// Whether `nanos` hold two round trips of `rtt` nanoseconds: enough for
/// Little's law, and for the calls that complete to have been admitted in
/// them.
fn spans_two_round_trips(nanos: u64, rtt: f64) -> bool {
    nanos as f64 >= 2.0 * rtt
}

/// A failure that came back at a timeout is blamed on the limit in force
/// this share of the timeout before the window closed on it, a little later
/// than its admission: a try's first call, dropped as the try's window
/// began, comes back as that window ends, where the two are a timeout apart
/// to the millisecond, and blamed on the limit before the try (one below)
/// it cut a ceiling of 40 to 39 at every try (0.998 → 0.962 of the
/// capacity).
const BLAME_EARLY: f64 = 0.98;

/// How many windows [`Recent`] keeps: 16 s of 1 s windows. A failure that
/// came back later than the windows kept reach (a longer timeout, or
/// windows made short by `sample_window_adaptive`) is blamed on no limit.
const RECENT: usize = 16;

/// How far from their mean latency toward the timeout the successes of
/// [`Ceiling::unfilled`]'s span must reach for its timeouts to read as the
/// tail's. A tail that decays at least as fast as an exponential of scale
/// `σ` and times out a share `p` of the calls puts `e^((T − m) / 2σ)` times
/// as many past the halfway point (`T − m ≈ σ·ln(1/p) − σ`): 6 times at
/// 1 %, 3.5 times at 3 %; a span counts a timeout's worth of a permit's
/// calls at least, so it holds tens of them. The successes of a backend that
/// drops, but not by a tail, stay near their mean (scenario 37's heavy tail,
/// 50 ms plus an exponential of 100 ms behind a 3 s timeout, passes
/// halfway once in 4 million calls).
const TAIL_REACH: f64 = 0.5;

/// The windows at a resting level and its probe (below `ceiling`) counted
/// together by [`Ceiling::unfilled`]: their length in nanoseconds, the
/// calls that timed out in them (and the most in one window), and the sums
/// of what the measured ones served and of how far that fell short of their
/// limits (and how many were measured).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Unfilled {
    ceiling: usize,
    nanos: u64,
    timeouts: u64,
    peak: u64,
    served: f64,
    short: f64,
    measures: u32,
    ok: u64,
    ok_nanos: f64,
    reach: f64,
}

impl Unfilled {
    /// Whether the span's successes reached [`TAIL_REACH`] of the way from
    /// their mean latency to `timeout`: a tail the timeout cuts.
    fn tail_reaches(&self, timeout: f64) -> bool {
        if self.ok == 0 {
            return false;
        }
        let mean = self.ok_nanos / self.ok as f64;
        self.reach >= mean + TAIL_REACH * (timeout - mean)
    }
}

/// A return from a gift or a yield (see [`Ceiling::return_dropped`]):
/// nanoseconds since it began, the level it returned to, and whether it was
/// a yield's.
#[derive(Debug, Clone, Copy)]
struct Returned {
    nanos: u64,
    level: usize,
    from_yield: bool,
}

/// The limits of the last windows and their lengths, the last first (a ring:
/// no allocation).
#[derive(Debug, Clone, Copy, Default)]
struct Recent {
    windows: [(usize, u64); RECENT],
    len: usize,
    head: usize,
}

impl Recent {
    /// Notes a window of `limit` that lasted `nanos`.
    fn push(&mut self, limit: usize, nanos: u64) {
        self.head = (self.head + RECENT - 1) % RECENT;
        self.windows[self.head] = (limit, nanos);
        self.len = (self.len + 1).min(RECENT);
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The limit of the window before this one (0 before the first).
    fn last_limit(&self) -> usize {
        if self.is_empty() {
            0
        } else {
            self.windows[self.head].0
        }
    }

    /// The length of the window before this one, in nanoseconds.
    fn last_nanos(&self) -> u64 {
        if self.is_empty() {
            0
        } else {
            self.windows[self.head].1
        }
    }

    /// The highest limit in force from `first` to `last` nanoseconds before
    /// the end of this window, of `limit`, lasting `nanos`; `None` where the
    /// windows kept do not reach back to `last`.
    fn highest(&self, limit: usize, nanos: u64, first: f64, last: f64) -> Option<usize> {
        let mut end = nanos as f64;
        let mut highest = if first < end { limit } else { 0 };
        for k in 0..self.len {
            if end > last {
                return Some(highest);
            }
            let (l, n) = self.windows[(self.head + k) % RECENT];
            end += n as f64;
            if end > first {
                highest = highest.max(l);
            }
        }
        (end > last).then_some(highest)
    }

    /// The limit in force `back` nanoseconds before the end of this window,
    /// of `limit`, lasting `nanos`; `None` where the windows kept do not
    /// reach that far back.
    fn at(&self, limit: usize, nanos: u64, back: f64) -> Option<usize> {
        self.highest(limit, nanos, back, back)
    }
}

/// The latency floor: the lowest of the window means (or pools) measured
/// since it was last probed, the successes that mean was of, and how many
/// means it is the lowest of.
#[derive(Debug, Clone, Copy, Default)]
struct Floor {
    mean: Option<f64>,
    ok: u64,
    means: u32,
}

impl Floor {
    /// A floor probe's mean of `ok` successes: the floor, the lowest of one.
    fn set(&mut self, mean: f64, ok: u64) {
        *self = Floor {
            mean: Some(mean),
            ok,
            means: 1,
        };
    }

    /// Another mean of `ok` successes: the floor if it is lower, each
    /// weighed by its standard error at `spread` (the floor if none).
    fn lower(&mut self, mean: f64, ok: u64, spread: &Spread) {
        self.means = self.means.saturating_add(1);
        let errors = lowest_of(self.means);
        let lower = self
            .mean
            .is_none_or(|f| mean + errors * spread.error(ok) < f + errors * spread.error(self.ok));
        if lower {
            self.mean = Some(mean);
            self.ok = ok;
        }
    }

    /// The lowest mean plus the standard errors (of a mean of as many
    /// successes, at `spread`, which may have been learned after it) by
    /// which the lowest of that many noisy means falls below their mean.
    fn value(&self, spread: &Spread) -> Option<f64> {
        self.mean
            .map(|m| m + lowest_of(self.means) * spread.error(self.ok))
    }
}

/// How many standard errors the lowest of `n` means of one latency lies
/// below it, on average: `√(2 ln n) − 0.6` (within 0.1 of the normal order
/// statistic from 2 to 300 means; 0 for one). The floor is the lowest of
/// many window means, and where successes' latencies spread wide (a heavy
/// tail), the lowest of a few hundred means of 10 to 70 calls lies three
/// standard errors below their mean.
fn lowest_of(n: u32) -> f64 {
    if n < 2 {
        return 0.0;
    }
    ((2.0 * f64::from(n).ln()).sqrt() - 0.6).max(0.0)
}

/// The weight of each new reading in [`Spread`]'s average...
const SPREAD_WEIGHT: f64 = 1.0 / 16.0;

/// ...and the most one reading may be, in multiples of the average: a
/// latency that stepped between two windows is no spread.
const SPREAD_CAP: f64 = 16.0;

/// The variance of one success's latency about its mean, learned from the
/// means of consecutive clean windows at one limit: two means of `n₁` and
/// `n₂` successes of variance `σ²` differ by `σ²·(1/n₁ + 1/n₂)` squared,
/// on average, where the limit held the mean still.
#[derive(Debug, Clone, Copy, Default)]
struct Spread {
    /// The variance, in nanoseconds squared (0: none learned).
    variance: f64,
    /// The last clean window's limit, mean success latency and successes.
    last: Option<(usize, f64, u64)>,
}

impl Spread {
    /// Notes a window at `limit` of `ok` successes, of mean `mean` where it
    /// was clean.
    fn push(&mut self, limit: usize, mean: Option<f64>, ok: u64) {
        let now = mean.filter(|_| ok > 0).map(|m| (limit, m, ok));
        if let (Some((l0, m0, n0)), Some((l, m, n))) = (self.last, now) {
            if l0 == l {
                let d = m - m0;
                let v = d * d / (1.0 / n0 as f64 + 1.0 / n as f64);
                self.variance = if self.variance > 0.0 {
                    self.variance
                        + (v.min(SPREAD_CAP * self.variance) - self.variance) * SPREAD_WEIGHT
                } else {
                    v
                };
            }
        }
        self.last = now;
    }

    /// The standard error of a mean of `n` successes' latencies (0 for no
    /// successes: a floor set by hand).
    fn error(&self, n: u64) -> f64 {
        if n == 0 {
            return 0.0;
        }
        (self.variance / n as f64).sqrt()
    }
}

/// Successes of windows in a row, pooled: clean ones for the floor where
/// one window is shorter than two round trips (a backend slower than half a
/// window), and slow start's at one limit until it has run a round trip.
#[derive(Debug, Clone, Copy, Default)]
struct LatencyPool {
    /// Successes.
    ok: u64,
    /// The sum of their latencies, in nanoseconds.
    rtt_sum: f64,
    /// The windows' time, in nanoseconds.
    nanos: u64,
}

impl LatencyPool {
    /// Adds a window of `ok` successes of mean latency `mean_ok` lasting
    /// `nanos`.
    fn push(&mut self, ok: u64, mean_ok: f64, nanos: u64) {
        self.ok += ok;
        self.rtt_sum += mean_ok * ok as f64;
        self.nanos = self.nanos.saturating_add(nanos);
    }

    /// The mean latency of the successes pooled and how many they are, if
    /// any, and starts again.
    fn take(&mut self) -> Option<(f64, u64)> {
        let pooled = std::mem::take(self);
        (pooled.ok > 0).then(|| (pooled.rtt_sum / pooled.ok as f64, pooled.ok))
    }

    /// Adds a clean window (as [`LatencyPool::push`]); the mean latency and
    /// its successes once the pool holds two round trips and
    /// [`FLOOR_POOL_OK`] successes (and the pool starts again).
    fn push_for_floor(&mut self, ok: u64, mean_ok: f64, nanos: u64) -> Option<(f64, u64)> {
        self.push(ok, mean_ok, nanos);
        let mean = self.rtt_sum / self.ok as f64;
        if self.ok < FLOOR_POOL_OK || !spans_two_round_trips(self.nanos, mean) {
            return None;
        }
        self.take()
    }
}

/// The levels past a soft ceiling's onset a limit may rest at, failing
/// some calls: where errors rise gently with load, the level where they
/// start gives up goodput the errors one level higher do not cost.
#[derive(Debug, Clone, Copy, Default)]
struct SoftRest {
    /// The resting level where failures began to count (0: none accepted
    /// past it), the highest level accepted past it, the background rate
    /// then (the budget is on top of it), and the share of the permits'
    /// time that failed at `top`.
    onset: usize,
    top: usize,
    base: f64,
    waste: f64,
    /// The probes of `level`: failures and samples, and the nanoseconds
    /// of their failures and of all their calls.
    level: usize,
    failures: f64,
    samples: f64,
    failed_nanos: f64,
    nanos: f64,
}

impl SoftRest {
    /// Whether a window at `limit` runs at an accepted level past the
    /// onset: its failures are the budget's, not overload.
    fn tolerates(&self, limit: usize) -> bool {
        self.onset > 0 && self.onset < limit && limit <= self.top
    }

    /// Counts a probe window at `level`.
    fn probe(&mut self, level: usize, w: &WindowSummary, ok: u64) {
        if level != self.level {
            *self = Self {
                level,
                failures: 0.0,
                samples: 0.0,
                failed_nanos: 0.0,
                nanos: 0.0,
                ..*self
            };
        }
        let nanos = w.mean_rtt_nanos * w.samples as f64;
        self.failures += w.failures as f64;
        self.samples += w.samples as f64;
        self.failed_nanos += (nanos - w.mean_ok_rtt_nanos * ok as f64).max(0.0);
        self.nanos += nanos;
        if self.samples > SOFT_PROBE_SAMPLES {
            self.failures /= 2.0;
            self.samples /= 2.0;
            self.failed_nanos /= 2.0;
            self.nanos /= 2.0;
        }
    }

    /// Accepts `level`, one above the resting level, and the levels between
    /// it and those accepted before, when its probes show it worth resting
    /// at where the background rate is `noise`; whether it did. They must
    /// have failed three calls or more, significantly fewer than the budget
    /// allows, and the share of
    /// the permits' time they failed, `q`, leaves at least half a permit of
    /// goodput more than the level below (`(r + 1)(1 − q) ≥ r (1 − q_r) + ½
    /// (1 − q_r)`). Sharp ceilings fail it: one permit past one whose
    /// rejections come back at once fails most of its calls, and one whose
    /// rejections take the service time or longer holds a failing call all
    /// the time, `q = 1 / (r + 1)`.
    fn accept(&mut self, level: usize, noise: f64) -> bool {
        if self.level != level
            || self.failures < SOFT_ACCEPT_FAILURES
            || self.nanos <= 0.0
            || level < 2
        {
            return false;
        }
        let base = if self.onset > 0 { self.base } else { noise };
        let below = if self.onset > 0 && self.top + 1 == level {
            self.waste
        } else {
            noise
        };
        let q = self.failed_nanos / self.nanos;
        let worth = fewer_than(
            base + SOFT_BUDGET,
            self.failures.round() as u64,
            self.samples.round() as u64,
            SOFT_ACCEPT_SIGNIFICANCE,
        ) && q < below + (1.0 - below) / (2.0 * level as f64);
        if !worth {
            return false;
        }
        // A level at or below the onset moves the onset down: an open
        // demand, whose gaps between arrivals keep the backend below its
        // limit, fails first at a level one higher than the level where
        // errors start.
        if self.onset == 0 {
            self.base = noise;
            self.onset = level - 1;
        }
        self.onset = self.onset.min(level - 1);
        if level >= self.top {
            self.top = level;
            self.waste = q;
        }
        true
    }

    /// Whether a window's `failures` of `samples` at an accepted level, or
    /// those of the windows resting there (`at_rest`, when the window is
    /// one of them), are more than its budget allows.
    fn exceeded(&self, failures: u64, samples: u64, at_rest: Option<&Tally>) -> bool {
        let rate = self.base + SOFT_BUDGET;
        let rest = at_rest.is_some_and(|t| {
            significant_with(
                rate,
                t.failures.floor() as u64,
                t.samples.round() as u64,
                SOFT_GIVE_UP_SIGNIFICANCE,
            )
        });
        rest || (failures >= 2 && significant_at(rate, failures, samples))
    }
}

/// Fresh failures and samples, decayed over about [`NOISE_SAMPLES`]
/// samples.
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    failures: f64,
    samples: f64,
}

impl Tally {
    /// Folds in a window's `failures` of `samples`.
    fn fold(&mut self, failures: u64, samples: u64) {
        let keep = keep(samples);
        self.failures = self.failures * keep + failures as f64;
        self.samples = self.samples * keep + samples as f64;
    }
}

/// A failure rate decayed over about [`NOISE_SAMPLES`] samples: the
/// windows' failure fractions, each weighted `1 − keep` of its samples, and
/// the weight they carry together (1 once they outweigh everything).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Decayed {
    sum: f64,
    weight: f64,
}

impl Decayed {
    /// Folds in a window's failure `fraction`, kept `keep` of the rest.
    fn fold(&mut self, fraction: f64, keep: f64) {
        self.sum = self.sum * keep + fraction * (1.0 - keep);
        self.weight = self.weight * keep + (1.0 - keep);
    }

    /// The rate, as if a rate of 0 weighing `prior` (a share of
    /// [`NOISE_SAMPLES`]) came first; 0 before anything, where `prior` is 0.
    fn rate(&self, prior: f64) -> f64 {
        let weight = self.weight + prior * (1.0 - self.weight);
        if weight > 0.0 { self.sum / weight } else { 0.0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: f64 = 1e6;

    /// A background rate learned in full.
    fn learned(rate: f64) -> Decayed {
        Decayed {
            sum: rate,
            weight: 1.0,
        }
    }

    /// A window of `ok` successes of `rtt_ms` and `failures` fresh failures,
    /// `duration_ms` long, with `peak` in flight.
    fn win(ok: u64, failures: u64, peak: usize, rtt_ms: f64, duration_ms: u64) -> WindowSummary {
        WindowSummary {
            duration_nanos: duration_ms * 1_000_000,
            samples: ok + failures,
            failures,
            stale_failures: 0,
            peak_in_flight: peak,
            mean_rtt_nanos: rtt_ms * MS,
            mean_ok_rtt_nanos: if ok > 0 { rtt_ms * MS } else { 0.0 },
            min_rtt_nanos: rtt_ms * MS,
            max_ok_rtt_nanos: if ok > 0 { rtt_ms * MS } else { 0.0 },
            rtt_floor_nanos: Some(rtt_ms * MS),
            rtt_average_nanos: Some(rtt_ms * MS),
        }
    }

    impl Floor {
        /// A floor of `mean` set by hand (no error).
        fn at(mean: f64) -> Floor {
            Floor {
                mean: Some(mean),
                ..Floor::default()
            }
        }
    }

    impl Recent {
        /// The history after one window of `limit` lasting `nanos`.
        fn after(limit: usize, nanos: u64) -> Recent {
            Recent::after_each(&[limit], nanos)
        }

        /// The history after windows of `limits` (the oldest first), each
        /// lasting `nanos`.
        fn after_each(limits: &[usize], nanos: u64) -> Recent {
            let mut recent = Recent::default();
            for &limit in limits {
                recent.push(limit, nanos);
            }
            recent
        }
    }

    /// A saturated window at limit `l` of a 50 ms backend: `l` served.
    fn full(l: usize) -> WindowSummary {
        win(20 * l as u64, 0, l, 50.0, 1000)
    }

    /// A law exploring by `step`, with a neighbour just seen.
    fn exploring(step: usize) -> Ceiling {
        Ceiling {
            phase: Phase::Explore { step },
            since_neighbour: 0,
            ..Ceiling::default()
        }
    }

    /// A law resting below `ceiling` with background rate `noise`, that
    /// neither probes nor yields for a hundred windows.
    fn resting(ceiling: usize, noise: f64) -> Ceiling {
        Ceiling {
            phase: Phase::Known { ceiling },
            rest: 100,
            yield_backoff: 16,
            noise: learned(noise),
            ..Ceiling::default()
        }
    }

    #[test]
    fn ceiling_slow_start_grows_by_half_per_busy_clean_window() {
        let mut law = Ceiling::default();
        let mut l = 10;
        let mut seen = vec![l];
        for _ in 0..4 {
            l = law.next_limit(l, &full(l));
            seen.push(l);
        }
        assert_eq!(seen, [10, 15, 22, 33, 49]);
        // One step past a ceiling at the last clean limit is at most half
        // over it (one permit over, from 1).
        for l in 1..2000 {
            let next = Ceiling::default().next_limit(l, &full(l));
            assert!(
                next > l && (next <= l * 3 / 2 || next == l + 1),
                "{l} -> {next}"
            );
        }
        // A window that did not use the limit proves nothing: hold.
        assert_eq!(law.next_limit(49, &win(200, 0, 20, 50.0, 1000)), 49);
    }

    #[test]
    fn ceiling_decreases_to_the_concurrency_served() {
        let mut law = Ceiling::default();
        // 20 served (400 successes of 50 ms in 1 s) at a limit of 30: the
        // backend, not the limit, was the bound.
        assert_eq!(law.next_limit(30, &win(400, 0, 30, 50.0, 1000)), 45);
        // Little's law: 400 / 1 s × 50 ms = 20. Measured where the limit was
        // higher, 20 is the ceiling's level: rest there, probe 21.
        assert_eq!(law.next_limit(45, &win(400, 1, 45, 50.0, 1000)), 20);
        assert_eq!(law.phase, Phase::Known { ceiling: 21 });
        // Served was measured where the limit bound it (20 of 20) and 30
        // failed: the ceiling is somewhere up to 30; try halfway.
        let mut law = Ceiling::default();
        assert_eq!(law.next_limit(20, &full(20)), 30);
        assert_eq!(law.next_limit(30, &win(2, 1, 30, 50.0, 3)), 25);
        assert_eq!(law.phase, Phase::Known { ceiling: 30 });
    }

    #[test]
    fn ceiling_cuts_a_resting_level_that_held_by_a_tenth_at_least() {
        // Resting at 20 below a ceiling of 21, a clean window served 19.5:
        // then its calls fail. Down by a tenth (18), so a bigger client gives
        // up more room; the ceiling is the level hit.
        let mut law = resting(21, 0.0);
        assert_eq!(law.next_limit(20, &win(390, 0, 20, 50.0, 1000)), 20);
        assert_eq!(law.next_limit(20, &win(5, 3, 20, 50.0, 10)), 18);
        assert_eq!(law.phase, Phase::Known { ceiling: 20 });
        // Where the clean window served 15 (a neighbour's probe, or a
        // demand short of the limit): down to 15, the ceiling still the level
        // hit, not one above what was served as after a climb.
        let mut law = resting(21, 0.0);
        assert_eq!(law.next_limit(20, &win(300, 0, 20, 50.0, 1000)), 20);
        assert_eq!(law.next_limit(20, &win(5, 3, 20, 50.0, 10)), 15);
        assert_eq!(law.phase, Phase::Known { ceiling: 20 });
    }

    /// `law` after two windows `w` at `limit` that hold it there: the
    /// second begins two round trips after the limit took force.
    fn settled(mut law: Ceiling, limit: usize, w: WindowSummary) -> Ceiling {
        for _ in 0..2 {
            assert_eq!(law.next_limit(limit, &w), limit);
        }
        law
    }

    #[test]
    fn ceiling_cuts_below_a_burst_not_to_the_mean_of_a_demand_that_leaves_the_limit_unfilled() {
        // Resting at 32 below 33 at a 16 ms backend. An open demand of 12
        // calls in flight on average completes 750 calls a second, where
        // the limit full would complete 2000; its bursts reach 24.
        let short = || win(750, 0, 24, 16.0, 1000);
        // A burst reaches 27 and a call is refused at once.
        let burst = || win(200, 1, 27, 16.0, 300);
        let mut law = settled(resting(33, 0.0), 32, short());
        // The ceiling is 27 at most, not the 11 served (200 calls of 16 ms
        // in 300 ms): one below it (and by a tenth at least), below a
        // ceiling of 27.
        assert_eq!(law.next_limit(32, &burst()), 26);
        assert_eq!(law.phase, Phase::Known { ceiling: 27 });
        // Where the demand filled the limit (1990 of 2000), the same window
        // says the backend took 11: down to that.
        let mut law = settled(resting(33, 0.0), 32, win(1990, 0, 32, 16.0, 1000));
        assert_eq!(law.next_limit(32, &burst()), 11);
        // A window under a limit raised as it began may still be filling:
        // one such short window says nothing of the demand.
        let mut law = resting(33, 0.0);
        assert_eq!(law.next_limit(32, &short()), 32);
        assert_eq!(law.next_limit(32, &burst()), 11);
        // A closed loop at 20 of 440 ms calls completes 45 a second; 40 is
        // short by a tenth, but within the count's noise (three standard
        // deviations are 20 calls): what it served (17.6) stands.
        let mut law = settled(resting(21, 0.0), 20, win(40, 0, 20, 440.0, 1000));
        assert_eq!(law.next_limit(20, &win(1, 1, 15, 440.0, 100)), 18);
    }

    #[test]
    fn ceiling_reads_a_failed_probe_under_a_demand_short_of_the_limit_as_the_ceiling_still_there() {
        // Resting at 10 below 11 at a 50 ms backend, a demand of 7 calls in
        // flight on average (140 a second of the 200 the limit carries).
        // The probe of 11 fails 300 ms in, having served 4.2 in that time.
        let probe = || win(25, 1, 11, 50.0, 300);
        let mut law = settled(resting(11, 0.0), 10, win(140, 0, 10, 50.0, 1000));
        // The demand's mean over a fraction of a second, not a ceiling that
        // fell: back to rest below 11.
        assert_eq!(law.next_limit(11, &probe()), 10);
        assert_eq!(law.phase, Phase::Known { ceiling: 11 });
        // Where the demand filled the resting level (9.75 of 10), the probe
        // serving 4.2 is a ceiling that fell under it: down to that.
        let mut law = settled(resting(11, 0.0), 10, win(195, 0, 10, 50.0, 1000));
        assert_eq!(law.next_limit(11, &probe()), 4);
    }

    #[test]
    fn ceiling_cuts_by_a_tenth_when_a_level_it_served_fails() {
        // 100 workers busy under a limit of 116: 100 served.
        let mut law = Ceiling::default();
        assert_eq!(law.next_limit(116, &win(2000, 0, 100, 50.0, 1000)), 116);
        // Then every call fails: a failure at 116 cuts to what was served.
        assert_eq!(law.next_limit(116, &win(0, 1, 100, 50.0, 1)), 100);
        assert_eq!(law.phase, Phase::Known { ceiling: 101 });
        // 100 fails too, with nothing served since: what was served is older
        // than the ceiling. Down by a tenth each window, not by one.
        assert_eq!(law.next_limit(100, &win(0, 1, 100, 50.0, 1)), 90);
        assert_eq!(law.next_limit(90, &win(0, 1, 90, 50.0, 1)), 81);
        assert_eq!(law.phase, Phase::Known { ceiling: 90 });
        // Served measured since, below the failing limit, sets the cut again
        // (in a window where calls still failed, fewer than noise explains).
        law.noise = learned(0.01);
        assert_eq!(law.next_limit(81, &win(400, 1, 81, 50.0, 1000)), 85);
        assert_eq!(law.next_limit(85, &win(0, 1, 85, 50.0, 1)), 20);
        // The same when the limit bound what was served (50 of 50): failures
        // halve the way down to 50, and at 50 itself cut by a tenth.
        let mut law = Ceiling::default();
        assert_eq!(law.next_limit(50, &full(50)), 75);
        let mut seen = vec![75];
        for _ in 0..6 {
            let l = *seen.last().unwrap();
            seen.push(law.next_limit(l, &win(0, 1, l, 50.0, 1)));
        }
        assert_eq!(seen, [75, 62, 56, 53, 51, 50, 45]);
    }

    #[test]
    fn ceiling_believes_a_neighbour_under_noise_on_two_taken_returns_of_four() {
        // Resting at 20 (ceiling 21); 1 % of calls fail at random and a full
        // window holds 400: four noise failures expected per window.
        let noisy = || Ceiling {
            phase: Phase::Known { ceiling: 21 },
            noise: learned(0.01),
            full_samples: 400,
            ..Ceiling::default()
        };
        // A yield's climb-back whose window closed on a failure after 3
        // calls (significant at 1 %: 0.03 expected).
        let taken = |law: &mut Ceiling| {
            law.yielding = true;
            law.next_limit(19, &win(2, 1, 19, 50.0, 3));
        };
        let mut law = noisy();
        taken(&mut law);
        assert!(!law.neighbour(), "one sign is noise one time in twenty");
        taken(&mut law);
        assert!(law.neighbour(), "two in a row");
        // Two of the last four returns, not two ever: three returns that
        // found the room free come between.
        let mut law = noisy();
        taken(&mut law);
        for _ in 0..3 {
            law.phase = Phase::Known { ceiling: 21 };
            law.yielding = true;
            law.next_limit(20, &full(20));
            assert!(!law.yielding);
        }
        taken(&mut law);
        assert!(!law.neighbour());
        // On a quiet backend one sign is believed.
        let mut law = Ceiling {
            noise: learned(0.0),
            ..noisy()
        };
        taken(&mut law);
        assert!(law.neighbour());
    }

    #[test]
    fn ceiling_judges_a_window_above_its_rest_that_closed_on_an_early_failure_with_the_windows_before_it()
     {
        // Resting at 20 (ceiling 21); 1 % of calls fail at random and a full
        // window holds 400. A try of 21 closes on a failure after 10 calls:
        // 0.1 expected, one or more 9.5 % of the time — not significant.
        let noisy = || Ceiling {
            phase: Phase::Known { ceiling: 21 },
            noise: learned(0.01),
            full_samples: 400,
            ..Ceiling::default()
        };
        let early = || win(9, 1, 21, 50.0, 25);
        let mut law = noisy();
        assert_eq!(law.next_limit(21, &early()), 21, "held, not room found");
        assert_eq!(law.found, 0);
        assert_eq!(law.phase, Phase::Known { ceiling: 21 });
        // A second one: 2 of 20 (0.2 expected) comes 1.8 % of the time,
        // and the windows together are tested again at every one: held. A
        // third, 3 of 30, comes 0.4 % of the time: overload.
        assert_eq!(law.next_limit(21, &early()), 21);
        assert!(law.next_limit(21, &early()) < 21);
        // Where the windows at the limit add up to a full window and their
        // failures do not (2 of 410), the try found room.
        let mut law = noisy();
        assert_eq!(law.next_limit(21, &early()), 21);
        assert_eq!(law.next_limit(21, &win(399, 1, 21, 50.0, 1000)), 22);
        assert_eq!(law.found, 1);
        // A window whose one failure came within its first five calls is
        // significant alone (0.05 expected: 4.9 %), but not with the 200
        // calls the limit already ran (2 of 205): held too.
        let mut law = noisy();
        assert_eq!(law.next_limit(21, &win(199, 1, 21, 50.0, 500)), 21);
        assert_eq!(law.next_limit(21, &win(4, 1, 21, 50.0, 10)), 21);
        assert_eq!(law.next_limit(21, &win(200, 0, 21, 50.0, 500)), 22);
        // An exploration holds its step the same way...
        let mut law = Ceiling {
            phase: Phase::Explore { step: 16 },
            ..noisy()
        };
        assert_eq!(law.next_limit(40, &win(9, 1, 40, 50.0, 12)), 40);
        assert_eq!(law.phase, Phase::Explore { step: 16 });
        // ...and a new limit starts its count again.
        assert_eq!(law.next_limit(41, &win(9, 1, 41, 50.0, 12)), 41);
        // On a quiet backend one failure is overload at once.
        let mut law = Ceiling {
            noise: learned(0.0),
            ..noisy()
        };
        assert!(law.next_limit(21, &early()) < 21);
    }

    #[test]
    fn ceiling_holds_for_the_longest_busy_window_where_no_window_ran_clean() {
        // Exploring at 40 (step 16) under 2 % of random failures, at a
        // backend so fast that no window has run clean and busy: the
        // longest busy window ran 50 ms.
        let fast = || Ceiling {
            phase: Phase::Explore { step: 16 },
            noise: learned(0.02),
            full_nanos: 50_000_000,
            ..Ceiling::default()
        };
        // Windows of 12 ms, each closed on its one failure in 100 calls
        // (noise explains it): held until together they have run 50 ms,
        // then the step is taken.
        let mut law = fast();
        for _ in 0..4 {
            assert_eq!(law.next_limit(40, &win(99, 1, 40, 15.0, 12)), 40);
        }
        assert!(law.next_limit(40, &win(99, 1, 40, 15.0, 12)) > 40);
        // A level failing a tenth of its calls: held, its failures add up,
        // and it is overload before 50 ms (4 of 40 where 0.8 are expected).
        let mut law = fast();
        for _ in 0..3 {
            assert_eq!(law.next_limit(40, &win(9, 1, 40, 15.0, 2)), 40);
        }
        assert!(law.next_limit(40, &win(9, 1, 40, 15.0, 2)) < 40);
        // With no busy window seen, nothing holds: the step at once.
        let mut law = Ceiling {
            full_nanos: 0,
            ..fast()
        };
        assert!(law.next_limit(40, &win(9, 1, 40, 15.0, 2)) > 40);
        // The length is learned from busy windows only: a window that ran
        // 10 s with 3 of the limit's 40 permits in use (a lull) is no
        // measure of a full one.
        let mut law = Ceiling::default();
        law.next_limit(40, &win(99, 1, 40, 15.0, 50));
        law.next_limit(40, &win(99, 1, 3, 15.0, 10_000));
        assert_eq!(law.full_nanos, 50_000_000);
    }

    #[test]
    fn ceiling_descends_from_a_failed_exploration_one_fresh_failure_a_step() {
        // Exploring: 80 ran clean (71 served: 1420 of 50 ms in 1 s), and the
        // next step, 400, fails at once.
        let exploring = || exploring(320);
        let mut law = exploring();
        assert_eq!(law.next_limit(80, &win(1420, 0, 80, 50.0, 1000)), 400);
        // Down by 5 (320 / 64) per failure, each remembered as the ceiling;
        // as many failures in a row as that takes are no ceiling that fell
        // for everyone: the neighbour shown stays.
        let mut seen = vec![400];
        for _ in 0..8 {
            let l = *seen.last().unwrap();
            seen.push(law.next_limit(l, &win(0, 1, l, 50.0, 2)));
        }
        assert_eq!(seen, [400, 395, 390, 385, 380, 375, 370, 365, 360]);
        assert_eq!(law.phase, Phase::Known { ceiling: 365 });
        assert!(law.neighbour());
        // A clean window ends it: rest below the last failure, halfway up.
        assert_eq!(law.next_limit(360, &full(360)), 362);
        assert_eq!(law.next_limit(362, &win(0, 1, 362, 50.0, 2)), 361);
        assert_eq!(law.phase, Phase::Known { ceiling: 362 });
        // No lower than the exploration's clean level: a failure there is
        // the overload it always was (down to the 71 served).
        let mut law = Ceiling {
            phase: Phase::Explore { step: 4 },
            ..Ceiling::default()
        };
        assert_eq!(law.next_limit(80, &win(1420, 0, 80, 50.0, 1000)), 84);
        let mut seen = vec![84];
        for _ in 0..5 {
            let l = *seen.last().unwrap();
            seen.push(law.next_limit(l, &win(0, 1, l, 50.0, 2)));
        }
        assert_eq!(seen, [84, 83, 82, 81, 80, 71]);
        // Toward the exploration's last clean level, not a measure levels
        // old: under 1 % noise, 50 served at 54 while something failed, then
        // a clean window at 60 too short to measure (a noise failure closed
        // it after 6 calls: 0.06 expected, not significant).
        let mut law = Ceiling {
            phase: Phase::Explore { step: 16 },
            noise: learned(0.01),
            served: Some(50.0),
            served_at: 54,
            ..Ceiling::default()
        };
        assert_eq!(law.next_limit(60, &win(5, 1, 60, 50.0, 150)), 76);
        assert_eq!(law.next_limit(76, &win(0, 1, 76, 50.0, 2)), 75);
        // Where the backend drops, a failure comes a timeout late, so one
        // per step would be slow: no descent, down to what was served.
        let mut law = Ceiling {
            since_drop: 0,
            ..exploring()
        };
        assert_eq!(law.next_limit(80, &win(1420, 0, 80, 50.0, 1000)), 400);
        assert_eq!(law.next_limit(400, &win(0, 1, 400, 50.0, 2)), 71);
    }

    /// A window at `limit` of a 55 ms backend that served `ok` calls, none
    /// failing fresh, and `stale` calls admitted before it failing in it.
    fn draining(ok: u64, stale: u64, limit: usize) -> WindowSummary {
        WindowSummary {
            samples: ok + stale,
            stale_failures: stale,
            ..win(ok, 0, limit, 55.0, 1000)
        }
    }

    /// `w` with its mean latency that of successes of `ok_ms` and failures
    /// (fresh or late) that waited `failed_ms`: timeouts, where that is the
    /// timeout.
    fn waited(w: WindowSummary, ok_ms: f64, failed_ms: f64) -> WindowSummary {
        let failed = w.failures + w.stale_failures;
        let ok = w.samples - failed;
        WindowSummary {
            mean_rtt_nanos: (ok as f64 * ok_ms + failed as f64 * failed_ms) / w.samples as f64 * MS,
            ..w
        }
    }

    /// Resting at 40 below a ceiling of 41 at a backend that drops behind
    /// `drop_ms`, after windows of `limits` (the oldest first), a second
    /// each.
    fn dropping_after(limits: &[usize], drop_ms: f64) -> Ceiling {
        Ceiling {
            since_drop: 0,
            drop_wait: drop_ms * MS,
            recent: Recent::after_each(limits, 1_000_000_000),
            ..resting(41, 0.0)
        }
    }

    /// A window at 40 of 55 ms calls in which one call came back fresh at
    /// a 3 s timeout.
    fn back_at_timeout() -> WindowSummary {
        waited(win(363, 1, 40, 55.0, 1000), 55.0, 3000.0)
    }

    #[test]
    fn ceiling_cuts_where_calls_admitted_before_a_window_fail_beyond_the_overload_answered() {
        // Resting at 40 below a ceiling of 41 at a backend that drops (1 s
        // timeout), no neighbour: the ceiling falls to 20. The window that
        // began as it fell fails 20 calls admitted at 40 before it (each
        // held one permit), and serves 20 (363 of 55 ms).
        let dropping = || Ceiling {
            since_drop: 0,
            drop_wait: 1000.0 * MS,
            ..resting(41, 0.0)
        };
        let mut law = dropping();
        assert_eq!(law.next_limit(40, &full(40)), 40);
        // 40 − 20: the ceiling is 20 at most. Down to the 20 served, the
        // ceiling one above it, and no noise learned from the failures.
        assert_eq!(law.next_limit(40, &draining(363, 20, 40)), 20);
        assert_eq!(law.phase, Phase::Known { ceiling: 21 });
        assert_eq!(law.noise_rate(), 0.0);
        // The drain of a cut from 60 to 40: 20 late failures are the
        // overload already answered, and teach no background rate.
        let mut law = Ceiling {
            recent: Recent::after(60, 1_000_000_000),
            overloads: 1,
            ..dropping()
        };
        assert_eq!(law.next_limit(40, &draining(727, 20, 40)), 40);
        assert_eq!(law.noise_rate(), 0.0);
        // Failures that take 3 s drain over windows that also fail what
        // the limit since took: they teach as before.
        let mut law = Ceiling {
            recent: Recent::after(60, 1_000_000_000),
            overloads: 1,
            drop_wait: 3000.0 * MS,
            ..dropping()
        };
        assert_eq!(law.next_limit(40, &draining(727, 20, 40)), 40);
        assert!(law.noise_rate() > 0.0);
        // Timeouts of 3 s outlast the window before: the calls that failed
        // may have held their permits through this one. No bound.
        let mut law = Ceiling {
            drop_wait: 3000.0 * MS,
            ..dropping()
        };
        assert_eq!(law.next_limit(40, &full(40)), 40);
        assert_eq!(law.next_limit(40, &draining(363, 20, 40)), 40);
        // Two late failures beyond the answered overload's one are what 1 %
        // of noise fails of 40 calls more than one time in twenty: no cut.
        // Four are not: down to the 33 served.
        let noisy = || Ceiling {
            noise: learned(0.01),
            recent: Recent::after(40, 1_000_000_000),
            ..dropping()
        };
        assert_eq!(noisy().next_limit(40, &draining(720, 3, 40)), 40);
        assert_eq!(noisy().next_limit(40, &draining(600, 5, 40)), 33);
    }

    #[test]
    fn ceiling_reads_late_timeouts_by_the_limits_they_were_admitted_under() {
        // Resting at 40 below a ceiling of 41 at a backend that drops behind
        // a 3 s timeout, where the limit gave room away in the last windows
        // (each a decrease, so every timeout comes back late). A window at 40
        // serves 20 (363 of 55 ms) and fails 20 calls admitted before it,
        // each back at the 3 s timeout.
        let timing_out = || waited(draining(363, 20, 40), 55.0, 3000.0);
        // `limits` the windows kept, the oldest first, a second each.
        let after = |limits: &[usize]| dropping_after(limits, 3000.0);
        // Admitted 3–4 s ago at 40 (the gift of the window before does not
        // matter: they were not admitted then): the ceiling is 20 at most.
        // The limit in force sent as many calls again as they came back,
        // and those hold their permits until they time out: held at 40
        // until the first of them is back (see the next test), then 20.
        let mut law = after(&[40, 40, 40, 37]);
        assert_eq!(law.next_limit(40, &timing_out()), 40);
        assert_eq!(law.phase, Phase::Known { ceiling: 21 });
        assert_eq!((law.awaiting, law.await_to), (40, 20));
        assert_eq!(law.next_limit(40, &full(40)), 40);
        assert_eq!(law.next_limit(40, &full(40)), 40);
        assert_eq!(law.next_limit(40, &back_at_timeout()), 20);
        // Read as saying nothing: the limit, no hold, the memory as it was.
        let nothing = (40, 0, Phase::Known { ceiling: 41 });
        let read = |limits: &[usize], w: &WindowSummary| {
            let mut law = after(limits);
            let next = law.next_limit(40, w);
            (next, law.awaiting, law.phase)
        };
        // Admitted at 60, before a cut to 40: the overload already answered
        // explains 21 of them.
        assert_eq!(read(&[60, 60, 40, 40], &timing_out()), nothing);
        // So does a window at 60 anywhere in the span they were admitted in
        // (3 to 4.06 s back).
        assert_eq!(read(&[60, 40, 40, 40], &timing_out()), nothing);
        // Admitted further back than the windows kept reach: no bound.
        assert_eq!(read(&[40, 40], &timing_out()), nothing);
        // Late failures answered at once where the timeouts outlast the
        // window before: admitted windows ago, under limits unknown.
        assert_eq!(read(&[40, 40, 40, 40], &draining(363, 20, 40)), nothing);
    }

    #[test]
    fn ceiling_remembers_the_ceiling_late_timeouts_show_below_the_one_it_rests_under() {
        // Cut from 40 to 20 (the ceiling of 41 still remembered) behind a
        // 3 s timeout: 18 calls sent at 40 come back late at 20. The cut
        // answered them, but they say the ceiling is 23 at most (22, and
        // one for the edges of a window): rest under 24, not climb back
        // toward 40.
        let after = |drop_ms: f64| dropping_after(&[40; 4], drop_ms);
        let late = |wait_ms: f64| waited(draining(363, 18, 20), 55.0, wait_ms);
        let mut law = after(3000.0);
        let next = law.next_limit(20, &late(3000.0));
        assert_eq!(law.phase, Phase::Known { ceiling: 24 });
        assert!(next <= 23, "{next}");
        // One says nothing.
        let mut law = after(3000.0);
        law.next_limit(20, &waited(draining(363, 1, 20), 55.0, 3000.0));
        assert_eq!(law.phase, Phase::Known { ceiling: 41 });
        // Where failures come back within a window, the cut's drain is read
        // by `fell_below` alone: the memory stays.
        let mut law = after(500.0);
        law.next_limit(20, &late(500.0));
        assert_eq!(law.phase, Phase::Known { ceiling: 41 });
    }

    #[test]
    fn ceiling_holds_a_limit_whose_late_timeouts_were_sent_again_until_they_are_back() {
        // As above: at 40, 20 calls admitted at 40 came back at their 3 s
        // timeout, late, and the limit sent 20 again, which the backend
        // dropped (its ceiling is 20).
        let held = || {
            let mut law = dropping_after(&[40; 4], 3000.0);
            let w = waited(draining(363, 20, 40), 55.0, 3000.0);
            assert_eq!(law.next_limit(40, &w), 40);
            law
        };
        // One of 20 sent in the held window, back at its timeout, fresh.
        let back = back_at_timeout;
        // A timeout 2 s into the hold was sent before those it awaits: it
        // answers the same overload, and the hold goes on. The first back
        // 3 s in ends it: 20, and the memory of the ceiling at 21.
        let mut law = held();
        assert_eq!(law.next_limit(40, &back()), 40);
        assert_eq!(law.next_limit(40, &back()), 20);
        assert_eq!(law.phase, Phase::Known { ceiling: 21 });
        assert_eq!(law.awaiting, 0);
        // Clean windows hold it for 1.5 timeouts at most.
        let mut law = held();
        for _ in 0..3 {
            assert_eq!(law.next_limit(40, &full(40)), 40);
        }
        assert_eq!(law.next_limit(40, &full(40)), 20);
        // More late timeouts while it holds lower where it goes: 25 came
        // back the next window, admitted at 40 (15 of them beyond the 20
        // before were sent at 40 a timeout ago): at most 15.
        let mut law = held();
        let more = waited(draining(363, 25, 40), 55.0, 3000.0);
        assert_eq!(law.next_limit(40, &more), 40);
        assert_eq!(law.await_to, 15);
        // Three more say less (at most 37): it still goes to 20.
        let mut law = held();
        let few = waited(draining(722, 3, 40), 55.0, 3000.0);
        assert_eq!(law.next_limit(40, &few), 40);
        assert_eq!(law.await_to, 20);
        assert_eq!(law.phase, Phase::Known { ceiling: 21 });
        // A limit that moves ends the hold: a try's, too (see
        // `note_in_force`).
        let mut law = held();
        law.next_limit(30, &full(30));
        assert_eq!(law.awaiting, 0);
    }

    #[test]
    fn ceiling_counts_the_late_failures_of_calls_admitted_at_or_below_its_limit() {
        // Resting at 40 under 2 % of background failures. A window that
        // closed on its first fresh failure after 45 calls came back, 13
        // of them admitted in the window before, at 40, failing too: 14 of
        // 45, where the background rate explains 0.9.
        let window = || WindowSummary {
            samples: 45,
            stale_failures: 13,
            ..win(31, 1, 40, 110.0, 100)
        };
        let at = |last_limit| Ceiling {
            recent: Recent::after(last_limit, 1_000_000_000),
            ..resting(41, 0.02)
        };
        assert!(at(40).next_limit(40, &window()) < 40);
        // Admitted at 48, before a cut to 40: the overload already answered.
        // One fresh failure of 45 is the background's.
        assert_eq!(at(48).next_limit(40, &window()), 40);
    }

    #[test]
    fn ceiling_lands_an_exploration_at_what_it_served_as_a_share_of_its_last_clean_step() {
        // A backend that drops (1 s timeout) under an open demand, whose
        // gaps between arrivals leave 6 % of any limit free: 31 served 29.0
        // (264 of 110 ms in 1 s); the next step, 55, served 36.4 (331) with
        // nothing failed yet: more than 31, but short of 55 by more than
        // half the step (see `Ceiling::no_room`).
        let exploring = || Ceiling {
            phase: Phase::Explore { step: 24 },
            since_drop: 0,
            drop_wait: 1000.0 * MS,
            ..Ceiling::default()
        };
        // The step's limit holds until the calls it dropped are back (see
        // `Ceiling::await_dropped`): the first back at its 1 s timeout,
        // fresh at 55, lands it.
        let back = || waited(win(300, 1, 55, 110.0, 1000), 110.0, 1000.0);
        let mut law = exploring();
        assert_eq!(law.next_limit(31, &win(264, 0, 31, 110.0, 1000)), 55);
        assert_eq!(law.next_limit(55, &win(331, 0, 55, 110.0, 1000)), 55);
        assert_eq!(law.phase, Phase::Known { ceiling: 40 });
        // 36.4 / (29.0 / 31) = 38.9: the ceiling is 39, not 36.
        assert_eq!(law.next_limit(55, &back()), 39);
        assert_eq!(law.phase, Phase::Known { ceiling: 40 });
        // A closed demand fills its limit: 31 served 31, and 36.4 is 36.
        let mut law = exploring();
        assert_eq!(law.next_limit(31, &win(282, 0, 31, 110.0, 1000)), 55);
        assert_eq!(law.next_limit(55, &win(331, 0, 55, 110.0, 1000)), 55);
        assert_eq!(law.next_limit(55, &back()), 36);
        // Nothing back within 1.5 timeouts: there, too.
        let mut law = exploring();
        assert_eq!(law.next_limit(31, &win(282, 0, 31, 110.0, 1000)), 55);
        assert_eq!(law.next_limit(55, &win(331, 0, 55, 110.0, 1000)), 55);
        assert_eq!(law.next_limit(55, &win(331, 0, 55, 110.0, 1000)), 36);
        // Landed by the failure that came back from a step that served
        // more (50.5 of 55, 459 calls): the same share.
        let mut law = exploring();
        assert_eq!(law.next_limit(31, &win(264, 0, 31, 110.0, 1000)), 55);
        assert_eq!(law.next_limit(55, &win(459, 0, 55, 110.0, 1000)), 103);
        assert_eq!(law.next_limit(103, &win(25, 1, 71, 109.0, 79)), 54);
    }

    #[test]
    fn ceiling_cuts_to_what_a_failed_probe_served_where_that_fell_a_tenth_below_its_rest() {
        // Resting at 40 below a ceiling of 41 at a backend that drops (1 s
        // timeout): the rest serves 40 (727 of 55 ms in 1 s, clean). The
        // ceiling falls to 20 as the probe at 41 begins; its first timeout
        // comes 920 ms in, after 340 calls: 20.3 served.
        let resting_at_40 = || {
            let mut law = Ceiling {
                since_drop: 0,
                drop_wait: 1000.0 * MS,
                ..resting(41, 0.0)
            };
            assert_eq!(law.next_limit(40, &win(727, 0, 40, 55.0, 1000)), 40);
            law
        };
        let mut law = resting_at_40();
        assert_eq!(law.next_limit(41, &win(340, 1, 41, 55.0, 920)), 20);
        assert_eq!(law.phase, Phase::Known { ceiling: 21 });
        // A probe that served as much as the rest failed on the ceiling that
        // is still there: one step back.
        let mut law = resting_at_40();
        assert_eq!(law.next_limit(41, &win(669, 1, 41, 55.0, 920)), 40);
        assert_eq!(law.phase, Phase::Known { ceiling: 41 });
    }

    #[test]
    fn ceiling_measures_no_ceiling_in_a_short_failed_window_that_began_with_a_raise() {
        // Exploring: 34 ran clean (617 of 55 ms in 1 s: 33.9 served), and
        // the next step, 56, fails at a backend that rejects after 150 ms,
        // closing a window of 150 ms: 101 successes of 54.4 ms, 36.6 by
        // Little's law, though the backend serves 40. The 6 permits the
        // raise added came back at most twice in 150 ms where the others
        // turned 2.7 times: not two round trips of their own.
        let exploring = || exploring(22);
        let clean = win(617, 0, 34, 55.0, 1000);
        let fail = win(101, 1, 56, 54.4, 150);
        let mut law = exploring();
        assert_eq!(law.next_limit(34, &clean), 56);
        // Not a measure: descend from 56 one fresh failure a step.
        assert_eq!(law.next_limit(56, &fail), 55);
        assert_eq!(law.phase, Phase::Known { ceiling: 56 });
        // Four round trips long, the window measures the ceiling: down to
        // what it served (223 of 54.4 ms in 300 ms: 40.4).
        let mut law = exploring();
        assert_eq!(law.next_limit(34, &clean), 56);
        assert_eq!(law.next_limit(56, &win(223, 1, 56, 54.4, 300)), 40);
        // A second window at the raised limit has no fill of its own to
        // miss: 150 ms measures there.
        let mut law = exploring();
        assert_eq!(law.next_limit(34, &clean), 56);
        law.in_force = 56;
        law.in_force_nanos = 1_000_000_000;
        assert_eq!(law.next_limit(56, &fail), 37);
    }

    #[test]
    fn ceiling_reads_a_clean_window_as_served_in_full_where_nothing_drops() {
        // Exploring: 80 ran clean, 71 measured there (1420 of 50 ms in 1 s).
        let exploring = || Ceiling {
            phase: Phase::Explore { step: 64 },
            ..Ceiling::default()
        };
        let mut law = exploring();
        assert_eq!(law.next_limit(80, &win(1420, 0, 80, 50.0, 1000)), 144);
        // 144 fails: the backend took all of 80, so the ceiling is between:
        // descend from 144 toward 80 (by 1, a 64th of the way rounded up).
        assert_eq!(law.next_limit(144, &win(0, 1, 144, 50.0, 2)), 143);
        // Late failures of calls admitted before the window (the drain of
        // an overload answered) say nothing of what it took. (Read as
        // ceilings, an open demand's 96 served at 99 after such a drain cut
        // a step from 20 to 100 to 96, and took 19 s to reach 100.)
        let mut law = exploring();
        let mut draining = win(1420, 0, 80, 50.0, 1000);
        draining.samples += 3;
        draining.stale_failures = 3;
        assert_eq!(law.next_limit(80, &draining), 144);
        assert_eq!(law.next_limit(144, &win(0, 1, 144, 50.0, 2)), 143);
        // Measured in a window where something failed, 71 is the ceiling.
        let mut law = Ceiling {
            noise: learned(0.01),
            ..exploring()
        };
        assert_eq!(law.next_limit(80, &win(1420, 1, 80, 50.0, 1000)), 144);
        assert_eq!(law.next_limit(144, &win(0, 1, 144, 50.0, 2)), 71);
        // Where dropped calls hold their permits, a clean window says
        // nothing of what the backend took: 71 is what it serves.
        let mut law = Ceiling {
            phase: Phase::Known { ceiling: 200 },
            since_drop: 0,
            ..Ceiling::default()
        };
        assert_eq!(law.next_limit(80, &win(1420, 0, 80, 50.0, 1000)), 140);
        assert_eq!(law.next_limit(140, &win(0, 1, 140, 50.0, 2)), 71);
    }

    #[test]
    fn ceiling_forgets_its_neighbour_when_every_level_it_cuts_to_fails() {
        let believing = || Ceiling {
            since_neighbour: 0,
            ..resting(201, 0.0)
        };
        let fail = |law: &mut Ceiling, l: usize| law.next_limit(l, &win(0, 1, l, 50.0, 2));
        // One overload short of the run that ends the belief.
        let one_short = || {
            let mut law = believing();
            let mut l = 200;
            for _ in 1..OVERLOADS_NO_NEIGHBOUR {
                l = fail(&mut law, l);
            }
            (law, l)
        };
        // Four windows in overload in a row: a neighbour may still explain
        // them.
        let (mut law, l) = one_short();
        assert!(law.neighbour());
        // The fifth: the ceiling fell for everyone.
        fail(&mut law, l);
        assert!(!law.neighbour());
        // A clean window between restarts the count ...
        let (mut law, mut l) = one_short();
        l = law.next_limit(l, &full(l));
        fail(&mut law, l);
        assert!(law.neighbour());
        // ... a window with only the drain of an overload does not.
        let (mut law, mut l) = one_short();
        let mut drain = win(100, 0, l, 50.0, 1000);
        drain.samples += 20;
        drain.stale_failures = 20;
        l = law.next_limit(l, &drain);
        fail(&mut law, l);
        assert!(!law.neighbour());
    }

    #[test]
    fn ceiling_rests_below_the_known_ceiling_and_probes_it() {
        let mut law = Ceiling {
            phase: Phase::Known { ceiling: 21 },
            rest: 3,
            ..Ceiling::default()
        };
        // Below the resting level: halfway back per window.
        assert_eq!(law.next_limit(10, &full(10)), 15);
        assert_eq!(law.next_limit(15, &full(15)), 18);
        assert_eq!(law.next_limit(18, &full(18)), 19);
        assert_eq!(law.next_limit(19, &full(19)), 20);
        // At the resting level for `rest` windows, then one probe.
        assert_eq!(law.next_limit(20, &full(20)), 20);
        assert_eq!(law.next_limit(20, &full(20)), 20);
        assert_eq!(law.next_limit(20, &full(20)), 21);
        // The probe fails (the window closed at its first rejection): back.
        assert_eq!(law.next_limit(21, &win(2, 1, 21, 50.0, 3)), 20);
        assert_eq!(law.phase, Phase::Known { ceiling: 21 });
        assert!((2..=4).contains(&law.rest));
    }

    #[test]
    fn ceiling_excuses_one_early_failure_at_rest_the_windows_at_its_limit_do_not_make_significant()
    {
        // Resting at 20 (ceiling 21); 1 % of calls fail at random and a full
        // window holds 400. Two full windows at 20, then one that closes on
        // a failure after 5 calls: 0.05 expected, one or more 4.9 % of the
        // time — significant alone, but 1 of 805 at the limit is not.
        let noisy = || Ceiling {
            full_samples: 400,
            ..resting(21, 0.01)
        };
        let early = || win(4, 1, 20, 50.0, 10);
        let mut law = noisy();
        for _ in 0..2 {
            assert_eq!(law.next_limit(20, &win(400, 0, 20, 50.0, 1000)), 20);
        }
        assert_eq!(law.next_limit(20, &early()), 20, "excused");
        assert_eq!(law.phase, Phase::Known { ceiling: 21 });
        // A ceiling that came down fails window after window within a few
        // calls: they add up (to 5 of 417, where the clean windows taught a
        // rate of 0.45 %), and the limit is cut at the fifth, 10 ms later.
        let fell = (1..=10).find(|_| law.next_limit(20, &win(2, 1, 20, 50.0, 2)) < 20);
        assert_eq!(fell, Some(5));
        // Without windows before it at the limit (alone is what they say),
        // or on a quiet backend, the failure is overload at once.
        assert!(noisy().next_limit(20, &early()) < 20);
        let mut law = Ceiling {
            noise: learned(0.0),
            ..noisy()
        };
        assert_eq!(law.next_limit(20, &win(400, 0, 20, 50.0, 1000)), 20);
        assert!(law.next_limit(20, &early()) < 20);
    }

    /// A window at limit `peak` of `ok` successes of 50 ms and one failure
    /// that held its permit `failed_ms`.
    fn failing_after(ok: u64, failed_ms: f64, peak: usize) -> WindowSummary {
        let samples = ok + 1;
        let duration_ms = (ok as f64 * 50.0 / peak as f64).max(failed_ms) as u64 + 1;
        WindowSummary {
            mean_rtt_nanos: (ok as f64 * 50.0 + failed_ms) / samples as f64 * MS,
            ..win(ok, 1, peak, 50.0, duration_ms)
        }
    }

    /// `law`, having learned that the windows below its resting level fail
    /// nothing.
    fn quiet_below(law: Ceiling) -> Ceiling {
        Ceiling {
            noise_below: Decayed {
                sum: 0.0,
                weight: 1.0,
            },
            ..law
        }
    }

    #[test]
    fn ceiling_rests_past_a_soft_ceiling_onset_while_its_probes_fail_within_the_budget() {
        // Resting at 30, where errors start: a probe of 31 fails one call in
        // 200, after the service time (a soft ceiling whose errors reach all
        // calls at 240). Three such probes show 31 fails significantly
        // fewer than 2 % of its calls (two would, but one or two failures
        // are no rate), and a failing call costs 1/200 of the permits' time,
        // far from the 1/62 that would leave less than half a permit of
        // goodput: rest at 31. (The windows below the resting level failed
        // nothing: no failure here is background noise.)
        let mut law = quiet_below(resting(31, 0.0));
        let probe = failing_after(199, 50.0, 31);
        for _ in 0..2 {
            assert_eq!(law.next_limit(31, &probe), 30);
            assert_eq!(law.phase, Phase::Known { ceiling: 31 });
        }
        assert_eq!(law.next_limit(31, &probe), 31);
        assert_eq!(law.phase, Phase::Known { ceiling: 32 });
        // Resting there, a failure in a window is the budget's, not overload.
        for _ in 0..20 {
            assert_eq!(law.next_limit(31, &failing_after(99, 50.0, 31)), 31);
        }
        // The next level, at 1 % of its calls, takes more probes: five do
        // not show it below 2 % at the 5 % level, six do.
        let probe = failing_after(99, 50.0, 32);
        for _ in 0..5 {
            assert_eq!(law.next_limit(32, &probe), 31);
        }
        assert_eq!(law.next_limit(32, &probe), 32);
        // Windows at the accepted levels failing a tenth of their calls are
        // over the budget: give up the levels and cut as at any level that
        // held.
        let over = win(90, 10, 32, 50.0, 140);
        assert!(law.next_limit(32, &over) < 32);
        assert_eq!(law.soft.onset, 0);
    }

    #[test]
    fn ceiling_accepts_no_soft_level_where_the_demand_leaves_the_limit_unfilled() {
        // The probes above, where the demand leaves the limit unfilled:
        // bursts that meet a hard ceiling, at each level above it a little
        // less often, as a soft ceiling's errors rise. Each stays a failed
        // probe: back to rest below 31, however many.
        // Resting at 30, a demand of 15 in flight on average (300 calls a
        // second of the 600 the limit carries).
        let mut law = settled(
            quiet_below(resting(31, 0.0)),
            30,
            win(300, 0, 30, 50.0, 1000),
        );
        let probe = failing_after(199, 50.0, 31);
        for _ in 0..6 {
            assert_eq!(law.next_limit(31, &probe), 30);
            assert_eq!(law.phase, Phase::Known { ceiling: 31 });
        }
        assert_eq!(law.soft.onset, 0);
    }

    #[test]
    fn ceiling_learns_the_background_rate_only_at_or_below_its_resting_level() {
        // Probes of 31 fail one call in 40 (a soft ceiling's errors, which
        // come with the load the probe adds): no background rate.
        let mut law = resting(31, 0.0);
        for _ in 0..20 {
            assert_eq!(law.next_limit(31, &failing_after(39, 50.0, 31)), 30);
        }
        assert_eq!(law.learned_noise(), 0.0);
        // Nor does slow start's overshoot teach one.
        let mut start = Ceiling::default();
        start.next_limit(30, &failing_after(39, 50.0, 30));
        assert_eq!(start.learned_noise(), 0.0);
        // A failure at the resting level is background.
        law.next_limit(30, &failing_after(99, 50.0, 30));
        assert!(law.learned_noise() > 0.0);
    }

    /// A quiet law that accepted 21 past a soft ceiling's onset at 20,
    /// remembering the ceiling `ceiling`.
    fn soft_accepted_21(ceiling: usize) -> Ceiling {
        quiet_below(Ceiling {
            soft: SoftRest {
                onset: 20,
                top: 21,
                ..SoftRest::default()
            },
            ..resting(ceiling, 0.0)
        })
    }

    #[test]
    fn ceiling_gives_up_an_accepted_soft_level_whose_windows_together_exceed_the_budget() {
        // Accepted at 21 past an onset of 20, resting there. Each window
        // closes on its one failure, 1 in 20 calls: no one window is over
        // the 2 % budget, but together they are, and the level is given up
        // (cut as at any level that held).
        let mut law = soft_accepted_21(22);
        let mut next = 21;
        let mut windows = 0;
        while next == 21 && windows < 50 {
            next = law.next_limit(21, &failing_after(19, 50.0, 21));
            windows += 1;
        }
        assert!(windows > 1, "given up on one window's single failure");
        assert!(next < 21, "still at 21 after {windows} windows failing 5 %");
        assert_eq!(law.soft.onset, 0);
    }

    #[test]
    fn ceiling_rests_at_an_accepted_soft_level_it_climbs_back_to_without_exploring() {
        // After a cut to 18 below an accepted level of 21 (onset 20), the
        // tries climb back: 19 and 20 find room, and 21 is a level the law
        // knew of, not a third find: rest there rather than explore (three
        // finds read the soft ceiling as one that moved up).
        let mut law = soft_accepted_21(19);
        assert_eq!(law.next_limit(19, &full(19)), 20);
        assert_eq!(law.next_limit(20, &full(20)), 21);
        assert_eq!(law.next_limit(21, &failing_after(99, 50.0, 21)), 21);
        assert_eq!(law.phase, Phase::Known { ceiling: 22 });
    }

    #[test]
    fn ceiling_stays_at_a_sharp_ceiling_however_slow_or_fast_its_rejections() {
        // Past a sharp ceiling of 100 whose rejections hold their permit
        // 150 ms (3 × the service), a probe fails one call in 301: within the
        // budget by count, but the failing call holds a permit all the time
        // (1/101 of the permits' time), and one permit more adds nothing.
        let mut slow = quiet_below(resting(101, 0.0));
        for _ in 0..200 {
            assert_eq!(slow.next_limit(101, &failing_after(300, 150.0, 101)), 100);
        }
        // Rejections that come back at once fail most of a probe's calls.
        let mut fast = quiet_below(resting(21, 0.0));
        for _ in 0..200 {
            assert_eq!(fast.next_limit(21, &failing_after(5, 2.0, 21)), 20);
        }
        assert_eq!(slow.soft.onset + fast.soft.onset, 0);
    }

    #[test]
    fn ceiling_gives_room_away_and_less_often_when_nobody_takes_it() {
        // A limit that gave room once already (the first time comes early:
        // see `ceiling_yields_first_after_five_resting_windows_while_its_rest_is_clean`).
        let mut law = Ceiling {
            phase: Phase::Known { ceiling: 31 },
            rest: 1000,
            yielded: true,
            ..Ceiling::default()
        };
        // A limit of 30 yields every 300 / 30 = 10 resting windows.
        const EVERY: u32 = 10;
        for k in 1..EVERY {
            assert_eq!(law.next_limit(30, &full(30)), 30, "window {k}");
        }
        // The 10th resting window: 30 → 27; one permit of it stays free
        // four windows more (a neighbour probing every 3–5 windows cannot
        // miss it), then back.
        assert_eq!(law.next_limit(30, &full(30)), 27);
        let mut limit = 27;
        for k in 0..YIELD_HOLD {
            limit = law.next_limit(limit, &full(limit));
            assert_eq!(limit, 29, "held window {k}");
        }
        assert_eq!(law.next_limit(29, &full(29)), 30);
        // A new resting level (a latency cut, a new ceiling) ends the hold:
        // below it the limit climbs back halfway, not to one under it.
        let mut cut = Ceiling {
            phase: Phase::Known { ceiling: 31 },
            yielding: true,
            yield_hold: YIELD_HOLD,
            ..Ceiling::default()
        };
        cut.remember(20);
        assert_eq!(cut.next_limit(15, &full(15)), 17);
        // Nobody took the room: the next time comes after 20 windows.
        for k in 1..2 * EVERY {
            assert_eq!(law.next_limit(30, &full(30)), 30, "window {k}");
        }
        assert_eq!(law.next_limit(30, &full(30)), 27);
        // This time a neighbour took it: the climb back fails at 29 (27 was
        // served), so the next yield comes after 10 again.
        assert_eq!(law.next_limit(27, &full(27)), 29);
        assert_eq!(law.next_limit(29, &win(2, 1, 29, 50.0, 3)), 28);
        assert_eq!(law.yield_every(30), EVERY);
        // Room taken is a neighbour's sign.
        assert!(law.neighbour());
    }

    #[test]
    fn ceiling_limits_below_ten_yield_one_permit_for_one_window() {
        // Each limit at rest after a first yield, nobody taking anything: the
        // windows before its next yield (300 / limit), where it yields to,
        // and where the window after that takes it (back at once: no
        // YIELD_HOLD below YIELD_HOLD_FROM).
        let first_yield = |rest_at: usize| {
            let mut law = Ceiling {
                phase: Phase::Known {
                    ceiling: rest_at + 1,
                },
                rest: 1000,
                yielded: true,
                ..Ceiling::default()
            };
            let k = (1..=400).find(|_| law.next_limit(rest_at, &full(rest_at)) < rest_at)?;
            let to = (rest_at as f64 * YIELD_KEEP) as usize;
            Some((k, to, law.next_limit(to, &full(to))))
        };
        assert_eq!(first_yield(5), Some((60, 4, 5)));
        assert_eq!(first_yield(9), Some((33, 8, 9)));
        // A limit of 2 gives its one permit of two.
        assert_eq!(first_yield(2), Some((150, 1, 2)));
        // A limit of 1 has nothing to give.
        assert_eq!(first_yield(1), None);
    }

    #[test]
    fn ceiling_bigger_limits_yield_sooner() {
        // Resting windows before a yield once the limit has yielded (the
        // first comes after 5 while its rest is clean): 300 / limit,
        // rounded, at least 5. Two clients of different sizes that started
        // together do not yield in the same windows; equal ones do.
        let first_yield = |limit: usize| {
            let mut law = Ceiling {
                phase: Phase::Known { ceiling: limit + 1 },
                rest: 1000,
                yielded: true,
                ..Ceiling::default()
            };
            (1..=100).find(|_| law.next_limit(limit, &full(limit)) < limit)
        };
        assert_eq!(first_yield(10), Some(30));
        assert_eq!(first_yield(20), Some(15));
        assert_eq!(first_yield(30), Some(10));
        assert_eq!(first_yield(40), Some(8));
        assert_eq!(first_yield(54), Some(6));
        assert_eq!(first_yield(55), Some(5));
        assert_eq!(first_yield(60), Some(5));
        assert_eq!(first_yield(200), Some(5));
        assert_eq!(first_yield(YIELD_FROM - 1), None);
        // Nobody takes the room: the period doubles, up to 160 windows.
        // After the first, each gap also counts the yield's own window and
        // the YIELD_HOLD windows that keep one permit of it free.
        let away = 1 + YIELD_HOLD;
        let (sixty, gaps) = yield_gaps(60, 7);
        assert_eq!(
            gaps,
            [
                5,
                10 + away,
                20 + away,
                40 + away,
                80 + away,
                160 + away,
                160 + away
            ]
        );
        assert_eq!(sixty.yield_backoff, 32);
        let (ten, gaps) = yield_gaps(10, 6);
        assert_eq!(
            gaps,
            [
                30,
                60 + away,
                120 + away,
                160 + away,
                160 + away,
                160 + away
            ]
        );
        // The back-off stops growing at the cap: the period follows the
        // limit as it moves (a limit of 10 backed off to 160 windows waits 40
        // once it rests at 60, not 160).
        assert_eq!(ten.yield_backoff, 8);
        assert_eq!(ten.yield_every(60), 40);
    }

    #[test]
    fn ceiling_yields_first_after_five_resting_windows_while_its_rest_is_clean() {
        // A limit that has not given room away yet, whose resting windows
        // failed nothing: it yields after YIELD_EVERY_MIN resting windows,
        // not 300 / limit, then at its own period, doubled as nobody took it.
        let fresh = || Ceiling {
            phase: Phase::Known { ceiling: 11 },
            rest: 1000,
            ..Ceiling::default()
        };
        let away = 1 + YIELD_HOLD;
        assert_eq!(gaps_of(&mut fresh(), 10, 3), [5, 60 + away, 120 + away]);
        // A cascade of cuts at start-up fails each level once, in its first
        // window there: the rest is still clean.
        let mut cascade = Ceiling {
            phase: Phase::Known { ceiling: 14 },
            rest: 1000,
            ..Ceiling::default()
        };
        let mut limit = 13;
        for _ in 0..3 {
            limit = cascade.next_limit(limit, &win(2, 1, limit, 50.0, 2));
        }
        assert_eq!(cascade.phase, Phase::Known { ceiling: limit + 1 });
        assert_eq!(gaps_of(&mut cascade, limit, 1), [5]);
        // A resting level that ran clean and then failed: background noise
        // can fail the return of a yield as a neighbour would. The first
        // yield waits for the limit's own period.
        let mut noisy = fresh();
        assert_eq!(noisy.next_limit(10, &full(10)), 10);
        let next = noisy.next_limit(10, &failing_after(150, 10.0, 10));
        let mut noisy = Ceiling {
            phase: Phase::Known { ceiling: next + 1 },
            ..noisy
        };
        // (The resting windows before the failure count toward it.)
        let own = (YIELD_PERMITS / next as f64).round() as u32 - noisy.since_yield;
        assert_eq!(gaps_of(&mut noisy, next, 1), [own]);
    }

    #[test]
    fn ceiling_counts_toward_a_yield_only_the_windows_rested_under_the_ceiling_it_found() {
        // A limit that rested long under a ceiling of 21: its next yield is
        // due. The ceiling moves up; the limit explores to 92, fails there
        // and lands at 91. Its first yield there waits its own period at 91
        // (5 windows), not the window after it lands.
        let mut law = Ceiling {
            phase: Phase::Known { ceiling: 21 },
            yielded: true,
            since_yield: 1000,
            rest: 1000,
            ..Ceiling::default()
        };
        let mut limit = 21;
        for want in [22, 23, 46, 92] {
            limit = law.next_limit(limit, &full(limit));
            assert_eq!(limit, want);
        }
        assert_eq!(law.next_limit(92, &win(2, 1, 92, 50.0, 3)), 91);
        let mut limit = 91;
        let mut windows = 0;
        while limit >= 91 {
            limit = law.next_limit(limit, &full(limit));
            windows += 1;
            assert!(windows <= 100, "no yield");
        }
        assert_eq!(law.phase, Phase::Known { ceiling: 92 });
        assert_eq!(windows, law.yield_every(91));
        assert!(windows > 1);
    }

    #[test]
    fn ceiling_probes_its_ceiling_at_most_once_per_300_calls_or_5_windows_from_a_limit_of_10() {
        // A limit resting one below a ceiling that holds, each probe of it
        // rejected at once: the resting windows between two probes, over 8
        // probes, where a resting window answers `calls` calls.
        let gaps_with = |rest_at: usize, calls: u64, noise: f64| {
            let mut law = Ceiling {
                phase: Phase::Known {
                    ceiling: rest_at + 1,
                },
                yielded: true,
                yield_backoff: 1000,
                noise: learned(noise),
                ..Ceiling::default()
            };
            law.seed(3);
            let (mut limit, mut since, mut gaps) = (rest_at, 0, Vec::new());
            while gaps.len() < 8 {
                let w = if limit > rest_at {
                    win(0, 2, limit, 50.0, 3)
                } else {
                    win(calls, 0, limit, 50.0, 1000)
                };
                let next = law.next_limit(limit, &w);
                assert!(next <= rest_at + 1, "{limit} → {next}");
                if limit == rest_at {
                    since += 1;
                }
                if limit == rest_at && next > rest_at {
                    gaps.push(since);
                    since = 0;
                }
                limit = next;
            }
            gaps
        };
        let gaps = |rest_at, calls| gaps_with(rest_at, calls, 0.0);
        // 80 calls a window: 4 windows, 320 calls, between probes, never
        // the 2 or 3 of the windows' own draw.
        assert_eq!(gaps(25, 80), [4; 8]);
        // 57 calls a window (a backend of 400 ms, 25 permits): 5 windows,
        // 285 calls — at most PROBE_WINDOWS full windows apart — and so
        // for 30 a window.
        assert_eq!(gaps(25, 57), [5; 8]);
        assert_eq!(gaps(25, 30), [5; 8]);
        // 400 calls a window: the windows' draw alone, 2–4.
        let fast = gaps(25, 400);
        assert!(fast.iter().all(|g| (2..=4).contains(g)), "{fast:?}");
        assert!(fast.iter().any(|&g| g < 4), "{fast:?}");
        // Below a limit of 10, 2–4 windows whatever the calls.
        let small = gaps(9, 20);
        assert!(small.iter().all(|g| (2..=4).contains(g)), "{small:?}");
        // Where background noise fails more than one call in 300 (a rate
        // learned at 5 %, decaying over these clean windows to 0.8 %), the
        // probes' cost is lost in it: 2–4 windows.
        let noisy = gaps_with(25, 57, 0.05);
        assert!(noisy.iter().all(|g| (2..=4).contains(g)), "{noisy:?}");
    }

    /// A limit resting at `rest_at` after a first yield, that nobody takes
    /// anything from, and the windows from one yield of it to the next, `n`
    /// times (the first: from the start).
    fn yield_gaps(rest_at: usize, n: usize) -> (Ceiling, Vec<u32>) {
        let mut law = Ceiling {
            phase: Phase::Known {
                ceiling: rest_at + 1,
            },
            rest: 1000,
            yielded: true,
            ..Ceiling::default()
        };
        let gaps = gaps_of(&mut law, rest_at, n);
        (law, gaps)
    }

    /// `law` resting at `rest_at`, nobody taking anything from it: the
    /// windows from one yield to the next, `n` times (the first: from now).
    fn gaps_of(law: &mut Ceiling, rest_at: usize, n: usize) -> Vec<u32> {
        let (mut limit, mut since, mut gaps) = (rest_at, 0, Vec::new());
        while gaps.len() < n {
            let next = law.next_limit(limit, &full(limit));
            since += 1;
            if limit == rest_at && next < rest_at {
                gaps.push(since);
                since = 0;
            }
            limit = next;
        }
        gaps
    }

    /// A limit resting at `rest_at` below a ceiling, kept in the exchange (a
    /// neighbour always present), nobody taking what it gives: the permits
    /// it gives in each of `decisions` windows at rest (0: it tried for one
    /// more instead).
    fn exchange_alone(rest_at: usize, decisions: usize) -> Vec<usize> {
        let mut law = Ceiling {
            phase: Phase::Known {
                ceiling: rest_at + 1,
            },
            ..Ceiling::default()
        };
        let (mut limit, mut gifts) = (rest_at, Vec::with_capacity(decisions));
        while gifts.len() < decisions {
            law.since_neighbour = 0;
            let w = if limit > rest_at {
                win(2, 1, limit, 50.0, 3)
            } else {
                full(limit)
            };
            let next = law.next_limit(limit, &w);
            if limit == rest_at {
                if next < limit {
                    gifts.push(limit - next);
                } else {
                    assert_eq!(next, rest_at + 1, "at rest: give, or try for one more");
                    gifts.push(0);
                }
            }
            limit = next;
        }
        gifts
    }

    #[test]
    fn ceiling_exchanges_permits_in_proportion_to_its_limit_while_a_neighbour_is_there() {
        // One permit per 30 per window at rest: 15 permits give 0.5 a window,
        // 45 give 1.5.
        let per_window = |g: &[usize]| g.iter().sum::<usize>() as f64 / g.len() as f64;
        let tries = |g: &[usize]| g.iter().filter(|&&n| n == 0).count();
        let fifteen = exchange_alone(15, 3000);
        assert!((per_window(&fifteen) - 0.5).abs() <= 1.0 / 3000.0);
        // Every window at rest that gives nothing tries for one more: 15
        // gives in two windows of six, 45 in three of four.
        assert_eq!(tries(&fifteen), 2000);
        let forty_five = exchange_alone(45, 3000);
        // (Its first turn gives one less: it starts with half a permit.)
        assert!((per_window(&forty_five[4..]) - 1.5).abs() <= 1.0 / 3000.0);
        assert_eq!(tries(&forty_five), 750);
        // A gift lasts one window: the limit is back at rest the next. Alone,
        // nobody takes it and no try finds room: neither is a sign of a
        // neighbour, and the exchange ends when the last sign is 60 windows
        // old.
        let mut law = Ceiling {
            phase: Phase::Known { ceiling: 46 },
            since_neighbour: NEIGHBOUR_WINDOWS - 10,
            ..Ceiling::default()
        };
        let (mut limit, mut gifts, mut tried) = (45, 0, 0);
        for _ in 0..10 {
            let w = if limit > 45 {
                win(2, 1, limit, 50.0, 3)
            } else {
                full(limit)
            };
            let next = law.next_limit(limit, &w);
            match limit {
                45 if next < 45 => {
                    assert_eq!(law.given, 45 - next);
                    gifts += 1;
                }
                45 => {
                    assert_eq!(next, 46);
                    tried += 1;
                }
                _ => assert_eq!(next, 45, "back from {limit}"),
            }
            limit = next;
        }
        assert_eq!((gifts, tried), (4, 1));
        assert!(!law.neighbour());
    }

    #[test]
    fn ceiling_gives_on_a_schedule_not_at_random() {
        // A limit of 10 earns a third of a permit per window at rest: it
        // gives two every sixth window at rest, never sooner, never later.
        // Gifts drawn at random would be as frequent on average but bunched
        // and spread (a run of 3000 windows holds gaps of 1 and of 20 or
        // more).
        let gifts = exchange_alone(10, 3000);
        let at: Vec<usize> = (0..gifts.len()).filter(|&k| gifts[k] > 0).collect();
        assert!(at.iter().all(|&k| gifts[k] == 2));
        assert_eq!(at.len(), 500);
        assert!(at.windows(2).all(|w| w[1] - w[0] == 6), "{at:?}");
    }

    #[test]
    fn ceiling_exchange_waits_for_two_permits_at_the_start_of_each_turn() {
        // The first gift of each turn of three waits (trying) until two
        // permits are earned, so a second neighbour can win one; the other
        // two give what is earned. 15 earns half a permit a window: 2 after
        // two tries, then 1 after one more.
        let fifteen = exchange_alone(15, 24);
        assert!(fifteen.chunks(6).all(|c| c == [0, 0, 2, 0, 1, 0]));
        // 45 earns one and a half a window: given as earned, a gift every
        // window and no try, ever; it waits one window a turn (and gives 3,
        // 1, 2 in the others).
        let forty_five = exchange_alone(45, 24);
        assert_eq!(forty_five[..4], [2, 1, 2, 0]);
        assert!(forty_five[4..].chunks(4).all(|c| c == [3, 1, 2, 0]));
        // Whether a limit of 30 to 59 waits depends on the fraction it
        // carries into a turn: 40 carries two thirds and never waits after
        // its first turn; from 60 up two permits are earned every window.
        assert!(exchange_alone(40, 24)[4..].iter().all(|&n| n > 0));
        assert!(exchange_alone(90, 24).iter().all(|&n| n == 3));
    }

    #[test]
    fn ceiling_loses_a_permit_or_a_big_gift_when_a_neighbour_takes_what_it_gave() {
        let gave = |ceiling: usize, given: usize| Ceiling {
            phase: Phase::Known { ceiling },
            given,
            ..Ceiling::default()
        };
        // Gave one (15 → 14); the climb back to 15 fails: a neighbour took
        // it. Rest at 14 below a ceiling of 15, and the neighbour is there.
        let mut law = gave(16, 1);
        assert_eq!(law.next_limit(15, &win(2, 1, 15, 50.0, 3)), 14);
        assert_eq!(law.phase, Phase::Known { ceiling: 15 });
        assert!(law.neighbour());
        assert_eq!(law.given, 0);
        // Unless the backend served less than the limit it had (10 served
        // where the limit was 14): the ceiling came down, to what was
        // served.
        let mut law = gave(16, 1);
        law.served = Some(10.0);
        law.served_at = 14;
        assert_eq!(law.next_limit(15, &win(2, 1, 15, 50.0, 3)), 10);
        // A gift of three or more (only a limit above 30 gives that many)
        // taken, at least in part: the whole gift is lost, and the limit
        // rests where it gave (what the neighbours did not take stays free
        // for their tries).
        let mut law = gave(91, 3);
        assert_eq!(law.next_limit(90, &win(2, 1, 90, 50.0, 3)), 87);
        assert_eq!(law.phase, Phase::Known { ceiling: 88 });
        assert!(law.neighbour());
        let mut law = gave(121, 4);
        assert_eq!(law.next_limit(120, &win(2, 1, 120, 50.0, 3)), 116);
        // What was served, when less, still wins (below a ceiling one above
        // where it gave); when more, the gift is lost all the same.
        let mut law = gave(91, 3);
        (law.served, law.served_at) = (Some(80.0), 87);
        assert_eq!(law.next_limit(90, &win(2, 1, 90, 50.0, 3)), 80);
        assert_eq!(law.phase, Phase::Known { ceiling: 88 });
        let mut law = gave(91, 3);
        (law.served, law.served_at) = (Some(88.0), 90);
        assert_eq!(law.next_limit(90, &win(2, 1, 90, 50.0, 3)), 87);
        // A gift of two taken costs one permit, as a gift of one does.
        let mut law = gave(31, 2);
        assert_eq!(law.next_limit(30, &win(2, 1, 30, 50.0, 3)), 29);
        assert_eq!(law.phase, Phase::Known { ceiling: 30 });
        // A limit of 2 gave 1 and failed in the gift window: it stays at 1,
        // below a ceiling of 2, never of 1.
        let mut law = gave(3, 1);
        assert_eq!(law.next_limit(1, &win(2, 1, 1, 50.0, 3)), 1);
        assert_eq!(law.phase, Phase::Known { ceiling: 2 });
        // Without the exchange the same failure at rest cuts by a tenth at
        // least (a hit at a level that held).
        let mut rested = Ceiling {
            phase: Phase::Known { ceiling: 16 },
            rested: 1,
            ..Ceiling::default()
        };
        assert_eq!(rested.next_limit(15, &win(2, 1, 15, 50.0, 3)), 13);
    }

    #[test]
    fn ceiling_explores_from_a_step_of_four_while_it_believes_in_a_neighbour() {
        // Three tries in a row that found room, quietly, while a neighbour
        // shows itself: three of its gifts can make that run. The
        // exploration starts from EXPLORE_FIRST_STEP, not half the limit
        // (36 → 37 → 38 → 76 alone).
        let climb = |since_neighbour: u32| {
            let mut law = Ceiling {
                phase: Phase::Known { ceiling: 36 },
                since_neighbour,
                ..Ceiling::default()
            };
            let mut seen = vec![36];
            for _ in 0..4 {
                let l = *seen.last().unwrap();
                seen.push(law.next_limit(l, &full(l)));
            }
            seen
        };
        assert_eq!(climb(0), [36, 37, 38, 42, 50]);
        assert_eq!(climb(u32::MAX), [36, 37, 38, 76, 152]);
        // One seen long ago: half the limit (a neighbour's gifts made runs
        // of three tries later on, and from the limit itself their
        // explorations failed 1–4 % of the calls of two clients on 130).
        assert_eq!(climb(NEIGHBOUR_WINDOWS), [36, 37, 38, 57, 95]);
    }

    #[test]
    fn ceiling_takes_room_one_permit_at_a_time_and_explores_room_that_lasts() {
        let known = || Ceiling {
            phase: Phase::Known { ceiling: 21 },
            ..Ceiling::default()
        };
        // Room found at the ceiling three times in a row is a ceiling that
        // moved up: take one permit at a time, then climb by the limit
        // (23), and double the step each window (46, 92, ...).
        let climb_with = |ceiling: usize, windows: usize, noise: f64| {
            let mut law = Ceiling {
                phase: Phase::Known { ceiling },
                noise: learned(noise),
                ..Ceiling::default()
            };
            let mut seen = vec![ceiling];
            for _ in 0..windows {
                let l = *seen.last().unwrap();
                seen.push(law.next_limit(l, &full(l)));
            }
            (law, seen)
        };
        let climb = |ceiling, windows| climb_with(ceiling, windows, 0.0);
        let (mut law, seen) = climb(21, 5);
        assert_eq!(seen, [21, 22, 23, 46, 92, 184]);
        // The first step is at least 4 (here 5, the limit).
        assert_eq!(climb(3, 5).1, [3, 4, 5, 10, 20, 40]);
        assert_eq!(climb(1, 4).1, [1, 2, 3, 7, 15]);
        // Where noise could have made the room (a rate that fails 0.21
        // samples of a window of 420), the first step is 4.
        assert_eq!(climb_with(21, 5, 5e-4).1, [21, 22, 23, 27, 35, 51]);
        // Where the backend has queued, or drops, half the limit.
        for law in [
            Ceiling {
                latency_seen: true,
                ..known()
            },
            Ceiling {
                since_drop: 0,
                drop_wait: 1000.0 * MS,
                ..known()
            },
        ] {
            let mut law = law;
            let mut seen = vec![21];
            for _ in 0..5 {
                let l = *seen.last().unwrap();
                seen.push(law.next_limit(l, &full(l)));
            }
            assert_eq!(seen, [21, 22, 23, 34, 56, 100]);
        }
        // 184 fails; 92 was served where 92 was the limit: descend from
        // 184 toward it (by 2: 92 / 64, rounded up).
        assert_eq!(law.next_limit(184, &win(2, 1, 184, 50.0, 3)), 182);
        assert_eq!(law.phase, Phase::Known { ceiling: 184 });
        // That was no neighbour: the room lasted.
        assert!(!law.neighbour());
        // Room that runs out before that was a neighbour's permit: the
        // limit keeps what it took (21) and exchanges from now on.
        let mut law = known();
        assert_eq!(law.next_limit(21, &full(21)), 22);
        assert!(!law.neighbour());
        assert_eq!(law.next_limit(22, &win(2, 1, 22, 50.0, 3)), 21);
        assert!(law.neighbour());
        assert_eq!(law.phase, Phase::Known { ceiling: 22 });
        // Not where background failures were learned (room found there may
        // be noise read as clean): a rate that fails 0.21 samples of a
        // window of 420 counts, one learned long ago and decayed to nothing
        // does not.
        for (noise, sign) in [(5e-4, false), (1e-12, true)] {
            let mut law = Ceiling {
                noise: learned(noise),
                ..known()
            };
            assert_eq!(law.next_limit(21, &full(21)), 22);
            law.next_limit(22, &win(2, 1, 22, 50.0, 3));
            assert_eq!(law.neighbour(), sign, "noise {noise}");
        }
        // Nor in a window with late failures (here too many, 10 %, to be
        // learned as background): dropped requests' timeouts are still on
        // their way, so the room may not be there.
        let mut late = known();
        let mut timing_out = full(21);
        timing_out.samples += 42;
        timing_out.stale_failures = 42;
        assert_eq!(late.next_limit(21, &timing_out), 22);
        late.next_limit(22, &win(2, 1, 22, 50.0, 3));
        assert!(!late.neighbour());
    }

    #[test]
    fn ceiling_finds_room_only_where_the_backend_served_more() {
        // Timeouts seen: one failure that waited 1 s beside 20 successes of
        // 50 ms. (A rejection, faster than a success, says nothing.)
        let mut law = Ceiling::default();
        let mut rejected = win(20, 1, 10, 50.0, 1000);
        rejected.mean_rtt_nanos = (20.0 * 50.0 + 1.0) / 21.0 * MS;
        law.next_limit(10, &rejected);
        assert!(!law.drops());
        let mut timed_out = rejected;
        timed_out.mean_rtt_nanos = (20.0 * 50.0 + 1000.0) / 21.0 * MS;
        law.next_limit(10, &timed_out);
        assert!(law.drops());
        // A failure at a timeout that the background rate explains (2 %
        // noise, one in 401) is no overload: it says nothing of drops.
        let mut noisy = resting(101, 0.02);
        let mut slow = win(400, 1, 100, 50.0, 1000);
        slow.mean_rtt_nanos = (400.0 * 50.0 + 1000.0) / 401.0 * MS;
        assert_eq!(noisy.next_limit(100, &slow), 100);
        assert!(!noisy.drops());
        // Nor for ever: it lapses after DROPS_WINDOWS windows.
        let mut lapsing = Ceiling {
            since_drop: DROPS_WINDOWS - 2,
            ..Ceiling::default()
        };
        lapsing.next_limit(10, &full(10));
        assert!(lapsing.drops());
        lapsing.next_limit(15, &full(15));
        assert!(!lapsing.drops());
        let known = || Ceiling {
            phase: Phase::Known { ceiling: 21 },
            since_drop: 0,
            ..Ceiling::default()
        };
        // A try of 21 after which the backend served 20 (400 successes of
        // 50 ms in 1 s; the 21st call dropped, holding its permit): no room,
        // back to rest below the same ceiling.
        let mut law = known();
        assert_eq!(law.next_limit(21, &win(400, 0, 21, 50.0, 1000)), 20);
        assert_eq!(law.phase, Phase::Known { ceiling: 21 });
        assert_eq!(law.found, 0);
        // Served 20.6 at 21: the permit was used (for part of the window).
        let mut law = known();
        assert_eq!(law.next_limit(21, &win(412, 0, 21, 50.0, 1000)), 22);
        assert_eq!(law.phase, Phase::Known { ceiling: 22 });
        // At rest (20), `served` measured the window before.
        let rested = |served| Ceiling {
            served: Some(served),
            served_at: 20,
            ..known()
        };
        // Under an open demand the window at rest served 19.4 of 20 (0.6 of
        // a permit free between arrivals): a try that served 20.2 served a
        // permit more, room; one that served 19.7 did not.
        assert_eq!(
            rested(19.4).next_limit(21, &win(404, 0, 21, 50.0, 1000)),
            22
        );
        assert_eq!(
            rested(19.4).next_limit(21, &win(394, 0, 21, 50.0, 1000)),
            20
        );
        // A measure at another level (20 served at 80, long ago) says
        // nothing of what a try of 21 should beat.
        let mut law = Ceiling {
            served: Some(20.0),
            served_at: 80,
            ..known()
        };
        assert_eq!(law.next_limit(21, &win(400, 0, 21, 50.0, 1000)), 20);
        // Too short a window to measure what was served says nothing, even
        // with an old measure of 20.2 (at rest, 20) at hand.
        assert_eq!(rested(20.2).next_limit(21, &win(4, 0, 21, 50.0, 60)), 22);
        // Where nothing timed out, a demand that does not fill the limit
        // serves less than it too: the try counts as room, as it always has.
        let mut law = Ceiling {
            since_drop: u32::MAX,
            ..known()
        };
        assert_eq!(law.next_limit(21, &win(400, 0, 21, 50.0, 1000)), 22);
        // Exploring to 35 where 27 was served: the ceiling is 27.
        let exploring = || Ceiling {
            phase: Phase::Explore { step: 16 },
            since_drop: 0,
            ..Ceiling::default()
        };
        let mut law = exploring();
        assert_eq!(law.next_limit(35, &win(540, 0, 35, 50.0, 1000)), 27);
        assert_eq!(law.phase, Phase::Known { ceiling: 28 });
        // Served 33 of 35: short of the limit by what the window's start
        // holds back when it jumps 8, but more than the 27 before: room.
        let mut law = exploring();
        assert_eq!(law.next_limit(35, &win(660, 0, 35, 50.0, 1000)), 51);
        // Served 30 of 35: more than the 27 before, but short of the limit
        // by more than half the step (the five permits over 30 held calls
        // the backend dropped): the ceiling is 30.
        let mut law = exploring();
        assert_eq!(law.next_limit(35, &win(600, 0, 35, 50.0, 1000)), 30);
        assert_eq!(law.phase, Phase::Known { ceiling: 31 });
        // Below the ceiling (climbing back, at rest) it changes nothing.
        let mut law = known();
        assert_eq!(law.next_limit(15, &win(200, 0, 15, 50.0, 1000)), 18);
    }

    #[test]
    fn ceiling_reads_a_window_of_only_a_timeout_by_its_floor() {
        // A window that closed on a call back at its 1 s timeout just after
        // another closed holds no success to compare it with: the floor
        // (50 ms) says it timed out, and the backend drops.
        let mut law = Ceiling {
            phase: Phase::Known { ceiling: 21 },
            floor: Floor::at(50.0 * MS),
            ..Ceiling::default()
        };
        let mut alone = win(0, 1, 21, 1000.0, 2);
        alone.mean_rtt_nanos = 1000.0 * MS;
        assert!(law.next_limit(21, &alone) <= 20);
        assert!(law.drops());
        // A rejection alone, as fast as the floor, is no timeout.
        let mut law = Ceiling {
            phase: Phase::Known { ceiling: 21 },
            floor: Floor::at(50.0 * MS),
            ..Ceiling::default()
        };
        let mut rejected = alone;
        rejected.mean_rtt_nanos = MS;
        law.next_limit(21, &rejected);
        assert!(!law.drops());
    }

    #[test]
    fn ceiling_holds_a_try_where_the_backend_drops_until_its_dropped_call_is_back() {
        // A 1 s timeout; resting at 20 below a ceiling of 21.
        let trying = || dropping_at_rest(1000.0);
        // The try of 21 served 20: its call was dropped. Held, not cut
        // while that call is out, and not grown on the windows after (too
        // short to measure what was served, or measured short again).
        let mut law = trying();
        assert_eq!(law.next_limit(21, &win(200, 0, 21, 50.0, 500)), 21);
        assert_eq!(law.next_limit(21, &win(4, 0, 21, 50.0, 10)), 21);
        assert_eq!(law.next_limit(21, &win(190, 0, 21, 50.0, 480)), 21);
        // The dropped call comes back, fresh at this limit: back to rest
        // (the limiter applies it before that call's permit is free).
        let mut back = win(0, 1, 21, 1000.0, 5);
        back.mean_rtt_nanos = 1000.0 * MS;
        assert_eq!(law.next_limit(21, &back), 20);
        assert_eq!(law.phase, Phase::Known { ceiling: 21 });
        // Where the try's window measured 17 served against the 20 of the
        // rest (a backend whose latency varies measures that now and then),
        // the call's failure is still the try's: back to rest, not to 17.
        let mut law = Ceiling {
            served: Some(20.0),
            served_at: 20,
            served_clean: true,
            ..trying()
        };
        assert_eq!(law.next_limit(21, &win(170, 0, 21, 50.0, 500)), 21);
        assert_eq!(law.next_limit(21, &back), 20);
        assert_eq!(law.phase, Phase::Known { ceiling: 21 });
        // Nothing comes back within one and a half timeouts (the permit was
        // never used: an open demand's gap): back to rest then, the run of
        // tries that found room ended.
        let mut law = Ceiling {
            found: 1,
            ..trying()
        };
        assert_eq!(law.next_limit(21, &win(400, 0, 21, 50.0, 1000)), 21);
        assert_eq!(law.next_limit(21, &win(160, 0, 21, 50.0, 400)), 21);
        assert_eq!(law.next_limit(21, &win(80, 0, 21, 50.0, 200)), 20);
        assert_eq!(law.found, 0);
        // The limit moved (a yield, a cut) and came back: that try is over,
        // and the next measure of it is a try of its own.
        let mut law = trying();
        assert_eq!(law.next_limit(21, &win(400, 0, 21, 50.0, 1000)), 21);
        assert_eq!(law.awaiting, 21);
        law.next_limit(19, &win(380, 0, 19, 50.0, 1000));
        assert_eq!(law.awaiting, 0);
    }

    /// A limit resting at 20 below a ceiling of 21, on 50 ms calls, at a
    /// backend that drops behind a timeout of `timeout_ms`.
    fn dropping_at_rest(timeout_ms: f64) -> Ceiling {
        Ceiling {
            phase: Phase::Known { ceiling: 21 },
            since_drop: 0,
            drop_wait: timeout_ms * MS,
            floor: Floor::at(50.0 * MS),
            ..Ceiling::default()
        }
    }

    /// A window of `ok` successes of 50 ms and one failure that waited
    /// `waited_ms`, at `limit`, lasting `duration_ms`.
    fn timed_out_window(ok: u64, limit: usize, waited_ms: f64, duration_ms: u64) -> WindowSummary {
        waited(win(ok, 1, limit, 50.0, duration_ms), 50.0, waited_ms)
    }

    #[test]
    fn ceiling_reads_a_failure_that_waited_twice_the_service_as_dropped() {
        // 200 ms calls behind a 500 ms timeout: a failure back at 2.5 times
        // the successes' mean is a dropped call, not one answered at once.
        let mut law = Ceiling::default();
        let w = win(90, 1, 20, 200.0, 1000);
        assert!(law.timed_out(&waited(w, 200.0, 500.0), 90, 1, Some(200.0 * MS)));
        assert!((law.drop_wait - 500.0 * MS).abs() < 1e-3);
        // A failure that took the service time (an error past a soft
        // ceiling), or a little more, is not.
        assert!(!law.timed_out(&waited(w, 200.0, 350.0), 90, 1, Some(200.0 * MS)));
    }

    #[test]
    fn ceiling_gives_for_two_windows_where_the_backend_drops_and_a_neighbour_took_its_room() {
        // Resting at 20 below a ceiling of 21; a gift of one runs at 19.
        let giving = |since_drop: u32, neighbour_took: bool| Ceiling {
            phase: Phase::Known { ceiling: 21 },
            since_drop,
            drop_wait: 1000.0 * MS,
            since_neighbour: 0,
            neighbour_took,
            given: 1,
            ..Ceiling::default()
        };
        // Where the backend drops and a neighbour took room this limit gave:
        // the gift runs a second window, then the limit is back at rest.
        let mut law = giving(0, true);
        assert_eq!(law.next_limit(19, &full(19)), 19);
        assert_eq!(law.next_limit(19, &full(19)), 20);
        // A return the limiter withheld (its jitter) is asked for again,
        // not held a third window.
        assert_eq!(law.next_limit(19, &full(19)), 20);
        // Where it rejects, or the only sign was room found running out:
        // one window.
        assert_eq!(giving(u32::MAX, true).next_limit(19, &full(19)), 20);
        assert_eq!(giving(0, false).next_limit(19, &full(19)), 20);
        // A gift starts unheld, whatever the last one left (one cut short
        // by a failure in its first window keeps its hold).
        let mut law = Ceiling {
            phase: Phase::Known { ceiling: 21 },
            given: 0,
            gift_held: true,
            credit: 5.0,
            turn: 1,
            ..giving(0, true)
        };
        assert_eq!(law.next_limit(20, &full(20)), 15);
        assert!(!law.gift_held);
        assert_eq!(law.next_limit(15, &full(15)), 15);
        assert_eq!(law.next_limit(15, &full(15)), 20);
        // A try that found room and failed the window after is such a sign:
        // it replaces a taken gift as the last one.
        let mut law = Ceiling {
            room: true,
            found: 1,
            given: 0,
            ..giving(0, true)
        };
        law.next_limit(22, &win(2, 1, 22, 50.0, 3));
        assert!(law.neighbour());
        assert!(!law.neighbour_took);
    }

    #[test]
    fn ceiling_reads_a_return_call_back_at_the_timeout_as_a_neighbour_taking_the_room() {
        // A lone limit resting at 20 below a ceiling of 21, behind a 2 s
        // timeout, gave a permit (19) and returns to 20 for a window.
        let base = || Ceiling {
            rest: 100,
            ..dropping_at_rest(2000.0)
        };
        let returned = || {
            // An earlier return's room was taken (bit 1 after this one).
            let mut law = Ceiling {
                given: 1,
                returns: 1,
                ..base()
            };
            assert_eq!(law.next_limit(19, &win(380, 0, 19, 50.0, 1000)), 20);
            assert_eq!(law.next_limit(20, &win(400, 0, 20, 50.0, 1000)), 20);
            assert!(!law.neighbour());
            assert_eq!(law.returns & 1, 0);
            law
        };
        // A second later a call fails at the 2 s timeout: sent as the return
        // began, into room a neighbour had taken. A sign, in place of the
        // return's "untaken"; rest one below the return's level.
        let mut law = returned();
        assert_eq!(
            law.next_limit(20, &timed_out_window(400, 20, 2000.0, 1000)),
            19
        );
        assert_eq!(law.phase, Phase::Known { ceiling: 20 });
        assert!(law.neighbour());
        assert!(law.neighbour_took);
        assert_eq!(law.returns & 0b111, 0b011);
        // The same after two windows of half a second.
        let mut law = returned();
        assert_eq!(law.next_limit(20, &win(200, 0, 20, 50.0, 500)), 20);
        law.next_limit(20, &timed_out_window(200, 20, 2000.0, 500));
        assert!(law.neighbour());
        // A call that failed at the timeout half a second later was sent
        // half a second into the return, not by it: no sign.
        let mut law = returned();
        assert_eq!(law.next_limit(20, &win(200, 0, 20, 50.0, 500)), 20);
        law.next_limit(20, &timed_out_window(400, 20, 2000.0, 1000));
        assert!(!law.neighbour());
        // The failure closes a window of the next gift: the answer is the
        // return's level's, a ceiling of 20 and rest at 19 (the gift ends),
        // not an overload of the gift's level.
        let mut law = returned();
        (law.given, law.gift_held) = (1, true);
        assert_eq!(
            law.next_limit(19, &timed_out_window(380, 19, 2000.0, 1000)),
            19
        );
        assert_eq!(law.phase, Phase::Known { ceiling: 20 });
        assert_eq!(law.given, 0);
        // A yield's return read so: the yield was taken, and the next comes
        // at its own period again (the return's window had read it untaken
        // and doubled the period).
        let mut law = Ceiling {
            yielding: true,
            yield_backoff: 8,
            ..base()
        };
        assert_eq!(law.next_limit(19, &win(380, 0, 19, 50.0, 1000)), 20);
        assert_eq!(law.next_limit(20, &win(400, 0, 20, 50.0, 1000)), 20);
        assert!(!law.yielding);
        assert_eq!(law.yield_backoff, 16);
        law.next_limit(20, &timed_out_window(400, 20, 2000.0, 1000));
        assert!(law.neighbour());
        assert_eq!(law.yield_backoff, 1);
    }

    #[test]
    fn ceiling_ends_the_hold_of_a_try_whose_next_window_served_the_room() {
        // A 3 s timeout; resting at 20 below a ceiling of 21. The try's
        // first window served 20 (the permit it added filled late): held, as
        // if its call were dropped.
        let held = || {
            let mut law = dropping_at_rest(3000.0);
            assert_eq!(law.next_limit(21, &win(400, 0, 21, 50.0, 1000)), 21);
            assert_eq!(law.awaiting, 21);
            law
        };
        // The next window served 21, clean: nothing was dropped, the room
        // is there. The hold ends and the try found it: one more.
        let mut law = held();
        assert_eq!(law.next_limit(21, &win(420, 0, 21, 50.0, 1000)), 22);
        assert_eq!(law.awaiting, 0);
        assert_eq!(law.phase, Phase::Known { ceiling: 22 });
        // Served 20.3, no more than the level below and half a permit: still
        // held.
        let mut law = held();
        assert_eq!(law.next_limit(21, &win(406, 0, 21, 50.0, 1000)), 21);
        assert_eq!(law.awaiting, 21);
    }

    #[test]
    fn ceiling_forgets_what_was_served_when_a_clean_window_ran_above_it() {
        // 19 served at 20 long ago; the ceiling has since moved up, and a
        // 550 ms backend's 1 s windows are too short to measure again.
        let stale = || Ceiling {
            phase: Phase::Known { ceiling: 50 },
            served: Some(19.0),
            served_at: 20,
            ..Ceiling::default()
        };
        let mut law = stale();
        // 34 ran clean and busy: the backend takes more than 19 now.
        assert_eq!(law.next_limit(34, &win(60, 0, 34, 550.0, 1000)), 42);
        assert_eq!(law.served, None);
        // So a failure at 42 cuts by a tenth, not to 19.
        assert_eq!(law.next_limit(42, &win(0, 1, 42, 550.0, 2)), 37);
        // A window with a failure in it (judged noise) proves nothing.
        let mut law = Ceiling {
            noise: learned(0.05),
            ..stale()
        };
        law.next_limit(34, &win(60, 1, 34, 550.0, 1000));
        assert_eq!(law.served, Some(19.0));
        // Unless the windows at the limit have sampled a full window
        // together (under noise, one closes on nearly every failure).
        let mut law = Ceiling {
            noise: learned(0.05),
            full_samples: 100,
            ..stale()
        };
        law.next_limit(34, &win(60, 1, 34, 550.0, 1000));
        assert_eq!(law.served, Some(19.0), "61 of 100");
        law.next_limit(34, &win(60, 1, 34, 550.0, 1000));
        assert_eq!(law.served, None, "122 of 100");
    }

    #[test]
    fn ceiling_checks_its_floor_after_the_first_slow_window_and_again_while_it_falls() {
        // 5 workers shared, a limit that starts at 10: the first window
        // already takes 100 ms and teaches that as the floor.
        let mut law = Ceiling::default();
        assert_eq!(law.next_limit(10, &win(100, 0, 10, 100.0, 1000)), 15);
        assert_eq!(law.floor.mean, Some(100.0 * MS));
        // The first window slower than the floor allows (150 > 120 ms): a
        // cut, and a check is due.
        assert_eq!(law.next_limit(15, &win(100, 0, 15, 150.0, 1000)), 12);
        assert!(law.floor_due);
        // The next busy, clean window is the check: half the limit.
        assert_eq!(law.next_limit(12, &win(100, 0, 12, 110.0, 1000)), 6);
        // It found the floor lower (60 ms), and the latency 45 % lower than
        // at 12: that queue was ours. Cut on it, 12 × 72 / 110, and another
        // check is due.
        assert_eq!(law.next_limit(6, &win(100, 0, 6, 60.0, 1000)), 7);
        assert_eq!(law.floor.mean, Some(60.0 * MS));
        assert!(law.floor_due);
        // Later slow windows alone do not: one check per first slow window
        // (and per check that found the floor lower).
        let mut later = Ceiling {
            floor: Floor::at(50.0 * MS),
            latency_seen: true,
            phase: Phase::Known { ceiling: 31 },
            ..Ceiling::default()
        };
        later.next_limit(30, &win(400, 0, 30, 75.0, 1000));
        assert!(!later.floor_due);
        // A backend whose latency holds still never checks.
        let mut flat = Ceiling::default();
        let mut l = 10;
        for _ in 0..20 {
            l = flat.next_limit(l, &full(l));
            assert!(!flat.floor_due && flat.floor_probe.is_none());
        }
    }

    #[test]
    fn ceiling_holds_a_floor_probe_until_it_spans_two_round_trips_and_drains() {
        // A probe at 20 of 40, on 600 ms calls: its first 1 s window sees
        // the calls admitted at 40 come back (900 ms), not its own.
        let probing = || Ceiling {
            phase: Phase::Known { ceiling: 41 },
            floor: Floor::at(600.0 * MS),
            floor_probe: Some(40),
            ..Ceiling::default()
        };
        let mut law = probing();
        assert_eq!(law.next_limit(20, &win(30, 0, 20, 900.0, 1000)), 20);
        assert_eq!(law.floor.mean, Some(600.0 * MS));
        // Two round trips in, but the calls admitted at 40 have not drained
        // (30 in flight at the peak): held.
        let mut held = law.clone();
        assert_eq!(held.next_limit(20, &win(30, 0, 30, 700.0, 1000)), 20);
        // Drained: the window's successes are the probe's own. The floor
        // rose to 700 ms; back to 40.
        assert_eq!(law.next_limit(20, &win(30, 0, 20, 700.0, 1000)), 40);
        assert_eq!(law.floor.mean, Some(700.0 * MS));
        assert_eq!(law.floor_probe, None);
        // Never drained (a dropping backend's calls hold their permits until
        // the timeout): taken after four round trips.
        let mut law = probing();
        for _ in 0..2 {
            assert_eq!(law.next_limit(20, &win(30, 0, 30, 700.0, 1000)), 20);
        }
        assert_eq!(law.next_limit(20, &win(30, 0, 30, 700.0, 1000)), 40);
        // Ended early by an overload, it measured nothing: the floor stays.
        let mut law = probing();
        assert!(law.next_limit(20, &win(29, 1, 20, 900.0, 1000)) < 40);
        assert_eq!(law.floor.mean, Some(600.0 * MS));
        assert_eq!(law.floor_probe, None);
    }

    #[test]
    fn ceiling_judges_a_limit_once_it_has_run_two_round_trips() {
        // 1 s calls in 1 s windows, at a backend that has queued.
        let slow = |ok, failures, peak, rtt_ms| win(ok, failures, peak, rtt_ms, 1000);
        let queued = || Ceiling {
            phase: Phase::Known { ceiling: 31 },
            rest: 100,
            floor: Floor::at(1000.0 * MS),
            latency_seen: true,
            ..Ceiling::default()
        };
        let mut law = queued();
        // The first windows at 30 see the calls admitted before it: held
        // until it has run two round trips of 1.5 s.
        assert_eq!(law.next_limit(30, &slow(20, 0, 30, 1500.0)), 30);
        assert_eq!(law.next_limit(30, &slow(20, 0, 30, 1500.0)), 30);
        // Then its latency is its own: 30 × 1.2 / 1.5.
        assert_eq!(law.next_limit(30, &slow(20, 0, 30, 1500.0)), 24);
        // The cut is not cut again on the latency of the limit before it...
        assert_eq!(law.next_limit(24, &slow(20, 0, 24, 1500.0)), 24);
        assert_eq!(law.next_limit(24, &slow(20, 0, 24, 1500.0)), 24);
        // ...only on its own.
        assert_eq!(law.next_limit(24, &slow(20, 0, 24, 1500.0)), 19);
        // Within the tolerance, a climb back (or a try of one permit) is not
        // held...
        let mut law = queued();
        assert_eq!(law.next_limit(20, &slow(20, 0, 20, 1000.0)), 25);
        // ...a multiplicative step is: the try that would start an
        // exploration, and each step of one.
        let mut law = Ceiling {
            found: 2,
            room: true,
            ..queued()
        };
        assert_eq!(law.next_limit(31, &slow(20, 0, 31, 1000.0)), 31);
        assert_eq!(law.next_limit(31, &slow(20, 0, 31, 1000.0)), 46);
        let mut law = Ceiling {
            phase: Phase::Explore { step: 8 },
            ..queued()
        };
        assert_eq!(law.next_limit(40, &slow(30, 0, 40, 1000.0)), 40);
        assert_eq!(law.next_limit(40, &slow(30, 0, 40, 1000.0)), 48);
        // A withheld third try (the window ran at rest) is no try: asked
        // again at once.
        let mut law = Ceiling {
            phase: Phase::Known { ceiling: 33 },
            found: 2,
            asked: 33,
            ..queued()
        };
        assert_eq!(law.next_limit(32, &slow(20, 0, 32, 1100.0)), 33);
        // Without a success, the floor says how long a round trip is.
        let stale_only = WindowSummary {
            samples: 5,
            stale_failures: 5,
            ..slow(0, 0, 40, 1000.0)
        };
        let mut law = Ceiling {
            phase: Phase::Explore { step: 8 },
            ..queued()
        };
        assert_eq!(law.next_limit(40, &stale_only), 40);
        // A window closed on a failure the background rate explains is
        // judged at once (a significant one is an overload, judged before).
        let mut law = Ceiling {
            noise: learned(0.01),
            ..queued()
        };
        assert_eq!(law.next_limit(30, &slow(19, 1, 30, 1500.0)), 24);
        // A backend that never queued is not held; nor is a fast one, nor
        // slow start.
        let mut law = Ceiling {
            latency_seen: false,
            ..queued()
        };
        assert_eq!(law.next_limit(30, &slow(20, 0, 30, 1500.0)), 24);
        let mut law = Ceiling {
            floor: Floor::at(50.0 * MS),
            ..queued()
        };
        assert_eq!(law.next_limit(30, &win(400, 0, 30, 75.0, 1000)), 24);
        let mut law = Ceiling {
            phase: Phase::SlowStart,
            ..queued()
        };
        assert_eq!(law.next_limit(20, &slow(20, 0, 20, 1000.0)), 30);
    }

    #[test]
    fn ceiling_cuts_where_a_floor_probe_drained_a_queue_of_its_own() {
        // A probe at 28 of 57 on 20 shared 1 s workers, started by a window
        // of 3.1 s against a floor of 1 s.
        let probing = || Ceiling {
            phase: Phase::Known { ceiling: 58 },
            floor: Floor::at(1000.0 * MS),
            floor_probe: Some(57),
            probe_from: Some(3100.0 * MS),
            ..Ceiling::default()
        };
        // Its own calls took 1.54 s, half: the queue was ours. The floor
        // stays, and 57 is cut on 3.1 s: 57 × 1.2 / 3.1.
        let mut law = probing();
        assert_eq!(law.next_limit(28, &win(60, 0, 28, 1540.0, 4000)), 22);
        assert_eq!(law.floor.mean, Some(1000.0 * MS));
        assert_eq!(law.phase, Phase::Known { ceiling: 23 });
        // Lower than the floor, it lowers it, and the cut reads that.
        let mut law = probing();
        assert_eq!(law.next_limit(28, &win(60, 0, 28, 900.0, 4000)), 19);
        assert_eq!(law.floor.mean, Some(900.0 * MS));
        // Less than a tenth off: the backend is slower. 2.9 s is the floor,
        // and 57 is restored.
        let mut law = probing();
        assert_eq!(law.next_limit(28, &win(40, 0, 28, 2900.0, 6000)), 57);
        assert_eq!(law.floor.mean, Some(2900.0 * MS));
        // More than a tenth off, but the latency it started from is within
        // the tolerance: restored.
        let mut law = Ceiling {
            probe_from: Some(1150.0 * MS),
            ..probing()
        };
        assert_eq!(law.next_limit(28, &win(60, 0, 28, 1000.0, 4000)), 57);
        // A fresh failure makes it the overload's decision, against the
        // ceiling as it was, whatever the probe measured.
        let failed = |from| {
            let mut law = Ceiling {
                probe_from: from,
                ..probing()
            };
            (law.next_limit(28, &win(60, 1, 28, 1540.0, 4000)), law.phase)
        };
        assert_eq!(failed(Some(3100.0 * MS)), failed(None));
        // From the start: a jump at 57 probes at 28, which finds the queue
        // was ours.
        let mut law = Ceiling {
            phase: Phase::Known { ceiling: 58 },
            rest: 100,
            floor: Floor::at(1000.0 * MS),
            ..Ceiling::default()
        };
        assert_eq!(law.next_limit(57, &win(20, 0, 57, 3100.0, 1000)), 28);
        assert_eq!(law.next_limit(28, &win(60, 0, 28, 1540.0, 4000)), 22);
    }

    #[test]
    fn ceiling_slow_start_grows_once_per_round_trip_and_judges_the_latency_over_it() {
        // 3 s calls: the first window closes when the first calls come
        // back, a round trip in.
        let mut law = Ceiling::default();
        assert_eq!(law.next_limit(10, &win(10, 0, 10, 3000.0, 3000)), 15);
        // Then it holds each limit until it has run a round trip.
        assert_eq!(law.next_limit(15, &win(3, 0, 15, 3000.0, 1000)), 15);
        assert_eq!(law.next_limit(15, &win(3, 0, 15, 3000.0, 1000)), 15);
        assert_eq!(law.next_limit(15, &win(3, 0, 15, 3000.0, 1000)), 22);
        // A window closed on a failure is judged at once.
        let mut law = Ceiling {
            noise: learned(0.01),
            ..Ceiling::default()
        };
        assert_eq!(law.next_limit(15, &win(20, 1, 15, 3000.0, 1000)), 22);
        // The latency is judged over the round trip: 15 calls of 1.1 s and 5
        // of 1.3 s are 1.15 s, within 1.2 × the floor of 1 s (the last
        // window alone would cut, to 20 × 1.2 / 1.3).
        let mut law = Ceiling {
            floor: Floor::at(1000.0 * MS),
            ..Ceiling::default()
        };
        assert_eq!(law.next_limit(20, &win(15, 0, 20, 1100.0, 1000)), 20);
        assert_eq!(law.next_limit(20, &win(5, 0, 20, 1300.0, 1000)), 30);
        // The pool is of one limit: one set from outside starts it again
        // (with the 1.5 s at 20 in it, 40 would be cut).
        let mut law = Ceiling {
            floor: Floor::at(1000.0 * MS),
            ..Ceiling::default()
        };
        assert_eq!(law.next_limit(20, &win(20, 0, 20, 1500.0, 1000)), 20);
        assert_eq!(law.next_limit(40, &win(15, 0, 40, 1100.0, 1000)), 40);
        assert_eq!(law.next_limit(40, &win(15, 0, 40, 1100.0, 1000)), 60);
        // Without a success, the floor says how long a round trip is.
        let mut law = Ceiling {
            floor: Floor::at(2000.0 * MS),
            ..Ceiling::default()
        };
        let stale_only = WindowSummary {
            samples: 3,
            stale_failures: 3,
            ..win(0, 0, 20, 2000.0, 1000)
        };
        assert_eq!(law.next_limit(20, &stale_only), 20);
        // A fast backend grows every window.
        let mut law = Ceiling::default();
        assert_eq!(law.next_limit(20, &full(20)), 30);
        assert_eq!(law.next_limit(30, &full(30)), 45);
    }

    #[test]
    fn ceiling_pools_clean_windows_shorter_than_two_round_trips_for_its_floor() {
        // 600 ms calls in 1 s windows: no window holds two round trips.
        let slow = |ok, failures| win(ok, failures, 20, 600.0, 1000);
        let mut law = Ceiling::default();
        law.next_limit(20, &slow(30, 0));
        assert_eq!(law.floor.mean, None);
        // Two clean windows hold 2 s and 60 successes: the floor.
        law.next_limit(20, &slow(30, 0));
        assert_eq!(law.floor.mean, Some(600.0 * MS));
        // A fresh failure starts the pool again.
        let mut law = Ceiling::default();
        law.next_limit(20, &slow(30, 0));
        law.next_limit(20, &slow(29, 1));
        law.next_limit(20, &slow(30, 0));
        assert_eq!(law.floor.mean, None);
        law.next_limit(20, &slow(30, 0));
        assert_eq!(law.floor.mean, Some(600.0 * MS));
        // Two round trips are not enough with fewer than FLOOR_POOL_OK
        // successes: the lowest of small pools' means falls below the floor.
        let mut law = Ceiling::default();
        for _ in 0..3 {
            law.next_limit(10, &slow(15, 0));
            assert_eq!(law.floor.mean, None);
        }
        law.next_limit(10, &slow(15, 0));
        assert_eq!(law.floor.mean, Some(600.0 * MS));
    }

    #[test]
    fn ceiling_tries_the_ceiling_two_timeouts_apart_where_the_backend_drops() {
        let rest_then_try = |drops: bool| {
            let mut law = Ceiling {
                phase: Phase::Known { ceiling: 21 },
                rest: 2,
                since_drop: if drops { 0 } else { u32::MAX },
                drop_wait: 5000.0 * MS,
                ..Ceiling::default()
            };
            (1..=20)
                .find(|_| law.next_limit(20, &full(20)) == 21)
                .unwrap()
        };
        // Two windows at rest, then the try.
        assert_eq!(rest_then_try(false), 2);
        // Behind a 5 s timeout: 10 s of windows first.
        assert_eq!(rest_then_try(true), 10);
    }

    /// A window of 1 s at a backend of 200 ms calls: `ok` successes and
    /// `timeouts` failures that waited 2 s.
    fn timing_out(ok: u64, timeouts: u64, peak: usize) -> WindowSummary {
        timing_out_at(ok, timeouts, peak, 200.0)
    }

    /// A window of 1 s at a backend of `call_ms` calls: `ok` successes and
    /// `timeouts` failures that waited 2 s.
    fn timing_out_at(ok: u64, timeouts: u64, peak: usize, call_ms: f64) -> WindowSummary {
        waited(win(ok, timeouts, peak, call_ms, 1000), call_ms, 2000.0)
    }

    /// A window of 1 s of 200 ms calls at 32: 150 successes and one call
    /// admitted before it (late) that timed out at 2 s.
    fn timed_out_late() -> WindowSummary {
        let w = WindowSummary {
            samples: 151,
            stale_failures: 1,
            ..win(150, 0, 32, 200.0, 1000)
        };
        waited(w, 200.0, 2000.0)
    }

    /// Resting at 32 (a ceiling of 33 remembered) at a backend that drops,
    /// behind a 2 s timeout, a background rate of 0.5 % learned.
    fn resting_behind_2s() -> Ceiling {
        Ceiling {
            since_drop: 0,
            drop_wait: 2e9,
            ..resting(33, 0.005)
        }
    }

    #[test]
    fn ceiling_rests_at_what_was_served_when_its_timeouts_are_permits_the_backend_never_took() {
        // Resting at 32 (a ceiling of 33 remembered) behind a 2 s timeout,
        // with a background rate of 0.5 % learned: 150 calls of 200 ms in a
        // second serve 30, two permits short, and one call a second timed
        // out — over the timeout's two windows, two permits held, as two
        // permits the backend never takes hold them.
        let at_rest = resting_behind_2s;
        let mut law = at_rest();
        assert_eq!(law.next_limit(32, &timing_out(150, 1, 32)), 32);
        // A timeout's worth of windows: it sheds toward the 30 served, one
        // permit at each call that times out fresh (see the next test).
        assert_eq!(law.next_limit(32, &timing_out(150, 1, 32)), 32);
        assert_eq!(law.phase, Phase::Known { ceiling: 31 });
        assert_eq!(law.shed_to, 30);
        assert_eq!(law.next_limit(32, &timing_out(150, 1, 32)), 31);
        assert_eq!(law.next_limit(31, &timing_out(150, 1, 31)), 30);
        assert_eq!(law.shed_to, 0);
        // Failures that came back at once are not permits held.
        let mut fast = at_rest();
        for _ in 0..4 {
            let next = fast.next_limit(32, &win(150, 1, 32, 200.0, 1000));
            assert!(next >= 32, "{next}");
        }
        assert_eq!(fast.shed_to, 0);
        // Windows that served what their timeouts leave (31.4 of 32, 0.6 of
        // a permit short) count none.
        let mut full_enough = at_rest();
        for _ in 0..4 {
            let next = full_enough.next_limit(32, &timing_out(157, 1, 32));
            assert!(next >= 32, "{next}");
        }
        assert_eq!(full_enough.shed_to, 0);
        // Seven permits short (125 calls) with two permits held is not this
        // either: something else left them unfilled.
        let mut shorter = at_rest();
        for _ in 0..4 {
            let next = shorter.next_limit(32, &timing_out(125, 1, 32));
            assert!(next >= 32, "{next}");
        }
        assert_eq!(shorter.shed_to, 0);
        // Where the backend has not dropped (no failure came back at a
        // timeout for DROPS_WINDOWS windows), nothing of this.
        let mut rejects = Ceiling {
            since_drop: u32::MAX,
            ..at_rest()
        };
        for _ in 0..3 {
            let next = rejects.next_limit(32, &timing_out(150, 1, 32));
            assert!(next >= 32, "{next}");
        }
        assert_eq!(rejects.shed_to, 0);
        // 50 ms calls: 580 a second serve 29 of 32, and four timeouts in
        // the two windows held three or four permits: shed toward 29. One
        // timeout in the two (one permit held over them, 0.09 % of the
        // calls), with 600 a second serving 30: shed too, toward 30; kept,
        // it fails a call a timeout for good.
        let mut many = at_rest();
        many.next_limit(32, &timing_out_at(580, 2, 32, 50.0));
        many.next_limit(32, &timing_out_at(580, 2, 32, 50.0));
        assert_eq!(many.shed_to, 29);
        let mut one = Ceiling {
            phase: Phase::Known { ceiling: 32 },
            ..at_rest()
        };
        one.next_limit(31, &timing_out_at(600, 1, 31, 50.0));
        one.next_limit(31, &timing_out_at(600, 0, 31, 50.0));
        assert_eq!(one.shed_to, 30);
        // Late timeouts count where they were sent at the resting level or
        // its probe: sent at 40 before a cut to 32, they held permits the
        // backend took (the cut's drain).
        let late = timed_out_late;
        let after = |limit| {
            let mut law = at_rest();
            for _ in 0..4 {
                law.recent.push(limit, 1_000_000_000);
            }
            law.next_limit(32, &late());
            law.next_limit(32, &late());
            law.shed_to
        };
        assert_eq!(after(40), 0);
        assert_eq!(after(32), 30);
    }

    #[test]
    fn ceiling_reads_timeouts_as_a_tail_where_its_successes_reach_halfway_to_the_timeout() {
        // As above: resting at 32 behind a 2 s timeout, 150 calls of 200 ms
        // a second serve 30, and one call a second times out. Where some
        // successes took 1.2 s, past halfway from their mean to the timeout
        // (1.1 s), the timeouts are a heavy tail's, at any load: no permit
        // is unfilled, and nothing is shed however long it lasts.
        let at_rest = resting_behind_2s;
        let reaching = |max_ms: f64| WindowSummary {
            max_ok_rtt_nanos: max_ms * MS,
            ..timing_out(150, 1, 32)
        };
        let mut tail = at_rest();
        for _ in 0..6 {
            assert_eq!(tail.next_limit(32, &reaching(1200.0)), 32);
            assert_eq!(tail.shed_to, 0);
        }
        // One window of the span reaching that far is enough.
        let mut once = at_rest();
        once.next_limit(32, &reaching(1200.0));
        once.next_limit(32, &reaching(300.0));
        assert_eq!(once.shed_to, 0);
        // Successes that stay short of halfway (1 s) leave the timeouts to
        // permits the backend never took: shed toward the 30 served.
        let mut short = at_rest();
        short.next_limit(32, &reaching(1000.0));
        short.next_limit(32, &reaching(1000.0));
        assert_eq!(short.shed_to, 30);
    }

    #[test]
    fn ceiling_sheds_permits_the_backend_never_takes_one_at_each_fresh_timeout() {
        // Shedding from 32 toward 30 behind a 2 s timeout (as above).
        let shedding = |step| Ceiling {
            since_drop: 0,
            drop_wait: 2e9,
            shed_to: 30,
            shed_step: step,
            ..resting(31, 0.005)
        };
        let mut law = shedding(1);
        // Clean, or only late timeouts (sent before the last cut, their
        // permits sent again): held.
        assert_eq!(law.next_limit(32, &win(150, 0, 32, 200.0, 1000)), 32);
        assert_eq!(law.next_limit(32, &timed_out_late()), 32);
        // A fresh timeout: one permit, as it comes back.
        assert_eq!(law.next_limit(32, &timing_out(150, 1, 32)), 31);
        // Where they came back together (two in one window of the timeout
        // counted), two at once: the other is back in the same instant.
        let mut law = shedding(2);
        assert_eq!(law.next_limit(32, &timing_out(150, 1, 32)), 30);
        assert_eq!(law.shed_to, 0);
        // A failure answered at once is overload of another kind: no more
        // shedding (even toward a lower level), and the law judges it.
        let mut law = Ceiling {
            shed_to: 20,
            ..shedding(1)
        };
        law.next_limit(32, &win(150, 3, 32, 200.0, 1000));
        assert_eq!(law.shed_to, 0);
        // Nothing shed for two timeouts: it stops, and the limit rests.
        let mut law = shedding(1);
        for _ in 0..4 {
            assert_eq!(law.next_limit(32, &win(150, 0, 32, 200.0, 1000)), 32);
        }
        law.next_limit(32, &win(150, 0, 32, 200.0, 1000));
        assert_eq!(law.shed_to, 0);
    }

    #[test]
    fn ceiling_blames_a_timeout_on_the_limit_in_force_a_timeout_before_it() {
        // Behind a 2 s timeout, tries climbed 31 → 32 → 33 in 1.5 s; the
        // first failure comes back at the timeout in the window of 33: a
        // call admitted under 31 was dropped.
        let window = |wait_ms: f64| {
            let ok = 130;
            WindowSummary {
                samples: ok + 1,
                failures: 1,
                mean_rtt_nanos: (ok as f64 * 220.0 + wait_ms) / (ok + 1) as f64 * MS,
                ..win(ok, 0, 33, 220.0, 1000)
            }
        };
        let after = |history: &[(usize, u64)], wait_ms: f64| {
            let mut law = Ceiling {
                since_drop: 0,
                drop_wait: 2000.0 * MS,
                ..resting(33, 0.0)
            };
            for &(limit, ms) in history {
                law.recent.push(limit, ms * 1_000_000);
            }
            let next = law.next_limit(33, &window(wait_ms));
            (next, law.phase)
        };
        let tries = [(31, 1000), (32, 500)];
        // The ceiling is below 31: rest under it.
        assert_eq!(after(&tries, 2000.0), (30, Phase::Known { ceiling: 31 }));
        // The limit a timeout before was the present one: a failed probe.
        assert_eq!(
            after(&[(33, 1000), (33, 1000)], 2000.0),
            (32, Phase::Known { ceiling: 33 })
        );
        // A try's first call, dropped as its window began, comes back as
        // the window ends a timeout later: admitted under 33, not 32.
        assert_eq!(
            after(&[(32, 1000)], 1000.0),
            (32, Phase::Known { ceiling: 33 })
        );
        // A failure that came back at once was admitted under 33.
        assert_eq!(after(&tries, 220.0), (32, Phase::Known { ceiling: 33 }));
        // History that does not reach a timeout back blames nothing.
        assert_eq!(
            after(&[(32, 500)], 2000.0),
            (32, Phase::Known { ceiling: 33 })
        );
        // Nor does a window that also drained calls of an answered
        // overload: the mean wait is not the fresh failure's.
        let mut law = Ceiling {
            since_drop: 0,
            drop_wait: 2000.0 * MS,
            ..resting(33, 0.0)
        };
        for (limit, ms) in tries {
            law.recent.push(limit, ms * 1_000_000);
        }
        let draining = WindowSummary {
            samples: 132,
            stale_failures: 1,
            mean_rtt_nanos: (130.0 * 220.0 + 2.0 * 2000.0) / 132.0 * MS,
            ..window(2000.0)
        };
        assert_eq!(law.next_limit(33, &draining), 32);
        assert_eq!(law.phase, Phase::Known { ceiling: 33 });
    }

    #[test]
    fn ceiling_asks_again_for_a_try_the_limiter_withheld() {
        // The limiter's increase jitter may withhold a +1 step. A withheld
        // try in a run of tries that found room was no try: the law asks
        // again, once, and the run goes on (21, 22, withheld, 23, then
        // explore).
        let mut law = Ceiling {
            phase: Phase::Known { ceiling: 21 },
            ..Ceiling::default()
        };
        assert_eq!(law.next_limit(21, &full(21)), 22);
        assert_eq!(law.next_limit(22, &full(22)), 23);
        // The window ran at 22, not 23.
        assert_eq!(law.next_limit(22, &full(22)), 23);
        assert_eq!(law.next_limit(23, &full(23)), 46);
        assert_eq!(law.phase, Phase::Explore { step: 46 });
        // Asked again and withheld again: the law rests and probes later.
        let mut law = Ceiling {
            phase: Phase::Known { ceiling: 21 },
            rest: 3,
            ..Ceiling::default()
        };
        assert_eq!(law.next_limit(21, &full(21)), 22);
        assert_eq!(law.next_limit(22, &full(22)), 23);
        assert_eq!(law.next_limit(22, &full(22)), 23);
        assert_eq!(law.next_limit(22, &full(22)), 22);
        // A plain probe withheld is postponed, not asked again: the law
        // probes again on the `rest`-th window at rest.
        let mut law = Ceiling {
            phase: Phase::Known { ceiling: 21 },
            rested: 2,
            rest: 3,
            ..Ceiling::default()
        };
        assert_eq!(law.next_limit(20, &full(20)), 21);
        let rest = law.rest;
        for _ in 1..rest {
            assert_eq!(law.next_limit(20, &full(20)), 20);
        }
        assert_eq!(law.next_limit(20, &full(20)), 21);
    }

    #[test]
    fn ceiling_probes_before_it_yields_when_the_limiter_withheld_its_last_probe() {
        // Resting at 20 below 21, a yield due and a probe due in the same
        // window. The limiter withheld the probe asked before (the window ran
        // at rest): the probe goes first. Otherwise the yield does.
        let due = |asked: usize| Ceiling {
            phase: Phase::Known { ceiling: 21 },
            yielded: true,
            since_yield: 1000,
            rested: 1000,
            rest: 1,
            asked,
            ..Ceiling::default()
        };
        let mut owed = due(21);
        assert_eq!(owed.next_limit(20, &full(20)), 21);
        // Owed until a window runs at the ceiling, not settled by the ask.
        assert!(owed.owed);
        // The yield comes after the probe, at the next window at rest.
        assert_eq!(owed.next_limit(21, &win(2, 1, 21, 50.0, 2)), 20);
        assert!(!owed.owed);
        assert_eq!(owed.next_limit(20, &full(20)), 18);
        let mut plain = due(20);
        assert_eq!(plain.next_limit(20, &full(20)), 18);
        // The rest drawn when the withheld probe was asked has not run out:
        // owed, the probe still goes first; not owed, the yield does.
        let fresh = |asked: usize| Ceiling {
            rested: 0,
            rest: 4,
            ..due(asked)
        };
        assert_eq!(fresh(21).next_limit(20, &full(20)), 21);
        assert_eq!(fresh(20).next_limit(20, &full(20)), 18);
        // No yield due: an owed probe waits for its rest.
        let mut resting = Ceiling {
            since_yield: 0,
            ..fresh(21)
        };
        assert_eq!(resting.next_limit(20, &full(20)), 20);
        assert!(resting.owed);
    }

    #[test]
    fn ceiling_draws_from_its_seed_and_keeps_it_through_a_reset() {
        let rests = |law: &mut Ceiling| (0..32).map(|_| law.draw_rest()).collect::<Vec<_>>();
        let mut law = Ceiling::default();
        law.seed(7);
        let first = rests(&mut law);
        assert!(first.iter().all(|r| (2..=4).contains(r)));
        law.reset();
        // The reset drew the first rest from the seed again.
        let mut again = Ceiling::default();
        again.seed(7);
        assert_eq!(law.rest, again.rest);
        assert_eq!(rests(&mut law), first);
        let mut other = Ceiling::default();
        other.seed(8);
        let mut seven = Ceiling::default();
        seven.seed(7);
        assert_ne!(rests(&mut other), rests(&mut seven));
        // Unseeded laws all draw alike.
        assert_eq!(
            rests(&mut Ceiling::default()),
            rests(&mut Ceiling::default())
        );
    }

    #[test]
    fn ceiling_reads_a_failed_return_as_a_neighbour_only_above_what_its_rest_level_fails() {
        // Gave two (30 → 28); the return to 30 fails on its first two
        // samples. Where windows at 30 failed a quarter of their calls (a
        // soft ceiling), one failure in two is what 30 fails anyway: no
        // neighbour took the gift. The law reads it as a failure at its
        // resting level (a tenth down), not as a gift taken.
        let returning = |failures: f64| Ceiling {
            phase: Phase::Known { ceiling: 31 },
            given: 2,
            rest_level: 30,
            at_rest: Tally {
                failures,
                samples: 200.0,
            },
            ..Ceiling::default()
        };
        let mut soft = returning(50.0);
        assert_eq!(soft.next_limit(30, &win(1, 1, 30, 50.0, 3)), 27);
        assert!(!soft.neighbour());
        assert_eq!(soft.given, 0);
        // Where 30 failed nothing, the same failure is a neighbour's: the
        // gift is lost as one permit.
        let mut hard = returning(0.0);
        assert_eq!(hard.next_limit(30, &win(1, 1, 30, 50.0, 3)), 29);
        assert!(hard.neighbour());
        // Four failures in four samples are more than a quarter explains
        // (P ≈ 0.02): a neighbour took it there too.
        let mut soft = returning(50.0);
        assert_eq!(soft.next_limit(30, &win(0, 4, 30, 50.0, 3)), 29);
        assert!(soft.neighbour());
        // The rate is that of the resting level only: a return to another
        // level compares with noise alone.
        let mut elsewhere = returning(50.0);
        elsewhere.rest_level = 25;
        assert_eq!(elsewhere.next_limit(30, &win(1, 1, 30, 50.0, 3)), 29);
        assert!(elsewhere.neighbour());
    }

    #[test]
    fn ceiling_learns_what_its_resting_level_fails_from_its_windows_at_rest_alone() {
        // 5 % noise: one failure in 100 samples is clean.
        let mut law = resting(31, 0.05);
        let one_in_100 = win(99, 1, 30, 50.0, 280);
        for _ in 0..2 {
            assert_eq!(law.next_limit(30, &one_in_100), 30);
        }
        assert_eq!(law.rest_level, 30);
        let rate = law.at_rest.failures / law.at_rest.samples;
        assert!((rate - 0.01).abs() < 1e-9, "{rate}");
        let before = (law.at_rest.failures, law.at_rest.samples);
        // A gift's window (below rest) and its return (at rest) are not
        // what the level fails: they are left out.
        law.given = 2;
        let gift = win(99, 1, 28, 50.0, 280);
        assert_eq!(law.next_limit(28, &gift), 30);
        assert_eq!((law.at_rest.failures, law.at_rest.samples), before);
        assert_eq!(law.next_limit(30, &one_in_100), 30);
        assert_eq!((law.at_rest.failures, law.at_rest.samples), before);
        // The next window at rest counts again.
        assert_eq!(law.next_limit(30, &one_in_100), 30);
        assert!(law.at_rest.samples > before.1);
        // A new resting level starts afresh.
        law.phase = Phase::Known { ceiling: 26 };
        assert_eq!(law.next_limit(25, &win(100, 0, 25, 50.0, 280)), 25);
        assert_eq!(law.rest_level, 25);
        assert_eq!(law.at_rest.failures, 0.0);
        assert!((law.at_rest.samples - 100.0).abs() < 1e-9);
    }

    #[test]
    fn ceiling_cuts_when_its_windows_fail_together_more_than_noise_explains() {
        let fresh = || resting(21, 0.01);
        // One failure in 19 samples: at 1 % noise no single window is
        // overload (P ≈ 0.17), and none teaches the background rate (more
        // than 5 % failed). Five such windows in a row hold 4 failures in
        // 91 samples (decayed; P ≈ 0.014); the sixth, 5 in 109 (P ≈ 0.005 <
        // 0.01): a soft ceiling fails a few calls in every window. Cut a
        // tenth.
        let mut law = fresh();
        let failing = win(18, 1, 20, 50.0, 50);
        for window in 1..=5 {
            assert_eq!(law.next_limit(20, &failing), 20, "window {window}");
        }
        assert_eq!(law.next_limit(20, &failing), 18);
        // The count starts again after the cut.
        assert_eq!((law.run.failures, law.run.samples), (0.0, 0.0));
        // One failure in 100 samples is what 1 % noise makes: it never adds
        // up to overload.
        let mut law = fresh();
        let noisy = win(99, 1, 20, 50.0, 280);
        for window in 1..=50 {
            assert_eq!(law.next_limit(20, &noisy), 20, "window {window}");
        }
    }

    #[test]
    fn ceiling_learns_the_background_rate_against_a_prior_of_300_clean_samples() {
        // One failure in every 100 samples: after the first 100, read as if
        // 300 clean samples came first (about 1 in 400); the windows' own
        // rate as they outweigh the prior.
        let mut law = Ceiling::default();
        assert_eq!(law.learned_noise(), 0.0);
        assert_eq!(law.noise_below.rate(0.0), 0.0, "nothing learned, no prior");
        law.learn_noise(1, 100, false);
        assert!(
            (law.learned_noise() - 0.0026).abs() < 1e-4,
            "{}",
            law.learned_noise()
        );
        for _ in 0..9 {
            law.learn_noise(1, 100, false);
        }
        assert!(
            (law.learned_noise() - 0.0085).abs() < 1e-4,
            "{}",
            law.learned_noise()
        );
        for _ in 0..90 {
            law.learn_noise(1, 100, false);
        }
        assert!(
            (law.learned_noise() - 0.01).abs() < 1e-4,
            "{}",
            law.learned_noise()
        );
        // Resting at 20 after 300 such samples (0.54 %), a window closed on
        // its one failure after 15 calls is what noise makes (0.08
        // expected, 7.8 %): held. With the prior worth the average's 1000
        // samples, the rate read 0.26 %, and the same window was overload
        // (3.8 %).
        let mut law = Ceiling {
            phase: Phase::Known { ceiling: 21 },
            rest: 100,
            full_samples: 400,
            ..Ceiling::default()
        };
        for _ in 0..3 {
            law.learn_noise(1, 100, false);
        }
        assert_eq!(law.next_limit(20, &win(14, 1, 20, 50.0, 40)), 20);
    }

    #[test]
    fn ceiling_learns_noise_where_a_full_window_holds_too_few_samples_for_five_percent() {
        // Resting at 1: a full window holds 18 samples, so one failure is
        // always more than 5 % of a window.
        let at_one = |full: u64| {
            let mut law = resting(2, 0.0);
            law.next_limit(1, &win(full, 0, 1, 50.0, 1000));
            law.next_limit(1, &win(11, 1, 1, 50.0, 600));
            law.learned_noise()
        };
        // One in 12 is at most two of a full window's 18: learned.
        let learned = at_one(18);
        assert!(
            (learned - 1.0 / 12.0 * (1.0 - keep(12))).abs() < 1e-9,
            "{learned}"
        );
        // Where a full window holds 400, one in 12 is overload: not learned.
        assert_eq!(at_one(400), 0.0);
        // An idle window (a sample at a limit of 10) is no full window.
        let mut law = resting(11, 0.0);
        law.next_limit(10, &win(400, 0, 10, 50.0, 1000));
        law.next_limit(10, &win(1, 0, 1, 50.0, 1000));
        assert_eq!(law.full_samples, 400);
    }

    #[test]
    fn ceiling_bounds_its_noise_by_what_fails_below_its_resting_level() {
        let fresh = || resting(31, 0.0);
        // 3 % of the calls failed in the windows at rest (30).
        let learned_at_rest = || {
            let mut law = fresh();
            for _ in 0..40 {
                law.learn_noise(3, 100, false);
            }
            assert!(
                (law.learned_noise() - 0.03).abs() < 0.001,
                "{}",
                law.learned_noise()
            );
            law
        };
        // One failure in 50 samples (a window too short to measure what
        // was served).
        let one_in_50 = win(49, 1, 30, 50.0, 90);
        // The windows below rest failed as often: that is noise, and the
        // failure with it.
        let mut noise = learned_at_rest();
        for _ in 0..5 {
            noise.learn_noise(3, 100, true);
        }
        assert!((noise.noise_rate() - 0.03).abs() < 0.001);
        assert_eq!(noise.next_limit(30, &one_in_50), 30);
        // They failed nothing: the failures came with the load (a soft
        // ceiling), and the failure at rest is overload (a tenth down).
        let mut soft = learned_at_rest();
        for _ in 0..5 {
            soft.learn_noise(0, 100, true);
        }
        assert_eq!(soft.noise_rate(), 0.0);
        assert_eq!(soft.next_limit(30, &one_in_50), 27);
        // Until the windows below rest have said enough (~360 samples), the
        // rate learned from every window stands.
        let mut early = learned_at_rest();
        for _ in 0..3 {
            early.learn_noise(0, 100, true);
        }
        assert!(early.noise_rate() > 0.02);
        assert_eq!(early.next_limit(30, &one_in_50), 30);
        // Windows below the resting level teach it; windows at rest do not.
        let mut law = fresh();
        law.next_limit(30, &win(100, 0, 30, 50.0, 280));
        assert_eq!(law.noise_below.weight, 0.0);
        law.next_limit(27, &win(100, 0, 27, 50.0, 280));
        assert!(law.noise_below.weight > 0.09, "{}", law.noise_below.weight);
        // Below the lowest resting level of the last 200 windows, not the
        // current one: a limit that crept up a soft ceiling from 25 to 30
        // learns nothing from 28, where it failed almost as much.
        let mut law = resting(26, 0.0);
        law.next_limit(25, &win(100, 0, 25, 50.0, 280));
        law.phase = Phase::Known { ceiling: 31 };
        law.next_limit(28, &win(100, 0, 28, 50.0, 280));
        assert_eq!(law.noise_below.weight, 0.0);
        law.next_limit(24, &win(100, 0, 24, 50.0, 280));
        assert!(law.noise_below.weight > 0.09);
        // A new lowest resting level forgets what the windows below the old
        // one said: a clean past does not bound noise that began later.
        let mut law = resting(31, 0.0);
        law.next_limit(30, &win(100, 0, 30, 50.0, 280));
        for _ in 0..5 {
            law.next_limit(27, &win(100, 0, 27, 50.0, 280));
        }
        assert!(law.noise_below.weight >= NOISE_BELOW_WEIGHT);
        law.phase = Phase::Known { ceiling: 25 };
        law.next_limit(24, &win(100, 0, 24, 50.0, 280));
        assert_eq!(law.lowest_rest, 24);
        assert_eq!(law.noise_below, Decayed::default());
        // After 200 windows the reference restarts where the limit rests.
        let mut law = resting(26, 0.0);
        law.next_limit(25, &win(100, 0, 25, 50.0, 280));
        law.phase = Phase::Known { ceiling: 31 };
        for _ in 0..=NOISE_BELOW_WINDOWS {
            law.next_limit(30, &win(100, 0, 30, 50.0, 280));
        }
        assert_eq!(law.lowest_rest, 30);
        law.next_limit(28, &win(100, 0, 28, 50.0, 280));
        assert!(law.noise_below.weight > 0.09);
    }

    #[test]
    fn ceiling_tests_failures_against_a_rate_at_any_window_size() {
        // P(F ≥ f) for F Poisson with mean μ, against 5 % (hand-computed
        // tails in the comments).
        assert!(!significant_at(0.01, 0, 100));
        assert!(significant_at(0.0, 1, 100));
        // μ = 10: P(F ≥ 15) ≈ 0.083, P(F ≥ 16) ≈ 0.049, P(F ≥ 18) ≈ 0.014.
        assert!(!significant_at(0.01, 15, 1000));
        assert!(significant_at(0.01, 16, 1000));
        assert!(significant_at(0.01, 18, 1000));
        // μ = 1000 at 1 %: P(F ≥ 1060) ≈ 0.031, P(F ≥ 1080) ≈ 0.0064.
        assert!(!significant_with(1.0, 1060, 1000, 0.01));
        assert!(significant_with(1.0, 1080, 1000, 0.01));
        // μ = 30000: P(F ≥ 30400) ≈ 0.011, P(F ≥ 30600) ≈ 0.0003. A product
        // of terms from e^−μ underflowed to zero above μ ≈ 745 and found
        // nothing significant: not even every call of 4000 failing where a
        // quarter fail.
        assert!(!significant_with(0.3, 30_400, 100_000, 0.01));
        assert!(significant_with(0.3, 30_600, 100_000, 0.01));
        assert!(significant_at(0.25, 4000, 4000));
        assert!(significant_at(0.05, 20_000, 20_000));
    }

    #[test]
    fn ceiling_reads_rare_failures_as_noise_once_it_has_learned_them() {
        let mut law = Ceiling {
            phase: Phase::Known { ceiling: 21 },
            rest: 100,
            ..Ceiling::default()
        };
        // With no background rate learned, one failure is overload.
        assert!(law.significant(1, 400));
        // A long stretch with 1 % of failures in each window.
        for _ in 0..20 {
            law.learn_noise(4, 400, false);
        }
        assert!(
            (law.learned_noise() - 0.01).abs() < 0.001,
            "{}",
            law.learned_noise()
        );
        // One failure in 100 samples is what 1 % noise makes: not overload,
        // the limit holds at its resting level.
        assert!(!law.significant(1, 100));
        assert_eq!(law.next_limit(20, &win(99, 1, 20, 50.0, 280)), 20);
        // One failure in the first 2 samples is not.
        assert!(law.significant(1, 2));
        // Nor are 8 in 100 (P(F ≥ 8 | μ = 1) ≈ 1e-5).
        assert!(law.significant(8, 100));
        // Overload windows teach the background rate nothing.
        let before = law.learned_noise();
        law.learn_noise(50, 100, false);
        assert_eq!(law.learned_noise(), before);
    }

    #[test]
    fn ceiling_cuts_a_queue_and_probes_a_floor_that_jumped() {
        let mut law = Ceiling {
            phase: Phase::Known { ceiling: 60 },
            rest: 100,
            ..Ceiling::default()
        };
        // Learns a 50 ms floor; halfway back toward resting at 59.
        assert_eq!(law.next_limit(20, &full(20)), 40);
        law.since_floor_probe = 0;
        // 60 ms is within 20 % of the floor: keep climbing.
        assert_eq!(law.next_limit(40, &win(660, 0, 40, 60.0, 1000)), 50);
        // 75 ms at a limit of 50: a queue. 50 × 60 / 75 = 40.
        assert_eq!(law.next_limit(50, &win(660, 0, 50, 75.0, 1000)), 40);
        assert_eq!(law.phase, Phase::Known { ceiling: 41 });
        // Twice the floor is a jump: once the spacing allows, probe at half
        // the limit first...
        law.since_floor_probe = PROBE_SPACING;
        assert_eq!(law.next_limit(40, &win(400, 0, 40, 100.0, 1000)), 20);
        // ...whose mean is the new floor, and restore the limit.
        assert_eq!(law.next_limit(20, &win(200, 0, 20, 100.0, 1000)), 40);
        assert_eq!(law.floor.mean, Some(100.0 * MS));
    }

    #[test]
    fn ceiling_learns_the_spread_of_success_latency_from_settled_windows_at_one_limit() {
        let ms2 = MS * MS;
        let mut spread = Spread::default();
        // Two means of 50 successes 10 ms apart: σ² = 10² / (1/50 + 1/50)
        // = 2500 ms², so a mean of 25 is good to 10 ms.
        spread.push(10, Some(100.0 * MS), 50);
        spread.push(10, Some(110.0 * MS), 50);
        assert!((spread.error(25) / MS - 10.0).abs() < 1e-9);
        // A window at another limit, or one not settled or clean, pairs
        // with nothing.
        spread.push(12, Some(200.0 * MS), 50);
        spread.push(10, Some(300.0 * MS), 50);
        spread.push(10, None, 50);
        spread.push(10, Some(100.0 * MS), 50);
        assert!((spread.variance / ms2 - 2500.0).abs() < 1e-6);
        // Each next pair moves it a sixteenth of the way, and a step of the
        // mean between two windows counts sixteen times the spread at most.
        spread.push(10, Some(1100.0 * MS), 50);
        assert!((spread.variance / ms2 - (2500.0 + (16.0 - 1.0) * 2500.0 / 16.0)).abs() < 1e-6);
        // No successes, no error.
        assert_eq!(spread.error(0), 0.0);
        // The law pairs only windows that began two round trips after their
        // limit took force: the first window of a limit still serves the
        // queue of the one before.
        let mut law = Ceiling {
            phase: Phase::Known { ceiling: 60 },
            rest: 100,
            ..Ceiling::default()
        };
        law.next_limit(20, &win(100, 0, 20, 150.0, 1000));
        law.next_limit(20, &win(100, 0, 20, 100.0, 1000));
        assert_eq!(law.spread.variance, 0.0);
        law.next_limit(20, &win(100, 0, 20, 110.0, 1000));
        assert!((law.spread.variance / ms2 - 5000.0).abs() < 1e-6);
    }

    #[test]
    fn ceiling_reads_no_queue_in_a_mean_within_the_noise_of_its_few_successes() {
        // Resting at 12 below a ceiling of 13, on a floor of 450 ms whose
        // successes spread 300 ms about their mean (150 ms plus an
        // exponential 300 ms): the tolerance allows 540 ms.
        let law = Ceiling {
            phase: Phase::Known { ceiling: 13 },
            rest: 100,
            floor: Floor::at(450.0 * MS),
            spread: Spread {
                variance: 300.0 * 300.0 * MS * MS,
                last: None,
            },
            ..Ceiling::default()
        };
        let next = |mut law: Ceiling, ok: u64, rtt_ms: f64| {
            law.next_limit(12, &win(ok, 0, 12, rtt_ms, 1000))
        };
        // A mean of 600 ms of 20 successes (good to 67 ms) lies 2.2
        // standard errors over the floor: noise, not a queue.
        assert_eq!(next(law.clone(), 20, 600.0), 12);
        // Past three (660 ms) it is a queue: 12 × 540 / 660 = 9.8.
        assert_eq!(next(law.clone(), 20, 660.0), 9);
        // So is 600 ms of 200 successes (good to 21 ms): 12 × 540 / 600.
        assert_eq!(next(law.clone(), 200, 600.0), 10);
        // Where no spread is learned, the tolerance alone judges.
        let unlearned = Ceiling {
            spread: Spread::default(),
            ..law.clone()
        };
        assert_eq!(next(unlearned, 20, 600.0), 10);
        // Slow start judges the mean over its round trip by all the
        // successes in it: two windows of 15 calls of 1.65 s on a floor of
        // 1 s whose successes spread 1 s lie 3.6 standard errors over it
        // (0.18 s for 30), a queue: 20 × 1.2 / 1.65. (Either window alone,
        // 2.5 of its 0.26 s, would not be.)
        let mut start = Ceiling {
            floor: Floor::at(1000.0 * MS),
            spread: Spread {
                variance: 1000.0 * 1000.0 * MS * MS,
                last: None,
            },
            ..Ceiling::default()
        };
        assert_eq!(start.next_limit(20, &win(15, 0, 20, 1650.0, 1000)), 20);
        assert_eq!(start.next_limit(20, &win(15, 0, 20, 1650.0, 1000)), 14);
    }

    #[test]
    fn ceiling_raises_its_floor_by_how_far_the_lowest_of_its_means_falls_below_their_mean() {
        // The normal order statistic: the lowest of 2 means lies 0.56
        // standard errors below their mean, of 10 1.54, of 300 2.9.
        assert_eq!(lowest_of(1), 0.0);
        for (n, below) in [(2, 0.56), (10, 1.54), (300, 2.9)] {
            assert!((lowest_of(n) - below).abs() < 0.13, "{n}");
        }
        // Successes spread 50 ms about their mean: a mean of 100 is good to
        // 5 ms, and the lowest of ten such means, 100 ms, lies 7.7 ms below.
        let spread = Spread {
            variance: 2500.0 * MS * MS,
            last: None,
        };
        let floor_ms = |law: &Ceiling| law.floor().map(|f| (f / MS * 100.0).round() / 100.0);
        let mut law = Ceiling {
            floor: Floor {
                mean: Some(100.0 * MS),
                ok: 100,
                means: 10,
            },
            ..Ceiling::default()
        };
        // Before the spread is known, the floor is the lowest mean...
        assert_eq!(floor_ms(&law), Some(100.0));
        // ...and when it is learned, the floor takes its error.
        law.spread = spread;
        assert_eq!(floor_ms(&law), Some(107.73));
        // The state reports the floor the law judges by.
        let LawState::Ceiling { floor_nanos, .. } = law.state() else {
            panic!("a Ceiling state");
        };
        assert_eq!(floor_nanos, law.floor());
        // 625 successes of 103 ms (good to 2 ms) say less than that more
        // surely: 103 + 1.6 × 2 against 100 + 1.6 × 5.
        law.lower_floor(103.0 * MS, 625);
        assert_eq!(
            (law.floor.mean, law.floor.ok, law.floor.means),
            (Some(103.0 * MS), 625, 11)
        );
        // 25 of 95 ms (good to 10 ms) do not: 95 + 1.6 × 10.
        law.lower_floor(95.0 * MS, 25);
        assert_eq!((law.floor.mean, law.floor.ok), (Some(103.0 * MS), 625));
        // A probe's mean starts the count again.
        let mut law = Ceiling {
            phase: Phase::Known { ceiling: 60 },
            rest: 100,
            floor_probe: Some(40),
            spread,
            floor: Floor {
                mean: Some(100.0 * MS),
                ok: 100,
                means: 10,
            },
            in_force_nanos: 5_000_000_000,
            in_force: 20,
            ..Ceiling::default()
        };
        law.next_limit(20, &win(100, 0, 20, 120.0, 1000));
        assert_eq!(law.floor.means, 1);
        assert_eq!(floor_ms(&law), Some(120.0));
    }

    #[test]
    fn ceiling_climbs_through_stale_failures_and_resets() {
        let mut law = Ceiling::default();
        // The drain of an overload already answered neither cuts nor stops
        // a climb.
        let stale = WindowSummary {
            stale_failures: 3,
            ..full(20)
        };
        assert_eq!(law.next_limit(20, &stale), 30);
        assert_eq!(law.next_limit(30, &win(400, 40, 30, 50.0, 1000)), 20);
        assert_eq!(law.phase, Phase::Known { ceiling: 21 });
        law.reset();
        assert_eq!(law.phase, Phase::SlowStart);
        assert_eq!(law.learned_noise(), 0.0);
        assert!(law.reacts_to_first_failure());
    }
}
