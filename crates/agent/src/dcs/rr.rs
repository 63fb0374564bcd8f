//! Raising to the real-time class (the DCS paper): every normal-class thread of the job to `SCHED_RR` priority 1 for
//! the quantum, then back.
//!
//! Bounded twice: the agent lowers the job after one quantum, and the kernel throttles real-time threads
//! (`kernel.sched_rt_runtime_us`, by default 95 % of each CPU: this mechanism refuses to run when it is -1,
//! unbounded). Where the kernel schedules real-time groups (cgroup v1 `cpu.rt_runtime_us`), a group without a
//! budget may not hold real-time threads at all; there the budget follows the raises: the agent's parent group
//! gets the root's budget (the same bound as on a kernel without group scheduling), and the jobs raised at a
//! given moment share it equally — a job alone gets all of it, two raised together half each — while every
//! job not raised has none. Budgets are journaled like every other change and put back when the job is lowered.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::raiser::{Ctx, Journaled, Raised, Raiser, Target};
use super::threads;
use crate::managed::Managed;
use crate::sched::Sched;
use lockstep_core::ident::JobKey;

/// The real-time mechanism.
#[derive(Default)]
pub struct Rr {
    journaled: Journaled,
    /// Budget file of every job raised so far, with the value to put back (real-time group scheduling only);
    /// journaled once, until the job leaves (the value it names is the one a lowered job has).
    budgets: HashMap<JobKey, (PathBuf, String)>,
    /// Jobs holding a share of the budget now.
    holding: Vec<JobKey>,
    /// The budget the jobs share: the root's.
    total: u64,
    /// The agent's parent group's budget file, with the value to put back, if this agent raised it.
    parent: Option<(PathBuf, String)>,
}

/// Real-time priority of a raised thread: the lowest, above every normal thread, below the agent's own.
const RAISED_PRIORITY: i32 = 1;

/// The kernel's global real-time bound.
const RT_RUNTIME: &str = "/proc/sys/kernel/sched_rt_runtime_us";

/// Budget file of real-time group scheduling.
const BUDGET: &str = "cpu.rt_runtime_us";

impl Raiser for Rr {
    fn raise(&mut self, target: Target<'_>, ctx: &mut Ctx<'_>) -> anyhow::Result<Raised> {
        let job = target.job;
        if std::fs::read_to_string(RT_RUNTIME).is_ok_and(|v| v.trim() == "-1") {
            anyhow::bail!("{RT_RUNTIME} is -1 (real-time threads unbounded): dcs:rr refuses to raise without it");
        }
        if let Some(dir) = cpu_dir(job) {
            self.give_budget(&job.key, &dir, ctx)?;
        }
        // Reset on fork: a child forked while its parent is raised starts normal (it is not in the raise, so
        // nothing would lower it).
        let policy = libc::SCHED_RR | libc::SCHED_RESET_ON_FORK;
        let to = |before: &Sched| Sched { policy, priority: RAISED_PRIORITY, ..*before };
        let name = &job.key;
        match threads::raise(name, target.threads, to, ctx.journal, ctx.writer, self.journaled.of(name)) {
            Ok(threads) => Ok(Raised { threads }),
            Err(e) => {
                self.take_budget(name)?;
                Err(e)
            }
        }
    }

    fn lower(&mut self, job: &mut Managed, raised: Raised, _ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
        threads::lower(&raised.threads);
        self.take_budget(&job.key)
    }

