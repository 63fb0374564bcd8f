//! The job table: the jobs the daemon manages, with what every change of their cgroups goes through (the restore
//! journal, and the store's writer it is kept through) and the cgroup backend new jobs are made from. Its fields
//! are its own: the rest of the daemon reads the jobs, changes what it keeps of them (rows, plans, demand), and
//! changes their cgroups only through the table's methods, so that no change bypasses the journal.

use std::path::PathBuf;
use std::time::Duration;

use super::pulse::Pulse;
use super::records::Outbox;
use crate::dcs::raiser::Ctx;
use crate::journal::Journal;
use crate::managed::{ChangeError, Managed};
use crate::writer::Writer;
use lockstep_cgroup::Backend;
use lockstep_core::cosched::Desired;
use lockstep_core::ident::JobKey;
use lockstep_core::job::SlurmJobId;
use lockstep_store::Action;

/// The jobs, the journal, the store's writer, the backend.
pub(super) struct Table {
    /// The jobs the agent manages, in the order taken on.
    jobs: Vec<Managed>,
    /// Where every change to a job's cgroups is written before it is made.
    journal: Journal,
    /// The node's store's writer: the jobs' descriptions, the journal's entries, the records.
    writer: Writer,
    /// What new jobs' cgroups are made with.
    backend: Box<dyn Backend>,
}

impl Table {
    /// No job yet.
    pub(super) fn new(journal: Journal, writer: Writer, backend: Box<dyn Backend>) -> Self {
        Self { jobs: Vec::new(), journal, writer, backend }
    }

    /// The jobs, in the order they were taken on.
    pub(super) fn jobs(&self) -> &[Managed] {
        &self.jobs
    }

    /// The jobs, to change what the daemon keeps of them; their cgroups change through [`Table::apply`] and the
    /// others.
    pub(super) fn jobs_mut(&mut self) -> &mut [Managed] {
        &mut self.jobs
    }

    /// The jobs with what their cgroups' changes go through, for `dcs`'s engine, which raises and lowers them.
    pub(super) fn with_changes(&mut self) -> (&mut [Managed], Ctx<'_>) {
        (&mut self.jobs, Ctx { journal: &mut self.journal, writer: &self.writer })
    }

    /// Where job `key` is, if managed.
    pub(super) fn position(&self, key: &JobKey) -> Option<usize> {
        self.jobs.iter().position(|j| j.is(key))
    }

    /// Where the job of Slurm job `id` is, if managed.
    pub(super) fn slurm(&self, id: SlurmJobId) -> Option<usize> {
        self.jobs.iter().position(|j| j.slurm_id() == Some(id))
    }

    /// Takes on `job` (which the caller has recorded).
    pub(super) fn push(&mut self, job: Managed) {
        self.jobs.push(job);
    }

    /// Takes job `i` out of the table; its cgroups are as they were (see [`Table::release`]).
    pub(super) fn remove(&mut self, i: usize) -> Managed {
        self.jobs.remove(i)
    }

    /// Brings job `i` to `want` ([`Managed::apply`]).
    pub(super) fn apply(&mut self, i: usize, want: Desired) -> Result<Vec<Action>, ChangeError> {
        self.jobs[i].apply(want, &mut self.journal, &self.writer)
    }

    /// Leaves job `i` to the kernel for `why` ([`Managed::leave`]).
    pub(super) fn leave(&mut self, i: usize, why: String) -> Result<Vec<Action>, ChangeError> {
        self.jobs[i].leave(why, &mut self.journal, &self.writer)
    }

    /// Adds the cgroup of `dirs` to job `i` ([`Managed::add_group`]).
    pub(super) fn add_group(&mut self, i: usize, dirs: Vec<PathBuf>) -> Result<(), ChangeError> {
        self.jobs[i].add_group(dirs, &mut self.journal, &self.writer)
    }

    /// Drops the cgroups that are gone from job `i` ([`Managed::prune`]).
    pub(super) fn prune(&mut self, i: usize) {
        self.jobs[i].prune(&mut self.journal);
    }

    /// Restores `job`, taken out of the table or never put in, as it was before it was taken on
    /// ([`Managed::release`]).
    pub(super) fn release(&mut self, job: &mut Managed) -> anyhow::Result<()> {
        job.release(&mut self.journal, &self.writer)
    }

    /// Gives what waits in `outbox` to the writer ([`Outbox::flush`]).
    pub(super) fn flush(&mut self, outbox: &mut Outbox) {
        outbox.flush(&self.writer, &mut self.journal);
    }

    /// Says whether the store refuses what the writer gives it ([`Journal::store_refuses`]).
    pub(super) fn store_refuses(&mut self, why: Option<String>) {
        self.journal.store_refuses(why);
    }

    /// Why the store refuses what the writer gives it, while it does ([`Journal::refusal`]).
    pub(super) fn store_refusal(&self) -> Option<&str> {
        self.journal.refusal()
    }

    /// Beats for the watchdog ([`Pulse::beat`]): the gap since the last beat, when the watchdog has had to act.
    pub(super) fn beat(&mut self, pulse: &mut Pulse) -> Option<Duration> {
        pulse.beat(&mut self.journal)
    }

    /// The store's writer.
    pub(super) fn writer(&self) -> &Writer {
        &self.writer
    }

    /// The backend new jobs' cgroups are made from.
    pub(super) fn backend(&self) -> &dyn Backend {
        self.backend.as_ref()
    }

    /// The watchdog's PID, as the journal knows it.
    pub(super) fn watchdog_pid(&self) -> i32 {
        self.journal.watchdog_pid()
    }
}
