//! The store's writer: a thread of normal priority with a store connection of its own, which writes what the
//! daemon's loop gives it (journal entries, the daemon's records, decisions with the journal's removals, `auto`'s
//! choices). The loop only sends: a SQLite write waits on the disk, and a user who writes and syncs a large file
//! makes that wait as long as they like (a first write of a prolog's registration took 77 ms here beside
//! `dd … conv=fsync`), which the slot switch must never wait behind.
//!
//! What the store cannot take yet (another connection holds its lock past the writer's busy timeout, the disk is
//! full or read-only) waits here, bounded ([`Pending`]), and is tried again every [`RETRY`]. A write the store
//! refuses for good (the write itself is wrong) is said and dropped. Whether the store takes what it is given goes
//! to the daemon as a fault (`Command::Stored`), said when it changes.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use crate::outlet::Outlet;
use lockstep_core::cosched::auto::Choice;
use lockstep_core::ident::{JobKey, NodeName};
use lockstep_core::job::SlurmJobId;
use lockstep_store::{Decision, JournalEntry, SlurmJob, Store};

/// How long the writer's connection waits for another connection's write lock before it keeps what it writes
/// for later.
const BUSY: Duration = Duration::from_millis(500);

/// How soon what the store could not take is tried again.
pub const RETRY: Duration = Duration::from_secs(1);

/// Records, decisions and choices (each) kept while the store cannot take them.
pub const MAX_PENDING: usize = 100_000;

/// How long the daemon waits, as it stops, for the writer to write what it was given.
pub const FINISH_WAIT: Duration = Duration::from_secs(5);

/// How soon what the store could not take is tried again while the daemon waits for it to be written.
const FINISH_RETRY: Duration = Duration::from_millis(100);

/// A write of the daemon's records.
#[derive(Debug)]
pub enum Record {
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

/// What the loop gives the writer.
#[derive(Debug)]
enum Write {
    /// A journal entry, given as the change it guards is made (the watchdog has it already).
    Journal(JournalEntry),
    /// One of the daemon's records.
    Record(Record),
    /// Decisions, the journal entries restored since the last batch, and `auto`'s choices (time, choice).
    Batch { decisions: Vec<Decision>, restored: Vec<String>, choices: Vec<(f64, Choice)> },
    /// Answer once everything given before is written, or at the deadline.
    Finish(Sender<()>, Instant),
}

/// What the writer tells the daemon (`Command::Stored`) when it changes: the store takes what it is given again
/// (`None`), or this.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trouble {
    /// What failed, said as the daemon's fault.
    pub said: String,
    /// Whether the store refuses writes (full, read-only) rather than being busy: nothing is journaled, so no
    /// change made, meanwhile.
    pub refuses: bool,
}

/// The loop's side of the writer: sending never waits.
pub struct Writer {
    tx: Sender<Write>,
}

impl Writer {
    /// Starts the writer over its own connection to the store at `path` (node `node`'s), telling `daemon` when
    /// the store stops or starts again taking what it is given.
    pub fn spawn(path: &Path, node: NodeName, daemon: Outlet<Option<Trouble>>) -> anyhow::Result<Self> {
        let store = Store::open_existing_to_write(path)?;
        store.set_busy_timeout(BUSY)?;
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new().name("lockstep-store".into()).spawn(move || {
            let mut pending = Pending::new(store, node, daemon);
            pending.serve(&rx);
        })?;
        Ok(Self { tx })
    }

    /// Gives journal entry `entry` to the writer.
    pub fn journal_add(&self, entry: JournalEntry) {
        self.send(Write::Journal(entry));
    }

    /// Gives `record` to the writer.
    pub fn record(&self, record: Record) {
        self.send(Write::Record(record));
    }

    /// Gives `decisions`, the journal's `restored` entries and `auto`'s `choices` to the writer.
    pub fn batch(&self, decisions: Vec<Decision>, restored: Vec<String>, choices: Vec<(f64, Choice)>) {
        self.send(Write::Batch { decisions, restored, choices });
    }

    /// Waits, at most `wait`, until what was given before is written; whether it was. For the agent's stop, never
    /// for the loop.
    pub fn finish(&self, wait: Duration) -> bool {
        let (reply, done) = mpsc::channel();
        self.send(Write::Finish(reply, Instant::now() + wait));
        done.recv_timeout(wait).is_ok()
    }

