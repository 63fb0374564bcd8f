//! The store's file: where it is, how it is made (whole, marked as lockstep's, private to its owner, in WAL mode)
//! and opened (refused unless it is lockstep's, migrated to this build's schema), and the connection every module
//! of the store speaks SQL over.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use std::os::unix::fs::OpenOptionsExt;

use lockstep_core::error::UsageError;
use rusqlite::{Connection, ErrorCode, OpenFlags};

use crate::error::Error;
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

/// lockstep's mark in the header of every store it makes (`PRAGMA application_id`): the bytes `LkSp` read as
/// a big-endian 32-bit number. A SQLite file with another mark, or with none and not written by an older
/// lockstep, is another program's and is refused.
pub const APPLICATION_ID: i32 = 0x4C6B_5370;

/// An open store.
pub struct Store {
    pub(crate) conn: Connection,
}

impl Store {
    /// Opens the lockstep store at `path`, creating it when there is no file there, and brings it to this
    /// build's schema. For commands that record something (`run`, the agent, `experiment run`).
    ///
    /// A new store is made whole under a temporary name in the same directory (0600, marked, every migration
    /// run) and then linked in place, so a store at `path` is always a marked one; another process making it at
    /// the same moment wins or loses that link, never sees half a store. No directory is created (but lockstep's
    /// own, that of [`DEFAULT_PATH`], 0700) and no existing file's mode is changed. A file that is not a lockstep
    /// store (another program's SQLite file, one that is not SQLite, an empty one, a store of a newer lockstep),
    /// or a path that is not a regular file, is a usage error, and nothing is written to it; so is a directory
    /// that does not exist.
    pub fn open(path: &Path) -> crate::error::Result<Self> {
        if !inspect(path)? {
            create(path)?;
        }
        connect(path)
    }

    /// Opens the lockstep store at `path`, which must exist, to read it: for commands that read what was recorded
    /// (`jobs`, `experiment report`, `stat`, the agent's `/counters`), which create nothing. The connection is
    /// read-only: it takes no write lock, so a reader never stalls the agent's writes. No file at `path` is a
    /// usage error (`no store at PATH`); so is every file [`Store::open`] refuses. A store of an older lockstep
    /// (unmarked, or at an older schema version) is brought to this build's schema first, read-write, once.
    pub fn open_existing(path: &Path) -> crate::error::Result<Self> {
        Self::open_existing_with(path, false)
    }

    /// [`Store::open_existing`], read-write: for what updates a store that must exist (`lockstep jobs` marking a
    /// lost job, the watchdog clearing the journal).
    pub fn open_existing_to_write(path: &Path) -> crate::error::Result<Self> {
        Self::open_existing_with(path, true)
    }

    /// [`Store::open_existing`] (`write`: read-write).
    fn open_existing_with(path: &Path, write: bool) -> crate::error::Result<Self> {
        if !inspect(path)? {
            let dir = directory(path);
            let why = if dir.is_dir() { String::new() } else { format!(": no directory {}", dir.display()) };
            return Err(UsageError::new(format!(
                "no store at {}{why} (nothing was recorded there: give --store the store to read, or set \
                 LOCKSTEP_STORE)",
                path.display()
            ))
            .into());
        }
        if write {
            return connect(path);
        }
        read_only(path)
    }

    /// How long a write waits for a lock another connection holds before it fails (10 s when opened).
    pub fn set_busy_timeout(&self, wait: Duration) -> crate::error::Result<()> {
        self.conn.busy_timeout(wait)?;
        Ok(())
    }
}

/// SQLite's flag that refuses a symbolic link at the path: a store is opened by its own name only.
const NOFOLLOW: OpenFlags = OpenFlags::SQLITE_OPEN_NOFOLLOW;

/// How long opening a store waits for other connections' locks.
const OPEN_WAIT: Duration = Duration::from_secs(10);

/// The usage error `store PATH: WHY (HINT)`.
fn refused(path: &Path, why: &str, hint: &str) -> UsageError {
    UsageError::new(format!("store {}: {why} ({hint})", path.display()))
}

/// The hint of a file that is not a lockstep store.
const NOT_OURS: &str = "give --store a lockstep store, or a path where there is no file yet";

