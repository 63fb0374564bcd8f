//! `gang`: the active row runs; a job of another row is frozen while it shares a PU with an active job. A job
//! that shares no PU with any other job is never frozen.

use super::{Desired, JobView, Policy};

/// Freezer-based time slicing.
pub struct Gang;

impl Policy for Gang {
    fn plan(&self, active: u32, jobs: &[JobView<'_>]) -> Vec<Desired> {
        jobs.iter()
            .map(|j| Desired {
                frozen: j.row != active && jobs.iter().any(|other| other.row == active && other.pus.intersects(j.pus)),
                boosted: false,
            })
            .collect()
    }
}
