//! lockstep inside a real Slurm cluster on this machine (`tests/cluster/up`: munge, slurmctld, two slurmd nodes
//! in network namespaces, an agent each): MPI jobs over TCP between the nodes are found and co-scheduled in step by
//! both agents; an agent killed mid-job and a job cancelled mid-slot leave nothing frozen or boosted; the cluster
//! comes down without a trace. Each test brings up its own cluster and takes it down, pass or fail.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{assert_in_step, slot_gaps_ms, stderr, wait_until, WAIT};
use lockstep_cgroup::knobs::is_frozen;
use lockstep_cgroup::procfs::{Live, ProcessRef};
use lockstep_proto::protocol::{JobOrigin, Status};

/// One cluster at a time: the bridge, namespaces and ports are fixed.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// What spins on every CPU of a node (the cluster's nodes have this machine's) until cancelled, forking nothing
/// else: two such jobs on one node want twice as many CPUs as there are, and `gang` slices them. As a step
/// (`srun` runs a program, not a shell's `exec`).
fn spinner() -> String {
    let pus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    format!("sh -c '{}wait'", "(while :; do :; done) & ".repeat(pus))
}

/// A batch script that runs [`spinner`].
fn spin() -> String {
    format!("exec {}", spinner())
}

/// How long after both are seen two jobs of lu class A are surely past MPI_Init and still running.
const MIDWAY: Duration = Duration::from_secs(3);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where `make build` installs the programs (`make test` says where): LOCKSTEP_BIN, else build/bin.
fn bin() -> PathBuf {
    std::env::var_os("LOCKSTEP_BIN").map_or_else(|| repo().join("build/bin"), PathBuf::from)
}

/// The directory of the MPI kernels, when they are built.
fn kernels() -> Option<PathBuf> {
    let dir = bin();
    dir.join("lu").exists().then_some(dir)
}

/// The directory of the SPANK plugin and the MPI profiler, beside the programs'.
fn library() -> PathBuf {
    bin().join("../lib")
}

/// Whether this machine can run the cluster (root is required); says what is missing when not.
fn can_run() -> bool {
    common::require_root();
    let missing: Vec<&str> = ["munged", "slurmctld", "slurmd", "srun", "mpirun"]
        .into_iter()
        .filter(|c| {
            !Command::new("sh").args(["-c", &format!("command -v {c}")]).output().is_ok_and(|o| o.status.success())
        })
        .collect();
    if !missing.is_empty() || kernels().is_none() {
        common::missing(&format!("needs {missing:?} (scripts/deps.sh) and the MPI kernels (make build)"));
        return false;
    }
    true
}

/// The two-node cluster of a test, up, with the lock that keeps other tests' clusters away; `None` (test
/// skipped) when this machine cannot run it.
fn start(hooks: bool) -> Option<(std::sync::MutexGuard<'static, ()>, Cluster)> {
    start_nodes(2, hooks)
}

/// A cluster of `nodes` nodes, as [`start`].
fn start_nodes(nodes: u32, hooks: bool) -> Option<(std::sync::MutexGuard<'static, ()>, Cluster)> {
    start_with(nodes, hooks, &[])
}

/// A cluster of `nodes` nodes, as [`start`], brought up with `env` (`tests/cluster/up`'s settings) too.
fn start_with(nodes: u32, hooks: bool, env: &[(&str, &str)]) -> Option<(std::sync::MutexGuard<'static, ()>, Cluster)> {
    if !can_run() {
        return None;
    }
    let serial = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    Some((serial, Cluster::up(nodes, hooks, env)))
}

/// Gang scheduling with 100 ms slots on both nodes, and two MPI jobs over both: ep class A twice (4 s alone on this
/// machine, 24 s side by side in this cluster, whose nodes share its CPUs), so that both run well past the second in
/// which `gang` runs a job just found in every slot. lu W and cg A (3 s and 1 s side by side) ended before any slot
/// froze either in two fresh clones' `make test` in a row (beside the fuzz build); lu A, whose many small messages
/// go between the nodes over TCP from ranks that yield, took 70–90 s side by side.
fn two_jobs_under_gang(cluster: &Cluster) -> (Child, Child) {
    cluster.policy("gang", "100ms");
    (cluster.srun("ep", "A"), cluster.srun("ep", "A"))
}

/// A cluster, taken down when dropped.
struct Cluster {
    dir: lockstep_scratch::TempDir,
    /// Its nodes, `n1` to `nN`.
    nodes: u32,
    /// Every daemon's name and process (its PID and start time), as `up` recorded them.
    pids: Vec<(String, ProcessRef)>,
    /// What `up` said.
    said: String,
    /// Agents a test started again (`restart_agent`), reaped once `down` stopped them.
    restarted: Vec<Child>,
}

impl Cluster {
    /// `nodes` nodes, with lockstep's prolog and epilog when `hooks`, `up` run with `env` too.
    fn up(nodes: u32, hooks: bool, env: &[(&str, &str)]) -> Self {
        let dir = lockstep_scratch::tempdir().unwrap();
        let out = Command::new(repo().join("tests/cluster/up"))
            .arg(nodes.to_string())
            .envs(env.iter().copied())
            .env("LOCKSTEP_CLUSTER_HOOKS", if hooks { "yes" } else { "no" })
            .env("LOCKSTEP_CLUSTER_DIR", dir.path())
            .env("LOCKSTEP", env!("CARGO_BIN_EXE_lockstep"))
            .env("LOCKSTEP_LIB", library())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut cluster = Self { dir, nodes, pids: Vec::new(), said: text.clone(), restarted: Vec::new() };
        for node in 1..=nodes {
            common::watch_log(&cluster.log(node));
        }
        assert!(out.status.success(), "cluster/up failed: {}", stderr(&out));
        assert!(text.contains("export SLURM_CONF="), "up must say how to reach the cluster: {text}");
        let pids = std::fs::read_to_string(cluster.dir.path().join("pids")).unwrap();
        cluster.pids = pids
            .lines()
            .filter_map(|l| {
                let mut fields = l.split(' ');
                let name = fields.next()?.to_string();
                Some((name, ProcessRef { pid: fields.next()?.parse().ok()?, start: fields.next()?.parse().ok()? }))
            })
            .collect();
        cluster
    }

    /// Node `node`'s agent log.
    fn log(&self, node: u32) -> PathBuf {
        self.dir.path().join(format!("log/agent-n{node}.log"))
    }

    fn socket(&self, node: u32) -> PathBuf {
        self.dir.path().join(format!("n{node}/agent.sock"))
    }

    fn store(&self, node: u32) -> PathBuf {
        self.dir.path().join(format!("n{node}/lockstep.db"))
    }

    /// `lockstep` on node `node`'s agent.
    fn lockstep(&self, node: u32, args: &[&str]) -> Output {
        let out = Command::new(env!("CARGO_BIN_EXE_lockstep"))
            .arg("--socket")
            .arg(self.socket(node))
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "lockstep {args:?} on n{node}: {}", stderr(&out));
        out
    }

    fn status(&self, node: u32) -> Status {
        serde_json::from_slice(&self.lockstep(node, &["status", "--json"]).stdout).unwrap()
    }

    /// The status of n1 and of n2, read one after the other.
    fn statuses(&self) -> (Status, Status) {
        (self.status(1), self.status(2))
    }

    /// Waits until neither n1's nor n2's agent shows a job.
    /// Waits until every node's agent has let its jobs go.
    fn let_go(&self) {
        let all = || (1..=self.nodes).map(|n| self.status(n)).collect::<Vec<_>>();
        wait_until("the agents to let the jobs go", WAIT, all, |s| s.iter().all(|s| s.jobs.is_empty()));
    }

    /// Cancels jobs `ids`; returns once the queue is empty and the agents have let them go, nothing left frozen
    /// or boosted.
    fn cancel_all(&self, ids: &[String]) {
        let out = self.slurm("scancel").args(ids).output().unwrap();
        assert!(out.status.success(), "scancel: {}", stderr(&out));
        wait_until("the queue to empty", WAIT, || self.queue(), Vec::is_empty);
        self.let_go();
        nothing_frozen_or_boosted();
    }

    /// How many of `actions` node `node`'s agent recorded for `job` after slot `after` (its decisions reach the
    /// store once a second: waited for here).
    fn recorded(&self, node: u32, job: &str, actions: &str, after: u64) -> i64 {
        std::thread::sleep(Duration::from_millis(1500));
        let store = rusqlite::Connection::open(self.store(node)).unwrap();
        let sql = format!("SELECT count(*) FROM decisions WHERE job = ?1 AND action IN ({actions}) AND slot > ?2");
        store.query_row(&sql, rusqlite::params![job, after as i64], |r| r.get(0)).unwrap()
    }

    fn slurm(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", self.dir.path().join("slurm.conf"))
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env("OMPI_MCA_btl", "self,tcp")
            .env("OMPI_MCA_btl_tcp_if_include", "eth0")
            .env("OMPI_MCA_mpi_yield_when_idle", "1");
        c
    }

    /// `srun -N2 -n2 KERNEL --class CLASS` in the background.
    fn srun(&self, kernel: &str, class: &str) -> Child {
        self.slurm("srun")
            .args(["-N2", "-n2", "--job-name", kernel])
            .arg(kernels().unwrap().join(kernel))
            .args(["--class", class])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// IDs of the jobs in the queue.
    fn queue(&self) -> Vec<u64> {
        let out = self.slurm("squeue").args(["-h", "-o", "%i"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.trim().parse().ok()).collect()
    }

    fn policy(&self, policy: &str, slot: &str) {
        for node in 1..=self.nodes {
            self.lockstep(node, &["policy", "set", policy, "--slot", slot]);
        }
    }

    /// The PID `up` recorded for `daemon` (`munged`, `slurmctld`, `slurmd-nN`, `agent-nN`).
    fn pid(&self, daemon: &str) -> i32 {
        self.pids
            .iter()
            .find(|(n, _)| n == daemon)
            .unwrap_or_else(|| panic!("no PID of {daemon}: {:?}", self.pids))
            .1
            .pid
    }

    /// Every daemon `up` started that is still alive: its PID names it still (a PID alone may have gone to another
    /// process since), and it has not exited.
    fn alive(&self) -> Vec<String> {
        self.pids.iter().filter(|(_, p)| p.alive() && common::running(p.pid)).map(|(n, _)| n.clone()).collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in 1..=self.nodes {
            common::forget_log(&self.log(node));
        }
        let _ = Command::new(repo().join("tests/cluster/down")).env("LOCKSTEP_CLUSTER_DIR", self.dir.path()).output();
        for mut agent in self.restarted.drain(..) {
            let _ = agent.wait();
        }
    }
}

/// Waits for an srun and checks that the NPB-style kernel verified.
fn verified(child: Child, what: &str) {
    let out = common::output_within(child, common::RUN_LIMIT, &format!("{what}'s srun"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{what}: srun failed: {}{}", text, stderr(&out));
    assert!(text.contains("SUCCESSFUL"), "{what} did not verify: {text}");
}

/// Asserts that a cluster taken down left nothing: no daemon, namespace, bridge or cgroup of a Slurm job.
fn assert_no_trace(cluster: &Cluster) {
    assert!(cluster.alive().is_empty(), "left running: {:?}", cluster.alive());
    let netns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&netns.stdout).contains("ls-n"), "namespaces left");
    assert!(!Path::new("/sys/class/net/lsbr0").exists(), "bridge left");
    let (freeze, weights) = slurm_files();
    assert!(freeze.is_empty() && weights.is_empty(), "cgroups left: {freeze:?} {weights:?}");
}

/// Every freezer file of the cluster's Slurm jobs, and the weight files of the agents' Slurm weight cgroups.
fn slurm_files() -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut freeze = Vec::new();
    let trees = std::fs::read_dir("/sys/fs/cgroup/freezer").into_iter().flatten().flatten();
    for tree in trees.filter(|e| e.file_name().to_string_lossy().starts_with("slurm_n")) {
        let dirs = |d: &Path| std::fs::read_dir(d).into_iter().flatten().flatten().filter(|e| e.path().is_dir());
        for d in dirs(&tree.path()) {
            for job in dirs(&d.path()) {
                freeze.push(job.path().join("freezer.state"));
            }
        }
    }
    let weights = std::fs::read_dir("/sys/fs/cgroup/cpu/lockstep")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("slurm_n"))
        .map(|e| e.path().join("cpu.shares"))
        .collect();
    (freeze, weights)
}

