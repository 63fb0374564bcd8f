//! The control API's requests, carried out: root may do everything; another user sees only their own jobs in the
//! status (answered by the control socket from the published board) and may change nothing (refused there: no
//! request of theirs reaches the loop).

use super::state::Daemon;
use crate::adopt;
use lockstep_core::cosched::{rows, slot};
use lockstep_proto::protocol::{JobProgress, Request, Response};
use lockstep_store::SlurmJob;

impl Daemon {
    /// Carries out `request` for user `uid`; an adoption comes `resolved` by the control door (`adopt::resolve`).
    pub(super) fn control(&mut self, request: Request, uid: u32, resolved: Option<adopt::Resolved>) -> Response {
        if uid != 0 && !matches!(request, Request::Status) {
            return Response::only_root(uid);
        }
        let result = match request {
            // The control socket answers it from the board, without the loop; root's view if asked here.
            Request::Status => return Response { status: Some(self.status()), ..Response::done() },
            Request::SlurmProlog { id, uid, row, place } => {
                let placed = rows::check(row)
                    .map_err(anyhow::Error::from)
                    .and_then(|()| self.slurm_prolog(SlurmJob { id, uid, row }, place));
                return match placed {
                    Ok(placed) => Response { placed: Some(placed), ..Response::done() },
                    Err(e) => Response::failed(&*e),
                };
            }
            Request::Progress => {
                return Response { progress: Some(self.progress_now()), ..Response::done() };
            }
            request => self.change(request, resolved),
        };
        match result {
            Ok(()) => Response::done(),
            Err(e) => Response::failed(&*e),
        }
    }

    /// Every job's progress totals now (crate::progress), read as `auto` reads them; what is kept of a job's ranks
    /// from one reading to the next is dropped once the job is gone.
    fn progress_now(&mut self) -> Vec<JobProgress> {
        let mut read = self.measures.reader(self.table.jobs(), &self.telemetry);
        self.table.jobs().iter().map(|job| JobProgress { job: job.key.clone(), totals: read(job) }).collect()
    }

    /// Carries out a request that changes what the agent does (root's only).
    fn change(&mut self, request: Request, resolved: Option<adopt::Resolved>) -> anyhow::Result<()> {
        match request {
            // Answered by `control` itself.
            Request::Status | Request::SlurmProlog { .. } | Request::Progress => Ok(()),
            Request::Policy { policy, slot: length } => {
                let length = length.map(|d| slot::check("slot", d)).transpose()?;
                self.set_policy(policy, length)
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
            Request::SlurmEpilog { id } => {
                self.slurm_epilog(id);
                Ok(())
            }
            // The control socket records it, off this loop (crate::together::timeline).
            Request::Timeline { .. } => anyhow::bail!("a timeline is recorded by the control socket, not the daemon"),
        }
    }
}
