//! What a co-scheduling policy is: a slot plan ([`Policy`]) from what it sees of each job ([`JobView`]) to the
//! state each job's cgroup should be in ([`Desired`]).

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuList;

/// CPU weight (cgroup v2 scale) of a boosted job; unboosted jobs keep their own weight.
pub const BOOST_WEIGHT: u64 = 10_000;

/// What a policy sees of one job.
#[derive(Clone, Copy, Debug)]
pub struct JobView<'a> {
    /// The job.
    pub name: &'a crate::ident::JobKey,
    /// Whether the slot is the job's (its row is active, or its place holds the slot).
    pub favoured: bool,
    /// Slots in the job's cycle (its place's period, or its set's count of rows on the node: `rows::cycles`).
    pub round: u32,
    /// PUs the job may run on.
    pub pus: &'a CpuList,
    /// How many CPUs the job's ranks wanted when last measured running unfrozen (their runnable time per unit of
    /// time); `None` where it was not measured, and then it is taken to want every PU it has.
    pub demand: Option<f64>,
    /// Whether the job is new and no slot of it has been read unfrozen yet (its demand neither measured nor found
    /// not measurable; for at most a few seconds after it was found: the agent's `STARTING`): launching its ranks
    /// and in `MPI_Init`, it waits more than it computes.
    pub starting: bool,
}

/// The state a policy wants a job's cgroup in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Desired {
    /// Frozen (v1 `freezer.state` FROZEN, v2 `cgroup.freeze` 1).
    pub frozen: bool,
    /// Boosted to [`BOOST_WEIGHT`].
    pub boosted: bool,
}

/// The slot plan of a co-scheduling policy.
pub trait Policy: Send {
    /// The desired state of every job in a slot, in the order of `jobs`.
    fn plan(&self, jobs: &[JobView<'_>]) -> Vec<Desired>;
}
