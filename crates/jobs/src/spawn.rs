//! The one way lockstep starts a user's command (`lockstep run`, `lockstep stat`): fork, then in the child join
//! the job's cgroups, give the signals the parent holds back their default action, wait at a gate when asked (so
//! that counters attach before the first instruction), and exec. A child that cannot go on says why through a
//! close-on-exec pipe, as `posix_spawn` does, so that the parent tells a command that could not start from one
//! that ran and failed. An executable file the kernel cannot run (`ENOEXEC`: a script without `#!`) is run by
//! `/bin/sh`, as `execvp` and a shell do.

use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use nix::fcntl::OFlag;
use nix::libc;
use nix::sys::signal::Signal;
use nix::unistd::{fork, pipe2, ForkResult};

/// The shell that runs an executable file the kernel cannot (`ENOEXEC`).
const SHELL: &str = "/bin/sh";

/// What the child was doing when it failed: the first byte of its report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Joining one of the job's cgroups.
    Join,
    /// Setting its signals.
    Signals,
    /// Exec.
    Exec,
}

/// A command that could not start, and why.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The fork, or a pipe, failed in the parent.
    #[error("cannot start a process: {0}")]
    Fork(#[source] std::io::Error),
    /// The child failed at `step` (said as the system's error alone for exec, as a failed `execvp` is).
    #[error("{}{source}", match .step { Step::Join => "cannot join the job's cgroup: ", Step::Signals => "cannot set its signals: ", Step::Exec => "" })]
    Child {
        /// Where.
        step: Step,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
}

/// A command to start.
pub struct Spawn<'a> {
    /// The executable (as `launch::resolve_command` found it).
    pub program: &'a Path,
    /// Its arguments, `argv[0]` first.
    pub argv: &'a [String],
    /// The `cgroup.procs` (or `tasks`) files it joins before exec, in order.
    pub join: &'a [CString],
    /// The signals it starts with at their default action (the parent may ignore them), beside `SIGPIPE`, which
    /// it always does; every signal is unblocked in it.
    pub reset: &'a [Signal],
}

/// A child that has forked and waits at its gate, or has already gone on (see [`Spawn::start`]).
pub struct Started {
    pid: i32,
    /// The gate's write end: a byte lets the child go on, closing it without one ends the child (status 127).
    gate: Option<File>,
    /// The child's report: end of file once exec succeeded, else its step and `errno`.
    report: File,
}

