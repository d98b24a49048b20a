//! Helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;

use adaptx_sim::Scenario;

/// The repository's `scenarios/` directory.
pub fn scenarios_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

/// A scenario from TOML text, panicking with the error.
pub fn scenario(text: &str) -> Scenario {
    Scenario::from_toml("test.toml", text).unwrap_or_else(|e| panic!("{e}"))
}
