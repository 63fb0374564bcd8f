//! `cfs`: leave every job to the kernel's scheduler; nothing is ever written.

use super::policy::{Desired, JobView, Policy};

/// The baseline policy.
pub struct Cfs;

impl Policy for Cfs {
    fn plan(&self, jobs: &[JobView<'_>]) -> Vec<Desired> {
        vec![Desired::default(); jobs.len()]
    }
}