impl Spawn<'_> {
    /// Forks the child. With `gated`, it waits before joining anything until [`Started::go`], so that the parent
    /// can attach to its PID first; without, it goes on at once ([`Started::go`] then only reads its report).
    pub fn start(&self, gated: bool) -> Result<Started, SpawnError> {
        // Everything the child uses is made here: after the fork it only makes system calls.
        let c = |s: &[u8]| CString::new(s).map_err(|e| SpawnError::Fork(std::io::Error::other(e)));
        let path = c(self.program.as_os_str().as_encoded_bytes())?;
        let argv: Vec<CString> = self.argv.iter().map(|a| c(a.as_bytes())).collect::<Result<_, _>>()?;
        let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        argv_ptrs.push(std::ptr::null());
        // For a file without `#!`: `/bin/sh PATH ARGS…`.
        let shell = c(SHELL.as_bytes())?;
        let mut shell_ptrs: Vec<*const libc::c_char> = vec![shell.as_ptr(), path.as_ptr()];
        shell_ptrs.extend(argv_ptrs.iter().skip(1));
        let join_ptrs: Vec<*const libc::c_char> = self.join.iter().map(|p| p.as_ptr()).collect();
        let reset: Vec<libc::c_int> = self.reset.iter().map(|&s| s as libc::c_int).collect();
        let pipe = || pipe2(OFlag::O_CLOEXEC).map_err(|e| SpawnError::Fork(e.into()));
        let (report_read, report_write): (OwnedFd, OwnedFd) = pipe()?;
        let gate = if gated { Some(pipe()?) } else { None };
        let gate_fds = gate.as_ref().map(|(r, w)| (r.as_raw_fd(), w.as_raw_fd()));
        let report_fd = report_write.as_raw_fd();
        // SAFETY: the child makes only async-signal-safe system calls (close, read, sigaction, sigprocmask, open,
        // write, execv, _exit) on memory made before the fork, and never returns.
        match unsafe { fork() }.map_err(|e| SpawnError::Fork(e.into()))? {
            ForkResult::Child => unsafe {
                let errno = || std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
                let fail = |step: Step, errno: i32| -> ! {
                    let mut msg = [0u8; 5];
                    msg[0] = step as u8;
                    msg[1..].copy_from_slice(&errno.to_ne_bytes());
                    libc::write(report_fd, msg.as_ptr().cast(), msg.len());
                    libc::_exit(127)
                };
                if let Some((read, write)) = gate_fds {
                    libc::close(write);
                    let mut byte = 0u8;
                    // End of file: the parent could not attach, and the command must not run.
                    if libc::read(read, (&raw mut byte).cast(), 1) != 1 {
                        libc::_exit(127);
                    }
                }
                for path in &join_ptrs {
                    let fd = libc::open(*path, libc::O_WRONLY | libc::O_CLOEXEC);
                    if fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                        fail(Step::Join, errno());
                    }
                    libc::close(fd);
                }
                // Rust ignores SIGPIPE in its own processes, and an ignored signal stays ignored across exec.
                if libc::signal(libc::SIGPIPE, libc::SIG_DFL) == libc::SIG_ERR {
                    fail(Step::Signals, errno());
                }
                for &sig in &reset {
                    if libc::signal(sig, libc::SIG_DFL) == libc::SIG_ERR {
                        fail(Step::Signals, errno());
                    }
                }
                let mut none: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&raw mut none);
                if libc::sigprocmask(libc::SIG_SETMASK, &raw const none, std::ptr::null_mut()) != 0 {
                    fail(Step::Signals, errno());
                }
                libc::execv(path.as_ptr(), argv_ptrs.as_ptr());
                let failed = errno();
                if failed == libc::ENOEXEC {
                    libc::execv(shell.as_ptr(), shell_ptrs.as_ptr());
                }
                fail(Step::Exec, failed)
            },
            ForkResult::Parent { child } => Ok(Started {
                pid: child.as_raw(),
                gate: gate.map(|(_, write)| File::from(write)),
                report: File::from(report_read),
            }),
        }
    }
}

impl Started {
    /// The child's PID.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Lets the child go on (if it waits at its gate) and waits until it has exec'd the command: its PID then, or
    /// why it could not (the child is reaped).
    pub fn go(mut self) -> Result<i32, SpawnError> {
        if let Some(mut gate) = self.gate.take() {
            // A child that died meanwhile says so below, or by its exit status.
            let _ = gate.write_all(b"x");
        }
        let mut msg = Vec::new();
        let _ = (&self.report).read_to_end(&mut msg);
        let Ok(msg) = <[u8; 5]>::try_from(msg.as_slice()) else { return Ok(self.pid) };
        let step = match msg[0] {
            0 => Step::Join,
            1 => Step::Signals,
            _ => Step::Exec,
        };
        let errno = i32::from_ne_bytes([msg[1], msg[2], msg[3], msg[4]]);
        let _ = wait(self.pid, 0);
        Err(SpawnError::Child { step, source: std::io::Error::from_raw_os_error(errno) })
    }
}

impl Drop for Started {
    /// A child never let through its gate ends there (status 127) and is reaped.
    fn drop(&mut self) {
        if self.gate.take().is_some() {
            let _ = wait(self.pid, 0);
        }
    }
}

/// Waits for child `pid` (`flags`: 0 or `WNOHANG`) and returns its wait status and resource usage once it has
/// ended (`None` while it runs).
pub fn wait(pid: i32, flags: i32) -> Option<(i32, libc::rusage)> {
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of the plain C struct wait4 fills.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: wait4 writes only to the two locals passed.
        let r = unsafe { libc::wait4(pid, &raw mut status, flags, &raw mut usage) };
        if r == pid {
            return Some((status, usage));
        }
        if r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        return None;
    }
}

