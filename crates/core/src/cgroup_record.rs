//! A job's cgroup as lockstep records it (in the store, in the agent's saved jobs): which cgroup version, and its
//! directories. `lockstep_cgroup::JobCgroup` is the handle that acts on one; this is its data alone, so that what
//! keeps it need not depend on the crate that changes cgroups.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Which cgroup version a job cgroup lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Version {
    /// Legacy per-controller hierarchies.
    V1,
    /// The unified hierarchy.
    V2,
}

impl Version {
    /// `v1` or `v2`.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V1 => "v1",
            Version::V2 => "v2",
        }
    }
}

/// A job's cgroup: one directory per v1 controller, or one v2 directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupRecord {
    /// Cgroup version.
    pub version: Version,
    /// The job's directories, one per hierarchy (the first one is used to list processes).
    pub dirs: Vec<PathBuf>,
}