/// Whether there is a lockstep store at `path` (`false`: no file there). Anything else there is refused, having
/// been read only (see [`header`]).
fn inspect(path: &Path) -> Result<bool, UsageError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => {
            readable(path)?;
            if meta.len() == 0 {
                // Not one lockstep made: a new store appears whole (see `create`).
                return Err(refused(path, "an empty file, not a lockstep store", NOT_OURS));
            }
            header(path).map(|()| true)
        }
        Ok(_) => {
            Err(refused(path, "not a regular file", "expected a lockstep store, or a path where there is no file yet"))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
            // The file that stands where a directory of the path should be.
            let file = path.ancestors().skip(1).find(|a| a.is_file()).unwrap_or(path);
            Err(refused(path, &format!("{} is a file, not a directory", file.display()), "give --store a path"))
        }
        Err(e) => Err(refused(path, &lockstep_core::error::io_reason(&e), "give --store a store this user can read")),
    }
}

/// SQLite says "unable to open database file" for a file it may not open: say why. Asked of the kernel without
/// opening the file (see [`inspect`]).
fn readable(path: &Path) -> Result<(), UsageError> {
    let path_c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| refused(path, "a path with a NUL byte", "give --store a path"))?;
    // SAFETY: a NUL-terminated path; faccessat only reads it.
    if unsafe { libc::faccessat(libc::AT_FDCWD, path_c.as_ptr(), libc::R_OK, libc::AT_EACCESS) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(refused(path, &lockstep_core::error::io_reason(&e), "run as its owner, or give --store"));
    }
    Ok(())
}

/// Reads the header and, for a store without lockstep's mark, the schema of the file at `path` (see
/// [`inspect`]), and refuses it unless it is a lockstep store this build can use: one with lockstep's mark and
/// at most this build's schema version, or one an older lockstep wrote before stores were marked (a schema
/// version from 1 to this build's, holding every table and index of that version, with their columns).
///
/// A database open in WAL mode somewhere (its `-wal` and `-shm` beside it: an agent's store) is read through
/// them, read-only, under SQLite's own locks: the file alone may be in the middle of a checkpoint, and the tables
/// of an older lockstep's store may still be in the WAL only. Any other file is read through a connection that
/// opens it read-only and `immutable` (no lock, no journal, no `-wal` or `-shm` file created), and that SQLite
/// keeps open until this process's other connections to the file release their locks, so closing it drops none
/// of theirs (a descriptor opened and closed outside SQLite would); should it be opened in WAL mode while it is
/// read, it is read again through the WAL.
fn header(path: &Path) -> Result<(), UsageError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let cannot =
        |e: rusqlite::Error| refused(path, &format!("cannot open it: {e}"), "give --store a store this user can read");
    let live = || sibling(path, "-wal").is_file() && sibling(path, "-shm").is_file();
    if !live() {
        let conn = Connection::open_with_flags(uri(path, "immutable=1"), flags | OpenFlags::SQLITE_OPEN_URI)
            .map_err(cannot)?;
        match judge(path, &conn) {
            Err(_) if live() => {}
            judged => return judged,
        }
    }
    let conn = Connection::open_with_flags(path, flags).map_err(cannot)?;
    conn.busy_timeout(OPEN_WAIT).map_err(cannot)?;
    judge(path, &conn)
}

