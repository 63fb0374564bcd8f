//! Taking down what an experiment started when `lockstep experiment run` is told to stop.
//!
//! What an experiment starts (the test Slurm cluster, Prometheus, its private agent) is taken down by its owner's
//! `Drop`. A signal that ends the process runs no `Drop`: the owners also register here how to take their thing
//! down, and after [`on_signals`] SIGINT, SIGTERM and SIGHUP run what is registered, newest first, then stop the
//! process's remaining children and what they started (the jobs: `lockstep run` passes SIGTERM on to its command
//! and removes its cgroup once it has ended; [`stop_trees`]), before the process exits. An owner that took its
//! thing down itself drops its [`Registration`].

use lockstep_cgroup::procfs::Live as _;
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, IntoRawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use lockstep_cgroup::procfs::ProcessRef;
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::sys::signal::{kill, sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

/// How to take one thing down.
type Teardown = Box<dyn FnOnce() + Send>;

/// What is registered, by registration number (newest last).
static REGISTERED: Mutex<BTreeMap<u64, Teardown>> = Mutex::new(BTreeMap::new());

/// The next registration number.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// How long a job has to end after SIGTERM before it is killed.
pub const JOB_GRACE: Duration = Duration::from_secs(10);

/// How long a job's supervisor has to end once what it started was killed, before it is killed too: `lockstep run`
/// then releases the job from the agent, removes the job's cgroup (waiting up to 10 s for its processes to go) and
/// records its end in the store (a store busy with another writer waits up to 10 s).
const CLEANUP_GRACE: Duration = Duration::from_secs(20);

/// Set once a stopping signal came: no job is started after that ([`stopping`]).
static STOPPING_NOW: AtomicBool = AtomicBool::new(false);

/// Whether the experiment is being taken down after a stopping signal: a job must not be started then (the
/// teardown might not see it, and it would outlive the experiment).
pub fn stopping() -> bool {
    STOPPING_NOW.load(Ordering::SeqCst)
}

/// How many times, at most, the teardown looks again for children started while it stopped the ones before.
const ROUNDS: usize = 3;

/// The signals that stop an experiment.
const STOPPING: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

/// A teardown, registered until this is dropped.
#[must_use = "the teardown is unregistered when this is dropped"]
pub struct Registration(u64);

impl Drop for Registration {
    fn drop(&mut self) {
        registered().remove(&self.0);
    }
}

fn registered() -> MutexGuard<'static, BTreeMap<u64, Teardown>> {
    REGISTERED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Registers `teardown`: it runs if a stopping signal comes before the registration is dropped.
pub fn register(teardown: impl FnOnce() + Send + 'static) -> Registration {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    registered().insert(id, Box::new(teardown));
    Registration(id)
}

/// From now on SIGINT, SIGTERM and SIGHUP run every registered teardown, newest first, stop the remaining
/// children, and end the process with status 128 + the signal. The signals are caught by a handler that only
/// writes their number to a pipe, read by a thread started here: no signal is blocked, so the children (cluster
/// daemons, launchers, the model's Python) start with the mask and the default dispositions a program expects,
/// and end on SIGTERM.
pub fn on_signals() -> anyhow::Result<()> {
    let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    // The handler must never block: a write to a full pipe fails instead (the thread has a signal to act on).
    fcntl(write.as_raw_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
    // The write end lives as long as the process: the handler may write to it at any time.
    CAUGHT.store(write.into_raw_fd(), Ordering::Relaxed);
    let action = SigAction::new(SigHandler::Handler(caught), SaFlags::SA_RESTART, SigSet::empty());
    for s in STOPPING {
        // SAFETY: the handler only calls write(2), which is async-signal-safe, on a descriptor never closed.
        unsafe { sigaction(s, &action) }?;
    }
    std::thread::spawn(move || {
        let mut sig = [0u8];
        let mut pipe = std::fs::File::from(read);
        if std::io::Read::read_exact(&mut pipe, &mut sig).is_err() {
            return;
        }
        let sig = Signal::try_from(i32::from(sig[0])).unwrap_or(Signal::SIGTERM);
        STOPPING_NOW.store(true, Ordering::SeqCst);
        eprintln!("lockstep: {sig}: taking down what the experiment started");
        // Held while tearing down: an owner dropping its registration meanwhile waits, and does not take the
        // same thing down at the same time.
        let mut all = registered();
        while let Some((_, teardown)) = all.pop_last() {
            teardown();
        }
        // The experiment's own thread goes on meanwhile, and may have been starting a job as the signal came.
        for _ in 0..ROUNDS {
            let jobs = children();
            if jobs.is_empty() {
                break;
            }
            stop_trees(&jobs, JOB_GRACE);
        }
        std::process::exit(128 + sig as i32);
    });
    Ok(())
}

/// The write end of the pipe [`on_signals`] reads the caught signals from (-1 before it is called).
static CAUGHT: AtomicI32 = AtomicI32::new(-1);

/// The handler of the stopping signals: writes the signal's number to [`CAUGHT`]'s pipe, leaving `errno` as the
/// interrupted code had it.
extern "C" fn caught(sig: libc::c_int) {
    let byte = sig as u8;
    // SAFETY: errno is this thread's; write(2) is async-signal-safe, never blocks on the non-blocking end, and
    // reads one byte of a local. A failed write (a full pipe: the thread already has a signal to act on) changes
    // nothing but errno, which is put back.
    unsafe {
        let errno = libc::__errno_location();
        let saved = *errno;
        libc::write(CAUGHT.load(Ordering::Relaxed), (&raw const byte).cast(), 1);
        *errno = saved;
    }
}

/// The processes this one started that are still there.
fn children() -> Vec<u32> {
    children_of(std::process::id() as i32).into_iter().map(|pid| pid as u32).collect()
}

/// The processes whose parent is `parent`.
fn children_of(parent: i32) -> Vec<i32> {
    let pids = std::fs::read_dir("/proc").into_iter().flatten().flatten();
    pids.filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| lockstep_cgroup::procfs::parent(pid) == Some(parent))
        .collect()
}

/// The descendants of processes `roots` (not the roots), each with its start time, so that a PID used again by
/// the time it is signalled is left alone: one look at `/proc`.
pub fn descendants(roots: &[i32]) -> Vec<ProcessRef> {
    let pids = std::fs::read_dir("/proc").into_iter().flatten().flatten();
    let parents: Vec<(i32, i32)> = pids
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| Some((pid, lockstep_cgroup::procfs::parent(pid)?)))
        .collect();
    let mut tree = Vec::new();
    let mut next = roots.to_vec();
    while let Some(p) = next.pop() {
        for &(child, _) in parents.iter().filter(|&&(_, parent)| parent == p) {
            if let Some(process) = ProcessRef::of(child) {
                tree.push(process);
                next.push(child);
            }
        }
    }
    tree
}

