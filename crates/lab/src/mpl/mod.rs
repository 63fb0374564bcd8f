//! Co-scheduling experiments (`kind = "mpl"`, the default; the MPL and DCS papers): workloads run alone, then in
//! MPL levels or explicit mixes under every co-scheduling policy, MPI progress mode and place where ranks run. Its
//! spec is [`spec`]; [`run`] runs it, [`report`] (with its mix and dcs sections, and the [`timeline`] it opens on)
//! reports it. A spec with `[ab]` is a paired comparison instead: [`ab`] runs it and [`ab_report`] reports it, with what `auto`
//! held in it ([`ab_held`]).

pub mod ab;
pub mod ab_held;
pub mod ab_report;
mod dcs_report;
mod mix_report;
mod noise;
pub mod report;
pub mod run;
pub mod spec;
pub mod timeline;

use std::path::{Path, PathBuf};

use crate::harness::outcome::Outcome;
use crate::harness::report::{some_runs, Report};
use crate::harness::spec::{check_placement, RanksIn};
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

    fn check_machine(&self) -> anyhow::Result<()> {
        // Only bare processes are placed (`lockstep run --place`).
        if self.ranks_in.contains(&RanksIn::Process) {
            check_placement(&self.path, "placement", self.placement)?;
        }
        Ok(())
    }

    fn run(&self, paths: &Paths) -> anyhow::Result<Outcome> {
        match &self.ab {
            Some(ab) => ab::run(self, ab, paths),
            None => run::run(self, paths),
        }
    }

    fn report(&self, store: &Store, dir: &Path, session: Option<f64>) -> anyhow::Result<Report> {
        if let Some(ab) = &self.ab {
            return ab_report::write(self, ab, store, dir, session);
        }
        let runs = some_runs(&self.name, session, store.experiment_runs(&self.name, session)?)?;
        std::fs::create_dir_all(dir)?;
        let progress = self.progress.first().map(ToString::to_string).unwrap_or_default();
        let timeline = timeline::section(store, &runs, &progress, dir)?;
        report::write(self, &runs, dir, &timeline)
    }
}
