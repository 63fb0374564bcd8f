//! `gang`: the favoured jobs run; any other job is frozen while it shares a PU with a favoured job. A job that
//! shares no PU with any other job is never frozen.

use super::policy::{Desired, JobView, Policy};

/// Freezer-based time slicing.
pub struct Gang;

impl Policy for Gang {
    fn plan(&self, jobs: &[JobView<'_>]) -> Vec<Desired> {
        jobs.iter()
            .map(|j| Desired {
                frozen: !j.favoured && jobs.iter().any(|other| other.favoured && other.pus.intersects(j.pus)),
                boosted: false,
            })
            .collect()
    }
}
