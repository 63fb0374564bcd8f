//! Lock experiments (the CNA-in-VMs paper, `kind = "locks"`): `lockbench` over every lock of liblockstep-locks, from a
//! few threads to several per CPU, with and without co-runner processes, on the real topology and on an emulated NUMA
//! map, under numactl memory policies; the report shows throughput against threads, fairness and tail latency, and
//! checks the lock targets (docs/locks.md).

pub mod record;
pub mod report;
pub mod run;
pub mod spec;

use std::path::{Path, PathBuf};

use crate::harness::outcome::Outcome;
use crate::harness::report::{some_runs, Report};
use crate::harness::{records, Kind, Paths};
use lockstep_store::Store;
use spec::LocksSpec;

impl Kind for LocksSpec {
    fn name(&self) -> &str {
        &self.name
    }

    fn programs(&self, paths: &Paths) -> Vec<PathBuf> {
        vec![paths.bin.join("lockbench")]
    }

    fn run(&self, paths: &Paths) -> anyhow::Result<Outcome> {
        run::run(self, paths)
    }

    fn report(&self, store: &Store, dir: &Path, session: Option<f64>) -> anyhow::Result<Report> {
        let runs = records::load(store, &self.name, session, record::RECORD)?;
        report::write(self, &some_runs(&self.name, session, runs.into_iter().map(|(_, run)| run).collect())?, dir)
    }
}
