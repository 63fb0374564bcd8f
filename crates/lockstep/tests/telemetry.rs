//! The agent's telemetry on this machine: samples of a job in the store, `/metrics` (checked by promtool and
//! scraped by a real Prometheus server), the counts API summed by `lockstep stat --nodes`, and per-thread
//! counting of an adopted cgroup. Every daemon is started on loopback with a free port and killed by PID.

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{name, stderr, wait_until, Agent, Env, WAIT};
use lockstep_store::Store;
use lockstep_telemetry::remote::get;
use lockstep_telemetry::remote::JobCounts;

/// The tests read CPU time and event counts of busy jobs on 2 PUs: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A loopback port nobody listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A job that sleeps, works and sleeps again for about `seconds` in all, so that several samples see it.
fn job_script(seconds: u32) -> String {
    format!("for i in $(seq {seconds}); do sleep 0.5; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; done")
}

/// A process stopped when dropped: SIGTERM (so that `lockstep run` removes its job's cgroup and Prometheus shuts
/// down cleanly), SIGKILL after 5 s, then reaped.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        while matches!(self.0.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        common::exit_within(&mut self.0, common::STOP_LIMIT, "a daemon, killed");
    }
}

/// Job `job` run by `lockstep run` (placed `any`) as `sh -c script`, stopped when dropped.
fn run_job(env: &Env, job: &str, script: &str) -> Daemon {
    Daemon(env.spawn(&["run", "--job", job, "--place", "any", "--", "sh", "-c", script]))
}

/// Starts an agent with `args` and waits until its HTTP endpoint at `addr` answers too (it is bound after the
/// control socket).
fn start_agent(env: &Env, addr: &str, args: &[&str]) -> Agent {
    let mut full = vec!["--metrics", addr];
    full.extend_from_slice(args);
    let agent = Agent::start(env, &full);
    wait_until(
        "the agent's HTTP endpoint",
        WAIT,
        || get(addr, "/metrics").err().map(|e| e.to_string()),
        Option::is_none,
    );
    agent
}

/// `/metrics` of the agent at `addr`.
fn metrics(addr: &str) -> String {
    let (code, body) = get(addr, "/metrics").unwrap();
    assert_eq!(code, 200, "{body}");
    body
}

/// The value of the first series named `name` (as exposed) in an exposition text whose labels include each of
/// `labels`.
fn value_of(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().filter_map(|l| l.strip_prefix(name)?.strip_prefix('{')).find_map(|rest| {
        let (set, value) = rest.split_once("} ")?;
        let has = |(k, v): &(&str, &str)| set.split(',').any(|p| p == format!("{k}=\"{v}\""));
        labels.iter().all(has).then(|| value.parse().unwrap())
    })
}

/// The count of event `event` for `job` in an exposition text, in the event's family (one unit per name:
/// `task-clock` as `lockstep_job_cpu_seconds_total`, in seconds; a count event as `lockstep_job_<event>_total`).
fn series(text: &str, job: &str, event: &str) -> Option<f64> {
    let family = match event {
        "task-clock" => "lockstep_job_cpu_seconds".to_string(),
        other => format!("lockstep_job_{}", other.replace(['-', ':'], "_")),
    };
    value_of(text, &format!("{family}_total"), &[("lockstep_job", job)])
}

fn promtool_check(text: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (scripts/deps.sh installs the prometheus package)");
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = common::output_within(child, common::RUN_LIMIT, "promtool check metrics");
    assert!(out.status.success(), "promtool: {}{}\n{text}", String::from_utf8_lossy(&out.stdout), stderr(&out));
}

