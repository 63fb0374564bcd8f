//! Per-job hardware-counter telemetry: event names ([`events`], PMU events in [`pmu`]), counters through
//! perf_event_open ([`counters`]), `perf stat`'s output ([`format`]) and counting loop ([`stat`]), the agent's
//! Prometheus exposition ([`exposition`]) of its [`Sample`]s, and a job's counts over several nodes' agents with the
//! wire type they travel in ([`remote`]). Nothing here knows the agent or cgroups: callers hand it threads or
//! cgroup directories to count.

pub mod counters;
pub mod error;
pub mod events;
pub mod exposition;
pub mod format;
pub mod pmu;
pub mod remote;
pub mod stat;

pub use error::{Error, Result};
pub use lockstep_core::sample::Sample;
