//! Runs a locks experiment: one `lockbench --json` per case (under numactl for a memory policy other than the
//! default, with LOCKSTEP_NUMA_MAP for an emulated topology), every result into the store. With `[guests]`, the
//! cases of each number of guests run in that many qemu guests booted for them (tests/vm/up), one lockbench per
//! guest at the same time, and are stored as one run: per-guest mean throughput, Jain's index over every thread of
//! every guest, the highest latency percentiles.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::record::{LockRun, RECORD};
use super::spec::{emulated_nodes, numa_map, per_cpu, plan, Case, Guests, LocksSpec};
use crate::harness::outcome::{Failures, Outcome};
use crate::harness::progress_bar::CaseProgress;
use crate::harness::records;
use crate::harness::Paths;
use lockstep_core::cpulist::CpuList;
use lockstep_store::{now, Store};

/// numactl's arguments for a memory policy (`None`: run lockbench directly).
fn numactl(policy: &str) -> Option<&'static [&'static str]> {
    match policy {
        "bind" => Some(&["--cpunodebind=0", "--membind=0"]),
        "preferred" => Some(&["--preferred=0"]),
        "interleave" => Some(&["--interleave=all"]),
        _ => None,
    }
}

/// Runs every case; returns the session id and the runs that failed.
pub fn run(spec: &LocksSpec, paths: &Paths) -> anyhow::Result<Outcome> {
    let cpus: Vec<usize> = CpuList::online().iter().collect();
    let store = Store::open(&paths.store)?;
    let session = now();
    let cases = plan(spec);
    let mut progress = CaseProgress::new(cases.len());
    let mut failures = Failures::default();
    let mut up: Option<GuestsUp> = None;
    for case in &cases {
        let s = &spec.scenarios[case.scenario];
        let what = format!(
            "{} {} {}x/cpu co {}x {} {} rep {}{}",
            s.name,
            case.lock,
            case.threads_per_cpu,
            case.corunners_per_cpu,
            case.numa,
            case.policy,
            case.repetition,
            if case.guests > 0 { format!(" in {} guest(s)", case.guests) } else { String::new() }
        );
        progress.start(what.clone());
        let run = match &spec.guests {
            None => run_case(spec, &paths.bin, &cpus, case, session)?,
            Some(g) => {
                if up.as_ref().is_none_or(|u| u.count != case.guests) {
                    drop(up.take());
                    up = Some(GuestsUp::boot(paths, g, case.guests)?);
                }
                run_in_guests(spec, up.as_ref().expect("booted above"), g, case, session)?
            }
        };
        // lockbench's errors went to our stderr; a run that did not exit 0 or left no measures failed.
        let failed = super::report::failed(&run);
        if failed {
            let status = match run.exit_status {
                Some(0) => "exit 0 without a result".to_string(),
                Some(c) => format!("exit {c}"),
                None => "killed by a signal".to_string(),
            };
            failures.add(format!("case {what}: lockbench failed ({status}): its errors are above"));
        }
        records::save(&store, &spec.name, session, RECORD, &run)?;
        progress.done(failed);
    }
    drop(up);
    progress.finish();
    Ok(Outcome { session, failures })
}

/// The locks that read lockbench's `--numa-map` (the others ignore it, and lockbench refuses it with them).
const NUMA_AWARE: [&str; 3] = ["cna", "cna-pt", "shfl"];

