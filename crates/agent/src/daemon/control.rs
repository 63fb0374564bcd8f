//! The control API's requests, carried out: root may do everything; another user sees only their own jobs in the
//! status (answered by the control socket from the published board) and may change nothing (refused there: no
//! request of theirs reaches the loop).

use super::state::Daemon;
use crate::adopt;
use crate::progress;
use crate::server::{done, failure};
use lockstep_core::cosched::{rows, slot, PolicySpec};
use lockstep_proto::protocol::{JobProgress, Request, Response};
use lockstep_store::SlurmJob;

impl Daemon {
    /// Carries out `request` for user `uid`; an adoption comes `resolved` by the control door (`adopt::resolve`).
    pub(super) fn control(&mut self, request: Request, uid: u32, resolved: Option<adopt::Resolved>) -> Response {
        if uid != 0 && !matches!(request, Request::Status) {
            return failure(anyhow::anyhow!(
                "permission denied: only root may change what the agent does (UID {uid} may query its own jobs)"
            ));
        }
        let result = match request {
            // The control socket answers it from the board, without the loop; root's view if asked here.
            Request::Status => return Response { ok: true, status: Some(self.status()), ..Default::default() },
            Request::SlurmProlog { id, uid, row, place } => {
                let placed = rows::check(row)
                    .map_err(anyhow::Error::from)
                    .and_then(|()| self.slurm_prolog(SlurmJob { id, uid, row }, place));
                return match placed {
                    Ok(placed) => Response { placed: Some(placed), ..done() },
                    Err(e) => failure(e),
                };
            }
            Request::Progress => {
                return Response { ok: true, progress: Some(self.progress_now()), ..Default::default() };
            }
            request => self.change(request, resolved),
        };
        match result {
            Ok(()) => done(),
            Err(e) => failure(e),
        }
    }

    /// Every job's progress totals now (crate::progress), read as `auto` reads them; what is kept of a job's ranks
    /// from one reading to the next is dropped once the job is gone.
    fn progress_now(&mut self) -> Vec<JobProgress> {
        let (jobs, epoch, ranks, telemetry) = (&self.jobs, self.epoch, &mut self.ranks, &self.telemetry);
        ranks.retain(|name, _| jobs.iter().any(|j| j.name == *name));
        jobs.iter()
            .filter_map(|job| {
                let totals = progress::of_job(job, epoch, ranks.entry(job.name.clone()).or_default(), telemetry);
                Some(JobProgress { job: job.name.parse().ok()?, totals })
            })
            .collect()
    }

    /// Carries out a request that changes what the agent does (root's only).
    fn change(&mut self, request: Request, resolved: Option<adopt::Resolved>) -> anyhow::Result<()> {
        match request {
            // Answered by `control` itself.
            Request::Status | Request::SlurmProlog { .. } | Request::Progress => Ok(()),
            Request::Policy { name, slot_ms } => {
                let policy: PolicySpec = name.parse()?;
                let slot = slot_ms.map(|ms| slot::from_millis("slot", ms)).transpose()?;
                self.set_policy(policy, slot)
            }
            Request::Adopt { job, row, .. } => {
                rows::check(row)?;
                // Its slow part was done before it came (podman, /proc, the cgroups' trees): only claims and
                // moves are left to this loop.
                let Some(resolved) = resolved else {
                    anyhow::bail!("an adoption comes resolved by the control socket (adopt::resolve)");
                };
                self.add_job(&job, |backend, claims| adopt::commit(backend, claims, &job, resolved, row))
            }
            Request::Register { job, dirs, row } => {
                rows::check(row)?;
                self.add_job(&job, |_, _| Ok(adopt::from_run(&job, dirs, row)))
            }
            Request::Release { job } => self.release(&job),
            Request::SlurmEpilog { id } => self.slurm_epilog(id),
            // The control socket records it, off this loop (crate::together::timeline).
            Request::Timeline { .. } => anyhow::bail!("a timeline is recorded by the control socket, not the daemon"),
        }
    }
}
