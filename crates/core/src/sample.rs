//! One counter reading of one job, as the agent samples, stores and serves it.

use serde::{Deserialize, Serialize};

/// One event's cumulative count for one job at one time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Job name.
    pub job: String,
    /// Node name.
    pub node: String,
    /// Seconds since the epoch.
    pub time: f64,
    /// Event name.
    pub event: String,
    /// Raw count since the job was attached.
    pub value: u64,
    /// Nanoseconds enabled.
    pub enabled: u64,
    /// Nanoseconds running.
    pub running: u64,
}
