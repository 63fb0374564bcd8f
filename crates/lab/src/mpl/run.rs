//! Runs an experiment: a private agent, then every case under every policy and progress mode, each job a real
//! MPI run through `lockstep run` with the PMPI profiler preloaded; every job's result goes to the store.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::spec::Spec;
use crate::harness::agent::PrivateAgent;
use crate::harness::cluster::Cluster;
use crate::harness::containers;
use crate::harness::mpi::{comm_ratio, pmpi_env};
use crate::harness::outcome::{last_line, Failures, Outcome};
use crate::harness::progress_bar::CaseProgress;
use crate::harness::spec::{PolicyConfig, Progress, RanksIn, Scheduler};
use crate::harness::Paths;
use lockstep_core::cosched::auto::{Choice, Member};
use lockstep_core::cosched::{slot, PolicySpec};
use lockstep_core::sample;
use lockstep_proto::client::{call, check};
use lockstep_proto::protocol::Request;
use lockstep_store::{now, Action, ExperimentRun, Store, TimelineRecord};

/// One case to run: jobs together under a policy.
pub(super) struct Case<'a> {
    pub(super) mix: &'a [String],
    pub(super) policy: PolicyConfig,
    pub(super) label: String,
    pub(super) progress: Progress,
    pub(super) ranks_in: RanksIn,
    pub(super) repetition: u32,
    /// Its place in the plan, which tells its containers from those of earlier cases (podman may still be
    /// removing those when the next case starts).
    pub(super) number: usize,
}

impl Case<'_> {
    /// The case in a line: `cfs yield lu+ep rep 1` (`+container` and the like where ranks run elsewhere).
    fn describe(&self) -> String {
        let place = if self.ranks_in == RanksIn::Process { String::new() } else { format!("+{}", self.ranks_in) };
        format!("{} {}{place} {} rep {}", self.label, self.progress, self.mix.join("+"), self.repetition)
    }
}

/// Runs every case of `spec`; returns the session (its start time) and the jobs that failed.
pub fn run(spec: &Spec, paths: &Paths) -> anyhow::Result<Outcome> {
    std::fs::create_dir_all(&paths.work)?;
    let store = Store::open(&paths.store)?;
    let session = now();
    // Jobs run under a private agent, or on the test cluster's nodes under their agents.
    let mut cluster =
        if spec.ranks_in.contains(&RanksIn::Slurm) { Some(Cluster::new(paths, spec.nodes)?) } else { None };
    let agent = if cluster.is_none() { Some(PrivateAgent::start(paths, &[])?) } else { None };
    let socket = agent.as_ref().map(|a| a.socket.clone()).unwrap_or_default();
    let cases = plan(spec);
    let build = paths.bin.parent().map(Path::to_path_buf).unwrap_or_default();
    let setup = |ranks_in, runtime| -> anyhow::Result<Option<containers::Setup>> {
        let wanted = spec.ranks_in.contains(&ranks_in);
        wanted.then(|| containers::Setup::new(runtime, &paths.work, &[build.clone(), paths.work.clone()])).transpose()
    };
    let podman = setup(RanksIn::Container, containers::Runtime::Podman)?;
    let charliecloud = setup(RanksIn::Charliecloud, containers::Runtime::Charliecloud)?;
    let mut progress = CaseProgress::new(cases.len());
    let mut failures = Failures::default();
    let mut timelines = super::timeline::Chooser::default();
    for case in &cases {
        progress.start(case.describe());
        if let Some(c) = &mut cluster {
            c.apply(&case.policy)?;
        } else {
            check(call(&socket, &case.policy.agent_request())?)?;
        }
        let containers = match case.ranks_in {
            RanksIn::Container => podman.as_ref(),
            RanksIn::Charliecloud => charliecloud.as_ref(),
            _ => None,
        };
        let site = Site { socket: &socket, containers, cluster: cluster.as_ref() };
        // The report's timeline: one window of the case as the private agent saw it, while it runs.
        let measured: Vec<String> = (case.mix.iter().enumerate())
            .filter(|(_, w)| !spec.workloads[*w].background)
            .map(|(i, w)| job_name(spec, w, i))
            .collect();
        let policy = case.policy.scheduler.agents();
        let recorder = (agent.is_some() && timelines.wants(policy, measured.len(), case.repetition))
            .then(|| super::timeline::Recorder::start(&socket, measured, policy.slotted().then_some(case.policy.slot)));
        let before = failures.count();
        for (run, stderr) in run_case(spec, paths, &site, case, session)? {
            let verified = run.verified;
            failures.note(&case.describe(), &run.job, run.exit_status, Some(verified), Some(&stderr));
            store.add_experiment_run(&run)?;
        }
        let failed = failures.count() > before;
        match recorder {
            Some(recorder) if failed => recorder.discard(),
            Some(recorder) => {
                let (experiment, policy, mix) = (spec.name.clone(), case.label.clone(), case.mix.join("+"));
                let record = TimelineRecord {
                    experiment,
                    session,
                    policy,
                    mix,
                    repetition: case.repetition,
                    data: String::new(),
                };
                recorder.store(&store, record)?;
            }
            None => {}
        }
        progress.done(failed);
    }
    progress.finish();
    drop(agent);
    drop(cluster);
    Ok(Outcome { session, failures })
}

