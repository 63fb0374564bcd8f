//! Co-scheduling policies as users name them: [`PolicySpec`] and how `dcs` raises ([`Raise`]).

use serde::{Deserialize, Serialize};

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
/// [`PolicySpec::raises`]) and builds the slot planner with [`PolicySpec::build`]. In JSON it is one of its
/// names, checked as it is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
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
}

impl std::str::FromStr for PolicySpec {
    type Err = UsageError;

    fn from_str(name: &str) -> Result<Self, UsageError> {
        POLICIES.parse_or_usage("co-scheduling policy", name)
    }
}

crate::display_by_name!(PolicySpec => POLICIES);
crate::serde_by_text!(PolicySpec);
