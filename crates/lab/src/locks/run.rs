//! Runs a locks experiment: one `lockbench --json` per case (under numactl for a memory policy other than the
//! default, with LOCKSTEP_NUMA_MAP for an emulated topology), every result into the store.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{emulated_nodes, numa_map, per_cpu, plan, Case, LocksSpec};
use crate::runner::progress_bar;
use crate::Paths;
use lockstep_core::cpulist::CpuList;
use lockstep_store::{now, LockRun, Store};

/// numactl's arguments for a memory policy (`None`: run lockbench directly).
fn numactl(policy: &str) -> Option<&'static [&'static str]> {
    match policy {
        "bind" => Some(&["--cpunodebind=0", "--membind=0"]),
        "preferred" => Some(&["--preferred=0"]),
        "interleave" => Some(&["--interleave=all"]),
        _ => None,
    }
}

/// Runs every case; returns the session id.
pub fn run(spec: &LocksSpec, paths: &Paths) -> anyhow::Result<f64> {
    let cpus: Vec<usize> = CpuList::online().iter().collect();
    let store = Store::open(&paths.store)?;
    let session = now();
    let cases = plan(spec);
    let bar = progress_bar(cases.len());
    for case in &cases {
        let s = &spec.scenarios[case.scenario];
        bar.set_message(format!(
            "{} {} {}x/cpu co {}x {} {} #{}",
            s.name, case.lock, case.threads_per_cpu, case.corunners_per_cpu, case.numa, case.policy, case.repetition
        ));
        store.add_lock_run(&run_case(spec, &paths.bin, &cpus, case, session)?)?;
        bar.inc(1);
    }
    bar.finish_with_message("done");
    Ok(session)
}

/// One lockbench run.
fn run_case(spec: &LocksSpec, bin: &Path, cpus: &[usize], case: &Case, session: f64) -> anyhow::Result<LockRun> {
    let s = &spec.scenarios[case.scenario];
    let threads = per_cpu(case.threads_per_cpu, cpus.len(), 1);
    let corunners = per_cpu(case.corunners_per_cpu, cpus.len(), 0);
    let lockbench = bin.join("lockbench");
    let mut cmd = match numactl(&case.policy) {
        Some(args) => {
            let mut c = Command::new("numactl");
            c.args(args).arg(&lockbench);
            c
        }
        None => Command::new(&lockbench),
    };
    if s.workload != "rename" {
        cmd.args(["--lock", &case.lock]);
    }
    cmd.args(["--workload", &s.workload, "--threads", &threads.to_string()]);
    cmd.args(["--duration", &spec.duration_s.to_string(), "--corunners", &corunners.to_string()]);
    cmd.args(["--cs", &s.cs.to_string(), "--cs-lines", &s.cs_lines.to_string(), "--ncs", &s.ncs.to_string()]);
    if s.cs_block != "none" {
        cmd.args(["--cs-block", &s.cs_block]);
    }
    cmd.arg("--json");
    cmd.env_remove("LOCKSTEP_NUMA_MAP").env_remove("LOCKSTEP_CNA_BOUND");
    if let Some(nodes) = emulated_nodes(&case.numa).map_err(anyhow::Error::msg)? {
        cmd.args(["--numa-map", &numa_map(cpus, nodes)]);
    }
    // Its own process group, so that a run killed for hanging takes its co-runners along.
    cmd.stdout(Stdio::piped()).stderr(Stdio::inherit()).process_group(0);
    let started_at = now();
    let mut child = cmd.spawn()?;
    // A run that does not end well after its duration is killed (and recorded as failed).
    let deadline = Instant::now() + Duration::from_secs_f64(spec.duration_s + 60.0);
    while child.try_wait()?.is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if child.try_wait()?.is_none() {
        eprintln!("lockstep: {} did not end {} s after its duration; killed", lockbench.display(), 60);
        // SAFETY: kill(2) on the process group we created for the child; no memory is involved.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    }
    let out = child.wait_with_output()?;
    // A failed run has no measures, whatever it printed.
    let json: Option<serde_json::Value> = out
        .status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).lines().find_map(|l| serde_json::from_str(l).ok()))
        .flatten();
    let field = |k: &str| json.as_ref().and_then(|j| j.get(k).cloned());
    Ok(LockRun {
        experiment: spec.name.clone(),
        session,
        scenario: s.name.clone(),
        workload: s.workload.clone(),
        lock: case.lock.clone(),
        threads,
        threads_per_cpu: case.threads_per_cpu,
        corunners,
        numa: case.numa.clone(),
        numa_policy: case.policy.clone(),
        repetition: case.repetition,
        ops: field("ops").and_then(|v| v.as_u64()),
        throughput_ops_s: field("throughput_ops_s").and_then(|v| v.as_f64()),
        fairness_jain: field("fairness_jain").and_then(|v| v.as_f64()),
        p50_ns: field("p50_ns").and_then(|v| v.as_u64()),
        p99_ns: field("p99_ns").and_then(|v| v.as_u64()),
        p999_ns: field("p999_ns").and_then(|v| v.as_u64()),
        exit_status: out.status.code(),
        started_at,
    })
}
