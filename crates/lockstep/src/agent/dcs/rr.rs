//! Raising to the real-time class (seed 004): every normal-class thread of the job to `SCHED_RR` priority 1 for
//! the quantum, then back.
//!
//! Bounded twice: the agent lowers the job after one quantum, and the kernel throttles real-time threads
//! (`kernel.sched_rt_runtime_us`: this mechanism refuses to run when it is -1, unbounded). Where the kernel
//! schedules real-time groups (cgroup v1 `cpu.rt_runtime_us`; a group with no budget may not hold real-time
//! threads), the job's CPU cgroup gets a budget of its own — the agent's parent group half the root's, each job
//! a quarter of that — so that a job raised for too long is throttled by the kernel, whatever the agent does.
//! Budgets are journaled like every other change and put back when the job leaves `dcs`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::raiser::{Ctx, Journaled, Raised, Raiser, Target};
use super::threads::{self, Sched};
use crate::agent::managed::Managed;

/// The real-time mechanism.
#[derive(Default)]
pub struct Rr {
    journaled: Journaled,
    /// Budget files written per job, with the value to put back.
    budgets: HashMap<String, (PathBuf, String)>,
    /// The agent's parent group's budget file, with the value to put back, if this agent raised it.
    parent: Option<(PathBuf, String)>,
}

/// Real-time priority of a raised thread: the lowest, above every normal thread, below the agent's own.
const RAISED_PRIORITY: i32 = 1;

/// The kernel's global real-time bound.
const RT_RUNTIME: &str = "/proc/sys/kernel/sched_rt_runtime_us";

/// Budget file of real-time group scheduling.
const BUDGET: &str = "cpu.rt_runtime_us";

/// Jobs that can hold a real-time budget at once under the agent's parent group.
const JOBS_PER_PARENT: u64 = 4;

impl Raiser for Rr {
    fn raise(&mut self, target: Target<'_>, ctx: &mut Ctx<'_>) -> anyhow::Result<Raised> {
        let job = target.job;
        if std::fs::read_to_string(RT_RUNTIME).is_ok_and(|v| v.trim() == "-1") {
            anyhow::bail!("{RT_RUNTIME} is -1 (real-time threads unbounded): dcs:rr refuses to raise without it");
        }
        if !self.budgets.contains_key(&job.name) {
            if let Some(dir) = cpu_dir(job) {
                self.give_budget(&job.name, &dir, ctx)?;
            }
        }
        let to = |before: &Sched| Sched { policy: libc::SCHED_RR, priority: RAISED_PRIORITY, ..*before };
        let name = &job.name;
        let threads = threads::raise(name, target.threads, to, ctx.journal, ctx.store, self.journaled.of(name))?;
        Ok(Raised { threads })
    }

    fn lower(&mut self, _job: &mut Managed, raised: Raised, _ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
        threads::lower(&raised.threads);
        Ok(())
    }

    fn leave(&mut self, job: &str, ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
        self.journaled.forget(job, ctx.journal)?;
        if let Some((file, before)) = self.budgets.remove(job) {
            put_back(&file, &before, ctx)?;
        }
        Ok(())
    }

    fn stop(&mut self, ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
        if let Some((file, before)) = self.parent.take() {
            put_back(&file, &before, ctx)?;
        }
        Ok(())
    }
}

impl Rr {
    /// Gives the job's CPU cgroup `dir` a real-time budget (and the agent's parent group one, the first time).
    fn give_budget(&mut self, job: &str, dir: &Path, ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
        let file = dir.join(BUDGET);
        let parent = dir.parent().map(|p| p.join(BUDGET)).filter(|p| p.is_file());
        let root = find_root(dir).map(|r| r.join(BUDGET));
        let (Some(parent), Some(root)) = (parent, root) else { return Ok(()) };
        let root_budget = read_us(&root)?;
        let parent_budget = root_budget / 2;
        // A parent that has the budget already is left as it is, and not put back later: an admin, or another
        // agent on this host (the test cluster's nodes), gave it.
        let before = read_us(&parent)?;
        if before < parent_budget {
            ctx.journal.remember(ctx.store, job, &parent, &before.to_string())?;
            std::fs::write(&parent, parent_budget.to_string())
                .map_err(|e| anyhow::anyhow!("cannot give {} a real-time budget: {e}", parent.display()))?;
            self.parent.get_or_insert((parent, before.to_string()));
        }
        let before = read_us(&file)?;
        let budget = parent_budget / JOBS_PER_PARENT;
        if before < budget {
            ctx.journal.remember(ctx.store, job, &file, &before.to_string())?;
            std::fs::write(&file, budget.to_string()).map_err(|e| {
                anyhow::anyhow!(
                    "cannot give {} a real-time budget of {budget} us (at most {JOBS_PER_PARENT} jobs at once): {e}",
                    file.display()
                )
            })?;
        }
        self.budgets.insert(job.to_string(), (file, before.to_string()));
        Ok(())
    }
}

/// The job's own CPU cgroup where the kernel has real-time group budgets (v1 `cpu`), if any.
fn cpu_dir(job: &Managed) -> Option<PathBuf> {
    let weight_dirs = job.groups.iter().filter_map(|g| g.knobs.weight.as_ref()?.parent().map(Path::to_path_buf));
    let slurm = match &job.origin {
        crate::agent::managed::Origin::Slurm { weight_dir, .. } => weight_dir.clone(),
        _ => None,
    };
    slurm.into_iter().chain(weight_dirs).find(|d| d.join(BUDGET).is_file())
}

/// The root of the hierarchy `dir` is in: the highest ancestor that still has the budget file.
fn find_root(dir: &Path) -> Option<PathBuf> {
    dir.ancestors().take_while(|a| a.join(BUDGET).is_file()).last().map(Path::to_path_buf)
}

fn read_us(file: &Path) -> anyhow::Result<u64> {
    let text = std::fs::read_to_string(file).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
    text.trim().parse().map_err(|_| anyhow::anyhow!("{} holds {:?}, not microseconds", file.display(), text.trim()))
}

/// Writes a budget back and drops its journal entry.
fn put_back(file: &Path, before: &str, ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
    match std::fs::write(file, before) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            anyhow::bail!("cannot put back {} to {before}: {e}", file.display())
        }
        _ => ctx.journal.forget(file),
    }
}
