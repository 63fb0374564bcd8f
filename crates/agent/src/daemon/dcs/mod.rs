//! `dcs`'s commands: the probe's arrivals handed to the engine (raises, and lowers of what is due), the jobs to
//! scan, what a scan found. Each is for one engine: once the daemon runs another (or none), the answer tells that
//! engine's threads to end.

use std::time::Duration;

use super::state::Daemon;
use crate::command::Command;
use crate::dcs::engine::Engine;
use crate::dcs::probe::Arrival;
use crate::dcs::processes::{Scanned, Watched};
use crate::dcs::Msg;
use crate::managed::Managed;
use lockstep_core::cosched;

pub(super) mod host;

impl Daemon {
    /// Carries out what a `dcs` thread sent; an answer that cannot be sent (the thread ended) is dropped.
    pub(super) fn dcs_msg(&mut self, msg: Msg) {
        match msg {
            Msg::Arrivals { engine, arrivals, reply } => {
                let _ = reply.send(self.dcs_arrivals(engine, &arrivals));
            }
            Msg::Watched { engine, reply } => {
                let _ = reply.send(self.dcs_watched(engine));
            }
            Msg::Scanned { engine, scanned, reply } => {
                let _ = reply.send(self.dcs_scanned(engine, scanned));
            }
        }
    }

    /// Hands the probe's arrivals to engine `id` (raises, and lowers what is due), logging what it did; returns
    /// how long the event thread may wait for the next arrival.
    fn dcs_arrivals(&mut self, id: u64, arrivals: &[Arrival]) -> Option<Duration> {
        let engine = self.dcs.in_force(id)?;
        let (jobs, ctx) = self.table.with_changes();
        let (logged, next) = engine.step(arrivals, jobs, ctx);
        let decisions: Vec<_> =
            logged.into_iter().map(|(job, action, took)| self.decision(Some(&job), action, took)).collect();
        self.outbox.decide(decisions);
        Some(next)
    }

    /// The jobs engine `id`'s scan thread is to scan (see [`crate::dcs::engine::Engine::watched`]).
    fn dcs_watched(&mut self, id: u64) -> Option<Vec<Watched>> {
        let jobs = self.table.jobs();
        self.dcs.in_force(id).map(|engine| engine.watched(jobs))
    }

    /// What a scan of engine `id` found; false when that engine is no longer in force.
    fn dcs_scanned(&mut self, id: u64, scanned: Vec<Scanned>) -> bool {
        let Some(engine) = self.dcs.in_force(id) else { return false };
        engine.scanned(scanned);
        true
    }

    /// Lowers `job`, which leaves the agent, if `dcs` raised it, and drops what `dcs` keeps of it.
    pub(super) fn dcs_leave(&mut self, job: &mut Managed) {
        if let Some(engine) = self.dcs.engine.as_mut() {
            engine.leave(job, self.table.with_changes().1);
        }
    }

    /// Switches `dcs` to `want` (the policy's [`cosched::PolicySpec::raises`]): started (probe loaded and
    /// attached, or the error saying what is missing, with nothing changed), stopped (every raise put back), or
    /// kept.
    pub(super) fn switch_dcs(&mut self, want: Option<cosched::Raise>) -> anyhow::Result<()> {
        if self.dcs.engine.as_ref().map(|e| e.raise) == want {
            return Ok(());
        }
        let started = match want {
            Some(raise) => {
                self.dcs.started += 1;
                let (engine, probe) = Engine::start(self.dcs.started, raise, &self.dcs.settings)?;
                crate::dcs::feed::spawn(&self.inbox.address().map(Command::Dcs), self.dcs.started, probe)?;
                Some(engine)
            }
            None => None,
        };
        if let Some(old) = std::mem::replace(&mut self.dcs.engine, started) {
            let (jobs, ctx) = self.table.with_changes();
            old.stop(jobs, ctx);
        }
        Ok(())
    }

    /// Stops `dcs`, if it runs, putting back every raise.
    pub(super) fn switch_dcs_off(&mut self) {
        if let Some(old) = self.dcs.engine.take() {
            let (jobs, ctx) = self.table.with_changes();
            old.stop(jobs, ctx);
        }
    }
}
