//! Helpers shared by the integration tests: a private store and socket per test, root checks, the job
//! cgroup directories, waiting.
#![allow(dead_code)] // each test binary uses a different subset

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

pub const V1_CONTROLLERS: [&str; 4] = ["cpuset", "cpu", "memory", "freezer"];

pub struct Env {
    /// Directory of the store and socket.
    pub dir: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Self {
        Self { dir: tempfile::tempdir().unwrap() }
    }

    /// This test's store.
    pub fn store(&self) -> PathBuf {
        self.dir.path().join("lockstep.db")
    }

    /// This test's agent socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("agent.sock")
    }

    pub fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_lockstep"));
        c.env("LOCKSTEP_STORE", self.store()).env("LOCKSTEP_SOCKET", self.socket());
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    pub fn spawn(&self, args: &[&str]) -> Child {
        self.cmd().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
    }
}

/// The command line that runs a program as user nobody (UID and GID 65534, no supplementary groups): the attacker
/// of the tests of what other users can do.
pub const AS_NOBODY: [&str; 5] = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"];

/// `program` as user nobody (see [`AS_NOBODY`]).
pub fn as_nobody(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new(AS_NOBODY[0]);
    c.args(&AS_NOBODY[1..]).arg(program);
    c
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The first line of every test marked `#[ignore = "needs root"]`: such a test runs only when asked for
/// (`--include-ignored`, as `make test` does), and then fails, rather than passing unseen, without root.
pub fn require_root() {
    assert!(is_root(), "this test needs root (real cgroups, namespaces): run it as root, e.g. with `make test`");
}

/// Says that a prerequisite (a tool from scripts/deps.sh, a program from `make build`) is missing: the test is
/// skipped with a line on stderr, or fails when `LOCKSTEP_REQUIRE_ALL=1` (set by `make test`, where everything
/// must be present). Returns so that the caller can `return`.
pub fn missing(what: &str) {
    assert!(std::env::var_os("LOCKSTEP_REQUIRE_ALL").is_none_or(|v| v != "1"), "prerequisite missing: {what}");
    eprintln!("skipped: {what}");
}

pub fn name(test: &str) -> String {
    format!("it-{test}-{}", std::process::id())
}

/// Directories a job would own: v1 controllers that are mounted (and its membership directory on the unified
/// hierarchy of a hybrid machine, where perf_event lives), else the v2 hierarchy.
pub fn job_dirs(job: &str) -> Vec<PathBuf> {
    let mut v1: Vec<PathBuf> = V1_CONTROLLERS
        .iter()
        .map(|c| Path::new("/sys/fs/cgroup").join(c))
        .filter(|m| m.join("cgroup.procs").exists())
        .map(|m| m.join("lockstep").join(job))
        .collect();
    let unified = Path::new("/sys/fs/cgroup/unified");
    if !v1.is_empty() && unified.join("cgroup.procs").exists() {
        v1.push(unified.join("lockstep").join(job));
    }
    if v1.is_empty() {
        vec![Path::new("/sys/fs/cgroup/lockstep").join(job)]
    } else {
        v1
    }
}

pub fn assert_no_cgroup(job: &str) {
    for d in job_dirs(job) {
        assert!(!d.exists(), "cgroup {} left behind", d.display());
    }
}

/// The gaps (ms) between two agents' switches of the same slots, from the decisions logged in their stores `a`
/// and `b`, over the slots `a` switched within `during` (seconds since the epoch).
pub fn slot_gaps_ms(a: &Path, b: &Path, during: impl std::ops::RangeBounds<f64>) -> Vec<f64> {
    let (ta, tb) = (slot_times(a), slot_times(b));
    ta.iter().filter(|(_, t)| during.contains(*t)).filter_map(|(k, x)| tb.get(k).map(|y| (x - y).abs() * 1e3)).collect()
}

/// Times (seconds since the epoch) of the slot switches an agent logged in its store, by slot index.
fn slot_times(store: &Path) -> std::collections::BTreeMap<i64, f64> {
    let db = rusqlite::Connection::open(store).unwrap();
    let mut stmt = db.prepare("SELECT slot, time FROM decisions WHERE action = 'slot'").unwrap();
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    rows.map(Result::unwrap).collect()
}

/// Asserts that two nodes switched slots in step: of the gaps between their switches of the same slots (ms), the
/// median under a tenth of the slot and none half a slot; prints both. How small the gaps are on a loaded host is a
/// speed target, measured by the experiments (experiments/slurm-scale.toml reports the skew's p50 and p99).
pub fn assert_in_step(what: &str, gaps_ms: &[f64], slot_ms: f64) {
    let mut sorted = gaps_ms.to_vec();
    sorted.sort_by(f64::total_cmp);
    let (median, worst) = (sorted[sorted.len() / 2], sorted[sorted.len() - 1]);
    eprintln!("slot switch skew {what}: median {median:.3} ms, max {worst:.3} ms over {} slots", sorted.len());
    assert!(
        median < slot_ms / 10.0 && worst < slot_ms / 2.0,
        "slot switches {median:.3} ms apart (median), {worst:.3} ms at worst, with {slot_ms} ms slots"
    );
}

pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Looks at live state with `look` until `ok` accepts what it saw, at most `limit`, and returns that snapshot:
/// the one the test then asserts on, never a second read. Past the limit the test fails, showing the last
/// snapshot seen.
pub fn wait_until<T: std::fmt::Debug>(
    what: &str,
    limit: Duration,
    mut look: impl FnMut() -> T,
    ok: impl Fn(&T) -> bool,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        let seen = look();
        if ok(&seen) {
            return seen;
        }
        assert!(Instant::now() < deadline, "timed out ({limit:?}) waiting for {what}; last seen: {seen:#?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether process `pid` is still there (a zombie is not).
pub fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit(')').next().is_some_and(|r| !r.trim_start().starts_with('Z')))
}

/// A command's stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A running agent, killed when dropped.
pub struct Agent {
    pub child: Child,
}

impl Agent {
    /// Starts `lockstep agent ARGS`; with only the capabilities `LOCKSTEP_AGENT_CAPS` lists (e.g.
    /// `sys_admin,bpf,…`: the bounding set of the agent's process) when it is set, as `make test` does to prove
    /// the agent needs no more than docs/security.md says.
    pub fn start(env: &Env, args: &[&str]) -> Self {
        Self::start_with(env, args, &[])
    }

    /// Starts `lockstep agent ARGS` as [`Agent::start`] does, with extra environment variables (fault seams such
    /// as `LOCKSTEP_CLOCK_SKEW_FILE`).
    pub fn start_with(env: &Env, args: &[&str], vars: &[(&str, &std::ffi::OsStr)]) -> Self {
        Self::launch(env, args, vars, std::env::var("LOCKSTEP_AGENT_CAPS").ok().as_deref())
    }

    /// Starts `lockstep agent ARGS` with only the capabilities `caps` lists (comma-separated, as setpriv takes
    /// them) in its bounding set.
    pub fn start_with_caps(env: &Env, args: &[&str], caps: &str) -> Self {
        Self::launch(env, args, &[], Some(caps))
    }

    fn launch(env: &Env, args: &[&str], vars: &[(&str, &std::ffi::OsStr)], caps: Option<&str>) -> Self {
        let mut cmd = match caps {
            Some(caps) => {
                let bounding =
                    format!("-all,{}", caps.split(',').map(|c| format!("+{c}")).collect::<Vec<_>>().join(","));
                let mut c = Command::new("setpriv");
                c.args(["--bounding-set", &bounding, "--", env!("CARGO_BIN_EXE_lockstep")]);
                c.env("LOCKSTEP_STORE", env.store()).env("LOCKSTEP_SOCKET", env.socket());
                c
            }
            None => env.cmd(),
        };
        cmd.arg("agent").args(args).envs(vars.iter().copied());
        let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let socket = env.socket();
        wait_for("the agent's socket", || std::os::unix::net::UnixStream::connect(&socket).is_ok());
        Self { child }
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    /// Stops the agent with `sig` and returns its output; an agent still running a minute later fails the test.
    pub fn stop(mut self, sig: Signal) -> Output {
        let _ = kill(self.pid(), sig);
        let child = std::mem::replace(&mut self.child, dummy());
        std::mem::forget(self);
        output_within(child, Duration::from_mins(1), &format!("the agent after {sig}"))
    }
}

/// The output of `child` once it exits, waiting at most `deadline`: past it the child is killed and the test
/// fails, naming `what` and showing its stderr (a guest under TCG that stalls must not hang the suite).
pub fn output_within(child: Child, deadline: Duration, what: &str) -> Output {
    let pid = Pid::from_raw(child.id() as i32);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    if let Ok(out) = rx.recv_timeout(deadline) {
        return out.unwrap();
    }
    let _ = kill(pid, Signal::SIGKILL);
    let out = rx.recv().unwrap().unwrap();
    panic!("{what} did not exit within {deadline:?}; its stderr: {}", String::from_utf8_lossy(&out.stderr));
}

/// A child that has already exited, to stand in for one taken out of a struct that kills its child on drop.
pub fn dummy() -> Child {
    std::process::Command::new("true").spawn().unwrap()
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
