//! Scenario files: the shipped ones load, and a bad one is a clear error
//! naming the file, the field and what was expected.

mod common;

use adaptx_sim::Scenario;
use adaptx_sim::suite;

const GOOD: &str = r#"
name = "ok"
duration = "10s"
[backend]
service_time = "50ms"
[demand]
kind = "closed"
workers = 10
"#;

use common::{assert_mentions, error};

#[test]
fn the_shipped_scenarios_load() {
    let entries = suite::load(&[common::scenarios_dir()]).unwrap();
    let ids: Vec<&str> = entries.iter().map(|e| e.scenario.id()).collect();
    assert_eq!(
        ids,
        [
            "01-ramp",
            "02-light-load",
            "03-hard-limit",
            "04-drop-timeout",
            "05-queueing",
            "06-step-down-up",
            "07-outage",
            "08-latency-step",
            "09-client-errors",
            "10-fairness",
            "11-slow-backend",
            "12-rate-overload",
            "13-rate-recovery",
            "14-rate-light-load",
            "15-rate-keyed",
            "16-demand-ramp",
            "17-soft-ceiling",
            "18-random-failures",
            "19-unequal-clients",
            "20-floor-drop",
            "21-fast-backend",
            "23-priority-surge",
            "24-timeouts-adaptive-lifo",
            "24-timeouts-fifo",
            "25-partitions",
            "26-rate-quota",
            "27-noise-onset",
            "28-errors-appear",
            "29-drop-slow-timeout",
            "30-queue-below-start",
            "31-step-up-fivefold",
            "32-slow-queue",
            "33-drop-open-step",
            "34-slow-queue-1s",
            "35-slow-queue-2s",
            "36-step-up-tenfold",
            "37-heavy-tail",
            "38-soft-noise",
            "39-drop-long-timeout",
            "40-drop-step-down-long-timeout"
        ]
    );
    assert!(
        entries
            .iter()
            .all(|e| e.shown && !e.scenario.bands.is_empty())
    );
    // The compiled-in copies are the same files.
    let builtin = suite::builtin().unwrap();
    assert_eq!(builtin.len(), entries.len());
    for (b, e) in builtin.iter().zip(&entries) {
        assert_eq!(b.scenario.id(), e.scenario.id());
        assert_eq!(b.scenario.bands.len(), e.scenario.bands.len());
    }
}

#[test]
fn a_good_file_loads() {
    let sc = Scenario::from_toml("good.toml", GOOD).unwrap();
    assert_eq!(sc.id(), "good");
    assert_eq!(sc.duration.0, 10_000_000_000);
    assert_eq!(sc.demand.timeout, adaptx_sim::DEFAULT_TIMEOUT);
    assert_eq!(
        sc.backend.reject_latency,
        adaptx_sim::DEFAULT_REJECT_LATENCY
    );
}

#[test]
fn unknown_key_is_named() {
    let msg = error(&GOOD.replace("workers = 10", "workers = 10\nworkrs = 5"));
    assert_mentions(&msg, &["bad.toml", "unknown field `workrs`", "line 9"]);
}

#[test]
fn unknown_key_in_a_band_is_named() {
    let msg = error(&format!(
        "{GOOD}\n[[band]]\nlaws = [\"aimd\"]\nmetric = \"goodput\"\nminimum = 0.5\n"
    ));
    assert_mentions(&msg, &["bad.toml", "unknown field `minimum`", "`min`"]);
}

#[test]
fn wrong_type_is_named() {
    let msg = error(&GOOD.replace("workers = 10", "workers = \"ten\""));
    assert_mentions(&msg, &["bad.toml", "workers", "invalid type"]);
}

#[test]
fn bad_duration_says_what_a_duration_looks_like() {
    let msg = error(&GOOD.replace("\"50ms\"", "\"50 parsecs\""));
    assert_mentions(
        &msg,
        &["bad.toml", "service_time", "invalid duration", "\"50ms\""],
    );
    let msg = error(&GOOD.replace("\"50ms\"", "50"));
    assert_mentions(&msg, &["bad.toml", "service_time", "a duration string"]);
}

#[test]
fn bad_enum_value_lists_the_choices() {
    let msg = error(&GOOD.replace(
        "service_time = \"50ms\"",
        "service_time = \"50ms\"\nover_limit = \"explode\"",
    ));
    assert_mentions(&msg, &["bad.toml", "over_limit", "reject", "drop"]);
    let msg = error(&format!(
        "{GOOD}\n[[band]]\nlaws = [\"tcp\"]\nmetric = \"goodput\"\n"
    ));
    assert_mentions(&msg, &["bad.toml", "laws", "aimd", "vegas", "gradient"]);
    let msg = error(&format!(
        "{GOOD}\n[[band]]\nlaws = [\"aimd\"]\nmetric = \"speed\"\n"
    ));
    assert_mentions(&msg, &["bad.toml", "metric", "goodput"]);
}

