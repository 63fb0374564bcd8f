//! `dcs` (demand-driven co-scheduling): a job is raised for a short quantum when a message arrives for it (the
//! agent's eBPF probe sees it); between messages the slots do what `cfs` does, or, for `dcs+boost`, what `boost`
//! does. The slot plan is all this file decides; raising on arrival is the agent's.

use super::boost::Boost;
use super::cfs::Cfs;
use super::policy::{Desired, JobView, Policy};

/// The slot plan under message-driven raises.
pub struct Dcs {
    /// `dcs+boost`: the slots boost the active row as `boost` does.
    pub with_boost: bool,
}

impl Policy for Dcs {
    fn plan(&self, jobs: &[JobView<'_>]) -> Vec<Desired> {
        if self.with_boost {
            Boost.plan(jobs)
        } else {
            Cfs.plan(jobs)
        }
    }
}