/// Every process in the cgroups of `files` (what `slurm_files` found) and below them, as `cgroup: PID (command)
/// state`: what keeps a cgroup that should be gone.
fn processes_in(files: &(Vec<PathBuf>, Vec<PathBuf>)) -> Vec<String> {
    let dirs = files.0.iter().chain(&files.1).filter_map(|f| f.parent());
    dirs.flat_map(|dir| {
        lockstep_cgroup::procs_below(dir).unwrap_or_default().into_iter().map(move |pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // The command (in parentheses, maybe with spaces) and the state after it.
            let (command, rest) = stat.split_at(stat.rfind(')').map_or(0, |i| i + 1));
            let command = command.find('(').map_or("", |i| &command[i..]);
            format!("{}: {pid} {command} {}", dir.display(), rest.split_whitespace().next().unwrap_or("gone"))
        })
    })
    .collect()
}

/// No Slurm job cgroup frozen, no weight cgroup boosted.
fn nothing_frozen_or_boosted() {
    let (freeze, weights) = slurm_files();
    for f in freeze {
        assert!(!is_frozen(&f).unwrap_or(false), "{} left frozen", f.display());
    }
    for w in weights {
        let shares = std::fs::read_to_string(&w).unwrap_or_default();
        assert!(shares.trim().is_empty() || shares.trim() == "1024", "{} left boosted ({shares})", w.display());
    }
}

/// `(first, last)` time an agent froze or thawed job `job`.
fn acted_on(store: &Path, job: &str) -> (f64, f64) {
    let db = rusqlite::Connection::open(store).unwrap();
    db.query_row(
        "SELECT min(time), max(time) FROM decisions WHERE job = ?1 AND action IN ('freeze', 'thaw')",
        [job],
        |r| Ok((r.get::<_, Option<f64>>(0)?.unwrap_or(0.0), r.get::<_, Option<f64>>(1)?.unwrap_or(0.0))),
    )
    .unwrap()
}

#[test]
#[ignore = "needs root"]
fn mpi_jobs_span_both_nodes_and_are_gang_scheduled_in_step() {
    let Some((_serial, cluster)) = start(true) else { return };
    let (first, second) = two_jobs_under_gang(&cluster);
    // Both agents find both jobs, with the row the controller's prolog gave each: the same on both nodes,
    // different for the two jobs.
    // (job, its row on n1, on n2, whether both rows came from the prolog), for the jobs both nodes show.
    let rows_of = |(s1, s2): &(Status, Status)| -> Vec<_> {
        s1.jobs
            .iter()
            .filter_map(|a| {
                s2.jobs.iter().find(|b| b.name == a.name).map(|b| (a.name.clone(), a.row, b.row, a.pinned && b.pinned))
            })
            .collect()
    };
    let both_seen = |seen: &(Status, Status)| {
        let rows = rows_of(seen);
        rows.len() == 2
            && rows.iter().all(|r| r.3)
            && seen.0.jobs.iter().chain(&seen.1.jobs).all(|j| j.origin == JobOrigin::Slurm)
    };
    let seen = wait_until("both agents to see both jobs", WAIT, || cluster.statuses(), both_seen);
    let rows = rows_of(&seen);
    for (job, r1, r2, pinned) in &rows {
        assert!(job.slurm().is_some(), "{job}");
        assert_eq!(r1, r2, "job {job}: row {r1} on n1, {r2} on n2");
        assert!(pinned, "job {job}: the row must come from the prolog");
    }
    assert_ne!(rows[0].1, rows[1].1, "two jobs sharing the nodes got the same row: {rows:?}");
    // Cluster-wide counts of one job, nodes from `squeue`: no wrapper around the MPI launch.
    let stat = Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(["stat", "--job", &rows[0].0.to_string(), "--metrics-port", "19464", "-e", "task-clock,context-switches"])
        .env("SLURM_CONF", cluster.dir.path().join("slurm.conf"))
        .output()
        .unwrap();
    verified(first, "the first ep");
    verified(second, "the second ep");
    let text = stderr(&stat);
    assert!(stat.status.success(), "stat --job {}: {text}", rows[0].0);
    assert!(text.contains("on 2 node(s)") && text.contains("task-clock"), "{text}");
    // A job Slurm does not know is bad input.
    let unknown = Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(["stat", "--job", "slurm-999999", "--metrics-port", "19464"])
        .env("SLURM_CONF", cluster.dir.path().join("slurm.conf"))
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(2), "{}", stderr(&unknown));
    assert!(stderr(&unknown).contains("does not know job 999999"), "{}", stderr(&unknown));
    cluster.let_go();
    std::thread::sleep(Duration::from_millis(1200)); // decisions reach the store once a second
                                                     // Slot switches while the jobs ran, on both nodes.
    let (from, to) = rows
        .iter()
        .map(|(job, ..)| acted_on(&cluster.store(1), &job.to_string()))
        .fold((f64::MAX, 0.0f64), |(a, b), (f, t)| (a.min(f), b.max(t)));
    let skews = slot_gaps_ms(&cluster.store(1), &cluster.store(2), from..=to);
    assert!(skews.len() >= 5, "expected several slot switches while the jobs ran, got {}", skews.len());
    // What the agents said of late switches, shown should the assertion fail.
    for n in 1..=2 {
        let log = std::fs::read_to_string(cluster.log(n)).unwrap_or_default();
        log.lines().filter(|l| l.contains("after its boundary")).for_each(|l| eprintln!("n{n}: {l}"));
    }
    assert_in_step("between n1 and n2 under two MPI jobs", &skews, 100.0);
    nothing_frozen_or_boosted();
}

#[test]
#[ignore = "needs root"]
fn without_the_prolog_the_agents_find_the_jobs_and_agree_on_rows() {
    let Some((_serial, cluster)) = start(false) else { return };
    let (first, second) = two_jobs_under_gang(&cluster);
    let same_rows = |(s1, s2): &(Status, Status)| {
        let row =
            |s: &Status, name: &str| s.jobs.iter().find(|j| j.name.to_string() == name).map(|j| (j.row, j.pinned));
        s1.jobs.len() == 2
            && s1.jobs.iter().all(|j| row(s2, &j.name.to_string()) == Some((j.row, false)))
            && s1.jobs[0].row != s1.jobs[1].row
    };
    wait_until("both agents to see both jobs, in the same rows", WAIT, || cluster.statuses(), same_rows);
    verified(first, "the first ep");
    verified(second, "the second ep");
    cluster.let_go();
    nothing_frozen_or_boosted();
}

#[test]
#[ignore = "needs root"]
fn an_agent_killed_mid_job_loses_nothing() {
    let Some((_serial, cluster)) = start(true) else { return };
    let (first, second) = two_jobs_under_gang(&cluster);
    wait_until("a frozen job on n2", WAIT, || cluster.status(2), |s| s.jobs.iter().any(|j| j.frozen));
    let agent = cluster.pid("agent-n2");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(agent), nix::sys::signal::Signal::SIGKILL).unwrap();
    // The watchdog thaws what the agent froze on n2 within its beat timeout (2 s); n1 goes on co-scheduling.
    let n2_frozen = || -> Vec<PathBuf> {
        let files = slurm_files().0.into_iter().filter(|f| f.to_string_lossy().contains("slurm_n2"));
        files.filter(|f| is_frozen(f).unwrap_or(false)).collect()
    };
    wait_until("n2's watchdog to thaw its jobs", Duration::from_secs(2), n2_frozen, Vec::is_empty);
    verified(first, "the first ep");
    verified(second, "the second ep");
    nothing_frozen_or_boosted();
}

#[test]
#[ignore = "needs root"]
fn a_job_cancelled_mid_slot_leaves_nothing_frozen_or_boosted() {
    let Some((_serial, cluster)) = start(true) else { return };
    for (policy, slot) in [("gang", "300ms"), ("boost", "300ms")] {
        cluster.policy(policy, slot);
        let mut a = cluster.srun("lu", "A");
        let mut b = cluster.srun("lu", "A");
        // Cancel the job that is frozen (gang) or boosted (boost) right now, in the middle of its slot: the one the
        // snapshot that ended the wait shows (a second read may fall in the next slot, or between two). Mid-run,
        // MIDWAY after both jobs were first seen: when a job was cancelled 0.4 s after its start (in MPI_Init), one
        // node's slurmstepd of that step stayed, its tasks gone, longer than 20 s (1 of about 90 runs, cause in
        // Slurm not found), and its cgroup with it.
        let held = |s: &Status| s.jobs.iter().find(|j| j.frozen || j.boosted).filter(|_| s.jobs.len() == 2).cloned();
        let mut both_since: Option<Instant> = None;
        let look = || {
            let status = cluster.status(1);
            if status.jobs.len() == 2 {
                both_since.get_or_insert_with(Instant::now);
            } else {
                both_since = None;
            }
            (status, both_since.map_or(Duration::ZERO, |t| t.elapsed()))
        };
        let midway = |(s, since): &(Status, Duration)| held(s).is_some() && *since >= MIDWAY;
        let (seen, _) = wait_until("both jobs co-scheduled, midway", WAIT, look, midway);
        let held = held(&seen).expect("the wait ended on a snapshot with a held job");
        let id = held.name.slurm().unwrap().to_string();
        let out = cluster.slurm("scancel").arg(&id).output().unwrap();
        assert!(out.status.success(), "scancel: {}", stderr(&out));
        // Slurm gives a job's processes KillWait (30 s) between SIGTERM and SIGKILL: what a user may wait, and
        // no hang. What the queue and the agent showed last is printed if it takes longer.
        let id_n: u64 = id.parse().unwrap();
        wait_until(
            "the cancelled job to leave the queue",
            Duration::from_secs(90),
            || {
                (
                    cluster.queue(),
                    cluster.status(1).jobs.iter().map(|j| (j.name.clone(), j.frozen, j.boosted)).collect::<Vec<_>>(),
                )
            },
            |(queue, _)| !queue.contains(&id_n),
        );
        let gone = |(s1, s2): &(Status, Status)| s1.jobs.iter().chain(&s2.jobs).all(|j| j.name != held.name);
        wait_until("the agents to let it go", WAIT, || cluster.statuses(), gone);
        let other = cluster.queue();
        let out = cluster.slurm("scancel").args(other.iter().map(u64::to_string)).output().unwrap();
        assert!(out.status.success(), "scancel: {}", stderr(&out));
        wait_until("the queue to empty", WAIT, || cluster.queue(), Vec::is_empty);
        cluster.let_go();
        common::exit_within(&mut a, common::STOP_LIMIT, "an srun of a cancelled job");
        common::exit_within(&mut b, common::STOP_LIMIT, "an srun of a cancelled job");
        nothing_frozen_or_boosted();
        let removed = |((f, w), _): &((Vec<PathBuf>, Vec<PathBuf>), Vec<String>)| f.is_empty() && w.is_empty();
        let look = || {
            let files = slurm_files();
            let processes = processes_in(&files);
            (files, processes)
        };
        // Slurm's slurmstepd removes its cgroups once its tasks are gone, retrying after 1, 2, 4, 8, 16 and 32 s.
        wait_until("Slurm and the agents to remove the job cgroups", Duration::from_secs(70), look, removed);
    }
}

