//! Co-scheduling policies: what each job's cgroup gets in a slot. One trait, one file per policy.
//!
//! Time is cut into wall-clock slots ([`slot`]); in slot `k` the jobs of row `k mod rows` ([`rows`], `rows` the
//! count of the set of jobs sharing PUs that each is in, the node's for a set with a row given from outside), and
//! the jobs whose cluster-wide place holds `k`, are the favoured ones. A policy turns the jobs (favoured or not) into
//! a [`Desired`] state per job; the agent applies the difference to the cgroups.

pub mod auto;
mod boost;
mod cfs;
mod dcs;
mod gang;
mod planner;
mod policy;
pub mod rows;
pub mod sharing;
pub mod slot;
mod spec;

pub use auto::Auto;
pub use boost::Boost;
pub use cfs::Cfs;
pub use dcs::Dcs;
pub use gang::Gang;
pub use planner::Planner;
pub use policy::{Desired, JobView, Policy, BOOST_WEIGHT};
pub use spec::{PolicySpec, Raise, POLICIES};

#[cfg(test)]
mod tests;
