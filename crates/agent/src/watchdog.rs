//! The watchdog: a process the agent starts (its own binary, `lockstepd --watchdog STORE`), reading a pipe on its
//! standard input. The agent tells it, before every change, which target to restore to which value, and beats
//! (`beat`) at least every [`BEAT_INTERVAL`]. The watchdog writes every value back — thawing frozen jobs,
//! restoring weights, returning threads `dcs` raised to their class — when the pipe reaches end-of-file (the agent
//! exited, crashed or was SIGKILLed: it then clears those entries from the store's journal and exits), and when
//! no beat came for [`BEAT_TIMEOUT`] (the agent is stopped, or stuck: it keeps the entries, and the agent, once it
//! runs again, sees the gap and plans from the restored state).
//! So no job stays frozen or boosted longer than [`BEAT_TIMEOUT`] after the agent stops acting. The agent starts a
//! new watchdog (and tells it every entry again) when this one dies.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{signal, SigHandler, Signal};

use crate::restore::Target;
use lockstep_store::Store;

/// How often the agent beats (at most; it beats from the daemon's loop, which wakes at least this often).
pub const BEAT_INTERVAL: Duration = Duration::from_millis(500);

/// How long without a beat until the watchdog restores everything: the longest a stopped agent leaves a job
/// frozen or boosted.
pub const BEAT_TIMEOUT: Duration = Duration::from_secs(2);

/// Longest line the watchdog accepts; a longer one (which the agent never writes) is dropped.
const MAX_LINE: usize = 64 * 1024;

/// The agent's end of the watchdog pipe.
pub struct Watchdog {
    pipe: File,
    child: Child,
}

impl Watchdog {
    /// Starts the watchdog: this very program with `--watchdog STORE` (the journal's store, which the watchdog
    /// opens itself), the pipe's read end on its standard input. Safe from a process with threads (it execs).
    pub fn spawn(store: &Path) -> anyhow::Result<Self> {
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let child = Command::new("/proc/self/exe")
            .arg("--watchdog")
            .arg(store)
            .stdin(Stdio::from(read))
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| anyhow::anyhow!("cannot start the watchdog: {e}"))?;
        // The agent never waits on its watchdog: a stopped or dead watchdog must not stop the agent.
        nix::fcntl::fcntl(write.as_raw_fd(), nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK))?;
        Ok(Self { pipe: File::from(write), child })
    }

    /// The watchdog's PID.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Whether it still runs (a dead one is reaped).
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Tells the watchdog to restore `target` (a [`Target`]'s text form) to `value` if the agent stops.
    pub fn track(&mut self, target: &str, value: &str) -> std::io::Result<()> {
        self.send(&format!("track\t{}\t{}\n", escape(target), escape(value)))
    }

    /// Tells the watchdog that `target` was restored.
    pub fn untrack(&mut self, target: &str) -> std::io::Result<()> {
        self.send(&format!("untrack\t{}\n", escape(target)))
    }

    /// Tells the watchdog that the agent runs.
    pub fn beat(&mut self) -> std::io::Result<()> {
        self.send("beat\n")
    }

    /// One line, written whole (a pipe write of at most 4 KiB is atomic) or not at all.
    fn send(&mut self, line: &str) -> std::io::Result<()> {
        self.pipe.write_all(line.as_bytes())
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // Closing the pipe tells the watchdog to restore and exit; reap it if it has, so that no zombie stays.
        let _ = self.child.try_wait();
    }
}

