//! Slurm jobs the prolog announced to the agent: owner and row, kept until the epilog, so that an agent
//! restarted mid-job still gives the job the row every other node gives it; and the jobs whose epilog ran, kept
//! until their cgroups are gone, so that an agent restarted meanwhile never takes one on again.

use rusqlite::params;

use crate::db::{now, Store};
use lockstep_core::job::SlurmJobId;

/// A job as the prolog announced it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlurmJob {
    /// Slurm job ID.
    pub id: SlurmJobId,
    /// Owner's UID.
    pub uid: u32,
    /// Co-scheduling row, when the controller's prolog assigned one.
    pub row: Option<u32>,
}

impl Store {
    /// Records (or replaces) an announced job.
    pub fn slurm_put(&self, job: &SlurmJob) -> crate::error::Result<()> {
        self.conn.execute(
            "INSERT OR REPLACE INTO slurm_jobs (id, uid, row, since) VALUES (?1, ?2, ?3, ?4)",
            params![job.id.0 as i64, job.uid, job.row, now()],
        )?;
        Ok(())
    }

    /// Marks job `id` ended on this node (its epilog ran), announced or not; its next announcement (a requeued
    /// job's new run) clears the mark.
    pub fn slurm_end(&self, id: SlurmJobId) -> crate::error::Result<()> {
        self.conn.execute(
            "INSERT INTO slurm_jobs (id, uid, row, since, ended) VALUES (?1, 0, NULL, ?2, ?2) \
             ON CONFLICT(id) DO UPDATE SET ended = excluded.ended",
            params![id.0 as i64, now()],
        )?;
        Ok(())
    }

    /// Forgets job `id`, announced or ended.
    pub fn slurm_remove(&self, id: SlurmJobId) -> crate::error::Result<()> {
        self.conn.execute("DELETE FROM slurm_jobs WHERE id = ?1", params![id.0 as i64])?;
        Ok(())
    }

    /// Every announced job that has not ended.
    pub fn slurm_all(&self) -> crate::error::Result<Vec<SlurmJob>> {
        let mut stmt = self.conn.prepare("SELECT id, uid, row FROM slurm_jobs WHERE ended IS NULL ORDER BY id")?;
        let rows = stmt.query_map([], |r| {
            Ok(SlurmJob { id: SlurmJobId(r.get::<_, i64>(0)? as u64), uid: r.get(1)?, row: r.get(2)? })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every job marked ended ([`Store::slurm_end`]).
    pub fn slurm_ended(&self) -> crate::error::Result<Vec<SlurmJobId>> {
        let mut stmt = self.conn.prepare("SELECT id FROM slurm_jobs WHERE ended IS NOT NULL ORDER BY id")?;
        let rows = stmt.query_map([], |r| Ok(SlurmJobId(r.get::<_, i64>(0)? as u64)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announced_jobs_round_trip() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        store.slurm_put(&SlurmJob { id: SlurmJobId(7), uid: 1000, row: Some(1) }).unwrap();
        store.slurm_put(&SlurmJob { id: SlurmJobId(9), uid: 0, row: None }).unwrap();
        store.slurm_put(&SlurmJob { id: SlurmJobId(7), uid: 1000, row: Some(2) }).unwrap();
        assert_eq!(
            store.slurm_all().unwrap(),
            vec![
                SlurmJob { id: SlurmJobId(7), uid: 1000, row: Some(2) },
                SlurmJob { id: SlurmJobId(9), uid: 0, row: None }
            ]
        );
        store.slurm_end(SlurmJobId(7)).unwrap();
        store.slurm_end(SlurmJobId(8)).unwrap();
        assert_eq!(store.slurm_all().unwrap(), vec![SlurmJob { id: SlurmJobId(9), uid: 0, row: None }]);
        assert_eq!(store.slurm_ended().unwrap(), vec![SlurmJobId(7), SlurmJobId(8)]);
        // A requeued job announced again runs again.
        store.slurm_put(&SlurmJob { id: SlurmJobId(8), uid: 5, row: None }).unwrap();
        assert_eq!(store.slurm_ended().unwrap(), vec![SlurmJobId(7)]);
        assert_eq!(store.slurm_all().unwrap().len(), 2);
        store.slurm_remove(SlurmJobId(7)).unwrap();
        assert!(store.slurm_ended().unwrap().is_empty());
    }
}
