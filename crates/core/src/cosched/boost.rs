//! `boost` (the MPL paper): in each slot the jobs of the active row get a high CPU weight, the others their own.

use super::{Desired, JobView, Policy};

/// Weight-based co-scheduling.
pub struct Boost;

impl Policy for Boost {
    fn plan(&self, active: u32, jobs: &[JobView<'_>]) -> Vec<Desired> {
        jobs.iter().map(|j| Desired { frozen: false, boosted: j.row == active }).collect()
    }
}
