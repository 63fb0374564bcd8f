//! Counter-overhead experiments (the counters paper, `kind = "counters"`): every workload alone, uncounted and counted
//! with each event set at each sampling interval, by the lockstep agent and, side by side, by `perf stat -p`
//! attached to every rank; repetitions interleaved in a random order; overhead with a confidence interval.

pub mod report;
pub mod run;
pub mod spec;

use std::path::{Path, PathBuf};

use crate::harness::outcome::Outcome;
use crate::harness::report::{some_runs, Report};
use crate::harness::{Kind, Paths};
use lockstep_store::Store;
use spec::CountersSpec;

impl Kind for CountersSpec {
    fn name(&self) -> &str {
        &self.name
    }

    fn programs(&self, paths: &Paths) -> Vec<PathBuf> {
        crate::harness::mpi::programs(paths, self.workloads.values().map(|w| &w.command[0]))
    }

    fn run(&self, paths: &Paths) -> anyhow::Result<Outcome> {
        run::run(self, paths)
    }

    fn report(&self, store: &Store, _plots: &Path, session: Option<f64>) -> anyhow::Result<Report> {
        report::build(self, &some_runs(&self.name, session, store.experiment_runs(&self.name, session)?)?)
    }
}
