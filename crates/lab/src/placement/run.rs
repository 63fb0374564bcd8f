//! Runs a placement experiment: for every case (policy × where ranks run × workload × repetition) the job's
//! ranks start gated; once every rank runs, each is pinned to its seat's PU and, emulating a slower kind, moved
//! into that kind's bandwidth-limited cgroup; then the gate opens. Containers are adopted by a private agent first,
//! as in the co-scheduling experiments, so that Charliecloud ranks have a job cgroup to be split.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sched::{sched_setaffinity, CpuSet};
use nix::unistd::Pid;

use super::spec::{Hybrid, PlacementSpec, Seat};
use crate::harness::containers::{self, rank_processes, Runtime, Setup};
use crate::harness::outcome::{Failures, Outcome};
use crate::harness::spec::{Progress, RanksIn};
use crate::harness::Paths;
use crate::harness::{agent::PrivateAgent, progress_bar::CaseProgress};
use lockstep_cgroup::{bandwidth, procfs, Version};
use lockstep_core::place::PlacementKind;
use lockstep_core::topo::Machine;
use lockstep_proto::client::{call, check};
use lockstep_proto::protocol::Request;
use lockstep_store::{now, ExperimentRun, Store};

/// How long a job's ranks get to start before the case fails.
const START_TIMEOUT: Duration = Duration::from_mins(1);

/// The cgroup (in every hierarchy) under which a podman job's containers get one parent per kind,
/// `lockstep-kinds/<job>/<kind>`: podman makes each container a cgroup of its own, and the ranks of one kind share
/// their limit as bare ranks do.
const KINDS: &str = "lockstep-kinds";

/// One case.
struct Case<'a> {
    policy: PlacementKind,
    ranks_in: RanksIn,
    workload: &'a str,
    repetition: u32,
}

/// Every case, repetitions outermost so that a slow drift of the machine spreads over all of them.
fn plan(spec: &PlacementSpec) -> Vec<Case<'_>> {
    let mut cases = Vec::new();
    for repetition in 1..=spec.repetitions {
        for &ranks_in in &spec.ranks_in {
            for workload in spec.workloads.keys() {
                for &policy in &spec.policies {
                    cases.push(Case { policy, ranks_in, workload, repetition });
                }
            }
        }
    }
    cases
}

/// Runs every case; returns the session id and the jobs that failed.
pub fn run(spec: &PlacementSpec, paths: &Paths) -> anyhow::Result<Outcome> {
    std::fs::create_dir_all(&paths.work)?;
    let store = Store::open(&paths.store)?;
    let session = now();
    let hybrid = Hybrid::new(spec, Machine::live()?)?;
    let agent = PrivateAgent::start(paths, &[])?;
    let build = paths.bin.parent().map(Path::to_path_buf).unwrap_or_default();
    let setup = |ranks_in, runtime| -> anyhow::Result<Option<Setup>> {
        let wanted = spec.ranks_in.contains(&ranks_in);
        wanted.then(|| Setup::new(runtime, &paths.work, &[build.clone(), paths.work.clone()])).transpose()
    };
    let podman = setup(RanksIn::Container, Runtime::Podman)?;
    let charliecloud = setup(RanksIn::Charliecloud, Runtime::Charliecloud)?;
    let (label, native) = (hybrid.label(), matches!(hybrid, Hybrid::Native(_)));
    let cases = plan(spec);
    let mut progress = CaseProgress::new(cases.len());
    let mut failures = Failures::default();
    for (number, case) in cases.iter().enumerate() {
        let what = format!("{} {} {} rep {}", case.policy, case.ranks_in, case.workload, case.repetition);
        progress.start(what.clone());
        let runtime = match case.ranks_in {
            RanksIn::Container => podman.as_ref(),
            RanksIn::Charliecloud => charliecloud.as_ref(),
            _ => None,
        };
        let job = format!("{}-{}-{number}", spec.name, case.workload);
        let seats = hybrid.seats(case.policy, spec.ranks)?;
        let site = Site { paths, socket: &agent.socket, runtime, native };
        let run = run_case(spec, &site, &job, case, &seats)?;
        let stderr = paths.work.join(format!("{job}.err"));
        let failed = failures.note(&what, &job, run.exit_status, Some(run.verified), Some(&stderr));
        store.add_experiment_run(&ExperimentRun { session, hybrid: Some(label.clone()), ..run })?;
        progress.done(failed);
    }
    progress.finish();
    drop(agent);
    Ok(Outcome { session, failures })
}

/// Where a case runs: the experiment's files, the private agent, the container runtime of its ranks, whether the
/// machine's own core kinds are used.
struct Site<'a> {
    paths: &'a Paths,
    socket: &'a Path,
    runtime: Option<&'a Setup>,
    native: bool,
}

/// A started job: stopped (SIGTERM, SIGKILL after [`crate::harness::teardown::JOB_GRACE`], its ranks too) if the case
/// ends early, and its kind cgroups removed.
struct Started {
    child: Option<Child>,
    /// Children of the job's cgroup, one per kind (bare and Charliecloud ranks).
    split: Option<(Version, Vec<PathBuf>)>,
    /// The podman job's kind parents (`lockstep-kinds/<job>`, in every hierarchy), once its containers are gone.
    parents: Vec<PathBuf>,
}