/// Every case, repetition by repetition: the dedicated baseline (each workload alone, under cfs), then every mix
/// under every policy in turn, for every progress mode. A mix's policies run back to back, in an order that moves
/// on by one with each repetition (the first policy of one repetition is the last of the next), so that a machine
/// whose speed drifts over the minutes an experiment takes (lu alone took 10.3–13.5 s within one hour here) weighs
/// on no policy more than on another: run policy after policy, `auto` ran half an hour after `cfs`.
fn plan(spec: &Spec) -> Vec<Case<'_>> {
    let cfs = PolicyConfig { scheduler: Scheduler::Lockstep(PolicySpec::Cfs), slot: slot::DEFAULT };
    let mut cases = Vec::new();
    for (progress, ranks_in) in spec.progress.iter().flat_map(|&p| spec.ranks_in.iter().map(move |&r| (p, r))) {
        let mut alone: Vec<&[String]> = Vec::new();
        for mix in &spec.mixes {
            for w in mix.iter().filter(|w| !spec.workloads[*w].background) {
                if !alone.iter().any(|a| a[0] == *w) {
                    alone.push(std::slice::from_ref(w));
                }
            }
        }
        for repetition in 1..=spec.repetitions {
            for mix in &alone {
                let label = "dedicated".into();
                let number = cases.len();
                cases.push(Case { mix, policy: cfs, label, progress, ranks_in, repetition, number });
            }
            for mix in spec.mixes.iter().filter(|m| m.len() > 1 || spec.unloaded) {
                let turn = (repetition as usize - 1) % spec.policies.len().max(1);
                for policy in spec.policies[turn..].iter().chain(&spec.policies[..turn]) {
                    let label = policy.label();
                    let number = cases.len();
                    cases.push(Case { mix, policy: *policy, label, progress, ranks_in, repetition, number });
                }
            }
        }
    }
    cases
}

/// Where the case's jobs run: the private agent's socket, the container runtime of its ranks, the test cluster.
pub(super) struct Site<'a> {
    pub(super) socket: &'a Path,
    pub(super) containers: Option<&'a containers::Setup>,
    pub(super) cluster: Option<&'a Cluster>,
}

/// A job of the case, started.
pub(super) struct Started {
    workload: String,
    pub(super) name: String,
    /// Its PMPI profile.
    pub(super) pmpi: PathBuf,
    /// When it started (for its wall time) and when it was submitted (seconds since the epoch).
    pub(super) t0: Instant,
    submitted: f64,
    pub(super) child: Child,
}

/// A measured job, ended.
struct Ended {
    workload: String,
    name: String,
    pmpi: PathBuf,
    wall_s: f64,
    status: std::process::ExitStatus,
    stdout: String,
}

/// What the agents recorded while the case ran: the worst cross-node slot skew, and the dcs raises with their
/// arrival-to-raise latency (count, p50, p99 in microseconds).
struct AgentRecords {
    slot_skew_ms: Option<f64>,
    dcs: Option<(u64, f64, f64)>,
    /// `auto`'s choices and trials while the case ran.
    auto: Vec<Choice>,
    /// Each job's co-scheduled fraction, the mean over the nodes whose agent measured it.
    coscheduled: BTreeMap<String, f64>,
}

