//! Raising by nice value: every normal-class thread of the job to nice -20 for the quantum. Nice orders threads
//! within their CPU cgroup only, so it cannot lift a job that has a cgroup of its own above others.

use super::raiser::{Ctx, Journaled, Raised, Raiser, Target};
use super::threads;
use crate::managed::Managed;
use crate::sched::Sched;
use lockstep_core::ident::JobKey;

/// The nice mechanism.
#[derive(Default)]
pub struct Nice {
    journaled: Journaled,
}

/// The highest priority nice gives.
const RAISED_NICE: i32 = -20;

impl Raiser for Nice {
    fn raise(&mut self, target: Target<'_>, ctx: &mut Ctx<'_>) -> anyhow::Result<Raised> {
        // Reset on fork: a child forked while its parent is raised starts at nice 0.
        let to =
            |before: &Sched| Sched { policy: before.policy | libc::SCHED_RESET_ON_FORK, nice: RAISED_NICE, ..*before };
        let name = &target.job.key;
        let threads = threads::raise(name, target.threads, to, ctx.journal, ctx.writer, self.journaled.of(name))?;
        Ok(Raised { threads })
    }

    fn lower(&mut self, _job: &mut Managed, raised: Raised, _ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
        threads::lower(&raised.threads);
        Ok(())
    }

    fn leave(&mut self, job: &JobKey, ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
        self.journaled.forget(job, ctx.journal);
        Ok(())
    }
}