/// The file whose name is `path`'s with `suffix` added (SQLite's `-wal`, `-shm`).
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Refuses the database of `conn`, the file at `path`, unless it is a lockstep store this build can use (see
/// [`header`]).
fn judge(path: &Path, conn: &Connection) -> Result<(), UsageError> {
    let read = |pragma: &str| conn.pragma_query_value(None, pragma, |r| r.get::<_, i64>(0));
    let (id, version) = match (read("application_id"), read("user_version")) {
        (Ok(id), Ok(version)) => (id, version),
        (Err(e), _) | (_, Err(e)) => {
            let why = if e.sqlite_error_code() == Some(ErrorCode::NotADatabase) {
                "not a SQLite file, so not a lockstep store".to_string()
            } else {
                format!("cannot read it: {e}")
            };
            return Err(refused(path, &why, NOT_OURS));
        }
    };
    let known = MIGRATIONS.len() as i64;
    if id == i64::from(APPLICATION_ID) {
        return newer(path, version, known);
    }
    let tables = tables(conn).map_err(|e| refused(path, &format!("cannot read its tables: {e}"), NOT_OURS))?;
    let foreign = || {
        let mut names: Vec<String> = tables.iter().take(5).map(|name| name.escape_debug().to_string()).collect();
        if tables.len() > 5 {
            names.push(format!("{} more", tables.len() - 5));
        }
        let listed = if names.is_empty() { "no tables".to_string() } else { format!("tables: {}", names.join(", ")) };
        refused(
            path,
            &format!("not a lockstep store (application_id {id}, user_version {version}, {listed})"),
            NOT_OURS,
        )
    };
    // Before the mark, a lockstep store was one whose schema version counted lockstep's migrations.
    if id != 0 || version < 1 {
        return Err(foreign());
    }
    if version > known {
        return if tables.iter().any(|name| name == "jobs") { newer(path, version, known) } else { Err(foreign()) };
    }
    let expected = shape(&migrated(usize::try_from(version).unwrap_or(0))?)
        .map_err(|e| UsageError::new(format!("cannot read the schema replayed in memory: {e}")))?;
    let found = shape(conn).map_err(|e| refused(path, &format!("cannot read its tables: {e}"), NOT_OURS))?;
    if expected.iter().all(|object| found.contains(object)) {
        Ok(())
    } else {
        Err(foreign())
    }
}

/// Refuses a store whose schema `version` is newer than the `known` one of this build.
fn newer(path: &Path, version: i64, known: i64) -> Result<(), UsageError> {
    if version > known {
        return Err(refused(
            path,
            &format!("written by a newer lockstep (schema version {version}, this build knows {known})"),
            "use that lockstep, or give --store another store",
        ));
    }
    Ok(())
}

/// The names of a database's tables.
fn tables(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt =
        conn.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")?;
    let rows = stmt.query_map([], |r| r.get(0))?;
    rows.collect()
}

/// A database's tables and indexes, as (kind, name, the table's column names): what a store of lockstep's must
/// hold, compared by name rather than by SQL text, which SQLite versions may write differently.
fn shape(conn: &Connection) -> rusqlite::Result<Vec<(String, String, Option<String>)>> {
    let mut stmt = conn.prepare(
        "SELECT m.type, m.name, (SELECT group_concat(c.name, ',') FROM pragma_table_info(m.name) c)
         FROM sqlite_schema m WHERE m.type IN ('table', 'index') AND m.name NOT LIKE 'sqlite_%'",
    )?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    rows.collect()
}

/// An in-memory database with the first `steps` migrations: a store of that schema version as lockstep made it.
fn migrated(steps: usize) -> Result<Connection, UsageError> {
    let replay = || {
        let conn = Connection::open_in_memory()?;
        for step in &MIGRATIONS[..steps.min(MIGRATIONS.len())] {
            conn.execute_batch(step)?;
        }
        Ok::<_, rusqlite::Error>(conn)
    };
    replay().map_err(|e| UsageError::new(format!("cannot replay the store's schema in memory: {e}")))
}

/// `path` as a SQLite `file:` URI with the query `query`: every byte but unreserved ones and `/` escaped, so that
/// no `?`, `#` or `%` in a path is read as URI syntax.
fn uri(path: &Path, query: &str) -> String {
    use std::fmt::Write;
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(char::from(b));
        } else {
            let _ = write!(uri, "%{b:02X}");
        }
    }
    uri.push('?');
    uri.push_str(query);
    uri
}