/// Starts every job of the case at once, waits for the measured ones, and returns their runs, each with the file
/// its standard error went to.
fn run_case(
    spec: &Spec,
    paths: &Paths,
    site: &Site<'_>,
    case: &Case<'_>,
    session: f64,
) -> anyhow::Result<Vec<(ExperimentRun, PathBuf)>> {
    let started_at = now();
    let jobs = start_jobs(spec, paths, site, case)?;
    if let Some(setup) = site.containers {
        if let Err(e) = open_gates(spec, paths, site, case, setup, &jobs) {
            // Ranks whose gate stays shut would wait for it for ever: stop every job of the case.
            stop_jobs(site.cluster, &jobs);
            return Err(e);
        }
    }
    let ended = wait_for_jobs(spec, paths, site.cluster, case, jobs)?;
    let names: Vec<&str> = ended.iter().map(|e| e.name.as_str()).collect();
    let records = agent_records(paths, site.cluster, case, &names, started_at, now())?;
    Ok(ended
        .into_iter()
        .map(|e| {
            let stderr = stderr_file(paths, &e.name);
            (to_run(spec, site, case, session, started_at, &records, e), stderr)
        })
        .collect())
}

/// Has the agent adopt each job's containers once its ranks run, then lets the ranks start (opens their gate).
fn open_gates(
    spec: &Spec,
    paths: &Paths,
    site: &Site<'_>,
    case: &Case<'_>,
    setup: &containers::Setup,
    jobs: &[Started],
) -> anyhow::Result<()> {
    for job in jobs {
        let pods = container_prefix(&job.name, case);
        let containers = setup.wait_for_ranks(&pods, spec.ranks, Duration::from_mins(1)).map_err(|e| {
            let said = last_line(&stderr_file(paths, &job.name)).unwrap_or_else(|| "nothing".into());
            anyhow::anyhow!("{e}; its launcher's last line: {said}")
        })?;
        let adopt = Request::Adopt { job: job.name.parse()?, cgroups: vec![], pids: vec![], containers, row: None };
        check(call(site.socket, &adopt)?)?;
        std::fs::write(paths.work.join(format!("{}.go", job.name)), b"")?;
    }
    Ok(())
}

/// Starts the case's jobs, background load first so that the measured jobs start under it. When one cannot be
/// started, the ones already running are stopped.
fn start_jobs(spec: &Spec, paths: &Paths, site: &Site<'_>, case: &Case<'_>) -> anyhow::Result<Vec<Started>> {
    let mut order: Vec<(usize, &String)> = case.mix.iter().enumerate().collect();
    order.sort_by_key(|(_, w)| !spec.workloads[*w].background);
    let mut jobs = Vec::new();
    for (i, workload) in order {
        match start_job(spec, paths, site, case, workload, job_name(spec, workload, i)) {
            Ok(job) => jobs.push(job),
            Err(e) => {
                stop_jobs(site.cluster, &jobs);
                return Err(e);
            }
        }
    }
    Ok(jobs)
}

/// The name of the job of workload `workload` at place `i` of a case's mix.
fn job_name(spec: &Spec, workload: &str, i: usize) -> String {
    format!("{}-{}-{}", spec.name, workload, i)
}

/// Starts one job of the case, named `name`.
pub(super) fn start_job(
    spec: &Spec,
    paths: &Paths,
    site: &Site<'_>,
    case: &Case<'_>,
    workload: &str,
    name: String,
) -> anyhow::Result<Started> {
    let pmpi = paths.work.join(format!("{name}.pmpi.jsonl"));
    let _ = std::fs::remove_file(&pmpi);
    let mut cmd = job_command(spec, paths, site, case, workload, &name, &pmpi)?;
    if spec.workloads[workload].progress_in(case.progress) == Progress::Busy {
        cmd.env("LOCKSTEP_MPI_BUSY_POLL", "1");
    }
    // Its errors go to a file of the work directory: the last line says why a job failed.
    cmd.stdout(Stdio::piped()).stderr(std::fs::File::create(stderr_file(paths, &name))?);
    let (t0, submitted) = (Instant::now(), now());
    anyhow::ensure!(!crate::harness::teardown::stopping(), "job {name} not started: the experiment is stopping");
    Ok(Started { workload: workload.to_string(), name, pmpi, t0, submitted, child: cmd.spawn()? })
}