#[test]
fn missing_section_is_named() {
    let msg = error("name = \"x\"\nduration = \"10s\"\n[demand]\nkind = \"closed\"\nworkers = 1\n");
    assert_mentions(&msg, &["bad.toml", "missing field `backend`"]);
}

#[test]
fn demand_fields_are_checked_against_the_kind() {
    let msg = error(&GOOD.replace("kind = \"closed\"\nworkers = 10", "kind = \"open\""));
    assert_mentions(
        &msg,
        &["bad.toml", "demand.rate", "required for an open demand"],
    );
    let msg = error(&GOOD.replace("workers = 10", "rate = 5.0"));
    assert_mentions(
        &msg,
        &["bad.toml", "demand.workers", "required for a closed demand"],
    );
    let msg = error(&GOOD.replace("workers = 10", "workers = 0"));
    assert_mentions(&msg, &["demand.workers", "at least 1"]);
}

#[test]
fn backend_ranges_are_checked() {
    let msg = error(&GOOD.replace(
        "service_time = \"50ms\"",
        "service_time = \"50ms\"\nclient_error_rate = 1.5",
    ));
    assert_mentions(
        &msg,
        &[
            "bad.toml",
            "backend.client_error_rate: 1.5: expected 0 ..= 1",
        ],
    );
    let msg = error(&GOOD.replace(
        "service_time = \"50ms\"",
        "service_time = \"50ms\"\njitter = -1.0",
    ));
    assert_mentions(&msg, &["backend.jitter: -1: expected 0 ..= 100"]);
    let msg = error(&GOOD.replace("\"50ms\"", "\"0s\""));
    assert_mentions(&msg, &["backend.service_time: 0s: expected 1us ..= 3600s"]);
}

#[test]
fn schedule_is_checked() {
    let msg = error(&format!(
        "{GOOD}\n[[schedule]]\nat = \"5s\"\nworkers = 2\n[[schedule]]\nat = \"3s\"\nworkers = 4\n"
    ));
    assert_mentions(&msg, &["bad.toml", "schedule[1].at", "time order"]);
    let msg = error(&format!(
        "{GOOD}\n[[schedule]]\nat = \"20s\"\nworkers = 2\n"
    ));
    assert_mentions(&msg, &["schedule[0].at", "before the end of the run"]);
    let msg = error(&format!("{GOOD}\n[[schedule]]\nat = \"2s\"\nworkers = 0\n"));
    assert_mentions(&msg, &["schedule[0].workers: 0: expected 1 ..= 1000000"]);
}

#[test]
fn limiter_options_are_checked_by_adaptx() {
    let msg = error(&format!("{GOOD}\n[limiter]\ndecrease_ratio = 1.5\n"));
    assert_mentions(
        &msg,
        &["bad.toml", "limiter.decrease_ratio", "0 < value < 1"],
    );
}

#[test]
fn band_parameters_are_checked_against_the_metric() {
    let msg = error(&format!(
        "{GOOD}\n[[band]]\nlaws = [\"aimd\"]\nmetric = \"time_to_limit_at_most\"\nthreshold = 5\nmax = 3\n"
    ));
    assert_mentions(
        &msg,
        &[
            "bad.toml",
            "band[0].after",
            "required by metric `time_to_limit_at_most`",
        ],
    );
    let msg = error(&format!(
        "{GOOD}\n[[band]]\nlaws = [\"aimd\"]\nmetric = \"goodput\"\nthreshold = 5\nmin = 0.5\n"
    ));
    assert_mentions(
        &msg,
        &["band[0].threshold", "not a parameter of metric `goodput`"],
    );
    let msg = error(&format!(
        "{GOOD}\n[[band]]\nlaws = [\"aimd\"]\nmetric = \"goodput\"\nmin = 0.9\nmax = 0.5\n"
    ));
    assert_mentions(&msg, &["band[0]", "min 0.9 is above max 0.5"]);
    let msg = error(&format!(
        "{GOOD}\n[[band]]\nlaws = []\nmetric = \"goodput\"\n"
    ));
    assert_mentions(&msg, &["band[0].laws", "at least one law"]);
    let msg = error(&format!(
        "{GOOD}\n[[band]]\nlaws = [\"aimd\"]\nmetric = \"max_limit\"\nfrom = \"30s\"\nmax = 3\n"
    ));
    assert_mentions(&msg, &["band[0].from", "past the end of the run"]);
}

