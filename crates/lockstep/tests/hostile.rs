//! Attacks on the root agent by an unprivileged user (`nobody`), each against a real agent (or the real PMPI
//! profiler under a real mpirun), each named after what it proves. docs/security.md lists them with what stops each;
//! the attack through Slurm's job names is in tests/slurm.rs (it needs the test cluster).

mod common;

use lockstep_cgroup::procfs::Live as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{as_nobody, name, stderr, Agent, Env, Planted, Reaped};
use nix::sys::signal::Signal;

/// One attack at a time: each starts its own agent, and the PID-recycling one steers the kernel's next PID.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The UID and GID of user nobody.
const NOBODY: u32 = 65534;

fn ok(out: &Output) {
    assert!(out.status.success(), "failed: {}", stderr(out));
}

/// The freezer cgroup of process `pid` (v1), from `/proc/PID/cgroup`.
fn freezer_of(pid: u32) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    text.lines()
        .find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers.split(',').any(|c| c == "freezer").then(|| path.to_string())
        })
        .unwrap_or_default()
}

/// Whether the v1 freezer hierarchy is there (the delegated cgroups of these attacks live in it); says so when
/// not. The first call of every attack that needs it (and root).
fn v1_freezer() -> bool {
    common::require_root();
    let there = Path::new("/sys/fs/cgroup/freezer/cgroup.procs").exists();
    if !there {
        common::missing("the v1 freezer hierarchy");
    }
    there
}

/// `lockstep agent ARGS` on `env` under an open-file limit of `nofile` (`SOFT:HARD`, as prlimit takes it), once its
/// socket answers.
fn agent_with_limit(env: &Env, nofile: &str, args: &[&str]) -> Agent {
    let mut cmd = Command::new("prlimit");
    cmd.arg(format!("--nofile={nofile}"))
        .args(["--", env!("CARGO_BIN_EXE_lockstep"), "agent"])
        .args(args)
        .env("LOCKSTEP_STORE", env.store())
        .env("LOCKSTEP_SOCKET", env.socket());
    Agent::spawn(env, cmd)
}

/// The PUs this machine has.
fn pus() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

/// One busy loop of root's per PU, and their PIDs as `adopt --pid` takes them.
fn root_spinners() -> (Vec<Reaped>, String) {
    busy_loops(|| Command::new("sh"))
}

/// One busy loop per PU, each run by a shell `sh` makes (root's or nobody's), and their PIDs as `adopt --pid` takes
/// them.
fn busy_loops(sh: impl Fn() -> Command) -> (Vec<Reaped>, String) {
    let loops: Vec<Reaped> =
        (0..pus()).map(|_| Reaped(sh().args(["-c", "while :; do :; done"]).spawn().unwrap())).collect();
    let pids = loops.iter().map(|r| r.0.id().to_string()).collect::<Vec<_>>().join(",");
    (loops, pids)
}

/// Each of `jobs` adopted as a job of busy loops, one per PU, run by shells `sh` makes (root's or nobody's): jobs
/// that contend, which `gang` slices. Returns the loops.
fn busy_jobs(env: &Env, jobs: [&str; 2], sh: impl Fn() -> Command) -> Vec<Reaped> {
    let mut loops = Vec::new();
    for job in jobs {
        let (mine, pids) = busy_loops(&sh);
        ok(&env.run(&["adopt", "--job", job, "--pid", &pids]));
        loops.extend(mine);
    }
    loops
}

