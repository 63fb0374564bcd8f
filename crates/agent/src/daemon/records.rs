//! What the daemon writes to the store, without waiting: its own records (the jobs it manages, the Slurm jobs the
//! prologs announced), its decisions and `auto`'s choices, all kept in its [`Outbox`]. The loop's store connection
//! has no busy timeout, so a write another connection holds the lock for (the sampler, a `lockstep run`, root's
//! `sqlite3`) is kept and written, in order, at the next flush.

use std::time::{Duration, Instant};

use crate::journal::Journal;
use lockstep_core::cosched::auto::Choice;
use lockstep_core::ident::JobKey;
use lockstep_core::job::SlurmJobId;
use lockstep_store::{Decision, SlurmJob, Store};

/// Decisions (and choices) kept while the store cannot take them.
const MAX_PENDING: usize = 100_000;

/// How often decisions reach the store (they are batched: one transaction per interval, not per slot).
const LOG_INTERVAL: Duration = Duration::from_secs(1);

/// What waits for the store: records it was too busy to take, decisions and `auto`'s choices not yet written
/// (they go in batches, every [`LOG_INTERVAL`]), and when they last went.
pub(super) struct Outbox {
    /// Records the store was too busy to take, in order.
    unsaved: Vec<Record>,
    /// Decisions not yet in the store.
    decisions: Vec<Decision>,
    /// What `auto` chose or started trying, not yet in the store (time, record).
    choices: Vec<(f64, Choice)>,
    /// When decisions last went to the store.
    last_flush: Instant,
}

impl Outbox {
    /// An empty outbox, flushed now.
    pub(super) fn new() -> Self {
        Self { unsaved: Vec::new(), decisions: Vec::new(), choices: Vec::new(), last_flush: Instant::now() }
    }

    /// Keeps `decisions` for the next flush.
    pub(super) fn decide(&mut self, decisions: impl IntoIterator<Item = Decision>) {
        self.decisions.extend(decisions);
    }

    /// Keeps `auto`'s `choice`, made at `time` (seconds since the epoch), for the next flush.
    pub(super) fn choose(&mut self, time: f64, choice: Choice) {
        self.choices.push((time, choice));
    }

    /// Whether the decisions are due to go to the store ([`LOG_INTERVAL`] since the last flush).
    pub(super) fn due(&self) -> bool {
        self.last_flush.elapsed() >= LOG_INTERVAL
    }

    /// Writes `record` to `store` now, or, when the store is busy (or records are already waiting, which go
    /// first), keeps it for the next flush. Any other failure is the caller's.
    pub(super) fn record(&mut self, store: &Store, record: Record) -> lockstep_store::Result<()> {
        if self.unsaved.is_empty() {
            match record.write(store) {
                Err(e) if e.is_busy() => {}
                done => return done,
            }
        }
        self.unsaved.push(record);
        Ok(())
    }

    /// Writes what waited for `store` (the records and `journal`'s entries the store was busy for), then the
    /// decisions and the journal's removals in one transaction, then `auto`'s choices (of node `node`) in another.
    /// What was written is dropped, each batch on its own (decisions written are never written again because the
    /// choices failed); when the store cannot take a batch (locked, read-only, full), it waits for the next flush,
    /// the oldest decisions and choices dropped past [`MAX_PENDING`]. Nothing here waits for another connection's
    /// lock (the loop's store connection has no busy timeout).
    pub(super) fn flush(
        &mut self,
        store: &mut Store,
        journal: &mut Journal,
        node: &lockstep_core::ident::NodeName,
    ) -> anyhow::Result<()> {
        let records = self.save_records(store).and(journal.save_unsaved(store));
        let restored = journal.take_restored();
        let decisions = store.log_decisions(&self.decisions, &restored);
        if decisions.is_ok() {
            self.decisions.clear();
        } else {
            journal.restore_pending(restored);
            let excess = self.decisions.len().saturating_sub(MAX_PENDING);
            self.decisions.drain(..excess);
        }
        let choices = store.log_auto(node, &self.choices);
        if choices.is_ok() {
            self.choices.clear();
        } else {
            let excess = self.choices.len().saturating_sub(MAX_PENDING);
            self.choices.drain(..excess);
        }
        self.last_flush = Instant::now();
        Ok(records.and(decisions).and(choices)?)
    }

    /// Writes the records kept while the store was busy, in the order they were made, up to the first that still
    /// cannot be written (busy again: it and those after it wait for the next flush; failed for good: said and
    /// dropped).
    fn save_records(&mut self, store: &Store) -> lockstep_store::Result<()> {
        while let Some(record) = self.unsaved.first() {
            match record.write(store) {
                Ok(()) => {}
                Err(e) if e.is_busy() => return Err(e),
                Err(e) => log::error!("cannot write {} to the store: {e:#}", record.what()),
            }
            self.unsaved.remove(0);
        }
        Ok(())
    }
}

/// A write of the daemon's records.
#[derive(Debug)]
pub(super) enum Record {
    /// Saves (or replaces) managed job `.0`'s description `.1`.
    ManagedPut(JobKey, String),
    /// Forgets managed job `.0`.
    ManagedRemove(JobKey),
    /// Forgets a description saved under text `.0` that names no job now (an earlier build's, or unreadable).
    ManagedForget(String),
    /// Remembers a Slurm job its prolog announced.
    SlurmPut(SlurmJob),
    /// Marks a Slurm job ended on this node (its epilog ran), for good: an agent restarted while its cgroups
    /// remain never takes it on again.
    SlurmEnd(SlurmJobId),
    /// Forgets a Slurm job whose cgroups are gone.
    SlurmForget(SlurmJobId),
}

impl Record {
    /// What the record is, for the log.
    fn what(&self) -> String {
        match self {
            Self::ManagedPut(name, _) => format!("job {name}'s description"),
            Self::ManagedRemove(name) => format!("the removal of job {name}"),
            Self::ManagedForget(stored) => format!("the removal of saved job {stored:?}"),
            Self::SlurmPut(job) => format!("Slurm job {}'s registration", job.id),
            Self::SlurmEnd(id) => format!("the end of Slurm job {id}"),
            Self::SlurmForget(id) => format!("forgetting ended Slurm job {id}"),
        }
    }

    fn write(&self, store: &Store) -> lockstep_store::Result<()> {
        match self {
            Self::ManagedPut(name, saved) => store.managed_put(name, saved),
            Self::ManagedRemove(name) => store.managed_remove(name),
            Self::ManagedForget(stored) => store.managed_forget(stored),
            Self::SlurmPut(job) => store.slurm_put(job),
            Self::SlurmEnd(id) => store.slurm_end(*id),
            Self::SlurmForget(id) => store.slurm_remove(*id),
        }
    }
}
