//! The node's SQLite store, the only place lockstep speaks SQL. Node state ([`node`]: jobs, the agent's restore
//! journal and decisions, counter samples, Slurm rows) and experiment results ([`lab`]) are separate modules over
//! one file; the schema grows by numbered migrations ([`schema`]).

mod db;
mod error;
mod lab;
mod node;
mod schema;

pub use db::{now, resolve_path, Store, APPLICATION_ID, DEFAULT_PATH};
pub use error::{Error, Result};
pub use lab::{ExperimentRun, Record, TimelineRecord};
pub use node::{Action, Decision, JobRow, JournalEntry, Journaled, ManagedJob, NewJob, RowName, SlurmJob, ACTIONS};
