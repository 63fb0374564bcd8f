//! Co-scheduling policies: what each job's cgroup gets in a slot. One trait, one file per policy.
//!
//! Time is cut into wall-clock slots ([`slot`]); in slot `k` the jobs of row `k mod rows` ([`rows`]) are the
//! active ones. A policy turns (active row, jobs) into a [`Desired`] state per job; the agent applies the
//! difference to the cgroups.

mod boost;
mod cfs;
mod dcs;
mod gang;
pub mod rows;
pub mod slot;

pub use boost::Boost;
pub use cfs::Cfs;
pub use dcs::Dcs;
pub use gang::Gang;

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuList;
use crate::error::UsageError;

/// Names of every slot policy (`dcs` adds [`Dcs::NAMES`]), for help and error messages.
pub const NAMES: [&str; 3] = ["cfs", "boost", "gang"];

/// How `dcs` raises a job a message arrived for, for one quantum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Raise {
    /// The job's CPU weight, as `boost` raises it.
    Weight,
    /// Its threads to `SCHED_RR` (seed 004's choice), bounded by the kernel's real-time throttling.
    Rr,
    /// Its threads' nice value to -20.
    Nice,
}

impl Raise {
    /// What plain `dcs` uses: the best of the three in `experiments/dcs-raise.toml` (weight; see
    /// docs/policies/dcs.md for why `rr` and `nice` lose on polling MPI ranks).
    pub const DEFAULT: Raise = Raise::Weight;

    /// `weight`, `rr` or `nice`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "weight" => Some(Self::Weight),
            "rr" => Some(Self::Rr),
            "nice" => Some(Self::Nice),
            _ => None,
        }
    }
}

/// CPU weight (cgroup v2 scale) of a boosted job; unboosted jobs keep their own weight.
pub const BOOST_WEIGHT: u64 = 10_000;

/// What a policy sees of one job.
#[derive(Clone, Copy, Debug)]
pub struct JobView<'a> {
    /// The job's row.
    pub row: u32,
    /// PUs the job may run on.
    pub pus: &'a CpuList,
}

/// The state a policy wants a job's cgroup in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Desired {
    /// Frozen (v1 `freezer.state` FROZEN, v2 `cgroup.freeze` 1).
    pub frozen: bool,
    /// Boosted to [`BOOST_WEIGHT`].
    pub boosted: bool,
}

/// A co-scheduling policy.
pub trait Policy: Send {
    /// The policy's name, as `lockstep policy set` takes it.
    fn name(&self) -> &'static str;
    /// The desired state of every job in a slot whose active row is `active`, in the order of `jobs`.
    fn plan(&self, active: u32, jobs: &[JobView<'_>]) -> Vec<Desired>;
    /// Whether, and how, the job a message arrives for is raised (`dcs` only).
    fn raise(&self) -> Option<Raise> {
        None
    }
}

/// The policy called `name`.
pub fn by_name(name: &str) -> Result<Box<dyn Policy>, UsageError> {
    match name {
        "cfs" => Ok(Box::new(Cfs)),
        "boost" => Ok(Box::new(Boost)),
        "gang" => Ok(Box::new(Gang)),
        _ => match Dcs::parse(name) {
            Some(dcs) => Ok(Box::new(dcs)),
            None => Err(UsageError::new(format!(
                "unknown co-scheduling policy {name:?} (expected one of {}, {})",
                NAMES.join(", "),
                Dcs::NAMES.join(", ")
            ))),
        },
    }
}

#[cfg(test)]
mod tests;
