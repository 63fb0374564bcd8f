//! The jobs the daemon manages: taken on (adopted, registered by `lockstep run`, taken over from a previous
//! agent), released, restored on the way out; the policy switched, `dcs` started and stopped with it.

use std::path::PathBuf;
use std::time::Duration;

use super::state::Daemon;
use crate::adopt;
use crate::managed::{self, ChangeError, Managed};
use crate::writer::Record;
use lockstep_cgroup::Backend;
use lockstep_core::cosched::{self, PolicySpec};
use lockstep_core::error::UsageError;
use lockstep_core::ident::{JobKey, JobName};
use lockstep_store::Store;

impl Daemon {
    /// Switches to `policy` (and slot length `slot`, when given) at once: `dcs` is started or stopped as the
    /// policy asks (a `dcs` that cannot start leaves everything as it was), and the plan is redone. `auto` left for
    /// another policy is taken up again where it was if it comes back soon ([`super::planning::Planning::switch`]).
    pub(super) fn set_policy(&mut self, policy: PolicySpec, slot: Option<Duration>) -> anyhow::Result<()> {
        self.switch_dcs(policy.raises())?;
        let was = (self.planning.policy(), self.clock.length());
        self.planning.switch(policy, slot.is_none_or(|s| s == was.1));
        if let Some(slot) = slot {
            self.clock.set_length(slot);
        }
        log::info!(
            "policy {} slot {} -> policy {} slot {}",
            was.0,
            lockstep_core::duration::format(was.1),
            policy,
            lockstep_core::duration::format(self.clock.length())
        );
        self.planning.replan();
        Ok(())
    }

    /// Takes on a job built by `make` (from this agent's cgroup backend, within what other jobs and the agent
    /// itself hold) unless its name is taken or the store refuses what it is given: recorded in the store to be
    /// taken over after a restart, counted, and planned at once.
    pub(super) fn add_job(
        &mut self,
        name: &JobName,
        make: impl FnOnce(&dyn Backend, &adopt::Claims) -> anyhow::Result<Managed>,
    ) -> anyhow::Result<()> {
        if let Some(why) = self.table.store_refusal() {
            anyhow::bail!("no job is taken on while the store refuses what it is given ({why})");
        }
        let key = JobKey::Named(name.clone());
        if self.table.position(&key).is_some() {
            return Err(UsageError::new(format!("job name {name:?} is already managed by this agent")).into());
        }
        let claims = adopt::Claims {
            protected: vec![
                (1, "init"),
                (std::process::id() as i32, "the lockstep agent"),
                (self.table.watchdog_pid(), "the agent's watchdog"),
            ],
            taken: self
                .table
                .jobs()
                .iter()
                .map(|j| (j.key.clone(), j.groups.iter().flat_map(|g| g.dirs.clone()).collect()))
                .collect(),
            roots: self.table.backend().roots(),
        };
        let mut job = make(self.table.backend(), &claims)?;
        match serde_json::to_string(&job.saved()) {
            Ok(saved) => self.record(Record::ManagedPut(key, saved)),
            Err(e) => {
                // Nothing may stay changed by a request that failed.
                let _ = self.table.release(&mut job);
                return Err(e.into());
            }
        }
        self.count(&job);
        log::info!(
            "job {name} taken on ({}, {} cgroup(s), PUs {}, owner uid {})",
            job.origin.kind(),
            job.groups.len(),
            job.pus,
            job.owner
        );
        self.table.push(job);
        self.planning.replan();
        Ok(())
    }

    /// Stops managing job `key`: lowered if `dcs` raised it, its cgroups restored, forgotten by the store.
    pub(super) fn release(&mut self, key: &JobKey) -> anyhow::Result<()> {
        let Some(i) = self.table.position(key) else {
            return Err(UsageError::new(format!("no job {key:?} is managed by this agent")).into());
        };
        let mut job = self.table.remove(i);
        self.dcs_leave(&mut job);
        self.uncount(&job.key);
        self.table.release(&mut job)?;
        log::info!("job {} released; its cgroups are as they were before", job.key);
        self.flush();
        self.record(Record::ManagedRemove(job.key));
        self.planning.replan();
        Ok(())
    }