/// The watchdog process (`lockstepd --watchdog STORE`): collects entries from standard input, restores them when
/// the agent goes silent or goes away. Returns the exit status.
pub fn watch(store: &Path) -> i32 {
    crate::logging::init("lockstep watchdog");
    // Signals aimed at the agent's process group (Ctrl-C, a service manager's SIGTERM) must not kill the
    // watchdog before the agent has restored: only the pipe decides.
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP, Signal::SIGQUIT, Signal::SIGPIPE] {
        // SAFETY: ignoring a signal installs no handler code.
        let _ = unsafe { signal(sig, SigHandler::SigIgn) };
    }
    // SAFETY: PR_SET_NAME with a NUL-terminated name of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"lockstep-watch".as_ptr()) };
    // SAFETY: descriptor 0 is the pipe the agent set up, owned by nobody else in this process.
    let mut input = File::from(unsafe { OwnedFd::from_raw_fd(0) });
    let mut tracked: BTreeMap<String, String> = BTreeMap::new();
    let mut pending = Vec::new();
    let mut last_beat = Instant::now();
    let mut silent = false;
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let mut fds = [libc::pollfd { fd: 0, events: libc::POLLIN, revents: 0 }];
        // SAFETY: `fds` is a valid array of one pollfd.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), 1, BEAT_INTERVAL.as_millis() as libc::c_int) };
        if ready > 0 {
            match input.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => pending.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => break,
            }
            while let Some(end) = pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
                if apply(&line, &mut tracked) {
                    last_beat = Instant::now();
                    if silent {
                        log::info!("the agent beats again");
                        silent = false;
                    }
                }
            }
            if pending.len() > MAX_LINE {
                pending.clear();
            }
        }
        if !silent && last_beat.elapsed() >= BEAT_TIMEOUT {
            let (restored, failed) = restore(&tracked);
            log::warn!(
                "no beat from the agent for {BEAT_TIMEOUT:?}; restored {} target(s), {failed} \
                 failed",
                restored.len()
            );
            silent = true;
        }
    }
    if tracked.is_empty() {
        return 0;
    }
    let (restored, failed) = restore(&tracked);
    // Only then the journal: the store may be busy (the agent died inside a transaction), and nothing may wait
    // on it before the jobs run again. A restarted agent finds these files already restored either way.
    if let Ok(s) = Store::open_existing_to_write(store) {
        for file in &restored {
            let _ = s.journal_remove(file);
        }
    }
    log::info!("agent gone; restored {} cgroup file(s) and thread(s)", restored.len());
    i32::from(failed > 0)
}

/// A field of a line to the watchdog: backslash, tab and newline escaped, so that a cgroup path holding them (a
/// delegated cgroup's name is its user's choice) stays one field of one line.
fn escape(field: &str) -> String {
    field.replace('\\', "\\\\").replace('\t', "\\t").replace('\n', "\\n")
}

/// The field [`escape`] wrote.
fn unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// Applies one line of the agent's; true for a beat (any well-formed line counts as one: the agent runs).
fn apply(line: &str, tracked: &mut BTreeMap<String, String>) -> bool {
    let mut parts = line.splitn(3, '\t');
    match (parts.next(), parts.next(), parts.next()) {
        (Some("track"), Some(file), Some(value)) => {
            tracked.entry(unescape(file)).or_insert_with(|| unescape(value));
            true
        }
        (Some("untrack"), Some(file), None) => {
            tracked.remove(&unescape(file));
            true
        }
        (Some("beat"), None, None) => true,
        _ => false,
    }
}

/// Writes every tracked value back, freezer files first; returns the targets restored and how many failed.
fn restore(tracked: &BTreeMap<String, String>) -> (Vec<&String>, usize) {
    let mut entries: Vec<(Target, &String, &String)> =
        tracked.iter().map(|(file, value)| (Target::decode(file), file, value)).collect();
    entries.sort_by_key(|(target, _, _)| target.order());
    let mut restored = Vec::new();
    let mut failed = 0;
    for (target, file, value) in entries {
        match target.put_back(value) {
            Err(e) => {
                log::error!("cannot restore {file} to {value}: {e}");
                failed += 1;
            }
            Ok(()) => restored.push(file),
        }
    }
    (restored, failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_with_tabs_newlines_and_backslashes_stays_one_entry() {
        let path = "/sys/fs/cgroup/freezer/user\tjob\nx\\t/freezer.state";
        let mut tracked = BTreeMap::new();
        let line = format!("track\t{}\t{}", escape(path), escape("THAWED"));
        assert!(!line.contains('\n') && line.matches('\t').count() == 2, "{line:?}");
        assert!(apply(&line, &mut tracked));
        assert_eq!(tracked.get(path).map(String::as_str), Some("THAWED"));
        assert!(apply(&format!("untrack\t{}", escape(path)), &mut tracked));
        assert!(tracked.is_empty());
        assert_eq!(unescape("a\\"), "a\\", "a lone trailing backslash is kept");
    }
}
