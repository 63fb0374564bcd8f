//! Placement policies against the shared fixtures, with the exact PU sets.

use super::{place, Placement};
use crate::testutil::fixture;

fn pl(fixture_name: &str, policy: &str, cpus: Option<usize>) -> Placement {
    place(&fixture(fixture_name), policy.parse().unwrap(), cpus)
        .unwrap_or_else(|e| panic!("{fixture_name} {policy} {cpus:?}: {e}"))
}

fn check(fixture_name: &str, policy: &str, cpus: Option<usize>, pus: &str, mems: &str, cores: usize) {
    let p = pl(fixture_name, policy, cpus);
    assert_eq!(
        (p.pus.to_string().as_str(), p.mems.to_string().as_str(), p.cores),
        (pus, mems, cores),
        "{fixture_name} {policy} {cpus:?}"
    );
}

fn rejects(fixture_name: &str, policy: &str, cpus: Option<usize>) -> String {
    policy.parse().and_then(|kind| place(&fixture(fixture_name), kind, cpus)).expect_err("must be rejected").to_string()
}

const RPL: &str = "intel-raptorlake-i7-1370p";
const RPL_LINUX: &str = "intel-raptorlake-i7-1370p-linux";
const GB10: &str = "nvidia-gb10";
const XEON: &str = "xeon-2numa-24pu";
const AMD: &str = "amd-8numa-distances";

#[test]
fn hybrid_intel_by_kind() {
    for f in [RPL, RPL_LINUX] {
        check(f, "p-only", None, "0-11", "0", 6);
        check(f, "e-only", None, "12-19", "0", 8);
        // The hybrid-CPU paper's Cm: as many P-cores as E-cores (6 + 6 here), all PUs of those cores.
        check(f, "mixed", None, "0-17", "0", 12);
        check(f, "any", None, "0-19", "0", 14);
        check(f, "numa-local", None, "0-19", "0", 14);
        check(f, "spread", None, "0-19", "0", 14);
    }
}

#[test]
fn cpus_fill_whole_cores_first() {
    check(RPL, "p-only", Some(3), "0-2", "0", 2);
    check(RPL, "p-only", Some(4), "0-3", "0", 2);
    check(RPL, "e-only", Some(3), "12-14", "0", 3);
    check(RPL, "mixed", Some(3), "0-1,12", "0", 2);
    check(RPL, "mixed", Some(6), "0-3,12-13", "0", 4);
    check(RPL, "any", Some(1), "0", "0", 1);
}

#[test]
fn gb10_kinds_are_interleaved_in_os_order() {
    check(GB10, "p-only", None, "5-9,15-19", "0", 10);
    check(GB10, "e-only", None, "0-4,10-14", "0", 10);
    check(GB10, "mixed", None, "0-19", "0", 20);
    check(GB10, "mixed", Some(4), "0-1,5-6", "0", 4);
    check(GB10, "p-only", Some(6), "5-9,15", "0", 6);
}

#[test]
fn xeon_numa_policies() {
    check(XEON, "numa-local", None, "0,2,4,6,8,10,12,14,16,18,20,22", "0", 6);
    check(XEON, "numa-local", Some(4), "0,2,12,14", "0", 2);
    check(XEON, "spread", Some(4), "0-1,12-13", "0-1", 2);
    check(XEON, "spread", None, "0-23", "0-1", 12);
    check(XEON, "p-only", None, "0-23", "0-1", 12);
    check(XEON, "any", Some(2), "0,12", "0-1", 1);
}

#[test]
fn amd_numa_os_indexes_are_respected() {
    // NUMA node 0 holds PUs 2-3 (node 1 holds 0-1).
    check(AMD, "numa-local", Some(2), "2-3", "0", 2);
    check(AMD, "numa-local", None, "2-3", "0", 2);
    check(AMD, "spread", Some(4), "0,2,4,10", "0-3", 4);
    check(AMD, "spread", Some(8), "0,2,4,6,8,10,12,14", "0-7", 8);
    check(AMD, "any", Some(2), "0-1", "0-7", 2);
    check(AMD, "p-only", Some(3), "0-2", "0-1", 3);
}

#[test]
fn unsatisfiable_requests_are_rejected_with_a_reason() {
    assert!(rejects(XEON, "e-only", None).contains("one core kind"));
    assert!(rejects(AMD, "mixed", None).contains("one core kind"));
    assert!(rejects(RPL, "any", Some(40)).contains("only 20 PU"));
    assert!(rejects(RPL, "p-only", Some(13)).contains("only 12 PU"));
    assert!(rejects(XEON, "numa-local", Some(13)).contains("largest has 12"));
    assert!(rejects(AMD, "numa-local", Some(3)).contains("largest has 2"));
    assert!(rejects(RPL, "any", Some(0)).contains("at least one"));
    assert!(rejects(RPL, "fastest", None).contains("unknown placement policy"));
}

#[test]
fn json_shape() {
    let v = serde_json::to_value(pl(RPL, "p-only", None)).unwrap();
    assert_eq!(v, serde_json::json!({"policy": "p-only", "pus": "0-11", "mems": "0", "cores": 6}));
}
