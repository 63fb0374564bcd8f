//! Per-job hardware-counter telemetry: event names ([`events`], PMU events in [`pmu`]), counters through
//! perf_event_open
//! ([`counters`]), `perf stat`-style output ([`format`]), the agent's Prometheus exposition
//! ([`exposition`]), and a job's counts over several nodes' agents ([`remote`]).

pub mod counters;
pub mod events;
pub mod exposition;
pub mod format;
pub mod pmu;
pub mod remote;
mod sample;

pub use sample::Sample;