/// Stops jobs of the case: cancels each Slurm job (its `sbatch --wait` is then not worth waiting for) and stops
/// the process tree that runs it (`lockstep run` passes SIGTERM on to the job; what ignores it is killed after
/// the grace).
pub(super) fn stop_jobs(cluster: Option<&Cluster>, jobs: &[Started]) {
    if let Some(c) = cluster {
        for job in jobs {
            c.cancel(&job.name);
        }
    }
    let pids: Vec<u32> = jobs.iter().map(|job| job.child.id()).collect();
    crate::harness::teardown::stop_trees(&pids, crate::harness::teardown::JOB_GRACE);
}

/// The command that runs one job of the case where its ranks run, the PMPI profiler preloaded into every rank (unless
/// the workload runs without it).
fn job_command(
    spec: &Spec,
    paths: &Paths,
    site: &Site<'_>,
    case: &Case<'_>,
    workload: &str,
    name: &str,
    pmpi: &Path,
) -> anyhow::Result<Command> {
    let w = &spec.workloads[workload];
    let mut program = vec![paths.bin.join(&w.command[0]).display().to_string()];
    program.extend(w.command[1..].iter().cloned());
    program.push("--json".into());
    let rank_env = if w.profiler { pmpi_env(paths, pmpi) } else { Vec::new() };
    let cmd = match (case.ranks_in, site.containers, site.cluster) {
        (RanksIn::Slurm, _, Some(c)) => {
            // Every task, on every node, runs `env … PROGRAM`.
            let mut task = vec!["env".to_string()];
            task.extend(rank_env.iter().map(|(k, v)| format!("{k}={v}")));
            task.extend(program.iter().cloned());
            let output = slurm_output(paths, name);
            let _ = std::fs::remove_file(&output);
            c.sbatch(name, spec.ranks, w.progress_in(case.progress) == Progress::Busy, &output, &task)
        }
        (RanksIn::Container | RanksIn::Charliecloud, Some(p), _) => {
            // mpirun outside any job cgroup; each rank a container, adopted as the job once all are up.
            let mut cmd = Command::new(paths.bin.join("mpirun"));
            let go = paths.work.join(format!("{name}.go"));
            let _ = std::fs::remove_file(&go);
            cmd.args(["-n", &spec.ranks.to_string()]).args(p.rank_command(
                &container_prefix(name, case),
                &rank_env,
                &go,
                &program,
                &[],
            ));
            cmd.envs(p.env());
            cmd
        }
        _ => {
            let mut cmd = Command::new(std::env::current_exe()?);
            cmd.arg("--socket").arg(site.socket).arg("--store").arg(&paths.store);
            cmd.args(["run", "--job", name, "--place", spec.placement.name(), "--"]);
            cmd.arg(paths.bin.join("mpirun")).args(["-n", &spec.ranks.to_string(), "env"]);
            cmd.args(rank_env.iter().map(|(k, v)| format!("{k}={v}"))).args(&program);
            cmd
        }
    };
    Ok(cmd)
}

/// The names of a containerised job's rank containers in a case: `<prefix>-r<rank>`.
fn container_prefix(job: &str, case: &Case<'_>) -> String {
    format!("{job}-{}", case.number)
}