impl Drop for Started {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            crate::harness::teardown::stop_tree(child.id(), crate::harness::teardown::JOB_GRACE);
        }
        if let Some((version, dirs)) = self.split.take() {
            bandwidth::unsplit(version, &dirs);
        }
        // podman removes each container's own cgroup as the container goes; the parents are left to us.
        let deadline = Instant::now() + Duration::from_secs(10);
        for dir in &self.parents {
            while dir.exists() && lockstep_cgroup::remove_dir(dir).is_err() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            if let Some(top) = dir.parent() {
                let _ = std::fs::remove_dir(top);
            }
        }
    }
}

/// Runs one job with its ranks seated; returns its run (session and hybrid label left for the caller).
fn run_case(
    spec: &PlacementSpec,
    site: &Site<'_>,
    job: &str,
    case: &Case<'_>,
    seats: &[Seat],
) -> anyhow::Result<ExperimentRun> {
    let paths = site.paths;
    let w = &spec.workloads[case.workload];
    let mut program = vec![paths.bin.join(&w.command[0]).display().to_string()];
    program.extend(w.command[1..].iter().cloned());
    program.push("--json".into());
    let go = paths.work.join(format!("{job}.go"));
    let _ = std::fs::remove_file(&go);
    let env: Vec<(String, String)> = Vec::new();
    let mpirun_args = ["-n".to_string(), spec.ranks.to_string(), "--bind-to".into(), "none".into()];
    // Emulated podman ranks go under one parent cgroup per kind.
    let kinds = (case.ranks_in == RanksIn::Container && seats.iter().any(|s| s.limit.is_some()))
        .then(|| lockstep_cgroup::detect().map(|b| b.roots()))
        .transpose()?;
    let parents: Vec<String> =
        seats.iter().filter(|_| kinds.is_some()).map(|s| format!("/{KINDS}/{job}/{}", kind_dir(s))).collect();
    let mut cmd = if let Some(setup) = site.runtime {
        let mut cmd = Command::new(paths.bin.join("mpirun"));
        cmd.args(mpirun_args).args(setup.rank_command(job, &env, &go, &program, &parents)).envs(setup.env());
        cmd
    } else {
        // On a hybrid machine the job's cgroup is the placement's (the PUs its ranks are pinned to); emulated,
        // the placement's PUs are another machine's.
        let mut cmd = Command::new(std::env::current_exe()?);
        cmd.arg("--socket").arg(site.socket).arg("--store").arg(&paths.store).args(["run", "--job", job]);
        if site.native {
            cmd.args(["--place", case.policy.name(), "--cpus", &spec.ranks.to_string(), "--"]);
        } else {
            cmd.args(["--place", "any", "--"]);
        }
        cmd.arg(paths.bin.join("mpirun")).args(mpirun_args);
        cmd.args(containers::bare_rank_command(job, &env, &go, &program));
        cmd
    };
    if spec.progress == Progress::Busy {
        cmd.env("LOCKSTEP_MPI_BUSY_POLL", "1");
    }
    // The job's errors stay in the work directory, for when a case fails.
    cmd.stdout(Stdio::piped()).stderr(std::fs::File::create(paths.work.join(format!("{job}.err")))?);
    let started_at = now();
    let t0 = Instant::now();
    let parents = kinds.unwrap_or_default().iter().map(|root| root.join(KINDS).join(job)).collect();
    anyhow::ensure!(!crate::harness::teardown::stopping(), "job {job} not started: the experiment is stopping");
    let mut started = Started { child: Some(cmd.spawn()?), split: None, parents };
    let pids = wait_for_ranks(&mut started, job, spec.ranks, case.ranks_in)?;
    if case.ranks_in != RanksIn::Process {
        let containers = match site.runtime {
            Some(setup) => setup.wait_for_ranks(job, spec.ranks, START_TIMEOUT)?,
            None => Vec::new(),
        };
        let adopt = Request::Adopt { job: job.parse()?, cgroups: vec![], pids: vec![], containers, row: None };
        check(call(site.socket, &adopt)?)?;
    }
    seat(&pids, seats)?;
    started.split = limit(&pids, seats, case.ranks_in, spec.period_us)?;
    std::fs::write(&go, b"")?;
    let out = started.child.take().expect("started").wait_with_output()?;
    let wall_s = t0.elapsed().as_secs_f64();
    drop(started);
    if case.ranks_in != RanksIn::Process {
        if let Ok(job) = job.parse() {
            let _ = call(site.socket, &Request::Release { job });
        }
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let results: Vec<serde_json::Value> =
        stdout.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).collect();
    let kernel = results.iter().find(|v| v.get("kernel").is_some());
    // corebench prints one result per copy: its score is their sum (the throughput of the placement's PUs).
    let scores: Vec<f64> = results.iter().filter_map(|v| v["single"]["overall"].as_f64()).collect();
    let score = (scores.len() == spec.ranks as usize).then(|| scores.iter().sum());
    Ok(ExperimentRun {
        experiment: spec.name.clone(),
        policy: case.policy.to_string(),
        progress: spec.progress.to_string(),
        placement: case.ranks_in.to_string(),
        mix: case.workload.to_string(),
        mpl: 1,
        workload: case.workload.to_string(),
        job: job.to_string(),
        repetition: case.repetition,
        time_s: kernel.and_then(|v| v["time_s"].as_f64()),
        wall_s,
        verified: out.status.success() && kernel.map_or(score.is_some(), |v| v["verified"] == true),
        exit_status: out.status.code(),
        started_at,
        score,
        ..ExperimentRun::default()
    })
}

