//! The private agent an experiment runs its jobs under, on a socket of its work directory.

use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::paths::Paths;
use super::teardown::Stopped;

/// The agent the experiment runs its jobs under, stopped (SIGTERM, so that it restores everything) on drop, and
/// on a signal that ends the experiment.
pub struct PrivateAgent {
    /// The agent's process, stopped on drop.
    pub child: Stopped,
    /// Its control socket.
    pub socket: PathBuf,
}

/// How long the private agent has to restore everything and exit after SIGTERM before it is killed (its
/// watchdog then restores what is left).
const AGENT_STOP_GRACE: Duration = Duration::from_secs(30);

impl PrivateAgent {
    /// Starts `lockstep agent --policy cfs` with `extra` arguments on a socket in the work directory, its log in
    /// `agent.log` beside it. An agent that refuses to start ends the experiment with the agent's own line, a usage
    /// error where the agent's was one; when another agent holds the store (the node's, `lockstep-agent.service`,
    /// on the default store), with what to do about it.
    pub fn start(paths: &Paths, extra: &[String]) -> anyhow::Result<Self> {
        let socket = paths.work.join("agent.sock");
        let log = paths.work.join("agent.log");
        let mut child = Command::new(std::env::current_exe()?)
            .arg("--socket")
            .arg(&socket)
            .arg("--store")
            .arg(&paths.store)
            .args(["agent", "--policy", "cfs"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            if let Some(status) = child.try_wait()? {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                let said = text.lines().last().unwrap_or("nothing");
                let message = refusal(&status.to_string(), said, store_held(&paths.store));
                if status.code() == Some(lockstep_core::error::EXIT_USAGE) {
                    return Err(lockstep_core::error::UsageError::new(message).into());
                }
                anyhow::bail!(message);
            }
            anyhow::ensure!(Instant::now() < deadline, "the experiment's agent did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Self { child: Stopped::new(child, AGENT_STOP_GRACE), socket })
    }
}

/// The error of an experiment whose agent did not start: `status` how it ended, `said` its last line; `held`
/// whether another agent holds the store, which the experiment's agent needs for itself.
fn refusal(status: &str, said: &str, held: bool) -> String {
    let said = said.strip_prefix("lockstep: ").unwrap_or(said);
    let mut message = format!("the experiment's agent did not start ({status}): {said}");
    if held {
        message += " (an experiment runs its own agent on the store: stop the node's agent with `systemctl stop \
                    lockstep-agent`, or give the experiment a store of its own with `lockstep --store PATH \
                    experiment run SPEC` or LOCKSTEP_STORE=PATH)";
    }
    message
}

/// Whether an agent holds the store at `path`: the `flock` every agent keeps on its store for its life. Asked
/// with a shared lock, dropped at once with the descriptor.
fn store_held(path: &Path) -> bool {
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
    else {
        return false;
    };
    // SAFETY: flock on a descriptor this function owns; closing it drops the lock.
    let taken = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) } == 0;
    !taken && std::io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_another_agent_holds_is_said_with_what_to_do() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let store = dir.path().join("s.db");
        assert!(!store_held(&store));
        std::fs::write(&store, b"").unwrap();
        assert!(!store_held(&store));
        // An agent's lock: exclusive, on a descriptor of its own.
        let agent = std::fs::File::open(&store).unwrap();
        // SAFETY: flock on a descriptor the test owns.
        assert_eq!(unsafe { libc::flock(agent.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }, 0);
        assert!(store_held(&store));
        let said = "lockstep: store /s.db: in use by the agent of PID 7 (one agent per store: stop that one, or give \
                    --store another store)";
        let message = refusal("exit status: 2", said, true);
        assert!(
            message.starts_with(
                "the experiment's agent did not start (exit status: 2): store /s.db: in use by the agent of PID 7"
            ) && message.ends_with(
                "`systemctl stop lockstep-agent`, or give the experiment a store of its own with \
                                    `lockstep --store PATH experiment run SPEC` or LOCKSTEP_STORE=PATH)"
            ),
            "{message}"
        );
        drop(agent);
        assert!(!store_held(&store));
        assert_eq!(
            refusal("exit status: 1", "lockstep: no", false),
            "the experiment's agent did not start (exit status: 1): no"
        );
    }
}
