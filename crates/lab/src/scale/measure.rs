//! What a scale case measures, from the agents' decision records of every node: agreement and favoured share
//! (`favour` records), co-run share (`freeze`/`thaw`), and the spread of the agents' slot switches (`slot`).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::harness::cluster::GangEvent;
use lockstep_core::ident::JobKey;
use lockstep_store::{Action, Decision};

/// How a job's nodes favoured it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Favoured {
    /// Of the slots in which at least one of its nodes favoured it, the share in which all of them did.
    pub agreement: f64,
    /// The share of slots some node favoured it in: what the matrix gave it.
    pub share: f64,
    /// The slots measured: from the first slot every node of the job had favoured it by to the last slot every
    /// node still favoured it in (before, a node may not have taken the job on yet; after, it may have ended).
    pub first: u64,
    /// Last slot measured.
    pub last: u64,
    /// Slots measured in which not every node favoured it, and some node recorded no switch to the slot at all
    /// (its agent switched late by more than the slot, or not at all).
    pub unswitched: u32,
    /// Slots measured in which not every node favoured it although every node switched to the slot: some node
    /// held another place for it (a change of place read late).
    pub elsewhere: u32,
}

/// The `favour` records of `job` (on every node) against its `nodes`; `None` when no node favoured it (the
/// policy has no slots). A node of the job that never favoured it while others did makes the agreement 0 over the
/// slots the others favoured it in. The nodes' `slot` records tell why a measured slot was not agreed.
pub fn favoured(records: &[Decision], job: &str, nodes: &[String]) -> Option<Favoured> {
    let job = Some(job.parse::<JobKey>().ok()?);
    let of_job = |d: &Decision| nodes.iter().any(|n| n == d.node.as_str());
    let mut by_slot: BTreeMap<u64, BTreeSet<&str>> = BTreeMap::new();
    let mut span: HashMap<&str, (u64, u64)> = HashMap::new();
    for d in records.iter().filter(|d| d.action == Action::Favour && d.job == job) {
        if !of_job(d) {
            continue;
        }
        by_slot.entry(d.slot).or_default().insert(d.node.as_str());
        let s = span.entry(d.node.as_str()).or_insert((d.slot, d.slot));
        *s = (s.0.min(d.slot), s.1.max(d.slot));
    }
    let (&any_first, _) = by_slot.first_key_value()?;
    let (&any_last, _) = by_slot.last_key_value()?;
    if span.len() < nodes.len() {
        let share = by_slot.len() as f64 / (any_last - any_first + 1) as f64;
        let (first, last, unswitched, elsewhere) = (any_first, any_last, 0, 0);
        return Some(Favoured { agreement: 0.0, share, first, last, unswitched, elsewhere });
    }
    let first = span.values().map(|s| s.0).max().expect("a node");
    let last = span.values().map(|s| s.1).min().expect("a node");
    if first > last {
        // The nodes' favoured slots never overlap in time.
        return Some(Favoured { agreement: 0.0, share: 0.0, first, last, unswitched: 0, elsewhere: 0 });
    }
    let measured: Vec<(u64, &BTreeSet<&str>)> = by_slot.range(first..=last).map(|(k, n)| (*k, n)).collect();
    let all = measured.iter().filter(|(_, n)| n.len() == nodes.len()).count();
    let apart: Vec<u64> = measured.iter().filter(|(_, n)| n.len() < nodes.len()).map(|(k, _)| *k).collect();
    // Which of the job's nodes switched to which slot: read only when some slot was not agreed.
    let switched: HashSet<(&str, u64)> = if apart.is_empty() {
        HashSet::new()
    } else {
        records.iter().filter(|d| d.action == Action::Slot && of_job(d)).map(|d| (d.node.as_str(), d.slot)).collect()
    };
    let unswitched =
        apart.iter().filter(|&&k| nodes.iter().any(|node| !switched.contains(&(node.as_str(), k)))).count();
    Some(Favoured {
        agreement: all as f64 / measured.len().max(1) as f64,
        share: measured.len() as f64 / (last - first + 1) as f64,
        first,
        last,
        unswitched: unswitched as u32,
        elsewhere: (apart.len() - unswitched) as u32,
    })
}

