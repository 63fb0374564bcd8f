//! Experiment results: one row per job run of a co-scheduling or counters experiment, per lock benchmark run, and
//! per result of a scale experiment, the timelines an experiment recorded, and any kind's own records.

mod locks;
mod records;
mod runs;
mod scale;
mod timelines;

pub use locks::LockRun;
pub use records::Record;
pub use runs::ExperimentRun;
pub use scale::ScaleRecord;
pub use timelines::TimelineRecord;
