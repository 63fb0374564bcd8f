//! Experiment runs: one row per job of every case, policy, progress mode and repetition.

use rusqlite::params;
use serde::Serialize;

use crate::db::Store;

/// One job's run in an experiment.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ExperimentRun {
    /// Experiment name.
    pub experiment: String,
    /// Start time of the `experiment run` invocation.
    pub session: f64,
    /// Policy label (`dedicated` for the MPL-1 baseline).
    pub policy: String,
    /// MPI progress mode.
    pub progress: String,
    /// process or container.
    pub placement: String,
    /// Workloads run together, joined by `+`.
    pub mix: String,
    /// Jobs run together.
    pub mpl: u32,
    /// This job's workload.
    pub workload: String,
    /// Job name.
    pub job: String,
    /// Repetition number, from 1.
    pub repetition: u32,
    /// The kernel's reported time.
    pub time_s: Option<f64>,
    /// Wall time from launch to exit.
    pub wall_s: f64,
    /// Mean communication share over the ranks (PMPI).
    pub comm_ratio: Option<f64>,
    /// Whether the kernel verified.
    pub verified: bool,
    /// Exit status of the job.
    pub exit_status: Option<i32>,
    /// Seconds since the epoch.
    pub started_at: f64,
    /// CPU time of the counting tool during the run (counters experiments: the agent, or every `perf stat`).
    pub tool_cpu_s: Option<f64>,
    /// Peak resident memory of the counting tool (summed over `perf stat` processes).
    pub tool_rss_bytes: Option<u64>,
    /// Jobs on several nodes: the largest gap between the nodes' agents switching the same slot while the job's
    /// case ran, in milliseconds.
    pub slot_skew_ms: Option<f64>,
    /// `dcs` policies: raises the agents made while the job's case ran.
    pub dcs_raises: Option<u64>,
    /// Their arrival-to-raise latency, median, in microseconds.
    pub dcs_p50_us: Option<f64>,
    /// Their arrival-to-raise latency, 99th percentile, in microseconds.
    pub dcs_p99_us: Option<f64>,
    /// `auto`: what it chose for the set of jobs this one was in, in order (`gang`, `cfs, gang`).
    pub auto_chose: Option<String>,
    /// A benchmark's score instead of a time (corebench: the sum of its copies' overall scores).
    pub score: Option<f64>,
    /// Placement experiments: `native` on a machine with several core kinds, or `emulated: …` (which topology's
    /// kinds, and the bandwidth limit that stood in for the slower kind).
    pub hybrid: Option<String>,
    /// The job's co-scheduled fraction as the agents measured it (`coscheduled`: the share of the time some of
    /// its ranks ran in which all of them did), the mean over its nodes.
    pub coscheduled: Option<f64>,
}

impl Store {
    /// Records one run.
    pub fn add_experiment_run(&self, r: &ExperimentRun) -> crate::error::Result<()> {
        self.conn.execute(
            "INSERT INTO experiment_runs (experiment, session, policy, progress, placement, mix, mpl, workload, job,
                 repetition, time_s, wall_s, comm_ratio, verified, exit_status, started_at, tool_cpu_s, tool_rss_bytes, slot_skew_ms,
                 dcs_raises, dcs_p50_us, dcs_p99_us, auto_chose, score, hybrid, coscheduled)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22,
                     ?23, ?24, ?25, ?26)",
            params![
                r.experiment,
                r.session,
                r.policy,
                r.progress,
                r.placement,
                r.mix,
                r.mpl,
                r.workload,
                r.job,
                r.repetition,
                r.time_s,
                r.wall_s,
                r.comm_ratio,
                r.verified,
                r.exit_status,
                r.started_at,
                r.tool_cpu_s,
                r.tool_rss_bytes.map(|b| b as i64),
                r.slot_skew_ms,
                r.dcs_raises.map(|n| n as i64),
                r.dcs_p50_us,
                r.dcs_p99_us,
                r.auto_chose,
                r.score,
                r.hybrid,
                r.coscheduled
            ],
        )?;
        Ok(())
    }

    /// The runs of session `session` of `experiment`, or of its latest session when `None` (empty if it never
    /// ran, or made none in that session).
    pub fn experiment_runs(&self, experiment: &str, session: Option<f64>) -> crate::error::Result<Vec<ExperimentRun>> {
        let mut stmt = self.conn.prepare(
            "SELECT experiment, session, policy, progress, placement, mix, mpl, workload, job, repetition, time_s,
                    wall_s, comm_ratio, verified, exit_status, started_at, tool_cpu_s, tool_rss_bytes, slot_skew_ms,
                    dcs_raises, dcs_p50_us, dcs_p99_us, auto_chose, score, hybrid, coscheduled
             FROM experiment_runs
             WHERE experiment = ?1
               AND session = coalesce(?2, (SELECT max(session) FROM experiment_runs WHERE experiment = ?1))
             ORDER BY id",
        )?;
        let rows = stmt.query_map(params![experiment, session], |r| {
            Ok(ExperimentRun {
                experiment: r.get(0)?,
                session: r.get(1)?,
                policy: r.get(2)?,
                progress: r.get(3)?,
                placement: r.get(4)?,
                mix: r.get(5)?,
                mpl: r.get(6)?,
                workload: r.get(7)?,
                job: r.get(8)?,
                repetition: r.get(9)?,
                time_s: r.get(10)?,
                wall_s: r.get(11)?,
                comm_ratio: r.get(12)?,
                verified: r.get(13)?,
                exit_status: r.get(14)?,
                started_at: r.get(15)?,
                tool_cpu_s: r.get(16)?,
                tool_rss_bytes: r.get::<_, Option<i64>>(17)?.map(|b| b as u64),
                slot_skew_ms: r.get(18)?,
                dcs_raises: r.get::<_, Option<i64>>(19)?.map(|n| n as u64),
                dcs_p50_us: r.get(20)?,
                dcs_p99_us: r.get(21)?,
                auto_chose: r.get(22)?,
                score: r.get(23)?,
                hybrid: r.get(24)?,
                coscheduled: r.get(25)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