    fn send(&self, write: Write) {
        // Fails only when the writer died, which it has told the daemon (`Pending`'s drop).
        let _ = self.tx.send(write);
    }
}

/// What waits for the store, kept so that it cannot grow past a bound whatever the loop gives: one entry per
/// journaled file (the last given), the removals of restored files, the records in order (at most
/// [`MAX_PENDING`]), the decisions and choices (at most [`MAX_PENDING`] each, the oldest dropped).
///
/// A round writes the removals with the decisions (one transaction), then the entries, the records and the
/// choices. A removal given after an entry of the same file drops that entry; an entry given after a removal is
/// written after it, so it stays. Each part is taken out once written: nothing is written twice.
struct Pending {
    store: Store,
    node: NodeName,
    daemon: Outlet<Option<Trouble>>,
    entries: BTreeMap<String, JournalEntry>,
    removals: BTreeSet<String>,
    records: VecDeque<Record>,
    decisions: Vec<Decision>,
    choices: Vec<(f64, Choice)>,
    /// Who waits for everything given before their finish to be written, and until when.
    finishing: Vec<(Sender<()>, Instant)>,
    /// The trouble last told the daemon (`None`: the store takes what it is given).
    told: Option<Trouble>,
}

impl Pending {
    fn new(store: Store, node: NodeName, daemon: Outlet<Option<Trouble>>) -> Self {
        Self {
            store,
            node,
            daemon,
            entries: BTreeMap::new(),
            removals: BTreeSet::new(),
            records: VecDeque::new(),
            decisions: Vec::new(),
            choices: Vec::new(),
            finishing: Vec::new(),
            told: None,
        }
    }

    /// Takes what the loop sends and writes it, until the loop's side is gone. After a round that left something
    /// unwritten, the next is tried only [`RETRY`] later ([`FINISH_RETRY`] while someone waits for a finish),
    /// whatever comes meanwhile.
    fn serve(&mut self, rx: &Receiver<Write>) {
        let mut next_try: Option<Instant> = None;
        loop {
            let got = match next_try {
                Some(at) if !self.is_empty() => rx.recv_timeout(at.saturating_duration_since(Instant::now())),
                _ => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
            match got {
                Ok(write) => self.take(write),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.write();
                    return;
                }
            }
            // Whatever else came meanwhile goes in the same round.
            while let Ok(write) = rx.try_recv() {
                self.take(write);
            }
            let now = Instant::now();
            if next_try.is_none_or(|at| now >= at) || self.finishing.iter().any(|(_, d)| now >= *d) {
                self.write();
                let wait = if self.finishing.is_empty() { RETRY } else { FINISH_RETRY };
                next_try = (!self.is_empty()).then(|| Instant::now() + wait);
            }
            let (done, now) = (self.is_empty(), Instant::now());
            self.finishing.retain(|(reply, deadline)| {
                let answered = done || now >= *deadline;
                if answered {
                    let _ = reply.send(());
                }
                !answered
            });
        }
    }

    /// Whether nothing waits.
    fn is_empty(&self) -> bool {
        self.entries.is_empty()
            && self.removals.is_empty()
            && self.records.is_empty()
            && self.decisions.is_empty()
            && self.choices.is_empty()
    }

    /// Keeps `write` until it is written.
    fn take(&mut self, write: Write) {
        match write {
            Write::Journal(entry) => {
                self.entries.insert(entry.file.clone(), entry);
            }
            Write::Record(record) => {
                if self.records.len() >= MAX_PENDING {
                    if let Some(dropped) = self.records.pop_front() {
                        log::error!("cannot write {} to the store: too many records wait for it", dropped.what());
                    }
                }
                self.records.push_back(record);
            }
            Write::Batch { decisions, restored, choices } => {
                for file in restored {
                    self.entries.remove(&file);
                    self.removals.insert(file);
                }
                self.decisions.extend(decisions);
                self.choices.extend(choices);
                trim(&mut self.decisions);
                trim(&mut self.choices);
            }
            Write::Finish(reply, deadline) => self.finishing.push((reply, deadline)),
        }
    }

