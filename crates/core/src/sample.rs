//! One counter reading of one job, as the agent samples, stores and serves it.

use serde::{Deserialize, Serialize};

use crate::ident::{JobKey, NodeName};

/// One event's cumulative count for one job at one time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The job.
    pub job: JobKey,
    /// The node.
    pub node: NodeName,
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

/// The event under which the agent samples a job's co-scheduled time: the nanoseconds in which every one of its
/// ranks on the node was on a CPU at once, of `enabled` (and `running`) nanoseconds in which some rank was (the
/// value of [`RANK_RUNNING`]), since its first rank was seen. Its share is near 1 when the ranks run together
/// whenever they run (alone, or under gang), and near 0 when they never do.
pub const COSCHEDULED: &str = "coscheduled";

/// The event under which the agent samples the time a job ran on the node: the nanoseconds in which some of its
/// ranks was on a CPU, of `enabled` nanoseconds since its first rank was seen.
pub const RANK_RUNNING: &str = "rank-running";

/// The event under which the agent samples a job's waiting time: the nanoseconds in which one of its ranks was
/// runnable but not on a CPU, of `enabled` nanoseconds since its first rank was seen.
pub const RANK_WAITING: &str = "rank-waiting";

/// The latest of `samples` of event `event` (a job's final one once it has ended).
pub fn latest<'a>(samples: &'a [Sample], event: &str) -> Option<&'a Sample> {
    samples.iter().filter(|s| s.event == event).max_by(|a, b| a.time.total_cmp(&b.time))
}

impl Sample {
    /// The share of its `enabled` time this sample's value is (a time event: [`COSCHEDULED`], [`RANK_RUNNING`],
    /// [`RANK_WAITING`]);
    /// `None` before any time passed.
    pub fn share(&self) -> Option<f64> {
        (self.enabled > 0).then(|| self.value as f64 / self.enabled as f64)
    }

    /// The share of the time between `earlier` and this sample that grew its value: the share over that window.
    pub fn share_since(&self, earlier: &Sample) -> Option<f64> {
        let time = self.enabled.checked_sub(earlier.enabled).filter(|&t| t > 0)?;
        Some(self.value.saturating_sub(earlier.value) as f64 / time as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::Sample;

    fn at(value: u64, enabled: u64) -> Sample {
        Sample {
            job: "j".parse().unwrap(),
            node: "n".parse().unwrap(),
            time: 0.0,
            event: "coscheduled".into(),
            value,
            enabled,
            running: enabled,
        }
    }

    #[test]
    fn shares_since_the_start_and_over_a_window() {
        assert_eq!(at(0, 0).share(), None);
        assert_eq!(at(1_000, 4_000).share(), Some(0.25));
        // From 1 of 4 µs to 3 of 8: 2 of the window's 4.
        assert_eq!(at(3_000, 8_000).share_since(&at(1_000, 4_000)), Some(0.5));
        assert_eq!(at(1_000, 4_000).share_since(&at(1_000, 4_000)), None);
    }
}
