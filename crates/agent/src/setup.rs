//! The agent's start and end: everything that can refuse the start is tried before the socket exists; then the
//! watchdog, the sampling thread, the daemon and the threads that feed it; at the end, every job restored.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{SigSet, Signal};

use crate::command::{Command, Mailbox};
use crate::daemon::{Daemon, Start};
use crate::journal::{self, Journal};
use crate::notices::Notices;
use crate::slurm::config::SlurmConfig;
use crate::watchdog::Watchdog;
use crate::{dcs, doors, http, sampler, server};
use lockstep_core::cosched::PolicySpec;
use lockstep_store::Store;

/// How the agent starts.
#[derive(Clone, Debug)]
pub struct Config {
    /// Unix socket to serve.
    pub socket: PathBuf,
    /// Store path.
    pub store: PathBuf,
    /// Node name (decisions and status carry it).
    pub node: lockstep_core::ident::NodeName,
    /// Initial policy.
    pub policy: PolicySpec,
    /// Initial slot length.
    pub slot: Duration,
    /// What every job is counted with.
    pub telemetry: sampler::Settings,
    /// Where to serve `/metrics` over HTTP, if anywhere.
    pub metrics: Option<std::net::SocketAddr>,
    /// The scrapers named for the metrics door (root's always is one): they count apart from other callers.
    pub scrapers: doors::Scrapers,
    /// This node's name in Slurm (`slurm_<name>` in Slurm's cgroup paths).
    pub slurm_node: lockstep_core::ident::NodeName,
    /// How `dcs` runs.
    pub dcs: dcs::engine::Settings,
}

/// How long the agent's start (the repair of what a previous agent left changed) may wait for a lock another
/// process holds (the default wait is 10 s). The daemon's loop, which is handed the same connection, waits for
/// none: `Daemon::new` takes the wait away.
const STORE_BUSY: Duration = Duration::from_millis(200);

/// The test seam for wall-clock steps, `LOCKSTEP_CLOCK_SKEW_FILE`, if it names a file in directories only root
/// (or the agent's user) can change: one that another user could write or replace is refused, once, at start.
fn clock_skew_file() -> Option<PathBuf> {
    let file = PathBuf::from(std::env::var_os("LOCKSTEP_CLOCK_SKEW_FILE")?);
    match lockstep_core::trust::check_path(&file, "LOCKSTEP_CLOCK_SKEW_FILE") {
        Ok(()) => Some(file),
        Err(e) => {
            log::warn!("{e}");
            None
        }
    }
}

/// What the agent makes sure of before it serves: its descriptors, and a store no other user can plant or swap
/// (it holds the restore journal, which the agent replays as root).
fn prepare(config: &Config) -> anyhow::Result<()> {
    crate::privileges::warn_missing();
    raise_open_files();
    if let Some(dir) = config.store.parent().filter(|d| !d.as_os_str().is_empty()) {
        lockstep_core::trust::ensure_dir(dir, 0o700, "the store directory")?;
    }
    Ok(())
}

