//! The watchdog: a process forked by the agent at start, holding the read end of a pipe. The agent tells it,
//! before every change, which file to restore to which value; when the pipe reaches end-of-file — the agent
//! exited, crashed or was SIGKILLed — the watchdog writes every value back (thawing frozen jobs, restoring
//! weights, returning threads `dcs` raised to their class), clears those entries from the store's journal, and exits.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use nix::sys::signal::{signal, SigHandler, Signal};
use nix::unistd::{fork, pipe, ForkResult, Pid};

use crate::restore::Target;
use lockstep_store::Store;

/// The agent's end of the watchdog pipe.
pub struct Watchdog {
    pipe: File,
    pid: Pid,
}

impl Watchdog {
    /// Forks the watchdog. Must be called while the process has a single thread. `store` is the journal's
    /// store path (the watchdog opens its own connection).
    pub fn spawn(store: &Path) -> anyhow::Result<Self> {
        let (read, write) = pipe()?;
        // SAFETY: the agent calls this before starting any thread, so the child may allocate and run freely.
        match unsafe { fork()? } {
            ForkResult::Parent { child } => {
                drop(read);
                Ok(Self { pipe: File::from(write), pid: child })
            }
            ForkResult::Child => {
                drop(write);
                let code = watch(read, store);
                // SAFETY: leaving without running the parent's exit handlers or destructors.
                unsafe { libc::_exit(code) }
            }
        }
    }

    /// The watchdog's PID.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Tells the watchdog to restore `target` (a [`Target`]'s text form) to `value` if the agent dies.
    pub fn track(&mut self, target: &str, value: &str) -> std::io::Result<()> {
        writeln!(self.pipe, "track\t{target}\t{value}")
    }

    /// Tells the watchdog that `target` was restored.
    pub fn untrack(&mut self, target: &str) -> std::io::Result<()> {
        writeln!(self.pipe, "untrack\t{target}")
    }
}

/// The watchdog process: collect entries until end-of-file, then restore them. Returns the exit status.
fn watch(read: OwnedFd, store: &Path) -> i32 {
    // Signals aimed at the agent's process group (Ctrl-C, a service manager's SIGTERM) must not kill the
    // watchdog before the agent has restored: only the pipe decides.
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP, Signal::SIGQUIT, Signal::SIGPIPE] {
        // SAFETY: ignoring a signal installs no handler code.
        let _ = unsafe { signal(sig, SigHandler::SigIgn) };
    }
    // SAFETY: PR_SET_NAME with a NUL-terminated name of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"lockstep-watch".as_ptr()) };
    close_other_fds(read.as_raw_fd());
    let mut tracked: BTreeMap<String, String> = BTreeMap::new();
    for line in BufReader::new(File::from(read)).lines() {
        let Ok(line) = line else { break };
        let mut parts = line.splitn(3, '\t');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("track"), Some(file), Some(value)) => {
                tracked.entry(file.to_string()).or_insert_with(|| value.to_string());
            }
            (Some("untrack"), Some(file), None) => {
                tracked.remove(file);
            }
            _ => {}
        }
    }
    if tracked.is_empty() {
        return 0;
    }
    let mut entries: Vec<(Target, &String, &String)> =
        tracked.iter().map(|(file, value)| (Target::decode(file), file, value)).collect();
    entries.sort_by_key(|(target, _, _)| target.order());
    let mut restored = Vec::new();
    for (target, file, value) in entries {
        match target.put_back(value) {
            Err(e) => eprintln!("lockstep watchdog: cannot restore {file} to {value}: {e}"),
            Ok(()) => restored.push(file),
        }
    }
    // Only then the journal: the store may be busy (the agent died inside a transaction), and nothing may wait
    // on it before the jobs run again. A restarted agent finds these files already restored either way.
    if let Ok(s) = Store::open(store) {
        for file in &restored {
            let _ = s.journal_remove(file);
        }
    }
    let failed = tracked.len() - restored.len();
    eprintln!("lockstep watchdog: agent gone; restored {} cgroup file(s) and thread(s)", tracked.len() - failed);
    i32::from(failed > 0)
}

/// Closes every descriptor but stdio and `keep` (the agent's store connection and sockets are not ours).
fn close_other_fds(keep: i32) {
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .map(|d| d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default();
    for fd in fds {
        if fd > 2 && fd != keep {
            // SAFETY: closing a descriptor this process inherited and will not use.
            unsafe { libc::close(fd) };
        }
    }
}