/// Stores this process has begun to make: with its PID, a temporary name no other thread or process uses.
static MADE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// The directory of the file at `path`.
fn directory(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Makes a new store at `path`, in a directory that must exist: whole under a temporary name beside it, then
/// linked to `path` (see [`Store::open`]). Another process that made the store meanwhile wins: its store is
/// checked and used.
fn create(path: &Path) -> crate::error::Result<()> {
    let dir = directory(path);
    let Some(name) = path.file_name() else {
        return Err(refused(path, "not a file name", "give --store a path to a file").into());
    };
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            return Err(refused(
                path,
                &format!("{} is not a directory", dir.display()),
                "give --store a path in a directory",
            )
            .into())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && path == Path::new(DEFAULT_PATH) => {
            // lockstep's own state directory (systemd's `StateDirectory=` makes it for the agent's unit), made as
            // the agent makes it: 0700, in a chain of directories only root can change.
            lockstep_core::trust::ensure_dir(dir, 0o700, "store")?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(refused(
                path,
                &format!("no directory {}", dir.display()),
                "lockstep creates no directories: create it, or give --store a path in an existing one",
            )
            .into())
        }
        Err(e) => {
            return Err(refused(
                path,
                &format!("directory {}: {}", dir.display(), lockstep_core::error::io_reason(&e)),
                "give --store a path in a directory this user can write",
            )
            .into())
        }
    }
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    temp_name.push(format!(".{}.{n}.new", std::process::id()));
    let temp = dir.join(temp_name);
    let cannot = |e: &std::io::Error| {
        failed(path, &format!("cannot create it: {}", lockstep_core::error::io_reason(e)), system_io(e))
    };
    std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&temp).map_err(|e| cannot(&e))?;
    let made = build(&temp)
        .map_err(|e| {
            let system = matches!(
                e.sqlite_error_code(),
                Some(ErrorCode::DiskFull | ErrorCode::SystemIoFailure | ErrorCode::OutOfMemory)
            );
            failed(path, &format!("cannot create it: {e}"), system)
        })
        .and_then(|()| match place(&temp, path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(cannot(&e)),
        });
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let _ = std::fs::remove_file(sibling(&temp, suffix));
    }
    made?;
    // Made here or by another process: either way it must be a lockstep store now.
    if inspect(path)? {
        Ok(())
    } else {
        Err(refused(path, "removed while it was made", "try again").into())
    }
}

/// Whether `e` is a failure of the system (a full or failing disk, no memory or descriptors left), not something
/// wrong with the path given.
fn system_io(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSPC | libc::EDQUOT | libc::EIO | libc::ENOMEM | libc::EMFILE | libc::ENFILE)
    )
}

/// `store PATH: WHY`: a failure of the system (exit status 1) when `system`, else the usage error of a path that
/// cannot hold a store (exit status 2).
fn failed(path: &Path, why: &str, system: bool) -> Error {
    if system {
        Error::System { path: path.to_path_buf(), why: why.to_string() }
    } else {
        refused(path, why, "give --store a path in a directory this user can write").into()
    }
}

/// Puts the made store `temp` at `path` unless a file is there (`AlreadyExists`): a hard link, or, on a file
/// system that has none (`EPERM`, `EOPNOTSUPP`), a rename that replaces nothing (`RENAME_NOREPLACE`).
fn place(temp: &Path, path: &Path) -> std::io::Result<()> {
    match std::fs::hard_link(temp, path) {
        Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM | libc::EOPNOTSUPP)) => rename_noreplace(temp, path),
        linked => linked,
    }
}

/// `renameat2(temp, path, RENAME_NOREPLACE)`: `AlreadyExists` when a file is at `path`.
fn rename_noreplace(temp: &Path, path: &Path) -> std::io::Result<()> {
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_encoded_bytes())
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a path with a NUL byte"))
    };
    let (from, to) = (c(temp)?, c(path)?);
    // SAFETY: two NUL-terminated paths, only read.
    let rc =
        unsafe { libc::renameat2(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), libc::RENAME_NOREPLACE) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Makes the store at `temp` (an empty file): WAL mode, lockstep's mark, every migration; closed, so that SQLite
/// moves the WAL into the file and removes `-wal` and `-shm`.
fn build(temp: &Path) -> rusqlite::Result<()> {
    let mut conn = Connection::open_with_flags(
        temp,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX | NOFOLLOW,
    )?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    let tx = conn.transaction()?;
    for step in MIGRATIONS {
        tx.execute_batch(step)?;
    }
    tx.pragma_update(None, "user_version", MIGRATIONS.len())?;
    tx.pragma_update(None, "application_id", APPLICATION_ID)?;
    tx.commit()?;
    conn.close().map_err(|(_, e)| e)
}

