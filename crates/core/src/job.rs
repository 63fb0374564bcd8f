//! What every crate says of a job: how it came under the agent ([`JobOrigin`]), as the status shows it, the
//! store keeps it and the agent saves it.

use serde::{Deserialize, Serialize};

use crate::names::Names;

/// How a job came under the agent, as `status` shows it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobOrigin {
    /// `lockstep run` registered it.
    #[default]
    Run,
    /// Adopted as existing cgroups (or the cgroups of containers).
    Cgroup,
    /// Adopted as processes, moved into a cgroup the agent made.
    Pids,
    /// A Slurm job the agent found in Slurm's cgroups.
    Slurm,
}

/// The names of [`JobOrigin`], as `status` prints them (serde's lowercase names; a test holds them equal).
pub const ORIGINS: Names<JobOrigin> = Names(&[
    ("run", JobOrigin::Run),
    ("cgroup", JobOrigin::Cgroup),
    ("pids", JobOrigin::Pids),
    ("slurm", JobOrigin::Slurm),
]);

crate::display_by_name!(JobOrigin => ORIGINS);