/// The share of `[from, to]` (seconds since the epoch) during which no node had `job` frozen, from the nodes'
/// `freeze` and `thaw` records (a freeze without its thaw lasts to `to`).
pub fn co_run(records: &[Decision], job: &str, from: f64, to: f64) -> f64 {
    if to <= from {
        return 1.0;
    }
    let Ok(job) = job.parse::<JobKey>() else { return 1.0 };
    let mut per_node: BTreeMap<&str, Vec<&Decision>> = BTreeMap::new();
    for d in records.iter().filter(|d| d.job.as_ref() == Some(&job)) {
        if matches!(d.action, Action::Freeze | Action::Thaw) {
            per_node.entry(d.node.as_str()).or_default().push(d);
        }
    }
    let mut frozen: Vec<(f64, f64)> = Vec::new();
    for list in per_node.values_mut() {
        list.sort_by(|a, b| a.time.total_cmp(&b.time));
        let mut since: Option<f64> = None;
        for d in list.iter() {
            match (d.action, since) {
                (Action::Freeze, None) => since = Some(d.time),
                (Action::Thaw, Some(t)) => {
                    frozen.push((t, d.time));
                    since = None;
                }
                _ => {}
            }
        }
        frozen.extend(since.map(|t| (t, to)));
    }
    // The union of the intervals, clipped to the window.
    frozen.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut total, mut reach) = (0.0, from);
    for (a, b) in frozen {
        let (a, b) = (a.max(reach), b.min(to));
        if b > a {
            total += b - a;
            reach = b;
        }
    }
    1.0 - total / (to - from)
}

/// When Slurm's gang scheduler held `job` suspended within `[from, to]` (seconds since the epoch), as intervals in
/// seconds from `from`, from its suspensions and resumptions (`events`, oldest first); a suspension without its
/// resumption lasts to `to`.
pub fn suspensions(events: &[GangEvent], job: lockstep_slurm::SlurmJobId, from: f64, to: f64) -> Vec<(f64, f64)> {
    let mut held = Vec::new();
    let mut since: Option<f64> = None;
    for e in events.iter().filter(|e| e.job == job && e.time >= from && e.time <= to) {
        match (e.suspended, since) {
            (true, None) => since = Some(e.time),
            (false, Some(t)) => {
                held.push((t - from, e.time - from));
                since = None;
            }
            _ => {}
        }
    }
    held.extend(since.map(|t| (t - from, to - from)));
    held
}