/// Waits until every rank's first process runs (for Charliecloud, inside its image); fails when the job ends
/// first or takes longer than [`START_TIMEOUT`].
fn wait_for_ranks(started: &mut Started, job: &str, ranks: u32, ranks_in: RanksIn) -> anyhow::Result<Vec<i32>> {
    let runtime = (ranks_in == RanksIn::Charliecloud).then_some(Runtime::Charliecloud);
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Some(pids) = rank_processes(job, ranks, runtime) {
            return Ok(pids);
        }
        let child = started.child.as_mut().expect("started");
        if let Some(status) = child.try_wait()? {
            anyhow::bail!("job {job} ended ({status}) before all its {ranks} ranks started");
        }
        anyhow::ensure!(Instant::now() < deadline, "the ranks of job {job} did not start within a minute");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Pins every thread of each rank to its seat's PU (what the rank starts later inherits it).
fn seat(pids: &[i32], seats: &[Seat]) -> anyhow::Result<()> {
    for (&pid, s) in pids.iter().zip(seats) {
        let mut set = CpuSet::new();
        set.set(s.pu)?;
        for tid in procfs::threads(pid).unwrap_or_default() {
            sched_setaffinity(Pid::from_raw(tid), &set)
                .map_err(|e| anyhow::anyhow!("cannot pin rank process {pid} to PU {}: {e}", s.pu))?;
        }
    }
    Ok(())
}

/// The name of the cgroup of a seat's kind: the kind's label when it is emulated slower, `P` for full speed.
fn kind_dir(seat: &Seat) -> &str {
    if seat.limit.is_some() {
        &seat.kind
    } else {
        "P"
    }
}

/// Limits the ranks on emulated slower kinds, the ranks of a kind sharing one limit of their summed speeds (each
/// is pinned to its own PU). Podman ranks were started under a parent cgroup per kind, limited here; bare and
/// Charliecloud ranks share their job's cgroup, split into one child per kind (the returned directories, removed
/// when the case ends). Nothing to do on a hybrid machine or when no rank is slower.
fn limit(
    pids: &[i32],
    seats: &[Seat],
    ranks_in: RanksIn,
    period_us: u64,
) -> anyhow::Result<Option<(Version, Vec<PathBuf>)>> {
    if seats.iter().all(|s| s.limit.is_none()) {
        return Ok(None);
    }
    let cgroup_of = |pid: i32| {
        bandwidth::cpu_cgroup(pid)
            .ok_or_else(|| anyhow::anyhow!("rank process {pid} has no cgroup with the cpu controller"))
    };
    if ranks_in == RanksIn::Container {
        let mut done: Vec<PathBuf> = Vec::new();
        for (&pid, s) in pids.iter().zip(seats).filter(|(_, s)| s.limit.is_some()) {
            let (version, dir) = cgroup_of(pid)?;
            let parent = dir.parent().map(Path::to_path_buf).unwrap_or_default();
            anyhow::ensure!(parent.ends_with(&s.kind), "rank process {pid} is not under its kind's cgroup");
            if !done.contains(&parent) {
                let cpus: f64 = seats.iter().filter(|o| o.kind == s.kind).filter_map(|o| o.limit).sum();
                bandwidth::limit(version, &parent, Some(bandwidth::Bandwidth { cpus, period_us }))?;
                done.push(parent);
            }
        }
        return Ok(None);
    }
    let (version, dir) = cgroup_of(pids[0])?;
    // The unlimited child first: on v2 the job's other processes (mpirun) join it.
    let mut children = vec![bandwidth::Child { name: "P".into(), pids: Vec::new(), limit: None }];
    for (&pid, s) in pids.iter().zip(seats) {
        let kind = kind_dir(s);
        match children.iter_mut().find(|c| c.name == kind) {
            Some(c) => c.pids.push(pid),
            None => children.push(bandwidth::Child { name: kind.into(), pids: vec![pid], limit: None }),
        }
        // Each rank of a slower kind is pinned to its own PU: its kind's cgroup gets that speed per rank.
        if let (Some(speed), Some(c)) = (s.limit, children.iter_mut().find(|c| c.name == kind)) {
            let cpus = c.limit.map_or(0.0, |b| b.cpus) + speed;
            c.limit = Some(bandwidth::Bandwidth { cpus, period_us });
        }
    }
    Ok(Some((version, bandwidth::split(version, &dir, &children)?)))
}