#[test]
fn a_missing_reference_names_the_referring_file() {
    let dir = std::env::temp_dir().join(format!("adaptx-sim-schema-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("refers.toml");
    std::fs::write(
        &file,
        format!(
            "{GOOD}\n[[band]]\nlaws = [\"aimd\"]\nmetric = \"reference_deviation\"\nreference = \"nowhere.toml\"\nmax = 0.1\n"
        ),
    )
    .unwrap();
    let e = suite::load(&[file]).unwrap_err().to_string();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_mentions(
        &e,
        &[
            "refers.toml",
            "band[0].reference",
            "nowhere.toml",
            "cannot read",
        ],
    );
}

#[test]
fn an_unreadable_file_is_named() {
    let e = Scenario::load(std::path::Path::new("/nonexistent/x.toml")).unwrap_err();
    assert_eq!(e.file(), "/nonexistent/x.toml");
    assert!(e.to_string().contains("cannot read"));
}

fn band_error(band: &str) -> String {
    error(&format!("{GOOD}\n[[band]]\nlaws = [\"aimd\"]\n{band}\n"))
}

#[test]
fn new_band_parameters_are_checked() {
    // GOOD runs 10 s, one client; steady from 5 s.
    let msg = band_error("metric = \"worst_goodput\"\nwindow = \"0s\"");
    assert_mentions(
        &msg,
        &[
            "bad.toml",
            "band[0].window: 0s",
            "at least 1s and at most the measured range (5s)",
        ],
    );
    let msg = band_error("metric = \"worst_goodput\"\nwindow = \"6s\"");
    assert_mentions(&msg, &["band[0].window: 6s", "measured range (5s)"]);
    let msg = band_error("metric = \"worst_goodput\"\nwindow = \"1.5s\"");
    assert_mentions(&msg, &["band[0].window: 1500ms", "whole seconds"]);
    let msg = band_error("metric = \"worst_goodput\"");
    assert_mentions(
        &msg,
        &["band[0].window", "required by metric `worst_goodput`"],
    );
    let msg = band_error(
        "metric = \"time_until\"\nafter = \"8s\"\nwindow = \"3s\"\nholds = { measure = \"goodput\", min = 0.9 }",
    );
    assert_mentions(&msg, &["band[0].window: 3s", "measured range (2s)"]);
    let msg = band_error("metric = \"goodput\"\nclient = 1");
    assert_mentions(
        &msg,
        &["band[0].client: 1", "from 0 to 0", "demand.clients = 1"],
    );
    let msg = band_error("metric = \"p99_ms\"\nclient = 0");
    assert_mentions(
        &msg,
        &["band[0].client", "not a parameter of metric `p99_ms`"],
    );
    let msg = band_error("metric = \"goodput\"\nwindow = \"2s\"");
    assert_mentions(
        &msg,
        &["band[0].window", "not a parameter of metric `goodput`"],
    );
    let msg = band_error("metric = \"goodput\"\nfrom = \"9.5s\"");
    assert_mentions(&msg, &["band[0].from: 9500ms", "at least 1s"]);
    let msg = band_error("metric = \"time_until\"\nafter = \"1s\"");
    assert_mentions(&msg, &["band[0].holds", "required by metric `time_until`"]);
}

#[test]
fn holds_is_checked() {
    let until = "metric = \"time_until\"\nafter = \"1s\"\nholds = ";
    let msg = band_error(&format!("{until}{{ measure = \"limit_growth\", min = 1 }}"));
    assert_mentions(
        &msg,
        &[
            "band[0].holds.measure: limit_growth",
            "expected one of goodput, overload_fraction",
        ],
    );
    let msg = band_error(&format!("{until}{{ measure = \"goodput\" }}"));
    assert_mentions(&msg, &["band[0].holds", "expected `min`, `max` or both"]);
    let msg = band_error(&format!(
        "{until}{{ measure = \"goodput\", min = 0.9, max = 0.5 }}"
    ));
    assert_mentions(&msg, &["band[0].holds", "min 0.9 is above max 0.5"]);
    let msg = band_error(&format!(
        "{until}{{ measure = \"goodput\", at_least = 0.9 }}"
    ));
    assert_mentions(&msg, &["bad.toml", "at_least"]);
    let msg = band_error(&format!(
        "{until}{{ measure = \"p50_ms\", max = 100 }}\nclient = 0"
    ));
    assert_mentions(
        &msg,
        &["band[0].holds.measure: p50_ms", "not available per client"],
    );
    // And a good one loads.
    let text = format!(
        "{GOOD}\n[[band]]\nlaws = [\"aimd\"]\n{until}{{ measure = \"goodput\", min = 0.9 }}\nwindow = \"3s\"\nclient = 0\nmax = 4\n"
    );
    let sc = Scenario::from_toml("ok.toml", &text).unwrap();
    assert_eq!(
        sc.bands[0].describe(),
        "time_until(after=1s, window=3s, client=0, holds=goodput>=0.9)"
    );
}
