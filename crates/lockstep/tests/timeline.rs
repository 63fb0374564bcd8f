//! `lockstep timeline` on a real agent and real jobs: the agent's eBPF program records which job's ranks ran on
//! which CPU, both jobs of a pair appear, and under gang they take turns; only root may ask, one at a time.

mod common;

use std::process::{Child, Output};
use std::time::Duration;

use common::{name, stderr, wait_until, Agent, Env, WAIT};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// A job of two ranks (as Open MPI names them) that spin for `seconds`, under `lockstep run`; stopped when dropped.
struct Job(Child);

impl Job {
    fn start(env: &Env, job: &str, seconds: u32) -> Self {
        let spin = format!("while [ $SECONDS -lt {seconds} ]; do :; done");
        let ranks = "OMPI_COMM_WORLD_LOCAL_SIZE=2";
        let script = format!("{ranks} PMIX_RANK=0 bash -c '{spin}' & {ranks} PMIX_RANK=1 bash -c '{spin}' & wait");
        Self(env.spawn(&["run", "--job", job, "--place", "any", "--", "sh", "-c", &script]))
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.0.id() as i32), Signal::SIGTERM);
        common::exit_within(&mut self.0, common::STOP_LIMIT, "a spinning job, after SIGTERM");
    }
}

/// The recording `lockstep timeline --ms MS --json` printed.
fn timeline(env: &Env, ms: u32) -> serde_json::Value {
    let out = env.run(&["timeline", "--ms", &ms.to_string(), "--json"]);
    assert!(out.status.success(), "lockstep timeline: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Bins of the window [`BIN_NS`] long.
const BIN_NS: u64 = 10_000_000;

/// For each [`BIN_NS`] of the window, whether job `job` had a rank on some CPU in it.
fn bins(t: &serde_json::Value, job: &str) -> Vec<bool> {
    let mut ran = vec![false; (t["window_ns"].as_u64().unwrap() / BIN_NS + 1) as usize];
    for lane in t["cpus"].as_array().unwrap() {
        for s in lane["segments"].as_array().unwrap().iter().filter(|s| s["job"] == job) {
            let (a, b) = (s["start_ns"].as_u64().unwrap(), s["end_ns"].as_u64().unwrap());
            for bin in &mut ran[(a / BIN_NS) as usize..=((b.max(a + 1) - 1) / BIN_NS) as usize] {
                *bin = true;
            }
        }
    }
    ran
}

/// Both jobs of `jobs` shown by `status --json` with a co-scheduled fraction (their ranks are measured), and one of
/// them frozen: `gang` slices them (new jobs run as under cfs until their demand is measured, 3 s at most).
fn sliced(env: &Env, jobs: &[&str]) -> bool {
    let out = env.run(&["status", "--json"]);
    let Ok(status) = serde_json::from_slice::<serde_json::Value>(&out.stdout) else { return false };
    let shown: Vec<&serde_json::Value> =
        jobs.iter().filter_map(|job| status["jobs"].as_array()?.iter().find(|j| j["name"] == *job)).collect();
    shown.len() == jobs.len()
        && shown.iter().all(|j| j["coscheduled"].is_f64())
        && shown.iter().any(|j| j["frozen"] == true)
}

#[test]
#[ignore = "needs root"]
fn under_gang_the_two_jobs_ranks_take_turns_on_the_cpus() {
    common::require_root();
    let env = Env::new();
    let _agent = Agent::start(&env, &["--policy", "gang", "--slot", "200ms", "--sample-interval", "200ms"]);
    let (a, b) = (name("tl-a"), name("tl-b"));
    let _jobs = [Job::start(&env, &a, 60), Job::start(&env, &b, 60)];
    wait_until("both jobs' ranks measured, one job frozen", WAIT, || sliced(&env, &[&a, &b]), |m| *m);
    let t = timeline(&env, 1000);
    let window = t["window_ns"].as_u64().unwrap();
    assert!(window >= 1_000_000_000, "{t}");
    assert!(t["cpus"].as_array().is_some_and(|c| !c.is_empty()), "a lane per CPU: {t}");
    let (ba, bb) = (bins(&t, &a), bins(&t, &b));
    assert!(ba.contains(&true) && bb.contains(&true), "both jobs ran in a second of 200 ms slots: {t}");
    for job in [&a, &b] {
        let shown = t["jobs"].as_array().unwrap().iter().find(|j| j["name"] == job.as_str());
        assert!(shown.is_some_and(|j| j["ranks"] == 2), "{job} with its two ranks: {t}");
    }
    // Gang thaws the next job before it freezes the last: both may run in the bins around a switch (a switch
    // each 200 ms: 6 in the window at most; under load a freeze may take some 30 ms to stop every rank), never
    // elsewhere. The kernel alone interleaves them every few milliseconds: under cfs on this 2-CPU machine, loaded,
    // 27 of 101 bins were shared, in 9 clusters, one 150 ms long.
    let switches = window / 200_000_000 + 1;
    let mut clusters: Vec<Vec<usize>> = Vec::new();
    for i in (0..ba.len()).filter(|&i| ba[i] && bb[i]) {
        match clusters.last_mut() {
            Some(c) if i - c[c.len() - 1] <= 3 => c.push(i),
            _ => clusters.push(vec![i]),
        }
    }
    eprintln!("bins with both jobs, clustered: {clusters:?} (of {})", ba.len());
    let at_switches = clusters.len() as u64 <= switches && clusters.iter().all(|c| c[c.len() - 1] - c[0] < 6);
    assert!(at_switches, "both jobs ran at once beyond a switch, in bins {clusters:?}\n{t}");
}

#[test]
#[ignore = "needs root"]
fn only_root_records_and_one_recording_at_a_time() {
    common::require_root();
    let env = Env::new();
    // Other users must reach the socket's directory (the socket itself is open to all).
    std::fs::set_permissions(env.dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let _agent = Agent::start(&env, &["--policy", "cfs"]);
    let out: Output = common::as_nobody(env!("CARGO_BIN_EXE_lockstep"))
        .arg("--socket")
        .arg(env.socket())
        .args(["timeline", "--ms", "10"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "nobody recorded a timeline");
    assert!(stderr(&out).contains("permission denied: only root may record a timeline"), "{}", stderr(&out));
    // A long recording, and short ones asked for meanwhile: those that come while it runs are refused. (Until it
    // has started, a short one may get in first, and the long one is then the one refused: asked again.)
    let long = || env.spawn(&["timeline", "--ms", "3000"]);
    let mut first = long();
    let mut refused = None;
    let mut tries = 0;
    while refused.is_none() {
        let second = env.run(&["timeline", "--ms", "10"]);
        if stderr(&second).contains("recording a timeline already") {
            assert_eq!(second.status.code(), Some(2), "{}", stderr(&second));
            refused = Some(second);
        }
        if let Ok(Some(_)) = first.try_wait() {
            assert!(refused.is_some() || tries < 5, "no short recording was refused while long ones ran");
            tries += 1;
            first = long();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = common::output_within(first, common::RUN_LIMIT, "the long recording");
    let err = stderr(&out);
    assert!(out.status.success() || err.contains("recording a timeline already"), "{err}");
}