    /// Restores every job's cgroups on the way out; returns what could not be restored, one line per job. Jobs
    /// that still run stay in the store, so that the next agent takes them over, and so do the processes adopted
    /// into the agent's cgroups; a job that has ended is forgotten and the cgroups the agent made for it removed.
    /// None of this needs a new descriptor, however the agent ran out of them: a thaw or an unboost writes
    /// through the descriptor opened for the change, and whether an adopted job has ended is asked of the kernel
    /// by `rmdir` of its cgroup (refused while a process is in it). The [`Reserve`](crate::restore::Reserve) is
    /// closed first, for what else may need one. Then it waits, at most [`crate::writer::FINISH_WAIT`], for the
    /// store's writer to write what it was given.
    pub fn restore_all(&mut self) -> Vec<String> {
        self.reserve.release();
        self.switch_dcs_off();
        self.lock_probe.stop();
        self.drop_ended();
        let mut left = Vec::new();
        for i in 0..self.table.jobs().len() {
            if let Err(e) = self.table.apply(i, cosched::Desired::default()) {
                if !matches!(e, ChangeError::Gone(_)) {
                    left.push(format!("job {}: {e:#}", self.table.jobs()[i].key));
                }
            }
        }
        // Ended while its processes could not be listed: its cgroup went with the rmdir, the job goes too.
        for i in (0..self.table.jobs().len()).rev() {
            let job = &self.table.jobs()[i];
            if job.applied == cosched::Desired::default() && job.remove_if_ended() {
                self.retire(i);
            }
        }
        self.flush();
        if !self.table.writer().finish(crate::writer::FINISH_WAIT) {
            log::warn!(
                "the store's writer did not finish within {} s: what it had not written is lost (a journal entry \
                 left in the store restores a value already in place at the next start)",
                crate::writer::FINISH_WAIT.as_secs()
            );
        }
        left
    }

    /// Takes over the jobs a previous agent managed (their cgroups still exist); counting restarts from zero. One
    /// saved under a name now reserved for Slurm's jobs is put back where it came from instead, and forgotten.
    /// `store` is read as the daemon starts, before its loop.
    pub(super) fn take_over(&mut self, store: &Store) -> anyhow::Result<()> {
        for (name, saved) in store.managed_all()? {
            let Ok(saved) = serde_json::from_str::<managed::Saved>(&saved) else {
                self.record(Record::ManagedForget(name));
                continue;
            };
            // The store keeps a job by its text: a Slurm job is told by how it came, never by that text.
            let key = match &saved.origin {
                managed::Origin::Slurm { id, .. } => Ok(JobKey::Slurm(*id)),
                _ => name.parse::<JobName>().map(JobKey::Named),
            };
            let Ok(key) = key else {
                // Taken on by an earlier build under a name this one refuses (`slurm-42` now means Slurm's job
                // 42): it could be neither released nor told apart, so it is put back now (the journal's repair
                // at start restored its cgroups' state), and said.
                saved.origin.put_back();
                log::warn!(
                    "job {name}, taken on by an earlier lockstep, is released: its name is not a job name now \
                     (names beginning with \"slurm-\" are Slurm's jobs; adopt it again under another)"
                );
                self.record(Record::ManagedForget(name));
                continue;
            };
            match Managed::restore_saved(key, saved) {
                Some(job) => {
                    self.count(&job);
                    self.table.push(job);
                }
                None => self.record(Record::ManagedForget(name)),
            }
        }
        Ok(())
    }

    /// Starts counting `job`: a message to the sampler, never a wait.
    pub(super) fn count(&self, job: &Managed) {
        let groups: Vec<Vec<PathBuf>> = match &job.origin {
            managed::Origin::Slurm { dirs, .. } => vec![dirs.clone()],
            _ => job.groups.iter().map(|g| g.dirs.clone()).collect(),
        };
        self.telemetry.attach(&job.key, groups, job.pus.clone(), job.bounds());
    }

    /// Stops counting job `key`, which is no longer managed: its final counts go to the store (a message to the
    /// sampler, never a wait), and a fault said of it is forgotten (a later job of that name is said afresh).
    pub(super) fn uncount(&mut self, key: &JobKey) {
        self.telemetry.detach(key);
        self.faults.forget(&crate::faults::Place::Job(key.clone()));
    }
}
