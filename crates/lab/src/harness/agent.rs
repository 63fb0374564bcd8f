//! The private agent an experiment runs its jobs under, on a socket of its work directory.

use std::path::PathBuf;
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
    /// `agent.log` beside it. An agent that refuses to start (another agent holds the store, say) ends the
    /// experiment with the agent's own line, a usage error where the agent's was one.
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
                let message = format!("the experiment's agent did not start ({status}): {said}");
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
