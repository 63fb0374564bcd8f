//! Experiment results: one row per job run of a co-scheduling or counters experiment, and per lock benchmark run.

mod locks;
mod runs;

pub use locks::LockRun;
pub use runs::ExperimentRun;