/// Stops child process `pid` and what it started, as [`stop_trees`] does.
pub fn stop_tree(pid: u32, grace: Duration) {
    stop_trees(&[pid], grace);
}

/// Stops child processes `pids` and what they started: SIGTERM to each, then waits up to `grace` for them to end,
/// and reaps them. Past the grace, what each one still there started is killed first, so that it ends its own way
/// (`lockstep run` removes the job's cgroup once its command has ended), and it is killed if it has not within
/// [`CLEANUP_GRACE`]: a launcher that waits for ranks that block SIGTERM (Charliecloud ranks inherit a mask with
/// nearly every signal blocked), or that hangs on it (Open MPI 4.1's `mpiexec` in the cgroup v2 guest of `make
/// test`, kernel 6.1, on 2026-12-06: its main thread in a futex wait, its two ranks ended and never reaped,
/// `lockstep run` killed after the grace and `mpiexec` left behind), would hold it forever. The deadlines are the
/// same for all, so that stopping several jobs takes no longer than stopping one. Then what they started and left
/// behind (their descendants before the SIGTERM: what outlives a launcher that ended is no longer below it) is
/// killed.
pub fn stop_trees(pids: &[u32], grace: Duration) {
    let roots: Vec<i32> = pids.iter().map(|&pid| pid as i32).collect();
    // One look at `/proc` for all of them.
    let trees = descendants(&roots);
    let pids: Vec<Pid> = roots.iter().map(|&pid| Pid::from_raw(pid)).collect();
    for &pid in &pids {
        let _ = kill(pid, Signal::SIGTERM);
    }
    let held = still_there(pids, grace);
    if !held.is_empty() {
        let roots: Vec<i32> = held.iter().map(|pid| pid.as_raw()).collect();
        for process in descendants(&roots) {
            let _ = process.signal(libc::SIGKILL);
        }
    }
    for pid in still_there(held, CLEANUP_GRACE) {
        let _ = kill(pid, Signal::SIGKILL);
        let _ = waitpid(pid, None);
    }
    for process in trees {
        let _ = process.signal(libc::SIGKILL);
    }
}

