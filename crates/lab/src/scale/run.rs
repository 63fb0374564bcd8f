//! Runs a scale experiment: for every cluster size, each job of the stream alone first (its baseline), then for
//! every policy the whole stream on a fresh cluster, with Prometheus scraping every agent; then each job's and each
//! case's measurements go to the store.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::common::ScaleRecord;
use super::common::{stream, CaseResult, JobResult, Scrapes, StreamJob};
use super::measure::{co_run, favoured, suspensions, switch_spreads};
use super::spec::{ScalePolicy, ScaleSpec};
use crate::harness::cluster::Cluster;
use crate::harness::outcome::{Failures, Outcome};
use crate::harness::spec::{PolicyConfig, Progress, Scheduler};
use crate::harness::stats::percentile;
use crate::harness::Paths;
use crate::harness::{mpi::comm_ratio, progress_bar::CaseProgress};
use lockstep_cgroup::procfs;
use lockstep_core::cosched::PolicySpec;
use lockstep_store::{now, Action, Decision, Store};

/// The port Prometheus serves on during a case (loopback only).
const PROMETHEUS_ADDR: &str = "127.0.0.1:19090";

/// The agents' metrics port on every node (tests/cluster/up).
const METRICS_PORT: u16 = 19464;

/// How many times a run of a job alone is tried before its failure ends the experiment.
const BASELINE_ATTEMPTS: u32 = 3;

/// How many runs alone (without the profiler) a job's baseline is the median of.
const BASELINE_RUNS: u32 = 3;

/// How long Prometheus has to stop after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// How often the stream's jobs are polled for.
const POLL: Duration = Duration::from_secs(1);

/// Runs every case; returns the session id and the jobs that failed.
pub fn run(spec: &ScaleSpec, paths: &Paths) -> anyhow::Result<Outcome> {
    std::fs::create_dir_all(&paths.work)?;
    let store = Store::open(&paths.store)?;
    let session = now();
    let cases = spec.nodes.len() * (spec.policies.len() + 1);
    let mut progress = CaseProgress::new(cases);
    let mut failures = Failures::default();
    for &nodes in &spec.nodes {
        let jobs = stream(spec, nodes);
        let mut cluster = Cluster::new(paths, nodes)?;
        progress.start(format!("{nodes} nodes: every job alone"));
        let alone = baselines(spec, &mut cluster, &jobs, paths)?;
        progress.done(false);
        for policy in &spec.policies {
            let what = format!("{nodes} nodes: {}", policy.label());
            progress.start(what.clone());
            let (results, case) = run_case(spec, &mut cluster, policy, &jobs, &alone, paths)?;
            let record = |record: &str, data: String| ScaleRecord {
                experiment: spec.name.clone(),
                session,
                nodes,
                policy: policy.label(),
                record: record.into(),
                data,
            };
            for r in &results {
                record("job", serde_json::to_string(r)?).save(&store)?;
            }
            record("case", serde_json::to_string(&case)?).save(&store)?;
            let before = failures.count();
            for (i, r) in results.iter().enumerate() {
                let job = format!("Slurm job {} (stream job {i})", r.id);
                if r.exit.is_none() {
                    failures.add(format!("case {what}: {job} did not end before the case's deadline"));
                } else {
                    failures.note(
                        &what,
                        &job,
                        r.exit,
                        None,
                        Some(&case_dir(paths, nodes, policy).join(format!("job-{i}.out"))),
                    );
                }
            }
            progress.done(failures.count() > before);
        }
    }
    progress.finish();
    Ok(Outcome { session, failures })
}

/// What a job of the stream takes alone: its wall time, its timed region and its communication share.
#[derive(Clone, Copy, Debug)]
struct Alone {
    /// Wall time, s.
    wall_s: f64,
    /// Its program's timed region, s (`None` when it reports none).
    timed_s: Option<f64>,
    /// Share of the time in MPI, from the PMPI profiler (`None` when it wrote nothing).
    comm: Option<f64>,
}

