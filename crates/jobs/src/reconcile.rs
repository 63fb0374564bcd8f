//! Job bookkeeping across processes: which recorded jobs still run, and cleanup of jobs whose supervisor died.

use std::time::Duration;

use lockstep_cgroup::procfs::Live as _;
use lockstep_cgroup::JobCgroup;
use lockstep_store::{JobRow, Store};

/// How a recorded running job looks from outside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// Its `lockstep run` supervisor is alive.
    Supervised,
    /// The supervisor is gone (e.g. SIGKILL) but processes remain in the job's cgroup.
    Orphaned,
    /// The supervisor is gone and the cgroup is empty or gone.
    Lost,
}

/// Classifies a running job (a cgroup whose processes cannot be listed counts as holding some).
pub fn liveness(job: &JobRow) -> Liveness {
    if job.supervisor.alive() {
        Liveness::Supervised
    } else if job.cgroup.clone().map(JobCgroup::from).is_some_and(|cg| !cg.pids().is_ok_and(|p| p.is_empty())) {
        Liveness::Orphaned
    } else {
        Liveness::Lost
    }
}

/// Ends the records of jobs whose supervisor died and whose cgroup is empty, removing those cgroups, so
/// that a crash of `lockstep run` leaves nothing behind once its processes are gone. Orphaned jobs (still
/// with processes) are left running and shown as such.
pub fn reconcile(store: &Store) -> Result<(), crate::Error> {
    for job in store.jobs(false)? {
        if liveness(&job) != Liveness::Lost {
            continue;
        }
        if let Some(cg) = job.cgroup.clone().map(JobCgroup::from) {
            cg.destroy(Duration::from_secs(5)).map_err(|source| crate::Error::System {
                what: format!("cannot remove the cgroup of lost job {}", job.name),
                source,
            })?;
        }
        store.finish(job.id, "lost", None, Some("supervisor died; cgroup removed by reconcile"))?;
    }
    Ok(())
}
