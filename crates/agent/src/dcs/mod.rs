//! `dcs` in the agent: message-driven co-scheduling. An eBPF probe on the unified cgroup hierarchy reports each
//! message that arrives for a job; the [`engine::Engine`], which the daemon owns, raises that job for one quantum
//! through the policy's mechanism (a [`raiser::Raiser`]: CPU weight, `SCHED_RR`, nice) and lowers it after; two
//! threads ([`feed`]) carry the probe's arrivals and the jobs' sockets to it as [`Msg`]s. The daemon's own part,
//! which holds the engine and answers them, is `daemon::dcs`.

pub mod diag;
pub mod engine;
pub mod feed;
mod nice;
pub mod port;
pub mod probe;
pub mod processes;
pub mod raiser;
mod rr;
pub mod sockets;
pub mod threads;
mod weight;

use std::sync::mpsc::Sender;
use std::time::Duration;

/// What `dcs`'s threads send the daemon, each for one engine: once the daemon runs another (or none), the answer
/// tells that engine's threads to end.
#[derive(Debug)]
pub enum Msg {
    /// The eBPF probe's arrivals, from the event thread of engine `engine`; answered with how long the thread may
    /// wait for the next one, `None` once that engine has stopped.
    Arrivals {
        /// The engine the thread serves.
        engine: u64,
        /// Messages that arrived.
        arrivals: Vec<probe::Arrival>,
        /// How long to wait.
        reply: Sender<Option<Duration>>,
    },
    /// The scan thread of engine `engine` asks which jobs to scan; `None` once that engine has stopped.
    Watched {
        /// The engine the thread serves.
        engine: u64,
        /// The jobs to scan.
        reply: Sender<Option<Vec<processes::Watched>>>,
    },
    /// What that scan found; answered `false` once the engine has stopped.
    Scanned {
        /// The engine the thread serves.
        engine: u64,
        /// Per job: its ports, counts and processes.
        scanned: Vec<processes::Scanned>,
        /// Whether the engine goes on.
        reply: Sender<bool>,
    },
}