/// What the agent's `status --json` says now (the command must succeed).
fn status_json(env: &Env) -> serde_json::Value {
    let out = env.run(&["status", "--json"]);
    ok(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A cgroup delegated to nobody (the directory and its `cgroup.procs` theirs), removed when dropped.
struct Delegated(PathBuf);

impl Delegated {
    fn new(test: &str) -> Self {
        let dir = Path::new("/sys/fs/cgroup/freezer").join(name(test));
        std::fs::create_dir(&dir).unwrap();
        for p in [dir.clone(), dir.join("cgroup.procs"), dir.join("freezer.state")] {
            std::os::unix::fs::chown(&p, Some(NOBODY), Some(NOBODY)).unwrap();
        }
        Self(dir)
    }

    /// One busy loop of nobody's per PU, moved into this cgroup: a job that wants every PU it has, which `gang`
    /// slices (an idle one leaves room, and is never frozen).
    fn spinners(&self) -> Vec<Reaped> {
        (0..pus())
            .map(|_| {
                let child = Reaped(as_nobody("sh").args(["-c", "while :; do :; done"]).spawn().unwrap());
                std::fs::write(self.0.join("cgroup.procs"), child.0.id().to_string()).unwrap();
                child
            })
            .collect()
    }

    /// A `sleep 600` of nobody's, moved into this cgroup.
    fn sleeper(&self) -> Reaped {
        let child = Reaped(as_nobody("sleep").arg("600").spawn().unwrap());
        std::fs::write(self.0.join("cgroup.procs"), child.0.id().to_string()).unwrap();
        child
    }

    /// Its path as `/proc/PID/cgroup` shows it.
    fn path(&self) -> String {
        format!("/{}", self.0.file_name().unwrap().to_string_lossy())
    }
}

impl Drop for Delegated {
    fn drop(&mut self) {
        for pid in lockstep_cgroup::read_procs(&self.0).unwrap_or_default() {
            let _ = std::fs::write("/sys/fs/cgroup/freezer/cgroup.procs", pid.to_string());
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Starts `sleep 600` as root with PID `pid`, steering the kernel's next PID there (`ns_last_pid`); `None` when
/// another process took the PID first every time.
fn sleep_with_pid(pid: u32) -> Option<Reaped> {
    for _ in 0..50 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).unwrap();
        let child = Reaped(Command::new("sleep").arg("600").spawn().unwrap());
        if child.0.id() == pid {
            return Some(child);
        }
    }
    None
}

/// Attack 1: nobody's process is adopted, exits, and root's next process gets its PID. Releasing the job must not
/// move root's process into the cgroup nobody's came from (which nobody controls: freeze, kill); the process of
/// the job that is still the one adopted goes back.
#[test]
#[ignore = "needs root"]
fn a_recycled_pid_is_never_moved_into_the_cgroup_its_old_owner_controls() {
    if !v1_freezer() {
        return;
    }
    let _serial = serial();
    let env = Env::new();
    // Full root, as an admin may run it by hand: the agent of the systemd unit may not write another user's cgroup
    // at all, and refuses such an adoption (the next test).
    let _agent = Agent::start_as_root(&env, &["--policy", "cfs", "--slot", "60s"]);
    let theirs = Delegated::new("recycled");
    let (mut gone, stays) = (theirs.sleeper(), theirs.sleeper());
    let job = name("recycled");
    let (x, y) = (gone.0.id(), stays.0.id());
    ok(&env.run(&["adopt", "--job", &job, "--pid", &x.to_string(), &y.to_string()]));
    assert_ne!(freezer_of(y), theirs.path(), "adopted processes move into the job's cgroup");
    gone.0.kill().unwrap();
    common::exit_within(&mut gone.0, common::STOP_LIMIT, "nobody's process, killed");
    let Some(roots) = sleep_with_pid(x) else {
        common::missing("a free PID to recycle (other processes took it 50 times)");
        return;
    };
    ok(&env.run(&["release", "--job", &job]));
    let (root_in, nobody_in) = (freezer_of(roots.0.id()), freezer_of(y));
    eprintln!("after release: root's PID {x} in {root_in:?}, nobody's PID {y} in {nobody_in:?}");
    assert_ne!(root_in, theirs.path(), "root's process with the recycled PID {x} was moved into nobody's cgroup");
    assert_eq!(nobody_in, theirs.path(), "the process still adopted goes back where it came from");
    common::assert_no_cgroup(&job);
}

/// With the capabilities of the systemd unit (no CAP_DAC_OVERRIDE), the agent may not write a cgroup another user
/// owns: it refuses to adopt a process from one, since release could not put it back, and changes nothing.
#[test]
#[ignore = "needs root"]
fn a_process_the_agent_could_not_put_back_is_not_adopted() {
    if !v1_freezer() {
        return;
    }
    let _serial = serial();
    let env = Env::new();
    let _agent = Agent::start_with_caps(&env, &["--policy", "cfs"], &common::agent_caps());
    let theirs = Delegated::new("unwritable");
    let child = theirs.sleeper();
    let job = name("unwritable");
    let out = env.run(&["adopt", "--job", &job, "--pid", &child.0.id().to_string()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("release could not put it back"), "{err}");
    assert_eq!(freezer_of(child.0.id()), theirs.path(), "the process stays where it was");
    common::assert_no_cgroup(&job);
}

/// Attack 4: a store or socket in a directory nobody can write, or reached through nobody's link, is refused
/// before anything is read or bound there: no planted journal is replayed, no file is replaced.
#[test]
#[ignore = "needs root"]
fn a_store_or_socket_in_a_directory_another_user_controls_is_refused() {
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    let open = env.dir.path().join("theirs");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(env.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(&open, Some(NOBODY), Some(NOBODY)).unwrap();
    // Nobody plants a store (with a journal row naming a root file) and a link to a private directory.
    let planted = open.join("lockstep.db");
    let out = as_nobody("sqlite3")
        .arg(&planted)
        .arg("CREATE TABLE journal(job TEXT, file TEXT PRIMARY KEY, value TEXT); INSERT INTO journal VALUES('x', '/etc/lockstep-owned', 'pwned');")
        .output()
        .unwrap();
    ok(&out);
    let private = env.dir.path().join("private");
    std::fs::create_dir(&private).unwrap();
    let link = open.join("link");
    ok(&as_nobody("ln").arg("-s").arg(&private).arg(&link).output().unwrap());
    let socket = env.dir.path().join("agent.sock");
    let agent = |store: &Path, sock: &Path| {
        let child = Command::new(env!("CARGO_BIN_EXE_lockstep"))
            .args(["agent", "--policy", "cfs"])
            .arg("--store")
            .arg(store)
            .arg("--socket")
            .arg(sock)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        common::output_within(child, Duration::from_secs(30), "an agent refused at start")
    };
    for (store, sock, what) in [
        (planted.clone(), socket.clone(), "a store in nobody's directory"),
        (link.join("lockstep.db"), socket.clone(), "a store through nobody's link"),
        (env.store(), open.join("agent.sock"), "a socket in nobody's directory"),
    ] {
        let out = agent(&store, &sock);
        let err = stderr(&out);
        eprintln!("{what}: exit {:?}, {}", out.status.code(), err.trim());
        assert_eq!(out.status.code(), Some(2), "{what}: {err}");
        assert!(err.contains("refusing") && err.trim().lines().count() == 1, "{what}: {err}");
        assert!(!sock.exists(), "{what}: a refused start leaves no socket");
    }
    assert!(!Path::new("/etc/lockstep-owned").exists(), "the planted journal was replayed");
    assert!(!private.join("lockstep.db").exists(), "a store was made through nobody's link");
    // A typo naming a file as the socket: refused, and the file is intact.
    let config = env.dir.path().join("agent.toml");
    std::fs::write(&config, "policy = \"cfs\"\n").unwrap();
    let out = agent(&env.store(), &config);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&config).unwrap(), "policy = \"cfs\"\n", "the file named as socket was changed");
}

/// Attack 3, the part a user sets off without privileges: the agent starts with its open-file limit raised to the
/// hard limit, whatever soft limit it inherited, and serves every user's socket at that limit.
#[test]
#[ignore = "needs root"]
fn the_agent_raises_its_open_file_limit_to_the_hard_limit() {
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    let agent = agent_with_limit(&env, "64:8192", &["--policy", "cfs"]);
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", agent.pid())).unwrap();
    let line = limits.lines().find(|l| l.starts_with("Max open files")).unwrap().to_string();
    let soft: Vec<&str> = line.split_whitespace().skip(3).take(2).collect();
    eprintln!("{line}");
    assert_eq!(soft, ["8192", "8192"], "{line}");
    drop(agent.stop(Signal::SIGTERM));
}

/// The FIFOs planted for a range of PIDs, removed when dropped (pass or fail).
struct Fifos(std::ops::RangeInclusive<u32>);

impl Drop for Fifos {
    /// Removes the FIFOs nobody planted, and nothing else that holds one of the names.
    fn drop(&mut self) {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        for p in self.0.clone() {
            let name = format!("/dev/shm/lockstep-pmpi.{p}");
            if std::fs::symlink_metadata(&name).is_ok_and(|m| m.file_type().is_fifo() && m.uid() == NOBODY) {
                let _ = std::fs::remove_file(&name);
            }
        }
    }
}

/// The built `mpirun` wrapper, `pingpong` and the PMPI profiler to preload, or `None` (said) where `make build`
/// has not made them.
fn profiled_mpi() -> Option<(PathBuf, PathBuf, PathBuf)> {
    let build = std::env::var_os("LOCKSTEP_BIN")
        .map_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../build/bin"), PathBuf::from);
    let (mpirun, pingpong, preload) =
        (build.join("mpirun"), build.join("pingpong"), build.join("../lib/liblockstep-pmpi.so"));
    if !pingpong.exists() || !preload.exists() {
        common::missing("build/bin/pingpong and build/lib/liblockstep-pmpi.so (make build)");
        return None;
    }
    Some((mpirun, pingpong, preload))
}

/// Attack 5: nobody plants FIFOs at the names where the PMPI profiler once published its live files for the next
/// PIDs; a root MPI run with the profiler preloaded must not block in `MPI_Init` on one (its live file is a memory
/// file of its own now: it opens nothing at those names).
#[test]
#[ignore = "needs root"]
fn fifos_planted_for_the_next_pids_do_not_hang_a_profiled_mpi_run() {
    common::require_root();
    let _serial = serial();
    let Some((mpirun, pingpong, preload)) = profiled_mpi() else { return };
    // One process plants them all (a shell's mkfifo per FIFO would use up the very PIDs it plants for), for the
    // 3,000 PIDs after the last one given out; it prints that one.
    // A name taken already (another process's live file) stays as it is; a planting that fails removes its FIFOs.
    let plant = "import os\n\
                 n = int(open('/proc/sys/kernel/ns_last_pid').read())\n\
                 made = []\n\
                 try:\n\
                 \x20   for p in range(n + 1, n + 3001):\n\
                 \x20       try: os.mkfifo(f'/dev/shm/lockstep-pmpi.{p}'); made.append(p)\n\
                 \x20       except FileExistsError: pass\n\
                 except BaseException:\n\
                 \x20   for p in made: os.unlink(f'/dev/shm/lockstep-pmpi.{p}')\n\
                 \x20   raise\n\
                 print(n)";
    let out = as_nobody("/usr/bin/python3").args(["-c", plant]).output().unwrap();
    ok(&out);
    let next: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let (first, last) = (next + 1, next + 3000);
    let _fifos = Fifos(first..=last);
    let planted = (first..=last).filter(|p| Path::new(&format!("/dev/shm/lockstep-pmpi.{p}")).exists()).count();
    let started = Instant::now();
    let run = Command::new(&mpirun)
        .args(["-n", "2", "env"])
        .arg(format!("LD_PRELOAD={}", preload.display()))
        .arg(&pingpong)
        .args(["--iterations", "100", "--repeats", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = common::output_within(run, Duration::from_mins(2), "mpirun with FIFOs planted for its PIDs");
    let took = started.elapsed();
    eprintln!("{planted} FIFOs planted for PIDs {first}-{last}; the profiled run took {took:?}");
    ok(&out);
}

/// Many threads in one process: `THREADS` threads that sleep, the process printing `up` once they all run.
const THREADS: &str = r"
import sys, threading, time
n = int(sys.argv[1])
for _ in range(n): threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
print('up', flush=True)
time.sleep(600)
";

/// Attack 3: nobody's job, adopted by its cgroup (counted per thread: outside the perf_event hierarchy), makes
/// thousands of threads while the agent runs at a small open-file limit under `gang`. The agent counts what its
/// descriptor budget allows and says so, keeps serving, keeps the job (a failed read is never "the job ended"),
/// and thaws everything when it stops.
#[test]
#[ignore = "needs root"]
fn a_job_of_thousands_of_threads_cannot_run_the_agent_out_of_descriptors() {
    if !v1_freezer() {
        return;
    }
    let _serial = serial();
    let env = Env::new();
    let agent =
        agent_with_limit(&env, "256:256", &["--policy", "gang", "--slot", "100ms", "--sample-interval", "200ms"]);
    let theirs = Delegated::new("threads");
    let mut many = as_nobody("/usr/bin/python3").args(["-c", THREADS, "2000"]).stdout(Stdio::piped()).spawn().unwrap();
    std::fs::write(theirs.0.join("cgroup.procs"), many.id().to_string()).unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(many.stdout.take().unwrap()), &mut line).unwrap();
    let many = Reaped(many);
    assert_eq!(line.trim(), "up", "nobody's threads did not start");
    let roots = Reaped(Command::new("sleep").arg("600").spawn().unwrap());
    let (a, b) = (name("threads-root"), name("threads-nobody"));
    ok(&env.run(&["adopt", "--job", &a, "--pid", &roots.0.id().to_string()]));
    ok(&env.run(&["adopt", "--job", &b, "--cgroup", &theirs.path()]));
    // A few samples' worth of rescans at the limit, then one snapshot of what the agent says.
    std::thread::sleep(Duration::from_secs(2));
    let status = status_json(&env);
    let names: Vec<&str> = status["jobs"].as_array().unwrap().iter().filter_map(|j| j["name"].as_str()).collect();
    assert!(names.contains(&a.as_str()) && names.contains(&b.as_str()), "a job was dropped: {names:?}");
    // Root's job goes back (its cgroup with it); nobody's is left to the agent's stop, which must thaw it.
    ok(&env.run(&["release", "--job", &a]));
    let stopped = agent.stop(Signal::SIGTERM);
    let log = stderr(&stopped);
    eprintln!("{}", log.lines().filter(|l| l.contains("counted")).collect::<Vec<_>>().join("\n"));
    assert!(stopped.status.success(), "the agent failed: {log}");
    assert!(log.contains(&format!("job {b} is counted in part")), "the budget was not said: {log}");
    let frozen = lockstep_cgroup::knobs::is_frozen(&theirs.0.join("freezer.state")).unwrap();
    assert!(!frozen, "nobody's job was left frozen: {log}");
    assert!(lockstep_cgroup::procfs::ProcessRef::of(many.0.id() as i32).is_some(), "nobody's process is gone");
    common::assert_no_cgroup(&a);
}

/// A tree of cgroups as nobody makes it in a delegated cgroup: `wide` children of `top`, and a chain of `deep`
/// levels below it. Prints how deep the chain got (the kernel may stop it: cgroup v2's `cgroup.max.depth`).
const TREE: &str = r"
import os, sys
top, wide, deep = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(wide): os.mkdir(f'{top}/w{i}')
d, depth = top, 0
try:
    for depth in range(1, deep + 1):
        d += '/d'
        os.mkdir(d)
except OSError as e:
    print(f'stopped at depth {depth}: {e}', file=sys.stderr)
    depth -= 1
print(depth, flush=True)
";

/// The cgroups below a delegated one, removed (deepest first) when dropped: nobody's processes stay in the top.
struct Subtree(PathBuf);

impl Drop for Subtree {
    fn drop(&mut self) {
        fn below(dir: &Path, depth: usize, out: &mut Vec<(usize, PathBuf)>) {
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    below(&e.path(), depth + 1, out);
                    out.push((depth + 1, e.path()));
                }
            }
        }
        let mut dirs = Vec::new();
        below(&self.0, 0, &mut dirs);
        dirs.sort_by_key(|(depth, _)| std::cmp::Reverse(*depth));
        for (_, dir) in dirs {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Each thread of process `pid`: its name (`comm`) and scheduling policy (field 41 of its `stat`).
fn thread_policies(pid: i64) -> Vec<(String, i32)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    tasks
        .flatten()
        .filter_map(|t| {
            let comm = std::fs::read_to_string(t.path().join("comm")).ok()?.trim().to_string();
            let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
            // Fields after the command name (field 2, in parentheses) start at field 3.
            let policy = stat[stat.rfind(')')? + 1..].split_whitespace().nth(41 - 3)?.parse().ok()?;
            Some((comm, policy))
        })
        .collect()
}

/// Attack 4: nobody's job, adopted by its delegated cgroup, makes its tree wide (5,000 cgroups) and deep (200
/// levels), and forks and exits as fast as it can. The sampler, at normal priority, walks a bounded part of the
/// tree and says once that it did; the agent keeps switching slots and answering, and neither the sampler nor
/// Slurm discovery runs at real-time priority.
#[test]
#[ignore = "needs root"]
fn a_wide_deep_and_forking_job_tree_is_walked_in_part_at_normal_priority() {
    if !v1_freezer() {
        return;
    }
    let _serial = serial();
    let env = Env::new();
    let agent = Agent::start(&env, &["--policy", "gang", "--slot", "100ms", "--sample-interval", "200ms"]);
    let theirs = Delegated::new("tree");
    let _subtree = Subtree(theirs.0.clone());
    let _sleeper = theirs.sleeper();
    let roots = Reaped(Command::new("sleep").arg("600").spawn().unwrap());
    let (a, b) = (name("tree-root"), name("tree-nobody"));
    ok(&env.run(&["adopt", "--job", &a, "--pid", &roots.0.id().to_string()]));
    // The job's tree is grown, then adopted (a walk of a tree still growing may cost enough to put the next one
    // past this test's window: walks are paced by their cost), then forks and exits without end.
    let top = theirs.0.to_string_lossy().into_owned();
    let made = as_nobody("/usr/bin/python3").args(["-c", TREE, &top, "5000", "200"]).output().unwrap();
    ok(&made);
    let depth: usize = String::from_utf8_lossy(&made.stdout).trim().parse().unwrap();
    eprintln!("nobody made 5000 cgroups and a chain {depth} deep ({})", stderr(&made).trim());
    assert!(depth > 32, "the kernel stopped the chain at depth {depth}: no deeper than the agent walks");
    ok(&env.run(&["adopt", "--job", &b, "--cgroup", &theirs.path()]));
    let forks = Reaped(as_nobody("sh").args(["-c", "while :; do /bin/true; done"]).spawn().unwrap());
    std::fs::write(theirs.0.join("cgroup.procs"), forks.0.id().to_string()).unwrap();

    // The agent answers, and its slots go on, over many samples of the tree.
    let status = || status_json(&env);
    let first = status();
    let pid = first["pid"].as_i64().unwrap();
    let slot = first["slot"].as_u64().unwrap();
    let later = common::wait_until("30 slots later", common::WAIT, status, |s| s["slot"].as_u64() >= Some(slot + 30));
    let names: Vec<&str> = later["jobs"].as_array().unwrap().iter().filter_map(|j| j["name"].as_str()).collect();
    assert!(names.contains(&a.as_str()) && names.contains(&b.as_str()), "a job was dropped: {names:?}");
    let threads = thread_policies(pid);
    for role in ["lockstep-sample", "lockstep-slurm"] {
        let policy = threads.iter().find(|(comm, _)| comm == role).map(|(_, p)| *p);
        assert_eq!(policy, Some(libc::SCHED_OTHER), "{role} is not at normal priority: {threads:?}");
    }

    // Root's job goes back (its cgroup with it); nobody's is left to the agent's stop, which must thaw it.
    ok(&env.run(&["release", "--job", &a]));
    drop(forks);
    let stopped = agent.stop(Signal::SIGTERM);
    let log = stderr(&stopped);
    assert!(stopped.status.success(), "the agent failed: {log}");
    let said: Vec<&str> = log.lines().filter(|l| l.contains("only partly walked")).collect();
    assert_eq!(said.len(), 1, "the partial walk must be said once: {log}");
    eprintln!("{}\nthreads: {threads:?}", said[0]);
    assert!(said[0].contains(&format!("job {b}:")), "{}", said[0]);
    for fault in ["cannot register the jobs' ranks", "cannot read the counters", "co-scheduled time not measured"] {
        assert!(!log.contains(fault), "the forking job made the sampler fail ({fault}): {log}");
    }
    let frozen = lockstep_cgroup::knobs::is_frozen(&theirs.0.join("freezer.state")).unwrap();
    assert!(!frozen, "nobody's job was left frozen: {log}");
    common::assert_no_cgroup(&a);
}

/// Attack 3, at its end: the agent's open-file limit lowered below what it holds (to 3: no new descriptor at all,
/// as a flood of connections or a leak would leave it, without the holes the agent's own closes would open) while
/// nobody's two jobs, adopted by PID under `gang`, end. Their processes cannot be listed,
/// so the agent keeps them; when it is stopped, it still finds them ended (by `rmdir` of their cgroups, which
/// needs no descriptor, and with the descriptors it reserved for the way out), removes every cgroup it made for
/// them in every hierarchy, and says "every job restored" only because it is so.
#[test]
#[ignore = "needs root"]
fn jobs_that_end_while_the_agent_has_no_descriptor_left_leave_no_cgroup_at_stop() {
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    let agent = Agent::start(&env, &["--policy", "gang", "--slot", "100ms"]);
    let (a, b) = (name("emfile-a"), name("emfile-b"));
    // Each job busy on every PU: they contend, and `gang` slices them (idle jobs leave room, and are never frozen).
    let mut loops = busy_jobs(&env, [&a, &b], || as_nobody("sh"));
    let status = || status_json(&env);
    let sliced = |s: &serde_json::Value| s["jobs"].as_array().is_some_and(|j| j.iter().any(|j| j["frozen"] == true));
    common::wait_until("gang to slice the two jobs (one frozen)", common::WAIT, status, sliced);
    let started = Instant::now();
    let pid = agent.pid().as_raw().to_string();
    ok(&Command::new("prlimit").args(["--pid", &pid, "--nofile=3:3"]).output().unwrap());
    // Both end while the agent can open nothing; gang's thaws (through the descriptors held since each freeze)
    // let a frozen one die.
    for l in &mut loops {
        l.0.kill().unwrap();
        common::exit_within(&mut l.0, common::STOP_LIMIT, "nobody's busy loop, killed");
    }
    eprintln!("both jobs' processes gone {:?} after the limit was lowered", started.elapsed());
    let stopped = agent.stop(Signal::SIGTERM);
    let log = stderr(&stopped);
    eprintln!("stopped {:?} after the limit was lowered", started.elapsed());
    assert!(stopped.status.success(), "the agent failed to stop: {log}");
    assert!(log.contains("every job restored"), "{log}");
    common::assert_no_cgroup(&a);
    common::assert_no_cgroup(&b);
}

/// Sets its flag when dropped: stops a test's helper thread also when a wait of the test fails (a scope joins its
/// threads before the failure goes on).
struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A stream of nobody's jobs (short Slurm jobs, a launcher started again and again), a new one found every half
/// second beside two busy jobs of root's under `gang`; each job a rank that sleeps beside busy loops that name no
/// rank, so that its demand is not measurable (threads other than its ranks work). A job starting runs beside the
/// others until a slot of it is read unfrozen, and the jobs already measured are still sliced: one snapshot shows
/// one of root's jobs frozen while one of nobody's is starting (status's `starting`), and none of nobody's frozen
/// while it starts. Until 2026-12-05 a set with a job starting ran as under `cfs`, and such a job counted as
/// starting for 3 s (until its demand was measured, which it never is): this stream kept root's jobs from ever being
/// sliced (the agent of that build: timed out, neither ever frozen).
#[test]
#[ignore = "needs root"]
fn a_stream_of_starting_jobs_does_not_stop_gang_slicing_the_jobs_beside_them() {
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    let agent = Agent::start(&env, &["--policy", "gang", "--slot", "100ms"]);
    let (a, b) = (name("stream-a"), name("stream-b"));
    let roots = busy_jobs(&env, [&a, &b], || Command::new("sh"));
    let stopped = std::sync::atomic::AtomicBool::new(false);
    let started = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let stream = scope.spawn(|| {
            let mut alive = std::collections::VecDeque::new();
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                let (mut procs, pids) = busy_loops(|| as_nobody("sh"));
                let rank = Reaped(as_nobody("env").args(["PMI_RANK=0", "sleep", "600"]).spawn().unwrap());
                let pids = format!("{pids},{}", rank.0.id());
                procs.push(rank);
                let next = started.load(std::sync::atomic::Ordering::Relaxed);
                ok(&env.run(&["adopt", "--job", &name(&format!("stream-{next}")), "--pid", &pids]));
                started.store(next + 1, std::sync::atomic::Ordering::Relaxed);
                alive.push_back(procs);
                // Each lives 2 s, then ends (killed and reaped as it is dropped).
                if alive.len() > 4 {
                    alive.pop_front();
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        let stop = StopOnDrop(&stopped);
        // Every job's name, whether it is frozen and whether it is starting, in one snapshot.
        let look = || {
            let status = status_json(&env);
            let jobs: Vec<(String, bool, bool)> = status["jobs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|j| (j["name"].as_str().unwrap_or("").to_string(), j["frozen"] == true, j["starting"] == true))
                .collect();
            jobs
        };
        let roots_sliced = |jobs: &Vec<(String, bool, bool)>| {
            let starting = jobs.iter().any(|(n, _, starting)| *n != a && *n != b && *starting);
            starting && jobs.iter().any(|(n, frozen, _)| (*n == a || *n == b) && *frozen)
        };
        // Let the stream run a while first, so that root's jobs have been measured and new jobs keep coming.
        let so_far = || started.load(std::sync::atomic::Ordering::Relaxed);
        common::wait_until("nobody's first four jobs found", common::WAIT, so_far, |&n| n >= 4);
        let seen = common::wait_until(
            "one of root's jobs frozen while one of nobody's starts",
            common::WAIT,
            look,
            roots_sliced,
        );
        // A job starting runs in every slot: none of nobody's is frozen while it starts.
        assert!(!seen.iter().any(|(n, frozen, starting)| *n != a && *n != b && *frozen && *starting), "{seen:?}");
        drop(stop);
        stream.join().unwrap();
    });
    let found = started.into_inner();
    eprintln!("{found} jobs of nobody's found one after another");
    // Root's jobs end too, so that the agent removes every job's cgroups at stop (one that still runs stays).
    drop(roots);
    let stopped = agent.stop(Signal::SIGTERM);
    let log = stderr(&stopped);
    assert!(stopped.status.success() && log.contains("every job restored"), "{log}");
    for job in [a, b].into_iter().chain((0..found).map(|i| name(&format!("stream-{i}")))) {
        common::assert_no_cgroup(&job);
    }
}

/// A job over a delegated cgroup that nobody makes 10,000 cgroups wide, beside root's job under `gang`: a v1 freezer
/// write walks every cgroup below the one written, in the writer's time (milliseconds for these), so the agent
/// switches nobody's job after root's in every slot (said once), and the slot's prompt part (what lateness is
/// measured to) ends before it; nobody's job is still frozen and thawed in turn, and thawed at stop. The sampler
/// walks its tree no more often than the walks' cost allows, and says so once.
#[test]
#[ignore = "needs root"]
fn a_wide_tree_s_job_is_switched_after_the_others_and_walked_less_often() {
    type Row = (i64, Option<String>, String, f64, Option<f64>);
    if !v1_freezer() {
        return;
    }
    let _serial = serial();
    let env = Env::new();
    // Slots of 2 s: the slow job's switches (6 ms each here, twice that beside a build, one a slot) cost well under
    // the 1 % of a CPU past which a job is left to the kernel, so it goes on being switched, last. (Slots of 1 s came
    // to 1.2 % beside a build, and the job was left to the kernel.)
    let agent = Agent::start(&env, &["--policy", "gang", "--slot", "2s", "--sample-interval", "200ms"]);
    let theirs = Delegated::new("wide");
    // The freezer file stays root's: the agent, under the unit's capabilities (no CAP_DAC_OVERRIDE), writes only
    // what root may. The directory is nobody's, to grow.
    std::os::unix::fs::chown(theirs.0.join("freezer.state"), Some(0), Some(0)).unwrap();
    let _subtree = Subtree(theirs.0.clone());
    // Both jobs busy on every PU: they contend, and neither leaves room (`gang` does not slice idle jobs).
    let _spinners = theirs.spinners();
    let (_roots, pids) = root_spinners();
    let (a, b) = (name("wide-root"), name("wide-nobody"));
    ok(&env.run(&["adopt", "--job", &a, "--pid", &pids]));
    ok(&env.run(&["adopt", "--job", &b, "--cgroup", &theirs.path()]));
    let top = theirs.0.to_string_lossy().into_owned();
    // 10,000: twice the 1 ms a job may take to be switched with the others, on this machine (5,000 took 1.1 ms).
    ok(&as_nobody("/usr/bin/python3").args(["-c", TREE, &top, "10000", "0"]).output().unwrap());
    let grown = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();

    let status = || status_json(&env);
    let slot = status()["slot"].as_u64().unwrap();
    let later = |s: &serde_json::Value| s["slot"].as_u64() >= Some(slot + 16);
    let seen = common::wait_until("16 slots later", common::WAIT * 3, status, later);
    let job = seen["jobs"].as_array().unwrap().iter().find(|j| j["name"] == b.as_str()).cloned();
    assert!(job.as_ref().is_some_and(|j| j["left"].is_null()), "nobody's job was left to the kernel: {job:?}");
    ok(&env.run(&["release", "--job", &a]));
    let stopped = agent.stop(Signal::SIGTERM);
    let log = stderr(&stopped);
    assert!(stopped.status.success(), "the agent failed: {log}");

    // Each slot's switches in the order they were made (the slot's own record first).
    let db = rusqlite::Connection::open(env.store()).unwrap();
    let mut stmt = db
        .prepare(
            "SELECT slot, job, action, duration_us, prompt_us FROM decisions WHERE time > ?1 AND action IN \
             ('slot', 'freeze', 'thaw') ORDER BY rowid",
        )
        .unwrap();
    let rows: Vec<Row> = stmt
        .query_map([grown], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let kinds: std::collections::BTreeSet<(Option<&str>, &str)> =
        rows.iter().map(|r| (r.1.as_deref(), r.2.as_str())).collect();
    eprintln!("{} decisions since the tree grew: {kinds:?}", rows.len());
    let mut slots: std::collections::BTreeMap<i64, Vec<&Row>> = std::collections::BTreeMap::new();
    for row in &rows {
        slots.entry(row.0).or_default().push(row);
    }
    let (mut after, mut before, mut actions) = (0, 0, std::collections::BTreeSet::new());
    for switched in slots.values() {
        let at = |job: &str| switched.iter().position(|r| r.1.as_deref() == Some(job) && r.2 != "slot");
        if let Some(r) = switched.iter().find(|r| r.1.as_deref() == Some(b.as_str())) {
            actions.insert(r.2.clone());
        }
        if let Some(own) = switched.iter().find(|r| r.2 == "slot") {
            let prompt = own.4.expect("a slot's record keeps when its prompt part was done");
            assert!(prompt <= own.3, "the prompt part took longer than the whole switch: {own:?}");
        }
        match (at(&a), at(&b)) {
            (Some(x), Some(y)) if y > x => after += 1,
            (Some(_), Some(_)) => {
                eprintln!("nobody's job first: {switched:?}");
                before += 1;
            }
            _ => {}
        }
    }
    eprintln!("slots with both jobs switched: nobody's last in {after}, first in {before}");
    // Its first switch after the tree grew may come first (its cost measured before that was a small tree's), and so
    // may a few while root's job too is measured slow: on a loaded machine one of its writes took 3.6 ms (the
    // kernel's cgroup locks, busy with the wide tree), and two slow jobs are ordered by what each does (thaw before
    // freeze). Unordered, nobody's job would come first in about half the slots.
    assert!(
        after >= 10 && before * 4 <= after,
        "nobody's job was not switched after root's: {after} after, {before} before: {log}"
    );
    assert_eq!(actions.into_iter().collect::<Vec<_>>(), ["freeze", "thaw"], "nobody's job was not switched both ways");
    let said: Vec<&str> =
        log.lines().filter(|l| l.contains("switched after every other job") && l.contains(b.as_str())).collect();
    assert_eq!(said.len(), 1, "the slow switch must be said once: {log}");
    assert!(said[0].contains(&format!("job {b}:")), "{}", said[0]);
    let paced: Vec<&str> = log.lines().filter(|l| l.contains("a walk of its cgroup tree took")).collect();
    assert_eq!(paced.len(), 1, "the spaced-out walks must be said once: {log}");
    assert!(paced[0].contains(&format!("job {b}:")), "{}", paced[0]);
    eprintln!("{}\n{}", said[0], paced[0]);
    let frozen = lockstep_cgroup::knobs::is_frozen(&theirs.0.join("freezer.state")).unwrap();
    assert!(!frozen, "nobody's job was left frozen: {log}");
    common::assert_no_cgroup(&a);
}

/// A job of root's started with `lockstep run`, thawed, stopped and reaped when dropped.
struct RootJob {
    name: String,
    child: Child,
}

impl Drop for RootJob {
    fn drop(&mut self) {
        // Thaw first: a frozen job cannot die.
        if let Some(f) = lockstep_cgroup::Knobs::find(&common::job_dirs(&self.name)).freeze {
            let _ = std::fs::write(&f, lockstep_cgroup::knobs::freeze_value(&f, false));
        }
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), Signal::SIGTERM);
        common::exit_within(&mut self.child, common::STOP_LIMIT, &format!("the job {}, after SIGTERM", self.name));
    }
}

/// Attack 5, its other half: with something of nobody's (a regular file that reads as a live file, a FIFO, a link)
/// at the profiler's old live-file name of each PID about to be given out, root's two profiled MPI jobs under
/// `auto` still publish their calls and the agent reads them: the pair is measured by the calls of its ranks (every
/// rate of the choice has a call rate), none of nobody's files taken for a rank's, none waited for. Before the live
/// count moved into a memory file each rank holds (found through `/proc/PID/fd`), such a file made the profiler go
/// on without a live file, and `auto` waited 30 s for the ranks to publish, then measured without their calls.
#[test]
#[ignore = "needs root"]
fn files_planted_at_the_next_pids_live_file_names_neither_stop_ranks_publishing_nor_are_read() {
    common::require_root();
    let _serial = serial();
    let Some((mpirun, pingpong, preload)) = profiled_mpi() else { return };
    let old_names = Planted;
    let planter = common::start_planter();
    let env = Env::new();
    let agent = Agent::start(&env, &["--policy", "auto", "--slot", "100ms"]);
    // Two jobs whose ranks poll without yielding and exchange messages without end, the profiler preloaded.
    let start = |job: &str| {
        let mut cmd = env.cmd();
        cmd.env("LOCKSTEP_MPI_BUSY_POLL", "1").args(["run", "--job", job, "--place", "any", "--"]);
        cmd.arg(&mpirun).args(["-n", "2", "env"]).arg(format!("LD_PRELOAD={}", preload.display()));
        cmd.arg(&pingpong).args(["--iterations", "1000000000", "--repeats", "1"]);
        let child = cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        RootJob { name: job.to_string(), child }
    };
    let jobs = [start(&name("planted-a")), start(&name("planted-b"))];
    // Their ranks got PIDs nobody planted for.
    for job in &jobs {
        let ranks_of = || {
            let pids = lockstep_cgroup::procs_below(&common::job_dirs(&job.name)[0]).unwrap_or_default();
            let comm = |p: &i32| std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
            pids.into_iter().filter(|p| comm(p).trim() == "pingpong").collect::<Vec<i32>>()
        };
        let ranks = common::wait_until("the job's two ranks", common::WAIT, ranks_of, |r| r.len() == 2);
        let ranks: Vec<(i32, bool)> = ranks.iter().map(|&p| (p, Planted::holds(p as u32))).collect();
        eprintln!("{}: ranks (PID, a file of nobody's at its old name) {ranks:?}", job.name);
        assert!(ranks.iter().all(|&(_, held)| held), "a rank's PID is not one nobody planted for: {ranks:?}");
    }
    let names: Vec<serde_json::Value> = jobs.iter().map(|j| j.name.as_str().into()).collect();
    let status = || {
        let out = env.run(&["status", "--json"]);
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap_or_default()
    };
    // The pair's choice, once made with every rate read from the ranks' calls.
    let by_calls = |s: &serde_json::Value| common::chosen_from_calls(s, &names, 4);
    let seen =
        common::wait_until("a choice for the pair from its ranks' calls", Duration::from_mins(1), status, by_calls);
    let group = seen["groups"].as_array().unwrap().iter().find(|g| g["trying"] == false).unwrap();
    eprintln!("auto: {} {}", group["policy"], group["why"]);
    let stopped = agent.stop(Signal::SIGTERM);
    assert!(stopped.status.success(), "the agent failed: {}", stderr(&stopped));
    drop(jobs);
    drop(planter);
    let left = Planted::held().len();
    drop(old_names);
    eprintln!("{left} names held by nobody's files, FIFOs and links at the end (the profiler replaces nothing)");
}

/// Attack 4, priced: nobody's job, adopted by its delegated cgroup, makes 20,000 cgroups in its tree, so that each
/// freezer write of it walks them all, in the agent's (real-time) time, at every switch of 100 ms slots: more than
/// the 1 % of a CPU a job's changes may cost. The agent leaves it to the kernel (thawed, never switched again, said
/// once, shown by `status`); root's job beside it is still switched, and nothing is left frozen at stop.
#[test]
#[ignore = "needs root"]
fn a_job_whose_switches_cost_more_than_a_job_may_is_left_to_the_kernel() {
    if !v1_freezer() {
        return;
    }
    let _serial = serial();
    let env = Env::new();
    let agent = Agent::start(&env, &["--policy", "gang", "--slot", "100ms"]);
    let theirs = Delegated::new("dear");
    // The freezer file stays root's (the agent writes only what root may), the directory nobody's, to grow.
    std::os::unix::fs::chown(theirs.0.join("freezer.state"), Some(0), Some(0)).unwrap();
    let _subtree = Subtree(theirs.0.clone());
    // Both jobs busy on every PU: they contend, and neither leaves room (`gang` does not slice idle jobs).
    let _spinners = theirs.spinners();
    let top = theirs.0.to_string_lossy().into_owned();
    ok(&as_nobody("/usr/bin/python3").args(["-c", TREE, &top, "20000", "0"]).output().unwrap());
    let (_roots, pids) = root_spinners();
    let (a, b) = (name("dear-root"), name("dear-nobody"));
    ok(&env.run(&["adopt", "--job", &a, "--pid", &pids]));
    ok(&env.run(&["adopt", "--job", &b, "--cgroup", &theirs.path()]));
    let status = || status_json(&env);
    let job = |s: &serde_json::Value, name: &str| {
        s["jobs"].as_array().unwrap().iter().find(|j| j["name"] == name).cloned().unwrap_or_default()
    };
    let left = |s: &serde_json::Value| job(s, &b)["left"].is_string();
    let seen = common::wait_until("nobody's job left to the kernel", common::WAIT, status, left);
    assert_eq!(job(&seen, &b)["frozen"], false, "left to the kernel, yet frozen: {seen}");
    assert!(job(&seen, &a)["left"].is_null(), "root's job of one cgroup was left too: {seen}");
    // From then on nobody's job is never frozen again.
    let since = seen["slot"].as_u64().unwrap();
    common::wait_until("10 slots later", common::WAIT, status, |s| s["slot"].as_u64() >= Some(since + 10));
    ok(&env.run(&["release", "--job", &a]));
    let stopped = agent.stop(Signal::SIGTERM);
    let log = stderr(&stopped);
    assert!(stopped.status.success(), "the agent failed: {log}");
    let db = rusqlite::Connection::open(env.store()).unwrap();
    let frozen_after: i64 = db
        .query_row(
            "SELECT count(*) FROM decisions WHERE job = ?1 AND action = 'freeze' AND slot > ?2",
            rusqlite::params![b, since as i64],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(frozen_after, 0, "nobody's job was frozen after it was left to the kernel");
    let said: Vec<&str> = log.lines().filter(|l| l.contains("left to the kernel")).collect();
    assert!(said.len() == 1 && said[0].contains(&format!("job {b}:")), "said once, of nobody's job: {said:?}");
    eprintln!("{}", said[0]);
    let frozen = lockstep_cgroup::knobs::is_frozen(&theirs.0.join("freezer.state")).unwrap();
    assert!(!frozen, "nobody's job was left frozen: {log}");
    common::assert_no_cgroup(&a);
}

/// Attack 4, both sides nobody's: the two jobs the node switches are both nobody's, each of a tree of 10,000
/// cgroups, so that each one's writes cost the agent well past the 1 % a job may (1.5–2 % here), and alike. Judged
/// against each other (the rule before the lock's own wait was measured) neither was more than twice the other,
/// and both stayed switched up to 3 % each; judged against what a write of an empty cgroup takes, each is what its
/// own tree costs, and both are left to the kernel. Where the trees cost less than 1 % here, nothing is judged, and
/// the test passes, saying so.
#[test]
#[ignore = "needs root"]
fn a_user_whose_jobs_are_all_the_node_switches_gets_no_more_for_their_trees() {
    if !v1_freezer() {
        return;
    }
    let _serial = serial();
    let env = Env::new();
    let agent = Agent::start(&env, &["--policy", "gang", "--slot", "100ms"]);
    let mut held = Vec::new();
    let mut names = Vec::new();
    for which in ["twin-a", "twin-b"] {
        let theirs = Delegated::new(which);
        std::os::unix::fs::chown(theirs.0.join("freezer.state"), Some(0), Some(0)).unwrap();
        let subtree = Subtree(theirs.0.clone());
        let spinners = theirs.spinners();
        let top = theirs.0.to_string_lossy().into_owned();
        ok(&as_nobody("/usr/bin/python3").args(["-c", TREE, &top, "10000", "0"]).output().unwrap());
        let job = name(which);
        ok(&env.run(&["adopt", "--job", &job, "--cgroup", &theirs.path()]));
        names.push(job);
        // Dropped in this order: the spinners, then the subtree, then the delegated cgroup.
        held.push((spinners, subtree, theirs));
    }
    let status = || status_json(&env);
    let slot = status()["slot"].as_u64().unwrap();
    // 25 s: five windows (a first one weighs with an empty one before it, a job first past 1 % waits a window
    // for the lock to be measured).
    let later = |s: &serde_json::Value| s["slot"].as_u64() >= Some(slot + 250);
    common::wait_until("250 slots later", common::WAIT * 3, status, later);
    let stopped = agent.stop(Signal::SIGTERM);
    drop(held);
    let log = stderr(&stopped);
    assert!(stopped.status.success(), "the agent failed: {log}");
    assert!(!log.contains("it stays switched"), "a tree's own cost was taken for the lock's: {log}");
    let left: Vec<&str> = log.lines().filter(|l| l.contains("left to the kernel")).collect();
    for said in &left {
        eprintln!("{said}");
    }
    if left.is_empty() {
        eprintln!("neither job's writes came to 1 % of a CPU here: nothing was judged");
    }
    for job in &names {
        assert!(left.iter().filter(|l| l.contains(&format!("job {job}:"))).count() <= 1, "said once: {left:?}");
    }
}

/// Attack 4, turned on the victims: nobody holds the v1 freezer's lock, one for the whole machine, by reading the
/// `freezer.state` of a tree of 40,000 cgroups of theirs in two loops (anyone may read it, and each read walks the
/// tree holding the lock), so that the agent's writes of root's two jobs of one cgroup each spin on it in its
/// real-time thread: 0.9 ms on the mean instead of 0.1 ms, about 1 % of a CPU, and one of them was left to the
/// kernel for it. The cost is judged against what the lock alone takes (a write of an empty cgroup of the agent's,
/// measured among the jobs' while a judgement needs it): neither of root's jobs is left in 200 slots. (The lock made both cost 1.5–1.6 % of a CPU here, said once each and printed; the
/// test passes too where it makes them cost less, as nothing then is to be judged.)
#[test]
#[ignore = "needs root"]
fn another_user_holding_the_freezer_s_lock_gets_no_job_left_to_the_kernel() {
    if !v1_freezer() {
        return;
    }
    let _serial = serial();
    let env = Env::new();
    let theirs = Delegated::new("lock");
    let _subtree = Subtree(theirs.0.clone());
    let top = theirs.0.to_string_lossy().into_owned();
    ok(&as_nobody("/usr/bin/python3").args(["-c", TREE, &top, "40000", "0"]).output().unwrap());
    let agent = Agent::start(&env, &["--policy", "gang", "--slot", "100ms"]);
    // Two jobs of root's, each busy on every PU: they contend, and gang slices them.
    let (_a_loops, a_pids) = root_spinners();
    let (_b_loops, b_pids) = root_spinners();
    let (a, b) = (name("lock-a"), name("lock-b"));
    ok(&env.run(&["adopt", "--job", &a, "--pid", &a_pids]));
    ok(&env.run(&["adopt", "--job", &b, "--pid", &b_pids]));
    let state = theirs.0.join("freezer.state").to_string_lossy().into_owned();
    let readers: Vec<Reaped> = (0..2)
        .map(|_| {
            let read = format!("while :; do cat '{state}' > /dev/null; done");
            Reaped(as_nobody("sh").args(["-c", &read]).spawn().unwrap())
        })
        .collect();
    let status = || status_json(&env);
    let slot = status()["slot"].as_u64().unwrap();
    // 20 s: four windows of what the jobs' changes cost (1.5 % of a CPU each here, where 1 % was judged alone).
    let later = |s: &serde_json::Value| s["slot"].as_u64() >= Some(slot + 200);
    let seen = common::wait_until("200 slots later", common::WAIT * 3, status, later);
    drop(readers);
    for job in [&a, &b] {
        let j = seen["jobs"].as_array().unwrap().iter().find(|j| j["name"] == job.as_str()).cloned();
        assert!(j.as_ref().is_some_and(|j| j["left"].is_null()), "root's job {job} was left to the kernel: {j:?}");
    }
    ok(&env.run(&["release", "--job", &a]));
    ok(&env.run(&["release", "--job", &b]));
    let stopped = agent.stop(Signal::SIGTERM);
    let log = stderr(&stopped);
    assert!(stopped.status.success(), "the agent failed: {log}");
    assert!(!log.contains("left to the kernel"), "{log}");
    // What the lock cost them, when it came to more than a job may spend, is said once per job.
    for said in log.lines().filter(|l| l.contains("it stays switched")) {
        eprintln!("{said}");
    }
}
