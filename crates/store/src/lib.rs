//! The node's SQLite store: jobs, their placements and outcomes; the agent's restore journal and decisions.

mod cosched;
mod experiment;
mod locks;
mod samples;
mod slurm;

pub use cosched::{Action, Decision, JournalEntry, ACTIONS};
pub use experiment::ExperimentRun;
pub use locks::LockRun;
pub use slurm::SlurmJob;

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use rusqlite::{params, Connection};
use serde::Serialize;

use lockstep_cgroup::JobCgroup;
use lockstep_core::place::Placement;

/// Default store location on a node.
pub const DEFAULT_PATH: &str = "/var/lib/lockstep/lockstep.db";

/// Schema, applied in order; `PRAGMA user_version` records how many steps a store has.
const MIGRATIONS: &[&str] = &[
    r"
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    state TEXT NOT NULL,              -- running | done | failed | lost
    command TEXT NOT NULL,            -- JSON array of argv
    supervisor_pid INTEGER NOT NULL,  -- the `lockstep run` process
    supervisor_start INTEGER NOT NULL,-- its start time (clock ticks since boot), against PID reuse
    pid INTEGER,                      -- the command's PID
    cgroup TEXT,                      -- JSON JobCgroup
    weight INTEGER,
    mem_limit INTEGER,
    started_at REAL NOT NULL,
    ended_at REAL,
    exit_status INTEGER,
    note TEXT
);
CREATE UNIQUE INDEX jobs_running_name ON jobs(name) WHERE state = 'running';
CREATE TABLE placements (
    job_id INTEGER NOT NULL REFERENCES jobs(id),
    policy TEXT NOT NULL,
    requested_cpus INTEGER,
    pus TEXT NOT NULL,
    mems TEXT NOT NULL,
    cores INTEGER NOT NULL
);
",
    r"
CREATE TABLE restore_journal (
    file TEXT PRIMARY KEY,            -- a cgroup interface file the agent changed
    value TEXT NOT NULL,              -- what to write back
    job TEXT NOT NULL,
    since REAL NOT NULL
);
CREATE TABLE decisions (
    time REAL NOT NULL,               -- seconds since the epoch when the action was taken
    node TEXT NOT NULL,
    policy TEXT NOT NULL,
    slot INTEGER NOT NULL,
    active_row INTEGER NOT NULL,
    rows INTEGER NOT NULL,
    job TEXT,                         -- NULL for the slot's own record
    action TEXT NOT NULL,             -- slot | replan | freeze | thaw | boost | unboost | gone
    duration_us REAL NOT NULL
);
CREATE INDEX decisions_slot ON decisions(slot);
",
    r"
CREATE TABLE managed (
    name TEXT PRIMARY KEY,            -- a job the agent manages, to take over again after a restart
    saved TEXT NOT NULL               -- JSON: origin, cgroup directories, row, moved PIDs
);
",
    r"
CREATE TABLE experiment_runs (
    id INTEGER PRIMARY KEY,
    experiment TEXT NOT NULL,
    session REAL NOT NULL,            -- start of the `experiment run` that made it
    policy TEXT NOT NULL,             -- cfs | boost/2s | gang/200ms | dedicated
    progress TEXT NOT NULL,           -- MPI progress: yield | busy
    placement TEXT NOT NULL,          -- process | container
    mix TEXT NOT NULL,                -- workloads run together, e.g. lu+ep
    mpl INTEGER NOT NULL,
    workload TEXT NOT NULL,
    job TEXT NOT NULL,
    repetition INTEGER NOT NULL,
    time_s REAL,                      -- the kernel's own timed section
    wall_s REAL NOT NULL,             -- launch to exit
    comm_ratio REAL,                  -- PMPI: mean over ranks of time in MPI / wall time
    verified INTEGER NOT NULL,
    exit_status INTEGER,
    started_at REAL NOT NULL
);
CREATE INDEX experiment_runs_name ON experiment_runs(experiment, session);
",
    r"
CREATE TABLE samples (
    job TEXT NOT NULL,
    node TEXT NOT NULL,
    time REAL NOT NULL,               -- seconds since the epoch
    event TEXT NOT NULL,              -- as named in the agent's event list
    value INTEGER NOT NULL,           -- raw count since the job was attached (not scaled)
    enabled INTEGER NOT NULL,         -- ns the counter was enabled, summed over its targets
    running INTEGER NOT NULL          -- ns it was counting (< enabled when multiplexed)
);
CREATE INDEX samples_job_time ON samples(job, time);
CREATE INDEX samples_time ON samples(time);
",
    r"
