//! `dcs`'s commands: the probe's arrivals handed to the engine (raises, and lowers of what is due), the jobs to
//! scan, what a scan found. Each is for one engine: once the daemon runs another (or none), the answer tells that
//! engine's threads to end.

use std::time::Duration;

use super::state::Daemon;
use crate::dcs::probe::Arrival;
use crate::dcs::processes::{Scanned, Watched};
use crate::dcs::raiser::Ctx;

impl Daemon {
    /// Hands the probe's arrivals to engine `id` (raises, and lowers what is due), logging what it did; returns
    /// how long the event thread may wait for the next arrival.
    pub(super) fn dcs_arrivals(&mut self, id: u64, arrivals: &[Arrival]) -> Option<Duration> {
        let engine = self.dcs.as_mut().filter(|e| e.id == id)?;
        let (logged, next) =
            engine.step(arrivals, &mut self.jobs, Ctx { journal: &mut self.journal, store: &self.store });
        for (job, action, took) in logged {
            let d = self.decision(Some(&job), action, took);
            self.pending.push(d);
        }
        Some(next)
    }

    /// The jobs engine `id`'s scan thread is to scan (see [`crate::dcs::engine::Engine::watched`]).
    pub(super) fn dcs_watched(&mut self, id: u64) -> Option<Vec<Watched>> {
        let jobs = &self.jobs;
        self.dcs.as_mut().filter(|e| e.id == id).map(|engine| engine.watched(jobs))
    }

    /// What a scan of engine `id` found; false when that engine is no longer in force.
    pub(super) fn dcs_scanned(&mut self, id: u64, scanned: Vec<Scanned>) -> bool {
        let Some(engine) = self.dcs.as_mut().filter(|e| e.id == id) else { return false };
        engine.scanned(scanned);
        true
    }
}