/// Takes the store at `path` for this agent's whole life (`false`: there is no regular file there yet, and
/// [`Store::open`] makes it or says what is wrong, without opening anything else at the path). The lock is an
/// `flock` on the store file: it belongs to a descriptor that is never closed, so it ends only with the process
/// (a crash, a SIGKILL included), and it is separate from SQLite's own POSIX locks on the file, which closing any
/// other descriptor of it would drop. An agent holding it already is a usage error naming its PID; so is a store
/// (or its `-wal` or `-shm`, even with no store yet) that is not private to the agent's user (see [`private`]),
/// checked before it is opened.
fn hold(path: &Path) -> anyhow::Result<bool> {
    use std::os::fd::{AsRawFd, IntoRawFd};
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    // SQLite reads a `-wal` beside the store into it: one planted before the store exists counts as much.
    for suffix in ["-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let sibling = PathBuf::from(name);
        if let Ok(meta) = std::fs::symlink_metadata(&sibling) {
            if !meta.is_file() {
                return Err(lockstep_core::error::UsageError::new(format!(
                    "store {}: {} is not a regular file (remove it, or give --store another store)",
                    path.display(),
                    sibling.display()
                ))
                .into());
            }
            private(&sibling, &meta)?;
        }
    }
    let Ok(seen) = std::fs::symlink_metadata(path) else { return Ok(false) };
    if !seen.is_file() {
        return Ok(false);
    }
    private(path, &seen)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            anyhow::anyhow!("cannot open store {}: {}", path.display(), lockstep_core::error::io_reason(&e))
        })?;
    let meta = file.metadata()?;
    if (meta.dev(), meta.ino()) != (seen.dev(), seen.ino()) {
        anyhow::bail!("store {} was replaced as the agent started", path.display());
    }
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
            anyhow::bail!("cannot lock store {}: {e}", path.display());
        }
        let who = holder(meta.dev(), meta.ino())
            .map_or_else(|| "another agent".to_string(), |pid| format!("the agent of PID {pid}"));
        return Err(lockstep_core::error::UsageError::new(format!(
            "store {}: in use by {who} (one agent per store: stop that one, or give --store another store)",
            path.display()
        ))
        .into());
    }
    // Never closed: the lock lasts as long as the process.
    let _ = file.into_raw_fd();
    Ok(true)
}

/// Refuses the store file at `path` (or its `-wal` or `-shm`), of metadata `meta`, unless only the agent's user
/// can change or read it: owned by the agent's effective user, one link, no permission for group or others. The
/// agent replays the store's restore journal as root (writing each row's value to its file), so a store another
/// user planted (at a path in a sticky directory such as /tmp) or may write, or a hard link to one, would let
/// that user make root write any file; and job command lines, which may hold secrets, are in it. No existing
/// file's mode is changed: the hint says how.
fn private(path: &Path, meta: &std::fs::Metadata) -> Result<(), lockstep_core::error::UsageError> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    let mode = meta.mode() & 0o7777;
    let (why, hint) = if meta.uid() != euid {
        (
            format!("owned by UID {}, not by the agent's user (UID {euid})", meta.uid()),
            "give --store a store the agent made, or a path where there is no file yet".to_string(),
        )
    } else if meta.nlink() != 1 {
        (
            format!("has {} hard links, not 1", meta.nlink()),
            "give --store a store the agent made, or a path where there is no file yet".to_string(),
        )
    } else if mode & 0o077 != 0 {
        (
            format!("mode {mode:o}: other users may read or write it, and the agent replays it as root"),
            format!("chmod 600 {}", path.display()),
        )
    } else {
        return Ok(());
    };
    Err(lockstep_core::error::UsageError::new(format!("store {}: {why} ({hint})", path.display())))
}

/// The PID holding an `flock` on the file of device `dev` and inode `ino`, as `/proc/locks` lists it
/// (`1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF`: major and minor in hex, the inode in decimal).
fn holder(dev: u64, ino: u64) -> Option<i32> {
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let id = format!("{:02x}:{:02x}:{ino}", libc::major(dev), libc::minor(dev));
    locks.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() > 5 && f[1] == "FLOCK" && f[5] == id).then(|| f[4].parse().ok())?
    })
}

/// Raises the agent's limit of open descriptors to the hard limit: every job's counters and cgroup files take
/// some, and the descriptors that undo a change are opened when the change is made, so the agent must not be the
/// first process on the node to run out. Said when it cannot.
fn raise_open_files() {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit with a valid rlimit.
    let raised = unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) == 0 && {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &raw const limit) == 0
        }
    };
    if !raised {
        log::warn!("cannot raise the open-file limit: {}", std::io::Error::last_os_error());
    }
}

