//! Runs an experiment: a private agent, then every case under every policy and progress mode, each job a real
//! MPI run through `lockstep run` with the PMPI profiler preloaded; every job's result goes to the store.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use super::containers;
use super::slurm::Cluster;
use super::spec::{PolicyConfig, Spec};
use lockstep_core::cosched::slot;
use lockstep_proto::client::{call, check};
use lockstep_proto::protocol::Request;
use lockstep_store::{now, ExperimentRun, Store};

/// Where the experiment's programs, store and files are.
#[derive(Clone, Debug)]
pub struct Paths {
    /// `build/bin` (kernels, mpirun, lockstep).
    pub bin: PathBuf,
    /// `build/lib` (the PMPI profiler).
    pub lib: PathBuf,
    /// The node store.
    pub store: PathBuf,
    /// Working directory of this experiment (agent socket, PMPI output).
    pub work: PathBuf,
}

/// One case to run: jobs together under a policy.
struct Case<'a> {
    mix: &'a [String],
    policy: PolicyConfig,
    label: String,
    progress: &'a str,
    ranks_in: &'a str,
    repetition: u32,
}

/// The agent the experiment runs its jobs under, stopped (SIGTERM, so that it restores everything) on drop.
pub(super) struct PrivateAgent {
    pub(super) child: Child,
    pub(super) socket: PathBuf,
}

impl PrivateAgent {
    /// Starts `lockstep agent --policy cfs` with `extra` arguments on a socket in the work directory.
    pub(super) fn start(paths: &Paths, extra: &[String]) -> anyhow::Result<Self> {
        let socket = paths.work.join("agent.sock");
        let child = Command::new(std::env::current_exe()?)
            .arg("--socket")
            .arg(&socket)
            .arg("--store")
            .arg(&paths.store)
            .args(["agent", "--policy", "cfs"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            anyhow::ensure!(Instant::now() < deadline, "the experiment's agent did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Self { child, socket })
    }
}

impl Drop for PrivateAgent {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
    }
}

/// Runs every case of `spec`; returns the session id (its start time).
pub fn run(spec: &Spec, paths: &Paths) -> anyhow::Result<f64> {
    std::fs::create_dir_all(&paths.work)?;
    let store = Store::open(&paths.store)?;
    let session = now();
    // Jobs run under a private agent, or on the test cluster's nodes under their agents.
    let mut cluster =
        if spec.ranks_in.iter().any(|r| r == "slurm") { Some(Cluster::new(paths, spec.nodes)?) } else { None };
    let agent = if cluster.is_none() { Some(PrivateAgent::start(paths, &[])?) } else { None };
    let socket = agent.as_ref().map(|a| a.socket.clone()).unwrap_or_default();
    let cases = plan(spec);
    let podman = if spec.ranks_in.iter().any(|r| r == "container") {
        let build = paths.bin.parent().map(Path::to_path_buf).unwrap_or_default();
        Some(containers::Setup::new(&paths.work, &[build, paths.work.clone()])?)
    } else {
        None
    };
    let bar = progress_bar(cases.len());
    for case in &cases {
        bar.set_message(format!(
            "{} {} {} {} #{}",
            case.label,
            case.progress,
            case.ranks_in,
            case.mix.join("+"),
            case.repetition
        ));
        if let Some(c) = &mut cluster {
            c.apply(&case.policy)?
        } else {
            let slot_ms = (case.policy.name != "cfs").then_some(case.policy.slot.as_millis() as u64);
            check(call(&socket, &Request::Policy { name: case.policy.name.clone(), slot_ms })?)?;
        }
        for run in run_case(spec, paths, &socket, podman.as_ref(), cluster.as_ref(), case, session)? {
            store.add_experiment_run(&run)?;
        }
        bar.inc(1);
    }
    bar.finish_with_message("done");
    drop(agent);
    drop(cluster);
    Ok(session)
}

/// The dedicated baseline (each workload alone, under cfs), then every mix of two or more jobs under every
/// policy, for every progress mode and repetition.
fn plan(spec: &Spec) -> Vec<Case<'_>> {
    let cfs = PolicyConfig { name: "cfs".into(), slot: slot::DEFAULT };
    let mut cases = Vec::new();
    for (progress, ranks_in) in spec.progress.iter().flat_map(|p| spec.ranks_in.iter().map(move |r| (p, r))) {
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
                cases.push(Case { mix, policy: cfs.clone(), label, progress, ranks_in, repetition });
            }
        }
        for policy in &spec.policies {
            for mix in spec.mixes.iter().filter(|m| m.len() > 1 || spec.unloaded) {
                for repetition in 1..=spec.repetitions {
                    let label = policy.label();
                    cases.push(Case { mix, policy: policy.clone(), label, progress, ranks_in, repetition });
                }
            }
        }
    }
    cases
}

