//! Runs a counters experiment: for every case a fresh private agent (counting the case's events at its
//! interval, or nothing), the job through `lockstep run`, and for `perf` cases one `perf stat -p` per rank,
//! attached as the ranks appear, as the counters paper does. Every job's result goes to the store.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::spec::{interval_text, plan, Config, CountersSpec};
use crate::harness::outcome::{Failures, Outcome};
use crate::harness::Paths;
use crate::harness::{agent::PrivateAgent, progress_bar::CaseProgress};
use lockstep_store::{now, ExperimentRun, Store};

/// CPU time and peak memory of the `perf stat` processes of one job.
#[derive(Default)]
struct PerfCost {
    cpu_s: f64,
    rss_bytes: u64,
}

/// Waits for `pid` and adds its CPU time and peak RSS (from `wait4`'s rusage) to `cost`.
fn reap(pid: i32, cost: &mut PerfCost) {
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child; status and usage point to live locals.
    if unsafe { libc::wait4(pid, &raw mut status, 0, &raw mut usage) } == pid {
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        cost.cpu_s += secs(usage.ru_utime) + secs(usage.ru_stime);
        cost.rss_bytes += usage.ru_maxrss as u64 * 1024;
    }
}

/// The rank processes (named like the kernel) in the job's cgroup now.
fn ranks_of(backend: &dyn lockstep_cgroup::Backend, job: &str, program: &str) -> Vec<i32> {
    let dirs = backend.existing(&Path::new(lockstep_cgroup::PARENT).join(job));
    let Some(dir) = dirs.first() else { return Vec::new() };
    lockstep_cgroup::procs_below(dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == program))
        .collect()
}

/// Runs every case; returns the session id and the jobs that failed.
pub fn run(spec: &CountersSpec, paths: &Paths) -> anyhow::Result<Outcome> {
    std::fs::create_dir_all(&paths.work)?;
    let store = Store::open(&paths.store)?;
    let session = now();
    let cases = plan(spec);
    let mut progress = CaseProgress::new(cases.len());
    let mut failures = Failures::default();
    for (i, (repetition, workload, config)) in cases.iter().enumerate() {
        let case = format!("{} {workload} rep {repetition}", config.label(spec));
        progress.start(case.clone());
        let job = format!("{}-{workload}-{i}", spec.name);
        let run = run_case(spec, paths, &job, workload, config, *repetition, session)?;
        let stderr = paths.work.join(format!("{job}.err"));
        let failed = failures.note(&case, &job, run.exit_status, Some(run.verified), Some(&stderr));
        store.add_experiment_run(&run)?;
        progress.done(failed);
    }
    progress.finish();
    Ok(Outcome { session, failures })
}

/// One job under one configuration.
fn run_case(
    spec: &CountersSpec,
    paths: &Paths,
    job: &str,
    workload: &str,
    config: &Config,
    repetition: u32,
    session: f64,
) -> anyhow::Result<ExperimentRun> {
    let events = &spec.event_sets[config.set].1;
    let agent_events = if config.tool.as_deref() == Some("lockstep") { events.clone() } else { String::new() };
    let agent_args = vec![
        "--events".to_string(),
        agent_events,
        "--sample-interval".to_string(),
        interval_text(config.interval),
        "--node".to_string(),
        spec.name.clone(),
    ];
    let agent = PrivateAgent::start(paths, &agent_args)?;
    let w = &spec.workloads[workload];
    let program = paths.bin.join(&w.command[0]);
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.arg("--socket").arg(&agent.socket).arg("--store").arg(&paths.store);
    cmd.args([
        "run",
        "--job",
        job,
        "--place",
        "any",
        "--",
        "sh",
        "-c",
        r#"n=$1; shift; for i in $(seq "$n"); do "$@" || exit; done"#,
        "sh",
    ]);
    cmd.arg(w.repeat.to_string()).arg(paths.bin.join("mpirun")).args(["-n", &spec.ranks.to_string()]);
    cmd.arg(&program).args(&w.command[1..]).arg("--json");
    // Its errors go to a file of the work directory: the last line says why a job failed.
    cmd.stdout(Stdio::piped()).stderr(std::fs::File::create(paths.work.join(format!("{job}.err")))?);
    let started_at = now();
    let t0 = Instant::now();
    let mut child = cmd.spawn()?;
    // perf: attach `perf stat -p` to each rank as soon as it appears, the way the counters paper's driver does.
    let mut perf: Vec<i32> = Vec::new();
    if config.tool.as_deref() == Some("perf") {
        let backend = lockstep_cgroup::detect()?;
        let mut attached: Vec<i32> = Vec::new();
        while child.try_wait()?.is_none() {
            for pid in ranks_of(backend.as_ref(), job, &w.command[0]) {
                if attached.contains(&pid) {
                    continue;
                }
                attached.push(pid);
                let out: PathBuf = paths.work.join(format!("{job}.{pid}.perf.csv"));
                let mut p = Command::new("perf");
                p.args(["stat", "-x", ",", "-e", events, "-p", &pid.to_string(), "-o"]).arg(&out);
                if let Some(i) = config.interval {
                    p.args(["-I", &i.as_millis().to_string()]);
                }
                p.stdout(Stdio::null()).stderr(Stdio::null());
                perf.push(p.spawn()?.id() as i32);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let out = child.wait_with_output()?;
    let wall_s = t0.elapsed().as_secs_f64();
    let mut cost = PerfCost::default();
    for pid in perf.iter().copied() {
        reap(pid, &mut cost);
    }
    let (tool_cpu_s, tool_rss_bytes) = if let Some("perf") = config.tool.as_deref() {
        (Some(cost.cpu_s), Some(cost.rss_bytes))
    } else {
        let pid = agent.child.id() as i32;
        (lockstep_cgroup::procfs::cpu_seconds(pid), lockstep_cgroup::procfs::peak_rss_bytes(pid))
    };
    drop(agent);
    let results: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok().filter(|v| v.get("kernel").is_some()))
        .collect();
    let complete = results.len() == w.repeat as usize;
    Ok(ExperimentRun {
        experiment: spec.name.clone(),
        session,
        policy: config.label(spec),
        progress: "yield".into(),
        placement: "process".into(),
        mix: workload.to_string(),
        mpl: 1,
        workload: workload.to_string(),
        job: job.to_string(),
        repetition,
        time_s: complete.then(|| results.iter().filter_map(|v| v["time_s"].as_f64()).sum()),
        wall_s,
        comm_ratio: None,
        verified: complete && results.iter().all(|v| v["verified"] == true),
        exit_status: out.status.code(),
        started_at,
        tool_cpu_s,
        tool_rss_bytes,
        slot_skew_ms: None,
        ..ExperimentRun::default()
    })
}
