//! The node's SQLite store, the only place lockstep speaks SQL. Node state ([`node`]: jobs, the agent's restore
//! journal and decisions, counter samples, Slurm rows) and experiment results ([`lab`]) are separate modules over
//! one file; the schema grows by numbered migrations ([`schema`]).

mod lab;
mod node;
mod schema;

pub use lab::{ExperimentRun, LockRun};
pub use node::{Action, Decision, JobRow, JournalEntry, NameInUse, NewJob, SlurmJob, ACTIONS};

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use rusqlite::Connection;

use schema::MIGRATIONS;

/// Default store location on a node.
pub const DEFAULT_PATH: &str = "/var/lib/lockstep/lockstep.db";

/// Seconds since the epoch, as a float.
pub fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// The store path: `--store`, else `LOCKSTEP_STORE`, else [`DEFAULT_PATH`].
pub fn resolve_path(flag: Option<&Path>) -> PathBuf {
    flag.map(Path::to_path_buf)
        .or_else(|| std::env::var_os("LOCKSTEP_STORE").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(DEFAULT_PATH))
}

/// An open store.
pub struct Store {
    pub(crate) conn: Connection,
}

impl Store {
    /// Opens (creating it and its directory if needed) the store at `path`.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create store directory {}", dir.display()))?;
        }
        let mut conn = Connection::open(path).with_context(|| format!("cannot open store {}", path.display()))?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        // In WAL mode NORMAL survives any crash of the process (not of the OS) without an fsync per commit; the
        // agent commits at every slot switch.
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        let version: usize = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        let tx = conn.transaction()?;
        for (i, step) in MIGRATIONS.iter().enumerate().skip(version) {
            tx.execute_batch(step)?;
            tx.pragma_update(None, "user_version", i + 1)?;
        }
        tx.commit()?;
        Ok(Self { conn })
    }
}
