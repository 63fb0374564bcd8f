//! What every kind of experiment is to the harness and the CLI: its name, the programs it needs, the files its
//! report reads, its run and its report.

use std::path::{Path, PathBuf};

use super::paths::Paths;
use lockstep_store::Store;

/// One kind of experiment, its spec read and checked: the programs it needs, its run, its report.
pub trait Kind {
    /// The experiment's name (the spec's `name`): its report directory and its key in the store.
    fn name(&self) -> &str;

    /// The programs its runs start (paths under `paths.bin`), checked before anything starts.
    fn programs(&self, paths: &Paths) -> Vec<PathBuf>;

    /// Files besides the spec that its report reads, kept beside the spec's copy in the report directory.
    fn inputs(&self) -> Vec<PathBuf> {
        Vec::new()
    }

    /// Runs every case, each result into the store at `paths.store`; returns the session (its start time).
    fn run(&self, paths: &Paths) -> anyhow::Result<f64>;

    /// Writes the report of the runs in `store` into `dir`; returns its `index.html`.
    fn report(&self, store: &Store, dir: &Path) -> anyhow::Result<PathBuf>;
}
