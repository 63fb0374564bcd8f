//! Experiment results: one row per job run of a co-scheduling or counters experiment (the table those kinds
//! share), the timelines an experiment recorded, and every other kind's records (its fields as JSON, which the
//! store does not read).

mod records;
mod runs;
mod timelines;

pub use records::Record;
pub use runs::ExperimentRun;
pub use timelines::TimelineRecord;
