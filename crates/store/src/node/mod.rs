//! Node state: what the agent and `lockstep run` keep about this node's jobs and the agent's own actions.

mod jobs;
mod journal;
mod samples;
mod slurm;

pub use jobs::{JobRow, NewJob, RowName};
pub use journal::{Action, Decision, JournalEntry, Journaled, ManagedJob, ACTIONS};
pub use slurm::SlurmJob;