/// Every distinct (workload, size) of the stream alone on the cluster, under `cfs`, on its first nodes: once with
/// the PMPI profiler preloaded in its ranks (its communication share), then [`BASELINE_RUNS`] times without it.
/// Its baseline is the median of those (wall time and timed region each): one run alone is easily disturbed on a
/// host that also runs every node's daemons (a run right after the cluster came up once took 2.4 times its
/// median), and the profiler's own cost is left out.
fn baselines(
    spec: &ScaleSpec,
    cluster: &mut Cluster,
    jobs: &[StreamJob],
    paths: &Paths,
) -> anyhow::Result<BTreeMap<(usize, usize), Alone>> {
    cluster.set_rows("cluster");
    cluster.apply(&PolicyConfig { scheduler: Scheduler::Lockstep(PolicySpec::Cfs), slot: Duration::from_secs(1) })?;
    let mut alone = BTreeMap::new();
    for j in jobs {
        let key = (j.workload, j.nodes.len());
        if alone.contains_key(&key) {
            continue;
        }
        let first: Vec<u32> = (1..=j.nodes.len() as u32).collect();
        let lone = StreamJob { at: 0.0, nodes: first, workload: j.workload };
        let stem = format!("alone-{}-{}", j.workload, j.nodes.len());
        let pmpi = paths.work.join(format!("{stem}.pmpi.jsonl"));
        let command = program(spec, j, &paths.bin);
        let mut profiled = vec!["env".to_string()];
        profiled.extend(crate::harness::mpi::pmpi_env(paths, &pmpi).into_iter().map(|(k, v)| format!("{k}={v}")));
        profiled.extend(command.iter().cloned());
        let _ = std::fs::remove_file(&pmpi);
        run_alone(spec, cluster, &lone, &paths.work.join(format!("{stem}.pmpi.out")), &profiled)?;
        let comm = comm_ratio(&pmpi);
        let mut walls = Vec::new();
        let mut timings = Vec::new();
        for run in 1..=BASELINE_RUNS {
            let out = paths.work.join(format!("{stem}.{run}.out"));
            let (seconds, region) = run_alone(spec, cluster, &lone, &out, &command)?;
            walls.push(seconds);
            timings.extend(region);
        }
        let timed_s = (timings.len() == walls.len()).then(|| percentile(&mut timings, 0.5));
        alone.insert(key, Alone { wall_s: percentile(&mut walls, 0.5), timed_s, comm });
    }
    Ok(alone)
}

/// One run of `job` alone with `command`, its output in `out`: its wall time and timed region. A rank of a job
/// alone dies now and then (a TCP connect between namespaces failing, a crash in MPI_Init: the jobs of the stream
/// are counted as failed when it happens to them); the run is tried up to [`BASELINE_ATTEMPTS`] times.
fn run_alone(
    spec: &ScaleSpec,
    cluster: &Cluster,
    job: &StreamJob,
    out: &Path,
    command: &[String],
) -> anyhow::Result<(f64, Option<f64>)> {
    for attempt in 1..=BASELINE_ATTEMPTS {
        submit_and_wait(spec, cluster, std::slice::from_ref(job), &[out.to_path_buf()], &[command.to_vec()])?;
        let text = std::fs::read_to_string(out).unwrap_or_default();
        if let (Some(t), Some(0)) = (wall(&text), Cluster::exit_code(&text)) {
            return Ok((t, timed(&text)));
        }
        let _ = std::fs::rename(out, out.with_extension(format!("failed-{attempt}.out")));
    }
    anyhow::bail!(
        "job {:?} on {} nodes failed alone {BASELINE_ATTEMPTS} times (last output {})",
        spec.workloads[job.workload],
        job.nodes.len(),
        out.with_extension(format!("failed-{BASELINE_ATTEMPTS}.out")).display()
    )
}

/// The command line of a job of the stream: its workload with the program in `bin`.
fn program(spec: &ScaleSpec, job: &StreamJob, bin: &Path) -> Vec<String> {
    let mut program = spec.workloads[job.workload].clone();
    program[0] = bin.join(&program[0]).display().to_string();
    program
}

/// The time a job's program reports for its timed region, from its output: the NPB convention, a line
/// `Time in seconds = T` (the kernels of native/workloads print it).
fn timed(text: &str) -> Option<f64> {
    text.lines().find_map(|l| l.trim().strip_prefix("Time in seconds")?.trim().strip_prefix('=')?.trim().parse().ok())
}

/// A job's wall time from its output.
fn wall(text: &str) -> Option<f64> {
    Some(Cluster::end_time(text)? - Cluster::start_time(text)?)
}

