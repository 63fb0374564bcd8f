//! Helpers shared by unit tests.

use std::path::PathBuf;

use crate::topo::Machine;

/// The shared topology fixtures (`../shared/fixtures/topology` beside the project root).
pub fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/topology")
}

/// Loads fixture `name` (file stem).
pub fn fixture(name: &str) -> Machine {
    let path = fixture_dir().join(format!("{name}.xml"));
    Machine::from_xml(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}
