//! Per-job hardware-counter telemetry: event names ([`events`]), counters through perf_event_open
//! ([`counters`]), and `perf stat`-style output ([`format`]).

pub mod counters;
pub mod events;
pub mod format;
