//! Co-scheduling experiments (`kind = "mpl"`, the default; the MPL and DCS papers): workloads run alone, then in
//! MPL levels or explicit mixes under every co-scheduling policy, MPI progress mode and place where ranks run. This
//! file is the spec; [`run`] runs it, [`report`] (with its mix and dcs sections, and the [`timeline`] it opens on)
//! reports it.

mod dcs_report;
mod mix_report;
mod noise;
pub mod report;
pub mod run;
pub mod spec;
pub mod timeline;

use std::path::{Path, PathBuf};

use crate::harness::report::some_runs;
use crate::harness::{Kind, Paths};
use lockstep_store::Store;
use spec::Spec;

impl Kind for Spec {
    fn name(&self) -> &str {
        &self.name
    }

    fn programs(&self, paths: &Paths) -> Vec<PathBuf> {
        crate::harness::mpi::programs(paths, self.workloads.values().map(|w| &w.command[0]))
    }

    fn run(&self, paths: &Paths) -> anyhow::Result<f64> {
        run::run(self, paths)
    }

    fn report(&self, store: &Store, dir: &Path) -> anyhow::Result<PathBuf> {
        let runs = some_runs(&self.name, store.experiment_runs(&self.name)?)?;
        std::fs::create_dir_all(dir)?;
        let progress = self.progress.first().map(ToString::to_string).unwrap_or_default();
        let timeline = timeline::section(store, &runs, &progress, dir)?;
        report::write(self, &runs, dir, &timeline)
    }
}
