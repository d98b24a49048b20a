//! The `tracing` feature's contracts (the events table of
//! `adaptx::observe`), checked with a subscriber of this file that keeps
//! every event, on a manual clock.
#![cfg(feature = "tracing")]

mod common;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use adaptx::observe::MIN_LIMIT_WARN_WINDOWS;
use adaptx::{Limiter, Outcome};
use common::{MS, Rig};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Level, Metadata, Subscriber};

/// One event: level, target, message and the other fields (`Debug` of the
/// value; strings without quotes).
#[derive(Debug, Clone)]
struct Seen {
    level: Level,
    target: String,
    message: String,
    fields: BTreeMap<String, String>,
}

impl Seen {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

#[derive(Default)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

type OnEvent = Arc<dyn Fn(&Seen) + Send + Sync>;

/// A subscriber that keeps every event and may run `on_event` on each.
#[derive(Clone, Default)]
struct Capture {
    events: Arc<Mutex<Vec<Seen>>>,
    on_event: Option<OnEvent>,
}

impl Capture {
    fn events(&self) -> Vec<Seen> {
        self.events.lock().expect("events").clone()
    }

    fn with_message(&self, message: &str) -> Vec<Seen> {
        self.events()
            .into_iter()
            .filter(|e| e.message == message)
            .collect()
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let mut fields = fields.0;
        let seen = Seen {
            level: *event.metadata().level(),
            target: event.metadata().target().to_owned(),
            message: fields.remove("message").unwrap_or_default(),
            fields,
        };
        if let Some(f) = &self.on_event {
            f(&seen);
        }
        self.events.lock().expect("events").push(seen);
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// Runs `f` with `capture` as this thread's subscriber.
fn traced<T>(capture: &Capture, f: impl FnOnce() -> T) -> T {
    tracing::subscriber::with_default(capture.clone(), f)
}

/// AIMD "db", limit 4 in `[1, 8]`, on a manual clock.
fn rig() -> Rig {
    Rig::new(|b| b.name("db").initial_limit(4).min_limit(1).max_limit(8))
}

#[test]
fn tracing_limit_change_event_has_old_new_and_the_reason() {
    let capture = Capture::default();
    let rig = rig();
    traced(&capture, || {
        for _ in 0..3 {
            rig.record_idle(Outcome::Success, 10 * MS);
        }
        rig.advance();
        // The failure closes the window: AIMD halves 4 -> 2.
        rig.record_idle(Outcome::Failure, 10 * MS);
    });
    assert_eq!(rig.limiter.limit(), 2);
    let events = capture.with_message("limit changed");
    assert_eq!(events.len(), 1, "{:?}", capture.events());
    let e = &events[0];
    assert_eq!(e.level, Level::DEBUG);
    assert_eq!(e.target, "adaptx");
    for (field, value) in [
        ("limiter", "db"),
        ("law", "aimd"),
        ("old", "4"),
        ("new", "2"),
        ("samples", "4"),
        ("failures", "1"),
        ("stale_failures", "0"),
        ("peak_in_flight", "1"),
        ("mean_latency_ms", "10.0"),
        ("rtt_min_ms", "10.0"),
    ] {
        assert_eq!(e.field(field), Some(value), "{field} in {e:?}");
    }
}

#[test]
fn tracing_limit_change_event_has_no_rtt_min_before_any_success() {
    let capture = Capture::default();
    let rig = rig();
    traced(&capture, || {
        rig.advance();
        rig.record_idle(Outcome::Failure, 3 * MS);
    });
    let events = capture.with_message("limit changed");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].field("rtt_min_ms"), None, "{:?}", events[0]);
    assert_eq!(events[0].field("mean_latency_ms"), Some("3.0"));
}

/// Closes `n` windows, each on one failure: at `min_limit` the limit stays.
fn fail_windows(rig: &Rig, n: u64) {
    for _ in 0..n {
        rig.advance();
        rig.record_idle(Outcome::Failure, 5 * MS);
    }
}

#[test]
fn tracing_min_limit_warning_is_logged_once_per_episode() {
    let capture = Capture::default();
    let mut rig = rig();
    traced(&capture, || {
        // 4 -> 2 -> 1: the second cut's window is the first at min_limit.
        fail_windows(&rig, 2);
        assert_eq!(rig.limiter.limit(), 1);
        fail_windows(&rig, MIN_LIMIT_WARN_WINDOWS - 2);
        assert!(capture.with_message("limit pinned at min_limit").is_empty());
        fail_windows(&rig, 1);
        // Ten windows at min_limit: one warning; ten more add none.
        fail_windows(&rig, 10);
    });
    let warnings = capture.with_message("limit pinned at min_limit");
    assert_eq!(warnings.len(), 1, "{:?}", capture.events());
    let w = &warnings[0];
    assert_eq!(w.level, Level::WARN);
    assert_eq!(w.target, "adaptx");
    assert_eq!(w.field("limiter"), Some("db"));
    assert_eq!(w.field("min_limit"), Some("1"));
    assert_eq!(
        w.field("windows"),
        Some(MIN_LIMIT_WARN_WINDOWS.to_string().as_str())
    );

    // The limit leaves min_limit (a saturated clean window grows 1 -> 2):
    // the episode ends, and says how long it was.
    traced(&capture, || {
        rig.advance();
        rig.record_saturated(Outcome::Success, 5 * MS);
    });
    assert_eq!(rig.limiter.limit(), 2);
    let left = capture.with_message("limit left min_limit");
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].level, Level::INFO);
    // 1 (the cut to min_limit) + 8 + 1 + 10 windows at min_limit.
    assert_eq!(
        left[0].field("windows"),
        Some((2 * MIN_LIMIT_WARN_WINDOWS).to_string().as_str())
    );

    // A new episode warns again.
    rig.held.clear();
    traced(&capture, || fail_windows(&rig, MIN_LIMIT_WARN_WINDOWS + 1));
    assert_eq!(rig.limiter.limit(), 1);
    assert_eq!(capture.with_message("limit pinned at min_limit").len(), 2);
}

