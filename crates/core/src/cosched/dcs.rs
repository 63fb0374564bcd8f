//! `dcs` (seed 004): demand-driven co-scheduling. A job is raised for a short quantum when a message arrives for
//! it (the agent's eBPF probe sees it); between messages the slots do what `cfs` does, or, for `dcs+boost`, what
//! `boost` does. The slot plan is all this file decides; raising on arrival is the agent's.

use super::{Boost, Cfs, Desired, JobView, Policy, Raise};

/// Message-driven boosts over a slot policy.
pub struct Dcs {
    /// `dcs+boost`: the slots boost the active row as `boost` does.
    pub with_boost: bool,
    /// How an arrival raises the job.
    pub raise: Raise,
}

impl Dcs {
    /// Every name the policy answers to: `dcs` and `dcs+boost`, each with the default raise or `:weight`, `:rr`,
    /// `:nice`.
    pub const NAMES: [&'static str; 8] =
        ["dcs", "dcs:weight", "dcs:rr", "dcs:nice", "dcs+boost", "dcs+boost:weight", "dcs+boost:rr", "dcs+boost:nice"];

    /// The policy called `name`, if it is one of [`Dcs::NAMES`].
    pub fn parse(name: &str) -> Option<Self> {
        let (base, raise) = match name.split_once(':') {
            Some((base, raise)) => (base, Raise::parse(raise)?),
            None => (name, Raise::DEFAULT),
        };
        match base {
            "dcs" => Some(Self { with_boost: false, raise }),
            "dcs+boost" => Some(Self { with_boost: true, raise }),
            _ => None,
        }
    }
}

impl Policy for Dcs {
    fn name(&self) -> &'static str {
        let base = if self.with_boost { 4 } else { 0 };
        let raise = match self.raise {
            Raise::Weight => 1,
            Raise::Rr => 2,
            Raise::Nice => 3,
        };
        Self::NAMES[base + raise]
    }

    fn plan(&self, active: u32, jobs: &[JobView<'_>]) -> Vec<Desired> {
        if self.with_boost {
            Boost.plan(active, jobs)
        } else {
            Cfs.plan(active, jobs)
        }
    }

    fn raise(&self) -> Option<Raise> {
        Some(self.raise)
    }
}