/// One lockbench run.
fn run_case(spec: &LocksSpec, bin: &Path, cpus: &[usize], case: &Case, session: f64) -> anyhow::Result<LockRun> {
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
    workload_args(&mut cmd, spec, case, threads);
    cmd.args(["--corunners", &corunners.to_string()]);
    cmd.env_remove("LOCKSTEP_NUMA_MAP").env_remove("LOCKSTEP_CNA_BOUND");
    // Only the NUMA-aware locks read the map (lockbench refuses it for the others, which run as on the real
    // topology: the baseline the emulated-node rows compare with).
    if let Some(nodes) = emulated_nodes(&case.numa).map_err(anyhow::Error::msg)? {
        if NUMA_AWARE.contains(&case.lock.as_str()) {
            cmd.args(["--numa-map", &numa_map(cpus, nodes)]);
        }
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
    let measures = json_line(&out).and_then(|j| Measures::of(&[j]));
    Ok(lock_run(
        spec,
        case,
        (threads, corunners, case.numa.clone()),
        measures,
        out.status.code(),
        (session, started_at),
    ))
}

/// lockbench's arguments for `case`'s scenario with `threads` threads, `--json` included (`--lock` unless the
/// workload is `rename`, which measures the kernel's lock).
fn workload_args(cmd: &mut Command, spec: &LocksSpec, case: &Case, threads: u32) {
    let s = &spec.scenarios[case.scenario];
    if s.workload != "rename" {
        cmd.args(["--lock", &case.lock]);
    }
    cmd.args(["--workload", &s.workload, "--threads", &threads.to_string()]);
    cmd.args(["--duration", &spec.duration_s.to_string()]);
    cmd.args(["--cs", &s.cs.to_string(), "--cs-lines", &s.cs_lines.to_string(), "--ncs", &s.ncs.to_string()]);
    if s.cs_block != "none" {
        cmd.args(["--cs-block", &s.cs_block]);
    }
    cmd.arg("--json");
}

/// The JSON object a successful lockbench printed; `None` for a failed run, whatever it printed.
fn json_line(out: &std::process::Output) -> Option<serde_json::Value> {
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).lines().find_map(|l| serde_json::from_str(l).ok()))
        .flatten()
}

/// The stored run of `case`: `shape` is (threads, co-runners, numa label), `times` (session, start).
fn lock_run(
    spec: &LocksSpec,
    case: &Case,
    shape: (u32, u32, String),
    measures: Option<Measures>,
    exit_status: Option<i32>,
    times: (f64, f64),
) -> LockRun {
    let s = &spec.scenarios[case.scenario];
    let (threads, corunners, numa) = shape;
    let m = measures.as_ref();
    LockRun {
        experiment: spec.name.clone(),
        session: times.0,
        scenario: s.name.clone(),
        workload: s.workload.clone(),
        lock: case.lock.clone(),
        threads,
        threads_per_cpu: case.threads_per_cpu,
        corunners,
        numa,
        numa_policy: case.policy.clone(),
        repetition: case.repetition,
        ops: m.map(|m| m.ops),
        throughput_ops_s: m.map(|m| m.throughput),
        fairness_jain: m.map(|m| m.jain),
        p50_ns: m.map(|m| m.p[0]),
        p99_ns: m.map(|m| m.p[1]),
        p999_ns: m.map(|m| m.p[2]),
        exit_status,
        started_at: times.1,
    }
}

/// Guests booted by tests/vm/up, shut down by tests/vm/down when dropped (on every exit path).
struct GuestsUp {
    /// How many.
    count: u32,
    /// The project's root (tests/vm lives there).
    root: std::path::PathBuf,
    /// lockbench, by the absolute path the guests see too (their root file system is the host's).
    lockbench: std::path::PathBuf,
}

impl GuestsUp {
    /// Boots `count` guests shaped as `g` says.
    fn boot(paths: &Paths, g: &Guests, count: u32) -> anyhow::Result<Self> {
        let root = project_root(paths)?;
        let status = Command::new(root.join("tests/vm/up"))
            .args([count.to_string(), "--vcpus".into(), g.vcpus.to_string(), "--numa".into(), g.numa.to_string()])
            .args(["--mem".to_string(), g.mem_mib.to_string()])
            .current_dir(&root)
            .stdout(Stdio::null())
            .status()?;
        let up = GuestsUp { count, lockbench: paths.bin.canonicalize()?.join("lockbench"), root };
        anyhow::ensure!(status.success(), "tests/vm/up {count} failed ({status})");
        Ok(up)
    }
}

impl Drop for GuestsUp {
    fn drop(&mut self) {
        let _ = Command::new(self.root.join("tests/vm/down")).current_dir(&self.root).stdout(Stdio::null()).status();
    }
}

