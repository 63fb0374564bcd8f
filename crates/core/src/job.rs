//! What every crate says of a job: how it came under the agent ([`JobOrigin`]), as the status shows it, the
//! store keeps it and the agent saves it; and a Slurm job's ID ([`SlurmJobId`]).

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
/// A Slurm job's ID: what `SLURM_JOB_ID`, `squeue -o %i` and a job's cgroup (`job_<id>`) say. Written as its
/// number, in text and in JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SlurmJobId(pub u64);

impl std::fmt::Display for SlurmJobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for SlurmJobId {
    type Err = String;

    /// A job ID as Slurm writes it: decimal digits only (no sign, no spaces, no array or het-job suffix).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("bad Slurm job ID {s:?} (expected its number, e.g. 42)"));
        }
        s.parse().map(Self).map_err(|_| format!("bad Slurm job ID {s:?} (expected a number below 2^64)"))
    }
}

#[cfg(test)]
mod tests {
    use super::SlurmJobId;

    #[test]
    fn a_slurm_job_id_is_its_digits_only() {
        assert_eq!("42".parse(), Ok(SlurmJobId(42)));
        assert_eq!(SlurmJobId(42).to_string(), "42");
        assert_eq!(serde_json::to_string(&SlurmJobId(42)).unwrap(), "42");
        for bad in ["", "+42", "-1", " 42", "42_1", "4.2", "18446744073709551616"] {
            let e = bad.parse::<SlurmJobId>().unwrap_err();
            assert!(e.contains("bad Slurm job ID"), "{bad:?}: {e}");
        }
    }
}