#[test]
fn tracing_never_warns_when_min_limit_equals_max_limit() {
    let capture = Capture::default();
    let rig = Rig::new(|b| b.initial_limit(1).min_limit(1).max_limit(1));
    traced(&capture, || fail_windows(&rig, 3 * MIN_LIMIT_WARN_WINDOWS));
    assert!(capture.events().is_empty(), "{:?}", capture.events());
}

#[test]
fn tracing_events_are_emitted_outside_the_controller_lock() {
    // On each event another thread asks for `stats`, which takes the
    // controller's lock: if the event came under the lock, it would wait
    // until the event returned.
    let limiter: Arc<OnceLock<Limiter>> = Arc::default();
    let blocked = Arc::new(Mutex::new(Vec::new()));
    let on_event: OnEvent = {
        let limiter = limiter.clone();
        let blocked = blocked.clone();
        Arc::new(move |seen: &Seen| {
            let Some(l) = limiter.get().cloned() else {
                return;
            };
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                let _ = tx.send(l.stats());
            });
            if rx.recv_timeout(Duration::from_secs(2)).is_err() {
                blocked.lock().expect("blocked").push(seen.message.clone());
            }
        })
    };
    let capture = Capture {
        on_event: Some(on_event),
        ..Capture::default()
    };
    let mut rig = rig();
    let _ = limiter.set(rig.limiter.clone());
    traced(&capture, || {
        fail_windows(&rig, MIN_LIMIT_WARN_WINDOWS + 2);
        rig.advance();
        rig.record_saturated(Outcome::Success, 5 * MS);
    });
    let messages: Vec<_> = capture.events().into_iter().map(|e| e.message).collect();
    for m in [
        "limit changed",
        "limit pinned at min_limit",
        "limit left min_limit",
    ] {
        assert!(messages.iter().any(|x| x == m), "{m} in {messages:?}");
    }
    assert!(blocked.lock().expect("blocked").is_empty());
}

#[test]
fn tracing_run_time_changes_are_logged_with_the_new_levels() {
    let capture = Capture::default();
    let rig = rig();
    traced(&capture, || {
        rig.limiter.force_limit(3).expect("valid");
        rig.limiter
            .reconfigure(|b| b.min_limit(2).max_limit(6))
            .expect("valid");
        assert_eq!(rig.limiter.release_forced_limit(), Some(3));
        // Nothing forced: nothing released, nothing logged.
        assert_eq!(rig.limiter.release_forced_limit(), None);
        // A refused change changes nothing and logs nothing.
        assert!(rig.limiter.reconfigure(|b| b.min_limit(0)).is_err());
    });
    let ops: Vec<_> = capture
        .events()
        .into_iter()
        .filter(|e| e.level == Level::INFO)
        .collect();
    let messages: Vec<_> = ops.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "limit forced",
            "limiter reconfigured",
            "forced limit released"
        ]
    );
    let fields = |e: &Seen| {
        ["limiter", "limit", "min_limit", "max_limit", "forced"]
            .map(|f| e.field(f).map(str::to_owned))
    };
    let some = |v: &str| Some(v.to_owned());
    assert_eq!(
        fields(&ops[0]),
        [some("db"), some("3"), some("1"), some("8"), some("3")]
    );
    assert_eq!(
        fields(&ops[1]),
        [some("db"), some("3"), some("2"), some("6"), some("3")]
    );
    assert_eq!(
        fields(&ops[2]),
        [some("db"), some("3"), some("2"), some("6"), None]
    );
    assert!(ops.iter().all(|e| e.target == "adaptx"));
}