/// Starts every job of the case at once and waits for all of them.
fn run_case(
    spec: &Spec,
    paths: &Paths,
    socket: &Path,
    podman: Option<&containers::Setup>,
    cluster: Option<&Cluster>,
    case: &Case<'_>,
    session: f64,
) -> anyhow::Result<Vec<ExperimentRun>> {
    let started_at = now();
    let mut jobs = Vec::new();
    // Background load first, so that the measured jobs start under it.
    let mut order: Vec<(usize, &String)> = case.mix.iter().enumerate().collect();
    order.sort_by_key(|(_, w)| !spec.workloads[*w].background);
    for (i, workload) in order {
        let name = format!("{}-{}-{}", spec.name, workload, i);
        let pmpi = paths.work.join(format!("{name}.pmpi.jsonl"));
        let _ = std::fs::remove_file(&pmpi);
        let w = &spec.workloads[workload];
        let mut program = vec![paths.bin.join(&w.command[0]).display().to_string()];
        program.extend(w.command[1..].iter().cloned());
        program.push("--json".into());
        let rank_env = vec![
            ("LD_PRELOAD".to_string(), paths.lib.join("liblockstep-pmpi.so").display().to_string()),
            ("LOCKSTEP_PMPI_OUT".to_string(), pmpi.display().to_string()),
        ];
        let mut cmd;
        match (case.ranks_in, podman, cluster) {
            ("slurm", _, Some(c)) => {
                // Every task, on every node, runs `env … PROGRAM`.
                let mut task = vec!["env".to_string()];
                task.extend(rank_env.iter().map(|(k, v)| format!("{k}={v}")));
                task.extend(program.iter().cloned());
                let _ = std::fs::remove_file(slurm_output(paths, &name));
                cmd = c.sbatch(&name, spec.ranks, case.progress == "busy", &slurm_output(paths, &name), &task);
            }
            ("container", Some(p), _) => {
                // mpirun outside any job cgroup; each rank a container, adopted below as the job.
                cmd = Command::new(paths.bin.join("mpirun"));
                let go = paths.work.join(format!("{name}.go"));
                let _ = std::fs::remove_file(&go);
                cmd.args(["-n", &spec.ranks.to_string()]).args(p.rank_command(&name, &rank_env, &go, &program));
                cmd.envs(p.env());
            }
            _ => {
                cmd = Command::new(std::env::current_exe()?);
                cmd.arg("--socket").arg(socket).arg("--store").arg(&paths.store);
                cmd.args(["run", "--job", &name, "--place", &spec.placement, "--"]);
                cmd.arg(paths.bin.join("mpirun")).args(["-n", &spec.ranks.to_string(), "env"]);
                cmd.args(rank_env.iter().map(|(k, v)| format!("{k}={v}"))).args(&program);
            }
        }
        if case.progress == "busy" {
            cmd.env("LOCKSTEP_MPI_BUSY_POLL", "1");
        }
        cmd.stdout(Stdio::piped()).stderr(Stdio::null());
        jobs.push((workload, name, pmpi, (Instant::now(), now()), cmd.spawn()?));
    }
    if case.ranks_in == "container" {
        for (_, name, _, _, _) in &jobs {
            let containers = containers::wait_for_ranks(name, spec.ranks, Duration::from_mins(1))?;
            let adopt = Request::Adopt { job: name.clone(), cgroups: vec![], pids: vec![], containers, row: None };
            check(call(socket, &adopt)?)?;
            std::fs::write(paths.work.join(format!("{name}.go")), b"")?;
        }
    }
    let (background, jobs): (Vec<_>, Vec<_>) = jobs.into_iter().partition(|j| spec.workloads[j.0].background);
    let mut runs = Vec::new();
    let mut outputs = Vec::new();
    for (workload, job, pmpi, (t0, submitted), child) in jobs {
        let out = child.wait_with_output()?;
        let mut wall_s = t0.elapsed().as_secs_f64();
        // A Slurm job's output, with the time it ended, is in its output file.
        let stdout = match case.ranks_in {
            "slurm" => std::fs::read_to_string(slurm_output(paths, &job)).unwrap_or_default(),
            _ => String::from_utf8_lossy(&out.stdout).into_owned(),
        };
        if let Some(end) = Cluster::end_time(&stdout) {
            wall_s = end - submitted;
        }
        outputs.push((workload, job, pmpi, wall_s, out.status, stdout));
    }
    for (_, job, _, _, mut child) in background {
        // The Slurm job cancelled and gone, its `sbatch --wait` is not worth waiting for; `lockstep run` passes
        // SIGTERM on to the job.
        if let Some(c) = cluster {
            c.cancel(&job);
        }
        let _ =
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM);
        let _ = child.wait();
    }
    let ended_at = now();
    // The agents' slot switches on the nodes, while lockstep co-scheduled the case's jobs.
    let slotted = case.policy.name != "cfs"
        && lockstep_core::cosched::by_name(&case.policy.name)
            .is_ok_and(|p| p.raise().is_none() || case.policy.name.starts_with("dcs+boost"));
    let skew = cluster.filter(|_| slotted);
    let raises = case.policy.name.starts_with("dcs");
    if skew.is_some() || raises {
        // The agents write decisions once a second: wait for the case's last ones (once for both readings).
        std::thread::sleep(Duration::from_millis(1100));
    }
    let slot_skew_ms = match skew {
        Some(c) => c.skew_ms(started_at, ended_at)?,
        None => None,
    };
    // Arrival-to-raise latency of the case's dcs raises, from the agents' decisions.
    let dcs = if raises {
        let stores = cluster.map_or_else(|| vec![paths.store.clone()], Cluster::stores);
        dcs_latency(&stores, started_at, ended_at)?
    } else {
        None
    };
    let mix = case
        .mix
        .iter()
        .map(|w| if spec.workloads[w].background { format!("[{w}]") } else { w.clone() })
        .collect::<Vec<_>>()
        .join("+");
    let mpl = case.mix.iter().filter(|w| !spec.workloads[*w].background).count() as u32;
    for (workload, job, pmpi, wall_s, status, stdout) in outputs {
        if case.ranks_in == "container" {
            let _ = call(socket, &Request::Release { job: job.clone() });
        }
        let result = stdout
            .lines()
            .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok().filter(|v| v.get("kernel").is_some()));
        runs.push(ExperimentRun {
            experiment: spec.name.clone(),
            session,
            policy: case.label.clone(),
            progress: case.progress.to_string(),
            placement: case.ranks_in.to_string(),
            mix: mix.clone(),
            mpl,
            workload: workload.clone(),
            job,
            repetition: case.repetition,
            time_s: result.as_ref().and_then(|v| v["time_s"].as_f64()),
            wall_s,
            comm_ratio: comm_ratio(&pmpi),
            verified: result.as_ref().is_some_and(|v| v["verified"] == true),
            exit_status: status.code(),
            started_at,
            tool_cpu_s: None,
            tool_rss_bytes: None,
            slot_skew_ms,
            dcs_raises: dcs.map(|d| d.0),
            dcs_p50_us: dcs.map(|d| d.1),
            dcs_p99_us: dcs.map(|d| d.2),
        });
    }
    Ok(runs)
}

