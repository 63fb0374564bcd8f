//! Job cgroups: one directory per controller under `lockstep/` (v1), or one directory under `lockstep/` (v2).
//!
//! A [`Backend`] knows one hierarchy layout and creates job cgroups with their limits; the resulting
//! [`JobCgroup`] is the only handle lockstep acts on afterwards (join, list, kill, remove).

pub mod bandwidth;
mod files;
mod job;
pub mod knobs;
mod mounts;
pub mod procfs;
mod v1;
mod v2;

use std::path::PathBuf;

pub use files::{join, procs_below, procs_within, read_procs, remove_dir, Bounds, Cut, Walk, JOB_TREE};
pub use job::{Backend, CreateError, JobCgroup, Limits, Version, PARENT};
pub use knobs::{weight_to_shares, Knobs};
pub use mounts::{perf_event_dir, unified_mount};
pub use v1::V1;
pub use v2::V2;

use mounts::{mounts, perf_event_root_in, Mount};

/// The backend for this machine: v2 when the unified hierarchy has the cpuset and cpu controllers (v2-only
/// machines, and hybrids that moved them), else v1 when its cpuset and cpu hierarchies are mounted.
pub fn detect() -> Result<Box<dyn Backend>, NoHierarchy> {
    let all = mounts();
    let has = |m: &Mount, c: &str| m.controllers.iter().any(|x| x == c);
    if let Some(m) = all.iter().find(|m| m.v2 && has(m, "cpuset") && has(m, "cpu")) {
        return Ok(Box::new(V2::new(m.path.clone())));
    }
    let mut v1: Vec<(String, PathBuf)> = all
        .iter()
        .filter(|m| !m.v2)
        .flat_map(|m| m.controllers.iter().map(move |c| (c.clone(), m.path.clone())))
        .collect();
    // perf_event not bound to v1 lives, implicitly, on the unified hierarchy: a job directory there gives
    // per-cgroup counters (and membership) even though that hierarchy has no other controller.
    if let Some(root) = perf_event_root_in(&all).filter(|_| !v1.iter().any(|(c, _)| c == "perf_event")) {
        v1.push(("perf_event".into(), root));
    }
    let v1 = V1::new(v1);
    if v1.has("cpuset") && v1.has("cpu") {
        return Ok(Box::new(v1));
    }
    Err(NoHierarchy)
}

/// No cgroup hierarchy lockstep can use is mounted here.
#[derive(Debug, thiserror::Error)]
#[error("no usable cgroup hierarchy: need cgroup v2 with cpuset+cpu, or cgroup v1 cpuset and cpu mounts")]
pub struct NoHierarchy;

#[cfg(test)]
mod tests;
