//! The agent's start and end: everything that can refuse the start is tried before the socket exists; then the
//! watchdog, the sampling thread, the daemon and the threads that feed it; at the end, every job restored.

use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::{SigSet, Signal};

use crate::command::{Command, Mailbox};
use crate::daemon::{Daemon, Start};
use crate::journal::{self, Journal};
use crate::watchdog::Watchdog;
use crate::{dcs, doors, feeders, http, realtime, sampler, server};
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
    pub node: String,
    /// Initial policy.
    pub policy: PolicySpec,
    /// Initial slot length.
    pub slot: Duration,
    /// What every job is counted with.
    pub telemetry: sampler::Settings,
    /// Where to serve `/metrics` over HTTP, if anywhere.
    pub metrics: Option<std::net::SocketAddr>,
    /// This node's name in Slurm (`slurm_<name>` in Slurm's cgroup paths).
    pub slurm_node: String,
    /// How `dcs` runs.
    pub dcs: dcs::engine::Settings,
}

/// How long a store write of the agent's may wait for a lock another process holds: the daemon's loop makes them,
/// and must not stall behind a `sqlite3` session (the default wait is 10 s).
const STORE_BUSY: Duration = Duration::from_millis(200);

/// The test seam for wall-clock steps, `LOCKSTEP_CLOCK_SKEW_FILE`, if it names a file in directories only root
/// (or the agent's user) can change: one that another user could write or replace is refused, once, at start.
fn clock_skew_file() -> Option<PathBuf> {
    let file = PathBuf::from(std::env::var_os("LOCKSTEP_CLOCK_SKEW_FILE")?);
    match lockstep_core::trust::check_path(&file, "LOCKSTEP_CLOCK_SKEW_FILE") {
        Ok(()) => Some(file),
        Err(e) => {
            crate::log::warning!("{e}");
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
/// [`Store::open`] makes it or says what is wrong). The lock is an `flock` on the store file: it belongs to a
/// descriptor that is never closed, so it ends only with the process (a crash, a SIGKILL included), and it is
/// separate from SQLite's own POSIX locks on the file, which closing any other descriptor of it would drop. An
/// agent holding it already is a usage error naming its PID.
fn hold(path: &Path) -> anyhow::Result<bool> {
    use std::os::fd::{AsRawFd, IntoRawFd};
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
    else {
        return Ok(false);
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Ok(false);
    }
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
            anyhow::bail!("cannot lock store {}: {e}", path.display());
        }
        let who =
            holder(meta.ino()).map_or_else(|| "another agent".to_string(), |pid| format!("the agent of PID {pid}"));
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

/// The PID holding an `flock` on the file of inode `ino`, as `/proc/locks` lists it
/// (`1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF`).
fn holder(ino: u64) -> Option<i32> {
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let ino = ino.to_string();
    locks.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() > 5 && f[1] == "FLOCK" && f[5].rsplit(':').next() == Some(ino.as_str())).then(|| f[4].parse().ok())?
    })
}

/// Says so when other users may read the store (an older build made it so, or an admin): the agent changes no
/// existing file's mode, and job command lines may hold secrets.
fn warn_if_open(store: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(store) else { return };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        crate::log::warning!(
            "store {} has mode {mode:o}: other users may read job command lines (chmod 600 it and its -wal and -shm)",
            store.display()
        );
    }
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
        crate::log::warning!("cannot raise the open-file limit: {}", std::io::Error::last_os_error());
    }
}

/// Serves /metrics and the counters API on the bound `listener`; says where, and warns when that is reachable
/// from the network.
fn serve_metrics(
    doors: &doors::Doors,
    listener: std::net::TcpListener,
    telemetry: &sampler::SharedTelemetry,
    store: &Path,
) -> anyhow::Result<()> {
    let bound = doors.tcp(listener, doors::METRICS, http::handler(telemetry.clone(), store.to_path_buf()))?;
    crate::log::info!("metrics on http://{bound}/metrics");
    if !bound.ip().is_loopback() {
        crate::log::warning!(
            "{bound} is reachable from the network: every job's name and counts are readable \
             there (bind 127.0.0.1 and scrape through a proxy, or firewall the port)"
        );
    }
    Ok(())
}

/// Runs the agent in the foreground until SIGINT or SIGTERM; returns the exit status.
pub fn run(config: Config) -> anyhow::Result<i32> {
    let backend = lockstep_cgroup::detect()?;
    server::check(&config.socket)?;
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
    // Everything that can refuse the start is tried before the socket exists: a refused start leaves nothing.
    let store = Store::open(&config.store)?;
    // A store this agent made just now is held from here (another agent that made it meanwhile holds it first).
    if !held && !hold(&config.store)? {
        anyhow::bail!("store {} was removed as the agent started", config.store.display());
    }
    warn_if_open(&config.store);
    store.set_busy_timeout(STORE_BUSY)?;
    let metrics = config.metrics.map(http::bind).transpose()?;
    let (listener, socket) = server::bind(&config.socket)?;
    // The watchdog before any change: from now on, every change is journaled before it is made.
    let watchdog = Watchdog::spawn(&config.store)?;
    let telemetry = sampler::Telemetry::shared(config.telemetry.clone(), &config.node, config.dcs.btf.as_deref());
    let sampling = sampler::spawn(telemetry.clone(), config.store.clone())?;
    let repaired = journal::repair(&store)?;
    if repaired > 0 {
        crate::log::info!("restored {repaired} cgroup file(s) left changed by a previous agent");
    }

    let (version, roots) = (backend.version(), backend.roots());
    let start = Start {
        policy: config.policy,
        slot: config.slot,
        node: config.node.clone(),
        slurm_node: config.slurm_node.clone(),
        journal: Journal::new(watchdog, config.store.clone()),
        store,
        backend,
        telemetry: telemetry.clone(),
        dcs: config.dcs.clone(),
        clock_skew_file: clock_skew_file(),
    };
    let (mailbox, inbox) = Mailbox::new();
    let mut daemon = Daemon::new(start, mailbox.clone(), inbox)?;
    {
        let mailbox = mailbox.clone();
        std::thread::spawn(move || {
            let _ = signals.wait();
            mailbox.tell(Command::Stop);
        });
    }
    // The doors' threads come and go with the load: say it once if they cannot be real-time.
    let said = std::sync::Once::new();
    let doors = doors::Doors::new(move || {
        if let Err(e) = realtime::try_thread() {
            said.call_once(|| {
                crate::log::warning!("cannot use SCHED_FIFO for the control socket ({e})");
            });
        }
    })?;
    doors.unix(listener, doors::CONTROL, server::handler(mailbox.clone(), telemetry.clone()))?;
    feeders::slurm::spawn(mailbox, version, roots, config.slurm_node.clone());
    if let Some(metrics) = metrics {
        serve_metrics(&doors, metrics, &telemetry, &config.store)?;
    }
    crate::log::info!(
        "node {} serving {} (store {}, policy {}, slot {})",
        config.node,
        config.socket.display(),
        config.store.display(),
        config.policy,
        lockstep_core::duration::format(config.slot)
    );
    daemon.run();
    daemon.restore_all();
    // Commands still in the inbox go unanswered: their threads end.
    drop(daemon);
    sampler::stop(&telemetry, sampling);
    drop(socket);
    crate::log::info!("stopped; every job restored");
    Ok(0)
}
