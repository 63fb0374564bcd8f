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
    pub dir: lockstep_scratch::TempDir,
}

impl Env {
    pub fn new() -> Self {
        Self { dir: lockstep_scratch::tempdir().unwrap() }
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

    /// Runs `lockstep ARGS` to its end; one that has not ended after [`RUN_LIMIT`] fails the test, saying what
    /// it was doing.
    pub fn run(&self, args: &[&str]) -> Output {
        let child = self.cmd().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        output_within(child, RUN_LIMIT, &format!("lockstep {args:?}"))
    }

    pub fn spawn(&self, args: &[&str]) -> Child {
        self.cmd().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
    }
}

/// `lockstepd`, which `lockstep agent` execs from its own directory, made current there first: `cargo test`
/// builds the binaries of the package under test only (`lockstep`), so in a fresh clone there is none, and after
/// an edit an older one. It is built as `make build` builds it (`cargo build --workspace`, the same features, in
/// the same target directory and profile as this test's `lockstep`), so under `make test` this finds it current
/// at once. Where cargo cannot be run (a test binary run in a guest, which sets `LOCKSTEP_TESTS_PREBUILT=1`), a
/// `lockstepd` already beside `lockstep` is used. `Err` says why there is none.
pub fn lockstepd() -> Result<PathBuf, String> {
    static BUILT: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    BUILT.get_or_init(build_lockstepd).clone()
}

/// The longest [`lockstepd`]'s build may take.
const BUILD_LIMIT: Duration = Duration::from_mins(30);

fn build_lockstepd() -> Result<PathBuf, String> {
    let lockstep = Path::new(env!("CARGO_BIN_EXE_lockstep"));
    let daemon = lockstep.with_file_name("lockstepd");
    // `<target dir>/<profile dir>/lockstep`; the `dev` profile's directory is `debug`.
    let (Some(profile_dir), Some(target)) = (lockstep.parent(), lockstep.parent().and_then(Path::parent)) else {
        return Err(format!("cannot tell the target directory of {}", lockstep.display()));
    };
    let profile = match profile_dir.file_name().and_then(|p| p.to_str()) {
        Some("debug") | None => "dev",
        Some(p) => p,
    };
    // A guest running the host's test binaries has them built, and no toolchain on its PATH: it says so.
    let prebuilt = std::env::var_os("LOCKSTEP_TESTS_PREBUILT").is_some_and(|v| v == "1");
    let cargo = std::env::var_os("CARGO").or_else(|| option_env!("CARGO").map(Into::into)).filter(|_| !prebuilt);
    let build = cargo.and_then(|cargo| {
        Command::new(cargo)
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
            .args(["build", "--quiet", "--workspace", "--bin", "lockstepd", "--profile", profile, "--target-dir"])
            .arg(target)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .ok()
    });
    // A fresh target directory on a loaded 2-CPU machine builds in minutes; a build still running after
    // BUILD_LIMIT fails the test, saying what it was doing.
    match build.map(|child| output_within(child, BUILD_LIMIT, "cargo build --bin lockstepd (for the agent's tests)")) {
        Some(out) if out.status.success() && daemon.is_file() => Ok(daemon),
        Some(out) => Err(format!(
            "`cargo build --bin lockstepd` into {} failed ({}): {}",
            target.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        // No cargo here: the one beside `lockstep`, if any.
        _ if daemon.is_file() => Ok(daemon),
        _ => Err(format!("no {} and no cargo to build it (run `make build`)", daemon.display())),
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

/// How long a wait for live state gives the agent before the test fails: ticks are 100 ms to 1 s, and a loaded
/// CI machine or a TCG guest is many times slower than a developer's.
pub const WAIT: Duration = Duration::from_secs(20);

/// Looks at live state with `look` until `ok` accepts what it saw, at most `limit`, and returns that snapshot:
/// the one the test then asserts on, never a second read. Past the limit the test fails, showing the last
/// snapshot seen and the end of the log of every agent this test runs.
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
        assert!(
            Instant::now() < deadline,
            "timed out ({limit:?}) waiting for {what}; last seen: {seen:#?}{}",
            agent_logs()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until at least `n` processes are in `cgroup` or below it, and returns them; shows the last list if not.
pub fn processes(cgroup: &Path, n: usize) -> Vec<i32> {
    let look = || lockstep_cgroup::procs_below(cgroup).map_err(|e| e.to_string());
    let seen = wait_until("the job's processes", WAIT, look, |p| p.as_ref().is_ok_and(|p| p.len() >= n));
    seen.unwrap_or_default()
}

thread_local! {
    /// The log files of the agents the test on this thread runs (each test has its own thread).
    static LOGS: std::cell::RefCell<Vec<PathBuf>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Shows `log` (an agent's log file) when a wait of this test times out, until [`forget_log`].
pub fn watch_log(log: &Path) {
    LOGS.with(|l| l.borrow_mut().push(log.to_path_buf()));
}

/// Stops showing `log` when a wait times out.
pub fn forget_log(log: &Path) {
    LOGS.with(|l| l.borrow_mut().retain(|p| p != log));
}

/// The last lines of every log [`watch_log`] named, for a failure message.
pub fn agent_logs() -> String {
    use std::fmt::Write as _;
    const LINES: usize = 25;
    LOGS.with(|l| {
        let mut text = String::new();
        for log in l.borrow().iter() {
            let all = std::fs::read(log).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
            let lines: Vec<&str> = all.lines().collect();
            let _ = write!(text, "\n--- the last {} lines of {}:\n", LINES.min(lines.len()), log.display());
            text += &lines[lines.len().saturating_sub(LINES)..].join("\n");
        }
        text
    })
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

/// The capabilities docs/security.md gives the agent, as the Makefile's `AGENT_CAPS` lists them (read from there,
/// the one list): no CAP_DAC_OVERRIDE, so that file modes bind its writes as they bind any owner.
pub fn agent_caps() -> String {
    let makefile = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Makefile");
    let text = std::fs::read_to_string(&makefile).unwrap_or_else(|e| panic!("{}: {e}", makefile.display()));
    let caps = text.lines().find_map(|l| l.strip_prefix("AGENT_CAPS := "));
    caps.unwrap_or_else(|| panic!("{} sets no AGENT_CAPS", makefile.display())).trim().to_string()
}

/// A running agent, killed when dropped. Its stderr (the log) goes to a file of the test's directory, shown when
/// a wait times out ([`watch_log`]).
pub struct Agent {
    pub child: Child,
    log: PathBuf,
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

    /// Starts `lockstep agent ARGS` with every capability of root, whatever `LOCKSTEP_AGENT_CAPS` says.
    pub fn start_as_root(env: &Env, args: &[&str]) -> Self {
        Self::launch(env, args, &[], None)
    }

    /// Starts `lockstep agent ARGS` with only the capabilities `caps` lists (comma-separated, as setpriv takes
    /// them) in its bounding set.
    pub fn start_with_caps(env: &Env, args: &[&str], caps: &str) -> Self {
        Self::launch(env, args, &[], Some(caps))
    }

    fn launch(env: &Env, args: &[&str], vars: &[(&str, &std::ffi::OsStr)], caps: Option<&str>) -> Self {
        let mut cmd = match caps {
            Some(caps) => {
                // As the unit does before it starts the agent: the parent cgroups, made fully privileged (a
                // hierarchy's root takes CAP_DAC_OVERRIDE, which the agent runs without).
                let daemon = lockstepd().unwrap_or_else(|why| panic!("cannot start the agent: {why}"));
                let made = Command::new(daemon).arg("--cgroup-parents").output().unwrap();
                assert!(made.status.success(), "lockstepd --cgroup-parents: {}", stderr(&made));
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
        Self::spawn(env, cmd)
    }

    /// Starts `cmd`, a command line that runs `lockstep agent` on `env`'s store and socket (under a wrapper such
    /// as prlimit or setpriv), and waits for its socket.
    pub fn spawn(env: &Env, mut cmd: Command) -> Self {
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        if let Err(why) = lockstepd() {
            panic!("cannot start the agent: {why}");
        }
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log = env.dir.path().join(format!("agent-{n}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let child = cmd.stdout(Stdio::piped()).stderr(file).spawn().unwrap();
        watch_log(&log);
        let agent = Self { child, log };
        let socket = env.socket();
        // Started is answering, not only listening: the socket is bound before the store is held, and a second agent
        // started in between (a test of one agent per store) would take the store first.
        let answer = || answers(&socket);
        // A start gets a stop's bound: in a TCG guest beside a loaded host, exec'ing the agent from the guest's 9p
        // root and setting it up took more than WAIT (no log line yet after 20 s, in a loaded fresh-clone run).
        let _ = wait_until("the agent's answer to status", STOP_LIMIT, answer, Result::is_ok);
        agent
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    /// What the agent has logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stops the agent with `sig` and returns its output, its log as stderr; an agent still running a minute
    /// later fails the test.
    pub fn stop(mut self, sig: Signal) -> Output {
        let _ = kill(self.pid(), sig);
        let child = std::mem::replace(&mut self.child, dummy());
        let mut out = output_within(child, Duration::from_mins(1), &format!("the agent after {sig}"));
        out.stderr = std::fs::read(&self.log).unwrap();
        out
    }
}

/// How long one `lockstep` command of a test may take (the longest, an experiment, takes about a minute on the
/// host): a command that hangs fails its test with what it was doing, instead of stalling the suite.
pub const RUN_LIMIT: Duration = Duration::from_mins(10);

/// The output of `child` once it exits, waiting at most `deadline`: past it the child is killed and the test
/// fails, naming `what` and showing what it was doing and its stderr (a guest under TCG that stalls must not hang
/// the suite).
pub fn output_within(child: Child, deadline: Duration, what: &str) -> Output {
    let pid = Pid::from_raw(child.id() as i32);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    if let Ok(out) = rx.recv_timeout(deadline) {
        return out.unwrap();
    }
    let doing = stuck(pid.as_raw());
    let _ = kill(pid, Signal::SIGKILL);
    // Its output ends when every process holding the pipes has closed them, which the child's own children
    // (a job's processes) may not do soon: past a few seconds more the test fails without it.
    let stderr = match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Ok(out)) => String::from_utf8_lossy(&out.stderr).into_owned(),
        _ => "(still held open by its children)\n".to_string(),
    };
    panic!("{what} did not exit within {deadline:?}; what it was doing:\n{doing}its stderr: {stderr}{}", agent_logs());
}

/// How long a process a test has signalled to stop may take to exit (a `lockstep run` forwards the signal, waits
/// for its job and removes the job's cgroup; an agent restores every job first).
pub const STOP_LIMIT: Duration = Duration::from_mins(1);

/// The exit status of `child`, waiting at most `deadline`: past it, the child is killed and the test fails with
/// what it was doing, naming `what`. In a `Drop` of a test that is already failing, the same goes to stderr
/// instead (a second panic would abort the whole binary).
pub fn exit_within(child: &mut Child, deadline: Duration, what: &str) -> std::process::ExitStatus {
    let end = Instant::now() + deadline;
    while Instant::now() < end {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let doing = stuck(child.id() as i32);
    let _ = child.kill();
    let status = child.wait().unwrap();
    let message = format!("{what} did not exit within {deadline:?}; what it was doing:\n{doing}{}", agent_logs());
    assert!(std::thread::panicking(), "{message}");
    eprintln!("{message}");
    status
}

/// What process `pid`, its threads and its children are doing, from /proc (name, state, kernel wait channel and
/// kernel stack), for the message of a test whose process did not end.
pub fn stuck(pid: i32) -> String {
    use std::fmt::Write as _;
    let read = |path: String| std::fs::read_to_string(path).unwrap_or_default();
    let mut text = String::new();
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten();
    for task in tasks.map(|t| t.path()) {
        let stat = read(format!("{}/stat", task.display()));
        let state = stat.rsplit(')').next().and_then(|r| r.split_whitespace().next()).unwrap_or("?");
        let comm = read(format!("{}/comm", task.display()));
        let wchan = read(format!("{}/wchan", task.display()));
        let _ = writeln!(text, "  {} ({}) state {state}, waiting in {wchan}", task.display(), comm.trim());
        for frame in read(format!("{}/stack", task.display())).lines() {
            let _ = writeln!(text, "    {frame}");
        }
        for child in read(format!("{}/children", task.display())).split_whitespace() {
            text += &stuck(child.parse().unwrap_or(0));
        }
    }
    text
}

/// A child that has already exited, to stand in for one taken out of a struct that kills its child on drop.
pub fn dummy() -> Child {
    std::process::Command::new("true").spawn().unwrap()
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        exit_within(&mut self.child, STOP_LIMIT, "the agent, killed");
        forget_log(&self.log);
    }
}

/// The first line of the agent's answer to a status request on `socket` (any HTTP status: the doors are serving),
/// or what stopped it (no socket yet, not listening, no answer within a second).
fn answers(socket: &std::path::Path) -> Result<String, String> {
    use std::io::{Read, Write};
    let mut stream = std::os::unix::net::UnixStream::connect(socket).map_err(|e| format!("connect: {e}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).map_err(|e| e.to_string())?;
    let body = r#"{"version":3,"op":"status"}"#;
    let request = format!(
        "POST /v1/request HTTP/1.1\r\nHost: lockstep\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).map_err(|e| format!("write: {e}"))?;
    let mut head = [0u8; 64];
    let n = stream.read(&mut head).map_err(|e| format!("read: {e}"))?;
    let line = String::from_utf8_lossy(&head[..n]).lines().next().unwrap_or_default().to_string();
    if line.starts_with("HTTP/1.1 ") {
        Ok(line)
    } else {
        Err(format!("answered {line:?}"))
    }
}

/// Plants, as nobody, something at the name where the PMPI profiler once published each rank's live count
/// (`/dev/shm/lockstep-pmpi.<pid>`) for the 2,000 PIDs after the last one given out, and keeps planting ahead as
/// PIDs are given out (every 10 ms; a machine running other tests gives out thousands a minute), in one process (a
/// shell's per name would use up the very PIDs it plants for; past `pid_max` the kernel starts again at 300): by
/// turns a regular file that reads as a live file of a huge count, a FIFO, a link. A name taken already stays as
/// it is. Prints `up` once the first 2,000 are planted.
pub const PLANT_EVERY_KIND: &str = r"
import os, struct, time
top = int(open('/proc/sys/kernel/pid_max').read())
planted = set()
def plant(p):
    name = f'/dev/shm/lockstep-pmpi.{p}'
    try:
        if p % 3 == 0:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, b'LSPMPI1\0' + struct.pack('=QQ', 0, 1 << 40) + bytes(40))
            os.close(fd)
        elif p % 3 == 1:
            os.mkfifo(name)
        else:
            os.symlink('/dev/null', name)
    except FileExistsError:
        pass
    planted.add(p)
said = False
while True:
    n = int(open('/proc/sys/kernel/ns_last_pid').read())
    for p in range(n + 1, n + 2001):
        p = p if p < top else 300 + p - top
        if p not in planted: plant(p)
    if not said:
        print('up', flush=True)
        said = True
    time.sleep(0.01)
";

/// What nobody planted at the profiler's old names, removed when dropped (pass or fail): every such name that is
/// nobody's, nothing of another user's.
pub struct Planted;

impl Planted {
    /// Whether nobody holds the old name of PID `pid`.
    pub fn holds(pid: u32) -> bool {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(format!("/dev/shm/lockstep-pmpi.{pid}")).is_ok_and(|m| m.uid() == 65534)
    }

    /// The PIDs whose old names nobody holds.
    pub fn held() -> Vec<u32> {
        let names = std::fs::read_dir("/dev/shm").into_iter().flatten().flatten();
        let pids = names.filter_map(|e| e.file_name().to_str()?.strip_prefix("lockstep-pmpi.")?.parse().ok());
        pids.filter(|&p| Self::holds(p)).collect()
    }
}

impl Drop for Planted {
    fn drop(&mut self) {
        for p in Self::held() {
            let _ = std::fs::remove_file(format!("/dev/shm/lockstep-pmpi.{p}"));
        }
    }
}

/// Starts nobody's planter ([`PLANT_EVERY_KIND`]) and waits until it planted the first names; the planter is
/// killed and reaped when the returned child is dropped by [`Reaped`].
pub fn start_planter() -> Reaped {
    let mut planter =
        as_nobody("/usr/bin/python3").args(["-c", PLANT_EVERY_KIND]).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(planter.stdout.take().unwrap()), &mut line).unwrap();
    let planter = Reaped(planter);
    assert_eq!(line.trim(), "up", "nobody's planter did not start");
    planter
}

/// A child process killed and reaped when dropped.
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        exit_within(&mut self.0, STOP_LIMIT, "a test's helper process, killed");
    }
}

/// Whether `status` (the agent's `status --json`) holds a choice of `auto`, not a trial, for a group with every
/// job of `names` (any group when none is named) whose `rates` (`rates` of them) were all read from the ranks'
/// calls.
pub fn chosen_from_calls(status: &serde_json::Value, names: &[serde_json::Value], rates: usize) -> bool {
    status["groups"].as_array().into_iter().flatten().any(|g| {
        let read: Vec<&serde_json::Value> = g["rates"]
            .as_object()
            .into_iter()
            .flat_map(|r| r.values())
            .filter_map(|r| r.as_array())
            .flatten()
            .collect();
        g["trying"] == false
            && g["jobs"].as_array().is_some_and(|j| names.iter().all(|n| j.contains(n)))
            && read.len() == rates
            && read.iter().all(|r| r["calls_s"].as_f64().is_some())
    })
}
