//! The scale model (`kind = "scale-model"`): a discrete-event model of the cluster (experiments/model/
//! scale_model.py, on SimPy), calibrated from every session of a scale experiment that ran its stream (each job's
//! communication share alone, freeze/thaw times, slot-switch spread, hook times); it must reproduce the measured
//! mean slowdowns before its extrapolation to 1,000 and 10,000 nodes counts as a prediction.

mod answer;
mod calibration;
mod report;
mod simulate;
pub mod spec;

use std::path::{Path, PathBuf};

use crate::harness::outcome::Outcome;
use crate::harness::report::{some_runs, Report};
use crate::harness::{Kind, Paths};
use lockstep_store::Store;
use spec::ModelSpec;

impl Kind for ModelSpec {
    fn name(&self) -> &str {
        &self.name
    }

    fn programs(&self, paths: &Paths) -> Vec<PathBuf> {
        vec![paths.model.clone()]
    }

    fn inputs(&self) -> Vec<PathBuf> {
        vec![self.measured_path.clone()]
    }

    fn run(&self, paths: &Paths) -> anyhow::Result<Outcome> {
        simulate::run(self, paths)
    }

    fn report(&self, store: &Store, dir: &Path, session: Option<f64>) -> anyhow::Result<Report> {
        report::write(
            self,
            &some_runs(&self.name, session, crate::scale::common::ScaleRecord::load(store, &self.name, session)?)?,
            dir,
        )
    }
}
