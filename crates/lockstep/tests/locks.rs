//! `lockstep experiment run` with a locks spec (the CNA-in-VMs paper): lockbench over locks, thread counts, co-runners,
//! an emulated NUMA map and numactl policies, every run in the store, the report with its targets; bad specs.

mod common;

use std::path::Path;
use std::process::Command;

use common::{stderr, Env};

#[test]
fn a_locks_experiment_runs_end_to_end_and_reports() {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../build/bin");
    if !bin.join("lockbench").exists() {
        common::missing("build/bin has no lockbench (run make build)");
        return;
    }
    let env = Env::new();
    let spec = env.dir.path().join("spec.toml");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/specs/locks-small.toml");
    std::fs::copy(fixture, &spec).unwrap();
    let reports = env.dir.path().join("reports");
    // lockbench lives beside the installed binary: run that copy.
    let out = Command::new(bin.join("lockstep"))
        .env("LOCKSTEP_STORE", env.store())
        .args(["experiment", "run", spec.to_str().unwrap(), "--reports", reports.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let db = rusqlite::Connection::open(env.store()).unwrap();
    // Each run is a record `lock-run` of the experiment, its fields as JSON.
    let fields =
        ["workload", "lock", "throughput_ops_s", "fairness_jain", "p99_ns", "exit_status", "numa", "corunners"];
    let columns: Vec<String> = fields.iter().map(|f| format!("json_extract(data, '$.{f}') AS {f}")).collect();
    let count = |filter: &str| -> i64 {
        let sql = format!(
            "WITH runs AS (SELECT {} FROM experiment_records WHERE experiment = 'it-locks' AND record = 'lock-run')
             SELECT count(*) FROM runs WHERE {filter}",
            columns.join(", ")
        );
        db.query_row(&sql, [], |r| r.get(0)).unwrap()
    };
    // counter: 2 locks × 2 thread counts × 2 co-runner settings × 2 maps; rename: the kernel once; rename-user:
    // 2 locks × 2 policies.
    assert_eq!(count("1"), 16 + 1 + 4);
    assert_eq!(count("throughput_ops_s > 0 AND fairness_jain > 0 AND p99_ns > 0 AND exit_status = 0"), 21);
    assert_eq!(count("workload = 'rename' AND lock = 'kernel'"), 1);
    assert_eq!(count("numa = 'emulated-2'"), 8);
    assert_eq!(count("corunners > 0"), 8);
    let dir = reports.join("it-locks");
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    for needle in ["## counter — numa emulated-2, memory default, 0 co-runners", "## Targets", "cna-pt", "kernel"] {
        assert!(summary.contains(needle), "{needle:?} missing in {summary}");
    }
    assert!(dir.join("index.html").exists());
    assert!(std::fs::read_dir(&dir).unwrap().flatten().any(|e| e.path().extension().is_some_and(|x| x == "svg")));
    let again = env.run(&["experiment", "report", "it-locks", "--reports", reports.to_str().unwrap()]);
    assert!(again.status.success(), "{}", stderr(&again));

    let bad = env.dir.path().join("bad.toml");
    std::fs::write(&bad, std::fs::read_to_string(&spec).unwrap().replace("\"cna-pt\"]", "\"cna-xx\"]")).unwrap();
    let out = env.run(&["experiment", "run", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("bad experiment spec") && err.contains("lock \"cna-xx\""), "{err}");
}
