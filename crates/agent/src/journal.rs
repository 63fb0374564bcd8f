//! The restore journal: before the agent changes a cgroup file, the value to put back goes to the store and to
//! the watchdog; after it is put back, both forget it. Whatever happens to the agent, one of them restores.

use std::collections::HashMap;
use std::io;
use std::path::Path;

use super::dcs::threads;
use super::watchdog::Watchdog;
use lockstep_cgroup::knobs::is_freeze_file;
use lockstep_store::{JournalEntry, Store};

/// Store + watchdog, kept in step. Entries reach the store before the change they guard; their removal after a
/// restore is batched into the next store transaction (a stale entry only restores a value already in place).
pub struct Journal {
    watchdog: Watchdog,
    /// Values of the entries in force, by file.
    live: HashMap<String, String>,
    /// Entries restored since the last [`Journal::take_restored`], still in the store, with their values.
    restored: HashMap<String, String>,
}

impl Journal {
    /// A journal over a running watchdog.
    pub fn new(watchdog: Watchdog) -> Self {
        Self { watchdog, live: HashMap::new(), restored: HashMap::new() }
    }

    /// The watchdog's PID.
    pub fn watchdog_pid(&self) -> i32 {
        self.watchdog.pid().as_raw()
    }

    /// Records that `file` must go back to `value`, before the caller changes it.
    pub fn remember(&mut self, store: &Store, job: &str, file: &Path, value: &str) -> anyhow::Result<()> {
        let name = file.to_string_lossy().into_owned();
        // A removal still pending for this file must not delete the entry written now; when the entry in the
        // store holds this very value (a file changed again and again, as `dcs` does), it stays as it is.
        let in_store = self.restored.remove(&name).is_some_and(|v| v == value);
        if !in_store {
            store.journal_add(&JournalEntry { file: name.clone(), value: value.to_string(), job: job.to_string() })?;
        }
        self.watchdog.track(file, value)?;
        self.live.insert(name, value.to_string());
        Ok(())
    }

    /// Forgets `file` once restored: at once for the watchdog, at the next [`Journal::take_restored`] for the
    /// store.
    pub fn forget(&mut self, file: &Path) -> anyhow::Result<()> {
        self.watchdog.untrack(file)?;
        let name = file.to_string_lossy().into_owned();
        let value = self.live.remove(&name).unwrap_or_default();
        self.restored.insert(name, value);
        Ok(())
    }

    /// The files restored since the last call, for the caller's own store transaction.
    pub fn take_restored(&mut self) -> Vec<String> {
        std::mem::take(&mut self.restored).into_keys().collect()
    }
}

/// The order journaled targets are put back in: thaw first (no job stays frozen if a later write fails), then
/// threads (a real-time budget cannot be taken from a group that still holds real-time threads), then the other
/// files, deepest first (a parent group's budget only after its children's).
pub fn restore_order(target: &Path) -> (u8, std::cmp::Reverse<usize>) {
    let rank = if is_freeze_file(target) {
        0
    } else if threads::is_thread_target(target) {
        1
    } else {
        2
    };
    (rank, std::cmp::Reverse(target.components().count()))
}

/// Puts one journaled target back: a thread's scheduling, or a cgroup file's value. Gone is fine.
pub fn put_back(target: &Path, value: &str) -> io::Result<()> {
    let result =
        if threads::is_thread_target(target) { threads::restore(target, value) } else { std::fs::write(target, value) };
    match result {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Writes back every journaled value left by a previous agent (crash with the watchdog gone too, or a reboot
/// of the agent's host) and empties the journal. Returns how many targets needed repair (held another value;
/// threads count when they still exist).
pub fn repair(store: &Store) -> anyhow::Result<usize> {
    let mut repaired = 0;
    let mut entries = store.journal()?;
    entries.sort_by_key(|e| restore_order(Path::new(&e.file)));
    for e in &entries {
        let path = Path::new(&e.file);
        if threads::is_thread_target(path) {
            put_back(path, &e.value)?;
            repaired += 1;
            store.journal_remove(&e.file)?;
            continue;
        }
        match std::fs::read_to_string(path) {
            Ok(current) if current.trim() == e.value => {}
            Ok(_) => {
                std::fs::write(path, &e.value)?;
                repaired += 1;
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => return Err(err.into()),
        }
        store.journal_remove(&e.file)?;
    }
    Ok(repaired)
}
