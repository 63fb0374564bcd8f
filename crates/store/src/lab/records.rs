//! An experiment kind's own results, each a JSON document of the kind's fields keyed by experiment, session and
//! what it is: what every kind whose results fit no shared table records (the paired comparison's windows and
//! verdicts, the lock benchmark's runs, the scale experiments' jobs and cases). The fields are the kind's own:
//! the store neither reads nor checks them.

use rusqlite::params;

use crate::db::Store;

/// One result an experiment recorded.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// Experiment name.
    pub experiment: String,
    /// Start time of the `experiment run` invocation.
    pub session: f64,
    /// What it is, in the kind's word (`ab-window`).
    pub record: String,
    /// The result, as JSON.
    pub data: String,
}

impl Store {
    /// Records one result.
    pub fn add_record(&self, r: &Record) -> crate::error::Result<()> {
        self.conn.execute(
            "INSERT INTO experiment_records (experiment, session, record, data) VALUES (?1, ?2, ?3, ?4)",
            params![r.experiment, r.session, r.record, r.data],
        )?;
        Ok(())
    }

    /// The results of kind `record` that session `session` of `experiment` recorded, or its latest session that
    /// recorded any when `None`, in the order they were recorded (empty if none).
    pub fn records(&self, experiment: &str, session: Option<f64>, record: &str) -> crate::error::Result<Vec<Record>> {
        let mut stmt = self.conn.prepare(
            "SELECT experiment, session, record, data FROM experiment_records
             WHERE experiment = ?1 AND record = ?3
               AND session = coalesce(?2, (SELECT max(session) FROM experiment_records
                                           WHERE experiment = ?1 AND record = ?3))
             ORDER BY id",
        )?;
        let rows = stmt.query_map(params![experiment, session, record], read)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The results of kind `record` that every session of `experiment` recorded, session by session, each in the
    /// order recorded (empty if none).
    pub fn records_all(&self, experiment: &str, record: &str) -> crate::error::Result<Vec<Record>> {
        let mut stmt = self.conn.prepare(
            "SELECT experiment, session, record, data FROM experiment_records
             WHERE experiment = ?1 AND record = ?2 ORDER BY session, id",
        )?;
        let rows = stmt.query_map(params![experiment, record], read)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

/// A row of `experiment_records` selected as `experiment, session, record, data`.
fn read(r: &rusqlite::Row<'_>) -> rusqlite::Result<Record> {
    Ok(Record { experiment: r.get(0)?, session: r.get(1)?, record: r.get(2)?, data: r.get(3)? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_s_records_of_one_kind_come_back_in_order_the_latest_session_by_default() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        let rec = |session: f64, record: &str, data: &str| Record {
            experiment: "e".into(),
            session,
            record: record.into(),
            data: data.into(),
        };
        for r in [rec(1.0, "w", "1"), rec(1.0, "w", "2"), rec(2.0, "w", "3"), rec(3.0, "other", "4")] {
            store.add_record(&r).unwrap();
        }
        let data = |rs: Vec<Record>| rs.into_iter().map(|r| r.data).collect::<Vec<_>>();
        assert_eq!(data(store.records("e", Some(1.0), "w").unwrap()), ["1", "2"]);
        assert_eq!(data(store.records("e", None, "w").unwrap()), ["3"]);
        assert_eq!(data(store.records("e", None, "other").unwrap()), ["4"]);
        assert!(store.records("f", None, "w").unwrap().is_empty());
        assert_eq!(data(store.records_all("e", "w").unwrap()), ["1", "2", "3"]);
    }
}
