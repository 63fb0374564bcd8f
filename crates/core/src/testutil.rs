//! Fixture topologies for tests: real hwloc XML exports of machines this one is not (hybrid CPUs, NUMA
//! servers), kept in the repository's `fixtures/topology/` with their source and licence.

use std::path::PathBuf;

use crate::topo::Machine;

/// The repository's topology fixtures (`fixtures/topology/`).
pub fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/topology")
}

/// Loads fixture `name` (its file stem, e.g. `xeon-2numa-24pu`).
///
/// # Panics
/// When the fixture is missing or does not load: a test cannot go on without it.
pub fn fixture(name: &str) -> Machine {
    let path = fixture_dir().join(format!("{name}.xml"));
    Machine::from_xml(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}
