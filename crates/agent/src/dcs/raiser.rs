//! How `dcs` raises a job a message arrived for: one trait, one file per mechanism ([`Raise`]).

use std::collections::HashMap;

use super::threads::{Before, Changed};
use crate::journal::Journal;
use crate::managed::Managed;
use crate::sched::Thread;
use crate::writer::Writer;
use lockstep_core::ident::JobKey;

/// The agent's journal and the store's writer, for a raiser's changes.
pub struct Ctx<'a> {
    /// The restore journal (every change goes through it first).
    pub journal: &'a mut Journal,
    /// The store's writer behind it.
    pub writer: &'a Writer,
}

/// The job to raise, with its threads on this node as last scanned.
pub struct Target<'a> {
    /// The job.
    pub job: &'a mut Managed,
    /// Its threads.
    pub threads: &'a [Thread],
}

/// What one raise changed, to be put back by [`Raiser::lower`].
#[derive(Debug, Default)]
pub struct Raised {
    /// Threads changed, with their scheduling before (per-thread mechanisms).
    pub threads: Changed,
}

/// A boost mechanism.
pub trait Raiser: Send {
    /// Raises a job for one quantum.
    fn raise(&mut self, target: Target<'_>, ctx: &mut Ctx<'_>) -> anyhow::Result<Raised>;
    /// Puts back what `raise` changed.
    fn lower(&mut self, job: &mut Managed, raised: Raised, ctx: &mut Ctx<'_>) -> anyhow::Result<()>;
    /// The job leaves `dcs` (it ended, or the policy changed), lowered already: puts back what stays changed
    /// between raises and drops its journal entries.
    fn leave(&mut self, job: &JobKey, ctx: &mut Ctx<'_>) -> anyhow::Result<()>;
    /// `dcs` stops, every job has left: puts back what the mechanism changed for all jobs.
    fn stop(&mut self, _ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
        Ok(())
    }
}

/// The threads a per-thread mechanism journaled, per job, with their scheduling before, until the job leaves.
#[derive(Debug, Default)]
pub struct Journaled(HashMap<JobKey, Before>);

impl Journaled {
    /// The job's threads, to add to.
    pub fn of(&mut self, job: &JobKey) -> &mut Before {
        self.0.entry(job.clone()).or_default()
    }

    /// Drops the job's entries from the journal (its threads are back already).
    pub fn forget(&mut self, job: &JobKey, journal: &mut Journal) {
        for thread in self.0.remove(job).unwrap_or_default().into_keys() {
            journal.forget_thread(thread);
        }
    }
}