/// The status a shell gives a command that ended with wait status `status`: its exit code, or 128 + the signal
/// that killed it.
pub fn exit_code(status: i32) -> i32 {
    if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        libc::WEXITSTATUS(status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(args: &[&str]) -> Vec<String> {
        args.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_command_runs_and_its_status_comes_back() {
        let args = argv(&["sh", "-c", "exit 3"]);
        let spawn = Spawn { program: Path::new("/bin/sh"), argv: &args, join: &[], reset: &[] };
        let pid = spawn.start(false).unwrap().go().unwrap();
        let (status, _) = wait(pid, 0).unwrap();
        assert_eq!(exit_code(status), 3);
    }

    #[test]
    fn a_gated_child_waits_for_its_gate_and_one_never_let_through_ends_without_running() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let mark = dir.path().join("ran");
        let args = argv(&["sh", "-c", &format!("touch {}", mark.display())]);
        let spawn = Spawn { program: Path::new("/bin/sh"), argv: &args, join: &[], reset: &[] };
        drop(spawn.start(true).unwrap());
        assert!(!mark.exists(), "a child dropped at its gate ran the command");
        let started = spawn.start(true).unwrap();
        let pid = started.pid();
        assert!(wait(pid, libc::WNOHANG).is_none(), "the child did not wait at its gate");
        assert_eq!(started.go().unwrap(), pid);
        assert_eq!(exit_code(wait(pid, 0).unwrap().0), 0);
        assert!(mark.exists());
    }

    #[test]
    fn the_command_starts_with_sigpipe_and_the_reset_signals_at_their_default() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let out = dir.path().join("status");
        let args = argv(&["sh", "-c", &format!("grep SigIgn /proc/self/status > {}", out.display())]);
        for sig in [Signal::SIGPIPE, Signal::SIGUSR2] {
            // SAFETY: ignoring a signal installs no handler code.
            unsafe { nix::sys::signal::signal(sig, nix::sys::signal::SigHandler::SigIgn) }.unwrap();
        }
        let spawn = Spawn { program: Path::new("/bin/sh"), argv: &args, join: &[], reset: &[Signal::SIGUSR2] };
        let pid = spawn.start(false).unwrap().go().unwrap();
        assert_eq!(exit_code(wait(pid, 0).unwrap().0), 0);
        let line = std::fs::read_to_string(&out).unwrap();
        let ignored = u64::from_str_radix(line.trim().trim_start_matches("SigIgn:").trim(), 16).unwrap();
        let bit = |sig: Signal| 1u64 << (sig as u32 - 1);
        assert_eq!(ignored & (bit(Signal::SIGPIPE) | bit(Signal::SIGUSR2)), 0, "{line}");
    }

    #[test]
    fn an_executable_file_without_a_hash_bang_line_is_run_by_the_shell() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let (script, out) = (dir.path().join("script"), dir.path().join("out"));
        std::fs::write(&script, format!("echo \"$0 $1 $2\" > {}\n", out.display())).unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let args = argv(&["script", "a", "b c"]);
        let spawn = Spawn { program: &script, argv: &args, join: &[], reset: &[] };
        let pid = spawn.start(false).unwrap().go().unwrap();
        assert_eq!(exit_code(wait(pid, 0).unwrap().0), 0);
        assert_eq!(std::fs::read_to_string(&out).unwrap(), format!("{} a b c\n", script.display()));
    }

    #[test]
    fn a_command_that_cannot_run_or_a_cgroup_it_cannot_join_is_said_with_its_step() {
        let args = argv(&["nothing"]);
        let spawn = Spawn { program: Path::new("/nonexistent/nothing"), argv: &args, join: &[], reset: &[] };
        let e = spawn.start(false).unwrap().go().unwrap_err();
        assert!(matches!(e, SpawnError::Child { step: Step::Exec, .. }), "{e}");
        assert_eq!(e.to_string(), "No such file or directory (os error 2)");
        let dir = lockstep_scratch::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::write(&data, b"\x7fELF-not-really").unwrap();
        std::fs::set_permissions(&data, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let args = argv(&["data"]);
        let spawn = Spawn { program: &data, argv: &args, join: &[], reset: &[] };
        let pid = spawn.start(false).unwrap().go().unwrap();
        assert_ne!(exit_code(wait(pid, 0).unwrap().0), 0, "a file neither program nor script ran");
        let procs = [CString::new("/nonexistent/cgroup.procs").unwrap()];
        let args = argv(&["true"]);
        let spawn = Spawn { program: Path::new("/bin/true"), argv: &args, join: &procs, reset: &[] };
        let e = spawn.start(false).unwrap().go().unwrap_err();
        assert!(matches!(e, SpawnError::Child { step: Step::Join, .. }), "{e}");
    }
}