/// Opens the lockstep store at `path` (checked by [`inspect`]) for reading and writing, never creating it; marks a
/// store an older lockstep wrote and runs the migrations it lacks. What changed between the check and this open
/// is checked again inside the write transaction, before anything is written.
fn connect(path: &Path) -> crate::error::Result<Store> {
    let mut conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX | NOFOLLOW,
    )
    .map_err(|e| refused(path, &format!("cannot open it: {e}"), "give --store a store this user can read"))?;
    conn.busy_timeout(OPEN_WAIT)?;
    // Several processes may open an older store at once (four `lockstep run` started together): the version is
    // read inside a write transaction, so that one of them migrates and the others find it done.
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let id: i64 = tx.pragma_query_value(None, "application_id", |r| r.get(0))?;
    let version: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
    // A file swapped in after `inspect`: another program's, or a blank one (every store lockstep makes is marked,
    // and an unmarked one of an older lockstep has a schema version of 1 or more).
    if (id != 0 && id != i64::from(APPLICATION_ID)) || (id == 0 && version == 0) {
        return Err(refused(
            path,
            &format!("not a lockstep store (application_id {id}, user_version {version})"),
            NOT_OURS,
        )
        .into());
    }
    newer(path, version, MIGRATIONS.len() as i64)?;
    for (i, step) in MIGRATIONS.iter().enumerate().skip(usize::try_from(version).unwrap_or(0)) {
        // A store whose tables are not what its version says fails here, in one line, rolled back.
        tx.execute_batch(step).map_err(|e| {
            refused(path, &format!("cannot bring it to this build's schema (step {}): {}", i + 1, brief(&e)), NOT_OURS)
        })?;
        tx.pragma_update(None, "user_version", i + 1)?;
    }
    if id == 0 {
        tx.pragma_update(None, "application_id", APPLICATION_ID)?;
    }
    tx.commit()?;
    // Only then WAL mode (a store lockstep made is in it already): a store refused above is left as it was.
    to_wal(&conn).map_err(|e| refused(path, &format!("cannot use it: {e}"), NOT_OURS))?;
    // In WAL mode NORMAL survives any crash of the process (not of the OS) without an fsync per commit; the
    // agent commits at every slot switch.
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // A placement names its job (`REFERENCES jobs(id)`): enforced, as rusqlite's bundled copy of SQLite did by
    // default when lockstep linked it; the system's leaves it off unless asked, per connection.
    conn.pragma_update(None, "foreign_keys", true)?;
    Ok(Store { conn })
}

/// Opens the lockstep store at `path` (checked by [`inspect`]) read-only; one that is not at this build's schema
/// with lockstep's mark is handed to [`connect`] to be migrated first.
fn read_only(path: &Path) -> crate::error::Result<Store> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | NOFOLLOW;
    let conn = Connection::open_with_flags(path, flags)
        .map_err(|e| refused(path, &format!("cannot open it: {e}"), "give --store a store this user can read"))?;
    conn.busy_timeout(OPEN_WAIT)?;
    let id: i64 = conn.pragma_query_value(None, "application_id", |r| r.get(0))?;
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if id == i64::from(APPLICATION_ID) && version == MIGRATIONS.len() as i64 {
        return Ok(Store { conn });
    }
    drop(conn);
    connect(path)
}

/// SQLite's own words for `e`, without the statement it was in (the SQL of a migration, many lines).
fn brief(e: &rusqlite::Error) -> String {
    match e {
        rusqlite::Error::SqliteFailure(_, Some(msg)) => msg.clone(),
        other => other.to_string().lines().next().unwrap_or_default().to_string(),
    }
}

