//! Lock-benchmark runs: one row per `lockbench` run of a locks experiment.

use rusqlite::params;
use serde::Serialize;

use crate::db::Store;

/// One `lockbench` run.
#[derive(Clone, Debug, PartialEq, Serialize)]
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

impl Store {
    /// Records one run.
    pub fn add_lock_run(&self, r: &LockRun) -> crate::error::Result<()> {
        let int = |v: Option<u64>| v.map(|n| n as i64);
        self.conn.execute(
            "INSERT INTO lock_runs (experiment, session, scenario, workload, lock, threads, threads_per_cpu,
                 corunners, numa, numa_policy, repetition, ops, throughput_ops_s, fairness_jain, p50_ns, p99_ns,
                 p999_ns, exit_status, started_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)",
            params![
                r.experiment,
                r.session,
                r.scenario,
                r.workload,
                r.lock,
                r.threads,
                r.threads_per_cpu,
                r.corunners,
                r.numa,
                r.numa_policy,
                r.repetition,
                int(r.ops),
                r.throughput_ops_s,
                r.fairness_jain,
                int(r.p50_ns),
                int(r.p99_ns),
                int(r.p999_ns),
                r.exit_status,
                r.started_at
            ],
        )?;
        Ok(())
    }

    /// The runs of session `session` of locks experiment `experiment`, or of its latest session when `None`
    /// (empty if it never ran, or made none in that session).
    pub fn lock_runs(&self, experiment: &str, session: Option<f64>) -> crate::error::Result<Vec<LockRun>> {
        let mut stmt = self.conn.prepare(
            "SELECT experiment, session, scenario, workload, lock, threads, threads_per_cpu, corunners, numa,
                    numa_policy, repetition, ops, throughput_ops_s, fairness_jain, p50_ns, p99_ns, p999_ns,
                    exit_status, started_at
             FROM lock_runs
             WHERE experiment = ?1
               AND session = coalesce(?2, (SELECT max(session) FROM lock_runs WHERE experiment = ?1))
             ORDER BY id",
        )?;
        let uint = |v: Option<i64>| v.map(|n| n as u64);
        let rows = stmt.query_map(params![experiment, session], |r| {
            Ok(LockRun {
                experiment: r.get(0)?,
                session: r.get(1)?,
                scenario: r.get(2)?,
                workload: r.get(3)?,
                lock: r.get(4)?,
                threads: r.get(5)?,
                threads_per_cpu: r.get(6)?,
                corunners: r.get(7)?,
                numa: r.get(8)?,
                numa_policy: r.get(9)?,
                repetition: r.get(10)?,
                ops: uint(r.get(11)?),
                throughput_ops_s: r.get(12)?,
                fairness_jain: r.get(13)?,
                p50_ns: uint(r.get(14)?),
                p99_ns: uint(r.get(15)?),
                p999_ns: uint(r.get(16)?),
                exit_status: r.get(17)?,
                started_at: r.get(18)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_runs_round_trip_latest_session_only() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        let run = |session: f64, lock: &str| LockRun {
            experiment: "locks".into(),
            session,
            scenario: "counter".into(),
            workload: "counter".into(),
            lock: lock.into(),
            threads: 4,
            threads_per_cpu: 2.0,
            corunners: 0,
            numa: "emulated-2".into(),
            numa_policy: "default".into(),
            repetition: 1,
            ops: Some(1000),
            throughput_ops_s: Some(1000.0),
            fairness_jain: Some(0.99),
            p50_ns: Some(100),
            p99_ns: Some(1000),
            p999_ns: None,
            exit_status: Some(0),
            started_at: session,
        };
        store.add_lock_run(&run(1.0, "mcs")).unwrap();
        store.add_lock_run(&run(2.0, "cna")).unwrap();
        store.add_lock_run(&run(2.0, "cna-pt")).unwrap();
        assert_eq!(store.lock_runs("locks", None).unwrap(), vec![run(2.0, "cna"), run(2.0, "cna-pt")]);
        assert!(store.lock_runs("other", None).unwrap().is_empty());
    }
}