ALTER TABLE experiment_runs ADD COLUMN tool_cpu_s REAL;        -- CPU time of the counting tool (agent or perf)
ALTER TABLE experiment_runs ADD COLUMN tool_rss_bytes INTEGER; -- its resident memory (peak)
",
    r"
CREATE TABLE slurm_jobs (
    id INTEGER PRIMARY KEY,           -- a Slurm job the prolog announced on this node
    uid INTEGER NOT NULL,             -- its owner
    row INTEGER,                      -- its co-scheduling row (the same on every node of the job), if given
    since REAL NOT NULL
);
",
    r"
ALTER TABLE experiment_runs ADD COLUMN slot_skew_ms REAL;      -- multi-node jobs: worst gap between nodes' slot switches
",
    r"
ALTER TABLE experiment_runs ADD COLUMN dcs_raises INTEGER;     -- dcs policies: raises while the case ran
ALTER TABLE experiment_runs ADD COLUMN dcs_p50_us REAL;        -- their arrival-to-raise latency, median
ALTER TABLE experiment_runs ADD COLUMN dcs_p99_us REAL;        -- and 99th percentile
",
    r"
CREATE TABLE lock_runs (
    id INTEGER PRIMARY KEY,
    experiment TEXT NOT NULL,
    session REAL NOT NULL,            -- start of the `experiment run` invocation
    scenario TEXT NOT NULL,           -- the spec's scenario name
    workload TEXT NOT NULL,           -- counter | rename | rename-user
    lock TEXT NOT NULL,               -- lock name (kernel: rename's directory lock)
    threads INTEGER NOT NULL,
    threads_per_cpu REAL NOT NULL,
    corunners INTEGER NOT NULL,       -- co-runner processes
    numa TEXT NOT NULL,               -- real | emulated-N
    numa_policy TEXT NOT NULL,        -- default | bind | preferred | interleave
    repetition INTEGER NOT NULL,
    ops INTEGER,
    throughput_ops_s REAL,
    fairness_jain REAL,
    p50_ns INTEGER,
    p99_ns INTEGER,
    p999_ns INTEGER,
    exit_status INTEGER,
    started_at REAL NOT NULL
);
CREATE INDEX lock_runs_name ON lock_runs(experiment, session);
",
];

/// Seconds since the epoch, as a float.
pub fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// The store path: `--store`, else `LOCKSTEP_STORE`, else [`DEFAULT_PATH`].
pub fn resolve_path(flag: Option<&Path>) -> PathBuf {
    flag.map(Path::to_path_buf)
        .or_else(|| std::env::var_os("LOCKSTEP_STORE").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(DEFAULT_PATH))
}

/// An open store.
pub struct Store {
    pub(crate) conn: Connection,
}

/// A new job, as `lockstep run` records it before creating its cgroup.
pub struct NewJob<'a> {
    /// Job name.
    pub name: &'a str,
    /// argv of the command.
    pub command: &'a [String],
    /// Where the job goes.
    pub placement: &'a Placement,
    /// `--cpus`, if given.
    pub requested_cpus: Option<usize>,
    /// `--weight`.
    pub weight: Option<u64>,
    /// `--mem-limit`.
    pub mem_limit: Option<u64>,
    /// PID and start time of the supervising process.
    pub supervisor: (i32, u64),
}

/// One row of `lockstep jobs`.
#[derive(Clone, Debug, Serialize)]
pub struct JobRow {
    /// Store id.
    pub id: i64,
    /// Job name.
    pub name: String,
    /// running, done, failed or lost.
    pub state: String,
    /// argv.
    pub command: Vec<String>,
    /// The command's PID.
    pub pid: Option<i32>,
    /// PID of the `lockstep run` supervising it.
    pub supervisor_pid: i32,
    /// Start time of the supervisor, in clock ticks since boot.
    #[serde(skip)]
    pub supervisor_start: u64,
    /// Placement policy.
    pub policy: String,
    /// PUs (cpulist).
    pub pus: String,
    /// Memory nodes (cpulist).
    pub mems: String,
    /// Cores used.
    pub cores: usize,
    /// CPU weight.
    pub weight: Option<u64>,
    /// Memory limit in bytes.
    pub mem_limit: Option<u64>,
    /// The job's cgroup.
    pub cgroup: Option<JobCgroup>,
    /// Start time (seconds since the epoch).
    pub started_at: f64,
    /// End time.
    pub ended_at: Option<f64>,
    /// Exit status (128+signal when killed).
    pub exit_status: Option<i32>,
    /// Why the job failed or was lost.
    pub note: Option<String>,
}

/// A job name already taken by a running job.
#[derive(Debug, thiserror::Error)]
#[error("job name {0:?} is in use by a running job (pick another name, or wait for it to end)")]
pub struct NameInUse(pub String);

