//! The slot planner of the policy in force, as the agent holds it: a fixed policy, or `auto`, which also measures
//! the jobs' progress and says what it chose.

use super::auto::{Auto, Choice};
use super::boost::Boost;
use super::cfs::Cfs;
use super::dcs::Dcs;
use super::gang::Gang;
use super::policy::{Desired, JobView, Policy};
use super::spec::PolicySpec;

/// A policy's slot planner.
pub enum Planner {
    /// A policy that plans from the slot alone.
    Fixed(Box<dyn Policy>),
    /// `auto`, which plans from what it measured.
    Auto(Auto),
}

impl PolicySpec {
    /// The slot planner of the policy.
    pub fn build(self) -> Planner {
        match self {
            Self::Cfs => Planner::Fixed(Box::new(Cfs)),
            Self::Boost => Planner::Fixed(Box::new(Boost)),
            Self::Gang => Planner::Fixed(Box::new(Gang)),
            Self::Auto => Planner::Auto(Auto::default()),
            Self::Dcs { with_boost, .. } => Planner::Fixed(Box::new(Dcs { with_boost })),
        }
    }
}

impl Planner {
    /// The desired state of every job in a slot, in the order of `jobs`.
    pub fn plan(&self, jobs: &[JobView<'_>]) -> Vec<Desired> {
        match self {
            Self::Fixed(policy) => policy.plan(jobs),
            Self::Auto(auto) => auto.plan(jobs),
        }
    }

    /// `auto`, which takes the jobs' progress at every slot boundary; `None` for the other policies.
    pub fn measuring(&mut self) -> Option<&mut Auto> {
        match self {
            Self::Fixed(_) => None,
            Self::Auto(auto) => Some(auto),
        }
    }

    /// What `auto` chose per set of jobs sharing PUs, and why (the other policies choose nothing).
    pub fn choices(&self) -> Vec<Choice> {
        match self {
            Self::Fixed(_) => Vec::new(),
            Self::Auto(auto) => auto.choices(),
        }
    }
}
