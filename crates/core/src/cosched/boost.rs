//! `boost` (the MPL paper): in each slot the favoured jobs get a high CPU weight, the others their own.

use super::policy::{Desired, JobView, Policy};

/// Weight-based co-scheduling.
pub struct Boost;

impl Policy for Boost {
    fn plan(&self, jobs: &[JobView<'_>]) -> Vec<Desired> {
        jobs.iter().map(|j| Desired { frozen: false, boosted: j.favoured }).collect()
    }
}