/// Puts the store in WAL mode (a store lockstep made is in it already). Switching a store to WAL upgrades a
/// shared lock to an exclusive one; when another connection is upgrading too, SQLite answers "database is locked"
/// at once instead of calling the busy handler (waiting could deadlock), so of several processes opening a store
/// together one may fail: this retries that for up to [`OPEN_WAIT`].
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

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};

    use super::{Store, APPLICATION_ID};
    use crate::schema::MIGRATIONS;

    /// /proc/locks in one read(2), the smallest window for other threads' locks to move the listing.
    fn proc_locks() -> String {
        use std::io::Read;
        let mut buf = vec![0; 1 << 20];
        let n = std::fs::File::open("/proc/locks").unwrap().read(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    /// Every file under `dir` with its mode and bytes, to show that a refusal changed nothing.
    fn snapshot(dir: &Path) -> Vec<(PathBuf, u32, Vec<u8>)> {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let path = e.unwrap().path();
                let bytes = if path.is_file() { std::fs::read(&path).unwrap() } else { Vec::new() };
                (path.clone(), mode(&path), bytes)
            })
            .collect();
        files.sort();
        files
    }

    /// Checks that both ways of opening refuse `path` with a usage error of one line containing `needle`, and
    /// change nothing in its directory.
    fn refused(path: &Path, needle: &str) {
        let dir = path.parent().unwrap();
        let before = snapshot(dir);
        for (how, err) in [("open", Store::open(path).err()), ("open_existing", Store::open_existing(path).err())] {
            let err = err.unwrap_or_else(|| panic!("{how} {} was accepted", path.display()));
            assert!(lockstep_core::error::is_usage(&err), "{how}: {err:#}");
            let text = err.to_string();
            assert!(text.contains(needle) && !text.contains('\n'), "{how}: {text}");
            assert!(text.contains(&path.display().to_string()), "{how}: {text}");
        }
        assert!(before == snapshot(dir), "refusing {} changed {}", path.display(), dir.display());
    }

    fn pragma(path: &Path, name: &str) -> i64 {
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.pragma_query_value(None, name, |r| r.get(0)).unwrap()
    }

    #[test]
    fn a_new_store_is_made_whole_marked_and_its_owners_only() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let path = dir.path().join("lockstep.db");
        let store = Store::open(&path).unwrap();
        store.jobs(true).unwrap();
        assert_eq!(mode(&path), 0o600);
        for suffix in ["-wal", "-shm"] {
            let file = dir.path().join(format!("lockstep.db{suffix}"));
            assert!(!file.exists() || mode(&file) == 0o600, "{suffix}: {:o}", mode(&file));
        }
        drop(store);
        // Nothing but the store is left: the temporary file it was made in is gone.
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["lockstep.db"]);
        assert_eq!(pragma(&path, "application_id"), i64::from(APPLICATION_ID));
        assert_eq!(pragma(&path, "user_version"), MIGRATIONS.len() as i64);
        // A store of this user's that is wider than 0600 keeps its mode: lockstep changes no existing file's mode.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        drop(Store::open(&path).unwrap());
        assert_eq!(mode(&path), 0o640);
    }

    #[test]
    fn a_store_in_a_directory_that_does_not_exist_is_refused_and_no_directory_is_made() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let path = dir.path().join("new/dir/lockstep.db");
        for err in [Store::open(&path).err().unwrap(), Store::open_existing(&path).err().unwrap()] {
            assert!(lockstep_core::error::is_usage(&err), "{err:#}");
        }
        let err = Store::open(&path).err().unwrap().to_string();
        assert!(err.contains(&format!("no directory {}", dir.path().join("new/dir").display())), "{err}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn reading_a_store_that_is_not_there_creates_nothing() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let path = dir.path().join("lockstep.db");
        let err = Store::open_existing(&path).err().unwrap();
        assert!(lockstep_core::error::is_usage(&err), "{err:#}");
        assert!(err.to_string().contains(&format!("no store at {}", path.display())), "{err}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // A store that exists is read.
        drop(Store::open(&path).unwrap());
        assert!(Store::open_existing(&path).unwrap().jobs(true).unwrap().is_empty());
    }

    #[test]
    fn another_programs_sqlite_file_is_refused_byte_for_byte_unchanged() {
        let dir = lockstep_scratch::tempdir().unwrap();
        // One in rollback mode, one in WAL mode (closed), one with a `jobs` table of its own.
        for (name, wal, sql, version) in [
            ("plain.db", false, "CREATE TABLE foo (x); INSERT INTO foo VALUES (1);", 0),
            ("wal.db", true, "CREATE TABLE foo (x); INSERT INTO foo VALUES (1);", 0),
            ("jobs.db", false, "CREATE TABLE jobs (id INTEGER, what TEXT);", 0),
            ("versioned.db", false, "CREATE TABLE jobs (id INTEGER, what TEXT);", 3),
            ("other-id.db", false, "CREATE TABLE foo (x);", 0),
        ] {
            let path = dir.path().join(name);
            let conn = rusqlite::Connection::open(&path).unwrap();
            if wal {
                conn.pragma_update(None, "journal_mode", "WAL").unwrap();
            }
            conn.execute_batch(sql).unwrap();
            conn.pragma_update(None, "user_version", version).unwrap();
            if name == "other-id.db" {
                conn.pragma_update(None, "application_id", 7).unwrap();
            }
            drop(conn);
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            refused(&path, "not a lockstep store");
        }
        let err = Store::open(&dir.path().join("plain.db")).err().unwrap().to_string();
        assert!(err.contains("(application_id 0, user_version 0, tables: foo)"), "{err}");
        let err = Store::open(&dir.path().join("other-id.db")).err().unwrap().to_string();
        assert!(err.contains("application_id 7"), "{err}");
    }

    #[test]
    fn a_file_that_is_not_sqlite_or_is_empty_is_refused_unchanged() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let garbage = dir.path().join("garbage.db");
        std::fs::write(&garbage, "not a database\n".repeat(100)).unwrap();
        refused(&garbage, "not a SQLite file");
        let short = dir.path().join("short.db");
        std::fs::write(&short, "hi").unwrap();
        refused(&short, "not a SQLite file");
        let empty = dir.path().join("empty.db");
        std::fs::write(&empty, "").unwrap();
        refused(&empty, "an empty file");
    }

    #[test]
    fn a_store_of_a_newer_lockstep_is_refused_unchanged() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let path = dir.path().join("newer.db");
        drop(Store::open(&path).unwrap());
        let newer = MIGRATIONS.len() + 1;
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", newer).unwrap();
        drop(conn);
        refused(
            &path,
            &format!("written by a newer lockstep (schema version {newer}, this build knows {})", MIGRATIONS.len()),
        );
    }

    /// An older lockstep made a store as an empty file in WAL mode and migrated it in the WAL: while it is open
    /// there, the file alone holds no table, and the store is read through its WAL.
    #[test]
    fn an_older_lockstep_store_still_in_its_wal_is_accepted() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let path = dir.path().join("old.db");
        std::fs::write(&path, b"").unwrap();
        let old = rusqlite::Connection::open(&path).unwrap();
        old.pragma_update(None, "journal_mode", "WAL").unwrap();
        for step in &MIGRATIONS[..3] {
            old.execute_batch(step).unwrap();
        }
        old.pragma_update(None, "user_version", 3).unwrap();
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI;
        let file_alone = rusqlite::Connection::open_with_flags(super::uri(&path, "immutable=1"), flags).unwrap();
        let version: i64 = file_alone.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
        let tables = super::tables(&file_alone).unwrap();
        assert!(version == 0 && tables.is_empty(), "the file alone already holds the schema ({version}, {tables:?})");
        drop(file_alone);
        let store = Store::open(&path).unwrap();
        assert_eq!(store.jobs(true).unwrap().len(), 0);
        drop(store);
        drop(old);
        assert_eq!(pragma(&path, "application_id"), i64::from(APPLICATION_ID));
        // Another program's empty WAL database, open with its files beside it, is still refused.
        let other = dir.path().join("other.db");
        let theirs = rusqlite::Connection::open(&other).unwrap();
        theirs.pragma_update(None, "journal_mode", "WAL").unwrap();
        theirs.execute_batch("CREATE TABLE notes (t TEXT)").unwrap();
        let err = Store::open(&other).err().unwrap().to_string();
        assert!(err.contains("not a lockstep store (application_id 0, user_version 0, tables: notes)"), "{err}");
        drop(theirs);
    }

    /// A marked store whose tables are not what its version says (a table of a later step made by hand) is
    /// refused in one line when its migration fails, and left as it was.
    #[test]
    fn a_marked_store_whose_tables_clash_with_a_migration_is_refused_in_one_line() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let path = dir.path().join("clash.db");
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(MIGRATIONS[0]).unwrap();
        conn.execute_batch("CREATE TABLE restore_journal (x)").unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        conn.pragma_update(None, "application_id", APPLICATION_ID).unwrap();
        drop(conn);
        refused(&path, "cannot bring it to this build's schema (step 2): table restore_journal already exists");
    }

    #[test]
    fn a_store_path_that_is_not_a_file_is_a_usage_error_and_creates_nothing() {
        let err = Store::open(std::path::Path::new("/dev/null")).err().unwrap();
        assert!(lockstep_core::error::is_usage(&err), "{err}");
        assert!(err.to_string().contains("not a regular file"), "{err}");
        let dir = lockstep_scratch::tempdir().unwrap();
        let err = Store::open(dir.path()).err().unwrap();
        assert!(lockstep_core::error::is_usage(&err), "{err}");
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

    /// A blank SQLite file (no mark, schema version 0) swapped in after the check is refused when opened, not
    /// migrated and marked as lockstep's; a symbolic link at the path is not followed.
    #[test]
    fn a_blank_file_or_a_link_swapped_in_after_the_check_is_refused() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let path = dir.path().join("blank.db");
        rusqlite::Connection::open(&path).unwrap().execute_batch("CREATE TABLE notes (t TEXT)").unwrap();
        let before = std::fs::read(&path).unwrap();
        let err = super::connect(&path).err().unwrap();
        assert!(lockstep_core::error::is_usage(&err), "{err:#}");
        assert!(err.to_string().contains("not a lockstep store (application_id 0, user_version 0)"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), before);
        let store = dir.path().join("lockstep.db");
        drop(Store::open(&store).unwrap());
        let link = dir.path().join("link.db");
        std::os::unix::fs::symlink(&store, &link).unwrap();
        assert!(super::connect(&link).is_err(), "connect followed a symbolic link");
        assert!(super::read_only(&link).is_err(), "read_only followed a symbolic link");
        assert!(super::header(&link).is_err(), "header followed a symbolic link");
    }

    /// A reader takes no write lock: it reads while another connection holds one (the agent's, mid-write), and
    /// cannot write itself.
    #[test]
    fn reading_a_store_takes_no_write_lock() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let path = dir.path().join("lockstep.db");
        let writer = Store::open(&path).unwrap();
        writer.conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        let start = std::time::Instant::now();
        let reader = Store::open_existing(&path).unwrap();
        assert!(reader.jobs(true).unwrap().is_empty());
        assert!(start.elapsed() < std::time::Duration::from_secs(5), "the reader waited for the writer's lock");
        assert!(reader.conn.execute_batch("CREATE TABLE x (y)").is_err(), "a reader could write");
        writer.conn.execute_batch("COMMIT").unwrap();
        // A store to write to that must exist: read-write.
        Store::open_existing_to_write(&path).unwrap().conn.execute_batch("CREATE TABLE x (y)").unwrap();
    }

    /// A full or failing disk is the system's failure (exit status 1), a path this user may not write is a usage
    /// error (exit status 2).
    #[test]
    fn a_full_disk_is_a_failure_of_the_system_not_bad_input() {
        let path = Path::new("/x/lockstep.db");
        for errno in [libc::ENOSPC, libc::EIO, libc::EDQUOT] {
            let e = std::io::Error::from_raw_os_error(errno);
            assert!(
                !lockstep_core::error::is_usage(&super::failed(path, "cannot create it", super::system_io(&e))),
                "{e}"
            );
        }
        let e = std::io::Error::from_raw_os_error(libc::EACCES);
        assert!(lockstep_core::error::is_usage(&super::failed(path, "cannot create it", super::system_io(&e))));
    }

    /// Where there are no hard links, the made store is renamed in place, never over a file that is there.
    #[test]
    fn the_made_store_is_renamed_in_place_replacing_nothing() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let (temp, path) = (dir.path().join(".new"), dir.path().join("lockstep.db"));
        std::fs::write(&temp, b"made").unwrap();
        std::fs::write(&path, b"theirs").unwrap();
        let err = super::rename_noreplace(&temp, &path).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists, "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), b"theirs");
        std::fs::remove_file(&path).unwrap();
        super::rename_noreplace(&temp, &path).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"made");
        assert!(!temp.exists());
    }

    /// A store another process writes and checkpoints all the while (the agent at every slot switch) is read as
    /// a lockstep store on every try: the check never reads the file in the middle of a checkpoint.
    #[test]
    fn a_store_written_and_checkpointed_meanwhile_is_always_accepted() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let path = dir.path().join("busy.db");
        drop(Store::open(&path).unwrap());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (path, stop) = (path.clone(), stop.clone());
            std::thread::spawn(move || {
                let conn = rusqlite::Connection::open(&path).unwrap();
                conn.execute_batch("CREATE TABLE IF NOT EXISTS churn (x BLOB)").unwrap();
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    conn.execute("INSERT INTO churn VALUES (randomblob(3000))", []).unwrap();
                    conn.execute("DELETE FROM churn WHERE rowid % 3 = 0", []).unwrap();
                    n += 1;
                    if n.is_multiple_of(10) {
                        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).unwrap();
                    }
                }
                n
            })
        };
        let mut failures = Vec::new();
        for _ in 0..3000 {
            if let Err(e) = super::inspect(&path) {
                failures.push(e.to_string());
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let rounds = writer.join().unwrap();
        assert!(
            failures.is_empty(),
            "{} of 3000 checks failed while {rounds} rounds of writes ran: {:?}",
            failures.len(),
            &failures[..failures.len().min(3)]
        );
    }
}
