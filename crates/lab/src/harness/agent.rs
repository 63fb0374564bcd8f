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
    /// Starts `lockstep agent --policy cfs` with `extra` arguments on a socket in the work directory.
    pub fn start(paths: &Paths, extra: &[String]) -> anyhow::Result<Self> {
        let socket = paths.work.join("agent.sock");
        let child = Command::new(std::env::current_exe()?)
            .arg("--socket")
            .arg(&socket)
            .arg("--store")
            .arg(&paths.store)
            .args(["agent", "--policy", "cfs"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            anyhow::ensure!(Instant::now() < deadline, "the experiment's agent did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Self { child: Stopped::new(child, AGENT_STOP_GRACE), socket })
    }
}
