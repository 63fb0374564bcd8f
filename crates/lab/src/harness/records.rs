//! A kind's own results in the store: each a JSON document of the kind's type, under the kind's word for it
//! (`lock-run`, `scale`, `ab-window`), which the store keeps without reading. What a kind records is its own type;
//! the store has one table for every kind.

use serde::de::DeserializeOwned;
use serde::Serialize;

use lockstep_store::{Record, Store};

/// Records `value` as a `record` of session `session` of experiment `experiment`.
pub fn save<T: Serialize>(
    store: &Store,
    experiment: &str,
    session: f64,
    record: &str,
    value: &T,
) -> anyhow::Result<()> {
    let data = serde_json::to_string(value)?;
    store.add_record(&Record { experiment: experiment.into(), session, record: record.into(), data })?;
    Ok(())
}

/// The `record`s of session `session` of `experiment` (its latest that recorded any when `None`), each with its
/// session, in the order recorded; an error names a record this build cannot read.
pub fn load<T: DeserializeOwned>(
    store: &Store,
    experiment: &str,
    session: Option<f64>,
    record: &str,
) -> anyhow::Result<Vec<(f64, T)>> {
    parse(store.records(experiment, session, record)?)
}

/// The `record`s of every session of `experiment`, session by session, each with its session.
pub fn load_all<T: DeserializeOwned>(store: &Store, experiment: &str, record: &str) -> anyhow::Result<Vec<(f64, T)>> {
    parse(store.records_all(experiment, record)?)
}

/// Each record's session and value.
fn parse<T: DeserializeOwned>(records: Vec<Record>) -> anyhow::Result<Vec<(f64, T)>> {
    records
        .into_iter()
        .map(|r| match serde_json::from_str(&r.data) {
            Ok(value) => Ok((r.session, value)),
            Err(e) => Err(anyhow::anyhow!(
                "experiment {}: a {} record in the store is not one this build reads ({e})",
                r.experiment,
                r.record
            )),
        })
        .collect()
}
