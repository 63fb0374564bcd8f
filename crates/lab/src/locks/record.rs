//! What a locks experiment records of each `lockbench` run: a record `lock-run` in the store.

use serde::{Deserialize, Serialize};

/// The store's word for a lock run.
pub const RECORD: &str = "lock-run";

/// One `lockbench` run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockRun {
    /// Experiment name.
    pub experiment: String,
    /// Start time of the `experiment run` invocation.
    pub session: f64,
    /// The spec's scenario.
    pub scenario: String,
    /// `counter`, `rename` or `rename-user`.
    pub workload: String,
    /// Lock name (`kernel` for `rename`, which measures the kernel's directory lock).
    pub lock: String,
    /// Threads.
    pub threads: u32,
    /// Threads per CPU of the machine.
    pub threads_per_cpu: f64,
    /// Co-runner processes.
    pub corunners: u32,
    /// `real` (the machine's topology) or `emulated-N` (a CPU-to-node map of N nodes).
    pub numa: String,
    /// numactl memory policy: `default`, `bind`, `preferred` or `interleave`.
    pub numa_policy: String,
    /// Repetition number, from 1.
    pub repetition: u32,
    /// Operations done; `None` when the run failed.
    pub ops: Option<u64>,
    /// Operations per second.
    pub throughput_ops_s: Option<f64>,
    /// Jain's fairness index over the threads' counts.
    pub fairness_jain: Option<f64>,
    /// Latency percentiles (acquisition for `counter`, the rename for the rename workloads).
    pub p50_ns: Option<u64>,
    /// 99th percentile.
    pub p99_ns: Option<u64>,
    /// 99.9th percentile.
    pub p999_ns: Option<u64>,
    /// lockbench's exit status.
    pub exit_status: Option<i32>,
    /// Seconds since the epoch.
    pub started_at: f64,
}
