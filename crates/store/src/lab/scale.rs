//! Scale-experiment results: per job and per case of a scale experiment, and the scale model's answers, each a
//! JSON document keyed by experiment, session, cluster size and policy (their fields are the lab's to define).

use rusqlite::params;

use crate::db::Store;

/// One result of a scale experiment or of the scale model.
#[derive(Clone, Debug, PartialEq)]
pub struct ScaleRecord {
    /// Experiment name.
    pub experiment: String,
    /// Start time of the `experiment run` invocation.
    pub session: f64,
    /// Cluster size, in nodes.
    pub nodes: u32,
    /// Policy label.
    pub policy: String,
    /// What it is: `job`, `case`, `model`, …
    pub record: String,
    /// The result, as JSON.
    pub data: String,
}

impl Store {
    /// Records one result.
    pub fn add_scale_record(&self, r: &ScaleRecord) -> crate::error::Result<()> {
        self.conn.execute(
            "INSERT INTO scale_results (experiment, session, nodes, policy, record, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![r.experiment, r.session, r.nodes, r.policy, r.record, r.data],
        )?;
        Ok(())
    }

    /// The results of session `session` of `experiment`, or of its latest session when `None`, in the order they
    /// were recorded (empty if it never ran, or recorded none in that session).
    pub fn scale_records(&self, experiment: &str, session: Option<f64>) -> crate::error::Result<Vec<ScaleRecord>> {
        self.scale_query(
            "SELECT experiment, session, nodes, policy, record, data FROM scale_results
             WHERE experiment = ?1
               AND session = coalesce(?2, (SELECT max(session) FROM scale_results WHERE experiment = ?1))
             ORDER BY id",
            experiment,
            session,
        )
    }

    /// The results of every session of `experiment`, session by session, each in the order recorded.
    pub fn scale_records_all(&self, experiment: &str) -> crate::error::Result<Vec<ScaleRecord>> {
        self.scale_query(
            "SELECT experiment, session, nodes, policy, record, data FROM scale_results
             WHERE experiment = ?1 AND (?2 IS NULL OR session = ?2) ORDER BY session, id",
            experiment,
            None,
        )
    }

    /// The rows of `sql` (its parameters `experiment` and `session`) as records.
    fn scale_query(&self, sql: &str, experiment: &str, session: Option<f64>) -> crate::error::Result<Vec<ScaleRecord>> {
        let mut stmt = self.conn.prepare(sql)?;
        let rows = stmt.query_map(params![experiment, session], |r| {
            Ok(ScaleRecord {
                experiment: r.get(0)?,
                session: r.get(1)?,
                nodes: r.get(2)?,
                policy: r.get(3)?,
                record: r.get(4)?,
                data: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_session_or_every_one_is_read_back_in_order() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        let rec = |session: f64, record: &str| ScaleRecord {
            experiment: "x".into(),
            session,
            nodes: 16,
            policy: "gang/500ms".into(),
            record: record.into(),
            data: "{}".into(),
        };
        for r in [rec(1.0, "job"), rec(2.0, "job"), rec(2.0, "case")] {
            store.add_scale_record(&r).unwrap();
        }
        assert_eq!(store.scale_records("x", None).unwrap(), vec![rec(2.0, "job"), rec(2.0, "case")]);
        assert!(store.scale_records("y", None).unwrap().is_empty());
        assert_eq!(store.scale_records("x", Some(1.0)).unwrap(), vec![rec(1.0, "job")]);
        assert!(store.scale_records("x", Some(3.0)).unwrap().is_empty());
        assert_eq!(store.scale_records_all("x").unwrap(), vec![rec(1.0, "job"), rec(2.0, "job"), rec(2.0, "case")]);
    }
}
