//! Helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;

use adaptx_sim::Scenario;

/// The shipped scenarios: `scenarios/` (a link to the repository's `scenarios/`, so the package carries them).
pub fn scenarios_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios")
}

/// A scenario from TOML text, panicking with the error.
pub fn scenario(text: &str) -> Scenario {
    Scenario::from_toml("test.toml", text).unwrap_or_else(|e| panic!("{e}"))
}

/// The error of a scenario that must be rejected, checked to name its file.
pub fn error(text: &str) -> String {
    let e = Scenario::from_toml("bad.toml", text).expect_err("the file should be rejected");
    assert_eq!(e.file(), "bad.toml");
    e.to_string()
}

/// Asserts that `msg` contains every one of `parts`.
pub fn assert_mentions(msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "`{p}` missing from:\n{msg}");
    }
}
