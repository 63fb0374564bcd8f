//! The store's file: where it is, how it is opened (made private to its owner, in WAL mode, migrated to this
//! build's schema), and the connection every module of the store speaks SQL over.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};

use lockstep_core::error::UsageError;
use rusqlite::{Connection, ErrorCode};

use crate::schema::MIGRATIONS;

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
    ///
    /// The store holds job command lines, which may hold secrets: a new store, its directory and SQLite's WAL
    /// files are readable by their owner only (0600, the directory 0700), and a store of this user's made wider
    /// by an older build is narrowed. A path that is not a regular file, or cannot be created, is a usage error.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        prepare(path)?;
        let mut conn = Connection::open(path)
            .map_err(|e| UsageError::new(format!("cannot open store {}: {e}", path.display())))?;
        conn.busy_timeout(OPEN_WAIT)?;
        to_wal(&conn).map_err(|e| {
            UsageError::new(format!("store {} is not a SQLite database lockstep can use: {e}", path.display()))
        })?;
        narrow(path);
        // In WAL mode NORMAL survives any crash of the process (not of the OS) without an fsync per commit; the
        // agent commits at every slot switch.
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        // Several processes may open a new store at once (four `lockstep run` started together): the version is
        // read inside a write transaction, so that one of them migrates and the others find it done.
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let version: usize = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
        for (i, step) in MIGRATIONS.iter().enumerate().skip(version) {
            tx.execute_batch(step)?;
            tx.pragma_update(None, "user_version", i + 1)?;
        }
        tx.commit()?;
        Ok(Self { conn })
    }

    /// How long a write waits for a lock another connection holds before it fails (10 s when opened).
    pub fn set_busy_timeout(&self, wait: Duration) -> crate::error::Result<()> {
        self.conn.busy_timeout(wait)?;
        Ok(())
    }
}

/// How long opening a store waits for other connections' locks.
const OPEN_WAIT: Duration = Duration::from_secs(10);

/// Puts the store in WAL mode. Switching a new store to WAL upgrades a shared lock to an exclusive one; when
/// another connection is upgrading too, SQLite answers "database is locked" at once instead of calling the busy
/// handler (waiting could deadlock), so of several processes opening a new store together one may fail: this
/// retries that for up to [`OPEN_WAIT`].
fn to_wal(conn: &Connection) -> rusqlite::Result<()> {
    let deadline = Instant::now() + OPEN_WAIT;
    loop {
        match conn.pragma_update(None, "journal_mode", "WAL") {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(e.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            done => return done,
        }
    }
}

/// Checks that `path` is a regular file, or creates it (0600) and its directory (0700).
fn prepare(path: &Path) -> Result<(), UsageError> {
    let bad = |what: String| UsageError::new(format!("bad store {}: {what}", path.display()));
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => {
            // SQLite says "unable to open database file" for a file it may not open: say why here. Asked of the
            // kernel without opening it: closing a descriptor of the file would drop every POSIX lock this
            // process's SQLite connections hold on it, and the next connection to close would take its WAL away.
            let path_c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
                .map_err(|_| bad("a path with a NUL byte".into()))?;
            // SAFETY: a NUL-terminated path; faccessat only reads it.
            let readable =
                unsafe { libc::faccessat(libc::AT_FDCWD, path_c.as_ptr(), libc::R_OK, libc::AT_EACCESS) } == 0;
            if !readable {
                let e = std::io::Error::last_os_error();
                return Err(bad(format!(
                    "{} (run as its owner, or give --store)",
                    lockstep_core::error::io_reason(&e)
                )));
            }
            return Ok(());
        }
        Ok(_) => return Err(bad("not a regular file (expected a SQLite file, or a path to create one)".into())),
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(bad(e.to_string())),
        Err(_) => {}
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(|e| {
            bad(format!("cannot create its directory {}: {}", dir.display(), lockstep_core::error::io_reason(&e)))
        })?;
    }
    match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(bad(format!("cannot create it: {}", lockstep_core::error::io_reason(&e)))),
    }
}

/// Narrows the store and its WAL files to 0600 where this user owns them and they are wider.
fn narrow(path: &Path) {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let mut shm = path.as_os_str().to_owned();
    shm.push("-shm");
    for file in [path.to_path_buf(), PathBuf::from(wal), PathBuf::from(shm)] {
        if let Ok(meta) = std::fs::metadata(&file) {
            if meta.uid() == me && meta.mode() & 0o077 != 0 {
                let _ = std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::Store;

    /// /proc/locks in one read(2), the smallest window for other threads' locks to move the listing.
    fn proc_locks() -> String {
        use std::io::Read;
        let mut buf = vec![0; 1 << 20];
        let n = std::fs::File::open("/proc/locks").unwrap().read(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    fn mode(path: &std::path::Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_new_store_and_its_files_are_its_owners_only() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let path = dir.path().join("new/dir/lockstep.db");
        let store = Store::open(&path).unwrap();
        store.jobs(true).unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir.path().join("new/dir")), 0o700);
        for suffix in ["-wal", "-shm"] {
            let file = dir.path().join(format!("new/dir/lockstep.db{suffix}"));
            assert!(!file.exists() || mode(&file) == 0o600, "{suffix}: {:o}", mode(&file));
        }
        drop(store);
        // An older build's store, readable by all, is narrowed when opened.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        drop(Store::open(&path).unwrap());
        assert_eq!(mode(&path), 0o600);
    }

    #[test]
    fn a_store_path_that_is_not_a_file_is_a_usage_error_and_creates_nothing() {
        let err = Store::open(std::path::Path::new("/dev/null")).err().unwrap();
        assert!(err.is::<lockstep_core::error::UsageError>(), "{err}");
        assert!(err.to_string().contains("not a regular file"), "{err}");
        let dir = lockstep_scratch::tempdir().unwrap();
        let err = Store::open(dir.path()).err().unwrap();
        assert!(err.is::<lockstep_core::error::UsageError>(), "{err}");
    }

    /// Opening the store again in a process that has it open (the agent's sampler, its HTTP handlers) keeps the
    /// first connection's locks: a descriptor of the file opened and closed outside SQLite would drop them, and
    /// another process closing its connection would then take the WAL, and every later write, away.
    #[test]
    fn opening_the_store_again_keeps_the_locks_of_the_open_one() {
        use std::os::unix::fs::MetadataExt;
        let dir = lockstep_scratch::tempdir().unwrap();
        let path = dir.path().join("lockstep.db");
        let first = Store::open(&path).unwrap();
        first.jobs(true).unwrap();
        drop(Store::open(&path).unwrap());
        let ino = std::fs::metadata(&path).unwrap().ino().to_string();
        let me = std::process::id().to_string();
        // `1: POSIX  ADVISORY  READ 1234 08:01:5678 …`: the pid, then device and inode.
        let held = |locks: &str| {
            locks.lines().any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() > 5 && f[1] == "POSIX" && f[4] == me && f[5].rsplit(':').next() == Some(ino.as_str())
            })
        };
        // The other tests of this process take and drop locks meanwhile, and the kernel's listing moves under a
        // reader: a read of /proc/locks split over several read(2) calls skipped the store's lock (and listed
        // another twice). It is read in one call, and again until the lock shows or 5 s pass: a lock really
        // dropped never comes back, as nothing here reads the store again.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut locks = proc_locks();
        while !held(&locks) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
            locks = proc_locks();
        }
        assert!(held(&locks), "no POSIX lock of this process on the store (inode {ino}) for 5 s; last seen:\n{locks}");
        drop(first);
    }
}