/// Waits for the measured jobs, then stops the background load; returns the measured jobs' outcomes.
fn wait_for_jobs(
    spec: &Spec,
    paths: &Paths,
    cluster: Option<&Cluster>,
    case: &Case<'_>,
    jobs: Vec<Started>,
) -> anyhow::Result<Vec<Ended>> {
    let (background, measured): (Vec<_>, Vec<_>) =
        jobs.into_iter().partition(|j| spec.workloads[&j.workload].background);
    let mut ended = Vec::new();
    for job in measured {
        let out = job.child.wait_with_output()?;
        let mut wall_s = job.t0.elapsed().as_secs_f64();
        // A Slurm job's output, with the time it ended, is in its output file.
        let stdout = match case.ranks_in {
            RanksIn::Slurm => std::fs::read_to_string(slurm_output(paths, &job.name)).unwrap_or_default(),
            _ => String::from_utf8_lossy(&out.stdout).into_owned(),
        };
        if let Some(end) = Cluster::end_time(&stdout) {
            wall_s = end - job.submitted;
        }
        let Started { workload, name, pmpi, .. } = job;
        ended.push(Ended { workload, name, pmpi, wall_s, status: out.status, stdout });
    }
    stop_jobs(cluster, &background);
    Ok(ended)
}

/// What the agents recorded within `[from, to]`: slot skew across the cluster's nodes (slotted policies on the
/// cluster), dcs raises (dcs policies), `auto`'s choices, and the co-scheduled fraction of each of `jobs`.
fn agent_records(
    paths: &Paths,
    cluster: Option<&Cluster>,
    case: &Case<'_>,
    jobs: &[&str],
    from: f64,
    to: f64,
) -> anyhow::Result<AgentRecords> {
    let policy = case.policy.scheduler.agents();
    let skew = cluster.filter(|_| policy.slotted());
    let raises = policy.raises().is_some();
    let auto = policy == PolicySpec::Auto;
    // The agents write decisions once a second, and a job's final samples at their next sampling interval: wait
    // for the case's last ones (once for every reading).
    std::thread::sleep(Duration::from_millis(1100));
    let slot_skew_ms = match skew {
        Some(c) => c.skew_ms(from, to)?,
        None => None,
    };
    let stores = cluster.map_or_else(|| vec![paths.store.clone()], Cluster::stores);
    let dcs = if raises { dcs_latency(&stores, from, to)? } else { None };
    let mut choices = Vec::new();
    if auto {
        for db in &stores {
            choices.extend(Store::open_existing(db)?.auto_choices(from, to)?.into_iter().map(|(_, c)| c));
        }
    }
    let coscheduled = jobs.iter().filter_map(|&job| Some((job.to_string(), coscheduled(&stores, job)?))).collect();
    Ok(AgentRecords { slot_skew_ms, dcs, auto: choices, coscheduled })
}

/// Job `job`'s co-scheduled fraction from its latest sample in each of `stores` (every node's agent that measured
/// it), the mean over them; `None` where none did.
fn coscheduled(stores: &[PathBuf], job: &str) -> Option<f64> {
    let job = job.parse().ok()?;
    let shares: Vec<f64> = stores
        .iter()
        .filter_map(|db| {
            let samples = Store::open_existing(db).ok()?.samples(&job).ok()?;
            sample::latest(&samples, sample::COSCHEDULED)?.share()
        })
        .collect();
    (!shares.is_empty()).then(|| shares.iter().sum::<f64>() / shares.len() as f64)
}

/// The stored run of one measured job.
fn to_run(
    spec: &Spec,
    site: &Site<'_>,
    case: &Case<'_>,
    session: f64,
    started_at: f64,
    records: &AgentRecords,
    job: Ended,
) -> ExperimentRun {
    if let Some(name) = site.containers.and(job.name.parse().ok()) {
        let _ = call(site.socket, &Request::Release { job: name });
    }
    let mix = case
        .mix
        .iter()
        .map(|w| if spec.workloads[w].background { format!("[{w}]") } else { w.clone() })
        .collect::<Vec<_>>()
        .join("+");
    let mpl = case.mix.iter().filter(|w| !spec.workloads[*w].background).count() as u32;
    let result = job
        .stdout
        .lines()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok().filter(|v| v.get("kernel").is_some()));
    let auto_chose = (case.policy.scheduler.agents() == PolicySpec::Auto).then(|| auto_chose(&records.auto, &job.name));
    let coscheduled = records.coscheduled.get(&job.name).copied();
    ExperimentRun {
        experiment: spec.name.clone(),
        session,
        policy: case.label.clone(),
        progress: case.progress.to_string(),
        placement: case.ranks_in.to_string(),
        mix,
        mpl,
        workload: job.workload,
        job: job.name,
        repetition: case.repetition,
        time_s: result.as_ref().and_then(|v| v["time_s"].as_f64()),
        wall_s: job.wall_s,
        comm_ratio: comm_ratio(&job.pmpi),
        verified: result.as_ref().is_some_and(|v| v["verified"] == true),
        exit_status: job.status.code(),
        started_at,
        tool_cpu_s: None,
        tool_rss_bytes: None,
        slot_skew_ms: records.slot_skew_ms,
        dcs_raises: records.dcs.map(|d| d.0),
        dcs_p50_us: records.dcs.map(|d| d.1),
        dcs_p99_us: records.dcs.map(|d| d.2),
        auto_chose,
        coscheduled,
        ..ExperimentRun::default()
    }
}

