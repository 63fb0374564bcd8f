//! The node agent on the real cgroups of this machine: gang and boost slots, crash safety, two agents in step,
//! and bad input. Every test starts its own agents (own socket and store) and stops them by PID, pass or fail.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Output};
use std::time::{Duration, Instant};

use common::{assert_in_step, assert_no_cgroup, job_dirs, name, running, slot_gaps_ms, wait_until, Agent, Env, WAIT};
use lockstep_cgroup::knobs::is_frozen;
use lockstep_cgroup::Knobs;
use lockstep_core::cpulist::CpuList;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// The tests measure timing (slot switches, restore deadlines): they run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A shell script that runs a busy loop on every PU of this machine (a job placed `any` has them all), forking
/// nothing else: two such jobs want twice as many CPUs as there are, and `gang` slices them.
fn spin_every_pu() -> String {
    let pus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    "(while :; do :; done) & ".repeat(pus) + "wait"
}

/// A job started with `lockstep run` ([`spin_every_pu`]), killed and reaped when dropped.
struct Job {
    name: String,
    child: Child,
    /// `lockstep release` of the job, for one the agent adopted: run when dropped (refused where the test released
    /// it already), so that a failed test leaves no process in the agent's cgroups.
    release: Option<std::process::Command>,
}

impl Job {
    fn start(env: &Env, name: &str, extra: &[&str]) -> Self {
        Self::start_with(env, name, extra, &["sh", "-c", &spin_every_pu()])
    }

    /// `lockstep run` of `command` as job `name`, with the options `extra`.
    fn start_with(env: &Env, name: &str, extra: &[&str], command: &[&str]) -> Self {
        let mut args = vec!["run", "--job", name, "--place", "any"];
        args.extend_from_slice(extra);
        args.push("--");
        args.extend_from_slice(command);
        Self::started(env.spawn(&args), name)
    }

    /// `lockstep run` of `command` (with the environment `vars`) as job `name`.
    fn start_command(env: &Env, name: &str, vars: &[(&str, &str)], command: &[&str]) -> Self {
        let mut cmd = env.cmd();
        cmd.envs(vars.iter().copied()).args(["run", "--job", name, "--place", "any", "--"]).args(command);
        Self::started(
            cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap(),
            name,
        )
    }

