use std::time::Duration;

use super::rows::{assign, Entry};
use super::{slot, Desired, JobView, PolicySpec, Raise, POLICIES};
use crate::cpulist::CpuList;

fn pus(s: &str) -> CpuList {
    CpuList::parse(s).unwrap()
}

#[test]
fn sharing_jobs_get_different_rows_and_loners_row_zero() {
    let (a, b, c) = (pus("0-1"), pus("1-2"), pus("3"));
    let entries = [
        Entry { name: "a", pus: &a, pinned: None },
        Entry { name: "b", pus: &b, pinned: None },
        Entry { name: "c", pus: &c, pinned: None },
    ];
    let (rows, count) = assign(&entries);
    assert_ne!(rows[0], rows[1]);
    assert_eq!(rows[2], 0);
    assert_eq!(count, 2);
}

#[test]
fn pinned_rows_are_kept_and_others_avoid_them() {
    let all = pus("0-1");
    let entries = [
        Entry { name: "x", pus: &all, pinned: Some(1) },
        Entry { name: "y", pus: &all, pinned: None },
        Entry { name: "z", pus: &all, pinned: None },
    ];
    let (rows, count) = assign(&entries);
    assert_eq!(rows[0], 1);
    assert!(!rows[1..].contains(&1));
    assert_ne!(rows[1], rows[2]);
    assert_eq!(count, 3);
}

#[test]
fn rows_do_not_depend_on_input_order() {
    let all = pus("0-1");
    let names = ["lu-1", "ep-2", "is-3"];
    let forward: Vec<Entry> = names.iter().map(|n| Entry { name: n, pus: &all, pinned: None }).collect();
    let backward: Vec<Entry> = names.iter().rev().map(|n| Entry { name: n, pus: &all, pinned: None }).collect();
    let (f, _) = assign(&forward);
    let (mut b, _) = assign(&backward);
    b.reverse();
    assert_eq!(f, b);
}

#[test]
fn gang_freezes_only_jobs_sharing_pus_with_the_active_row() {
    let (a, b, c) = (pus("0-1"), pus("0-1"), pus("2-3"));
    let jobs = [JobView { row: 0, pus: &a }, JobView { row: 1, pus: &b }, JobView { row: 1, pus: &c }];
    let gang = by_name("gang").build();
    let plan = gang.plan(0, &jobs);
    assert_eq!(plan.iter().map(|d| d.frozen).collect::<Vec<_>>(), [false, true, false]);
    let plan = gang.plan(1, &jobs);
    assert_eq!(plan.iter().map(|d| d.frozen).collect::<Vec<_>>(), [true, false, false]);
}

#[test]
fn boost_raises_the_active_row_and_cfs_does_nothing() {
    let a = pus("0-1");
    let jobs = [JobView { row: 0, pus: &a }, JobView { row: 1, pus: &a }];
    let boost = by_name("boost").build().plan(1, &jobs);
    assert_eq!(boost.iter().map(|d| d.boosted).collect::<Vec<_>>(), [false, true]);
    assert!(boost.iter().all(|d| !d.frozen));
    assert_eq!(by_name("cfs").build().plan(0, &jobs), vec![Desired::default(); 2]);
}

#[test]
fn slot_lengths_parse_within_range() {
    assert_eq!(slot::parse("200ms").unwrap(), Duration::from_millis(200));
    assert_eq!(slot::parse("2s").unwrap(), Duration::from_secs(2));
    assert_eq!(slot::parse("0.5s").unwrap(), Duration::from_millis(500));
    assert_eq!(slot::parse("10ms").unwrap(), slot::MIN);
    for bad in ["9ms", "61s", "2", "fast", "-1s", "nans"] {
        assert!(slot::parse(bad).is_err(), "{bad}");
    }
    assert_eq!(slot::format(Duration::from_millis(200)), "200ms");
    assert_eq!(slot::format(Duration::from_secs(2)), "2s");
}

#[test]
fn slots_come_from_the_wall_clock() {
    let l = Duration::from_millis(100);
    assert_eq!(slot::index(1_000_250_000_000, l), 10_002);
    assert_eq!(slot::start_ns(10_002, l), 1_000_200_000_000);
}

#[test]
fn every_policy_name_parses_and_every_policy_has_its_name() {
    for (name, spec) in POLICIES.0 {
        assert_eq!(name.parse::<PolicySpec>().unwrap(), *spec);
        assert_eq!(spec.name().parse::<PolicySpec>().unwrap(), *spec, "{name} shows as {}", spec.name());
    }
    assert_eq!(by_name("dcs").name(), "dcs:weight", "plain dcs shows its raise");
}

#[test]
fn dcs_names_parse_to_their_slot_plan_and_raise() {
    for (name, spec) in POLICIES.0.iter().filter(|(n, _)| n.starts_with("dcs")) {
        assert!(spec.raises().is_some(), "{name}");
        assert_eq!(spec.slotted(), name.starts_with("dcs+boost"), "{name}");
    }
    assert_eq!(by_name("dcs").raises(), Some(Raise::DEFAULT));
    assert_eq!(by_name("dcs:nice").raises(), Some(Raise::Nice));
    let all = pus("0-1");
    let jobs = [JobView { row: 0, pus: &all }, JobView { row: 1, pus: &all }];
    let plain = by_name("dcs:weight").build().plan(0, &jobs);
    assert!(plain.iter().all(|d| *d == Desired::default()), "dcs alone plans like cfs");
    let with_boost = by_name("dcs+boost").build().plan(1, &jobs);
    assert!(!with_boost[0].boosted && with_boost[1].boosted, "dcs+boost plans like boost");
    assert!(by_name("cfs").raises().is_none() && !by_name("cfs").slotted());
    assert!(by_name("gang").slotted() && by_name("boost").slotted());
    for bad in ["dcs:fifo", "dcs+gang", "dcs:", "round-robin"] {
        let err = bad.parse::<PolicySpec>().err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("dcs+boost:nice"), "{bad}: {err}");
    }
}

fn by_name(name: &str) -> PolicySpec {
    name.parse().unwrap()
}

#[test]
fn rows_from_outside_are_bounded_and_never_make_zero_rows() {
    use super::rows::{assign, check, Entry, MAX_ROWS};
    assert!(check(Some(MAX_ROWS - 1)).is_ok() && check(None).is_ok());
    assert!(check(Some(u32::MAX)).unwrap_err().to_string().contains("out of range"));
    let all = pus("0-1");
    let entries =
        [Entry { name: "a", pus: &all, pinned: Some(u32::MAX) }, Entry { name: "b", pus: &all, pinned: None }];
    let (rows, count) = assign(&entries);
    assert!(count >= 2 && rows.iter().all(|&r| r < count), "{rows:?} of {count}");
}
