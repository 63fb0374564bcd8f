//! What the agent's threads ask of the daemon, the one owner of the agent's state. Each [`Command`] goes down one
//! channel to the daemon's loop, which waits on it between slot boundaries, and is answered on a channel of its
//! own: no thread but the daemon's ever touches a job, the journal or the store's agent tables.

use std::sync::mpsc::{self, Receiver, Sender};

use crate::outlet::Outlet;
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
    /// Slurm discovery's findings, and the places the controller's hooks told (`crate::slurm`).
    Slurm(crate::slurm::Msg),
    /// `dcs`'s threads: the probe's arrivals, the jobs to scan, what a scan found (`crate::dcs`).
    Dcs(crate::dcs::Msg),
    /// The store's writer says the store takes what it is given again (`None`), or what is wrong.
    Stored(Option<crate::writer::Trouble>),
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

impl Command {
    /// What the command is, in a few words, for the log.
    pub fn what(&self) -> &'static str {
        match self {
            Command::Control { request, .. } => match request {
                Request::Status => "a status request",
                Request::Policy { .. } => "a policy change",
                Request::Adopt { .. } => "an adoption",
                Request::Register { .. } => "a registration",
                Request::Release { .. } => "a release",
                Request::SlurmProlog { .. } => "a prolog's notice",
                Request::SlurmEpilog { .. } => "an epilog's notice",
                Request::Progress => "a progress request",
                Request::Timeline { .. } => "a timeline request",
            },
            Command::Slurm(crate::slurm::Msg::Scanned { .. }) => "Slurm discovery's findings",
            Command::Slurm(crate::slurm::Msg::Told { .. }) => "the places the controller told",
            Command::Dcs(_) => "a message of dcs",
            Command::Stored(_) => "the store's writer's word",
            Command::Stop => "the stop",
            Command::Reload { .. } => "the configuration read again",
        }
    }
}

/// The daemon's address: where threads send their commands (a feature's threads get an outlet of their own
/// messages from it: [`Outlet::map`]).
pub type Mailbox = Outlet<Command>;

/// A mailbox, and the inbox the daemon reads it from.
pub fn mailbox() -> (Mailbox, Receiver<Command>) {
    let (tx, rx) = mpsc::channel();
    (Outlet::new(move |c| tx.send(c).is_ok()), rx)
}