/// Raises `dcs` made in `[from, to]` (seconds since the epoch) in the agents' stores, with the median and 99th
/// percentile of their arrival-to-raise latency in microseconds; `None` when there were none. The agents' last
/// decisions of the interval must have been written (they flush once a second).
fn dcs_latency(stores: &[PathBuf], from: f64, to: f64) -> anyhow::Result<Option<(u64, f64, f64)>> {
    let mut us = Vec::new();
    for db in stores {
        let db = rusqlite::Connection::open(db)?;
        let mut stmt =
            db.prepare("SELECT duration_us FROM decisions WHERE action = 'dcs-raise' AND time BETWEEN ?1 AND ?2")?;
        let rows = stmt.query_map([from, to], |r| r.get::<_, f64>(0))?;
        us.extend(rows.collect::<Result<Vec<f64>, _>>()?);
    }
    if us.is_empty() {
        return Ok(None);
    }
    us.sort_by(f64::total_cmp);
    let pct = |p: f64| us[((us.len() - 1) as f64 * p).round() as usize];
    Ok(Some((us.len() as u64, pct(0.5), pct(0.99))))
}

/// Where a Slurm job of the experiment writes its output.
fn slurm_output(paths: &Paths, job: &str) -> PathBuf {
    paths.work.join(format!("{job}.out"))
}

/// Mean communication share over the ranks in a PMPI output file.
fn comm_ratio(file: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(file).ok()?;
    let ratios: Vec<f64> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?["comm_ratio"].as_f64())
        .collect();
    (!ratios.is_empty()).then(|| ratios.iter().sum::<f64>() / ratios.len() as f64)
}

/// The progress bar of an experiment run: elapsed time, bar, cases done, the current case.
pub(crate) fn progress_bar(cases: usize) -> ProgressBar {
    let bar = ProgressBar::new(cases as u64);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar
}