    fn leave(&mut self, job: &JobKey, ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
        self.journaled.forget(job, ctx.journal);
        self.take_budget(job)?;
        if let Some((file, _)) = self.budgets.remove(job) {
            ctx.journal.forget(&file);
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
    /// Gives the job's CPU cgroup `dir` its share of the real-time budget (and the agent's parent group the root's
    /// budget, the first time), shrinking the shares of the jobs holding one already first.
    fn give_budget(&mut self, job: &JobKey, dir: &Path, ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
        if !self.budgets.contains_key(job) {
            let file = dir.join(BUDGET);
            let parent = dir.parent().map(|p| p.join(BUDGET)).filter(|p| p.is_file());
            let root = find_root(dir).map(|r| r.join(BUDGET));
            let (Some(parent), Some(root)) = (parent, root) else { return Ok(()) };
            self.total = read_us(&root)?;
            // A parent that has the budget already is left as it is, and not put back later: an admin, or another
            // agent on this host (the test cluster's nodes), gave it.
            let before = read_us(&parent)?;
            if before < self.total {
                ctx.journal.remember(ctx.writer, job, &parent, &before.to_string())?;
                std::fs::write(&parent, self.total.to_string())
                    .map_err(|e| anyhow::anyhow!("cannot give {} a real-time budget: {e}", parent.display()))?;
                self.parent.get_or_insert((parent, before.to_string()));
            }
            let before = read_us(&file)?.to_string();
            ctx.journal.remember(ctx.writer, job, &file, &before)?;
            self.budgets.insert(job.clone(), (file, before));
        }
        if !self.holding.iter().any(|j| j == job) {
            self.holding.push(job.clone());
            self.share()?;
        }
        Ok(())
    }

    /// Takes the job's share back (its threads are normal again) and gives the others their larger shares.
    fn take_budget(&mut self, job: &JobKey) -> anyhow::Result<()> {
        let Some(i) = self.holding.iter().position(|j| j == job) else { return Ok(()) };
        self.holding.remove(i);
        if let Some((file, before)) = self.budgets.get(job) {
            write_back(file, before)?;
        }
        self.share()
    }

    /// Gives every job holding a share an equal part of what the parent group's other children (another
    /// agent's jobs on this host) leave of the total. A newcomer is last in `holding`, so the others shrink
    /// before it grows and the children's sum never exceeds the parent's (the kernel refuses that).
    fn share(&self) -> anyhow::Result<()> {
        let Some(n) = u64::try_from(self.holding.len()).ok().filter(|n| *n > 0) else { return Ok(()) };
        let ours: Vec<&PathBuf> = self.budgets.values().map(|(f, _)| f).collect();
        let parent = ours.first().and_then(|f| f.parent()?.parent());
        let others: u64 = parent
            .and_then(|p| std::fs::read_dir(p).ok())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join(BUDGET))
            .filter(|f| !ours.contains(&f))
            .filter_map(|f| read_us(&f).ok())
            .sum();
        let each = self.total.saturating_sub(others) / n;
        anyhow::ensure!(each > 0, "no real-time budget left: other groups hold all {} us", self.total);
        for job in &self.holding {
            let Some((file, _)) = self.budgets.get(job) else { continue };
            std::fs::write(file, each.to_string())
                .map_err(|e| anyhow::anyhow!("cannot give {} a real-time budget of {each} us: {e}", file.display()))?;
        }
        Ok(())
    }
}

/// The job's own CPU cgroup where the kernel has real-time group budgets (v1 `cpu`), if any.
fn cpu_dir(job: &Managed) -> Option<PathBuf> {
    let weight_dirs = job.groups.iter().filter_map(|g| g.knobs.weight.as_ref()?.parent().map(Path::to_path_buf));
    let slurm = match &job.origin {
        crate::managed::Origin::Slurm { weight_dir, .. } => weight_dir.clone(),
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

/// Writes a budget back (a group that is gone needs nothing).
fn write_back(file: &Path, before: &str) -> anyhow::Result<()> {
    match std::fs::write(file, before) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            anyhow::bail!("cannot put back {} to {before}: {e}", file.display())
        }
        _ => Ok(()),
    }
}

/// Writes a budget back and drops its journal entry.
fn put_back(file: &Path, before: &str, ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
    write_back(file, before)?;
    ctx.journal.forget(file);
    Ok(())
}