/// Those of child processes `pids` that have not ended within `grace`, waited for together; those that ended are
/// reaped (one already gone counts as ended).
fn still_there(mut pids: Vec<Pid>, grace: Duration) -> Vec<Pid> {
    let deadline = Instant::now() + grace;
    loop {
        pids.retain(|&pid| matches!(waitpid(pid, Some(WaitPidFlag::WNOHANG)), Ok(WaitStatus::StillAlive)));
        if pids.is_empty() || Instant::now() >= deadline {
            return pids;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A child process this process started, stopped ([`stop_child`]) when dropped and on a stopping signal.
pub struct Stopped {
    child: std::process::Child,
    grace: Duration,
    _teardown: Registration,
}

impl Stopped {
    /// `child`, stopped with `grace` between SIGTERM and SIGKILL.
    pub fn new(child: std::process::Child, grace: Duration) -> Self {
        let pid = child.id();
        Self { child, grace, _teardown: register(move || stop_child(pid, grace)) }
    }

    /// Its process ID.
    pub fn id(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        stop_child(self.child.id(), self.grace);
    }
}

/// Stops child process `pid`: SIGTERM, then SIGKILL if it has not exited within `grace`; reaps it.
pub fn stop_child(pid: u32, grace: Duration) {
    let pid = Pid::from_raw(pid as i32);
    if kill(pid, Signal::SIGTERM).is_ok() && !still_there(vec![pid], grace).is_empty() {
        let _ = kill(pid, Signal::SIGKILL);
        let _ = waitpid(pid, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_registration_is_gone_and_a_child_is_stopped_and_reaped() {
        let kept = register(|| {});
        let dropped = register(|| {});
        let id = dropped.0;
        drop(dropped);
        assert!(!registered().contains_key(&id) && registered().contains_key(&kept.0));
        // A child that ignores SIGTERM is killed once the grace is over.
        let mut child = std::process::Command::new("sh").args(["-c", "trap '' TERM; exec sleep 30"]).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert!(children().contains(&child.id()));
        let t0 = Instant::now();
        stop_child(child.id(), Duration::from_millis(300));
        assert!(t0.elapsed() < Duration::from_secs(5));
        assert!(!children().contains(&child.id()));
        assert!(child.try_wait().is_err(), "stop_child reaps it");
    }

    #[test]
    fn after_on_signals_a_child_has_no_signal_blocked_and_the_handler_cannot_block() {
        on_signals().unwrap();
        let out = std::process::Command::new("grep").args(["^SigBlk", "/proc/self/status"]).output().unwrap();
        let line = String::from_utf8_lossy(&out.stdout);
        assert_eq!(line.split_whitespace().nth(1), Some("0000000000000000"), "{line}");
        let flags = fcntl(CAUGHT.load(Ordering::Relaxed), FcntlArg::F_GETFL).unwrap();
        assert_ne!(flags & libc::O_NONBLOCK, 0, "the handler's end of the pipe must not block");
    }

    #[test]
    fn supervisors_held_by_what_they_started_end_their_own_way_once_that_is_killed() {
        // Two supervisors that wait for their command and clean up after it, as `lockstep run` does; both ignore
        // SIGTERM (the command as a launcher that hangs on it). Past the grace the commands are killed, and the
        // supervisors clean up and end by themselves.
        let dir = lockstep_scratch::tempdir().unwrap();
        let mut supervisors: Vec<(std::process::Child, std::path::PathBuf)> = (0..2)
            .map(|i| {
                let cleaned = dir.path().join(format!("cleaned-{i}"));
                let script = format!("trap '' TERM; sleep 30 & wait; touch '{}'", cleaned.display());
                (std::process::Command::new("sh").args(["-c", &script]).spawn().unwrap(), cleaned)
            })
            .collect();
        let deadline = Instant::now() + Duration::from_secs(5);
        let started = |s: &[(std::process::Child, std::path::PathBuf)]| {
            s.iter().all(|(c, _)| children_of(c.id() as i32).len() == 1)
        };
        while !started(&supervisors) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(started(&supervisors), "each supervisor's command did not start");
        let pids: Vec<u32> = supervisors.iter().map(|(c, _)| c.id()).collect();
        stop_trees(&pids, Duration::from_millis(300));
        for (child, cleaned) in &mut supervisors {
            assert!(child.try_wait().is_err(), "stop_trees reaps each supervisor");
            assert!(cleaned.exists(), "a supervisor did not clean up: it was killed before its command ended");
        }
    }

    #[test]
    fn a_stopped_tree_leaves_no_descendant_that_ignores_sigterm() {
        // A launcher that ignores SIGTERM, and a rank of it that ignores it too (as Charliecloud ranks block it).
        let mut child =
            std::process::Command::new("sh").args(["-c", "trap '' TERM; sleep 30 & sleep 30; wait"]).spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut ranks = children_of(child.id() as i32);
        while ranks.len() < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            ranks = children_of(child.id() as i32);
        }
        assert_eq!(ranks.len(), 2, "{ranks:?}");
        stop_tree(child.id(), Duration::from_millis(300));
        assert!(child.try_wait().is_err(), "stop_tree reaps the launcher");
        // Killed: gone, or a zombie until whoever inherited it reaps it.
        let dead = |pid: i32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map_or(true, |s| s.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')))
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while !ranks.iter().all(|&pid| dead(pid)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(ranks.iter().all(|&pid| dead(pid)), "{ranks:?}");
    }
}
