//! Jobs started by `lockstep run`: their placement, cgroup, PID and outcome.

use rusqlite::{params, ErrorCode};
use serde::Serialize;

use crate::db::{now, Store};
use crate::error::Error;
use lockstep_core::cgroup_record::CgroupRecord;
use lockstep_core::ident::{JobName, ProcessRef};
use lockstep_core::place::Placement;

/// A new job, as `lockstep run` records it before creating its cgroup.
pub struct NewJob<'a> {
    /// Job name.
    pub name: &'a JobName,
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
    /// The supervising process.
    pub supervisor: ProcessRef,
}

/// The name a row of `lockstep run`'s jobs holds: a job name, or the text of a name an older build accepted and
/// this one refuses (`slurm-3`, kept for Slurm's jobs since), which still shows in the history and whose job
/// `reconcile` still ends, but names no job anything can be asked of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RowName {
    /// A job name.
    Job(JobName),
    /// The text of a name this build refuses.
    Refused(String),
}

impl RowName {
    fn read(text: String) -> Self {
        match text.parse() {
            Ok(name) => Self::Job(name),
            Err(_) => Self::Refused(text),
        }
    }
}

impl std::fmt::Display for RowName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Job(name) => name.fmt(f),
            Self::Refused(text) => f.pad(text),
        }
    }
}

impl Serialize for RowName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One row of `lockstep jobs`.
#[derive(Clone, Debug, Serialize)]
pub struct JobRow {
    /// Store id.
    pub id: i64,
    /// Job name.
    pub name: RowName,
    /// running, done, failed or lost.
    pub state: String,
    /// argv.
    pub command: Vec<String>,
    /// The command's PID.
    pub pid: Option<i32>,
    /// The `lockstep run` supervising it.
    pub supervisor: ProcessRef,
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
    pub cgroup: Option<CgroupRecord>,
    /// Start time (seconds since the epoch).
    pub started_at: f64,
    /// End time.
    pub ended_at: Option<f64>,
    /// Exit status (128+signal when killed).
    pub exit_status: Option<i32>,
    /// Why the job failed or was lost.
    pub note: Option<String>,
}

