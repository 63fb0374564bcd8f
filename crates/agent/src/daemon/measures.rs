//! What the daemon keeps to read every job's progress totals (`crate::progress`), for `auto` at slot boundaries
//! and for a paired comparison's `progress` requests: one origin for the monotonic times, and what is known of
//! each measured job's ranks.

use std::collections::HashMap;
use std::time::Instant;

use crate::managed::Managed;
use crate::progress::{self, Watch};
use crate::sampler::Counting;
use lockstep_core::cosched::auto::Sample;
use lockstep_core::ident::JobKey;

/// The progress readings' state, kept by this part of the daemon alone.
pub(super) struct Measures {
    /// The origin of the monotonic times the readings carry.
    epoch: Instant,
    /// What is known of each measured job's ranks (which preload the profiler, where they publish), by job.
    ranks: HashMap<JobKey, Watch>,
}

impl Measures {
    /// Nothing read yet; times count from now.
    pub(super) fn new() -> Self {
        Self { epoch: Instant::now(), ranks: HashMap::new() }
    }

    /// Forgets what it kept of jobs no longer among `jobs`, and gives a reader of the totals of any of them now.
    pub(super) fn reader<'a>(
        &'a mut self,
        jobs: &'a [Managed],
        telemetry: &'a Counting,
    ) -> impl FnMut(&Managed) -> Sample + 'a {
        self.ranks.retain(|name, _| jobs.iter().any(|j| j.key == *name));
        let (epoch, ranks) = (self.epoch, &mut self.ranks);
        move |job| progress::of_job(job, epoch, ranks.entry(job.key.clone()).or_default(), telemetry)
    }
}
