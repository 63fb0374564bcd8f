//! The topology model against every shared fixture (numbers from the fixtures' README) and the live machine.

use serde_json::{json, Value};

use super::Machine;
use crate::testutil::{fixture, fixture_dir};

fn topo_json(name: &str) -> Value {
    serde_json::from_str(&fixture(name).to_json()).unwrap()
}

#[test]
fn raptorlake_x86_backend_has_core_types() {
    let t = topo_json("intel-raptorlake-i7-1370p");
    assert_eq!(
        (t["packages"].clone(), t["numa_nodes"].clone(), t["cores"].clone(), t["pus"].clone()),
        (json!(1), json!(1), json!(14), json!(20))
    );
    assert_eq!(
        t["kinds"],
        json!([
            {"label": "P", "pus": "0-11", "cores": 6, "core_type": "IntelCore", "efficiency": 1, "max_freq_mhz": null},
            {"label": "E", "pus": "12-19", "cores": 8, "core_type": "IntelAtom", "efficiency": 0, "max_freq_mhz": null}
        ])
    );
    assert_eq!(t["numa"], json!([{"os_index": 0, "pus": "0-19", "memory_bytes": 0}]));
    assert_eq!(t["distances"], Value::Null);
}

#[test]
fn raptorlake_linux_backend_has_frequencies() {
    let t = topo_json("intel-raptorlake-i7-1370p-linux");
    assert_eq!((t["cores"].clone(), t["pus"].clone()), (json!(14), json!(20)));
    assert_eq!(
        t["kinds"],
        json!([
            {"label": "P", "pus": "0-11", "cores": 6, "core_type": null, "efficiency": 1, "max_freq_mhz": 5000},
            {"label": "E", "pus": "12-19", "cores": 8, "core_type": null, "efficiency": 0, "max_freq_mhz": 3900}
        ])
    );
}

#[test]
fn gb10_big_cores_come_first() {
    let t = topo_json("nvidia-gb10");
    assert_eq!((t["packages"].clone(), t["cores"].clone(), t["pus"].clone()), (json!(1), json!(20), json!(20)));
    assert_eq!(t["kinds"][0]["label"], "P");
    assert_eq!(t["kinds"][0]["pus"], "5-9,15-19");
    assert_eq!(t["kinds"][0]["cores"], 10);
    assert_eq!(t["kinds"][0]["efficiency"], 1);
    assert_eq!(t["kinds"][1]["label"], "E");
    assert_eq!(t["kinds"][1]["pus"], "0-4,10-14");
    assert_eq!(t["kinds"][1]["efficiency"], 0);
}

#[test]
fn xeon_two_numa_nodes_interleaved() {
    let t = topo_json("xeon-2numa-24pu");
    assert_eq!(
        (t["packages"].clone(), t["numa_nodes"].clone(), t["cores"].clone(), t["pus"].clone()),
        (json!(2), json!(2), json!(12), json!(24))
    );
    assert_eq!(
        t["kinds"],
        json!([{"label": "P", "pus": "0-23", "cores": 12, "core_type": null, "efficiency": 0, "max_freq_mhz": null}])
    );
    assert_eq!(t["numa"][0]["pus"], "0,2,4,6,8,10,12,14,16,18,20,22");
    assert_eq!(t["numa"][1]["pus"], "1,3,5,7,9,11,13,15,17,19,21,23");
    assert_eq!(t["distances"], json!([[10, 20], [20, 10]]));
}

#[test]
fn amd_numa_os_indexes_out_of_pu_order() {
    let t = topo_json("amd-8numa-distances");
    assert_eq!(
        (t["packages"].clone(), t["numa_nodes"].clone(), t["cores"].clone(), t["pus"].clone()),
        (json!(8), json!(8), json!(16), json!(16))
    );
    let pus: Vec<&str> = t["numa"].as_array().unwrap().iter().map(|n| n["pus"].as_str().unwrap()).collect();
    assert_eq!(pus, ["2-3", "0-1", "4-5", "10-11", "8-9", "6-7", "12-13", "14-15"]);
    let os: Vec<u64> = t["numa"].as_array().unwrap().iter().map(|n| n["os_index"].as_u64().unwrap()).collect();
    assert_eq!(os, [0, 1, 2, 3, 4, 5, 6, 7]);
    let d = t["distances"].as_array().unwrap();
    assert_eq!(d.len(), 8);
    for (i, row) in d.iter().enumerate() {
        for (j, v) in row.as_array().unwrap().iter().enumerate() {
            assert_eq!(v.as_u64().unwrap(), if i == j { 10 } else { 20 });
        }
    }
}

#[test]
fn json_has_exactly_the_documented_fields() {
    let t = topo_json("intel-raptorlake-i7-1370p");
    let keys: Vec<&String> = t.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 7);
    for k in ["packages", "numa_nodes", "cores", "pus", "kinds", "numa", "distances"] {
        assert!(t.get(k).is_some(), "missing {k}");
    }
}

#[test]
fn every_fixture_loads_and_renders() {
    for entry in std::fs::read_dir(fixture_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "xml") {
            let m = Machine::from_xml(&path).unwrap();
            assert_eq!(m.all_pus().len(), m.pus, "{}", path.display());
            let kinds_pus: usize = m.kinds.iter().map(|k| k.pus.len()).sum();
            assert_eq!(kinds_pus, m.pus, "kinds partition the PUs of {}", path.display());
            assert!(m.render().contains("CPU kinds"));
        }
    }
}

#[test]
fn live_machine_matches_sysfs() {
    let m = Machine::live().unwrap();
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let online = crate::cpulist::CpuList::parse(&online).unwrap();
    assert!(m.all_pus().is_subset(&online));
    assert_eq!(m.pus, m.all_pus().len());
    assert!(!m.kinds.is_empty());
    assert_eq!(m.kinds[0].label, "P");
    assert!(m.numa_nodes >= 1);
}

#[test]
fn bad_xml_is_a_usage_error() {
    let dir = lockstep_scratch::tempdir().unwrap();
    let bad = dir.path().join("bad.xml");
    std::fs::write(&bad, "<not a topology/>").unwrap();
    assert!(Machine::from_xml(&bad).is_err());
    assert!(Machine::from_xml(&dir.path().join("missing.xml")).is_err());
}

#[test]
fn a_topology_without_memory_says_so() {
    let m = fixture("intel-raptorlake-i7-1370p");
    let text = m.render();
    assert!(text.starts_with("Machine (memory not in the topology) from"), "{text}");
    assert!(!text.contains("0MB"), "{text}");
}

#[test]
fn meminfo_totals_are_read_in_kib() {
    assert_eq!(super::mem_total_kib("MemTotal:       24731184 kB\nMemFree: 1 kB\n"), Some(24_731_184));
    assert_eq!(super::mem_total_kib("Node 0 MemTotal:       13854440 kB\n"), Some(13_854_440));
    assert_eq!(super::mem_total_kib("MemFree: 1 kB\n"), None);
}