    /// Writes what waits, each part taken out once written, and tells the daemon when whether the store takes it
    /// changed. A write the store refuses for good (not busy, not full, not read-only: the write itself is wrong)
    /// is said and dropped; at any other failure the round ends, and the rest waits for the next.
    fn write(&mut self) {
        let trouble = self.write_parts().err();
        if trouble != self.told {
            self.told.clone_from(&trouble);
            self.daemon.tell(trouble);
        }
    }

    /// [`Pending::write`]'s writes, up to the first that may pass later.
    fn write_parts(&mut self) -> Result<(), Trouble> {
        // Whether to go on after `e`: the write is dropped (said), or it waits and the round ends.
        let failed = |what: &str, e: lockstep_store::Error| {
            if e.may_pass_later() {
                Err(Trouble { said: format!("cannot write {what}: {e:#}"), refuses: !e.is_busy() })
            } else {
                log::error!("cannot write {what} to the store: {e:#}; dropped");
                Ok(())
            }
        };
        if !self.decisions.is_empty() || !self.removals.is_empty() {
            let removals: Vec<String> = self.removals.iter().cloned().collect();
            if let Err(e) = self.store.log_decisions(&self.decisions, &removals) {
                failed("decisions", e)?;
            }
            self.decisions.clear();
            self.removals.clear();
        }
        while let Some((file, entry)) = self.entries.pop_first() {
            if let Err(e) = self.store.journal_add(&entry) {
                let kept = failed(&format!("the journal entry of {file}"), e);
                if kept.is_err() {
                    self.entries.insert(file, entry);
                }
                kept?;
            }
        }
        while let Some(record) = self.records.front() {
            if let Err(e) = record.write(&self.store) {
                failed(&record.what(), e)?;
            }
            self.records.pop_front();
        }
        if !self.choices.is_empty() {
            if let Err(e) = self.store.log_auto(&self.node, &self.choices) {
                failed("auto's choices", e)?;
            }
            self.choices.clear();
        }
        Ok(())
    }
}

impl Drop for Pending {
    /// A writer that panicked tells the daemon, whose journal then refuses every change: a change the store
    /// cannot keep is not made.
    fn drop(&mut self) {
        if std::thread::panicking() {
            let said = "the store's writer died (a panic; see the log)".to_string();
            self.daemon.tell(Some(Trouble { said, refuses: true }));
        }
    }
}

/// Drops the oldest of `items` past [`MAX_PENDING`].
fn trim<T>(items: &mut Vec<T>) {
    let excess = items.len().saturating_sub(MAX_PENDING);
    items.drain(..excess);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(file: &str, value: &str) -> Write {
        let job = JobKey::Named("j".parse().unwrap());
        Write::Journal(JournalEntry { file: file.into(), value: value.into(), job })
    }

    fn restored(files: &[&str]) -> Write {
        Write::Batch {
            decisions: Vec::new(),
            restored: files.iter().map(|f| (*f).to_string()).collect(),
            choices: Vec::new(),
        }
    }

    #[test]
    fn one_entry_per_file_waits_and_a_removal_drops_the_entry_before_it_but_not_after() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let path = dir.path().join("lockstep.db");
        drop(Store::open(&path).unwrap());
        let (tx, told) = mpsc::channel();
        let outlet = Outlet::new(move |t| tx.send(t).is_ok());
        let mut pending = Pending::new(Store::open_existing_to_write(&path).unwrap(), "n1".parse().unwrap(), outlet);
        for w in [entry("a", "1"), entry("a", "2"), entry("b", "1"), restored(&["b", "c"]), entry("c", "1")] {
            pending.take(w);
        }
        assert_eq!(pending.entries.len(), 2, "one entry per file, and b's dropped by its removal");
        assert_eq!(pending.removals.len(), 2);
        pending.write();
        assert!(pending.is_empty());
        let mut kept: Vec<(String, String)> =
            pending.store.journal().unwrap().into_iter().map(|j| (j.file, j.value)).collect();
        kept.sort();
        assert_eq!(kept, [("a".to_string(), "2".to_string()), ("c".to_string(), "1".to_string())]);
        assert!(told.try_recv().is_err(), "nothing to tell while the store takes everything");
    }
}
