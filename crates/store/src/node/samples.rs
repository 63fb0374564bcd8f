//! Counter samples of the agent's jobs: cumulative counts per job, event and time, kept for a retention period.

use lockstep_core::ident::{JobKey, NodeName};
use lockstep_core::sample::Sample;
use rusqlite::params;

use crate::db::Store;

impl Store {
    /// Writes a batch of samples in one transaction.
    pub fn insert_samples(&mut self, samples: &[Sample]) -> crate::error::Result<()> {
        let tx = self.conn.transaction()?;
        {
            let mut stmt = tx.prepare_cached(
                "INSERT INTO samples (job, node, time, event, value, enabled, running) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            for s in samples {
                stmt.execute(params![
                    s.job.to_string(),
                    s.node.as_str(),
                    s.time,
                    s.event,
                    s.value as i64,
                    s.enabled as i64,
                    s.running as i64
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Deletes samples older than `before` (seconds since the epoch); returns how many.
    pub fn expire_samples(&self, before: f64) -> crate::error::Result<usize> {
        Ok(self.conn.execute("DELETE FROM samples WHERE time < ?1", params![before])?)
    }

    /// The samples of `job` (every node), oldest first.
    pub fn samples(&self, job: &JobKey) -> crate::error::Result<Vec<Sample>> {
        self.query_samples("WHERE job = ?1 ORDER BY time, rowid", params![job.to_string()])
    }

    /// The latest sample of every event of `job` on `node` (the job's final counts once it has ended).
    pub fn latest_samples(&self, job: &JobKey, node: &NodeName) -> crate::error::Result<Vec<Sample>> {
        let job = job.to_string();
        self.query_samples(
            "WHERE job = ?1 AND node = ?2
               AND time = (SELECT max(time) FROM samples WHERE job = ?1 AND node = ?2)
             ORDER BY rowid",
            params![job, node.as_str()],
        )
    }

    /// The samples `filter` selects; a row whose job or node is no valid name (written by an older build under
    /// rules this one refuses) is no job's sample here, and left out.
    fn query_samples(&self, filter: &str, args: impl rusqlite::Params) -> crate::error::Result<Vec<Sample>> {
        let mut stmt = self
            .conn
            .prepare(&format!("SELECT job, node, time, event, value, enabled, running FROM samples {filter}"))?;
        let rows = stmt.query_map(args, |r| {
            let (Ok(job), Ok(node)) = (r.get::<_, String>(0)?.parse(), r.get::<_, String>(1)?.parse()) else {
                return Ok(None);
            };
            Ok(Some(Sample {
                job,
                node,
                time: r.get(2)?,
                event: r.get(3)?,
                value: r.get::<_, i64>(4)? as u64,
                enabled: r.get::<_, i64>(5)? as u64,
                running: r.get::<_, i64>(6)? as u64,
            }))
        })?;
        let mut samples = Vec::new();
        for row in rows {
            samples.extend(row?);
        }
        Ok(samples)
    }
}

#[cfg(test)]
mod tests {
    use super::Sample;
    use crate::db::Store;

    fn sample(job: &str, time: f64, event: &str, value: u64) -> Sample {
        Sample {
            job: job.parse().unwrap(),
            node: "n1".parse().unwrap(),
            time,
            event: event.into(),
            value,
            enabled: 10,
            running: 5,
        }
    }

    #[test]
    fn samples_round_trip_and_expire() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("s.db")).unwrap();
        store
            .insert_samples(&[
                sample("a", 100.0, "task-clock", 1),
                sample("a", 100.0, "page-faults", 2),
                sample("a", 101.0, "task-clock", 3),
                sample("a", 101.0, "page-faults", 4),
                sample("b", 101.0, "task-clock", 9),
            ])
            .unwrap();
        assert_eq!(store.samples(&"a".parse().unwrap()).unwrap().len(), 4);
        let latest = store.latest_samples(&"a".parse().unwrap(), &"n1".parse().unwrap()).unwrap();
        assert_eq!(latest, vec![sample("a", 101.0, "task-clock", 3), sample("a", 101.0, "page-faults", 4)]);
        assert_eq!(store.expire_samples(100.5).unwrap(), 2);
        assert_eq!(store.samples(&"a".parse().unwrap()).unwrap().len(), 2);
        assert!(store.latest_samples(&"nope".parse().unwrap(), &"n1".parse().unwrap()).unwrap().is_empty());
        // A row an older build wrote under a name this one refuses is no job's sample.
        let old = "INSERT INTO samples (job, node, time, event, value, enabled, running)
                   VALUES ('a', 'a node', 102.0, 'task-clock', 5, 10, 5)";
        store.conn.execute(old, []).unwrap();
        assert_eq!(store.samples(&"a".parse().unwrap()).unwrap().len(), 2, "the row of no valid node is left out");
    }
}