#[test]
#[ignore = "needs root"]
fn the_cluster_comes_down_without_a_trace() {
    let Some((_serial, cluster)) = start(true) else { return };
    let names: Vec<String> = cluster.alive();
    for daemon in ["munged", "slurmctld", "slurmd-n1", "slurmd-n2", "agent-n1", "agent-n2"] {
        assert!(names.iter().any(|n| n == daemon), "{daemon} not running after up: {names:?}");
    }
    // A job still running when the cluster goes down is cancelled with it.
    let job = cluster.srun("lu", "A");
    wait_until("the job to run", WAIT, || cluster.status(1), |s| s.jobs.len() == 1);
    // A daemon whose PID another process has by the time `down` runs (an agent a test killed, its PID taken by
    // a process of another test running beside): `down` knows the daemon by its start time too, and leaves that
    // process alone.
    let mut bystander = Command::new("sleep").arg("600").spawn().unwrap();
    let it = ProcessRef::of(bystander.id() as i32).unwrap();
    let mut pids = std::fs::OpenOptions::new().append(true).open(cluster.dir.path().join("pids")).unwrap();
    std::io::Write::write_all(&mut pids, format!("agent-n3 {} {}\n", it.pid, it.start + 1).as_bytes()).unwrap();
    let out = Command::new(repo().join("tests/cluster/down"))
        .env("LOCKSTEP_CLUSTER_DIR", cluster.dir.path())
        .output()
        .unwrap();
    let spared = bystander.try_wait().unwrap();
    let _ = bystander.kill();
    let _ = bystander.wait();
    assert!(out.status.success(), "down: {}", stderr(&out));
    assert_eq!(spared, None, "down signalled PID {} for a daemon that had ended", bystander.id());
    common::output_within(job, common::STOP_LIMIT, "the srun of a job the cluster took down");
    assert_no_trace(&cluster);
    assert!(!Path::new("/sys/fs/cgroup/freezer/slurm_n1").exists(), "Slurm's cgroup tree left");
    assert!(!cluster.dir.path().join("pids").exists(), "cluster files left");
}

