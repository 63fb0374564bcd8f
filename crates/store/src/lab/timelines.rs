//! Timelines an experiment recorded: which job's ranks ran on which CPU over a short window of one case, as the
//! agent saw it (the lab stores the agent's answer as JSON and draws it in the report).

use rusqlite::params;

use crate::db::Store;

/// One recorded window of a case.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TimelineRecord {
    /// Experiment name.
    pub experiment: String,
    /// Start time of the `experiment run` invocation.
    pub session: f64,
    /// The case's policy label.
    pub policy: String,
    /// The case's workloads, joined by `+`.
    pub mix: String,
    /// The case's repetition, from 1.
    pub repetition: u32,
    /// The timeline, as JSON.
    pub data: String,
}

impl Store {
    /// Records one timeline.
    pub fn add_timeline(&self, t: &TimelineRecord) -> crate::error::Result<()> {
        self.conn.execute(
            "INSERT INTO experiment_timelines (experiment, session, policy, mix, repetition, data)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![t.experiment, t.session, t.policy, t.mix, t.repetition, t.data],
        )?;
        Ok(())
    }

    /// The timelines session `session` of `experiment` recorded, in the order they were.
    pub fn timelines(&self, experiment: &str, session: f64) -> crate::error::Result<Vec<TimelineRecord>> {
        let mut stmt = self.conn.prepare(
            "SELECT experiment, session, policy, mix, repetition, data FROM experiment_timelines
             WHERE experiment = ?1 AND session = ?2 ORDER BY id",
        )?;
        let rows = stmt.query_map(params![experiment, session], |r| {
            Ok(TimelineRecord {
                experiment: r.get(0)?,
                session: r.get(1)?,
                policy: r.get(2)?,
                mix: r.get(3)?,
                repetition: r.get(4)?,
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
    fn a_sessions_timelines_come_back_in_order_and_no_others() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        let record = |session, policy: &str| TimelineRecord {
            experiment: "e".into(),
            session,
            policy: policy.into(),
            mix: "lu+ep".into(),
            repetition: 1,
            data: format!("{{\"policy\":\"{policy}\"}}"),
        };
        for (session, policy) in [(1.0, "cfs"), (2.0, "cfs"), (2.0, "gang/200ms")] {
            store.add_timeline(&record(session, policy)).unwrap();
        }
        assert_eq!(store.timelines("e", 2.0).unwrap(), [record(2.0, "cfs"), record(2.0, "gang/200ms")]);
        assert!(store.timelines("other", 2.0).unwrap().is_empty());
    }
}