/// Submits `jobs` (each running its command of `commands`) at their times and waits until none is left in the queue or the spec's
/// deadline passes (then cancels what is left); returns the Slurm IDs (in the order of `jobs`) and when the first was submitted.
fn submit_and_wait(
    spec: &ScaleSpec,
    cluster: &Cluster,
    jobs: &[StreamJob],
    outputs: &[PathBuf],
    commands: &[Vec<String>],
) -> anyhow::Result<(Vec<lockstep_slurm::SlurmJobId>, f64)> {
    let deadline = spec.deadline;
    let busy = spec.progress == Progress::Busy;
    let start = Instant::now();
    let started_at = now();
    let mut ids = Vec::new();
    for (i, ((j, out), program)) in jobs.iter().zip(outputs).zip(commands).enumerate() {
        let due = Duration::from_secs_f64(j.at);
        if let Some(wait) = due.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
        let _ = std::fs::remove_file(out);
        let name = format!("{}-{i}", spec.name);
        let o = cluster.sbatch_on(&name, &j.nodes, busy, out, program).output()?;
        anyhow::ensure!(o.status.success(), "sbatch failed: {}", String::from_utf8_lossy(&o.stderr).trim());
        let text = String::from_utf8_lossy(&o.stdout);
        let id = text.trim().split(';').next().and_then(|s| s.parse().ok());
        ids.push(id.with_context(|| format!("sbatch printed no job ID ({text:?})"))?);
    }
    let conf = cluster.dir().join("slurm.conf");
    loop {
        let out = Command::new("squeue").args(["-h", "-o", "%i"]).env("SLURM_CONF", &conf).output()?;
        if out.status.success() && out.stdout.trim_ascii().is_empty() {
            break;
        }
        if start.elapsed() > deadline {
            let _ = Command::new("scancel").args(ids.iter().map(ToString::to_string)).env("SLURM_CONF", &conf).output();
            std::thread::sleep(Duration::from_secs(3));
            break;
        }
        std::thread::sleep(POLL);
    }
    Ok((ids, started_at))
}

/// The PIDs tests/cluster/up recorded, by name (`agent-n3`, `slurmctld`); each line is `NAME PID START`.
fn cluster_pids(dir: &Path) -> BTreeMap<String, i32> {
    std::fs::read_to_string(dir.join("pids"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut fields = l.split(' ');
            Some((fields.next()?.to_string(), fields.next()?.parse().ok()?))
        })
        .collect()
}

/// The directory that keeps a case's job outputs and the cluster's logs.
fn case_dir(paths: &Paths, nodes: u32, policy: &ScalePolicy) -> PathBuf {
    paths.work.join("cases").join(format!("{nodes}-{}", policy.label().replace('/', "-")))
}