/// A user who names a job like the fields lockstep reads (`x AdminComment=lockstep_row=0/1 JobState=RUNNING
/// NodeList=n9`) gets the place the controller's prolog chooses, not the one in the name, and the job that was there
/// first keeps a place of its own: lockstep asks Slurm only for fields no user writes.
#[test]
#[ignore = "needs root"]
fn a_job_named_like_an_admin_comment_gets_the_place_the_prolog_chose() {
    use lockstep_slurm::{JobInfo, Row, JOB_FORMAT};
    let Some((_serial, cluster)) = start_nodes(1, true) else { return };
    let submit = |user: &str, name: &str| {
        let out = cluster
            .slurm("runuser")
            .args(["-u", user, "--", "sbatch", "--parsable", "-D", "/", "-o", "/dev/null", "-J", name])
            .args(["--wrap", "sleep 120"])
            .output()
            .unwrap();
        assert!(out.status.success(), "sbatch as {user}: {}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).trim().parse::<u64>().unwrap()
    };
    let victim = submit("root", "victim");
    let hostile = submit("nobody", "x AdminComment=lockstep_row=0/1 JobState=RUNNING NodeList=n9");
    let deadline = Instant::now() + Duration::from_secs(30);
    let (last, places) = loop {
        let out = cluster.slurm("squeue").args(["-h", "-t", "all", "-O", JOB_FORMAT]).output().unwrap();
        let last = String::from_utf8_lossy(&out.stdout).into_owned();
        let jobs: Vec<JobInfo> = last.lines().filter_map(JobInfo::parse).collect();
        let places: Vec<_> = [victim, hostile]
            .iter()
            .filter_map(|id| match jobs.iter().find(|j| j.id.0 == *id && j.state == "RUNNING")?.row()? {
                Row::Cluster(s) => Some(s.place),
                Row::Node(_) => None,
            })
            .collect();
        if places.len() == 2 {
            break (last, places);
        }
        assert!(
            Instant::now() < deadline,
            "no place from the controller's prolog for both jobs in 30 s; squeue:\n{last}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    eprintln!("squeue:\n{last}");
    assert!(!places[0].overlaps(places[1]), "the jobs share a node and a slot: {places:?}\n{last}");
}

/// A cluster directory that user nobody made first (or a link of theirs to one of root's) is refused before
/// anything starts: its `slurm.conf` and hooks would run as root, and `down` kills the PIDs its `pids` file lists.
#[test]
#[ignore = "needs root"]
fn the_test_cluster_refuses_a_directory_another_user_made() {
    common::require_root();
    let top = lockstep_scratch::tempdir().unwrap();
    std::fs::set_permissions(top.path(), std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
    let theirs = top.path().join("cluster");
    let nobody = |args: &[&str]| {
        let out = common::as_nobody(args[0]).args(&args[1..]).output().unwrap();
        assert!(out.status.success(), "{args:?} as nobody: {}", stderr(&out));
    };
    nobody(&["mkdir", theirs.to_str().unwrap()]);
    let private = top.path().join("private");
    std::fs::create_dir(&private).unwrap();
    let link = top.path().join("link");
    nobody(&["ln", "-s", private.to_str().unwrap(), link.to_str().unwrap()]);
    for (dir, why) in [(&theirs, "belongs to UID 65534"), (&link, "the link")] {
        for script in ["up", "down"] {
            let out = Command::new(repo().join("tests/cluster").join(script))
                .arg("1")
                .env("LOCKSTEP_CLUSTER_DIR", dir)
                .env("LOCKSTEP", env!("CARGO_BIN_EXE_lockstep"))
                .output()
                .unwrap();
            let err = stderr(&out);
            eprintln!("{script} on {}: exit {:?}, {}", dir.display(), out.status.code(), err.trim());
            assert_eq!(out.status.code(), Some(2), "{script}: {err}");
            assert!(err.contains(why), "{script}: {err}");
        }
    }
    assert!(std::fs::read_dir(&theirs).unwrap().next().is_none(), "up wrote into nobody's directory");
    assert!(std::fs::read_dir(&private).unwrap().next().is_none(), "up wrote through nobody's link");
}

/// The controller prolog's row lock: in a directory user nobody made, it is refused at once; held by another
/// prolog that never lets go, it is given up after 10 s. Either way the job goes on (exit 0), with a line saying
/// why.
#[test]
#[ignore = "needs root"]
fn the_row_lock_cannot_be_planted_or_held_to_stall_job_starts() {
    common::require_root();
    let top = lockstep_scratch::tempdir().unwrap();
    std::fs::set_permissions(top.path(), std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
    let theirs = top.path().join("theirs");
    let out = common::as_nobody("mkdir").arg(&theirs).output().unwrap();
    assert!(out.status.success(), "mkdir as nobody: {}", stderr(&out));
    let prolog = |lock: &Path| {
        let started = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_lockstep"))
            .args(["slurm", "prolog-slurmctld"])
            .env("SLURM_JOB_ID", "7")
            .env("LOCKSTEP_SLURM_LOCK", lock)
            .output()
            .unwrap();
        (out, started.elapsed())
    };
    let (out, took) = prolog(&theirs.join("rows.lock"));
    let err = stderr(&out);
    eprintln!("planted: exit {:?} after {took:?}: {}", out.status.code(), err.trim());
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("belongs to UID 65534") && err.contains("goes on without lockstep"), "{err}");
    assert!(!theirs.join("rows.lock").exists(), "the lock was made in nobody's directory");
    // A holder that never lets go: the prolog gives up.
    let mine = top.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    let file = std::fs::File::create(mine.join("rows.lock")).unwrap();
    let _held = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(|(_, e)| e).unwrap();
    let (out, took) = prolog(&mine.join("rows.lock"));
    let err = stderr(&out);
    eprintln!("held: exit {:?} after {took:?}: {}", out.status.code(), err.trim());
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("held it for 10 s") && err.contains("goes on without lockstep"), "{err}");
}

#[test]
#[ignore = "needs root"]
fn the_spank_plugin_preloads_the_profiler_into_mpi_programs_only_and_users_can_turn_it_off() {
    if !library().join("lockstep-spank.so").exists() {
        common::missing("needs lockstep-spank.so (make build, with libslurm-dev from scripts/deps.sh)");
        return;
    }
    let Some((_serial, cluster)) = start(false) else { return };
    let pingpong = kernels().unwrap().join("pingpong");
    // An MPI program that links the profiler's MPI, run as a user runs it: the profiler is there (each rank writes
    // its counts at MPI_Finalize) without the user naming it; off, it is not.
    let profiled = |option: Option<&str>| {
        let out_dir = lockstep_scratch::tempdir().unwrap();
        let mut srun = cluster.slurm("srun");
        srun.args(["-N2", "-n2"]).args(option).arg(&pingpong).args(["--iterations", "100", "--repeats", "1"]);
        srun.env("LOCKSTEP_PMPI_OUT", out_dir.path()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let out = common::output_within(srun.spawn().unwrap(), common::RUN_LIMIT, "pingpong's srun");
        assert!(out.status.success(), "srun {option:?} pingpong: {}", stderr(&out));
        std::fs::read_dir(out_dir.path()).unwrap().count()
    };
    assert_eq!(profiled(None), 2, "one profile per rank, unasked");
    assert_eq!(profiled(Some("--lockstep-profiler=on")), 2, "one profile per rank, asked");
    assert_eq!(profiled(Some("--lockstep-profiler=off")), 0, "no profile when the user turns it off");
    // A program that is not an MPI program gets nothing preloaded.
    let out = cluster.slurm("srun").args(["-N1", "-n1", "env"]).output().unwrap();
    let env = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "srun env: {}", stderr(&out));
    assert!(!env.contains("liblockstep-pmpi"), "env is no MPI program: {env}");
    // A bad value is the user's mistake: srun says so and runs nothing.
    let out = cluster.slurm("srun").args(["-N1", "-n1", "--lockstep-profiler=maybe", "true"]).output().unwrap();
    let err = stderr(&out);
    assert!(!out.status.success() && err.contains("--lockstep-profiler=maybe not understood"), "{err}");
}

#[test]
fn the_hooks_never_fail_a_job_and_refuse_to_guess_one() {
    let dir = lockstep_scratch::tempdir().unwrap();
    let hook = |args: &[&str], id: Option<&str>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_lockstep"));
        c.arg("--socket").arg(dir.path().join("none.sock")).args(["slurm"]).args(args).env_remove("SLURM_JOB_ID");
        // No Slurm reachable: scontrol is not on PATH.
        c.env("PATH", dir.path()).env("SLURM_JOB_UID", "0");
        if let Some(id) = id {
            c.env("SLURM_JOB_ID", id);
        }
        c.output().unwrap()
    };
    // Run by hand without a job: bad input, one line, exit 2.
    for (id, needle) in [(None, "SLURM_JOB_ID is not set"), (Some("abc"), "bad SLURM_JOB_ID")] {
        let out = hook(&["prolog"], id);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(needle) && err.trim().lines().count() == 1, "{err}");
    }
    // A controller hook configured with a margin out of range: the administrator's mistake, said before anything.
    for hook_name in ["prolog-slurmctld", "epilog-slurmctld"] {
        let out = hook(&[hook_name, "--change-margin", "500ms"], Some("7"));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{hook_name}: {err}");
        assert!(err.contains("bad --change-margin \"500ms\" (expected a duration from 1s to 10m"), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    // Run by Slurm with no agent and no reachable controller: the job goes on (exit 0), the log says why.
    for hook_name in ["prolog", "epilog", "prolog-slurmctld"] {
        let out = hook(&[hook_name], Some("7"));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(0), "{hook_name}: {err}");
        assert!(err.contains("goes on without lockstep"), "{hook_name}: {err}");
    }
}

#[test]
#[ignore = "needs root"]
fn sixty_four_nodes_come_up_run_a_job_across_all_and_go_down_without_a_trace() {
    let Some((_serial, cluster)) = start_nodes(64, true) else { return };
    // What up says of itself: its time and the memory per node.
    eprintln!("{}", cluster.said.lines().next().unwrap_or_default());
    assert!(cluster.said.contains("MiB per node"), "{}", cluster.said);
    assert_eq!(cluster.alive().iter().filter(|n| n.starts_with("agent-")).count(), 64);
    let out = cluster.slurm("srun").args(["-N64", "-n64", "--ntasks-per-node", "1", "hostname"]).output().unwrap();
    assert!(out.status.success(), "srun -N64: {}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 64);
    let down = Command::new(repo().join("tests/cluster/down"))
        .env("LOCKSTEP_CLUSTER_DIR", cluster.dir.path())
        .output()
        .unwrap();
    assert!(down.status.success(), "down: {}", stderr(&down));
    assert_no_trace(&cluster);
}

#[test]
#[ignore = "needs root"]
fn three_jobs_in_a_triangle_agree_cluster_wide_under_gang() {
    let Some((_serial, cluster)) = start_nodes(3, true) else { return };
    cluster.policy("gang", "200ms");
    // n1+n2, n2+n3, n1+n3: every pair shares a node, each node runs two of the three.
    let mut jobs = Vec::new();
    for nodes in ["n1,n2", "n2,n3", "n1,n3"] {
        let out = cluster
            .slurm("sbatch")
            .args(["--parsable", "-N2", "-n2", "--ntasks-per-node", "1", "-w", nodes, "--wrap", "srun sleep 8"])
            .arg("--output")
            .arg(cluster.dir.path().join("%j.out"))
            .output()
            .unwrap();
        assert!(out.status.success(), "sbatch: {}", stderr(&out));
        let id: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        jobs.push((format!("slurm-{id}"), nodes.split(',').map(str::to_string).collect::<Vec<_>>()));
    }
    // Each agent shows the places, ROW/PERIOD.
    let placed = |s: &Status| s.jobs.len() == 2 && s.jobs.iter().all(|j| j.period.is_some());
    wait_until("n1 to show both its jobs' places", WAIT, || cluster.status(1), placed);
    wait_until("the jobs to end", WAIT, || cluster.queue(), Vec::is_empty);
    // The agents write their decisions once a second.
    std::thread::sleep(Duration::from_millis(1500));
    let mut decisions = Vec::new();
    for node in 1..=3 {
        decisions.extend(lockstep_store::Store::open(&cluster.store(node)).unwrap().decisions(0.0).unwrap());
    }
    for (job, nodes) in &jobs {
        let f = lockstep_lab::scale::measure::favoured(&decisions, job, nodes).expect("favour records");
        assert!(f.agreement >= 0.95, "{job} on {nodes:?}: agreement {f:?}");
        assert!(f.share < 0.9, "{job} shares its nodes and must not be favoured in every slot: {f:?}");
    }
    nothing_frozen_or_boosted();
}

impl Cluster {
    /// `sbatch --wrap SCRIPT` as `user`, output to /dev/null; the job's ID.
    fn sbatch_as(&self, user: &str, script: &str) -> u64 {
        let out = self
            .slurm("runuser")
            .args(["-u", user, "--", "sbatch", "--parsable", "-D", "/", "-o", "/dev/null", "--wrap", script])
            .output()
            .unwrap();
        assert!(out.status.success(), "sbatch as {user}: {}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }

    /// A munge credential sealing `payload`, made by `user` with the cluster's munged.
    fn seal(&self, user: &str, payload: &str) -> String {
        let mut child = Command::new("runuser")
            .args(["-u", user, "--", "munge", "-S"])
            .arg(self.dir.path().join("run/munge.sock"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(child.stdin.as_mut().unwrap(), payload.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "munge as {user}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// Job `id`'s state as Slurm says it (`RUNNING`, `COMPLETED`, …).
    fn job_state(&self, id: u64) -> String {
        let out = self.slurm("squeue").args(["-h", "-t", "all", "-j", &id.to_string(), "-o", "%T"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Stops node `node`'s agent (SIGTERM, as systemd does) and starts it again as `up` did, on `store`; the new
    /// agent is recorded for `down`. Returns once it answers.
    fn restart_agent(&mut self, node: u32, store: &Path) {
        let name = format!("agent-n{node}");
        let pid = self.pids.iter().rev().find(|(n, _)| *n == name).unwrap().1.pid;
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGTERM).unwrap();
        wait_until("the agent to stop", WAIT, || common::running(pid), |alive| !alive);
        let metrics = self
            .said
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("n{node}:")))
            .and_then(|l| l.split("metrics http://").nth(1))
            .and_then(|rest| rest.split('/').next())
            .map_or_else(|| panic!("no metrics address for n{node} in what up said: {}", self.said), str::to_string);
        let log = std::fs::OpenOptions::new().append(true).open(self.log(node)).unwrap();
        // Slurm's clients in the agent find the cluster through SLURM_CONF, as under `up`.
        let child = self
            .slurm("nsenter")
            .arg(format!("--net=/run/netns/ls-n{node}"))
            .arg(env!("CARGO_BIN_EXE_lockstep"))
            .arg("--socket")
            .arg(self.socket(node))
            .arg("--store")
            .arg(store)
            .args(["agent", "--node", &format!("n{node}"), "--metrics", &metrics])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let agent = ProcessRef::of(child.id() as i32).unwrap();
        self.restarted.push(child);
        self.pids.push((name.clone(), agent));
        let mut pids = std::fs::OpenOptions::new().append(true).open(self.dir.path().join("pids")).unwrap();
        std::io::Write::write_all(&mut pids, format!("{name} {} {}\n", agent.pid, agent.start).as_bytes()).unwrap();
        let answers = || {
            Command::new(env!("CARGO_BIN_EXE_lockstep"))
                .arg("--socket")
                .arg(self.socket(node))
                .arg("status")
                .output()
                .is_ok_and(|o| o.status.success())
        };
        wait_until("the restarted agent to answer", WAIT, answers, |ok| *ok);
    }
}

/// Where job `id` of user `uid` has its freezer directory on node 1.
fn freezer_dir(uid: u32, id: u64) -> PathBuf {
    PathBuf::from(format!("/sys/fs/cgroup/freezer/slurm_n1/uid_{uid}/job_{id}"))
}

/// What a batch script runs to move a `sleep` into a cgroup of its user's own below the step's freezer directory
/// (the user's), where Slurm does not look when it ends the job: `$f` is that directory.
const HIDE: &str = "f=/sys/fs/cgroup/freezer$(sed -n 's/^[0-9]*:freezer://p' /proc/self/cgroup); mkdir \"$f/mine\"; \
                    setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $! >\"$f/mine/cgroup.procs\"";

/// A user keeps their job's cgroups past its end (a process in a cgroup of theirs below their step, which Slurm
/// does not kill): agents restarted afterwards, on their store and on a new one, never take the job on (Slurm
/// does not run it), the last one says so once with the leftover process's owner, and another user's job alone
/// on the node is never frozen for it under `gang`.
#[test]
#[ignore = "needs root"]
fn a_job_kept_alive_in_its_users_own_cgroup_is_never_taken_on_after_a_restart() {
    let Some((_serial, mut cluster)) = start_nodes(1, true) else { return };
    cluster.policy("gang", "200ms");
    let phantom = cluster.sbatch_as("nobody", &format!("{HIDE}; sleep 2"));
    let dir = freezer_dir(65534, phantom);
    let hidden = dir.join("step_batch/mine");
    let leftover = wait_until(
        "the job to end in Slurm with its hidden process left",
        Duration::from_mins(1),
        || (cluster.job_state(phantom), lockstep_cgroup::read_procs(&hidden).unwrap_or_default()),
        |(state, procs)| state == "COMPLETED" && !procs.is_empty(),
    );
    let cleanup = Leftover { pid: leftover.1[0], dir: hidden.clone() };
    assert!(dir.is_dir(), "{} is gone: nothing to test", dir.display());
    let store = cluster.store(1);
    cluster.restart_agent(1, &store);
    let fresh = cluster.dir.path().join("n1/fresh.db");
    cluster.restart_agent(1, &fresh);
    cluster.policy("gang", "200ms");
    let said = format!("Slurm job {phantom}: its cgroups remain");
    // What the last agent (on the new store) logged.
    let log = || {
        let all = std::fs::read_to_string(cluster.log(1)).unwrap_or_default();
        all.rsplit_once("fresh.db").map(|(_, after)| after.to_string()).unwrap_or_default()
    };
    let limit = lockstep_slurm::REFRESH * 2 + Duration::from_secs(10) + WAIT;
    let seen = wait_until("the new agent to say the job is left alone", limit, log, |l| l.contains(&said));
    assert!(seen.contains("(processes: 1 of uid 65534)"), "{seen}");
    let bystander = cluster.sbatch_as("root", "sleep 120");
    let name = format!("slurm-{bystander}");
    wait_until(
        "the agent to take on the bystander",
        WAIT,
        || cluster.status(1),
        |s| s.jobs.iter().any(|j| j.name.to_string() == name),
    );
    let freezer = freezer_dir(0, bystander).join("freezer.state");
    let mut looks = Vec::new();
    for _ in 0..40 {
        looks.push(is_frozen(&freezer).unwrap_or(false));
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = cluster.status(1);
    let names: Vec<String> = status.jobs.iter().map(|j| j.name.to_string()).collect();
    assert_eq!(names, [name.as_str()], "only the bystander is managed");
    assert!(!looks.contains(&true), "the bystander was frozen in {} of 40 looks", looks.iter().filter(|f| **f).count());
    let said_once = log().matches(&said).count();
    assert_eq!(said_once, 1, "the new agent said it {said_once} times");
    drop(cleanup);
}

/// A user makes 4,000 cgroups below their step (their own freezer directory) while their job runs beside
/// another under `auto`: no thread of the agent opens any of them (traced with strace for 3 s), while it goes on
/// reading the step itself; the cgroups Slurm made are where it looks, one level deep.
#[test]
#[ignore = "needs root"]
fn the_cgroups_a_user_makes_below_their_step_are_never_walked() {
    if !Command::new("strace").arg("-V").output().is_ok_and(|o| o.status.success()) {
        common::missing("strace (scripts/deps.sh)");
        return;
    }
    let Some((_serial, cluster)) = start_nodes(1, true) else { return };
    cluster.policy("auto", "200ms");
    let grower = "f=/sys/fs/cgroup/freezer$(sed -n 's/^[0-9]*:freezer://p' /proc/self/cgroup); \
                  for i in $(seq 4000); do mkdir \"$f/c$i\" || exit 1; done; sleep 120";
    let job = cluster.sbatch_as("nobody", grower);
    let bystander = cluster.sbatch_as("root", "sleep 120");
    let step = freezer_dir(65534, job).join("step_batch");
    let count = || std::fs::read_dir(&step).map_or(0, |d| d.flatten().filter(|e| e.path().is_dir()).count());
    wait_until("the user's 4,000 cgroups", Duration::from_mins(2), count, |n| *n >= 4000);
    let names = [format!("slurm-{job}"), format!("slurm-{bystander}")];
    let both = |s: &Status| names.iter().all(|n| s.jobs.iter().any(|j| j.name.to_string() == *n));
    wait_until("the agent to take on both jobs", WAIT, || cluster.status(1), both);
    let agent = cluster.pids.iter().rev().find(|(n, _)| n == "agent-n1").unwrap().1.pid;
    let trace = cluster.dir.path().join("agent.strace");
    let out = Command::new("timeout")
        .args(["-s", "INT", "3", "strace", "-f", "-qq", "-e", "trace=openat,open", "-o"])
        .arg(&trace)
        .args(["-p", &agent.to_string()])
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&trace).unwrap_or_default();
    let ours = format!("job_{job}/step_batch/");
    let opened: Vec<&str> = text.lines().filter(|l| l.contains(&ours)).collect();
    assert!(
        opened.iter().any(|l| l.contains(&format!("{ours}cgroup.procs"))),
        "the agent never read the step in 3 s: nothing was traced ({}); trace:\n{}",
        stderr(&out),
        text.lines().take(20).collect::<Vec<_>>().join("\n")
    );
    // The user's are `c1` to `c4000`; Slurm's own files there (`cgroup.procs`, `freezer.state`) are read.
    let theirs = |l: &&&str| {
        l.split(&ours)
            .nth(1)
            .is_some_and(|rest| rest.starts_with('c') && rest[1..].starts_with(|c: char| c.is_ascii_digit()))
    };
    let below: Vec<&&str> = opened.iter().filter(theirs).collect();
    assert!(
        below.is_empty(),
        "the agent opened {} of the user's cgroups: {:?}",
        below.len(),
        &below[..below.len().min(5)]
    );
}

/// A process a test left in a cgroup of its own, and that cgroup: killed and removed when dropped.
struct Leftover {
    pid: i32,
    dir: PathBuf,
}

impl Drop for Leftover {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid), nix::sys::signal::Signal::SIGKILL);
        let deadline = Instant::now() + WAIT;
        while lockstep_cgroup::read_procs(&self.dir).is_ok_and(|p| !p.is_empty()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A requeued job runs again in a fresh place (issue 64): user nobody's job has the whole cycle, nobody requeues
/// it (the controller's epilog of run 0 takes lockstep's words out of its `AdminComment`, issue 60), and a second
/// job of nobody's takes the whole cycle while the first is pending. When the first runs again, the controller's
/// prolog places it anew beside the second, records the run (`lockstep_run=1`, Slurm's restart count) and the
/// node's agent takes that place.
/// Requeued by root once more, its epilog gives its slots back to the second job, though its restart count has
/// grown past the run its place was given for.
#[test]
#[ignore = "needs root"]
fn a_requeued_job_is_placed_anew_beside_the_jobs_placed_while_it_was_pending() {
    use lockstep_core::cosched::rows::Place;
    use lockstep_slurm::{JobInfo, Row, JOB_FORMAT};
    let Some((_serial, cluster)) = start_nodes(1, true) else { return };
    let submit = || {
        let out = common::as_nobody("sbatch")
            .env("SLURM_CONF", cluster.dir.path().join("slurm.conf"))
            .args(["--parsable", "-D", "/", "-o", "/dev/null", "--wrap", "sleep 300"])
            .output()
            .unwrap();
        assert!(out.status.success(), "sbatch as nobody: {}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).trim().parse::<u64>().unwrap()
    };
    let jobs = || {
        let out = cluster.slurm("squeue").args(["-h", "-t", "all", "-O", JOB_FORMAT]).output().unwrap();
        assert!(out.status.success(), "squeue: {}", stderr(&out));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let jobs: Vec<JobInfo> = text.lines().filter_map(JobInfo::parse).collect();
        (text, jobs)
    };
    let job = |seen: &(String, Vec<JobInfo>), id: u64| seen.1.iter().find(|j| j.id.0 == id).cloned();
    // The place job `id` holds for the run it is in, once it runs.
    let place = |seen: &(String, Vec<JobInfo>), id: u64| match job(seen, id).filter(|j| j.state == "RUNNING")?.row()? {
        Row::Cluster(s) => Some(s.place),
        Row::Node(_) => None,
    };
    let whole = Place { row: 0, period: 1 };
    let requeue = |id: u64, by_nobody: bool| {
        let mut scontrol = if by_nobody { common::as_nobody("scontrol") } else { cluster.slurm("scontrol") };
        let out = scontrol
            .env("SLURM_CONF", cluster.dir.path().join("slurm.conf"))
            .args(["requeue", &id.to_string()])
            .output()
            .unwrap();
        assert!(out.status.success(), "scontrol requeue {id}: {}", stderr(&out));
    };
    // The controller's hooks log a line each (after they wrote to Slurm): what they did, or why not.
    let hooks = || std::fs::read_to_string(cluster.dir.path().join("log/hooks.log")).unwrap_or_default();

    let first = submit();
    wait_until("nobody's first job to run in a place", WAIT, jobs, |s| place(s, first) == Some(whole));
    requeue(first, true);
    // The requeued job is COMPLETING until its processes have ended and its epilog has run: up to KillWait (30 s)
    // between SIGTERM and SIGKILL, more on a loaded machine (seen: still COMPLETING after 20 s beside two builds).
    let requeued = "the requeued job to pend as run 1, its place taken out of its comment";
    let seen = wait_until(requeued, Duration::from_secs(90), jobs, |s| {
        job(s, first).is_some_and(|j| j.state == "PENDING" && j.restarts == 1 && !j.admin_comment.contains("lockstep_"))
    });
    let stale = job(&seen, first).unwrap();
    eprintln!("requeued, pending:\n{}", seen.0);
    assert_eq!(stale.row(), None, "run 0's place is no place for run 1: {stale:?}");
    let second = submit();
    wait_until("the second job to take the whole cycle", WAIT, jobs, |s| place(s, second) == Some(whole));
    // Slurm holds a requeued batch job back for a while (BeginTime); root lets it start now.
    let out = cluster.slurm("scontrol").args(["update", &format!("JobId={first}"), "StartTime=now"]).output().unwrap();
    assert!(out.status.success(), "scontrol update StartTime=now: {}", stderr(&out));
    let seen = wait_until("the requeued job to run again in a place of its own", WAIT, jobs, |s| {
        place(s, first).is_some_and(|p| place(s, second).is_some_and(|q| !p.overlaps(q)))
    });
    eprintln!("running again:\n{}", seen.0);
    let again = job(&seen, first).unwrap();
    let (p1, p2) = (place(&seen, first).unwrap(), place(&seen, second).unwrap());
    assert_eq!((p1.to_string(), p2.to_string()), ("1/2".into(), "0/2".into()), "{}", seen.0);
    assert_eq!(again.restarts, 1, "{again:?}");
    assert!(again.admin_comment.split_whitespace().any(|w| w == "lockstep_run=1"), "{again:?}");
    let placed_anew = format!("job {first} place 1/2; made room: {second} -> 0/2; told 1 agent(s)\n");
    wait_until("the controller's prolog to say so", WAIT, hooks, |h| h.contains(&placed_anew));
    // The node's agent favours it in its new place.
    let name = format!("slurm-{first}");
    wait_until(
        "n1's agent to take the fresh place",
        WAIT,
        || cluster.status(1),
        |s| s.jobs.iter().any(|j| j.name.to_string() == name && j.period == Some(2) && j.row == 1),
    );

    // Requeued again, by root: its epilog gives its half back to the second job.
    requeue(first, false);
    let seen = wait_until("the second job to grow back to the whole cycle", WAIT, jobs, |s| {
        place(s, second) == Some(whole) && job(s, first).is_some_and(|j| j.restarts == 2)
    });
    eprintln!("requeued again:\n{}", seen.0);
    let given_back = format!("job {first} ended; grown: {second} -> 0/1");
    wait_until("the controller's epilog to say so", WAIT, hooks, |h| h.contains(&given_back));
}

/// Issue 60: a job Slurm suspends (`scontrol suspend`: Slurm stops its processes and it keeps its node) gives its
/// slots to its neighbour, which then runs in every slot instead of half of them, and gets them back when Slurm
/// resumes it. Two spinning one-task jobs on one node under `gang`, both free to run on both CPUs.
#[test]
#[ignore = "needs root"]
fn a_job_slurm_suspends_gives_its_slots_to_its_neighbour_until_it_resumes() {
    let Some((_serial, cluster)) = start_nodes(1, true) else { return };
    cluster.policy("gang", "300ms");
    let (a, b) = (cluster.sbatch_as("root", &spin()), cluster.sbatch_as("root", &spin()));
    let (name_a, name_b) = (format!("slurm-{a}"), format!("slurm-{b}"));
    let job = |s: &Status, name: &str| s.jobs.iter().find(|j| j.name.to_string() == name).cloned();
    let frozen = |s: &Status, name: &str| job(s, name).is_some_and(|j| j.frozen);
    let both = |s: &Status| s.jobs.len() == 2 && (frozen(s, &name_a) || frozen(s, &name_b));
    wait_until("both jobs taken on, one frozen", WAIT, || cluster.status(1), both);

    let out = cluster.slurm("scontrol").args(["suspend", &a.to_string()]).output().unwrap();
    assert!(out.status.success(), "scontrol suspend: {}", stderr(&out));
    let halted = |s: &Status| job(s, &name_a).is_some_and(|j| j.left.is_some() && !j.frozen);
    let seen = wait_until("the agent to see the suspension", WAIT, || cluster.status(1), halted);
    assert_eq!(cluster.job_state(a), "SUSPENDED");
    let since = seen.slot;
    let later = |s: &Status| s.slot >= since + 6;
    let seen = wait_until("6 slots later", WAIT, || cluster.status(1), later);
    assert!(job(&seen, &name_a).is_some_and(|j| j.left.is_some()), "taken back while suspended: {seen:?}");
    // Not one freeze of its neighbour since: it had the node's slots to itself.
    let freezes = cluster.recorded(1, &name_b, "'freeze'", since);
    assert_eq!(freezes, 0, "the neighbour was frozen while job {a} was suspended");

    let out = cluster.slurm("scontrol").args(["resume", &a.to_string()]).output().unwrap();
    assert!(out.status.success(), "scontrol resume: {}", stderr(&out));
    let back = |s: &Status| job(s, &name_a).is_some_and(|j| j.left.is_none()) && frozen(s, &name_b);
    wait_until("the resumed job back in its slots (its neighbour frozen in them)", WAIT, || cluster.status(1), back);

    cluster.cancel_all(&[a.to_string(), b.to_string()]);
}

/// `AdminComment` is shared (issue 60): the test cluster installs lockstep's hooks as sites do, each in its hook's
/// directory (`prolog.d/*` globs for slurmd, deploy/slurm/hook-dir for slurmctld), and beside lockstep's controller
/// epilog runs a jobstats-like one (`60-jobstats`, after `50-lockstep`) that writes `JS1:<base64>` into a job's
/// `AdminComment` at the end of a run only when the field is empty. While user nobody's first job runs, an
/// administrator appends content of their own (with `=`, `:`, base64, two spaces and a line break), and a second
/// job of nobody's makes it give up half its slots: lockstep's write keeps the administrator's content byte for byte, and the places are disjoint.
/// Both are requeued: at the end of each run lockstep's words leave the field before jobstats looks, so jobstats
/// finds the first's holding the administrator's content alone (and leaves it), the second's empty (and writes its
/// summary). Both run again, placed anew after the other tools' content, and end for good: slurmctld changes no
/// finished job, so lockstep's words stay after that content, which is still intact. They end at once: each one's
/// epilog may still find the other listed and grow it as it finishes; that one is left out, and no hook fails.
#[test]
#[ignore = "needs root"]
fn another_tools_admin_comment_survives_lockstep_and_a_jobstats_like_epilog_finds_the_field_as_without_it() {
    use lockstep_core::cosched::rows::Place;
    use lockstep_slurm::{records, without_ours, JobInfo, Row, JOB_FORMAT};
    let Some((_serial, cluster)) = start_nodes(1, true) else { return };
    let dir = cluster.dir.path();
    let jobstats_log = jobstats_like(dir);

    let jobs = || {
        let out = cluster.slurm("squeue").args(["-h", "-t", "all", "-O", JOB_FORMAT]).output().unwrap();
        assert!(out.status.success(), "squeue: {}", stderr(&out));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let jobs: Vec<JobInfo> = records(&text).iter().filter_map(|r| JobInfo::parse(r)).collect();
        (text, jobs)
    };
    let job = |seen: &(String, Vec<JobInfo>), id: u64| seen.1.iter().find(|j| j.id.0 == id).cloned();
    let place = |seen: &(String, Vec<JobInfo>), id: u64| match job(seen, id).filter(|j| j.state == "RUNNING")?.row()? {
        Row::Cluster(s) => Some(s.place),
        Row::Node(_) => None,
    };
    let disjoint = |s: &(String, Vec<JobInfo>), a: u64, b: u64| {
        place(s, a).is_some_and(|p| place(s, b).is_some_and(|q| !p.overlaps(q)))
    };
    let whole = Place { row: 0, period: 1 };
    let scontrol = |args: &[&str]| {
        let out = cluster.slurm("scontrol").args(args).output().unwrap();
        assert!(out.status.success(), "scontrol {args:?}: {}", stderr(&out));
    };
    // What jobstats found in job `id`'s field, at each of its runs' ends so far.
    let saw = |id: u64| {
        let log = std::fs::read_to_string(&jobstats_log).unwrap_or_default();
        let prefix = format!("{id} <");
        log.lines()
            .filter_map(|l| Some(l.strip_prefix(&prefix)?.strip_suffix('>')?.trim_end().to_string()))
            .collect::<Vec<_>>()
    };

    let first = cluster.sbatch_as("nobody", "sleep 300");
    let seen = wait_until("nobody's first job to run in a place", WAIT, jobs, |s| place(s, first) == Some(whole));
    // The administrator appends to the field as it is now (read, then written whole: all scontrol offers).
    let theirs = "audit=1 note=a:b=c\nJS0:aGVsbG8gd29ybGQ=  k=v";
    let now = job(&seen, first).unwrap().admin_comment;
    scontrol(&["update", &format!("JobId={first}"), &format!("AdminComment={now} {theirs}")]);
    let second = cluster.sbatch_as("nobody", "sleep 300");
    let seen = wait_until("both jobs to run in places of their own", WAIT, jobs, |s| disjoint(s, first, second));
    eprintln!("both running:\n{}", seen.0);
    let moved = job(&seen, first).unwrap();
    assert!(moved.admin_comment.starts_with(&format!("{theirs} lockstep_")), "{moved:?}");
    assert_eq!(without_ours(&moved.admin_comment), theirs, "{moved:?}");
    let name = format!("slurm-{second}");
    wait_until(
        "n1's agent to take the second job's place",
        WAIT,
        || cluster.status(1),
        |s| s.jobs.iter().any(|j| j.name.to_string() == name && j.period == Some(2)),
    );

    // Both requeued, one after the other: lockstep's words leave each field before jobstats looks.
    scontrol(&["requeue", &first.to_string()]);
    let seen = wait_until("the first's field to hold the administrator's content alone", WAIT, jobs, |s| {
        job(s, first).is_some_and(|j| j.admin_comment == theirs) && place(s, second) == Some(whole)
    });
    eprintln!("the first requeued:\n{}", seen.0);
    scontrol(&["requeue", &second.to_string()]);
    let seen = wait_until("jobstats' summary in the second's field", WAIT, jobs, |s| {
        job(s, second).is_some_and(|j| j.admin_comment.starts_with("JS1:"))
    });
    eprintln!("the second requeued:\n{}", seen.0);
    let looked = |(a, b): &(Vec<String>, Vec<String>)| !a.is_empty() && !b.is_empty();
    let (first_saw, second_saw) = wait_until("jobstats to look at both", WAIT, || (saw(first), saw(second)), looked);
    assert_eq!(first_saw, [theirs.replace('\n', "~")], "jobstats found the administrator's content alone");
    assert!(matches!(second_saw.as_slice(), [s] if s.is_empty() || s == "(null)"), "found empty: {second_saw:?}");
    let summary = job(&seen, second).unwrap().admin_comment;
    assert!(!summary.contains(' '), "jobstats' summary alone: {summary:?}");
    let hooks = std::fs::read_to_string(dir.join("log/hooks.log")).unwrap_or_default();
    let said = format!("job {first} ended; grown: {second} -> 0/1; told 1 agent(s); lockstep's words taken out");
    assert!(hooks.contains(&said), "{hooks}");

    // Both run again (root lets the requeued jobs start now), placed anew after the other tools' content.
    let pending =
        |s: &(String, Vec<JobInfo>)| [first, second].iter().all(|&id| job(s, id).is_some_and(|j| j.state == "PENDING"));
    wait_until("both requeued jobs to pend", WAIT, jobs, pending);
    for id in [first, second] {
        scontrol(&["update", &format!("JobId={id}"), "StartTime=now"]);
    }
    let seen = wait_until("both to run again in places of their own", WAIT, jobs, |s| disjoint(s, first, second));
    eprintln!("running again:\n{}", seen.0);
    for (id, other) in [(first, theirs), (second, summary.as_str())] {
        let again = job(&seen, id).unwrap();
        assert!(again.admin_comment.starts_with(&format!("{other} lockstep_")), "{again:?}");
        assert_eq!(without_ours(&again.admin_comment), other, "{again:?}");
        assert!(again.admin_comment.ends_with(&format!(" lockstep_run=1 lockstep_job={id}")), "{again:?}");
    }

    // Ended for good: slurmctld changes no finished job; the other tools' content is still intact.
    let out = cluster.slurm("scancel").args([first.to_string(), second.to_string()]).output().unwrap();
    assert!(out.status.success(), "scancel: {}", stderr(&out));
    let seen = wait_until(
        "jobstats to look at both again",
        WAIT,
        || (saw(first), saw(second)),
        |(a, b)| a.len() == 2 && b.len() == 2,
    );
    eprintln!("jobstats found:\n{}", std::fs::read_to_string(&jobstats_log).unwrap_or_default());
    for (id, other, last) in [(first, theirs, &seen.0[1]), (second, summary.as_str(), &seen.1[1])] {
        assert_eq!(without_ours(&last.replace('~', "\n")), other, "job {id}: jobstats found {last:?}");
    }
    let hooks = std::fs::read_to_string(dir.join("log/hooks.log")).unwrap_or_default();
    let kept = "lockstep's words stay in its AdminComment (Slurm changes no finished job's)";
    assert_eq!(hooks.matches(kept).count(), 2, "the controller's epilog says so at each final end: {hooks}");
    // Each end's epilog may find the other job still listed and grow it as it finishes: that one is left out.
    assert!(!hooks.contains("without lockstep's help"), "no hook failed: {hooks}");
}

/// Installs a jobstats-like controller epilog in the cluster in `dir`, after lockstep's
/// (`epilog-slurmctld.d/60-jobstats`): like jobstats' `slurmctldepilog.sh`, it writes a summary (`JS1:<base64>`)
/// into the job's `AdminComment`, here only when the field is empty, and logs what it found (`ID <FIELD>`, each line
/// break of the field a `~`) to the file it returns.
fn jobstats_like(dir: &Path) -> PathBuf {
    let log = dir.join("log/jobstats.log");
    let script = format!(
        "#!/bin/sh\n\
         export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin SLURM_CONF={conf}\n\
         now=$(squeue -h -t all -j \"$SLURM_JOB_ID\" -O admin_comment:0)\n\
         echo \"$SLURM_JOB_ID <$(printf %s \"$now\" | tr '\\n' '~')>\" >>{log}\n\
         case $now in '' | '(null)') ;; *) exit 0 ;; esac\n\
         summary=$(printf '{{\"nodes\":{{\"n1\":{{\"cpus\":1}}}},\"job\":%s}}' \"$SLURM_JOB_ID\" | base64 -w0)\n\
         exec scontrol update JobId=\"$SLURM_JOB_ID\" AdminComment=\"JS1:$summary\"\n",
        conf = dir.join("slurm.conf").display(),
        log = log.display(),
    );
    let path = dir.join("epilog-slurmctld.d/60-jobstats");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    log
}

/// Issue 60: the tasks of a job array, started together on one node, get places of their own. Slurm splits each
/// task off the array's record as it starts, with the `AdminComment` the record held, so a task started after
/// another was placed held that one's place; it is placed anew (lockstep's words name the job they were written
/// for), its neighbour making room, and the two are co-scheduled.
#[test]
#[ignore = "needs root"]
fn a_job_array_s_tasks_get_places_of_their_own() {
    let Some((_serial, cluster)) = start_nodes(1, true) else { return };
    cluster.policy("gang", "300ms");
    let out = cluster
        .slurm("sbatch")
        .args(["--parsable", "--array=1-2", "-n1", "-D", "/", "-o", "/dev/null", "--wrap", &spin()])
        .output()
        .unwrap();
    assert!(out.status.success(), "sbatch: {}", stderr(&out));
    let array = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let places = |s: &Status| -> Vec<(u32, Option<u32>)> { s.jobs.iter().map(|j| (j.row, j.period)).collect() };
    let apart = |s: &Status| {
        let p = places(s);
        p.len() == 2 && p.iter().all(|(_, period)| *period == Some(2)) && p[0].0 != p[1].0
    };
    let seen = wait_until("the two tasks in places of their own", WAIT, || cluster.status(1), apart);
    eprintln!("{:?}", places(&seen));
    wait_until("one task frozen in the other's slot", WAIT, || cluster.status(1), |s| s.jobs.iter().any(|j| j.frozen));
    cluster.cancel_all(&[array]);
}

/// Issue 60: a job given its node alone (`--exclusive`) has nothing to be co-scheduled with: another job waits for
/// the node in the queue, and the agent never freezes or boosts the exclusive one. In partition `whole`
/// (`OverSubscribe=YES:4`), where a job shares its node when it asks to (`--oversubscribe`, as the second does) and
/// `--exclusive` is honoured; in `debug` (`FORCE:4`) Slurm ignores `--exclusive` and started the second job beside
/// the first a few seconds later (the agent then co-scheduled the two, as it should).
#[test]
#[ignore = "needs root"]
fn an_exclusive_job_is_never_frozen_or_boosted() {
    let Some((_serial, cluster)) = start_nodes(1, true) else { return };
    cluster.policy("gang", "200ms");
    let sbatch = |exclusive: bool| {
        let mut c = cluster.slurm("sbatch");
        c.args(["--parsable", "-p", "whole", "-n1", "-D", "/", "-o", "/dev/null"]);
        c.arg(if exclusive { "--exclusive" } else { "--oversubscribe" });
        let out = c.args(["--wrap", &spin()]).output().unwrap();
        assert!(out.status.success(), "sbatch: {}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).trim().parse::<u64>().unwrap()
    };
    let alone = sbatch(true);
    let name = format!("slurm-{alone}");
    wait_until(
        "the exclusive job taken on",
        WAIT,
        || cluster.status(1),
        |s| s.jobs.iter().any(|j| j.name.to_string() == name),
    );
    let other = sbatch(false);
    let since = cluster.status(1).slot;
    let later = |s: &Status| s.slot >= since + 10;
    let seen = wait_until("10 slots later", WAIT, || cluster.status(1), later);
    // Slurm's view of both jobs, read after the agent's: what each failure below prints (a fresh clone's run once
    // found the second job RUNNING, the agent still showing one job, which one not said).
    let show = |id: u64| cluster.slurm("scontrol").args(["show", "job", &id.to_string()]).output();
    let slurm: String =
        [alone, other].map(show).iter().flatten().map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).collect();
    let names: Vec<String> = seen.jobs.iter().map(|j| j.name.to_string()).collect();
    assert_eq!(names, std::slice::from_ref(&name), "the agent must show the exclusive job alone; Slurm says:\n{slurm}");
    assert_eq!(cluster.job_state(other), "PENDING", "Slurm said, before:\n{slurm}");
    let actions = cluster.recorded(1, &name, "'freeze', 'boost'", 0);
    // What the agent decided and said of the job, shown should the assertion fail.
    let db = rusqlite::Connection::open(cluster.store(1)).unwrap();
    let mut rows = db
        .prepare(
            "SELECT time, slot, job, action, active_row, rows FROM decisions WHERE action NOT IN ('slot', 'favour')",
        )
        .unwrap();
    let decided: Vec<String> = rows
        .query_map([], |r| {
            Ok(format!(
                "{:.3} slot {} {:?} {} row {}/{}",
                r.get::<_, f64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, i64>(5)?
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let log = std::fs::read_to_string(cluster.log(1)).unwrap_or_default();
    let said: Vec<&str> = log.lines().filter(|l| l.contains("job")).collect();
    assert_eq!(
        actions,
        0,
        "the exclusive job was frozen or boosted; decisions:\n{}\nthe agent said:\n{}\nstatus: {:?}\nSlurm said:\n{slurm}\nhooks:\n{}",
        decided.join("\n"),
        said.join("\n"),
        seen.jobs.iter().map(|j| (j.name.to_string(), j.row, j.period, j.frozen)).collect::<Vec<_>>(),
        std::fs::read_to_string(cluster.dir.path().join("log/hooks.log")).unwrap_or_default()
    );
    cluster.cancel_all(&[alone.to_string(), other.to_string()]);
}

/// Issue 60: Slurm's own time slicing (`PreemptMode=GANG`) beside lockstep's would stop jobs in turns of both: the
/// agent says so once, at the first Slurm job it finds (one question to slurmctld in its life).
#[test]
#[ignore = "needs root"]
fn the_agent_says_once_when_slurm_time_slices_jobs_itself() {
    let Some((_serial, cluster)) = start_with(1, true, &[("LOCKSTEP_CLUSTER_GANG", "5")]) else { return };
    let said = "Slurm time-slices jobs itself here (PreemptMode=GANG";
    let log = || std::fs::read_to_string(cluster.log(1)).unwrap_or_default();
    let first = cluster.sbatch_as("root", "sleep 60");
    wait_until("the agent to say Slurm slices time", WAIT, log, |l| l.contains(said));
    let second = cluster.sbatch_as("root", "sleep 60");
    wait_until("the second job taken on", WAIT, || cluster.status(1), |s| s.jobs.len() == 2);
    cluster.cancel_all(&[first.to_string(), second.to_string()]);
    assert_eq!(log().matches(said).count(), 1, "said more than once: {}", log());
}

impl Cluster {
    /// `sbatch` of a job of one spinning task on each of `nodes` nodes, as root; its ID.
    fn sbatch_spinning(&self, nodes: u32) -> u64 {
        let n = nodes.to_string();
        let out = self
            .slurm("sbatch")
            .args(["--parsable", "-N", &n, "-n", &n, "--ntasks-per-node", "1", "-D", "/", "-o", "/dev/null"])
            .args(["--wrap", &format!("srun {}", spinner())])
            .output()
            .unwrap();
        assert!(out.status.success(), "sbatch: {}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }

    /// slurmctld's RPC counts by message type since they were last reset (`sdiag`), and resets them.
    fn rpcs(&self) -> Vec<(String, u64)> {
        let out = self.slurm("sdiag").output().unwrap();
        assert!(out.status.success(), "sdiag: {}", stderr(&out));
        let reset = self.slurm("sdiag").arg("-r").output().unwrap();
        assert!(reset.status.success(), "sdiag -r: {}", stderr(&reset));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let by_type = text.split("by message type").nth(1).unwrap_or_default();
        let by_type = by_type.split("by user").next().unwrap_or_default();
        by_type
            .lines()
            .filter_map(|l| {
                let (name, stats) = l.trim().split_once(' ')?;
                let count = stats.split("count:").nth(1)?.split_whitespace().next()?.parse().ok()?;
                Some((name.to_string(), count))
            })
            .collect()
    }
}

/// Node `node`'s agent's metrics door, `HOST:PORT`, as tests/cluster/up opens it.
fn door(node: u32) -> String {
    format!("10.231.0.{}:19464", 10 + node)
}

/// Milliseconds since the Unix epoch: a notice's time.
fn now_ms() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
}

/// What node n1's metrics door answered to `user`'s `POST /slurm/places` of `body` (sent with curl, as a user
/// on another node would): the answer's text, then its HTTP status on a line of its own.
fn post_notice(user: &str, body: &str) -> String {
    let mut child = Command::new("runuser")
        .args(["-u", user, "--", "curl", "-s", "--max-time", "40", "-w", "\n%{http_code}", "--data-binary", "@-"])
        .arg(format!("http://{}/slurm/places", door(1)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), body.as_bytes()).unwrap();
    String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap()
}

/// Where job `name` is in status `s`: its row and period.
fn place_of(s: &Status, name: &str) -> Option<(u32, u32)> {
    s.jobs.iter().find(|j| j.name.to_string() == name).and_then(|j| Some((j.row, j.period?)))
}

/// Whether both statuses show exactly the jobs of `want`, each at its place.
fn holds((a, b): &(Status, Status), want: &[(&str, (u32, u32))]) -> bool {
    [a, b].iter().all(|s| s.jobs.len() == want.len() && want.iter().all(|(n, p)| place_of(s, n) == Some(*p)))
}

/// Issue 60: the controller's hooks tell the agents every place they give and change (a munge-sealed notice to
/// each node's metrics door), so that no agent asks slurmctld while its jobs run. A second two-node job beside a
/// running one (which gives up half its slots to it) and its end (which gives them back): both agents hold the
/// same places throughout, and slurmctld answers job queries (`REQUEST_JOB_INFO`, squeue's) only for the two
/// controller hooks, one each; where agents asked every 2 s, that was 2 a node every 2 s.
#[test]
#[ignore = "needs root"]
fn the_controller_tells_the_agents_every_place_and_no_agent_asks_slurmctld_while_its_jobs_run() {
    let Some((_serial, cluster)) = start_nodes(2, true) else { return };
    cluster.policy("gang", "200ms");
    let first = format!("slurm-{}", cluster.sbatch_spinning(2));
    let alone = |s: &(Status, Status)| holds(s, &[(&first, (0, 1))]);
    wait_until("both agents to hold the first job at 0/1", WAIT, || cluster.statuses(), alone);
    cluster.rpcs();

    let id = cluster.sbatch_spinning(2);
    let second = format!("slurm-{id}");
    let halves = |s: &(Status, Status)| holds(s, &[(&first, (0, 2)), (&second, (1, 2))]);
    wait_until("both agents to hold the halved places", WAIT, || cluster.statuses(), halves);
    let out = cluster.slurm("scancel").arg(id.to_string()).output().unwrap();
    assert!(out.status.success(), "scancel: {}", stderr(&out));
    wait_until("both agents to hold the first job at 0/1 again", WAIT, || cluster.statuses(), alone);
    // Past two of the 2 s refreshes agents once made: none is made now.
    std::thread::sleep(Duration::from_secs(5));
    let rpcs = cluster.rpcs();
    let asked = rpcs.iter().find(|(t, _)| t == "REQUEST_JOB_INFO").map_or(0, |(_, c)| *c);
    assert_eq!(asked, 2, "slurmctld answered job queries other than the two hooks': {rpcs:?}");
    for node in 1..=2 {
        let log = std::fs::read_to_string(cluster.log(node)).unwrap();
        assert!(log.contains("the controller's hooks told"), "n{node}'s agent was told nothing: {log}");
    }
    let out = cluster.slurm("scancel").arg(first.trim_start_matches("slurm-")).output().unwrap();
    assert!(out.status.success(), "scancel: {}", stderr(&out));
    wait_until("the queue to empty", WAIT, || cluster.queue(), Vec::is_empty);
    cluster.let_go();
    nothing_frozen_or_boosted();
}

/// Issue 60, the notices' door as user `nobody` would use it: the agents' metrics door is open to the network, so
/// a notice must be sealed by root or `SlurmUser`, for this node, and new. nobody's own credential holding a
/// notice that would put their job in every slot, a notice for another node sealed by root, a credential of
/// root's sent again, and bytes that are no credential are all refused; the job keeps the place the controller
/// gave it.
#[test]
#[ignore = "needs root"]
fn a_notice_of_places_is_taken_only_from_root_or_slurm_user_for_this_node_once() {
    let Some((_serial, cluster)) = start_nodes(1, true) else { return };
    cluster.policy("gang", "200ms");
    let (a, b) = (cluster.sbatch_as("nobody", &spin()), cluster.sbatch_as("nobody", &spin()));
    let (name_a, name_b) = (format!("slurm-{a}"), format!("slurm-{b}"));
    // Whichever of the two the controller placed first holds 0/2 once the other came.
    let halves = |s: &Status| {
        let (pa, pb) = (place_of(s, &name_a), place_of(s, &name_b));
        pa.zip(pb).is_some_and(|(pa, pb)| pa.1 == 2 && pb.1 == 2 && pa.0 != pb.0)
    };
    let seen = wait_until("both jobs at their places", WAIT, || cluster.status(1), halves);
    let held = place_of(&seen, &name_a);
    // As nobody, over the network, as a user on another node would.
    let post = |body: &str| post_notice("nobody", body);
    let notice = |node: &str| {
        format!(
            "lockstep-places 1 node={node} at={}\n{a}|RUNNING||0|{a}|N/A|N/A|lockstep_row=0/1 lockstep_run=0 \
             lockstep_job={a}\n",
            now_ms()
        )
    };
    let said = post(&cluster.seal("nobody", &notice("n1")));
    assert!(said.ends_with("403") && said.contains("sealed by UID 65534"), "nobody's own notice: {said}");
    let said = post(&cluster.seal("root", &notice("n2")));
    assert!(said.ends_with("403") && said.contains("not this one"), "a notice for n2: {said}");
    let roots = cluster.seal("root", &format!("lockstep-places 1 node=n1 at={}\n", now_ms()));
    assert!(post(&roots).ends_with("200"), "root's empty notice is taken");
    let said = post(&roots);
    assert!(said.ends_with("403") && said.contains("Replayed"), "root's notice again: {said}");
    let said = post("lockstep_row=0/1");
    assert!(said.ends_with("400"), "bytes that are no credential: {said}");
    let seen = cluster.status(1);
    assert_eq!(place_of(&seen, &name_a), held, "{seen:?}");
    cluster.cancel_all(&[a.to_string(), b.to_string()]);
}

/// What nobody runs to flood a metrics door (`HOST PORT SECONDS`) with notices of places: credential-shaped
/// bodies that munged must be asked about. Each of 16 threads sends one, waits 300 ms (the agent has started its
/// handler by then), closes its side and reads what comes back; every 200 ms it prints how many notices were sent
/// in all and how many of them were refused at the door (429 or 503).
const NOTICE_FLOOD: &str = r#"
import socket, sys, threading, time
host, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
body = b"MUNGE:" + b"A" * 64 + b":"
request = b"POST /slurm/places HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
counts, lock, end = [0, 0], threading.Lock(), time.monotonic() + seconds
def flood():
    while time.monotonic() < end:
        said = b""
        try:
            s = socket.create_connection((host, port), timeout=2)
        except OSError:
            time.sleep(0.05)
            continue
        with s:
            try:
                s.sendall(request)
                time.sleep(0.3)
                s.shutdown(socket.SHUT_WR)
                said = s.recv(64)
            except OSError:
                pass
        with lock:
            counts[0] += 1
            counts[1] += said.startswith((b"HTTP/1.1 429", b"HTTP/1.1 503"))
for _ in range(16):
    threading.Thread(target=flood, daemon=True).start()
while time.monotonic() < end:
    time.sleep(0.2)
    with lock:
        print(counts[0], counts[1], flush=True)
"#;

/// The `unmunge` processes of `pid` (an agent) that wait for munged: one per handler of a notice waiting for its
/// check. One the agent has killed (past its time-out) or not yet reaped holds no handler and is not counted: it
/// is a zombie, or has SIGKILL pending, or runs its exit.
fn unmunges_of(pid: i32) -> usize {
    let waiting = |status: &str| {
        let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).map(str::trim);
        let killed =
            |mask: Option<&str>| mask.and_then(|m| u64::from_str_radix(m, 16).ok()).is_some_and(|m| m & (1 << 8) != 0);
        field("Name:") == Some("unmunge")
            && field("PPid:").and_then(|p| p.parse().ok()) == Some(pid)
            && field("State:").is_some_and(|s| s.starts_with('S'))
            && !killed(field("SigPnd:"))
            && !killed(field("ShdPnd:"))
    };
    let entries = std::fs::read_dir("/proc").unwrap().filter_map(Result::ok);
    entries.filter_map(|e| std::fs::read_to_string(e.path().join("status")).ok()).filter(|s| waiting(s)).count()
}

/// A process stopped (SIGSTOP), continued when dropped, however the test ends.
struct Stopped(nix::unistd::Pid);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(self.0, nix::sys::signal::Signal::SIGCONT);
    }
}

/// Attack: nobody floods the metrics door with notices of places while munged is slow to check them (stopped
/// here: each check waits for unmunge's time-out, 10 s), each notice taken holding one of the agent's 16 threads
/// for handlers that long. Ordinary callers' handlers hold at most 8 of them (docs/security.md), so no more than 8
/// of nobody's notices ever wait for munged at once, and root's requests are answered meanwhile; once munged
/// answers again, root's notices are taken again.
#[test]
#[ignore = "needs root"]
fn a_flood_of_notices_munged_is_slow_to_check_holds_half_the_agents_threads_at_most() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let Some((_serial, cluster)) = start_nodes(1, true) else { return };
    let agent = cluster.pid("agent-n1");
    let roots = || post_notice("root", &cluster.seal("root", &format!("lockstep-places 1 node=n1 at={}\n", now_ms())));
    // Taken while munged answers (and Slurm's configuration, which the check needs, is read then).
    let said = roots();
    assert!(said.ends_with("200"), "root's notice before the attack: {said}");
    let munged = Pid::from_raw(cluster.pid("munged"));
    kill(munged, Signal::SIGSTOP).unwrap();
    let stopped = Stopped(munged);
    let (host, port) = door(1).rsplit_once(':').map(|(h, p)| (h.to_string(), p.to_string())).unwrap();
    let mut flood = common::as_nobody("/usr/bin/python3")
        .args(["-c", NOTICE_FLOOD, &host, &port, "120"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = std::io::BufRead::lines(std::io::BufReader::new(flood.stdout.take().unwrap()));
    let flood = common::Reaped(flood);
    let counts = std::sync::Arc::new(std::sync::Mutex::new((0u64, 0u64)));
    let shared = counts.clone();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let mut n = line.split(' ').filter_map(|n| n.parse().ok());
            if let (Some(sent), Some(refused)) = (n.next(), n.next()) {
                *shared.lock().unwrap() = (sent, refused);
            }
        }
    });
    let taken = || {
        let (sent, refused) = *counts.lock().unwrap();
        sent - refused
    };
    wait_until("8 of nobody's notices waiting for munged", WAIT, || unmunges_of(agent), |n| *n >= 8);
    // Root's request is answered while nobody's share of the threads is taken (the CLI gives up after 30 s).
    let status = cluster.status(1);
    assert!(status.jobs.is_empty(), "{status:?}");
    // 60 more notices taken (the budget's 5 a second: about 12 s, past the time-out of the first checks, whose
    // threads then take others), looked at every 100 ms: never more than 8 waiting at once.
    let (from, mut looks) = (taken(), Vec::new());
    let deadline = Instant::now() + Duration::from_mins(1);
    while taken() < from + 60 {
        assert!(Instant::now() < deadline, "nobody's flood had {} notices taken in 60 s: {looks:?}", taken() - from);
        looks.push(unmunges_of(agent));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(looks.iter().all(|n| *n <= 8), "more than 8 of nobody's notices waited for munged at once: {looks:?}");
    drop(flood);
    drop(stopped);
    // munged answers again: a notice of root's is taken once the checks waiting for it have ended.
    wait_until("a notice of root's to be taken again", Duration::from_mins(1), roots, |said| said.ends_with("200"));
}

impl Cluster {
    /// `sbatch ARGS --wrap SCRIPT` as root, output to /dev/null; the job's ID.
    fn sbatch(&self, args: &[&str], script: &str) -> u64 {
        let out = self
            .slurm("sbatch")
            .args(["--parsable", "-D", "/", "-o", "/dev/null"])
            .args(args)
            .args(["--wrap", script])
            .output()
            .unwrap();
        assert!(out.status.success(), "sbatch {args:?}: {}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }

    /// Node `name`'s state as `sinfo` prints it in short (`idle`; `idle*` while it has not answered).
    fn node_state(&self, name: &str) -> String {
        let out = self.slurm("sinfo").args(["-h", "-n", name, "-o", "%t"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// `scontrol ARGS`, which must succeed.
    fn scontrol(&self, args: &[&str]) {
        let out = self.slurm("scontrol").args(args).output().unwrap();
        assert!(out.status.success(), "scontrol {args:?}: {}", stderr(&out));
    }
}

/// Whether job `name` shows frozen in `s`.
fn frozen_in(s: &Status, name: &str) -> bool {
    s.jobs.iter().any(|j| j.name.to_string() == name && j.frozen)
}

/// Issue 60: every step of a job is the job's. A job running two steps at once (`srun --overlap`, both on its one
/// CPU) beside a neighbour under `gang`: the agent manages it as one job, and whenever it says the job is frozen,
/// every step of it is (the freezer's state of each step directory), its batch step too.
#[test]
#[ignore = "needs root"]
fn two_steps_of_one_job_at_once_are_frozen_and_thawed_as_the_job() {
    let Some((_serial, cluster)) = start_nodes(1, true) else { return };
    cluster.policy("gang", "300ms");
    let steps = format!("srun -n1 --overlap {0} & srun -n1 --overlap {0} & wait", spinner());
    let a = cluster.sbatch(&["-n1"], &steps);
    let b = cluster.sbatch(&["-n1"], &spin());
    let name = format!("slurm-{a}");
    let dir = freezer_dir(0, a);
    let step_dirs = || {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.join("freezer.state").exists()).collect())
            .unwrap_or_default();
        dirs.sort();
        dirs
    };
    let both_steps =
        || step_dirs().iter().filter(|d| d.to_string_lossy().contains("step_") && !d.ends_with("step_batch")).count();
    wait_until("job a's two steps", WAIT, both_steps, |n| *n >= 2);
    wait_until("job a frozen", WAIT, || cluster.status(1), |s| s.jobs.len() == 2 && frozen_in(s, &name));
    let mut looks = Vec::new();
    for _ in 0..20 {
        let seen = cluster.status(1);
        let states: Vec<(PathBuf, bool)> =
            step_dirs().into_iter().map(|d| (d.clone(), is_frozen(&d.join("freezer.state")).unwrap())).collect();
        let again = cluster.status(1);
        // Only looks where the agent said the same before and after the freezer was read.
        if frozen_in(&seen, &name) == frozen_in(&again, &name) && seen.slot == again.slot {
            looks.push((frozen_in(&seen, &name), states));
        }
        std::thread::sleep(Duration::from_millis(70));
    }
    let frozen_looks: Vec<_> = looks.iter().filter(|(f, _)| *f).collect();
    assert!(!frozen_looks.is_empty(), "job a never seen frozen: {looks:?}");
    for (_, states) in &frozen_looks {
        assert!(states.len() >= 3 && states.iter().all(|(_, f)| *f), "a step ran while its job was frozen: {states:?}");
    }
    cluster.cancel_all(&[a.to_string(), b.to_string()]);
}

/// Issue 60: a node drained and then set down while one of its jobs is frozen (as before a reboot): drained, the
/// jobs run on as before; down, Slurm kills them, and nothing is left frozen, boosted or in Slurm's cgroups; the
/// agent started again (as after the reboot) finds nothing to restore, and the node, resumed, runs and places a new
/// job.
#[test]
#[ignore = "needs root"]
fn a_node_drained_and_set_down_while_a_job_is_frozen_leaves_nothing_frozen() {
    let Some((_serial, mut cluster)) = start_nodes(1, true) else { return };
    cluster.policy("gang", "300ms");
    let (a, b) = (cluster.sbatch(&["-n1", "--no-requeue"], &spin()), cluster.sbatch(&["-n1", "--no-requeue"], &spin()));
    let one_frozen = |s: &Status| s.jobs.len() == 2 && s.jobs.iter().any(|j| j.frozen);
    wait_until("both jobs taken on, one frozen", WAIT, || cluster.status(1), one_frozen);
    cluster.scontrol(&["update", "NodeName=n1", "State=DRAIN", "Reason=lockstep-test"]);
    let since = cluster.status(1).slot;
    let seen = wait_until("6 slots later", WAIT, || cluster.status(1), |s| s.slot >= since + 6);
    assert_eq!(seen.jobs.len(), 2, "draining ended a job: {seen:?}");
    wait_until("job a frozen", WAIT, || cluster.status(1), |s| frozen_in(s, &format!("slurm-{a}")));
    cluster.scontrol(&["update", "NodeName=n1", "State=DOWN", "Reason=lockstep-test"]);
    wait_until("Slurm to end both jobs", WAIT, || cluster.queue(), Vec::is_empty);
    assert!(!cluster.job_state(a).is_empty() && cluster.job_state(a) != "RUNNING", "job {a}: {}", cluster.job_state(a));
    cluster.let_go();
    nothing_frozen_or_boosted();
    wait_until("Slurm's cgroups to go", Duration::from_secs(70), slurm_files, |f| f.0.is_empty() && f.1.is_empty());
    let store = cluster.store(1);
    cluster.restart_agent(1, &store);
    assert!(cluster.status(1).jobs.is_empty(), "the restarted agent took a job on");
    cluster.scontrol(&["update", "NodeName=n1", "State=RESUME"]);
    // Resumed from down, the node must register again (`idle*` until then); a job submitted before that waits for
    // slurmctld's next full scheduling pass, a minute by default.
    wait_until("n1 to register again", WAIT, || cluster.node_state("n1"), |s| s == "idle");
    let c = cluster.sbatch(&["-n1"], &spin());
    let name = format!("slurm-{c}");
    wait_until("a new job placed on the resumed node", WAIT, || cluster.status(1), |s| place_of(s, &name).is_some());
    cluster.cancel_all(&[b.to_string(), c.to_string()]);
}

/// Issue 60: Slurm's memory limits still bind a job lockstep co-schedules. On a cluster that counts memory as sites
/// do (`CR_Core_Memory`, `ConstrainRAMSpace=yes`), a job of 100 MB that fills 400 MB, frozen and thawed under `gang`
/// beside a neighbour for its first seconds, is killed by the kernel at its limit (`OUT_OF_MEMORY`), and its
/// neighbour runs on.
#[test]
#[ignore = "needs root"]
fn a_job_under_gang_is_still_killed_at_its_slurm_memory_limit() {
    let Some((_serial, cluster)) = start_with(1, true, &[("LOCKSTEP_CLUSTER_MEMORY", "yes")]) else { return };
    cluster.policy("gang", "300ms");
    let b = cluster.sbatch(&["-n1", "--mem=100M"], &spin());
    let fill = "sleep 4; exec python3 -c \"x = b'x' * (400 << 20); import time; time.sleep(60)\"";
    let a = cluster.sbatch(&["-n1", "--mem=100M", "--no-requeue"], fill);
    let name = format!("slurm-{a}");
    wait_until(
        "job a taken on beside its neighbour",
        WAIT,
        || cluster.status(1),
        |s| place_of(s, &name).is_some() && s.jobs.len() == 2,
    );
    wait_until("job a killed at its memory limit", WAIT, || cluster.job_state(a), |s| s == "OUT_OF_MEMORY");
    assert_eq!(cluster.job_state(b), "RUNNING");
    cluster.cancel_all(&[b.to_string()]);
}

/// Issue 60: a heterogeneous job (`#SBATCH hetjob`: each component a job of its own, here one on n1 and one on n2)
/// is placed whole, so that its ranks on every node are favoured in the same slots: its first component's
/// controller prolog makes room on the nodes of all its components, and the other takes that place. A job alone on
/// n2 holds 0/1; the heterogeneous job halves it (0/2) there, and both components hold 1/2, on n1 as on n2.
#[test]
#[ignore = "needs root"]
fn a_heterogeneous_job_s_components_share_one_place_on_all_their_nodes() {
    // Slurm starts heterogeneous jobs from its backfill scheduler alone, every second here (30 s by default).
    let Some((_serial, cluster)) = start_with(2, true, &[("LOCKSTEP_CLUSTER_BACKFILL", "1")]) else { return };
    cluster.policy("gang", "200ms");
    let p = cluster.sbatch(&["-n1", "-w", "n2"], &spin());
    let alone = format!("slurm-{p}");
    wait_until("the job on n2 at 0/1", WAIT, || cluster.status(2), |s| place_of(s, &alone) == Some((0, 1)));
    let script = cluster.dir.path().join("het.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n#SBATCH -n1 -w n1\n#SBATCH hetjob\n#SBATCH -n1 -w n2\n\
             srun --het-group=0 {0} & srun --het-group=1 {0} & wait\n",
            spinner()
        ),
    )
    .unwrap();
    let out = cluster.slurm("sbatch").args(["--parsable", "-D", "/", "-o", "/dev/null"]).arg(&script).output().unwrap();
    assert!(out.status.success(), "sbatch: {}", stderr(&out));
    let leader: u64 = String::from_utf8_lossy(&out.stdout).trim().split(['+', ';']).next().unwrap().parse().unwrap();
    let components = || {
        let out = cluster.slurm("squeue").args(["-h", "-O", "JobID:0|,HetJobID:0|,NodeList:0"]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut found: Vec<(u64, String)> = text
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split('|').collect();
                let ours = f.len() == 3 && f[1] == leader.to_string();
                ours.then(|| Some((f[0].trim().parse().ok()?, f[2].trim().to_string())))?
            })
            .collect();
        found.sort();
        found
    };
    let found = wait_until("both components running on n1 and n2", Duration::from_secs(90), components, |c| {
        c.len() == 2 && c.iter().any(|(_, n)| n == "n1") && c.iter().any(|(_, n)| n == "n2")
    });
    let on = |node: &str| format!("slurm-{}", found.iter().find(|(_, n)| n == node).unwrap().0);
    let (first, second) = (on("n1"), on("n2"));
    wait_until("n1's component at 1/2", WAIT, || cluster.status(1), |s| place_of(s, &first) == Some((1, 2)));
    let both = |s: &Status| place_of(s, &second) == Some((1, 2)) && place_of(s, &alone) == Some((0, 2));
    wait_until("n2's component at 1/2 beside the halved job", WAIT, || cluster.status(2), both);
    let mut ids: Vec<String> = found.iter().map(|(id, _)| id.to_string()).collect();
    ids.push(p.to_string());
    cluster.cancel_all(&ids);
}
