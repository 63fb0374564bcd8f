//! The restore journal: before the agent changes a cgroup file, the value to put back goes to the store and to
//! the watchdog; after it is put back, both forget it. Whatever happens to the agent, one of them restores.

use std::io;
use std::path::Path;

use super::watchdog::Watchdog;
use crate::cgroup::knobs::is_freeze_file;
use crate::store::{JournalEntry, Store};

/// Store + watchdog, kept in step. Entries reach the store before the change they guard; their removal after a
/// restore is batched into the next store transaction (a stale entry only restores a value already in place).
pub struct Journal {
    watchdog: Watchdog,
    restored: Vec<String>,
}

impl Journal {
    /// A journal over a running watchdog.
    pub fn new(watchdog: Watchdog) -> Self {
        Self { watchdog, restored: Vec::new() }
    }

    /// The watchdog's PID.
    pub fn watchdog_pid(&self) -> i32 {
        self.watchdog.pid().as_raw()
    }

    /// Records that `file` must go back to `value`, before the caller changes it.
    pub fn remember(&mut self, store: &Store, job: &str, file: &Path, value: &str) -> anyhow::Result<()> {
        // A removal still pending for this file must not delete the entry written now.
        let name = file.to_string_lossy();
        self.restored.retain(|f| *f != name);
        store.journal_add(&JournalEntry {
            file: file.to_string_lossy().into_owned(),
            value: value.to_string(),
            job: job.to_string(),
        })?;
        self.watchdog.track(file, value)?;
        Ok(())
    }

    /// Forgets `file` once restored: at once for the watchdog, at the next [`Journal::take_restored`] for the
    /// store.
    pub fn forget(&mut self, file: &Path) -> anyhow::Result<()> {
        self.watchdog.untrack(file)?;
        self.restored.push(file.to_string_lossy().into_owned());
        Ok(())
    }

    /// The files restored since the last call, for the caller's own store transaction.
    pub fn take_restored(&mut self) -> Vec<String> {
        std::mem::take(&mut self.restored)
    }
}

/// Writes back every journaled value left by a previous agent (crash with the watchdog gone too, or a reboot
/// of the agent's host) and empties the journal. Returns how many files needed repair (held another value).
pub fn repair(store: &Store) -> anyhow::Result<usize> {
    let mut repaired = 0;
    let entries = store.journal()?;
    // Thaw first, as the watchdog does.
    let (freezers, others): (Vec<_>, Vec<_>) = entries.iter().partition(|e| is_freeze_file(Path::new(&e.file)));
    for e in freezers.into_iter().chain(others) {
        let path = Path::new(&e.file);
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