impl Store {
    /// Records a running job and its placement; fails with [`Error::NameInUse`] if a running job has the name.
    pub fn insert_job(&mut self, job: &NewJob<'_>) -> crate::error::Result<i64> {
        let tx = self.conn.transaction()?;
        let inserted = tx.execute(
            "INSERT INTO jobs (name, state, command, supervisor_pid, supervisor_start, weight, mem_limit, started_at)
             VALUES (?1, 'running', ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                job.name.as_str(),
                serde_json::to_string(job.command)?,
                job.supervisor.pid,
                job.supervisor.start as i64,
                job.weight.map(|w| w as i64),
                job.mem_limit.map(|m| m as i64),
                now()
            ],
        );
        match inserted {
            Err(rusqlite::Error::SqliteFailure(e, _)) if e.code == ErrorCode::ConstraintViolation => {
                return Err(Error::name_in_use(job.name))
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
    pub fn set_cgroup(&self, id: i64, cgroup: &CgroupRecord) -> crate::error::Result<()> {
        self.conn.execute("UPDATE jobs SET cgroup = ?2 WHERE id = ?1", params![id, serde_json::to_string(cgroup)?])?;
        Ok(())
    }

    /// Records the PID of the job's command.
    pub fn set_pid(&self, id: i64, pid: i32) -> crate::error::Result<()> {
        self.conn.execute("UPDATE jobs SET pid = ?2 WHERE id = ?1", params![id, pid])?;
        Ok(())
    }

    /// Ends a job with its final state, exit status and note.
    pub fn finish(
        &self,
        id: i64,
        state: &str,
        exit_status: Option<i32>,
        note: Option<&str>,
    ) -> crate::error::Result<()> {
        self.conn.execute(
            "UPDATE jobs SET state = ?2, exit_status = ?3, note = ?4, ended_at = ?5 WHERE id = ?1",
            params![id, state, exit_status, note, now()],
        )?;
        Ok(())
    }

    /// Forgets job `id` as if it had never been recorded: a job refused before its command started (bad input
    /// changes nothing).
    pub fn forget_job(&mut self, id: i64) -> crate::error::Result<()> {
        let tx = self.conn.transaction()?;
        tx.execute("DELETE FROM placements WHERE job_id = ?1", params![id])?;
        tx.execute("DELETE FROM jobs WHERE id = ?1", params![id])?;
        tx.commit()?;
        Ok(())
    }

    /// Deletes the jobs that ended before `before` (seconds since the epoch), with their placements; returns how
    /// many. Running jobs are kept however old.
    pub fn expire_jobs(&mut self, before: f64) -> crate::error::Result<usize> {
        let tx = self.conn.transaction()?;
        tx.execute(
            "DELETE FROM placements WHERE job_id IN
               (SELECT id FROM jobs WHERE state != 'running' AND ended_at < ?1)",
            params![before],
        )?;
        let n = tx.execute("DELETE FROM jobs WHERE state != 'running' AND ended_at < ?1", params![before])?;
        tx.commit()?;
        Ok(n)
    }

    /// Jobs, newest first: running ones only unless `all`.
    pub fn jobs(&self, all: bool) -> crate::error::Result<Vec<JobRow>> {
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
                name: RowName::read(r.get(1)?),
                state: r.get(2)?,
                command: serde_json::from_str(&command).unwrap_or_default(),
                pid: r.get(4)?,
                supervisor: ProcessRef { pid: r.get(5)?, start: r.get::<_, i64>(6)? as u64 },
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

#[cfg(test)]
mod tests {
    use super::RowName;
    use crate::db::Store;
    use rusqlite::params;

    /// Writes a job's row and its placement as any build may have: the name as text.
    fn insert(store: &Store, name: &str, state: &str, ended: Option<f64>) {
        let job = "INSERT INTO jobs (name, state, command, supervisor_pid, supervisor_start, started_at, ended_at)
                   VALUES (?1, ?2, '[]', 1, 1, 50.0, ?3)";
        store.conn.execute(job, params![name, state, ended]).unwrap();
        let place = "INSERT INTO placements (job_id, policy, pus, mems, cores) VALUES (?1, 'any', '0', '0', 1)";
        store.conn.execute(place, [store.conn.last_insert_rowid()]).unwrap();
    }

    #[test]
    fn ended_jobs_leave_after_their_history_and_running_ones_stay() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("lockstep.db")).unwrap();
        for (name, state, ended) in
            [("old", "done", Some(100.0)), ("new", "failed", Some(300.0)), ("run", "running", None)]
        {
            insert(&store, name, state, ended);
        }
        assert_eq!(store.expire_jobs(200.0).unwrap(), 1);
        let mut names: Vec<String> = store.jobs(true).unwrap().into_iter().map(|j| j.name.to_string()).collect();
        names.sort();
        assert_eq!(names, ["new", "run"]);
        let placements: i64 = store.conn.query_row("SELECT count(*) FROM placements", [], |r| r.get(0)).unwrap();
        assert_eq!(placements, 2);
        // A running job is kept however old.
        assert_eq!(store.expire_jobs(1e12).unwrap(), 1);
        assert_eq!(store.jobs(true).unwrap().len(), 1);
    }

    #[test]
    fn a_row_of_a_name_since_refused_is_kept_as_its_text_and_is_no_job_name() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        insert(&store, "lu", "running", None);
        insert(&store, "slurm-3", "running", None);
        let names: Vec<RowName> = store.jobs(false).unwrap().into_iter().map(|j| j.name).collect();
        assert_eq!(names, [RowName::Refused("slurm-3".into()), RowName::Job("lu".parse().unwrap())]);
        assert_eq!(format!("{:<9}|{}", names[0], serde_json::to_string(&names[1]).unwrap()), "slurm-3  |\"lu\"");
    }
}