/// One policy's run of the stream.
fn run_case(
    spec: &ScaleSpec,
    cluster: &mut Cluster,
    policy: &ScalePolicy,
    jobs: &[StreamJob],
    alone: &BTreeMap<(usize, usize), Alone>,
    paths: &Paths,
) -> anyhow::Result<(Vec<JobResult>, CaseResult)> {
    cluster.set_rows(policy.rows);
    cluster.apply(&policy.config)?;
    let dir = cluster.dir().to_path_buf();
    let _ = std::fs::remove_file(dir.join("log/hooks.tsv"));
    let pids = cluster_pids(&dir);
    let agents: Vec<i32> = pids.iter().filter(|(n, _)| n.starts_with("agent-")).map(|(_, p)| *p).collect();
    let nodes = agents.len() as u32;
    let prometheus = spec.scrape.map(|every| Prometheus::start(&paths.work, nodes, every)).transpose()?;
    let cpu = |pid: i32| procfs::cpu_seconds(pid).unwrap_or(0.0);
    let agent_cpu0: Vec<f64> = agents.iter().map(|&p| cpu(p)).collect();
    let ctld = pids.get("slurmctld").copied().unwrap_or(0);
    let ctld_cpu0 = cpu(ctld);
    // Each case keeps its jobs' output and, at its end, the cluster's logs (a failed job's cause is in them).
    let kept = case_dir(paths, nodes, policy);
    let _ = std::fs::remove_dir_all(&kept);
    std::fs::create_dir_all(kept.join("log"))?;
    let t0 = Instant::now();
    let outputs: Vec<PathBuf> = (0..jobs.len()).map(|i| kept.join(format!("job-{i}.out"))).collect();
    let commands: Vec<Vec<String>> = jobs.iter().map(|j| program(spec, j, &paths.bin)).collect();
    let (ids, from) = submit_and_wait(spec, cluster, jobs, &outputs, &commands)?;
    let elapsed = t0.elapsed().as_secs_f64();
    let agent_cpu: Vec<f64> = agents.iter().zip(&agent_cpu0).map(|(&p, c0)| (cpu(p) - c0) / elapsed).collect();
    let rss: Vec<f64> = agents.iter().map(|&p| procfs::rss_bytes(p).unwrap_or(0) as f64 / 1_048_576.0).collect();
    let slurmctld_cpu = (cpu(ctld) - ctld_cpu0) / elapsed;
    let scrapes = prometheus.as_ref().map(|p| p.scrapes(elapsed)).transpose()?;
    drop(prometheus);
    // The agents write their decisions once a second.
    std::thread::sleep(Duration::from_millis(2500));
    let to = now();
    let mut decisions: Vec<Decision> = Vec::new();
    for db in cluster.stores() {
        let store = Store::open_existing(&db)?;
        for action in [Action::Favour, Action::Freeze, Action::Thaw, Action::Slot] {
            decisions.extend(store.decisions_between(action, from, to)?);
        }
    }
    // Only Slurm's gang scheduler suspends jobs (and only then does slurmctld log it).
    let gang = if policy.config.scheduler == Scheduler::SlurmGang { cluster.gang_events() } else { Vec::new() };
    for log in std::fs::read_dir(dir.join("log"))?.flatten() {
        std::fs::copy(log.path(), kept.join("log").join(log.file_name()))?;
    }
    let slot = policy.config.slot.as_secs_f64();
    let mut results = Vec::new();
    let mut last_end = from;
    for ((j, id), out) in jobs.iter().zip(&ids).zip(&outputs) {
        let text = std::fs::read_to_string(out).unwrap_or_default();
        let names: Vec<String> = j.nodes.iter().map(|n| format!("n{n}")).collect();
        let job = lockstep_core::ident::JobKey::Slurm(*id).to_string();
        let fav = favoured(&decisions, &job, &names);
        let lone = alone.get(&(j.workload, j.nodes.len()));
        let end = Cluster::end_time(&text);
        last_end = last_end.max(end.unwrap_or(from));
        results.push(JobResult {
            id: *id,
            nodes: j.nodes.clone(),
            workload: spec.workloads[j.workload].join(" "),
            started_s: Cluster::start_time(&text).map(|t| t - from),
            wall_s: wall(&text),
            alone_s: lone.map(|a| a.wall_s),
            timed_s: timed(&text),
            alone_timed_s: lone.and_then(|a| a.timed_s),
            comm: lone.and_then(|a| a.comm),
            exit: Cluster::exit_code(&text),
            agreement: fav.map(|f| f.agreement),
            share: fav.map(|f| f.share),
            co_run: fav.map(|f| co_run(&decisions, &job, f.first as f64 * slot, (f.last + 1) as f64 * slot)),
            apart: fav.map(|f| (f.unswitched, f.elsewhere)),
            suspended: suspensions(&gang, *id, from, end.unwrap_or(to)),
        });
    }
    let mut spreads = switch_spreads(&decisions);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let largest = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    let case = CaseResult {
        submitted: jobs.len() as u32,
        completed: results.iter().filter(|r| r.exit == Some(0)).count() as u32,
        makespan_s: last_end - from,
        hooks: hook_latencies(&dir.join("log/hooks.tsv")),
        skew_ms: (percentile(&mut spreads, 0.5), percentile(&mut spreads, 0.99), largest(&spreads)),
        skew_slots: spreads.len() as u32,
        switch_us: {
            let freeze_thaw = decisions.iter().filter(|d| matches!(d.action, Action::Freeze | Action::Thaw));
            let mut us: Vec<f64> = freeze_thaw.map(|d| d.duration_us).collect();
            if us.is_empty() {
                0.0
            } else {
                percentile(&mut us, 0.5)
            }
        },
        agent_cpu: (mean(&agent_cpu), largest(&agent_cpu)),
        agent_rss_mib: (mean(&rss), largest(&rss)),
        slurmctld_cpu,
        prometheus: scrapes,
    };
    Ok((results, case))
}

/// Per hook: calls, p50 and p99 of its duration in ms, from the hooks' log (`hook job node nanoseconds`).
fn hook_latencies(log: &Path) -> BTreeMap<String, (u32, f64, f64)> {
    let mut by_hook: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for line in std::fs::read_to_string(log).unwrap_or_default().lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let (Some(hook), Some(ns)) = (words.first(), words.last().and_then(|n| n.parse::<f64>().ok())) {
            by_hook.entry((*hook).to_string()).or_default().push(ns / 1e6);
        }
    }
    by_hook
        .into_iter()
        .map(|(hook, mut ms)| {
            let n = ms.len() as u32;
            (hook, (n, percentile(&mut ms, 0.5), percentile(&mut ms, 0.99)))
        })
        .collect()
}

/// A Prometheus server scraping every agent of the cluster (`file_sd`), stopped by PID when dropped (or on a
/// signal that ends the experiment).
struct Prometheus {
    _server: crate::harness::teardown::Stopped,
    targets: u32,
}

