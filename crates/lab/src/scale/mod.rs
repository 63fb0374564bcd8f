//! Scale experiments (`kind = "scale"`): a stream of small MPI jobs, one rank per node, on 16 to 64 nodes of the
//! test Slurm cluster (`tests/cluster/up`), under each policy. What is measured is the control plane: whether a
//! job's nodes favour it in the same slots (agreement), how much of its run all its ranks ran at once (co-run
//! share), what lockstep's hooks cost the controller per job, how far apart the agents switch slots, what the agents
//! cost, and what Prometheus sees scraping every agent each second. The machine has few cores: the jobs are small.

pub mod common;
pub mod measure;
pub mod model;
pub mod report;
pub mod run;
pub mod spec;

use std::path::{Path, PathBuf};

use crate::harness::outcome::Outcome;
use crate::harness::report::{some_runs, Report};
use crate::harness::{Kind, Paths};
use lockstep_store::Store;
use spec::ScaleSpec;

impl Kind for ScaleSpec {
    fn name(&self) -> &str {
        &self.name
    }

    fn programs(&self, paths: &Paths) -> Vec<PathBuf> {
        self.workloads.iter().map(|w| paths.bin.join(&w[0])).collect()
    }

    fn run(&self, paths: &Paths) -> anyhow::Result<Outcome> {
        run::run(self, paths)
    }

    fn report(&self, store: &Store, dir: &Path, session: Option<f64>) -> anyhow::Result<Report> {
        report::write(
            self,
            &some_runs(&self.name, session, common::ScaleRecord::load(store, &self.name, session)?)?,
            dir,
        )
    }
}