/// Serves /metrics, the counters API and the controller's `notices` on the bound `listener`; says where, and
/// warns when that is reachable from the network.
fn serve_metrics(
    doors: &doors::Doors,
    listener: std::net::TcpListener,
    scrapers: doors::Scrapers,
    telemetry: &sampler::Sampler,
    store: &Path,
    notices: Arc<Notices>,
    board: crate::daemon::Board,
) -> anyhow::Result<()> {
    let handler = http::handler(telemetry.clone(), board, store.to_path_buf(), notices, scrapers.clone());
    let bound = doors.tcp(listener, doors::METRICS, scrapers, handler)?;
    log::info!("metrics on http://{bound}/metrics");
    if !bound.ip().is_loopback() {
        log::warn!(
            "{bound} is reachable from the network: every job's name and counts are readable \
             there (firewall the port to the controller, whose hooks tell places there, the Prometheus server and \
             the login nodes; or bind 127.0.0.1 and scrape through a proxy)"
        );
    }
    Ok(())
}

/// Takes the signals the agent blocked: SIGINT and SIGTERM stop it (its jobs restored); SIGHUP reads the
/// configuration again, on a thread of its own (one at a time: a file on a hung file system must not keep a stop
/// from being taken), see [`reload`].
fn wait_for_signals(signals: &SigSet, mailbox: &Mailbox, running: Config, reload: Reload) {
    let state = Arc::new((Mutex::new(running), reload, std::sync::atomic::AtomicBool::new(false)));
    while let Ok(Signal::SIGHUP) = signals.wait() {
        if state.2.swap(true, std::sync::atomic::Ordering::AcqRel) {
            log::warn!("SIGHUP: the configuration is being read again already");
            continue;
        }
        let (state, mailbox) = (state.clone(), mailbox.clone());
        let spawned = std::thread::Builder::new().name("lockstep-reload".into()).spawn(move || {
            let mut running = state.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            reload_config(&mut running, &state.1, &mailbox);
            state.2.store(false, std::sync::atomic::Ordering::Release);
        });
        if let Err(e) = spawned {
            log::warn!("SIGHUP: cannot read the configuration again: {e}");
        }
    }
    mailbox.tell(Command::Stop);
}

/// Reads the configuration again with `reload`: when the policy or slot it gives differ from those it gave
/// before (`running`), the daemon takes them (so a reload for another change leaves a `lockstep policy set` in
/// force); what else changed is said to take a restart. A configuration that does not read is said, and the
/// running one kept.
fn reload_config(running: &mut Config, reload: &Reload, mailbox: &Mailbox) {
    let new = match reload() {
        Ok(new) => new,
        Err(e) => {
            log::warn!("configuration not read again, the running one kept: {e:#}");
            return;
        }
    };
    let restart = [
        ("socket", running.socket != new.socket),
        ("store", running.store != new.store),
        ("node", running.node != new.node),
        ("slurm_node", running.slurm_node != new.slurm_node),
        ("metrics", running.metrics != new.metrics),
        ("events, sample_interval, retention or job_history", running.telemetry != new.telemetry),
        ("metrics_scraper", running.scrapers != new.scrapers),
        ("dcs_quantum or btf", running.dcs != new.dcs),
    ];
    let changed: Vec<&str> = restart.iter().filter(|(_, c)| *c).map(|(name, _)| *name).collect();
    if !changed.is_empty() {
        log::warn!(
            "configuration read again: {} changed, which takes a restart (systemctl restart lockstep-agent)",
            changed.join(", ")
        );
    }
    if (new.policy, new.slot) == (running.policy, running.slot) {
        log::info!("configuration read again: policy and slot as before");
        return;
    }
    mailbox.tell(Command::Reload { policy: new.policy, slot: new.slot });
    running.policy = new.policy;
    running.slot = new.slot;
}

/// Reads the configuration again, as at the start (the flags given then, over the file as it is now).
pub type Reload = Box<dyn Fn() -> anyhow::Result<Config> + Send + Sync>;

