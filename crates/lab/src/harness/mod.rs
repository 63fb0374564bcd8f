//! The harness every kind of experiment runs on, and nothing of any one kind: where things are ([`Paths`]), the spec's
//! header and shared checks ([`spec`]), the private agent ([`agent`]), teardown on a signal ([`teardown`]), ranks in
//! containers ([`containers`]), the test Slurm cluster ([`cluster`]), the PMPI profiler ([`mpi`]), the progress of a
//! run ([`progress_bar`]) and what it ended with ([`outcome`]), a kind's own records in the store ([`records`]),
//! reports and charts ([`report`], [`plot`], [`timeline`]) and their statistics ([`stats`]).

pub mod agent;
pub mod cluster;
pub mod containers;
mod kind;
pub mod mpi;
pub mod outcome;
pub mod paired;
mod paths;
pub mod plot;
pub mod progress_bar;
pub mod records;
pub mod report;
pub mod spec;
pub mod stats;
pub mod teardown;
pub mod timeline;

pub use kind::Kind;
pub use paths::Paths;
