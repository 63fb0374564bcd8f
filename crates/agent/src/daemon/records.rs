//! The daemon's own records in the store (the jobs it manages, the Slurm jobs the prologs announced), written
//! without waiting: the loop's store connection has no busy timeout, so a write another connection holds the lock
//! for (the sampler, a `lockstep run`, root's `sqlite3`) is kept and written, in order, at the next flush.

use super::state::Daemon;
use lockstep_core::job::SlurmJobId;
use lockstep_store::{SlurmJob, Store};

/// A write of the daemon's records.
#[derive(Debug)]
pub(super) enum Record {
    /// Saves (or replaces) managed job `.0`'s description `.1`.
    ManagedPut(String, String),
    /// Forgets managed job `.0`.
    ManagedRemove(String),
    /// Remembers a Slurm job its prolog announced.
    SlurmPut(SlurmJob),
    /// Forgets a Slurm job whose epilog ran.
    SlurmRemove(SlurmJobId),
}

impl Record {
    /// What the record is, for the log.
    fn what(&self) -> String {
        match self {
            Self::ManagedPut(name, _) => format!("job {name}'s description"),
            Self::ManagedRemove(name) => format!("the removal of job {name}"),
            Self::SlurmPut(job) => format!("Slurm job {}'s registration", job.id),
            Self::SlurmRemove(id) => format!("the end of Slurm job {id}"),
        }
    }

    fn write(&self, store: &Store) -> lockstep_store::Result<()> {
        match self {
            Self::ManagedPut(name, saved) => store.managed_put(name, saved),
            Self::ManagedRemove(name) => store.managed_remove(name),
            Self::SlurmPut(job) => store.slurm_put(job),
            Self::SlurmRemove(id) => store.slurm_remove(*id),
        }
    }
}

impl Daemon {
    /// Writes `record` now, or, when the store is busy (or writes are already waiting, which go first), keeps it
    /// for the next flush. Any other failure is the caller's.
    pub(super) fn record(&mut self, record: Record) -> lockstep_store::Result<()> {
        if self.unsaved.is_empty() {
            match record.write(&self.store) {
                Err(e) if e.is_busy() => {}
                done => return done,
            }
        }
        self.unsaved.push(record);
        Ok(())
    }

    /// Writes the records kept while the store was busy, in the order they were made, up to the first that still
    /// cannot be written (busy again: it and those after it wait for the next flush; failed for good: said and
    /// dropped).
    pub(super) fn save_records(&mut self) -> lockstep_store::Result<()> {
        while let Some(record) = self.unsaved.first() {
            match record.write(&self.store) {
                Ok(()) => {}
                Err(e) if e.is_busy() => return Err(e),
                Err(e) => crate::log::warning!("cannot write {} to the store: {e:#}", record.what()),
            }
            self.unsaved.remove(0);
        }
        Ok(())
    }
}