/// Runs the agent in the foreground until SIGINT or SIGTERM; returns the exit status. At SIGHUP the
/// configuration is read again with `reload`: a new policy or slot length takes effect at once; a configuration
/// that does not read keeps the running one, and the log says why.
pub fn run(config: Config, reload: Reload) -> anyhow::Result<i32> {
    crate::logging::init("lockstep agent");
    let backend = lockstep_cgroup::detect()?;
    server::check(&config.socket)?;
    // The metrics port first: it makes no file, and a refusal there must leave no store or directory behind.
    let metrics = config.metrics.map(http::bind).transpose()?;
    prepare(&config)?;
    // One agent per store, decided before anything is touched: a second one, even on another socket, would
    // journal, plan and restore beside the first.
    let held = hold(&config.store)?;
    // A client or scraper that hangs up mid-answer is an EPIPE error for that connection, never a signal.
    // SAFETY: ignoring a signal installs no handler code.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    // From the moment the socket answers, SIGINT/SIGTERM must mean "restore and exit", never a plain death:
    // block them now; the waiter thread takes them.
    let mut signals = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        signals.add(s);
    }
    signals.thread_block()?;
    // The socket before the store is made: a start refused from here on drops `socket`, which removes it, and
    // leaves no new store behind.
    let (listener, socket) = server::bind(&config.socket)?;
    let store = Store::open(&config.store)?;
    // A store this agent made just now is held from here (another agent that made it meanwhile holds it first).
    if !held && !hold(&config.store)? {
        anyhow::bail!("store {} was removed as the agent started", config.store.display());
    }
    store.set_busy_timeout(STORE_BUSY)?;
    // The watchdog before any change: from now on, every change is journaled before it is made.
    let watchdog = Watchdog::spawn(&config.store)?;
    let (telemetry, sampling) =
        sampler::spawn(config.telemetry.clone(), &config.node, config.dcs.btf.as_deref(), &config.store)?;
    let repaired = journal::repair(&store)?;
    if repaired > 0 {
        log::info!("restored {repaired} cgroup file(s) left changed by a previous agent");
    }

    let (version, roots) = (backend.version(), backend.roots());
    let (mailbox, inbox) = crate::command::mailbox();
    let writer = crate::writer::Writer::spawn(&config.store, config.node.clone(), mailbox.map(Command::Stored))?;
    let start = Start {
        policy: config.policy,
        slot: config.slot,
        node: config.node.clone(),
        slurm_node: config.slurm_node.clone(),
        journal: Journal::new(watchdog, config.store.clone()),
        store,
        writer,
        backend,
        telemetry: telemetry.counting(),
        dcs: config.dcs.clone(),
        clock_skew_file: clock_skew_file(),
    };
    let mut daemon = Daemon::new(start, mailbox.clone(), inbox)?;
    {
        let mailbox = mailbox.clone();
        let running = config.clone();
        std::thread::spawn(move || wait_for_signals(&signals, &mailbox, running, reload));
    }
    // The doors run at normal priority: what they do is a user's, a scraper's or root's request, never a slot
    // switch, and they read the daemon's status from its board rather than wait on its loop.
    let doors = doors::Doors::new()?;
    doors.unix(listener, doors::CONTROL, server::handler(mailbox.clone(), telemetry.clone(), daemon.board()))?;
    // With the metrics door open to other hosts, the controller's hooks tell this node its Slurm jobs' places;
    // without it (or on loopback alone) the discovery thread asks slurmctld.
    let told = metrics.as_ref().and_then(|l| l.local_addr().ok()).is_some_and(|a| !a.ip().is_loopback());
    let slurm_config = Arc::new(SlurmConfig::new());
    if let Some(metrics) = metrics {
        let notices =
            Arc::new(Notices::new(config.slurm_node.clone(), mailbox.map(Command::Slurm), slurm_config.clone()));
        serve_metrics(&doors, metrics, config.scrapers.clone(), &telemetry, &config.store, notices, daemon.board())?;
    }
    crate::slurm::feed::spawn(
        mailbox.map(Command::Slurm),
        version,
        roots,
        config.slurm_node.clone(),
        told,
        slurm_config,
    );
    log::info!(
        "node {} serving {} (store {}, policy {}, slot {})",
        config.node,
        config.socket.display(),
        config.store.display(),
        config.policy,
        lockstep_core::duration::format(config.slot)
    );
    daemon.run();
    let left = daemon.restore_all();
    // Commands still in the inbox go unanswered: their threads end.
    drop(daemon);
    telemetry.stop(sampling);
    drop(socket);
    if left.is_empty() {
        log::info!("stopped; every job restored");
        return Ok(0);
    }
    // The watchdog, whose pipe closes as the agent exits, tries them again.
    log::error!("stopped; {} job(s) not restored: {}", left.len(), left.join("; "));
    Ok(1)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::{hold, holder, private};

    /// The store's metadata, as [`hold`] sees it before opening.
    fn meta(path: &std::path::Path) -> std::fs::Metadata {
        std::fs::symlink_metadata(path).unwrap()
    }

    /// A store another user owns, one with a second name, or one others may read or write is refused, in one
    /// line naming it; one only the agent's user may touch is not. (Root's tests: the owner is nobody.)
    #[test]
    fn a_store_others_own_link_read_or_write_is_refused() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let path = dir.path().join("s.db");
        std::fs::write(&path, b"x").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        private(&path, &meta(&path)).unwrap();
        for mode in [0o644, 0o620, 0o602, 0o640] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = private(&path, &meta(&path)).unwrap_err().to_string();
            assert!(err.contains(&format!("(chmod 600 {})", path.display())) && !err.contains('\n'), "{err}");
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.path().join("link.db");
        std::fs::hard_link(&path, &link).unwrap();
        let err = private(&path, &meta(&path)).unwrap_err().to_string();
        assert!(err.contains("has 2 hard links"), "{err}");
        std::fs::remove_file(&link).unwrap();
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
            let err = private(&path, &meta(&path)).unwrap_err().to_string();
            assert!(err.contains("owned by UID 65534, not by the agent's user (UID 0)"), "{err}");
            let err = hold(&path).unwrap_err().to_string();
            assert!(err.contains("owned by UID 65534"), "{err}");
            // A `-wal` planted where the store is yet to be made: SQLite would read it into the new store.
            let planted = dir.path().join("new.db-wal");
            std::fs::write(&planted, b"").unwrap();
            std::os::unix::fs::chown(&planted, Some(65534), Some(65534)).unwrap();
            let err = hold(&dir.path().join("new.db")).unwrap_err().to_string();
            assert!(err.contains("new.db-wal: owned by UID 65534"), "{err}");
        }
    }

    /// A FIFO at the store's path is never opened (opening one for reading could block, a device's could act):
    /// [`hold`] leaves it to the store, which refuses what is not a regular file.
    #[test]
    fn a_store_path_that_is_not_a_regular_file_is_not_opened() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let fifo = dir.path().join("s.db");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert!(!hold(&fifo).unwrap());
        let wal = dir.path().join("t.db-wal");
        nix::unistd::mkfifo(&wal, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let store = dir.path().join("t.db");
        std::fs::write(&store, b"x").unwrap();
        std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o600)).unwrap();
        let err = hold(&store).unwrap_err().to_string();
        assert!(err.contains("t.db-wal is not a regular file"), "{err}");
    }

    /// The holder of a store's lock is found by device and inode, as /proc/locks lists them.
    #[test]
    fn the_holder_of_a_lock_is_found_by_device_and_inode() {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        let dir = lockstep_scratch::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let file = std::fs::File::create(&path).unwrap();
        // SAFETY: flock on a descriptor this test owns.
        assert_eq!(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }, 0);
        let m = file.metadata().unwrap();
        let me = i32::try_from(std::process::id()).unwrap();
        assert_eq!(holder(m.dev(), m.ino()), Some(me), "{}", std::fs::read_to_string("/proc/locks").unwrap());
        // The same inode on another device is another file.
        assert_eq!(holder(m.dev() ^ 1, m.ino()), None);
    }
}
