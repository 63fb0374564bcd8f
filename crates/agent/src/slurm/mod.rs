//! Slurm on this node, as one feature: its jobs found in Slurm's cgroups and the cgroup work that follows a scan
//! ([`scan`]), the discovery thread that scans and asks slurmctld ([`feed`]), Slurm's configuration as the agent
//! reads it ([`config`]), and what this feature's threads and door tell the daemon ([`Msg`]). The daemon's own
//! part, the jobs taken on and released as Slurm's word says, is `daemon::slurm`.

pub mod config;
pub mod feed;
pub mod scan;

use std::sync::mpsc::Sender;

pub use scan::{numbered, scan, Answer, Chores, Found, Word, ENTRIES, STEPS};

/// What Slurm discovery and the controller's notices send the daemon.
#[derive(Debug)]
pub enum Msg {
    /// What a scan of Slurm's cgroups found, and which jobs slurmctld runs here with their places when that was
    /// due (or why it could not be asked); answered with the cgroup work to do outside the loop.
    Scanned {
        /// The jobs in the cgroup tree.
        found: Vec<Found>,
        /// What slurmctld said, when asked.
        word: Option<Result<Answer, String>>,
        /// What slurmctld said of the jobs the last answer asked about (`Chores::halts`): halted or not.
        halts: Vec<(lockstep_slurm::SlurmJobId, bool)>,
        /// The weight cgroups the last answer asked to make (`Chores::make`): made, or why not.
        made: Vec<(lockstep_slurm::SlurmJobId, Result<(), String>)>,
        /// The work left to the discovery thread.
        reply: Sender<Chores>,
    },
    /// The rows or places the controller's hooks told this node (a notice the metrics door took).
    Told {
        /// The jobs the notice named.
        jobs: Vec<lockstep_slurm::Listed>,
    },
}
