//! Co-scheduling policies: what each job's cgroup gets in a slot. One trait, one file per policy.
//!
//! Time is cut into wall-clock slots ([`slot`]); in slot `k` the jobs of row `k mod rows` ([`rows`]), and the
//! jobs whose cluster-wide place holds `k`, are the favoured ones. A policy turns the jobs (favoured or not) into
//! a [`Desired`] state per job; the agent applies the difference to the cgroups.

pub mod auto;
mod boost;
mod cfs;
mod dcs;
mod gang;
pub mod rows;
pub mod slot;

pub use auto::Auto;
pub use boost::Boost;
pub use cfs::Cfs;
pub use dcs::Dcs;
pub use gang::Gang;

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuList;
use crate::error::UsageError;
use crate::names::Names;

/// How `dcs` raises a job a message arrived for, for one quantum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Raise {
    /// The job's CPU weight, as `boost` raises it.
    Weight,
    /// Its threads to `SCHED_RR`, bounded by the kernel's real-time throttling.
    Rr,
    /// Its threads' nice value to -20.
    Nice,
}

impl Raise {
    /// What plain `dcs` uses: the best of the three in `experiments/dcs-raise.toml` (weight; see
    /// docs/policies/dcs.md for why `rr` and `nice` lose on polling MPI ranks).
    pub const DEFAULT: Raise = Raise::Weight;
}

/// A co-scheduling policy as users name it (`lockstep policy set`, `--policy`, experiment specs): the one place
/// where names and policies meet. Code asks it what the policy does ([`PolicySpec::slotted`],
/// [`PolicySpec::raises`]) and builds the slot planner with [`PolicySpec::build`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicySpec {
    /// Leave every job to the kernel.
    Cfs,
    /// Weight-based co-scheduling in slots.
    Boost,
    /// Freezer-based time slicing in slots.
    Gang,
    /// `cfs` or `gang` per set of jobs sharing PUs, whichever they are measured to progress faster under.
    Auto,
    /// Message-driven raises, over `cfs` slots or (`with_boost`) `boost` slots.
    Dcs {
        /// `dcs+boost`: the slots boost the active row as `boost` does.
        with_boost: bool,
        /// How an arrival raises the job.
        raise: Raise,
    },
}

/// Every policy name; a value's first name is the one it is shown by (`dcs` is shown as `dcs:weight`).
pub const POLICIES: Names<PolicySpec> = Names(&[
    ("cfs", PolicySpec::Cfs),
    ("boost", PolicySpec::Boost),
    ("gang", PolicySpec::Gang),
    ("auto", PolicySpec::Auto),
    ("dcs:weight", PolicySpec::Dcs { with_boost: false, raise: Raise::Weight }),
    ("dcs", PolicySpec::Dcs { with_boost: false, raise: Raise::DEFAULT }),
    ("dcs:rr", PolicySpec::Dcs { with_boost: false, raise: Raise::Rr }),
    ("dcs:nice", PolicySpec::Dcs { with_boost: false, raise: Raise::Nice }),
    ("dcs+boost:weight", PolicySpec::Dcs { with_boost: true, raise: Raise::Weight }),
    ("dcs+boost", PolicySpec::Dcs { with_boost: true, raise: Raise::DEFAULT }),
    ("dcs+boost:rr", PolicySpec::Dcs { with_boost: true, raise: Raise::Rr }),
    ("dcs+boost:nice", PolicySpec::Dcs { with_boost: true, raise: Raise::Nice }),
]);

impl PolicySpec {
    /// The name it is shown by.
    pub fn name(self) -> &'static str {
        POLICIES.name(self)
    }

    /// Whether the policy acts at slot boundaries (boosts or freezes a row per slot): `boost`, `gang`, `auto`,
    /// `dcs+boost`.
    pub fn slotted(self) -> bool {
        matches!(self, Self::Boost | Self::Gang | Self::Auto | Self::Dcs { with_boost: true, .. })
    }

    /// How the job a message arrives for is raised, for the `dcs` policies.
    pub fn raises(self) -> Option<Raise> {
        match self {
            Self::Dcs { raise, .. } => Some(raise),
            _ => None,
        }
    }

    /// The slot planner of the policy.
    pub fn build(self) -> Box<dyn Policy> {
        match self {
            Self::Cfs => Box::new(Cfs),
            Self::Boost => Box::new(Boost),
            Self::Gang => Box::new(Gang),
            Self::Auto => Box::new(Auto::default()),
            Self::Dcs { with_boost, .. } => Box::new(Dcs { with_boost }),
        }
    }
}

impl std::str::FromStr for PolicySpec {
    type Err = UsageError;

    fn from_str(name: &str) -> Result<Self, UsageError> {
        POLICIES.parse_or_usage("co-scheduling policy", name)
    }
}

crate::display_by_name!(PolicySpec => POLICIES);

/// CPU weight (cgroup v2 scale) of a boosted job; unboosted jobs keep their own weight.
pub const BOOST_WEIGHT: u64 = 10_000;

/// What a policy sees of one job.
#[derive(Clone, Copy, Debug)]
pub struct JobView<'a> {
    /// The job's name.
    pub name: &'a str,
    /// Whether the slot is the job's (its row is active, or its place holds the slot).
    pub favoured: bool,
    /// Slots in the job's cycle (its place's period, or its node's row count).
    pub round: u32,
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

/// The slot plan of a co-scheduling policy.
pub trait Policy: Send {
    /// The desired state of every job in a slot, in the order of `jobs`.
    fn plan(&self, jobs: &[JobView<'_>]) -> Vec<Desired>;

    /// The measuring policy (`auto`), which takes the jobs' progress at every slot boundary; `None` for the
    /// others.
    fn measuring(&mut self) -> Option<&mut Auto> {
        None
    }

    /// What the policy chose per set of jobs sharing PUs, and why (only `auto` chooses).
    fn choices(&self) -> Vec<auto::Choice> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests;