impl Store {
    /// Opens (creating it and its directory if needed) the store at `path`.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create store directory {}", dir.display()))?;
        }
        let mut conn = Connection::open(path).with_context(|| format!("cannot open store {}", path.display()))?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        // In WAL mode NORMAL survives any crash of the process (not of the OS) without an fsync per commit; the
        // agent commits at every slot switch.
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        let version: usize = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        let tx = conn.transaction()?;
        for (i, step) in MIGRATIONS.iter().enumerate().skip(version) {
            tx.execute_batch(step)?;
            tx.pragma_update(None, "user_version", i + 1)?;
        }
        tx.commit()?;
        Ok(Self { conn })
    }

    /// Records a running job and its placement; fails with [`NameInUse`] if a running job has the name.
    pub fn insert_job(&mut self, job: &NewJob<'_>) -> anyhow::Result<i64> {
        let tx = self.conn.transaction()?;
        let inserted = tx.execute(
            "INSERT INTO jobs (name, state, command, supervisor_pid, supervisor_start, weight, mem_limit, started_at)
             VALUES (?1, 'running', ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                job.name,
                serde_json::to_string(job.command)?,
                job.supervisor.0,
                job.supervisor.1 as i64,
                job.weight.map(|w| w as i64),
                job.mem_limit.map(|m| m as i64),
                now()
            ],
        );
        match inserted {
            Err(rusqlite::Error::SqliteFailure(e, _)) if e.code == rusqlite::ErrorCode::ConstraintViolation => {
                return Err(NameInUse(job.name.to_string()).into())
            }
            other => other?,
        };
        let id = tx.last_insert_rowid();
        let p = job.placement;
        tx.execute(
            "INSERT INTO placements (job_id, policy, requested_cpus, pus, mems, cores) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                id,
                p.policy,
                job.requested_cpus.map(|c| c as i64),
                p.pus.to_string(),
                p.mems.to_string(),
                p.cores as i64
            ],
        )?;
        tx.commit()?;
        Ok(id)
    }

    /// Records the job's cgroup once created.
    pub fn set_cgroup(&self, id: i64, cgroup: &JobCgroup) -> anyhow::Result<()> {
        self.conn.execute("UPDATE jobs SET cgroup = ?2 WHERE id = ?1", params![id, serde_json::to_string(cgroup)?])?;
        Ok(())
    }

    /// Records the PID of the job's command.
    pub fn set_pid(&self, id: i64, pid: i32) -> anyhow::Result<()> {
        self.conn.execute("UPDATE jobs SET pid = ?2 WHERE id = ?1", params![id, pid])?;
        Ok(())
    }

    /// Ends a job with its final state, exit status and note.
    pub fn finish(&self, id: i64, state: &str, exit_status: Option<i32>, note: Option<&str>) -> anyhow::Result<()> {
        self.conn.execute(
            "UPDATE jobs SET state = ?2, exit_status = ?3, note = ?4, ended_at = ?5 WHERE id = ?1",
            params![id, state, exit_status, note, now()],
        )?;
        Ok(())
    }

    /// Jobs, newest first: running ones only unless `all`.
    pub fn jobs(&self, all: bool) -> anyhow::Result<Vec<JobRow>> {
        let mut stmt = self.conn.prepare(
            "SELECT j.id, j.name, j.state, j.command, j.pid, j.supervisor_pid, j.supervisor_start, p.policy, p.pus,
                    p.mems, p.cores, j.weight, j.mem_limit, j.cgroup, j.started_at, j.ended_at, j.exit_status, j.note
             FROM jobs j JOIN placements p ON p.job_id = j.id
             WHERE ?1 OR j.state = 'running' ORDER BY j.id DESC",
        )?;
        let rows = stmt.query_map(params![all], |r| {
            let command: String = r.get(3)?;
            let cgroup: Option<String> = r.get(13)?;
            Ok(JobRow {
                id: r.get(0)?,
                name: r.get(1)?,
                state: r.get(2)?,
                command: serde_json::from_str(&command).unwrap_or_default(),
                pid: r.get(4)?,
                supervisor_pid: r.get(5)?,
                supervisor_start: r.get::<_, i64>(6)? as u64,
                policy: r.get(7)?,
                pus: r.get(8)?,
                mems: r.get(9)?,
                cores: r.get::<_, i64>(10)? as usize,
                weight: r.get::<_, Option<i64>>(11)?.map(|w| w as u64),
                mem_limit: r.get::<_, Option<i64>>(12)?.map(|m| m as u64),
                cgroup: cgroup.and_then(|c| serde_json::from_str(&c).ok()),
                started_at: r.get(14)?,
                ended_at: r.get(15)?,
                exit_status: r.get(16)?,
                note: r.get(17)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
