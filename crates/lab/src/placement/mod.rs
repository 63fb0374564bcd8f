//! Placement experiments (the hybrid-CPU paper, `kind = "placement"`): the same jobs under each placement
//! policy (`p-only`, `mixed`, `e-only`), bare and in containers, each rank pinned to one PU of its placement.
//!
//! On a machine with several core kinds the placements are the machine's own. On a machine with one kind the
//! experiment runs **emulated**: the placements are chosen on a hybrid topology the spec names (an hwloc XML),
//! their PUs are mapped in order onto this machine's PUs (one per core first), and the ranks whose chosen PU is
//! of a slower kind get a CPU bandwidth limit (`cpu.max` / `cpu.cfs_quota_us`) of the spec's speed ratio, in a
//! child cgroup of the job per kind (a podman rank: its own container's cgroup). What emulation cannot show —
//! the kinds' different caches, memory paths and instruction throughput — the report says.

pub mod report;
pub mod run;
pub mod spec;

use std::path::{Path, PathBuf};

use crate::harness::outcome::Outcome;
use crate::harness::report::{some_runs, Report};
use crate::harness::{Kind, Paths};
use lockstep_core::error::UsageError;
use lockstep_store::Store;
use spec::PlacementSpec;

impl Kind for PlacementSpec {
    fn name(&self) -> &str {
        &self.name
    }

    fn programs(&self, paths: &Paths) -> Vec<PathBuf> {
        crate::harness::mpi::programs(paths, self.workloads.values().map(|w| &w.command[0]))
    }

    fn check_machine(&self) -> anyhow::Result<()> {
        // Every policy seats the job's ranks here, natively or emulated, before anything runs.
        let hybrid = spec::Hybrid::new(self, lockstep_core::topo::Machine::live()?)?;
        for &policy in &self.policies {
            hybrid.seats(policy, self.ranks).map_err(|e| {
                UsageError::new(format!(
                    "experiment {}: policies: {policy} cannot seat ranks = {} on {}: {e}",
                    self.name,
                    self.ranks,
                    hybrid.label()
                ))
            })?;
        }
        Ok(())
    }

    fn run(&self, paths: &Paths) -> anyhow::Result<Outcome> {
        run::run(self, paths)
    }

    fn report(&self, store: &Store, _plots: &Path, session: Option<f64>) -> anyhow::Result<Report> {
        report::build(self, &some_runs(&self.name, session, store.experiment_runs(&self.name, session)?)?)
    }
}