impl Prometheus {
    /// Starts Prometheus with a fresh data directory under `work`, scraping the `nodes` agents every `every`;
    /// returns once it has scraped every agent once (or after 30 s).
    fn start(work: &Path, nodes: u32, every: Duration) -> anyhow::Result<Self> {
        let dir = work.join("prometheus");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let targets: Vec<String> = (1..=nodes).map(|i| format!("\"10.231.0.{}:{METRICS_PORT}\"", 10 + i)).collect();
        std::fs::write(dir.join("agents.json"), format!("[{{\"targets\": [{}]}}]\n", targets.join(", ")))?;
        let interval = format!("{}ms", every.as_millis());
        std::fs::write(
            dir.join("prometheus.yml"),
            format!(
                "global:\n  scrape_interval: {interval}\n  scrape_timeout: {interval}\nscrape_configs:\n  - job_name: \
                 lockstep\n    file_sd_configs:\n      - files: ['{}']\n",
                dir.join("agents.json").display()
            ),
        )?;
        let log = std::fs::File::create(dir.join("prometheus.log"))?;
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address={PROMETHEUS_ADDR}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("cannot start prometheus (scripts/deps.sh installs it)")?;
        let p = Prometheus { _server: crate::harness::teardown::Stopped::new(child, STOP_GRACE), targets: nodes };
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if Self::query("count(up{job=\"lockstep\"} == 1)")
                .is_ok_and(|v| v.first().is_some_and(|x| x.1 >= f64::from(nodes)))
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Ok(p)
    }

    /// The instant vector `query` evaluates to on the running server: (instance, value).
    fn query(query: &str) -> anyhow::Result<Vec<(String, f64)>> {
        let (status, body) =
            lockstep_telemetry::remote::get(PROMETHEUS_ADDR, &format!("/api/v1/query?query={}", encode(query)))?;
        anyhow::ensure!(status == 200, "prometheus answered {status}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body)?;
        let results = v["data"]["result"].as_array().cloned().unwrap_or_default();
        Ok(results
            .iter()
            .filter_map(|r| {
                let instance = r["metric"]["instance"].as_str().unwrap_or_default().to_string();
                Some((instance, r["value"][1].as_str()?.parse().ok()?))
            })
            .collect())
    }

    /// What it saw over the last `seconds`.
    fn scrapes(&self, seconds: f64) -> anyhow::Result<Scrapes> {
        let range = format!("{}s", seconds.ceil().max(1.0));
        let durations: Vec<f64> =
            Self::query(&format!("avg_over_time(scrape_duration_seconds{{job=\"lockstep\"}}[{range}])"))?
                .into_iter()
                .map(|(_, v)| v * 1e3)
                .collect();
        let series = Self::query(&format!("max_over_time(scrape_samples_scraped{{job=\"lockstep\"}}[{range}])"))?;
        let up = Self::query("count(up{job=\"lockstep\"} == 1)")?;
        let head = Self::query("count({job=\"lockstep\"})")?;
        Ok(Scrapes {
            up: up.first().map_or(0, |v| v.1 as u32),
            targets: self.targets,
            mean_ms: durations.iter().sum::<f64>() / durations.len().max(1) as f64,
            max_ms: durations.iter().copied().fold(0.0, f64::max),
            max_series: series.iter().map(|v| v.1).fold(0.0, f64::max),
            head_series: head.first().map_or(0.0, |v| v.1),
        })
    }
}

/// `text` percent-encoded for a URL's query.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_percent_encoded() {
        assert_eq!(encode("up{job=\"a b\"} == 1"), "up%7Bjob%3D%22a%20b%22%7D%20%3D%3D%201");
    }

    #[test]
    fn hook_latencies_are_per_hook() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let log = dir.path().join("hooks.tsv");
        std::fs::write(&log, "prolog 1 n1 2000000\nprolog 1 n2 4000000\nprolog-slurmctld 1 controller 9000000\nbad\n")
            .unwrap();
        let h = hook_latencies(&log);
        assert_eq!(h["prolog"].0, 2);
        assert_eq!(h["prolog-slurmctld"], (1, 9.0, 9.0));
    }

    #[test]
    fn the_timed_region_is_read_from_npb_output() {
        let out = "lockstep-job-start 1.0\n Class           =                        A\n Time in seconds =                     1.43\n";
        assert_eq!(timed(out), Some(1.43));
        assert_eq!(timed(" Time in seconds is long\n"), None);
        assert_eq!(timed(""), None);
    }
}
