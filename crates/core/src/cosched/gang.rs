//! `gang`: the favoured jobs run; any other job is frozen while it shares a PU with a favoured job and the jobs
//! sharing its PUs contend for them ([`contending`]). Jobs whose ranks fit the PUs they share all run, as under
//! `cfs`: slicing them would only leave CPUs idle. A job that shares no PU with any other job is never frozen.

use super::policy::{Desired, JobView, Policy};
use super::sharing::contending;

/// Freezer-based time slicing.
pub struct Gang;

impl Policy for Gang {
    fn plan(&self, jobs: &[JobView<'_>]) -> Vec<Desired> {
        let contend = contending(jobs);
        jobs.iter()
            .zip(contend)
            .map(|(j, contend)| Desired {
                frozen: contend
                    && !j.favoured
                    && jobs.iter().any(|other| other.favoured && other.pus.intersects(j.pus)),
                boosted: false,
            })
            .collect()
    }
}
