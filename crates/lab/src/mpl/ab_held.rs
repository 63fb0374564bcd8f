//! What `auto` held in a paired comparison: its slots, each under the policy it had put in force, from the agent's
//! records. The paired run tallies it when its agent has stopped and stores it (record `ab-held`); its report shows
//! it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use lockstep_core::cosched::auto::Choice;
use lockstep_core::cosched::PolicySpec;
use lockstep_store::{Action, Store};

/// What `auto` held while it was in force in one comparison, from the agent's records: its slots, each under the
/// policy of the latest record made by the slot's end (a choice, or a trial's window: `auto` records what it puts
/// in force in the slot's own tick, after the slot's record is timed); the windows of `cfs` its trials tried; and
/// its choices. Read for a comparison whose jobs form one group (they all share PUs, as in every spec here): with
/// several, each slot counts under the group that recorded last.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Held {
    /// The comparison's progress mode.
    pub progress: String,
    /// Its mix.
    pub mix: String,
    /// Its slots that a record governs, by the policy that record put in force.
    pub slots: BTreeMap<String, u32>,
    /// Records of a trial's window of `cfs` (a trial started again may record its window more than once).
    pub cfs_tried: u32,
    /// Records of a choice made, or kept from the set before (not a trial's).
    pub chosen: u32,
}

/// What `auto` held in the comparison of `progress` and `mix` that ran in `span` (seconds since the epoch), tallied
/// from the agent's records in `store` (no slots when the agent no longer keeps them); `None` without a span (a
/// comparison stored by builds that kept none).
pub fn held_in(store: &Store, progress: &str, mix: &str, span: Option<[f64; 2]>) -> anyhow::Result<Option<Held>> {
    let Some([from, to]) = span else { return Ok(None) };
    let slots: Vec<f64> = store
        .decisions_between(Action::Slot, from, to)?
        .into_iter()
        .filter(|d| d.policy == PolicySpec::Auto.name())
        .map(|d| d.time)
        .collect();
    let records = store.auto_choices(from, to)?;
    Ok(Some(Held { progress: progress.to_string(), mix: mix.to_string(), ..Held::tally(&slots, &records) }))
}

impl Held {
    /// Tallies the slot records `slots` under `auto` (their times, seconds since the epoch, oldest first) by its
    /// `records` (time and choice, oldest first): each slot under the latest record made before the next slot's
    /// record (the last slot: any after it). A slot with no record by then (before `auto`'s first) is left out:
    /// what was in force then is in the records of what ran before.
    pub(super) fn tally(slots: &[f64], records: &[(f64, Choice)]) -> Self {
        let mut held = Self::default();
        for c in records.iter().map(|(_, c)| c) {
            if !c.trying {
                held.chosen += 1;
            } else if c.policy == PolicySpec::Cfs.name() {
                held.cfs_tried += 1;
            }
        }
        for (i, &t) in slots.iter().enumerate() {
            let end = slots.get(i + 1).copied().unwrap_or(f64::INFINITY).max(t);
            let latest = records.partition_point(|(at, _)| *at < end);
            if let Some((_, c)) = latest.checked_sub(1).map(|i| &records[i]) {
                *held.slots.entry(c.policy.clone()).or_default() += 1;
            }
        }
        held
    }
}
