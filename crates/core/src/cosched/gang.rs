//! `gang`: the favoured jobs run; any other job is frozen while it shares a PU with a favoured job and the jobs
//! sharing its PUs contend for them ([`contending`]; the measured jobs among themselves, below). Jobs whose ranks
//! fit the PUs they share all run, as under `cfs`: slicing them would only leave CPUs idle. A job that shares no
//! PU with any other job is never frozen.
//!
//! Nor is a slot left idle, or a job frozen, for no gain, where what the jobs want is measured: a job measured to
//! want at least [`FILL_SPARE`] CPUs fewer than its PUs (ranks blocked in their launch, in `MPI_Init`, in I/O, or
//! gone) leaves room. A job that leaves room is not frozen; in the slot of a favoured job that leaves room the
//! other jobs sharing its PUs run too; and a favoured job beside which such a job runs gets the high weight
//! ([`super::policy::BOOST_WEIGHT`]), so that the kernel gives it first what it does want. A job starting
//! ([`JobView::starting`]: found, no slot of it read unfrozen yet) leaves room until one is: it runs in every
//! slot, beside the raised favoured jobs, while the measured jobs sharing its PUs are sliced as before, and only
//! if they contend among themselves: what a starting job might want freezes no other job. Seen on
//! experiments/mpl-quick-ab3-is-yield.toml on 2026-12-05: three is class B jobs run again every ~3.5 s spent twice
//! as long starting and ending under `gang` as under `cfs` (each window's time with every job at work 2.9 s of
//! 13.2 s, against 6.0 s), a new job frozen in two slots of three while it wanted ~0.4–1.1 of its 2 PUs, and `auto`
//! holding `gang` took 1.12 times `cfs`'s time by whole runs; with these rules, 0.99–1.02.

use super::policy::{Desired, JobView, Policy};
use super::sharing::contending;

/// The CPUs a job must be measured to leave idle, of the PUs it has, to leave room: half a CPU, so that a job whose
/// ranks are all busy (within the measure's edges, and a job's last slot before it ends: 1.53–1.71 of 2 on is)
/// is sliced as before.
pub const FILL_SPARE: f64 = 0.5;

/// Freezer-based time slicing.
pub struct Gang;

impl Policy for Gang {
    fn plan(&self, jobs: &[JobView<'_>]) -> Vec<Desired> {
        let contend = contending(jobs);
        // Whether each measured job contends with the measured jobs beside it: a starting job runs in every slot,
        // so what it might want freezes no other job (X and Y that fit on PUs 0–2 stay unfrozen while Z starts on
        // PUs 2–3); `false` for a starting job.
        let measured: Vec<JobView<'_>> = jobs.iter().filter(|j| !j.starting).copied().collect();
        let mut settled = contending(&measured).into_iter();
        let settled: Vec<bool> =
            jobs.iter().map(|j| !j.starting && settled.next().expect("one answer per measured job")).collect();
        // A starting job leaves room until a slot of it is read: what it wants is not known, and its launch may want
        // little.
        let leaves_room =
            |f: &JobView<'_>| f.starting || f.demand.is_some_and(|d| f.pus.len() as f64 - d >= FILL_SPARE);
        // Whether each job runs beside the favoured jobs whose PUs it shares while it contends (it or they leave
        // room); `None` for a job that is favoured, does not contend (a starting job: with any job; a measured one:
        // with the measured jobs), or shares no PU with a favoured job (it runs, and nothing is held for it).
        let beside: Vec<Option<bool>> = jobs
            .iter()
            .zip(contend.iter().zip(&settled))
            .map(|(j, (&all, &settled))| {
                let contend = if j.starting { all } else { settled };
                let mut over = jobs.iter().filter(|f| f.favoured && f.pus.intersects(j.pus)).peekable();
                (contend && !j.favoured && over.peek().is_some()).then(|| leaves_room(j) || over.all(leaves_room))
            })
            .collect();
        jobs.iter()
            .zip(contend.iter().zip(&beside))
            .map(|(j, (&contend, &me))| Desired {
                frozen: me == Some(false),
                // Never two sharing jobs raised at once: a favoured job that shares PUs with another favoured one
                // (rows given from outside, places across nodes) is not raised.
                boosted: contend
                    && j.favoured
                    && jobs.iter().zip(&beside).any(|(o, b)| *b == Some(true) && o.pus.intersects(j.pus))
                    && !jobs.iter().any(|o| o.favoured && !std::ptr::eq(o, j) && o.pus.intersects(j.pus)),
            })
            .collect()
    }
}
