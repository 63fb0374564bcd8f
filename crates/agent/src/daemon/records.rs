//! The daemon's own records in the store (the jobs it manages, the Slurm jobs the prologs announced), written
//! without waiting: the loop's store connection has no busy timeout, so a write another connection holds the lock
//! for (the sampler, a `lockstep run`, root's `sqlite3`) is kept and written, in order, at the next flush.

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
    /// Marks a Slurm job ended on this node (its epilog ran), for good: an agent restarted while its cgroups
    /// remain never takes it on again.
    SlurmEnd(SlurmJobId),
    /// Forgets a Slurm job whose cgroups are gone.
    SlurmForget(SlurmJobId),
}

impl Record {
    /// What the record is, for the log.
    pub(super) fn what(&self) -> String {
        match self {
            Self::ManagedPut(name, _) => format!("job {name}'s description"),
            Self::ManagedRemove(name) => format!("the removal of job {name}"),
            Self::SlurmPut(job) => format!("Slurm job {}'s registration", job.id),
            Self::SlurmEnd(id) => format!("the end of Slurm job {id}"),
            Self::SlurmForget(id) => format!("forgetting ended Slurm job {id}"),
        }
    }

    pub(super) fn write(&self, store: &Store) -> lockstep_store::Result<()> {
        match self {
            Self::ManagedPut(name, saved) => store.managed_put(name, saved),
            Self::ManagedRemove(name) => store.managed_remove(name),
            Self::SlurmPut(job) => store.slurm_put(job),
            Self::SlurmEnd(id) => store.slurm_end(*id),
            Self::SlurmForget(id) => store.slurm_remove(*id),
        }
    }
}