/// What `auto` chose for the groups job `name` was in, in order, repeats dropped (`gang`, `gang, cfs`); what it
/// was doing when the job ended before any choice (its trial), or that the job never shared PUs.
fn auto_chose(records: &[Choice], name: &str) -> String {
    // The lab names its jobs by the agent's rules, so the name is a key.
    let key = name.parse().map(Member::Job).ok();
    let mine: Vec<&Choice> = records.iter().filter(|c| key.as_ref().is_some_and(|k| c.jobs.contains(k))).collect();
    let mut chose: Vec<&str> = Vec::new();
    for c in mine.iter().filter(|c| !c.trying) {
        if chose.last() != Some(&c.policy.as_str()) {
            chose.push(&c.policy);
        }
    }
    if !chose.is_empty() {
        chose.join(", ")
    } else if mine.is_empty() {
        "cfs (shared no PUs)".to_string()
    } else {
        "ended during the trial".to_string()
    }
}

/// Raises `dcs` made in `[from, to]` (seconds since the epoch) in the agents' stores, with the median and 99th
/// percentile of their arrival-to-raise latency in microseconds; `None` when there were none. The agents' last
/// decisions of the interval must have been written (they flush once a second).
fn dcs_latency(stores: &[PathBuf], from: f64, to: f64) -> anyhow::Result<Option<(u64, f64, f64)>> {
    let mut us = Vec::new();
    for db in stores {
        us.extend(
            Store::open_existing(db)?.decisions_between(Action::DcsRaise, from, to)?.into_iter().map(|d| d.duration_us),
        );
    }
    if us.is_empty() {
        return Ok(None);
    }
    Ok(Some((
        us.len() as u64,
        crate::harness::stats::percentile(&mut us, 0.5),
        crate::harness::stats::percentile(&mut us, 0.99),
    )))
}

/// Where a job of the experiment writes its standard error.
pub(super) fn stderr_file(paths: &Paths, job: &str) -> PathBuf {
    paths.work.join(format!("{job}.err"))
}

/// Where a Slurm job of the experiment writes its output.
fn slurm_output(paths: &Paths, job: &str) -> PathBuf {
    paths.work.join(format!("{job}.out"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_repetition_runs_each_mix_under_every_policy_in_turn_starting_one_policy_later() {
        use super::super::spec::tests::{parse, GOOD};
        let text = GOOD
            .replace("mpl = [1, 2]", "mixes = [[\"lu\", \"ep\"]]\nrepetitions = 2")
            .replace("[[policies]]\nname = \"gang\"", "[[policies]]\nname = \"boost\"\n[[policies]]\nname = \"gang\"");
        let spec = parse(&text).unwrap();
        let order: Vec<(String, String, u32)> =
            super::plan(&spec).iter().map(|c| (c.label.clone(), c.mix.join("+"), c.repetition)).collect();
        let case = |label: &str, mix: &str, repetition| (label.to_string(), mix.to_string(), repetition);
        let boost = spec.policies[1].label();
        assert_eq!(
            order,
            [
                case("dedicated", "lu", 1),
                case("dedicated", "ep", 1),
                case("cfs", "lu+ep", 1),
                case(&boost, "lu+ep", 1),
                case("gang/200ms", "lu+ep", 1),
                case("dedicated", "lu", 2),
                case("dedicated", "ep", 2),
                case(&boost, "lu+ep", 2),
                case("gang/200ms", "lu+ep", 2),
                case("cfs", "lu+ep", 2),
            ]
        );
    }
}
