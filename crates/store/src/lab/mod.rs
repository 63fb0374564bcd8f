//! Experiment results: one row per job run of a co-scheduling or counters experiment, per lock benchmark run, and
//! per result of a scale experiment, and the timelines an experiment recorded.

mod locks;
mod runs;
mod scale;
mod timelines;

pub use locks::LockRun;
pub use runs::ExperimentRun;
pub use scale::ScaleRecord;
pub use timelines::TimelineRecord;