/// For every slot that two or more nodes switched, the time between the first and the last switch, in
/// milliseconds (`slot` records of every node).
pub fn switch_spreads(records: &[Decision]) -> Vec<f64> {
    let mut by_slot: BTreeMap<u64, (f64, f64, u32)> = BTreeMap::new();
    for d in records.iter().filter(|d| d.action == Action::Slot) {
        let e = by_slot.entry(d.slot).or_insert((f64::MAX, f64::MIN, 0));
        *e = (e.0.min(d.time), e.1.max(d.time), e.2 + 1);
    }
    by_slot.values().filter(|e| e.2 >= 2).map(|e| (e.1 - e.0) * 1e3).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_slurm::SlurmJobId;

    #[test]
    fn a_jobs_suspensions_are_paired_and_one_left_open_lasts_to_the_end() {
        let e = |time, job, suspended| GangEvent { time, job: SlurmJobId(job), suspended };
        let events = [
            e(99.0, 1, true),
            e(100.0, 1, false),
            e(101.0, 1, true),
            e(102.0, 2, true),
            e(103.5, 1, false),
            e(103.5, 1, false),
            e(110.0, 1, true),
        ];
        assert_eq!(suspensions(&events, SlurmJobId(1), 100.0, 112.0), [(1.0, 3.5), (10.0, 12.0)]);
        assert_eq!(suspensions(&events, SlurmJobId(2), 100.0, 105.0), [(2.0, 5.0)]);
        assert!(suspensions(&events, SlurmJobId(3), 100.0, 105.0).is_empty());
    }

    fn record(node: &str, slot: u64, time: f64, job: Option<&str>, action: Action) -> Decision {
        Decision {
            time,
            node: node.parse().unwrap(),
            policy: "gang".into(),
            slot,
            active_row: 0,
            rows: 1,
            job: job.map(|j| j.parse().unwrap()),
            action,
            duration_us: 0.0,
            prompt_us: None,
        }
    }

    fn favour(node: &str, slot: u64) -> Decision {
        record(node, slot, slot as f64, Some("j"), Action::Favour)
    }

    #[test]
    fn agreement_counts_the_slots_all_nodes_favour_within_the_common_span() {
        let nodes = ["n1".to_string(), "n2".to_string()];
        // n1 favours every even slot from 0; n2 took the job on at slot 4 and favours 4, 6, 8 and also 5.
        let mut r: Vec<Decision> = (0..10).step_by(2).map(|k| favour("n1", k)).collect();
        r.extend([4, 5, 6, 8].map(|k| favour("n2", k)));
        r.push(record("n3", 7, 7.0, Some("j"), Action::Favour));
        // Both nodes switched every slot but n1 missed slot 5's boundary.
        r.extend((0..10).filter(|&k| k != 5).map(|k| record("n1", k, k as f64, None, Action::Slot)));
        r.extend((0..10).map(|k| record("n2", k, k as f64, None, Action::Slot)));
        let f = favoured(&r, "j", &nodes).unwrap();
        assert_eq!((f.first, f.last), (4, 8));
        assert!((f.agreement - 0.75).abs() < 1e-9, "{f:?}");
        assert!((f.share - 0.8).abs() < 1e-9, "{f:?}");
        assert_eq!((f.unswitched, f.elsewhere), (1, 0), "slot 5: n1 did not switch to it");
        // Had n1 switched to slot 5, it held another place for the job there.
        r.push(record("n1", 5, 5.0, None, Action::Slot));
        let f = favoured(&r, "j", &nodes).unwrap();
        assert_eq!((f.unswitched, f.elsewhere), (0, 1));
        // A node that never favours the job: no agreement.
        let only_n1: Vec<Decision> = r.iter().filter(|d| d.node.as_str() == "n1").cloned().collect();
        assert!(favoured(&only_n1, "j", &nodes).unwrap().agreement.abs() < 1e-12);
        assert!(favoured(&[], "j", &nodes).is_none());
    }

    #[test]
    fn co_run_is_the_time_no_node_has_the_job_frozen() {
        let f = |node: &str, t: f64, a: Action| record(node, 0, t, Some("j"), a);
        let r = [
            f("n1", 1.0, Action::Freeze),
            f("n1", 2.0, Action::Thaw),
            f("n2", 1.5, Action::Freeze),
            f("n2", 3.0, Action::Thaw),
            f("n2", 9.0, Action::Freeze),
        ];
        // Frozen somewhere in [1, 3] and [9, 10]: 3 of 10 s.
        assert!((co_run(&r, "j", 0.0, 10.0) - 0.7).abs() < 1e-9);
        assert!((co_run(&[], "j", 0.0, 10.0) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn spreads_are_per_slot_across_nodes() {
        let s = |node: &str, slot: u64, t: f64| record(node, slot, t, None, Action::Slot);
        let r = [s("n1", 1, 10.0), s("n2", 1, 10.002), s("n3", 1, 10.001), s("n1", 2, 11.0)];
        let spreads = switch_spreads(&r);
        assert_eq!(spreads.len(), 1);
        assert!((spreads[0] - 2.0).abs() < 1e-6);
    }
}
