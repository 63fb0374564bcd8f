//! Taking down what an experiment started when `lockstep experiment run` is told to stop.
//!
//! What an experiment starts (the test Slurm cluster, Prometheus, its private agent) is taken down by its owner's
//! `Drop`. A signal that ends the process runs no `Drop`: the owners also register here how to take their thing
//! down, and after [`on_signals`] SIGINT, SIGTERM and SIGHUP run what is registered, newest first, then stop the
//! process's remaining children (the jobs: `lockstep run` passes SIGTERM on to its command and removes its
//! cgroup), before the process exits. An owner that took its thing down itself drops its [`Registration`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, SigSet, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

/// How to take one thing down.
type Teardown = Box<dyn FnOnce() + Send>;

/// What is registered, by registration number (newest last).
static REGISTERED: Mutex<BTreeMap<u64, Teardown>> = Mutex::new(BTreeMap::new());

/// The next registration number.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// How long a job has to end after SIGTERM before it is killed.
const JOB_GRACE: Duration = Duration::from_secs(10);

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
/// children, and end the process with status 128 + the signal. Call it before the process starts any thread: the signals are blocked in the calling
/// thread and in the threads it starts later (child processes start with none blocked), so that only the
/// thread started here takes them.
pub fn on_signals() -> anyhow::Result<()> {
    let mut set = SigSet::empty();
    for s in STOPPING {
        set.add(s);
    }
    set.thread_block()?;
    std::thread::spawn(move || {
        let Ok(sig) = set.wait() else { return };
        eprintln!("lockstep: {sig}: taking down what the experiment started");
        // Held while tearing down: an owner dropping its registration meanwhile waits, and does not take the
        // same thing down at the same time.
        let mut all = registered();
        while let Some((_, teardown)) = all.pop_last() {
            teardown();
        }
        let jobs = children();
        for &pid in &jobs {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
        }
        for pid in jobs {
            stop_child(pid, JOB_GRACE);
        }
        std::process::exit(128 + sig as i32);
    });
    Ok(())
}

/// The processes this one started that are still there.
fn children() -> Vec<u32> {
    let me = std::process::id() as i32;
    let pids = std::fs::read_dir("/proc").into_iter().flatten().flatten();
    pids.filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| lockstep_cgroup::procfs::parent(pid) == Some(me))
        .map(|pid| pid as u32)
        .collect()
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
    if kill(pid, Signal::SIGTERM).is_err() {
        return;
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => std::thread::sleep(Duration::from_millis(50)),
            _ => return,
        }
    }
    let _ = kill(pid, Signal::SIGKILL);
    let _ = waitpid(pid, None);
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
}
