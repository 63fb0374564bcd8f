//! What the agent's threads ask of the daemon, the one owner of the agent's state. Each [`Command`] goes down one
//! channel to the daemon's loop, which waits on it between slot boundaries, and is answered on a channel of its
//! own: no thread but the daemon's ever touches a job, the journal or the store's agent tables.

use std::sync::mpsc::{self, Receiver, Sender};
use std::time::Duration;

use crate::dcs::probe::Arrival;
use crate::dcs::processes::{Scanned, Watched};
use crate::slurm::{Answer, Chores, Found};
use lockstep_proto::protocol::{Request, Response};

/// Where a command's answer goes.
pub type Reply<T> = Sender<T>;

/// A request to the daemon, and where its answer goes.
#[derive(Debug)]
pub enum Command {
    /// A control API request of user `uid`, from the control socket (which has checked that the user may make
    /// it).
    Control {
        /// The request.
        request: Request,
        /// Who asks.
        uid: u32,
        /// An adoption's slow part, done by the control socket's thread before sending it.
        resolved: Option<crate::adopt::Resolved>,
        /// The answer.
        reply: Reply<Response>,
    },
    /// What a scan of Slurm's cgroups found, and which jobs slurmctld runs here with their places when that was
    /// due (or why it could not be asked); answered with the cgroup work to do outside the loop.
    Slurm {
        /// The jobs in the cgroup tree.
        found: Vec<Found>,
        /// What slurmctld said, when asked.
        word: Option<Result<Answer, String>>,
        /// What slurmctld said of the jobs the last answer asked about (`Chores::halts`): halted or not.
        halts: Vec<(lockstep_slurm::SlurmJobId, bool)>,
        /// The work left to the discovery thread.
        reply: Reply<Chores>,
    },
    /// The rows or places the controller's hooks told this node (a notice the metrics door took).
    SlurmTold {
        /// The jobs the notice named.
        jobs: Vec<lockstep_slurm::Listed>,
    },
    /// The eBPF probe's arrivals, from the event thread of `dcs` engine `engine`; answered with how long the
    /// thread may wait for the next one, `None` once that engine has stopped.
    DcsArrivals {
        /// The engine the thread serves.
        engine: u64,
        /// Messages that arrived.
        arrivals: Vec<Arrival>,
        /// How long to wait.
        reply: Reply<Option<Duration>>,
    },
    /// The scan thread of `dcs` engine `engine` asks which jobs to scan; `None` once that engine has stopped.
    DcsWatched {
        /// The engine the thread serves.
        engine: u64,
        /// The jobs to scan.
        reply: Reply<Option<Vec<Watched>>>,
    },
    /// What that scan found; answered `false` once the engine has stopped.
    DcsScanned {
        /// The engine the thread serves.
        engine: u64,
        /// Per job: its ports, counts and processes.
        scanned: Vec<Scanned>,
        /// Whether the engine goes on.
        reply: Reply<bool>,
    },
    /// Restore every job and end (SIGINT or SIGTERM came).
    Stop,
    /// The configuration was read again (SIGHUP): the policy and slot length it gives now.
    Reload {
        /// The policy.
        policy: lockstep_core::cosched::PolicySpec,
        /// The slot length.
        slot: std::time::Duration,
    },
}

/// The daemon's address: where threads send their commands.
#[derive(Clone, Debug)]
pub struct Mailbox(Sender<Command>);

impl Mailbox {
    /// A mailbox, and the inbox the daemon reads it from.
    pub fn new() -> (Self, Receiver<Command>) {
        let (tx, rx) = mpsc::channel();
        (Self(tx), rx)
    }

    /// Sends the command `make` builds around a reply channel and waits for its answer; `None` when the daemon
    /// has ended (its inbox is gone with every command not answered).
    pub fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Command) -> Option<T> {
        let (reply, answer) = mpsc::channel();
        self.0.send(make(reply)).ok()?;
        answer.recv().ok()
    }

    /// Sends `command`, which has no answer (nothing happens when the daemon has ended).
    pub fn tell(&self, command: Command) {
        let _ = self.0.send(command);
    }
}