#[test]
#[ignore = "needs root"]
fn agent_samples_go_to_store_metrics_and_nodes_sum() {
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    let addr = format!("127.0.0.1:{}", free_port());
    let events = "task-clock,page-faults,cycles,sched:sched_switch";
    let _agent = start_agent(&env, &addr, &["--node", "tn1", "--events", events, "--sample-interval", "200ms"]);
    let job = name("samples");
    let mut run = run_job(&env, &job, &job_script(6));
    // Counted from the start: the job is on /metrics as soon as it runs, and its counts grow.
    let counted = |m: &String| series(m, &job, "task-clock").is_some_and(|v| v > 0.0);
    let live = wait_until("the job's task-clock on /metrics", WAIT, || metrics(&addr), counted);
    assert!(live.contains("lockstep_agent_jobs 1\n"), "{live}");
    assert!(live.contains("lockstep_agent_info{node=\"tn1\",policy=\"cfs\"} 1\n"), "{live}");
    assert!(value_of(&live, "lockstep_build_info", &[("version", lockstep_version::RELEASE)]) == Some(1.0), "{live}");
    // The job's state; whose it is, for root (a named scraper); no series carries Prometheus's own `job` or
    // `node` labels.
    assert_eq!(value_of(&live, "lockstep_job_frozen", &[("lockstep_job", &job)]), Some(0.0), "{live}");
    assert_eq!(value_of(&live, "lockstep_job_info", &[("lockstep_job", &job), ("user", "root")]), Some(1.0), "{live}");
    let series_lines = live.lines().filter(|l| !l.starts_with('#'));
    let foreign = |l: &&str| l.contains("{job=") || l.contains(",job=") || l.contains("node=");
    let foreign: Vec<&str> = series_lines.filter(foreign).filter(|l| !l.starts_with("lockstep_agent_info{")).collect();
    assert!(foreign.is_empty(), "series labelled job or node: {foreign:?}");
    assert!(series(&live, &job, "cycles").is_none(), "cycles is not countable here and must not be exported");
    promtool_check(&live);
    let (code, om) = {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text; version=1.0.0\r\n\r\n")
            .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        (text.contains("application/openmetrics-text"), text)
    };
    assert!(code && om.ends_with("# EOF\n"), "{om}");

    assert!(common::exit_within(&mut run.0, common::RUN_LIMIT, "the job").success());
    // The final counts: in the store, and from the counts API (no longer counting).
    let store = Store::open(&env.store()).unwrap();
    let counts = || get(&addr, &format!("/api/v1/jobs/{job}")).unwrap();
    let done =
        |(code, body): &(u16, String)| *code == 200 && !serde_json::from_str::<JobCounts>(body).unwrap().counting;
    wait_until("the job's final sample", WAIT, counts, done);
    // Its final counts stay on /metrics a while after its end, so that the next scrape still sees its last
    // interval.
    let after = metrics(&addr);
    let cpu = value_of(&after, "lockstep_job_cpu_seconds_total", &[("lockstep_job", &job)]);
    assert!(cpu.is_some_and(|v| v > 0.0), "no final task-clock after the job's end:\n{after}");
    assert!(value_of(&after, "lockstep_job_frozen", &[("lockstep_job", &job)]).is_none(), "{after}");
    let samples = store.samples(&job.parse().unwrap()).unwrap();
    let times: std::collections::BTreeSet<u64> = samples.iter().map(|s| (s.time * 1e6) as u64).collect();
    assert!(times.len() >= 5, "expected a sample every 200 ms over ~3 s, got {} times", times.len());
    for event in ["task-clock", "page-faults", "sched:sched_switch"] {
        let values: Vec<u64> = samples.iter().filter(|s| s.event == event).map(|s| s.value).collect();
        assert!(values.windows(2).all(|w| w[0] <= w[1]), "{event} must not decrease: {values:?}");
        assert!(*values.last().unwrap() > 0, "{event} counted nothing");
    }
    assert!(samples.iter().all(|s| s.event != "cycles" && s.node.as_str() == "tn1" && s.running <= s.enabled));
    let finals = store.latest_samples(&job.parse().unwrap(), &"tn1".parse().unwrap()).unwrap();
    let (_, body) = get(&addr, &format!("/api/v1/jobs/{job}")).unwrap();
    let api: JobCounts = serde_json::from_str(&body).unwrap();
    assert_eq!(api.events, finals);

    // `lockstep stat --nodes` prints the sum of the nodes' final counts (one node here, and one that never
    // saw the job).
    let other = format!("127.0.0.1:{}", free_port());
    let other_env = Env::new();
    let _other_agent = start_agent(&other_env, &other, &["--node", "tn2"]);
    let nodes = format!("{addr},{other}");
    let out = env.run(&["stat", "--job", &job, "--nodes", &nodes, "-e", "page-faults,task-clock,cycles", "-x", ","]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stderr(&out);
    let faults = finals.iter().find(|s| s.event == "page-faults").unwrap().value;
    assert!(text.lines().any(|l| l == format!("{faults},,page-faults,{},100.00,,", finals[0].running)), "{text}");
    assert!(text.contains("<not supported>,,cycles"), "{text}");
    // A node that refuses (port 1 of loopback: nothing listens there) and one that takes the connection and never
    // answers are said and left out of the sums, which are the other nodes' all the same, and the exit status
    // says the counts are not whole.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent = listener.local_addr().unwrap().to_string();
    let four = format!("{nodes},127.0.0.1:1,{silent}");
    let out = env.run(&["stat", "--job", &job, "--nodes", &four, "-e", "page-faults,task-clock", "-x", ","]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.lines().any(|l| l == format!("{faults},,page-faults,{},100.00,,", finals[0].running)), "{text}");
    for dead in ["127.0.0.1:1", &silent] {
        assert!(text.lines().any(|l| l.contains(dead) && l.ends_with("(left out)")), "{dead}: {text}");
    }
    let last = format!("leave out what 127.0.0.1:1,{silent} counted");
    assert!(text.lines().last().is_some_and(|l| l.contains(&last)), "{text}");
    let out = env.run(&["stat", "--job", "no-such-job", "--nodes", &nodes]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
}

/// URL query encoding of a PromQL expression.
fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
#[ignore = "needs root"]
fn prometheus_server_scrapes_the_job_counters() {
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    let agent_addr = format!("127.0.0.1:{}", free_port());
    let prom_addr = format!("127.0.0.1:{}", free_port());
    let _agent = start_agent(&env, &agent_addr, &["--node", "tn1", "--sample-interval", "200ms"]);
    let config = env.dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: lockstep\n    \
             static_configs:\n      - targets: ['{agent_addr}']\n"
        ),
    )
    .unwrap();
    let data: PathBuf = env.dir.path().join("tsdb");
    let prometheus = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", data.display()))
        .arg(format!("--web.listen-address={prom_addr}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus (scripts/deps.sh installs it)");
    let _prometheus = Daemon(prometheus);
    let ready = || get(&prom_addr, "/-/ready").map_err(|e| e.to_string());
    let _ready = wait_until("Prometheus ready", WAIT, ready, |r| r.as_ref().is_ok_and(|(c, _)| *c == 200));

    let job = name("prom");
    let _run = run_job(&env, &job, &job_script(16));
    let query = encode(&format!("lockstep_job_cpu_seconds_total{{lockstep_job=\"{job}\",job=\"lockstep\"}}"));
    let deadline = Instant::now() + Duration::from_secs(30);
    let value = loop {
        let (code, body) = get(&prom_addr, &format!("/api/v1/query?query={query}")).unwrap();
        assert_eq!(code, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let scraped = v["data"]["result"][0]["value"][1].as_str().map(|s| s.parse::<f64>().unwrap());
        if let Some(x) = scraped.filter(|x| *x > 0.0) {
            break x;
        }
        assert!(Instant::now() < deadline, "Prometheus never saw the job's task-clock: {body}");
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(value > 0.0);
}

/// Kills what is left in the hand-made cgroups (the worker's children) and removes them.
struct Cleanup(Vec<PathBuf>);
impl Drop for Cleanup {
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        for d in &self.0 {
            while d.exists() && Instant::now() < deadline {
                for pid in lockstep_cgroup::read_procs(d).unwrap() {
                    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
                }
                if std::fs::remove_dir(d).is_err() {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }
}

#[test]
#[ignore = "needs root"]
fn adopted_cgroup_outside_perf_event_is_counted_per_thread() {
    common::require_root();
    let _serial = serial();
    // A v1 freezer+cpu cgroup made by hand (as Slurm makes its job cgroups): not in the perf_event hierarchy.
    let roots: Vec<PathBuf> = ["freezer", "cpu"].iter().map(|c| Path::new("/sys/fs/cgroup").join(c)).collect();
    if !roots.iter().all(|r| r.join("cgroup.procs").exists()) {
        common::missing("needs the v1 freezer and cpu hierarchies");
        return;
    }
    let env = Env::new();
    let addr = format!("127.0.0.1:{}", free_port());
    let _agent = start_agent(&env, &addr, &["--node", "tn1", "--sample-interval", "200ms"]);
    let job = name("perthread");
    let dirs: Vec<PathBuf> = roots.iter().map(|r| r.join(&job)).collect();
    for d in &dirs {
        std::fs::create_dir(d).unwrap();
    }
    let _cleanup = Cleanup(dirs.clone());
    let mut worker = Command::new("sh");
    worker.args(["-c", &job_script(8)]);
    let procs: Vec<std::ffi::CString> =
        dirs.iter().map(|d| std::ffi::CString::new(d.join("cgroup.procs").to_str().unwrap()).unwrap()).collect();
    // SAFETY: the pre-exec closure only calls `cgroup::join`, which is async-signal-safe, on prepared paths.
    unsafe {
        use std::os::unix::process::CommandExt;
        worker.pre_exec(move || procs.iter().try_for_each(lockstep_cgroup::join));
    }
    let worker = Daemon(worker.spawn().unwrap());
    let out = env.run(&["adopt", "--job", &job, "--cgroup", &format!("/{job}")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let counted = |m: &String| series(m, &job, "task-clock").is_some_and(|v| v > 0.001);
    wait_until("per-thread task-clock of the adopted job", WAIT, || metrics(&addr), counted);
    // `lockstep stat --job` finds the adopted job's processes through the agent, and counts them until Ctrl-C.
    let stat = env.spawn(&["stat", "--job", &job, "-x", ",", "-e", "task-clock"]);
    std::thread::sleep(Duration::from_millis(1500));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(stat.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let counted = common::output_within(stat, common::STOP_LIMIT, "lockstep stat, after SIGINT");
    assert!(counted.status.success(), "{}", stderr(&counted));
    let text = stderr(&counted);
    let msec: f64 =
        text.lines().find(|l| l.contains(",task-clock,")).unwrap().split(',').next().unwrap().parse().unwrap();
    assert!(msec > 0.0, "{text}");
    let out = env.run(&["release", "--job", &job]);
    assert!(out.status.success(), "{}", stderr(&out));
    drop(worker);
    let store = Store::open(&env.store()).unwrap();
    assert!(store
        .latest_samples(&job.parse().unwrap(), &"tn1".parse().unwrap())
        .unwrap()
        .iter()
        .any(|s| s.event == "task-clock" && s.value > 1_000_000));
}

/// A job of two ranks (processes whose environment names their rank and their node's two ranks, as Open MPI's
/// launcher names them, started by a launcher shell that names none and waits) that spin for `seconds` without
/// ever sleeping (bash's own clock, no `date` to wait for), each pinned to its own PU: whenever both have their
/// PU, both run.
fn spinning_ranks(seconds: u32) -> String {
    let spin = format!("while [ $SECONDS -lt {seconds} ]; do :; done");
    let ranks = "OMPI_COMM_WORLD_LOCAL_SIZE=2";
    format!(
        "{ranks} PMIX_RANK=0 taskset -c 0 bash -c '{spin}' & {ranks} PMIX_RANK=1 taskset -c 1 bash -c '{spin}' & wait"
    )
}

/// A job of two ranks (named as MPICH's Hydra names them) that pass a token through two FIFOs in `dir`, each
/// working only while it holds it, for about `seconds`: never on a CPU at once (but for the instant of a
/// hand-over).
fn alternating_ranks(dir: &Path, seconds: u32) -> String {
    let (a, b) = (dir.join("a"), dir.join("b"));
    let (a, b) = (a.display(), b.display());
    let work = "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done";
    format!(
        "mkfifo {a} {b}; \
         MPI_LOCALNRANKS=2 PMI_RANK=0 bash -c 'while [ $SECONDS -lt {seconds} ]; do {work}; echo go > {a}; read x < {b}; done; \
         echo stop > {a}' & \
         MPI_LOCALNRANKS=2 PMI_RANK=1 bash -c 'while read x < {a} && [ \"$x\" = go ]; do {work}; echo done > {b}; done' & wait"
    )
}

/// The value of the gauge `name` for `job` in an exposition text.
fn gauge(text: &str, name: &str, job: &str) -> Option<f64> {
    value_of(text, name, &[("lockstep_job", job)])
}

/// Seconds since a job's first rank was seen, from `lockstep_job_event_enabled_seconds_total` of its
/// `rank-running` event.
fn measured_seconds(text: &str, job: &str) -> f64 {
    let labels = [("lockstep_job", job), ("event", "rank-running")];
    value_of(text, "lockstep_job_event_enabled_seconds_total", &labels).unwrap_or(0.0)
}

#[test]
#[ignore = "needs root"]
fn coscheduled_time_tells_ranks_that_run_together_from_ranks_that_never_do() {
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    let addr = format!("127.0.0.1:{}", free_port());
    let _agent = start_agent(&env, &addr, &["--node", "tn1", "--sample-interval", "200ms"]);
    let fifos = lockstep_scratch::tempdir().unwrap();
    // One job at a time, each alone with the agent: what it measures, from one snapshot of /metrics once the job
    // has been measured for 2 s, and `lockstep status --json` then.
    let measure = |kind: &str, script: &str| {
        let job = name(kind);
        let mut run = run_job(&env, &job, script);
        let measured = |m: &String| measured_seconds(m, &job) >= 2.0;
        let text = wait_until("2 s of the job's co-scheduled time on /metrics", WAIT, || metrics(&addr), measured);
        promtool_check(&text);
        let out = env.run(&["status", "--json"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let row = status["jobs"].as_array().unwrap().iter().find(|j| j["name"] == job.as_str()).cloned();
        let shown = |j: &serde_json::Value| j["coscheduled"].as_f64().is_some() && j["rank_running"].as_f64().is_some();
        assert!(row.is_some_and(|j| shown(&j)), "{status}");
        // `lockstep stat --job` counts the job to its end, then prints the agent's share beside the counts.
        let stat = env.spawn(&["stat", "--job", &job, "-e", "task-clock"]);
        let counted = common::output_within(stat, common::RUN_LIMIT, "lockstep stat --job, to the job's end");
        assert!(counted.status.success(), "{}", stderr(&counted));
        assert!(stderr(&counted).contains("co-scheduled: all its ranks on a CPU at once"), "{}", stderr(&counted));
        assert!(common::exit_within(&mut run.0, common::RUN_LIMIT, "the job").success());
        let share = gauge(&text, "lockstep_job_coscheduled_ratio", &job).unwrap();
        let running = gauge(&text, "lockstep_job_rank_running_ratio", &job).unwrap();
        let waiting = gauge(&text, "lockstep_job_rank_waiting_ratio", &job).unwrap();
        eprintln!("{kind}: co-scheduled {share:.3} of running {running:.3}, a rank waiting {waiting:.3}");
        (share, running, waiting, text)
    };
    // Ranks that never sleep are, at every moment, all on a CPU or one of them waiting for one: the time all ran
    // (the co-scheduled share of the time some ran) and the time one waited cover the job's time, however loaded
    // the machine is. The launcher shell, which waits, is no rank: were it one, the job's ranks would never all run.
    let (spinning, running, waiting, text) = measure("together", &spinning_ranks(8));
    assert!(spinning > 0.01, "spinning ranks on two PUs never ran together ({spinning:.3})\n{text}");
    let together = spinning * running;
    assert!(together + waiting > 0.9, "spinning ranks: together {together:.3} + waiting {waiting:.3} < 0.9\n{text}");
    // Ranks that take turns are never all on a CPU, whatever the load.
    let (alternating, _, _, text) = measure("apart", &alternating_ranks(fifos.path(), 8));
    assert!(alternating < 0.05, "ranks that take turns ran together {alternating:.3} of the time\n{text}");
}

/// A job's final samples hold its ranks' measures: a job that ends between two samples has its whole run in them
/// (they once held none, so that the store's last co-scheduled share of a job was its last interval's, and that of
/// a job shorter than an interval was its first milliseconds').
#[test]
#[ignore = "needs root"]
fn a_job_s_final_samples_hold_its_ranks_co_scheduled_time() {
    common::require_root();
    let _serial = serial();
    let env = Env::new();
    let addr = format!("127.0.0.1:{}", free_port());
    // The ranks are found as the agent walks the job's tree for a sample.
    let _agent = start_agent(&env, &addr, &["--node", "tn1", "--sample-interval", "1s"]);
    let job = name("finals");
    let mut run = run_job(&env, &job, &spinning_ranks(4));
    assert!(common::exit_within(&mut run.0, common::RUN_LIMIT, "the job").success());
    // The sampler writes a job's final samples to the store before it stops counting it (`/metrics` then counts
    // no job): they are then its latest, all of one time.
    wait_until("the agent to count no job", WAIT, || metrics(&addr), |m| m.contains("\nlockstep_agent_jobs 0\n"));
    let samples = Store::open(&env.store()).unwrap().samples(&job.parse().unwrap()).unwrap();
    // The latest time, exactly (positive floats order as their bits do).
    let last = samples.iter().map(|s| s.time.to_bits()).max();
    let finals: Vec<_> = samples.iter().filter(|s| Some(s.time.to_bits()) == last).collect();
    let coscheduled = finals.iter().find(|s| s.event == "coscheduled");
    // Its ranks spun for 3-4 s on a PU each, measured from the walk that found them: some of it together.
    assert!(
        coscheduled.is_some_and(|s| s.enabled > 1_000_000_000 && s.share().is_some_and(|x| x > 0.01)),
        "{finals:?}"
    );
}

/// `promtool ARGS` run in `dir`, within the run limit.
fn promtool(dir: &Path, args: &[&std::ffi::OsStr]) -> Output {
    let child = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (scripts/deps.sh installs the prometheus package)");
    common::output_within(child, common::RUN_LIMIT, "promtool")
}

/// The alert rules shipped in deploy/prometheus pass `promtool check rules`, and their unit tests
/// (tests/prometheus/lockstep-rules.test.yml: each alert fires on its failure and not on a healthy agent) pass
/// `promtool test rules`.
#[test]
fn the_alert_rules_pass_promtool_and_their_unit_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for args in [
        ["check", "rules", "deploy/prometheus/lockstep-rules.yml"],
        ["test", "rules", "tests/prometheus/lockstep-rules.test.yml"],
    ] {
        let out = promtool(&root, &args.map(std::ffi::OsStr::new));
        assert!(out.status.success(), "promtool {args:?}: {}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    }
}

/// Every query of the Grafana dashboard (deploy/grafana/lockstep.json) is PromQL that Prometheus parses: written,
/// with Grafana's variables given values, as recording rules that `promtool check rules` reads.
#[test]
fn the_dashboard_queries_are_promql() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("deploy/grafana/lockstep.json")).unwrap()).unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    let exprs: Vec<String> = panels
        .iter()
        .filter_map(|p| p["targets"].as_array())
        .flatten()
        .map(|t| {
            t["expr"]
                .as_str()
                .unwrap()
                .replace("$__rate_interval", "1m")
                .replace('$', "")
                .replace("=~\"instance\"", "=~\".*\"")
                .replace("=~\"lockstep_job\"", "=~\".*\"")
        })
        .collect();
    assert!(exprs.len() >= 10, "{exprs:?}");
    let records: Vec<String> = exprs
        .iter()
        .enumerate()
        .map(|(i, e)| {
            format!("      - record: dashboard:query{i}\n        expr: {}\n", serde_json::to_string(e).unwrap())
        })
        .collect();
    let rules = format!("groups:\n  - name: dashboard\n    rules:\n{}", records.concat());
    let dir = lockstep_scratch::tempdir().unwrap();
    let file = dir.path().join("dashboard-rules.yml");
    std::fs::write(&file, &rules).unwrap();
    let out = promtool(dir.path(), &["check".as_ref(), "rules".as_ref(), file.as_os_str()]);
    assert!(out.status.success(), "promtool: {}{}\n{rules}", String::from_utf8_lossy(&out.stdout), stderr(&out));
}