    /// A busy loop on PU `pu` alone (by its affinity), adopted by its PID as job `name`: the job's PUs are `pu`.
    fn adopted(env: &Env, name: &str, pu: usize) -> Self {
        let child = std::process::Command::new("taskset")
            .args(["-c", &pu.to_string(), "sh", "-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let mut release = env.cmd();
        release
            .args(["release", "--job", name])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let job = Self { name: name.to_string(), child, release: Some(release) };
        // Adopted once bound: the job's PUs are its process's affinity then.
        let pid = job.child.id() as i32;
        let want = pu.to_string();
        wait_until(
            "the loop bound by taskset",
            WAIT,
            || lockstep_cgroup::procfs::cpus_allowed(pid),
            |a| a.as_deref() == Some(want.as_str()),
        );
        ok(&env.run(&["adopt", "--job", name, "--pid", &pid.to_string()]));
        job
    }

    /// Waits for the job's first process in its cgroup.
    fn started(child: Child, name: &str) -> Self {
        let dirs = job_dirs(name);
        common::processes(&dirs[0], 1);
        Self { name: name.to_string(), child, release: None }
    }

    fn knobs(&self) -> Knobs {
        Knobs::find(&job_dirs(&self.name))
    }

    fn frozen(&self) -> bool {
        self.knobs().freeze.as_deref().map(is_frozen).and_then(Result::ok).unwrap_or(false)
    }

    fn weight(&self) -> String {
        std::fs::read_to_string(self.knobs().weight.unwrap()).unwrap_or_default().trim().to_string()
    }

    fn pids(&self) -> Vec<i32> {
        lockstep_cgroup::read_procs(&job_dirs(&self.name)[0]).unwrap()
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if let Some(release) = &mut self.release {
            let _ = release.status();
        }
        // Thaw first: a frozen job cannot die.
        if let Some(f) = self.knobs().freeze {
            let _ = std::fs::write(&f, lockstep_cgroup::knobs::freeze_value(&f, false));
        }
        let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM);
        common::exit_within(&mut self.child, common::STOP_LIMIT, &format!("the job {}, after SIGTERM", self.name));
        if std::thread::panicking() {
            // The test failed already: what the job left is taken away, without a second panic, which would abort
            // the run before the other jobs are dropped.
            for d in job_dirs(&self.name) {
                let _ = std::fs::remove_dir(d);
            }
        } else {
            assert_no_cgroup(&self.name);
        }
    }
}

/// A consistent sample of two jobs' states: `read` is called as a, b, a again until the first job did not change
/// in between and the three reads took under [`SNAPSHOT_SPAN`] (two plain reads can straddle a slot switch and
/// show a state that never existed; reads slowed past a slot, as in a loaded TCG guest, can straddle two switches
/// and show the first job unchanged).
fn snapshot<T: PartialEq + std::fmt::Debug>(a: &Job, b: &Job, read: impl Fn(&Job) -> T) -> (T, T) {
    let deadline = Instant::now() + WAIT;
    loop {
        let start = Instant::now();
        let (x, y) = (read(a), read(b));
        let again = read(a);
        let took = start.elapsed();
        if again == x && took < SNAPSHOT_SPAN {
            return (x, y);
        }
        assert!(
            Instant::now() < deadline,
            "no consistent snapshot in {WAIT:?}; last: {x:?} {y:?} {again:?} in {took:?}"
        );
    }
}

/// The longest three reads of a snapshot may take: a quarter of the tests' shortest slot (200 ms), so that two
/// slot switches cannot both fall between them.
const SNAPSHOT_SPAN: Duration = Duration::from_millis(50);

/// Snapshots of `read` on both jobs every 10 ms for `span`.
fn sample_both<T: PartialEq + std::fmt::Debug>(
    a: &Job,
    b: &Job,
    read: impl Fn(&Job) -> T,
    span: Duration,
) -> Vec<(T, T)> {
    let mut samples = Vec::new();
    let start = Instant::now();
    while start.elapsed() < span {
        samples.push(snapshot(a, b, &read));
        std::thread::sleep(Duration::from_millis(10));
    }
    samples
}

/// Stops the agent with SIGTERM, checks that it exited 0, and returns what it logged.
fn stopped_log(agent: Agent) -> String {
    let out = agent.stop(Signal::SIGTERM);
    ok(&out);
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Checks that the fault `needle` names was said once per place (a line when it starts, one when it clears), not
/// once per slot.
fn said_per_fault(log: &str, needle: &str) {
    let lines = log.lines().filter(|l| l.contains(needle)).count();
    assert!((1..=4).contains(&lines), "one line per fault and place, not one per slot: {log}");
}

fn ok(out: &Output) {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

fn usage_error(out: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "expected exit 2, got {:?}: {err}", out.status);
    assert_eq!(err.trim().lines().count(), 1, "expected one line: {err}");
    assert!(err.contains(needle), "expected {needle:?} in {err}");
}

#[test]
#[ignore = "needs root"]
fn gang_alternates_and_never_freezes_both() {
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    let agent = Agent::start(&env, &["--policy", "gang", "--slot", "200ms"]);
    let a = Job::start(&env, &name("gang-a"), &[]);
    let b = Job::start(&env, &name("gang-b"), &[]);
    // New jobs run as under cfs until their demand is measured (3 s at most): slicing starts after.
    one_frozen(&a, &b);
    let samples = sample_both(&a, &b, Job::frozen, Duration::from_secs(3));
    let mut running_together = 0;
    for &(x, y) in &samples {
        running_together = if !x && !y { running_together + 1 } else { 0 };
        assert!(running_together <= 1, "both jobs ran for more than one sample: {samples:?}");
    }
    let switches = samples.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(switches >= 10, "expected ~15 slot switches in 3 s of 200 ms slots, saw {switches}");
    let log = stopped_log(agent);
    never_both_frozen(&samples, &log, &a, &b);
    assert!(!a.frozen() && !b.frozen(), "SIGTERM must thaw every job");
}

/// Two jobs whose busy loops together fill their PUs exactly (half the PUs' loops each) fit them: once the agent has
/// measured what they want, `gang` leaves both running in every slot, as cfs would, and says what each wants.
#[test]
#[ignore = "needs root"]
fn under_gang_two_jobs_that_fit_their_pus_are_never_frozen() {
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    let agent = Agent::start(&env, &["--policy", "gang", "--slot", "200ms", "--sample-interval", "200ms"]);
    let pus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let half = "(while :; do :; done) & ".repeat(pus / 2) + "wait";
    let a = Job::start_with(&env, &name("fit-a"), &[], &["sh", "-c", &half]);
    let b = Job::start_with(&env, &name("fit-b"), &[], &["sh", "-c", &half]);
    let wants = |status: &serde_json::Value| -> Vec<Option<f64>> {
        [&a.name, &b.name]
            .iter()
            .map(|n| {
                let jobs = status["jobs"].as_array().into_iter().flatten();
                jobs.filter(|j| j["name"] == n.as_str()).find_map(|j| j["cpus_wanted"].as_f64())
            })
            .collect()
    };
    // A job's first slot measured may hold its start (a TCG guest once read 1.17 CPUs there, its shell forking
    // the loop): each busy loop is to be seen wanting one CPU, within a deadline.
    let status = wait_until(
        "each busy loop measured wanting one CPU (0.5-1.1), neither job frozen",
        WAIT,
        || serde_json::from_slice::<serde_json::Value>(&env.run(&["status", "--json"]).stdout).unwrap_or_default(),
        |s| wants(s).iter().all(|w| w.is_some_and(|w| (0.5..=1.1).contains(&w))) && !a.frozen() && !b.frozen(),
    );
    eprintln!("CPUs wanted: {:?}", wants(&status));
    let samples = sample_both(&a, &b, Job::frozen, Duration::from_secs(2));
    assert!(samples.iter().all(|&f| f == (false, false)), "a job that fits was frozen: {samples:?}");
    let table = env.run(&["status"]);
    ok(&table);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("WANTS"), "status names what each job wants: {text}");
    stopped_log(agent);
}

/// Two PUs this test may run on (`taskset` and `sched_setaffinity` refuse the others), or `None` after saying that
/// the test needs them `what` for.
fn two_pus(what: &str) -> Option<[usize; 2]> {
    let allowed = lockstep_cgroup::procfs::cpus_allowed(std::process::id() as i32).unwrap();
    let pus: Vec<usize> = CpuList::parse(&allowed).unwrap().iter().take(2).collect();
    let two = <[usize; 2]>::try_from(pus).ok();
    if two.is_none() {
        common::missing(&format!("needs 2 PUs {what} (allowed: {allowed})"));
    }
    two
}

/// Sets of jobs that share no PU cycle apart: two busy jobs on one PU beside three on another are sliced in every slot
/// under `gang`. With one cycle of three rows for the node, the pair had no favoured job one slot in three, and ran
/// together then, as under `cfs`.
#[test]
#[ignore = "needs root"]
fn under_gang_each_set_of_jobs_is_sliced_by_its_own_cycle() {
    common::require_root();
    let _serial = serial();
    let Some(pus) = two_pus("to put two sets of jobs apart") else { return };
    let env = Env::new();
    let agent = Agent::start(&env, &["--policy", "gang", "--slot", "200ms"]);
    let on = [pus[0], pus[0], pus[1], pus[1], pus[1]];
    let jobs: Vec<Job> =
        on.iter().enumerate().map(|(i, &pu)| Job::adopted(&env, &name(&format!("set-{i}")), pu)).collect();
    let (a, b) = (&jobs[0], &jobs[1]);
    // New jobs run as under cfs until their demand is measured (3 s at most): slicing starts after.
    one_frozen(a, b);
    let samples = sample_both(a, b, Job::frozen, Duration::from_secs(3));
    let mut running_together = 0;
    for &(x, y) in &samples {
        running_together = if !x && !y { running_together + 1 } else { 0 };
        assert!(running_together <= 1, "the pair ran together for more than one sample: {samples:?}");
    }
    // The node's longest cycle is the three's; the pair's, shorter, is in its rows.
    let status: serde_json::Value = serde_json::from_slice(&env.run(&["status", "--json"]).stdout).unwrap();
    let period = |job: &Job| -> Option<u64> {
        let jobs = status["jobs"].as_array().into_iter().flatten();
        jobs.filter(|j| j["name"] == job.name.as_str()).find_map(|j| j["period"].as_u64())
    };
    let periods: Vec<Option<u64>> = jobs.iter().map(period).collect();
    assert_eq!(status["rows"], 3, "{status}");
    assert_eq!(periods, [Some(2), Some(2), None, None, None], "{status}");
    // Released, each loop is back where it was, runnable, and its cgroup gone (the job's drop checks).
    for j in &jobs {
        ok(&env.run(&["release", "--job", &j.name]));
    }
    let log = stopped_log(agent);
    never_both_frozen(&samples, &log, a, b);
}

/// Checks that no two samples in a row saw both jobs of a pair frozen, and none did unless the agent said (in `log`)
/// that one of them is switched after the prompt jobs: a job whose change took the kernel more than
/// `PROMPT_SWITCH` is thawed after the others are frozen, so that its tree's cost falls on it alone, and may be
/// frozen beside its partner for as long as its thaw takes (a loaded TCG guest's writes took that long).
fn never_both_frozen(samples: &[(bool, bool)], log: &str, a: &Job, b: &Job) {
    let slow = log.lines().any(|l| {
        l.contains("switched after every other job") && (l.contains(a.name.as_str()) || l.contains(b.name.as_str()))
    });
    let both = |&(x, y): &(bool, bool)| x && y;
    if slow {
        let twice = samples.windows(2).any(|w| w.iter().all(both));
        assert!(!twice, "both jobs frozen for two samples in a row: {samples:?}\n{log}");
    } else {
        assert!(!samples.iter().any(both), "both jobs frozen at once: {samples:?}\n{log}");
    }
}

/// `build/`, when `make build` has put `program` in `build/bin` (otherwise it says what is missing).
fn built(program: &str) -> Option<PathBuf> {
    let build = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../build");
    if build.join("bin").join(program).exists() {
        Some(build)
    } else {
        common::missing(&format!("build/bin has no {program} (run make build)"));
        None
    }
}

/// What `auto` chose (not what it is trying) for the group of jobs `a` and `b`, as `status --json` says it,
/// once it is `want`: a choice made before the jobs' ranks publish their calls (MPI_Init is slow in a TCG guest)
/// is made on CPU time and is tried again when they do. Fails after 60 s with the last choice seen.
fn auto_choice(env: &Env, a: &Job, b: &Job, want: &str) -> serde_json::Value {
    auto_choice_where(env, a, b, want, |_| true)
}

/// [`auto_choice`], once the choice also satisfies `accept`: on a loaded machine the first choice may come before
/// the agent has seen a job's ranks, and is made again when it does.
fn auto_choice_where(
    env: &Env,
    a: &Job,
    b: &Job,
    want: &str,
    accept: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_mins(1);
    loop {
        let out = env.run(&["status", "--json"]);
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let found = status["groups"].as_array().into_iter().flatten().find(|g| {
            let jobs = g["jobs"].as_array().unwrap();
            g["trying"] == false && [&a.name, &b.name].iter().all(|n| jobs.contains(&(*n).as_str().into()))
        });
        if let Some(choice) = found.filter(|c| c["policy"] == want && accept(c)) {
            return choice.clone();
        }
        assert!(Instant::now() < deadline, "auto did not choose {want}: {found:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
#[ignore = "needs root"]
fn auto_gangs_a_spinning_mpi_pair_with_or_without_the_profiler_and_never_slices_a_pair_that_fits() {
    common::require_root();
    let _serial = serial();
    let Some(build) = built("pingpong") else { return };
    let env = Env::new();
    let agent = Agent::start(&env, &["--policy", "auto", "--slot", "100ms"]);
    // Two MPI jobs whose ranks poll without yielding and exchange messages without end, the profiler preloaded.
    let (mpirun, pingpong) = (build.join("bin/mpirun"), build.join("bin/pingpong"));
    let preload = format!("LD_PRELOAD={}", build.join("lib/liblockstep-pmpi.so").display());
    let spinning = |n: &str, preload: Option<&str>| {
        let mut command = vec![mpirun.to_str().unwrap(), "-n", "2", "env"];
        command.extend(preload);
        command.extend([pingpong.to_str().unwrap(), "--iterations", "1000000000", "--repeats", "1"]);
        Job::start_command(&env, &name(n), &[("LOCKSTEP_MPI_BUSY_POLL", "1")], &command)
    };
    let (a, b) = (spinning("auto-spin-a", Some(&preload)), spinning("auto-spin-b", Some(&preload)));
    let choice = auto_choice(&env, &a, &b, "gang");
    assert_eq!(choice["rates"].as_object().unwrap().len(), 2, "both candidates measured: {choice}");
    let samples = sample_both(&a, &b, Job::frozen, Duration::from_secs(1));
    assert!(samples.iter().all(|&(x, y)| !(x && y)), "both jobs frozen at once: {samples:?}");
    assert!(samples.iter().any(|s| s.0) && samples.iter().any(|s| s.1), "gang takes turns: {samples:?}");
    drop((a, b));
    // The same pair started as users start third-party MPI programs, without the profiler: no calls are counted,
    // and CPU time is the same under both policies; the time both ranks of a job ran at once is what shows gang's
    // gain, and every rate of the choice was read from it.
    let (a, b) = (spinning("auto-blind-a", None), spinning("auto-blind-b", None));
    let rates = |choice: &serde_json::Value| -> Vec<serde_json::Value> {
        choice["rates"]
            .as_object()
            .into_iter()
            .flat_map(|r| r.values())
            .flat_map(|r| r.as_array().cloned().unwrap_or_default())
            .collect()
    };
    // A verdict for gang read from co-scheduled time for both jobs. Not one made while a job was still only its
    // launcher (mpirun before it forks the ranks: one process, read by its CPU time; the trial starts again when
    // the ranks show), seen in the fresh-clone run of 2c5309b; nor `gang` kept against a first trial for cfs
    // made that way (the fresh-clone run of c393673).
    let by_together = |c: &serde_json::Value| {
        let doubt = c["why"].as_str().is_some_and(|w| w.contains("a first trial against gang"));
        let read = rates(c);
        !doubt && !read.is_empty() && read.iter().all(|r| r["together_s"].as_f64().is_some())
    };
    let choice = auto_choice_where(&env, &a, &b, "gang", by_together);
    let read = rates(&choice);
    assert!(
        read.len() == 4 && read.iter().all(|r| r["calls_s"].is_null() && r["together_s"].as_f64().is_some()),
        "every rate without calls, with co-scheduled time: {choice}"
    );
    drop((a, b));
    // Two jobs that never wait and fit the PUs (a busy loop each, no MPI): whatever auto chooses for them (gang and
    // cfs plan alike for jobs that fit), neither is frozen once both are measured.
    let lone_loop = ["sh", "-c", "while :; do :; done"];
    let (c, d) = (
        Job::start_with(&env, &name("auto-loop-c"), &[], &lone_loop),
        Job::start_with(&env, &name("auto-loop-d"), &[], &lone_loop),
    );
    let measured = |status: &serde_json::Value| {
        let jobs: Vec<&serde_json::Value> = status["jobs"].as_array().into_iter().flatten().collect();
        let wants = |n: &str| jobs.iter().any(|j| j["name"] == n && j["cpus_wanted"].is_f64());
        let chose =
            status["groups"].as_array().into_iter().flatten().any(|g| {
                g["trying"] == false && g["jobs"].as_array().is_some_and(|j| j.contains(&c.name.as_str().into()))
            });
        wants(&c.name) && wants(&d.name) && chose
    };
    let status =
        || serde_json::from_slice::<serde_json::Value>(&env.run(&["status", "--json"]).stdout).unwrap_or_default();
    wait_until("both loops measured and a choice made for them", WAIT, status, measured);
    // One snapshot at a time: while the agent's own status says both are measured, neither is frozen in it.
    let start = Instant::now();
    let mut seen = 0;
    while start.elapsed() < Duration::from_millis(500) {
        let status = status();
        if measured(&status) {
            seen += 1;
            let frozen: Vec<_> =
                status["jobs"].as_array().into_iter().flatten().filter(|j| j["frozen"] == true).collect();
            assert!(frozen.is_empty(), "a job that fits is frozen: {status}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(seen > 0, "the pair was not seen measured for 500 ms");
    let log = stopped_log(agent);
    assert!(log.contains("auto:") && log.contains("-> gang"), "{log}");
    assert!(!c.frozen() && !d.frozen(), "SIGTERM must thaw every job");
    let db = rusqlite::Connection::open(env.store()).unwrap();
    let chosen: i64 = db.query_row("SELECT count(*) FROM auto_choices WHERE trying = 0", [], |r| r.get(0)).unwrap();
    assert!(chosen >= 2, "both choices are in the store: {chosen} of them");
}

#[test]
#[ignore = "needs root"]
fn boost_alternates_weights_and_cfs_writes_nothing() {
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    let _agent = Agent::start(&env, &["--policy", "boost", "--slot", "200ms"]);
    let a = Job::start(&env, &name("boost-a"), &[]);
    let b = Job::start(&env, &name("boost-b"), &[]);
    let default = if a.knobs().weight.unwrap().ends_with("cpu.shares") { "1024" } else { "100" };
    let boosted = if default == "1024" { "102400" } else { "10000" };
    let samples = sample_both(&a, &b, Job::weight, Duration::from_secs(2));
    // The agent lowers one job before it raises the other: between the two writes neither is boosted, never both.
    assert!(samples.iter().all(|(x, y)| !(x == boosted && y == boosted)), "at most one boosted: {samples:?}");
    assert!(samples.iter().all(|(x, y)| [x, y].iter().all(|w| *w == default || *w == boosted)));
    let one = samples.iter().filter(|(x, y)| x != y).count();
    assert!(one * 2 > samples.len(), "mostly one boosted, not a moment between: {samples:?}");
    assert!(samples.windows(2).filter(|w| w[0] != w[1]).count() >= 6, "weights must alternate: {samples:?}");

    let set = env.run(&["policy", "set", "cfs"]);
    ok(&set);
    assert!(String::from_utf8_lossy(&set.stdout).ends_with(": policy cfs, slot 200ms\n"), "{set:?}");
    let quiet = env.run(&["-q", "policy", "set", "cfs"]);
    ok(&quiet);
    assert!(quiet.stdout.is_empty(), "-q: {quiet:?}");
    // A slot of a fraction of a millisecond is kept, and said, as given.
    let fine = env.run(&["policy", "set", "cfs", "--slot", "12.5ms"]);
    ok(&fine);
    assert!(String::from_utf8_lossy(&fine.stdout).ends_with(": policy cfs, slot 12.5ms\n"), "{fine:?}");
    let status: serde_json::Value = serde_json::from_slice(&env.run(&["status", "--json"]).stdout).unwrap();
    assert_eq!(status["slot_length"], serde_json::json!({"secs": 0, "nanos": 12_500_000}), "{status}");
    wait_until("weights restored", WAIT, || (a.weight(), b.weight()), |(x, y)| x == default && y == default);
    let db = rusqlite::Connection::open(env.store()).unwrap();
    let since = lockstep_store::now();
    // Decisions reach the store once a second.
    std::thread::sleep(Duration::from_millis(2200));
    assert_eq!((a.weight(), b.weight()), (default.to_string(), default.to_string()));
    let acted: i64 = db
        .query_row("SELECT count(*) FROM decisions WHERE time >= ?1 AND job IS NOT NULL", [since], |r| r.get(0))
        .unwrap();
    let slots: i64 = db
        .query_row("SELECT count(*) FROM decisions WHERE time >= ?1 AND action = 'slot'", [since], |r| r.get(0))
        .unwrap();
    assert_eq!(acted, 0, "cfs must not act on any job");
    assert!(slots >= 2, "slots are still logged under cfs");
}

#[test]
#[ignore = "needs root"]
fn sigkill_of_the_agent_thaws_and_restores_within_two_seconds() {
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    let agent = Agent::start(&env, &["--policy", "gang", "--slot", "500ms"]);
    let a = Job::start(&env, &name("kill-a"), &[]);
    let b = Job::start(&env, &name("kill-b"), &[]);
    one_frozen(&a, &b);
    let pids: Vec<i32> = a.pids().into_iter().chain(b.pids()).collect();
    drop(agent.stop(Signal::SIGKILL));
    let thawed = |&f: &(bool, bool)| f == (false, false);
    wait_until(
        "the watchdog to thaw the jobs after SIGKILL of the agent",
        RESTORE,
        || (a.frozen(), b.frozen()),
        thawed,
    );
    for pid in &pids {
        assert!(Path::new(&format!("/proc/{pid}")).exists(), "process {pid} lost");
    }
    // The next agent takes the jobs over from the store; kill it in a boosted slot too.
    let agent = Agent::start(&env, &["--policy", "boost", "--slot", "500ms"]);
    let default = if a.knobs().weight.unwrap().ends_with("cpu.shares") { "1024" } else { "100" };
    wait_until("one job boosted", WAIT, || (a.weight(), b.weight()), |(x, y)| x != default || y != default);
    drop(agent.stop(Signal::SIGKILL));
    let restored = |(x, y): &(String, String)| x == default && y == default;
    wait_until("the watchdog to restore the weights after SIGKILL", RESTORE, || (a.weight(), b.weight()), restored);
    // A restart finds nothing to repair.
    let agent = Agent::start(&env, &["--policy", "cfs"]);
    let log = stopped_log(agent);
    assert!(!log.contains("left changed by a previous agent"), "a restart after the watchdog must find nothing: {log}");
    let db = rusqlite::Connection::open(env.store()).unwrap();
    let left: i64 = db.query_row("SELECT count(*) FROM restore_journal", [], |r| r.get(0)).unwrap();
    assert_eq!(left, 0);
}

#[test]
#[ignore = "needs root"]
fn two_agents_switch_slots_in_step() {
    common::require_root();
    let _serial = serial();
    let (n1, n2) = (Env::new(), Env::new());
    let a1 = Agent::start(&n1, &["--policy", "gang", "--slot", "100ms", "--node", "node1"]);
    let a2 = Agent::start(&n2, &["--policy", "gang", "--slot", "100ms", "--node", "node2"]);
    // The slot clock is what is measured: jobs that sleep give each agent rows to switch, and load nobody.
    let jobs: Vec<Job> = [(&n1, "n1", "0"), (&n1, "n1", "1"), (&n2, "n2", "0"), (&n2, "n2", "1")]
        .iter()
        .map(|(env, node, row)| {
            Job::start_with(env, &name(&format!("two-{node}-r{row}")), &["--row", row], &["sleep", "600"])
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    drop(a1.stop(Signal::SIGTERM));
    drop(a2.stop(Signal::SIGTERM));
    let common = slot_gaps_ms(&n1.store(), &n2.store(), ..);
    assert!(common.len() >= 10, "expected ~20 common slots, got {}", common.len());
    assert_in_step("between the two agents", &common, 100.0);
    drop(jobs);
}

/// A job an earlier build took on under a name now reserved for Slurm's jobs (`slurm-N`) could be neither released
/// nor told apart from Slurm's job N: the agent releases it as it starts (its process goes back where it was, the
/// cgroup it made is removed), says so, and manages nothing under that name.
#[test]
#[ignore = "needs root"]
fn a_job_an_earlier_build_named_like_a_slurm_job_is_released_at_start() {
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    let agent = Agent::start(&env, &["--policy", "gang", "--slot", "100ms"]);
    let mut sleeper = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    let pid = sleeper.id().to_string();
    let before = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let job = name("legacy");
    ok(&env.run(&["adopt", "--job", &job, "--pid", &pid]));
    drop(agent.stop(Signal::SIGTERM));
    // What an earlier build kept of a job adopted by hand as `slurm-4242`.
    let db = rusqlite::Connection::open(env.store()).unwrap();
    assert_eq!(db.execute("UPDATE managed SET name = 'slurm-4242' WHERE name = ?1", [&job]).unwrap(), 1);
    drop(db);

    let agent = Agent::start(&env, &["--policy", "gang", "--slot", "100ms"]);
    let status: serde_json::Value = serde_json::from_slice(&env.run(&["status", "--json"]).stdout).unwrap();
    assert!(status["jobs"].as_array().unwrap().is_empty(), "{status}");
    assert_eq!(std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap(), before, "not moved back");
    assert!(job_dirs(&job).iter().all(|d| !d.exists()), "the cgroup the agent made is left");
    let log = common::stderr(&agent.stop(Signal::SIGTERM));
    assert!(log.contains("job slurm-4242, taken on by an earlier lockstep, is released"), "{log}");
    let db = rusqlite::Connection::open(env.store()).unwrap();
    let kept: i64 = db.query_row("SELECT count(*) FROM managed", [], |r| r.get(0)).unwrap();
    assert_eq!(kept, 0, "the store still holds the job");
    let _ = sleeper.kill();
    common::exit_within(&mut sleeper, common::STOP_LIMIT, "a sleeper, killed");
}

/// Python: its main thread bound to its first argument's PU, a second thread to its second's; it says "ready" once
/// both are bound.
const BOUND: &str = "import os, sys, threading, time\n\
        def second():\n    os.sched_setaffinity(0, {int(sys.argv[2])})\n    ready.set()\n    time.sleep(120)\n\
        ready = threading.Event()\nos.sched_setaffinity(0, {int(sys.argv[1])})\n\
        threading.Thread(target=second, daemon=True).start()\nready.wait()\nprint('ready', flush=True)\n\
        time.sleep(120)\n";

/// A process of two threads, each bound to a PU of its own: on release each thread is still bound as before, and
/// while the job was adopted too. On cgroup v2 the move into lockstep's cgroup (another cpuset, with the same PUs)
/// set every thread's affinity to every PU, and the move back kept it so: an MPI rank bound to its core lost its
/// binding for good. (On v1 the agent's cgroups hold no cpuset and a move changes no affinity: there the test
/// checks that nothing does.)
#[test]
#[ignore = "needs root"]
fn adoption_and_release_keep_each_threads_cpu_affinity() {
    common::require_root();
    let _serial = serial();
    let Some([first, second]) = two_pus("to bind two threads apart") else { return };
    let env = Env::new();
    let agent = Agent::start(&env, &["--policy", "gang", "--slot", "100ms"]);
    let mut child = std::process::Command::new("python3")
        .args(["-c", BOUND, &first.to_string(), &second.to_string()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
    let pid = child.id() as i32;
    let child = common::Reaped(child);
    assert_eq!(line.trim(), "ready");
    // The PUs of the main thread (its ID is the process's) and of the other one.
    let bound = || -> (String, Vec<String>) {
        let mut others = Vec::new();
        let mut main = String::new();
        for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
            let tid: i32 = task.file_name().to_string_lossy().parse().unwrap();
            let pus = lockstep_cgroup::procfs::cpus_allowed(tid).unwrap_or_default();
            if tid == pid {
                main = pus;
            } else {
                others.push(pus);
            }
        }
        (main, others)
    };
    let before = bound();
    assert_eq!(before, (first.to_string(), vec![second.to_string()]), "the threads as bound");
    let job = name("bound");
    ok(&env.run(&["adopt", "--job", &job, "--pid", &pid.to_string()]));
    assert_eq!(bound(), before, "each thread's PUs, adopted");
    let released = env.run(&["release", "--job", &job]);
    ok(&released);
    assert_eq!(bound(), before, "each thread's PUs, released");
    drop(child);
    stopped_log(agent);
}

#[test]
#[ignore = "needs root"]
fn adopted_pids_move_in_and_back_out() {
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    let agent = Agent::start(&env, &["--policy", "gang", "--slot", "100ms"]);
    let mut sleepers: Vec<Child> =
        (0..2).map(|_| std::process::Command::new("sleep").arg("60").spawn().unwrap()).collect();
    let pids: Vec<String> = sleepers.iter().map(|c| c.id().to_string()).collect();
    let before = std::fs::read_to_string(format!("/proc/{}/cgroup", pids[0])).unwrap();
    let job = name("adopt");
    // The PIDs as `stat -p` takes them, comma-separated; the success says how the agent took the job on.
    let listed = pids.join(",");
    let adopted = env.run(&["adopt", "--job", &job, "--row", "3", "--pid", &listed]);
    ok(&adopted);
    let said = String::from_utf8_lossy(&adopted.stdout).into_owned();
    assert!(said.starts_with(&format!("adopted job {job} (pids): row 3, PUs ")), "{said}");
    // `jobs` lists it under the names `status` uses, once the agent's writer has stored it (the writer runs apart
    // from the request, and a loaded machine delays it), and `run` cannot take its name (nothing recorded).
    let listed = wait_until(
        "jobs to list the adopted job",
        WAIT,
        || {
            let jobs = env.run(&["jobs", "--json"]);
            let jobs: serde_json::Value = serde_json::from_slice(&jobs.stdout).unwrap_or_default();
            let found = jobs.as_array().into_iter().flatten().find(|j| j["name"] == job.as_str());
            found.cloned().unwrap_or_default()
        },
        |j| !j.is_null(),
    );
    assert_eq!((&listed["state"], &listed["origin"]), (&"managed".into(), &"pids".into()), "{listed}");
    usage_error(&env.run(&["run", "--job", &job, "--place", "any", "--", "true"]), "in use by a job the agent manages");
    let all = env.run(&["jobs", "--all", "--json"]);
    let all: serde_json::Value = serde_json::from_slice(&all.stdout).unwrap();
    assert!(all.as_array().unwrap().iter().all(|j| j["origin"] != "run"), "a refused run was recorded: {all}");
    let status = env.run(&["status", "--json"]);
    ok(&status);
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let entry = &status["jobs"].as_array().unwrap().iter().find(|j| j["name"] == job.as_str()).unwrap().clone();
    assert_eq!(entry["row"], 3);
    assert_eq!(entry["origin"], "pids");
    let inside = std::fs::read_to_string(format!("/proc/{}/cgroup", pids[0])).unwrap();
    assert!(inside.contains(&format!("/lockstep/{job}")), "{inside}");
    // Same name again: refused, nothing changed.
    usage_error(&env.run(&["adopt", "--job", &job, "--pid", &pids[1]]), "already managed");
    let released = env.run(&["release", "--job", &job]);
    ok(&released);
    assert!(String::from_utf8_lossy(&released.stdout).starts_with(&format!("released job {job}")));
    assert_eq!(std::fs::read_to_string(format!("/proc/{}/cgroup", pids[0])).unwrap(), before);
    assert!(job_dirs(&job).iter().all(|d| !d.exists()), "the agent's cgroup must be removed on release");
    // Adopted processes that exit end their job: the agent drops it and removes its cgroup by itself.
    let again = name("adopt-exit");
    ok(&env.run(&["adopt", "--job", &again, "--pid", &pids[1]]));
    let _ = sleepers[1].kill();
    common::exit_within(&mut sleepers[1], common::STOP_LIMIT, "a sleeper, killed");
    let dirs = job_dirs(&again);
    wait_until(
        "the ended job's cgroup to go",
        WAIT,
        || dirs.iter().filter(|d| d.exists()).collect::<Vec<_>>(),
        Vec::is_empty,
    );
    let status = env.run(&["status", "--json"]);
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert!(status["jobs"].as_array().unwrap().is_empty(), "{status}");
    for c in &mut sleepers {
        let _ = c.kill();
        common::exit_within(c, common::STOP_LIMIT, "a sleeper, killed");
    }
    // The agent's log: one timestamped line per change of state.
    let log = common::stderr(&agent.stop(nix::sys::signal::Signal::SIGTERM));
    for needle in [
        format!("lockstep agent: job {job} taken on (pids, 1 cgroup(s)"),
        format!("lockstep agent: job {job} released"),
        format!("lockstep agent: job {again} taken on"),
        format!("lockstep agent: job {again} ended"),
    ] {
        let line = log.lines().find(|l| l.contains(&needle)).unwrap_or_else(|| panic!("no {needle:?} in: {log}"));
        let mut words = line.split(' ');
        let stamp = words.next().unwrap_or_default();
        assert!(stamp.len() == 24 && stamp.ends_with('Z') && stamp.as_bytes()[10] == b'T', "{line}");
        assert_eq!(words.next(), Some("INFO"), "the level after the time: {line}");
    }
}

/// Under systemd (stderr is the journal's stream that `JOURNAL_STREAM` names) every line of the agent starts with
/// its syslog priority instead of a time, and `LOCKSTEP_LOG` chooses which lines are written.
#[test]
#[ignore = "needs root"]
fn under_the_journal_lines_carry_their_priority_and_lockstep_log_filters_them() {
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    // As systemd sets it: DEVICE:INODE of the agent's stderr (the test's log file), in decimal.
    let script = "JOURNAL_STREAM=$(stat -L -c %d:%i /proc/self/fd/2) exec \"$0\" agent \"$@\"";
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", script, env!("CARGO_BIN_EXE_lockstep"), "--policy", "gang", "--slot", "200ms"]);
    cmd.env("LOCKSTEP_STORE", env.store()).env("LOCKSTEP_SOCKET", env.socket());
    cmd.env("LOCKSTEP_LOG", "warn,lockstepd::setup=info");
    let agent = Agent::spawn(&env, cmd);
    let job = name("journal");
    ok(&env.run(&["run", "--job", &job, "--place", "any", "--", "true"]));
    let log = stopped_log(agent);
    let lines: Vec<&str> = log.lines().collect();
    assert!(lines.iter().any(|l| l.starts_with("<6>lockstep agent: node ")), "the start, at info: {log}");
    assert!(lines.contains(&"<6>lockstep agent: stopped; every job restored"), "the stop, at info: {log}");
    assert!(lines.iter().all(|l| l.starts_with('<')), "a line without its priority: {log}");
    // The job's changes are info from another module of the agent, which the filter leaves out.
    let taken = format!("job {job} taken on");
    assert!(!log.contains(&taken), "LOCKSTEP_LOG=warn,lockstepd::setup=info wrote {taken:?}: {log}");
}

#[test]
#[ignore = "needs root"]
fn bad_input_is_one_line_exit_2_and_changes_nothing() {
    common::require_root();
    let _serial = serial();
    common::lockstepd().unwrap();
    let env = Env::new();
    usage_error(&env.run(&["agent", "--slot", "5ms"]), "bad slot \"5ms\"");
    usage_error(&env.run(&["agent", "--policy", "round-robin"]), "unknown co-scheduling policy");
    let config = env.dir.path().join("bad.toml");
    std::fs::write(&config, "policy = [\n").unwrap();
    usage_error(&env.run(&["agent", "--config", config.to_str().unwrap()]), "bad config");
    usage_error(&env.run(&["status"]), "no agent at");

    let _agent = Agent::start(&env, &["--policy", "boost", "--slot", "1s"]);
    let before = env.run(&["status", "--json"]);
    usage_error(&env.run(&["policy", "set", "round-robin"]), "unknown co-scheduling policy");
    usage_error(&env.run(&["policy", "set", "gang", "--slot", "5ms"]), "bad --slot \"5ms\"");
    usage_error(&env.run(&["adopt", "--job", "x", "--cgroup", "/no/such/cgroup"]), "does not exist");
    usage_error(&env.run(&["adopt", "--job", "x", "--pid", "999999999"]), "PID 999999999 does not exist");
    usage_error(&env.run(&["adopt", "--job", "bad/name", "--pid", "1"]), "invalid job name");
    usage_error(&env.run(&["release", "--job", "nobody"]), "no job \"nobody\"");
    // A row out of range would leave the agent no rows to cycle through.
    usage_error(&env.run(&["adopt", "--job", "x", "--pid", "1", "--row", "4294967295"]), "--row");
    usage_error(&env.run(&["run", "--job", "x", "--row", "4294967295", "--", "true"]), "--row");
    usage_error(&env.run(&["agent"]), "already running");
    let after = env.run(&["status", "--json"]);
    let strip = |o: &Output| {
        let mut v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        for k in ["slot", "active_row", "last_apply_us", "lateness"] {
            v[k] = serde_json::Value::Null;
        }
        v
    };
    assert_eq!(strip(&before), strip(&after), "bad input changed the agent");
    assert!(strip(&after)["jobs"].as_array().unwrap().is_empty());
    assert_eq!(strip(&after)["policy"], "boost");
}

/// SIGHUP reads the configuration again (as `systemctl reload` does): a new policy and slot take effect at once;
/// a file that does not read is said in the log and the running configuration kept; a change that takes a restart
/// (the node name) is said so. The agent serves on, and SIGTERM still stops it, exit 0.
#[test]
#[ignore = "needs root"]
fn sighup_reloads_the_policy_and_keeps_the_running_config_when_the_file_is_bad() {
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    let config = env.dir.path().join("agent.toml");
    std::fs::write(&config, "policy = \"cfs\"\nnode = \"r1\"\n").unwrap();
    let agent = Agent::start(&env, &["--config", config.to_str().unwrap()]);
    let status = || serde_json::from_slice::<serde_json::Value>(&env.run(&["status", "--json"]).stdout).unwrap();
    assert_eq!(status()["policy"], "cfs");

    std::fs::write(&config, "policy = \"gang\"\nslot = \"300ms\"\nnode = \"r2\"\n").unwrap();
    kill(agent.pid(), Signal::SIGHUP).unwrap();
    let gang = |s: &serde_json::Value| {
        s["policy"] == "gang" && s["slot_length"] == serde_json::json!({"secs": 0, "nanos": 300_000_000})
    };
    let seen = wait_until("the reloaded policy", WAIT, status, gang);
    assert_eq!(seen["node"], "r1", "the node name changes only at a restart");

    std::fs::write(&config, "policy = [\n").unwrap();
    kill(agent.pid(), Signal::SIGHUP).unwrap();
    let said = || agent.log_text();
    wait_until("the log to say the file was not read", WAIT, said, |l| l.contains("configuration not read again"));
    assert!(gang(&status()), "a bad file changed the running configuration");

    let out = agent.stop(Signal::SIGTERM);
    let log = common::stderr(&out);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("node changed, which takes a restart"), "{log}");
    assert!(log.contains("bad config") || log.contains("expected"), "the bad file's error, in one line: {log}");
}

/// One agent per store: a second agent on the same store, even on another socket, is refused in one line naming
/// the first's PID, before it makes its socket; the first serves on. Once the first has stopped, the store is free.
#[test]
#[ignore = "needs root"]
fn a_second_agent_on_the_same_store_is_refused_naming_the_first() {
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    let first = Agent::start(&env, &["--policy", "boost", "--slot", "1s"]);
    let other = env.dir.path().join("other.sock");
    // The first agent's own store files (its -wal and -shm come and go as it writes, and the hidden file it makes
    // the store in is there until the store is, after its socket answers) are not the refused one's.
    let names = || {
        let mut names: Vec<String> = std::fs::read_dir(env.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with("lockstep.db") && !n.starts_with(".lockstep.db."))
            .collect();
        names.sort();
        names
    };
    let before = names();
    let out = env.run(&["--socket", other.to_str().unwrap(), "agent"]);
    // The holder is named by PID where /proc/locks lists the store's device as stat does (not on a guest's 9p
    // root, where it says "another agent"); a PID named is the first's.
    usage_error(&out, "in use by ");
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        said.contains(&format!("in use by the agent of PID {}", first.pid()))
            || said.contains("in use by another agent"),
        "{said}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains(&env.store().display().to_string()));
    assert!(!other.exists(), "the refused agent made its socket");
    assert_eq!(names(), before, "the refused agent left a file");
    ok(&env.run(&["status"]));
    let log = stopped_log(first);
    assert!(log.contains("every job restored"), "{log}");
    // The first agent's lock ended with it.
    let second = Agent::start(&env, &["--policy", "boost", "--slot", "1s"]);
    ok(&env.run(&["status"]));
    drop(second);
}

/// An agent refused at its start (the store is another agent's) whose stderr is a pipe nobody reads, full already
/// (a journald that does not drain the agent's stream): it exits with its status within the log's wait at exit,
/// its last line lost, where it waited on stderr for that line for as long as nobody read it.
#[test]
#[ignore = "needs root"]
fn a_refused_agent_whose_stderr_is_full_exits_all_the_same() {
    use std::io::Write as _;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    let first = Agent::start(&env, &["--policy", "boost", "--slot", "1s"]);
    let fifo = env.dir.path().join("refused-stderr");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR).unwrap();
    let nonblocking = nix::fcntl::OFlag::O_NONBLOCK.bits();
    let reader = std::fs::OpenOptions::new().read(true).custom_flags(nonblocking).open(&fifo).unwrap();
    nix::fcntl::fcntl(reader.as_raw_fd(), nix::fcntl::FcntlArg::F_SETPIPE_SZ(4096)).unwrap();
    let mut filler = std::fs::OpenOptions::new().write(true).custom_flags(nonblocking).open(&fifo).unwrap();
    let mut taken = 0;
    while let Ok(n) = filler.write(&[b'.'; 512]) {
        taken += n;
    }
    assert!(taken >= 4096, "the pipe took {taken} bytes");
    let stderr = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    let other = env.dir.path().join("other.sock");
    let mut second = env
        .cmd()
        .args(["--socket", other.to_str().unwrap(), "agent"])
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let status = common::exit_within(&mut second, common::STOP_LIMIT, "an agent refused with its stderr full");
    assert_eq!(status.code(), Some(2), "the refusal's status");
    drop((filler, reader));
    let log = stopped_log(first);
    assert!(log.contains("every job restored"), "{log}");
}

/// `ranks_in` values of a spec (quoted): bare processes, and podman and Charliecloud containers where they are
/// installed (scripts/deps.sh installs both).
fn ranks_in_everywhere() -> Vec<&'static str> {
    let mut ranks_in = vec!["\"process\""];
    if Podman::new().is_some() {
        ranks_in.push("\"container\"");
    }
    if std::process::Command::new("ch-run").arg("--version").env("USER", "root").output().is_ok() {
        ranks_in.push("\"charliecloud\"");
    }
    ranks_in
}

#[test]
#[ignore = "needs root"]
fn an_experiment_runs_end_to_end_and_reports() {
    common::require_root();
    let _serial = serial();
    let Some(build) = built("lu") else { return };
    let bin = build.join("bin");
    let env = Env::new();
    let spec = env.dir.path().join("spec.toml");
    let ranks_in = ranks_in_everywhere();
    let kinds = ranks_in.len() as i64;
    let ranks_in = format!("[{}]", ranks_in.join(", "));
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/specs/mpl-small.toml");
    let text = std::fs::read_to_string(fixture).unwrap().replace("mpl = [1, 2]", r#"mixes = [["lu", "ep"]]"#);
    std::fs::write(&spec, format!("ranks_in = {ranks_in}\n{text}")).unwrap();
    let reports = env.dir.path().join("reports");
    // The experiment needs the kernels beside the binary: run the installed copy.
    let out = std::process::Command::new(bin.join("lockstep"))
        .env("LOCKSTEP_STORE", env.store())
        .args(["experiment", "run", spec.to_str().unwrap(), "--reports", reports.to_str().unwrap()])
        .output()
        .unwrap();
    ok(&out);
    let dir = reports.join("it-experiment");
    for f in ["index.html", "summary.md", "lu-slowdown-yield.svg", "lu-comm-yield.svg"] {
        assert!(dir.join(f).exists(), "{f} missing");
    }
    let db = rusqlite::Connection::open(env.store()).unwrap();
    let (runs, verified, with_comm): (i64, i64, i64) = db
        .query_row(
            "SELECT count(*), sum(verified), count(comm_ratio) FROM experiment_runs WHERE experiment = 'it-experiment'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    // Dedicated lu and ep, then lu+ep under cfs and gang: 2 + 2 + 2 jobs, per kind of rank.
    let n = 6 * kinds;
    if (runs, verified, with_comm) != (n, n, n) {
        let mut rows = db
            .prepare("SELECT job, policy, placement, exit_status, verified, comm_ratio FROM experiment_runs")
            .unwrap();
        let rows: Vec<String> = rows
            .query_map([], |r| {
                Ok(format!(
                    "{} {} {} exit {:?} verified {} comm {:?}",
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Option<i64>>(3)?,
                    r.get::<_, bool>(4)?,
                    r.get::<_, Option<f64>>(5)?
                ))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let work = std::fs::read_dir(env.dir.path()).unwrap().map(|e| e.unwrap().path()).collect::<Vec<_>>();
        panic!(
            "{runs} runs, {verified} verified, {with_comm} with comm shares, {n} expected:\n{}\n{work:?}\n{}",
            rows.join("\n"),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(summary.contains("| comm share | together | verified |"), "no co-scheduled column: {summary}");
    for kind in ["container", "charliecloud"] {
        assert_eq!(ranks_in.contains(kind), summary.contains(&format!("yield+{kind}")), "{kind}: {summary}");
    }
    let again = env.run(&["experiment", "report", "it-experiment", "--reports", reports.to_str().unwrap()]);
    ok(&again);
    let bad = env.dir.path().join("bad.toml");
    std::fs::write(&bad, "name = \"x\"\n[[policies]]\nname = \"fifo\"\n").unwrap();
    usage_error(&env.run(&["experiment", "run", bad.to_str().unwrap()]), "bad experiment spec");
}

/// The processes below `pid` (its children, theirs, and so on), now.
fn descendants(pid: i32) -> Vec<i32> {
    let all: Vec<(i32, i32)> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|p| Some((p, lockstep_cgroup::procfs::parent(p)?)))
        .collect();
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(all.iter().filter(|(_, pp)| *pp == parent).map(|(p, _)| *p));
        i += 1;
    }
    found.split_off(1)
}

/// `lockstep experiment run` stopped by SIGTERM while a job runs: it takes its private agent and the job down and
/// exits 143; every process it started is gone, and the agent's socket with the agent.
#[test]
#[ignore = "needs root"]
fn a_stopped_experiment_takes_down_what_it_started() {
    stop_an_experiment(false);
}

/// The same with a launcher that does not end on SIGTERM (the ranks' parent, stopped with SIGSTOP before it comes):
/// it holds `lockstep run`, which waits for it, as an `mpiexec` that hung on SIGTERM did once in the cgroup v2
/// guest (its main thread in a futex wait, its ranks ended). Past the grace what the job started is killed, so
/// that `lockstep run` removes the job's cgroup and ends; nothing is left.
#[test]
#[ignore = "needs root"]
fn a_stopped_experiment_takes_down_a_job_whose_launcher_does_not_end_on_sigterm() {
    stop_an_experiment(true);
}

/// Runs an experiment of one MPI job, stops it with SIGTERM while the job runs (its launcher stopped first if
/// `hold`), and checks that it exits 143 having taken down everything it started.
fn stop_an_experiment(hold: bool) {
    common::require_root();
    let _serial = serial();
    let Some(build) = built("ep") else { return };
    let env = Env::new();
    let spec = env.dir.path().join("spec.toml");
    // A job of a minute or more: it is running when the signal comes.
    std::fs::write(
        &spec,
        "name = \"it-stopped\"\ndescription = \"stopped\"\nranks = 2\nmpl = [1]\nunloaded = true\n[workloads.ep]\n\
         command = [\"ep\", \"--class\", \"C\"]\n[[policies]]\nname = \"cfs\"\n",
    )
    .unwrap();
    let reports = env.dir.path().join("reports");
    let mut child = std::process::Command::new(build.join("bin/lockstep"))
        .env("LOCKSTEP_STORE", env.store())
        .args(["experiment", "run", spec.to_str().unwrap(), "--reports", reports.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let me = child.id() as i32;
    // The agent, `lockstep run`, mpirun and the ranks.
    let comms = || -> Vec<String> {
        descendants(me)
            .iter()
            .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/comm")).ok())
            .map(|c| c.trim().to_string())
            .collect()
    };
    wait_until("the job's ranks", WAIT, comms, |c| c.iter().any(|c| c == "ep"));
    let below = descendants(me);
    // The job's cgroups, in every hierarchy (v1 `CONTROLLER/lockstep/JOB`, v2 `lockstep/JOB`): there while it runs.
    let job_cgroups = || -> Vec<PathBuf> {
        let cgroups = Path::new("/sys/fs/cgroup");
        let roots = std::fs::read_dir(cgroups).into_iter().flatten().flatten().map(|e| e.path());
        roots
            .chain([cgroups.into()])
            .flat_map(|root| std::fs::read_dir(root.join("lockstep")).into_iter().flatten().flatten())
            .map(|e| e.path())
            .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("it-stopped")))
            .collect()
    };
    assert!(!job_cgroups().is_empty(), "the job's cgroups are not where this test looks for them");
    if hold {
        // The ranks' parent: Open MPI's mpiexec (MPICH's, its hydra proxy).
        let comm = |p: &i32| std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
        let rank = *below.iter().find(|p| comm(p).trim() == "ep").expect("a rank");
        let launcher = lockstep_cgroup::procfs::parent(rank).expect("the rank's parent");
        kill(Pid::from_raw(launcher), Signal::SIGSTOP).unwrap();
    }
    kill(Pid::from_raw(me), Signal::SIGTERM).unwrap();
    let status = common::exit_within(&mut child, common::STOP_LIMIT, "lockstep run, after SIGTERM");
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{err}");
    assert!(err.contains("taking down what the experiment started"), "{err}");
    // Each process left, with what it is doing (name, state, wait channel, stack), so that a failure names it. The
    // bound is a stop's (STOP_LIMIT), not WAIT's 20 s: the private agent has a grace of 30 s to restore and exit,
    // and in the cgroup v2 guest (TCG) beside a loaded host one process was still there after 20 s.
    let left = || below.iter().copied().filter(|&p| running(p)).map(common::stuck).collect::<Vec<_>>();
    wait_until("every process the experiment started to be gone", common::STOP_LIMIT, left, Vec::is_empty);
    assert!(!reports.join("it-stopped/work/agent.sock").exists(), "the agent removes its socket as it stops");
    // `lockstep run` removed them before it ended.
    let left = job_cgroups();
    assert!(left.is_empty(), "the job's cgroups were left: {left:?}");
}

/// The placement experiment (seed 000) on this one-kind machine: emulated kinds, every rank seated and the E ranks
/// limited, bare and in every container runtime installed; nothing left behind.
#[test]
#[ignore = "needs root"]
fn a_placement_experiment_emulates_kinds_in_every_runtime() {
    common::require_root();
    let _serial = serial();
    let Some(build) = built("corebench") else { return };
    let env = Env::new();
    let ranks_in = ranks_in_everywhere();
    let kinds = ranks_in.len() as i64;
    let topology = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/topology/nvidia-gb10.xml");
    let spec = env.dir.path().join("placement.toml");
    std::fs::write(
        &spec,
        format!(
            "kind = \"placement\"\nname = \"it-placement\"\npolicies = [\"p-only\", \"mixed\", \"e-only\"]\n\
             ranks_in = [{}]\n[workloads.cg]\ncommand = [\"cg\", \"--class\", \"S\"]\n[workloads.corebench]\n\
             command = [\"corebench\", \"--mode\", \"single\", \"--seconds\", \"0.2\"]\n\
             [emulate]\ntopology = {:?}\ne_speed = 0.5\n",
            ranks_in.join(", "),
            topology.canonicalize().unwrap()
        ),
    )
    .unwrap();
    let reports = env.dir.path().join("reports");
    let out = std::process::Command::new(build.join("bin/lockstep"))
        .env("LOCKSTEP_STORE", env.store())
        .args(["experiment", "run", spec.to_str().unwrap(), "--reports", reports.to_str().unwrap()])
        .output()
        .unwrap();
    ok(&out);
    let db = rusqlite::Connection::open(env.store()).unwrap();
    let mut stmt = db
        .prepare("SELECT workload, placement, policy, verified, score, hybrid FROM experiment_runs WHERE experiment = 'it-placement'")
        .unwrap();
    let rows: Vec<(String, String, String, bool, Option<f64>, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len() as i64, 2 * 3 * kinds, "{rows:?}");
    assert!(rows.iter().all(|r| r.3 && r.5.starts_with("emulated: nvidia-gb10.xml")), "{rows:?}");
    // Every corebench copy reported its score. How the scores compare (e-only below p-only) is a speed, which
    // the experiment's report shows; a loaded machine may blur it, so it is not asserted here.
    assert!(rows.iter().filter(|r| r.0 == "corebench").all(|r| r.4.is_some_and(|s| s > 0.0)), "{rows:?}");
    let summary = std::fs::read_to_string(reports.join("it-placement/summary.md")).unwrap();
    assert!(summary.contains("| emulated hybrid | process | mixed |"), "{summary}");
    assert!(summary.contains("What emulation cannot show"), "{summary}");
    let leftovers: Vec<_> = ["cpu", "cpu,cpuacct", "freezer", "cpuset", "unified"]
        .iter()
        .filter_map(|h| std::fs::read_dir(Path::new("/sys/fs/cgroup").join(h).join("lockstep")).ok())
        .flat_map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.starts_with("it-placement"))
        .collect();
    assert!(leftovers.is_empty(), "cgroups left: {leftovers:?}");
}

/// podman on this kind of machine: runc, rlimits the sandbox allows (no CAP_SYS_RESOURCE), cgroupfs manager,
/// and a busybox root file system made on the spot (no registry).
struct Podman {
    dir: lockstep_scratch::TempDir,
    names: Vec<String>,
}

impl Podman {
    fn new() -> Option<Self> {
        let busybox = Path::new("/bin/busybox");
        if std::process::Command::new("podman").arg("--version").output().is_err() || !busybox.exists() {
            return None;
        }
        let dir = lockstep_scratch::tempdir().unwrap();
        let bin = dir.path().join("rootfs/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::copy(busybox, bin.join("busybox")).unwrap();
        std::os::unix::fs::symlink("busybox", bin.join("sh")).unwrap();
        let limit = std::fs::read_to_string("/proc/self/limits")
            .unwrap()
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .and_then(|l| l.split_whitespace().nth(4).map(str::to_string))
            .unwrap();
        std::fs::write(
            dir.path().join("containers.conf"),
            format!("[containers]\ndefault_ulimits = [\"nofile={limit}:{limit}\", \"nproc=4096:4096\"]\n"),
        )
        .unwrap();
        Some(Self { dir, names: Vec::new() })
    }

    fn podman(&self) -> std::process::Command {
        let mut c = std::process::Command::new("podman");
        c.env("CONTAINERS_CONF", self.dir.path().join("containers.conf"));
        c.args(["--cgroup-manager", "cgroupfs", "--runtime", "runc"]);
        c
    }

    /// Starts a busy-looping container named `name`.
    fn spin(&mut self, name: &str) {
        let rootfs = self.dir.path().join("rootfs");
        let out = self
            .podman()
            .args(["run", "-d", "--name", name, "--network", "host", "--rootfs"])
            .arg(&rootfs)
            .args(["sh", "-c", &spin_every_pu()])
            .output()
            .unwrap();
        ok(&out);
        self.names.push(name.to_string());
    }

    /// The freezer file of a container's cgroup.
    fn freezer(&self, name: &str) -> PathBuf {
        let out = self.podman().args(["inspect", "--format", "{{.State.Pid}}", name]).output().unwrap();
        let pid = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        let path = cgroups.lines().find_map(|l| l.split_once(":freezer:").map(|x| x.1.to_string())).unwrap();
        Knobs::find(&[Path::new("/sys/fs/cgroup/freezer").join(path.trim_start_matches('/'))]).freeze.unwrap()
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = self.podman().args(["rm", "-f", "-t", "0", n]).output();
        }
    }
}

/// Starts `ch-run IMAGE -- sleep 60` over a skeleton image in `dir` (the host's /usr and /etc bound in) and
/// returns it once ch-run runs the command inside (its PID is the container's: ch-run execs).
fn charliecloud(dir: &Path) -> Child {
    let image = dir.join("image");
    for d in ["usr", "etc", "tmp", "proc", "sys", "dev"] {
        std::fs::create_dir_all(image.join(d)).unwrap();
    }
    for d in ["bin", "lib", "lib64", "sbin"] {
        let _ = std::os::unix::fs::symlink(format!("usr/{d}"), image.join(d));
    }
    // ch-run binds the host's passwd and group (and hosts, resolv.conf) onto files that must exist.
    for f in ["passwd", "group", "hosts", "resolv.conf"] {
        std::fs::write(image.join("etc").join(f), b"").unwrap();
    }
    let child = std::process::Command::new("ch-run")
        .args(["-b", "/usr:/usr", "-b", "/etc:/etc"])
        .arg(&image)
        .args(["--", "sleep", "60"])
        .env("USER", "root")
        .spawn()
        .unwrap();
    let environ = format!("/proc/{}/environ", child.id());
    let started = || {
        let environ = std::fs::read(&environ).map_err(|e| e.to_string())?;
        Ok::<_, String>(environ.split(|&b| b == 0).any(|v| v.starts_with(b"CH_RUNNING=")))
    };
    let _started = wait_until("ch-run to start its command", WAIT, started, |s| s == &Ok(true));
    child
}

#[test]
#[ignore = "needs root"]
fn charliecloud_containers_are_adopted_by_pid_and_go_back_on_release() {
    common::require_root();
    let _serial = serial();
    if std::process::Command::new("ch-run").arg("--version").env("USER", "root").output().is_err() {
        common::missing("Charliecloud's ch-run is not installed (scripts/deps.sh installs charliecloud-runtime)");
        return;
    }
    let env = Env::new();
    let _agent = Agent::start(&env, &["--policy", "gang", "--slot", "100ms"]);
    let mut ranks: Vec<Child> = (0..2).map(|_| charliecloud(env.dir.path())).collect();
    let ids: Vec<String> = ranks.iter().map(|c| format!("charliecloud:{}", c.id())).collect();
    let before = std::fs::read_to_string(format!("/proc/{}/cgroup", ranks[0].id())).unwrap();
    let job = name("ch");
    ok(&env.run(&["adopt", "--job", &job, "--container", &ids[0], &ids[1]]));
    let status = env.run(&["status", "--json"]);
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let entry = status["jobs"].as_array().unwrap().iter().find(|j| j["name"] == job.as_str()).unwrap().clone();
    assert_eq!(entry["origin"], "pids", "{entry}");
    for rank in &ranks {
        let inside = std::fs::read_to_string(format!("/proc/{}/cgroup", rank.id())).unwrap();
        assert!(inside.contains(&format!("/lockstep/{job}")), "{inside}");
    }
    ok(&env.run(&["release", "--job", &job]));
    assert_eq!(std::fs::read_to_string(format!("/proc/{}/cgroup", ranks[0].id())).unwrap(), before);
    // A process outside Charliecloud, a malformed PID, and a mix of runtimes are refused, changing nothing.
    let mut plain = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    let outside = format!("charliecloud:{}", plain.id());
    usage_error(&env.run(&["adopt", "--job", &job, "--container", &outside]), "not in a Charliecloud container");
    usage_error(&env.run(&["adopt", "--job", &job, "--container", "charliecloud:x1"]), "expected charliecloud:PID");
    usage_error(&env.run(&["adopt", "--job", &job, "--container", &ids[0], "some-pod"]), "not both");
    assert_eq!(std::fs::read_to_string(format!("/proc/{}/cgroup", ranks[0].id())).unwrap(), before);
    for c in ranks.iter_mut().chain(std::iter::once(&mut plain)) {
        let _ = c.kill();
        common::exit_within(c, common::STOP_LIMIT, "a sleeper, killed");
    }
}

#[test]
#[ignore = "needs root"]
fn containers_are_one_job_and_take_turns_under_gang() {
    common::require_root();
    let _serial = serial();
    let Some(mut podman) = Podman::new() else {
        common::missing("podman or busybox missing (scripts/deps.sh installs them)");
        return;
    };
    let env = Env::new();
    let _agent = Agent::start(&env, &["--policy", "gang", "--slot", "200ms"]);
    let (a1, a2, b) = (name("ctr-a1"), name("ctr-a2"), name("ctr-b"));
    for n in [&a1, &a2, &b] {
        podman.spin(n);
    }
    let (job_a, job_b) = (name("ctr-job-a"), name("ctr-job-b"));
    ok(&env.run(&["adopt", "--job", &job_a, "--row", "0", "--container", &a1, &a2]));
    ok(&env.run(&["adopt", "--job", &job_b, "--row", "1", "--container", &b]));
    let (fa1, fa2, fb) = (podman.freezer(&a1), podman.freezer(&a2), podman.freezer(&b));
    let frozen = |f: &Path| is_frozen(f).unwrap();
    // New jobs run together until their demand is measured (or for a second while it cannot be): sample once gang
    // slices them.
    wait_until("one job frozen", WAIT, || (frozen(&fa1), frozen(&fb)), |&(x, y)| x || y);
    let mut samples = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        let (x1, x2, y) = (frozen(&fa1), frozen(&fa2), frozen(&fb));
        if frozen(&fa1) == x1 {
            samples.push((x1, x2, y));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // The two containers of job a move together (allowing one sample at a switch), never both jobs frozen.
    let apart = samples.iter().filter(|s| s.0 != s.1).count();
    assert!(apart <= 3, "containers of one job out of step: {samples:?}");
    assert!(samples.iter().all(|s| !(s.0 && s.1 && s.2)), "all frozen at once: {samples:?}");
    assert!(samples.windows(2).filter(|w| w[0].2 != w[1].2).count() >= 5, "job b must take turns: {samples:?}");
    ok(&env.run(&["release", "--job", &job_a]));
    ok(&env.run(&["release", "--job", &job_b]));
    assert!(!frozen(&fa1) && !frozen(&fa2) && !frozen(&fb), "release must thaw the containers");
    usage_error(&env.run(&["adopt", "--job", "x", "--container", "no-such-container"]), "not running under podman");
}

/// A hierarchy's root is mode 0555: an agent without CAP_DAC_OVERRIDE (as its unit runs it) cannot make its
/// parent cgroup there, and says how to; `lockstepd --cgroup-parents`, as root, makes each missing one (and says
/// which), then the agent adopts.
#[test]
#[ignore = "needs root"]
fn an_agent_without_dac_override_adopts_once_its_parent_cgroups_are_made() {
    common::require_root();
    let _serial = serial();
    let daemon = common::lockstepd().unwrap();
    // The parents no job holds now can go; one that holds a job of another test stays (and is not checked).
    let parents = lockstep_cgroup::detect().unwrap().parents();
    let removed: Vec<PathBuf> = parents.iter().filter(|p| std::fs::remove_dir(p).is_ok()).cloned().collect();
    let env = Env::new();
    let caps = common::agent_caps();
    let mut cmd = std::process::Command::new("setpriv");
    cmd.args(["--bounding-set", &format!("-all,+{}", caps.replace(',', ",+")), "--"]).arg(&daemon);
    cmd.env("LOCKSTEP_STORE", env.store()).env("LOCKSTEP_SOCKET", env.socket()).args(["--policy", "cfs"]);
    let _agent = Agent::spawn(&env, cmd);
    let mut sleeper = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    let job = name("parents");
    let adopt = || env.run(&["adopt", "--job", &job, "--pid", &sleeper.id().to_string()]);
    // An adoption makes its cgroup below the freezer's parent on v1, below the one parent on v2.
    let needed = ["/sys/fs/cgroup/freezer/lockstep", "/sys/fs/cgroup/lockstep"].map(PathBuf::from);
    if removed.iter().any(|p| needed.contains(p)) {
        usage_error(&adopt(), "lockstepd --cgroup-parents");
    } else {
        common::missing("an empty parent cgroup an adoption needs (each holds another job's cgroup)");
    }
    let made = std::process::Command::new(&daemon).arg("--cgroup-parents").output().unwrap();
    ok(&made);
    // One line per parent made: exactly those removed.
    let said = String::from_utf8_lossy(&made.stdout).into_owned();
    let made: Vec<PathBuf> = said.lines().filter_map(|l| l.strip_prefix("made cgroup ")).map(PathBuf::from).collect();
    assert_eq!(made, removed, "{said}");
    assert!(parents.iter().all(|p| p.is_dir()), "{parents:?}");
    ok(&adopt());
    let again = std::process::Command::new(&daemon).arg("--cgroup-parents").output().unwrap();
    ok(&again);
    assert!(again.stdout.is_empty(), "nothing to make the second time: {}", String::from_utf8_lossy(&again.stdout));
    ok(&env.run(&["release", "--job", &job]));
    let _ = sleeper.kill();
    common::exit_within(&mut sleeper, common::STOP_LIMIT, "the sleeper, killed");
}

/// `lockstep ARGS` as user nobody (65534) on `env`'s agent.
fn as_nobody(env: &Env, args: &[&str]) -> Output {
    common::as_nobody(env!("CARGO_BIN_EXE_lockstep")).arg("--socket").arg(env.socket()).args(args).output().unwrap()
}

#[test]
#[ignore = "needs root"]
fn users_see_only_their_own_jobs_and_change_nothing() {
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    // Other users must reach the socket's directory (the socket itself is open to all).
    std::fs::set_permissions(env.dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let _agent = Agent::start(&env, &["--policy", "cfs"]);
    let mut theirs = common::as_nobody("sleep").arg("60").spawn().unwrap();
    let mut roots = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    // A job's owner is its processes' user when adopted: wait until setpriv has become nobody's sleep.
    let uid = |pid: u32| {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
    };
    wait_until("nobody's sleeper running as nobody", WAIT, || uid(theirs.id()), |u| u.as_deref() == Some("65534"));
    let (mine, other) = (name("nobody"), name("root"));
    ok(&env.run(&["adopt", "--job", &mine, "--pid", &theirs.id().to_string()]));
    ok(&env.run(&["adopt", "--job", &other, "--pid", &roots.id().to_string()]));
    let names = |out: &Output| -> Vec<String> {
        ok(out);
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        status["jobs"].as_array().unwrap().iter().map(|j| j["name"].as_str().unwrap().to_string()).collect()
    };
    let theirs_seen = as_nobody(&env, &["status", "--json"]);
    assert_eq!(names(&theirs_seen), std::slice::from_ref(&mine));
    let seen: serde_json::Value = serde_json::from_slice(&theirs_seen.stdout).unwrap();
    assert_eq!(seen["others"], 1, "root's job is counted, not shown");
    let text = as_nobody(&env, &["status"]);
    let shown = String::from_utf8_lossy(&text.stdout);
    assert!(!shown.contains(&other) && shown.contains("1 job(s) of other users not shown"), "{shown}");
    let mut all = names(&env.run(&["status", "--json"]));
    all.sort();
    let mut expected = vec![mine.clone(), other.clone()];
    expected.sort();
    assert_eq!(all, expected, "root sees every job");
    for args in [vec!["policy", "set", "gang"], vec!["release", "--job", &mine]] {
        let out = as_nobody(&env, &args);
        assert!(!out.status.success(), "{args:?} by nobody must be refused");
        assert!(String::from_utf8_lossy(&out.stderr).contains("permission denied"), "{}", common::stderr(&out));
    }
    // Every job's progress totals are root's to read: nobody is refused at the door, even for their own job.
    let ask = |as_nobody: bool| -> String {
        let mut c = if as_nobody {
            common::as_nobody("/usr/bin/python3")
        } else {
            std::process::Command::new("/usr/bin/python3")
        };
        let out = c.args(["-c", PROGRESS_REQUEST, env.socket().to_str().unwrap()]).output().unwrap();
        assert!(out.status.success(), "{}", common::stderr(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let refused = ask(true);
    assert!(refused.starts_with("HTTP/1.1 403") && refused.contains("permission denied"), "{refused}");
    let answered = ask(false);
    let body = answered.split("\r\n\r\n").nth(1).unwrap_or_default();
    let progress: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    let mut listed: Vec<String> = progress["progress"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| Some(p["job"].as_str()?.to_string()))
        .collect();
    listed.sort_unstable();
    assert!(answered.starts_with("HTTP/1.1 200") && listed == expected, "{answered}");
    let status: serde_json::Value = serde_json::from_slice(&env.run(&["status", "--json"]).stdout).unwrap();
    assert_eq!(status["policy"], "cfs", "a refused request changes nothing");
    ok(&env.run(&["release", "--job", &mine]));
    ok(&env.run(&["release", "--job", &other]));
    for c in [&mut theirs, &mut roots] {
        let _ = c.kill();
        common::exit_within(c, common::STOP_LIMIT, "a sleeper, killed");
    }
}

/// A `progress` request on the control socket given as its argument, the whole HTTP answer printed; asked again
/// after the wait a 429 names (as the CLI does), for at most 15 s in all.
const PROGRESS_REQUEST: &str = r#"
import socket, sys, time
body = b'{"version":3,"op":"progress"}'
waited = 0
while True:
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(b"POST /v1/request HTTP/1.1\r\nHost: lockstep\r\nContent-Type: application/json\r\nContent-Length: "
              + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
    answer = b""
    while True:
        part = s.recv(65536)
        if not part:
            break
        answer += part
    s.close()
    head = answer.partition(b"\r\n\r\n")[0].decode().lower().split("\r\n")
    wait = [int(l.split(":")[1]) for l in head if l.startswith("retry-after:")]
    if not head[0].startswith("http/1.1 429") or not wait or waited + wait[0] > 15:
        break
    time.sleep(wait[0])
    waited += wait[0]
sys.stdout.write(answer.decode())
"#;

#[test]
#[ignore = "needs root"]
fn adoption_takes_nothing_it_must_not_and_a_failed_one_changes_nothing() {
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    let agent = Agent::start(&env, &["--policy", "gang", "--slot", "100ms"]);
    let status: serde_json::Value = serde_json::from_slice(&env.run(&["status", "--json"]).stdout).unwrap();
    let watchdog = status["watchdog_pid"].as_i64().unwrap().to_string();
    let me = agent.pid().as_raw().to_string();
    usage_error(&env.run(&["adopt", "--job", "x", "--pid", "1"]), "is init");
    usage_error(&env.run(&["adopt", "--job", "x", "--pid", &me]), "the lockstep agent");
    usage_error(&env.run(&["adopt", "--job", "x", "--pid", &watchdog]), "watchdog");
    // A thread is not a process to adopt: the refusal names its process.
    let thread = std::fs::read_dir(format!("/proc/{me}/task"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .find(|t| *t != me)
        .expect("the agent has threads");
    usage_error(&env.run(&["adopt", "--job", "x", "--pid", &thread]), &format!("is a thread of process {me}"));
    usage_error(&env.run(&["adopt", "--job", "x", "--cgroup", "../../../../etc"]), "below a hierarchy's root");
    usage_error(&env.run(&["adopt", "--job", "x", "--cgroup", "/"]), "below a hierarchy's root");
    // A request that fails half-way leaves the process where it was and no cgroup behind; the name stays free.
    let mut sleeper = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    let pid = sleeper.id().to_string();
    let before = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let job = name("half");
    let out = env.run(&["adopt", "--job", &job, "--pid", &pid, "2"]);
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
    assert_eq!(std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap(), before, "the process was left moved");
    assert_no_cgroup(&job);
    // One job per process: the first adoption holds it.
    ok(&env.run(&["adopt", "--job", &job, "--pid", &pid]));
    usage_error(&env.run(&["adopt", "--job", &name("second"), "--pid", &pid]), "belongs to job");
    ok(&env.run(&["release", "--job", &job]));
    assert_eq!(std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap(), before, "release put it back");
    let _ = sleeper.kill();
    common::exit_within(&mut sleeper, common::STOP_LIMIT, "a sleeper, killed");
    assert_no_cgroup(&job);
}

/// The watchdog's PID as the agent's status gives it.
fn watchdog_pid(env: &Env) -> i32 {
    let status: serde_json::Value = serde_json::from_slice(&env.run(&["status", "--json"]).stdout).unwrap();
    status["watchdog_pid"].as_i64().unwrap() as i32
}

#[test]
#[ignore = "needs root"]
fn a_killed_watchdog_is_replaced_and_a_stopped_agent_leaves_no_job_frozen() {
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    let agent = Agent::start(&env, &["--policy", "gang", "--slot", "300ms"]);
    let a = Job::start(&env, &name("wd-a"), &[]);
    let b = Job::start(&env, &name("wd-b"), &[]);
    one_frozen(&a, &b);
    // SIGKILL of the watchdog: a new one takes over, and gang goes on.
    let first = watchdog_pid(&env);
    kill(Pid::from_raw(first), Signal::SIGKILL).unwrap();
    wait_until("a new watchdog", WAIT, || watchdog_pid(&env), |&p| p != first);
    alternating(&a, &b, "gang going on");
    // SIGSTOP of the agent: the watchdog thaws the jobs within its beat timeout (2 s), and after SIGCONT the agent
    // plans again from there.
    one_frozen(&a, &b);
    kill(agent.pid(), Signal::SIGSTOP).unwrap();
    let stopped = Instant::now();
    while a.frozen() || b.frozen() {
        assert!(stopped.elapsed() < Duration::from_secs(6), "a job still frozen 6 s after the agent stopped");
        std::thread::sleep(Duration::from_millis(20));
    }
    let thawed = stopped.elapsed();
    eprintln!("jobs thawed {thawed:?} after SIGSTOP of the agent");
    kill(agent.pid(), Signal::SIGCONT).unwrap();
    alternating(&a, &b, "gang again after SIGCONT");
    // And the replacement watchdog restores on SIGKILL of the agent like the first one.
    one_frozen(&a, &b);
    drop(agent.stop(Signal::SIGKILL));
    wait_until("every job thawed after SIGKILL", WAIT, || (a.frozen(), b.frozen()), |&f| f == (false, false));
}

/// How soon the watchdog restores what a killed agent changed: the beat timeout (docs/agent.md).
const RESTORE: Duration = Duration::from_secs(2);

/// Waits until gang has frozen `a` and then `b` (the slots go on).
fn alternating(a: &Job, b: &Job, what: &str) {
    wait_until(&format!("{what}: a frozen"), WAIT, || a.frozen(), |&f| f);
    wait_until(&format!("{what}: b frozen"), WAIT, || b.frozen(), |&f| f);
}

/// Waits until `a` or `b` is frozen (seen together: a's state, b's state).
fn one_frozen(a: &Job, b: &Job) {
    wait_until("one job frozen", WAIT, || (a.frozen(), b.frozen()), |&(x, y)| x || y);
}

#[test]
#[ignore = "needs root"]
fn slots_follow_the_wall_clock_when_it_steps_an_hour() {
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    let skew = env.dir.path().join("clock-skew-ns");
    std::fs::write(&skew, "0").unwrap();
    let agent = Agent::start_with(
        &env,
        &["--policy", "gang", "--slot", "200ms"],
        &[("LOCKSTEP_CLOCK_SKEW_FILE", skew.as_os_str())],
    );
    let a = Job::start(&env, &name("clock-a"), &[]);
    let b = Job::start(&env, &name("clock-b"), &[]);
    alternating(&a, &b, "before");
    std::fs::write(&skew, "3600000000000").unwrap();
    alternating(&a, &b, "an hour ahead");
    std::fs::write(&skew, "-3600000000000").unwrap();
    alternating(&a, &b, "an hour behind");
    std::fs::write(&skew, "0").unwrap();
    alternating(&a, &b, "back");
    assert!(stopped_log(agent).contains("stepped back"), "the step back must be said");
}

#[test]
#[ignore = "needs root"]
fn a_refused_cgroup_write_leaves_every_job_runnable_and_heals() {
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    let caps = std::env::var("LOCKSTEP_AGENT_CAPS").unwrap_or_else(|_| common::agent_caps());
    let agent = Agent::start_with_caps(&env, &["--policy", "gang", "--slot", "200ms"], &caps);
    let a = Job::start(&env, &name("eacces-a"), &[]);
    let b = Job::start(&env, &name("eacces-b"), &[]);
    alternating(&a, &b, "before");
    // a's freeze knob handed to another user while a runs (a delegated cgroup, say): the agent's writes to it fail
    // with EACCES.
    let knob = a.knobs().freeze.unwrap();
    wait_until("b frozen, a running", WAIT, || (a.frozen(), b.frozen()), |&f| f == (false, true));
    std::os::unix::fs::chown(&knob, Some(65534), Some(65534)).unwrap();
    // a cannot be frozen any more, and b is not held frozen for it.
    let start = Instant::now();
    let mut b_ran = false;
    while start.elapsed() < Duration::from_secs(2) {
        assert!(!a.frozen(), "a frozen through a knob the agent may not write");
        b_ran |= !b.frozen();
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(b_ran, "b held frozen while a could not be");
    std::os::unix::fs::chown(&knob, Some(0), Some(0)).unwrap();
    alternating(&a, &b, "after the knob came back");
    drop(a);
    drop(b);
    said_per_fault(&stopped_log(agent), "denied");
}

/// A 16 MiB ext4 file system in a file on a loop device (small enough to fill, and with the immutable flag that
/// makes files already open read-only); unmounted and detached when dropped.
struct SmallDisk {
    dir: PathBuf,
    dev: String,
}

impl SmallDisk {
    /// The disk under `at`, or `None` when e2fsprogs or loop devices are missing.
    fn new(at: &Path) -> Option<Self> {
        let image = at.join("disk.img");
        std::fs::File::create(&image).unwrap().set_len(16 << 20).unwrap();
        let run = |cmd: &mut std::process::Command| cmd.output().ok().filter(|o| o.status.success());
        run(std::process::Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&image))?;
        let dev = run(std::process::Command::new("losetup").args(["--find", "--show"]).arg(&image))?;
        let dev = String::from_utf8_lossy(&dev.stdout).trim().to_string();
        let dir = at.join("disk");
        std::fs::create_dir(&dir).unwrap();
        let disk = Self { dir, dev };
        run(std::process::Command::new("mount").arg(&disk.dev).arg(&disk.dir))?;
        Some(disk)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr").arg("-R").arg("-i").arg(&self.dir).status();
        let _ = std::process::Command::new("umount").arg(&self.dir).status();
        let _ = std::process::Command::new("losetup").args(["-d", &self.dev]).status();
    }
}

/// Sets (`+i`) or clears (`-i`) the immutable flag of a store and its WAL on ext4 (a [`SmallDisk`]): writes, even
/// through descriptors already open, fail with EPERM while it is set. (Not of the `-shm` index, which SQLite
/// maps: a write to an immutable file through a shared mapping is SIGBUS, which no disk does to a process.)
fn chattr(flag: &str, store: &Path) {
    let wal = PathBuf::from(format!("{}-wal", store.display()));
    let files = [store, wal.as_path()];
    let st = std::process::Command::new("chattr").arg(flag).args(files).status().unwrap();
    assert!(st.success(), "chattr {flag} failed");
}

/// Checks for 3 s that the jobs stay runnable while `what`: never both frozen, neither frozen for longer than
/// a second (a 200 ms slot and the time of a failing write). Whether the agent freezes at all depends on whether
/// its journal entry could be written (a full disk still takes overwrites of the store's existing pages).
fn both_runnable(a: &Job, b: &Job, what: &str) {
    let start = Instant::now();
    let mut since = [None::<Instant>, None];
    while start.elapsed() < Duration::from_secs(3) {
        let (fa, fb) = snapshot(a, b, Job::frozen);
        let frozen = [fa, fb];
        assert!(!(frozen[0] && frozen[1]), "both jobs frozen while {what}");
        for (f, s) in frozen.iter().zip(&mut since) {
            match (f, *s) {
                (true, None) => *s = Some(Instant::now()),
                (true, Some(t)) => assert!(t.elapsed() < Duration::from_secs(1), "a job held frozen while {what}"),
                (false, _) => *s = None,
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
#[ignore = "needs root"]
fn a_full_or_read_only_store_leaves_every_job_runnable_and_the_agent_recovers() {
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    let Some(disk) = SmallDisk::new(env.dir.path()) else {
        common::missing("mkfs.ext4 and a loop device (e2fsprogs, util-linux)");
        return;
    };
    let store = disk.dir.join("lockstep.db");
    let agent = Agent::start(&env, &["--store", store.to_str().unwrap(), "--policy", "gang", "--slot", "200ms"]);
    let a = Job::start(&env, &name("disk-a"), &[]);
    let b = Job::start(&env, &name("disk-b"), &[]);
    alternating(&a, &b, "before");
    // Full (ENOSPC): the agent cannot journal a freeze, so it makes none.
    let filler = disk.dir.join("filler");
    let _ = std::fs::write(&filler, vec![0u8; 32 << 20]);
    both_runnable(&a, &b, "the store's disk is full");
    std::fs::remove_file(&filler).unwrap();
    alternating(&a, &b, "after space came back");
    // Read-only (the store's files made immutable): the same.
    chattr("+i", &store);
    both_runnable(&a, &b, "the store is read-only");
    chattr("-i", &store);
    alternating(&a, &b, "after the store was writable again");
    drop(a);
    drop(b);
    // One line when a fault starts and one when it clears, per place: each line at most once per fault.
    let log = stopped_log(agent);
    let mut said = std::collections::HashMap::<&str, usize>::new();
    for l in log.lines() {
        *said.entry(l).or_default() += 1;
    }
    assert!(said.values().all(|n| *n <= 2), "a fault said more than once: {log}");
    assert!(log.contains("works again"), "the recovery must be said: {log}");
}

/// Seconds since the epoch, as the store's times are.
fn epoch_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64()
}

/// The store's write lock held for seconds by another connection (root's `sqlite3` in a transaction, as the
/// sampler's or a metrics request's would for less): the slot loop waits for none of it. Gang goes on alternating
/// (each freeze's journal entry kept while the watchdog guards it), an adoption is answered, and once the lock is
/// gone the adopted job and the decisions of the locked seconds are in the store.
#[test]
#[ignore = "needs root"]
fn a_store_locked_by_another_connection_holds_up_no_slot_and_loses_no_record() {
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    let agent = Agent::start(&env, &["--policy", "gang", "--slot", "200ms"]);
    let a = Job::start(&env, &name("locked-a"), &[]);
    let b = Job::start(&env, &name("locked-b"), &[]);
    alternating(&a, &b, "before");
    let mut sleeper = std::process::Command::new("sleep").arg("600").spawn().unwrap();
    let c = name("locked-c");
    let mut db = rusqlite::Connection::open(env.store()).unwrap();
    let locked_at = epoch_now();
    let held = db.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).unwrap();
    alternating(&a, &b, "while another connection holds the store's write lock");
    ok(&env.run(&["adopt", "--job", &c, "--pid", &sleeper.id().to_string()]));
    alternating(&a, &b, "after an adoption the store could not take");
    let unlocked_at = epoch_now();
    drop(held);
    let look = rusqlite::Connection::open(env.store()).unwrap();
    let saved = wait_until(
        "the adopted job and the locked seconds' decisions in the store",
        WAIT,
        || {
            let managed: Vec<String> = look
                .prepare("SELECT name FROM managed")
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            let decided: i64 = look
                .query_row(
                    "SELECT count(*) FROM decisions WHERE action = 'freeze' AND time BETWEEN ?1 AND ?2",
                    [locked_at, unlocked_at],
                    |r| r.get(0),
                )
                .unwrap();
            (managed, decided)
        },
        |(managed, decided)| managed.contains(&c) && *decided > 0,
    );
    eprintln!("after the lock: {saved:?}");
    ok(&env.run(&["release", "--job", &c]));
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    drop(a);
    drop(b);
    let log = stopped_log(agent);
    assert!(log.contains("every job restored"), "{log}");
}

/// A shell loop of `nobody`'s, in a process group of its own and a directory only it writes: killed with its
/// children, and the directory removed, when dropped.
struct NobodysLoop {
    child: Child,
    /// Removed when dropped, after the loop is killed.
    _dir: lockstep_scratch::TempDir,
}

impl NobodysLoop {
    /// Runs `script` as `nobody` (`$1` is its directory).
    fn start(script: &str) -> Self {
        use std::os::unix::fs::PermissionsExt;
        use std::os::unix::process::CommandExt;
        let dir = lockstep_scratch::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let child = common::as_nobody("sh")
            .args(["-c", script, "sh"])
            .arg(dir.path())
            .process_group(0)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        Self { child, _dir: dir }
    }
}

impl Drop for NobodysLoop {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(-(self.child.id() as i32)), Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// `nobody` writes and syncs a file over and over, which makes every write to this disk wait as long as the
/// kernel's journal takes (a first write to the store took 77 ms beside it): the agent's slot loop, its one
/// `SCHED_FIFO` thread, writes nothing of the store, so no slot waits for it. Traced with strace for 3 s under
/// gang while a job is adopted and released (its record written and removed), jobs are frozen and thawed (journal
/// entries) and decisions go to the store: the loop writes cgroup files and no file of the store; another thread,
/// the store's writer, writes the store.
#[test]
#[ignore = "needs root"]
fn the_slot_loop_never_writes_the_store_whose_disk_a_user_makes_slow() {
    common::require_root();
    if !std::process::Command::new("strace").arg("-V").output().is_ok_and(|o| o.status.success()) {
        common::missing("strace (scripts/deps.sh)");
        return;
    }
    let _serial = serial();
    let env = Env::new();
    let agent = Agent::start(&env, &["--policy", "gang", "--slot", "100ms"]);
    let a = Job::start(&env, &name("disk-loop-a"), &[]);
    let b = Job::start(&env, &name("disk-loop-b"), &[]);
    one_frozen(&a, &b);
    let loop_tid = agent.pid().as_raw();
    // The daemon's loop is the main thread, and the one thread at real-time priority (policy 1, SCHED_FIFO).
    let stat = std::fs::read_to_string(format!("/proc/{loop_tid}/task/{loop_tid}/stat")).unwrap();
    let policy = stat.rsplit(')').next().unwrap().split_whitespace().nth(38).unwrap_or_default().to_string();
    assert_eq!(policy, "1", "the agent's main thread is not SCHED_FIFO: {stat}");
    let disk = NobodysLoop::start("while :; do dd if=/dev/zero of=\"$1/f\" bs=1M count=32 conv=fsync; done");
    let trace = env.dir.path().join("agent.strace");
    let strace = std::process::Command::new("timeout")
        .args(["-s", "INT", "3", "strace", "-f", "-qq", "-y", "-e", "trace=write,pwrite64,fsync,fdatasync", "-o"])
        .arg(&trace)
        .args(["-p", &loop_tid.to_string()])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let mut sleeper = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    let job = name("disk-loop-adopted");
    ok(&env.run(&["adopt", "--job", &job, "--pid", &sleeper.id().to_string()]));
    std::thread::sleep(Duration::from_millis(500));
    ok(&env.run(&["release", "--job", &job]));
    let out = common::output_within(strace, Duration::from_secs(20), "strace");
    drop(disk);
    let text = std::fs::read_to_string(&trace).unwrap_or_default();
    let store = env.store().display().to_string();
    let of_loop = |l: &&str| l.split_whitespace().next() == Some(loop_tid.to_string().as_str());
    let loop_lines: Vec<&str> = text.lines().filter(of_loop).collect();
    assert!(
        loop_lines.iter().any(|l| l.contains("freezer.state") || l.contains("cgroup.freeze")),
        "the loop wrote no freeze in 3 s under gang: nothing was traced ({}); trace:\n{}",
        common::stderr(&out),
        text.lines().take(20).collect::<Vec<_>>().join("\n")
    );
    let loop_stored: Vec<&&str> = loop_lines.iter().filter(|l| l.contains(&store)).collect();
    assert!(loop_stored.is_empty(), "the slot loop wrote the store: {:?}", &loop_stored[..loop_stored.len().min(5)]);
    assert!(
        text.lines().any(|l| !of_loop(&l) && l.contains(&store)),
        "no thread wrote the store in 3 s (a job adopted and released, decisions every second); trace:\n{}",
        text.lines().take(20).collect::<Vec<_>>().join("\n")
    );
    let _ = sleeper.kill();
    common::exit_within(&mut sleeper, common::STOP_LIMIT, "a sleeper, killed");
    drop(a);
    drop(b);
    drop(agent.stop(Signal::SIGTERM));
}

/// The agent's stderr a pipe that nobody reads, as a journald that does not drain the agent's stream (one slowed by
/// a user's flood of lines) would leave it: the pipe, shrunk to one page, fills after 4 KiB, and a loop that wrote
/// its lines itself waited at the next one, with its jobs as they were. 40 adoptions and releases of jobs with
/// names of 64 characters later (80 lines, about 13 KiB; more where a page is larger), each is answered and gang
/// still alternates; once the pipe is read, every line is there, none said dropped, and there were more than three
/// pipes' worth.
#[test]
#[ignore = "needs root"]
fn an_unread_stderr_holds_up_no_slot_and_loses_no_line_the_queue_can_hold() {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    let fifo = env.dir.path().join("agent-stderr");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR).unwrap();
    // Opened without waiting for the writer, and not read until the end.
    let mut reader =
        std::fs::OpenOptions::new().read(true).custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits()).open(&fifo).unwrap();
    // One page instead of 64 KiB, and names as long as names go (each round is a process and two requests, about
    // a second in a TCG guest): the rounds fill three times what the pipe holds, at about 320 bytes of lines each.
    let size = nix::fcntl::fcntl(reader.as_raw_fd(), nix::fcntl::FcntlArg::F_SETPIPE_SZ(4096)).unwrap();
    let size = usize::try_from(size).unwrap();
    let rounds = size * 3 / 300;
    let mut cmd = std::process::Command::new("sh");
    cmd.env("LOCKSTEP_STORE", env.store()).env("LOCKSTEP_SOCKET", env.socket());
    cmd.args(["-c", r#"exec "$0" agent --policy gang --slot 100ms 2>"$1""#, env!("CARGO_BIN_EXE_lockstep")]).arg(&fifo);
    let agent = Agent::spawn(&env, cmd);
    let a = Job::start(&env, &name("log-a"), &[]);
    let b = Job::start(&env, &name("log-b"), &[]);
    one_frozen(&a, &b);
    // A sleeper of its own per round: in the cgroup v2 guest, a process adopted again just after its release was
    // once still seen in the removed cgroup (`it-log-99-… (deleted)`), which is not what this test is about.
    for i in 0..rounds {
        let mut sleeper = std::process::Command::new("sleep").arg("120").spawn().unwrap();
        let job = format!("{:x<64}", name(&format!("log-{i}")) + "-");
        ok(&env.run(&["adopt", "--job", &job, "--pid", &sleeper.id().to_string()]));
        ok(&env.run(&["release", "--job", &job]));
        let _ = sleeper.kill();
        common::exit_within(&mut sleeper, common::STOP_LIMIT, "a sleeper, killed");
    }
    // The agent's log is in the unread pipe: a timeout says what the agent made of the jobs instead (`left`: a job
    // given up for what its changes cost).
    let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        alternating(&a, &b, "with the agent's stderr unread");
    }));
    if let Err(e) = waited {
        eprintln!("the agent's status then: {}", String::from_utf8_lossy(&env.run(&["status", "--json"]).stdout));
        std::panic::resume_unwind(e);
    }
    drop(a);
    drop(b);
    // Read to the end (every writer gone: the agent, and the watchdog that shares its stderr).
    let drained = std::thread::spawn(move || {
        let (mut text, mut buf) = (Vec::new(), [0u8; 16384]);
        let deadline = Instant::now() + Duration::from_mins(1);
        while Instant::now() < deadline {
            match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => text.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => panic!("reading the agent's stderr: {e}"),
            }
        }
        String::from_utf8_lossy(&text).into_owned()
    });
    drop(agent.stop(Signal::SIGTERM));
    let text = drained.join().unwrap();
    // What the test is about: the lines were more than the pipe could hold.
    assert!(text.len() >= 3 * size, "{} bytes of lines, not three pipes of {size}:\n{}", text.len(), tail(&text));
    let taken = text.lines().filter(|l| l.contains("taken on (pids,")).count();
    assert_eq!(taken, rounds, "lines of adoptions in the agent's stderr, of {rounds}:\n{}", tail(&text));
    assert!(!text.contains("dropped"), "{}", tail(&text));
    assert!(text.contains("stopped; every job restored"), "the last line is lost:\n{}", tail(&text));
}

/// The last 20 lines of `text`.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