/// The source tree, whose `tests/vm` boots the guests (an installed CLI has none).
fn project_root(paths: &Paths) -> anyhow::Result<std::path::PathBuf> {
    let source = paths.source.as_ref().context("lock experiments in guests need the source tree's tests/vm")?;
    let root = source.canonicalize()?;
    anyhow::ensure!(root.join("tests/vm/up").exists(), "no tests/vm/up under {}", root.display());
    Ok(root)
}

/// One case in every guest at once (tests/vm/exec), stored as one run.
fn run_in_guests(spec: &LocksSpec, up: &GuestsUp, g: &Guests, case: &Case, session: f64) -> anyhow::Result<LockRun> {
    let threads = per_cpu(case.threads_per_cpu, g.vcpus as usize, 1);
    let started_at = now();
    let children: Vec<_> = (1..=case.guests)
        .map(|i| {
            let mut cmd = Command::new(up.root.join("tests/vm/exec"));
            cmd.arg(format!("node{i}")).args(["--timeout", &((spec.duration_s * 20.0) as u64 + 120).to_string()]);
            cmd.arg("--").arg(&up.lockbench);
            workload_args(&mut cmd, spec, case, threads);
            cmd.current_dir(&up.root).stdout(Stdio::piped()).stderr(Stdio::inherit());
            cmd.spawn()
        })
        .collect::<Result<_, _>>()?;
    let mut results = Vec::new();
    let mut status = Some(0);
    for child in children {
        let out = child.wait_with_output()?;
        if !out.status.success() {
            status = out.status.code();
        }
        results.push(json_line(&out));
    }
    let all: Option<Vec<serde_json::Value>> = results.into_iter().collect();
    let measures = all.as_deref().and_then(Measures::of);
    let numa = format!("guests-{}", case.guests);
    Ok(lock_run(spec, case, (threads, 0, numa), measures, status, (session, started_at)))
}

/// What one lockbench run, or several at once (one per guest), measured.
struct Measures {
    /// Operations of every guest.
    ops: u64,
    /// Mean throughput per guest.
    throughput: f64,
    /// Jain's index over every thread of every guest.
    jain: f64,
    /// The highest p50, p99 and p99.9.
    p: [u64; 3],
}

impl Measures {
    /// Combines `lockbench --json` objects; `None` when one lacks a measure.
    fn of(runs: &[serde_json::Value]) -> Option<Measures> {
        let mut ops = 0;
        let mut throughput = 0.0;
        let mut per_thread = Vec::new();
        let mut p = [0u64; 3];
        for r in runs {
            ops += r.get("ops")?.as_u64()?;
            throughput += r.get("throughput_ops_s")?.as_f64()?;
            for t in r.get("per_thread")?.as_array()? {
                per_thread.push(t.as_f64()?);
            }
            for (slot, key) in p.iter_mut().zip(["p50_ns", "p99_ns", "p999_ns"]) {
                *slot = (*slot).max(r.get(key)?.as_u64()?);
            }
        }
        let sum: f64 = per_thread.iter().sum();
        let sumsq: f64 = per_thread.iter().map(|x| x * x).sum();
        let jain = if sumsq > 0.0 { sum * sum / (per_thread.len() as f64 * sumsq) } else { 0.0 };
        (!runs.is_empty()).then(|| Measures { ops, throughput: throughput / runs.len() as f64, jain, p })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guests_combine_into_one_run() {
        let a = serde_json::json!({"ops": 100, "throughput_ops_s": 100.0, "per_thread": [50, 50],
            "p50_ns": 10, "p99_ns": 100, "p999_ns": 1000});
        let b = serde_json::json!({"ops": 300, "throughput_ops_s": 300.0, "per_thread": [150, 150],
            "p50_ns": 20, "p99_ns": 50, "p999_ns": 2000});
        let m = Measures::of(&[a.clone(), b]).unwrap();
        assert_eq!(m.ops, 400);
        assert!((m.throughput - 200.0).abs() < 1e-9);
        // Threads 50, 50, 150, 150: 400² / (4 × 50000) = 0.8.
        assert!((m.jain - 0.8).abs() < 1e-9);
        assert_eq!(m.p, [20, 100, 2000]);
        let mut broken = a;
        broken.as_object_mut().unwrap().remove("per_thread");
        assert!(Measures::of(&[broken]).is_none());
    }
}
