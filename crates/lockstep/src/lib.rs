//! lockstep: places parallel jobs on the right cores inside cgroups, co-schedules their ranks across nodes,
//! and measures them. This crate holds the library behind the `lockstep` binary.

pub mod agent;
pub mod cgroup;
pub mod cli;
pub mod cosched;
pub mod cpulist;
pub mod dcs;
pub mod duration;
pub mod error;
pub mod experiment;
pub mod jobs;
pub mod launch;
pub mod place;
pub mod procfs;
pub mod slurm;
pub mod store;
pub mod telemetry;
pub mod topo;

#[cfg(test)]
mod testutil;
