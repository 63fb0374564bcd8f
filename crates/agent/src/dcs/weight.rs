//! Raising by CPU weight: the job's cgroups get [`lockstep_core::cosched::BOOST_WEIGHT`] for the quantum, as `boost`
//! gives the active row; lowering puts back what the slot plan wants.

use super::raiser::{Ctx, Raised, Raiser, Target};
use crate::managed::Managed;
use lockstep_core::cosched::Desired;

/// The weight mechanism.
pub struct Weight;

impl Raiser for Weight {
    fn raise(&mut self, target: Target<'_>, ctx: &mut Ctx<'_>) -> anyhow::Result<Raised> {
        let job = target.job;
        job.apply(Desired { frozen: job.applied.frozen, boosted: true }, ctx.journal, ctx.writer)?;
        Ok(Raised::default())
    }

    fn lower(&mut self, job: &mut Managed, _raised: Raised, ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
        // A job left to the kernel while raised goes back to its own weight, whatever its plan said.
        let boosted = job.planned.boosted && job.switched();
        job.apply(Desired { frozen: job.applied.frozen, boosted }, ctx.journal, ctx.writer)?;
        Ok(())
    }

    fn leave(&mut self, _job: &lockstep_core::ident::JobKey, _ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
        Ok(())
    }
}
