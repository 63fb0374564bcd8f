//! The restore journal: before the agent changes a cgroup file, the value to put back goes to the watchdog and to
//! the store's writer; after it is put back, both forget it. Whatever happens to the agent, one of them restores.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::restore::Target;
use crate::sched::Thread;
use crate::watchdog::Watchdog;
use crate::writer::Writer;
use lockstep_core::ident::JobKey;
use lockstep_store::{JournalEntry, Journaled, Store};

/// Store + watchdog, kept in step. The watchdog has each entry before the change it guards is made, and the store's
/// writer ([`Writer`]) is given it then, to write off the daemon's loop; its removal after a restore is batched into
/// the writer's next transaction of decisions (a stale entry only restores a value already in place). While the
/// writer says the store refuses what it is given (full, read-only: not merely busy), no change is journaled, so
/// none is made: a change the store cannot keep would outlive an agent and watchdog killed together.
pub struct Journal {
    watchdog: Watchdog,
    /// The store the watchdog clears entries from (a new watchdog is started with it).
    store_path: PathBuf,
    /// Values of the entries in force, by file.
    live: HashMap<String, String>,
    /// Entries restored since the last [`Journal::take_restored`], still in the store, with their values.
    restored: HashMap<String, String>,
    /// Why the store refuses what it is given, while the writer says it does.
    refused: Option<String>,
}

impl Journal {
    /// A journal over a running watchdog started with `store_path`.
    pub fn new(watchdog: Watchdog, store_path: PathBuf) -> Self {
        Self { watchdog, store_path, live: HashMap::new(), restored: HashMap::new(), refused: None }
    }

    /// The watchdog's PID.
    pub fn watchdog_pid(&self) -> i32 {
        self.watchdog.pid()
    }

    /// Tells the watchdog the agent runs; starts a new one first if it died.
    pub fn heartbeat(&mut self) {
        if !self.watchdog.alive() {
            if let Err(e) = self.respawn() {
                log::error!("the watchdog died and cannot be started again: {e:#}");
                return;
            }
        }
        // A full pipe (a stopped watchdog) drops this beat: the next one tells it as much.
        let _ = self.watchdog.beat();
    }

    /// Starts a new watchdog and tells it every entry in force.
    fn respawn(&mut self) -> anyhow::Result<()> {
        let mut watchdog = Watchdog::spawn(&self.store_path)?;
        for (target, value) in &self.live {
            watchdog.track(target, value)?;
        }
        log::warn!("the watchdog died; started a new one (PID {})", watchdog.pid());
        self.watchdog = watchdog;
        Ok(())
    }

    /// Records that cgroup file `file` must go back to `value`, before the caller changes it.
    pub fn remember(&mut self, writer: &Writer, job: &JobKey, file: &Path, value: &str) -> anyhow::Result<()> {
        self.remember_target(writer, job, &Target::from(file), value)
    }

    /// Records that `thread` must go back to scheduling `value` (an encoded `Sched`), before it is changed.
    pub fn remember_thread(
        &mut self,
        writer: &Writer,
        job: &JobKey,
        thread: Thread,
        value: &str,
    ) -> anyhow::Result<()> {
        self.remember_target(writer, job, &Target::Thread(thread), value)
    }

    /// Says whether the store refuses what it is given (`Some(why)`: full, read-only) or takes it again (`None`).
    pub fn store_refuses(&mut self, why: Option<String>) {
        self.refused = why;
    }

    /// Why the store refuses what it is given, while the writer says it does.
    pub fn refusal(&self) -> Option<&str> {
        self.refused.as_deref()
    }

    fn remember_target(&mut self, writer: &Writer, job: &JobKey, target: &Target, value: &str) -> anyhow::Result<()> {
        if let Some(why) = &self.refused {
            anyhow::bail!("not journaled, so not made: the store refuses what it is given ({why})");
        }
        let name = target.encode();
        // A removal still pending for this file must not delete the entry written now; when the entry in the
        // store holds this very value (a file changed again and again, as `dcs` does), it stays as it is.
        let in_store = self.restored.remove(&name).is_some_and(|v| v == value);
        if !in_store {
            writer.journal_add(JournalEntry { file: name.clone(), value: value.to_string(), job: job.clone() });
        }
        if self.watchdog.track(&name, value).is_err() {
            // The watchdog died (or is stuck): a new one takes this entry with the others, or the change is not made.
            self.respawn()?;
            self.watchdog.track(&name, value)?;
        }
        self.live.insert(name, value.to_string());
        Ok(())
    }

    /// Forgets cgroup file `file` once restored: at once for the watchdog, at the next
    /// [`Journal::take_restored`] for the store.
    pub fn forget(&mut self, file: &Path) {
        self.forget_target(&Target::from(file));
    }

    /// Forgets `thread` once restored, as [`Journal::forget`] does a file.
    pub fn forget_thread(&mut self, thread: Thread) {
        self.forget_target(&Target::Thread(thread));
    }

    fn forget_target(&mut self, target: &Target) {
        let name = target.encode();
        // A watchdog that cannot be told only restores a value already in place.
        let _ = self.watchdog.untrack(&name);
        let value = self.live.remove(&name).unwrap_or_default();
        self.restored.insert(name, value);
    }

    /// The files restored since the last call, for the caller's own store transaction.
    pub fn take_restored(&mut self) -> Vec<String> {
        std::mem::take(&mut self.restored).into_keys().collect()
    }
}

/// Writes back every journaled value left by a previous agent (crash with the watchdog gone too, or a reboot
/// of the agent's host) and empties the journal. Returns how many targets needed repair (held another value;
/// threads count when they still exist).
pub fn repair(store: &Store) -> anyhow::Result<usize> {
    let mut repaired = 0;
    let mut entries: Vec<(Target, Journaled)> =
        store.journal()?.into_iter().map(|e| (Target::decode(&e.file), e)).collect();
    entries.sort_by_key(|(target, _)| target.order());
    for (target, e) in &entries {
        if !target.holds(&e.value)? {
            target.put_back(&e.value)?;
            repaired += 1;
        }
        store.journal_remove(&e.file)?;
    }
    Ok(repaired)
}
