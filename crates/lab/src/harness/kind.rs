//! What every kind of experiment is to the harness and the CLI: its name, the programs it needs, the files its
//! report reads, its run and its report.

use std::path::{Path, PathBuf};

use super::outcome::Outcome;
use super::paths::Paths;
use super::report::Report;
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

    /// Checks what the spec asks of this machine (placements its cores can give), before anything runs.
    fn check_machine(&self) -> anyhow::Result<()> {
        Ok(())
    }

    /// Runs every case, each result into the store at `paths.store` (a failed job's too, marked failed); returns
    /// the session (its start time) and the failed jobs.
    fn run(&self, paths: &Paths) -> anyhow::Result<Outcome>;

    /// The report of the runs of `session` (`None`: the latest) in `store`: its plots written into `dir`, its
    /// summary and page returned for the harness to write ([`Report::write`]: `summary.md`, `index.html`).
    fn report(&self, store: &Store, dir: &Path, session: Option<f64>) -> anyhow::Result<Report>;
}
