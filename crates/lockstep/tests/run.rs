//! `lockstep run`, `jobs`, `place` and `topo` as a user runs them, on the real cgroups of this machine.
//! Every test uses its own store and job names, and checks that no cgroup is left behind.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Output};

use lockstep_core::cpulist::CpuList;
use serde_json::Value;

mod common;

use common::{assert_no_cgroup, job_dirs, name, running, stderr, wait_until, Env, V1_CONTROLLERS, WAIT};

/// Waits until `pid` is in `job`'s cgroup, showing the last list of its processes if not.
fn in_cgroup(job: &str, pid: i32) {
    wait_until("the command in its cgroup", WAIT, || procs(job), |p| p.contains(&pid));
}

fn procs(job: &str) -> Vec<i32> {
    std::fs::read_to_string(job_dirs(job)[0].join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.parse().ok())
        .collect()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn placement(env: &Env, policy: &str, cpus: &str) -> Value {
    let out = env.run(&["place", "--policy", policy, "--cpus", cpus, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

#[test]
#[ignore = "needs root"]
fn command_runs_inside_its_cgroup_with_the_placement() {
    common::require_root();
    let env = Env::new();
    let job = name("inside");
    let script =
        "cat /proc/self/cgroup; grep Cpus_allowed_list /proc/self/status; grep Mems_allowed_list /proc/self/status";
    let out = env.run(&["run", "--job", &job, "--place", "any", "--cpus", "1", "--", "sh", "-c", script]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let expected = placement(&env, "any", "1");
    let allowed = text.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).unwrap().trim();
    assert_eq!(allowed, expected["pus"].as_str().unwrap());
    let mems = text.lines().find_map(|l| l.strip_prefix("Mems_allowed_list:")).unwrap().trim();
    assert_eq!(mems, expected["mems"].as_str().unwrap());
    let v1_used: Vec<&&str> =
        V1_CONTROLLERS.iter().filter(|c| Path::new("/sys/fs/cgroup").join(c).join("cgroup.procs").exists()).collect();
    for c in &v1_used {
        let line =
            text.lines().find(|l| l.split(':').nth(1) == Some(**c)).unwrap_or_else(|| panic!("no {c} in {text}"));
        assert!(line.ends_with(&format!(":/lockstep/{job}")), "{line}");
    }
    if v1_used.is_empty() {
        assert!(text.contains(&format!("0::/lockstep/{job}")), "{text}");
    }
    assert_no_cgroup(&job);
}

#[test]
#[ignore = "needs root"]
fn weight_and_memory_limit_reach_the_cgroup() {
    common::require_root();
    let env = Env::new();
    let job = name("limits");
    let v1 = Path::new("/sys/fs/cgroup/cpu/cgroup.procs").exists();
    let script = if v1 {
        format!("cat /sys/fs/cgroup/cpu/lockstep/{job}/cpu.shares /sys/fs/cgroup/memory/lockstep/{job}/memory.limit_in_bytes")
    } else {
        format!("cat /sys/fs/cgroup/lockstep/{job}/cpu.weight /sys/fs/cgroup/lockstep/{job}/memory.max")
    };
    let out = env.run(&[
        "run",
        "--job",
        &job,
        "--place",
        "any",
        "--weight",
        "200",
        "--mem-limit",
        "256M",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let values: Vec<&str> = text.lines().map(str::trim).collect();
    assert_eq!(values, [if v1 { "2048" } else { "200" }, "268435456"]);
    assert_no_cgroup(&job);
}

#[test]
#[ignore = "needs root"]
fn exit_status_is_the_commands() {
    common::require_root();
    let env = Env::new();
    let job = name("status");
    let out = env.run(&["run", "--job", &job, "--place", "any", "--", "sh", "-c", "exit 7"]);
    assert_eq!(out.status.code(), Some(7));
    assert_no_cgroup(&job);
    let jobs: Value = serde_json::from_str(&stdout(&env.run(&["jobs", "--all", "--json"]))).unwrap();
    let row = jobs.as_array().unwrap().iter().find(|j| j["name"] == job.as_str()).unwrap();
    assert_eq!(row["state"], "done");
    assert_eq!(row["exit_status"], 7);
}

/// Starts `sh -c 'echo $$; exec sleep 60'` as a job and returns the supervisor and the command's PID.
fn start_sleeper(env: &Env, job: &str) -> (Child, i32) {
    let mut child = env.spawn(&["run", "--job", job, "--place", "any", "--", "sh", "-c", "echo $$; exec sleep 60"]);
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    let pid: i32 = line.trim().parse().unwrap_or_else(|_| panic!("no pid from job: {line:?}"));
    in_cgroup(job, pid);
    // `lockstep run` records the pid after spawn returns, which is after the command has started (and
    // printed it): wait for the record so the tests below see the job as the store will keep it.
    let jobs = || serde_json::from_str::<Value>(&stdout(&env.run(&["jobs", "--json"]))).unwrap();
    let recorded = |jobs: &Value| jobs.as_array().unwrap().iter().any(|j| j["name"] == job && j["pid"] == pid);
    wait_until("the pid in the job's record", WAIT, jobs, recorded);
    (child, pid)
}

#[test]
#[ignore = "needs root"]
fn sigint_reaches_the_command_when_lockstep_run_was_started_with_it_ignored() {
    use std::os::unix::process::CommandExt;
    common::require_root();
    let env = Env::new();
    let job = name("sigign");
    let mut cmd = env.cmd();
    cmd.args(["run", "--job", &job, "--place", "any", "--", "sh", "-c", "echo $$; exec sleep 60"]);
    cmd.stdout(std::process::Stdio::piped());
    // As a background job of a non-interactive shell starts it (or nohup, for SIGHUP).
    // SAFETY: signal() is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_IGN);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    let pid: i32 = line.trim().parse().unwrap();
    in_cgroup(&job, pid);
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = common::exit_within(&mut child, common::STOP_LIMIT, "lockstep run, after SIGINT");
    assert_eq!(status.code(), Some(128 + libc::SIGINT), "the forwarded SIGINT must end the command");
    assert_no_cgroup(&job);
}

#[test]
#[ignore = "needs root"]
fn cgroup_is_removed_when_the_command_is_killed() {
    common::require_root();
    let env = Env::new();
    let job = name("sigkill-cmd");
    let (mut child, pid) = start_sleeper(&env, &job);
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let status = common::exit_within(&mut child, common::STOP_LIMIT, "lockstep run, its command killed");
    assert_eq!(status.code(), Some(128 + libc::SIGKILL));
    assert_no_cgroup(&job);
}

#[test]
#[ignore = "needs root"]
fn sigint_and_sigterm_are_forwarded_and_cleaned_up() {
    common::require_root();
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let env = Env::new();
        let job = name(&format!("sig{sig}"));
        let (mut child, pid) = start_sleeper(&env, &job);
        let jobs: Value = serde_json::from_str(&stdout(&env.run(&["jobs", "--json"]))).unwrap();
        let row =
            jobs.as_array().unwrap().iter().find(|j| j["name"] == job.as_str()).expect("job listed while running");
        assert_eq!(row["pid"], pid);
        assert_eq!(row["state"], "running");
        // SAFETY: kill has no memory preconditions.
        unsafe { libc::kill(child.id() as i32, sig) };
        let status = common::exit_within(&mut child, common::STOP_LIMIT, &format!("lockstep run, after {sig}"));
        assert_eq!(status.code(), Some(128 + sig), "signal {sig}");
        assert_no_cgroup(&job);
    }
}

#[test]
#[ignore = "needs root"]
fn leftover_processes_are_killed_when_the_command_ends() {
    common::require_root();
    let env = Env::new();
    let job = name("leftover");
    let out =
        env.run(&["run", "--job", &job, "--place", "any", "--", "sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let bg: i32 = stdout(&out).trim().parse().unwrap();
    wait_until("the background process to be gone", WAIT, || running(bg), |&r| !r);
    assert_no_cgroup(&job);
}

#[test]
#[ignore = "needs root"]
fn supervisor_killed_leaves_an_orphan_that_reconcile_removes() {
    common::require_root();
    let env = Env::new();
    let job = name("orphan");
    let (mut child, pid) = start_sleeper(&env, &job);
    child.kill().unwrap();
    common::exit_within(&mut child, common::STOP_LIMIT, "lockstep run, killed");
    let jobs: Value = serde_json::from_str(&stdout(&env.run(&["jobs", "--json"]))).unwrap();
    let row = jobs.as_array().unwrap().iter().find(|j| j["name"] == job.as_str()).unwrap();
    assert_eq!(row["state"], "orphaned");
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    wait_until("the orphan to exit", WAIT, || procs(&job), Vec::is_empty);
    let jobs: Value = serde_json::from_str(&stdout(&env.run(&["jobs", "--all", "--json"]))).unwrap();
    let row = jobs.as_array().unwrap().iter().find(|j| j["name"] == job.as_str()).unwrap();
    assert_eq!(row["state"], "lost");
    assert_no_cgroup(&job);
}

/// Runs `args` and checks exit status 2, one line on stderr containing `needle`, and no cgroup for `job`.
fn rejected(env: &Env, job: &str, args: &[&str], needle: &str) {
    let out = env.run(args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
    assert_no_cgroup(job);
}

#[test]
#[ignore = "needs root"]
fn bad_input_is_one_line_exit_2_and_changes_nothing() {
    common::require_root();
    let env = Env::new();
    let job = name("bad");
    rejected(&env, &job, &["run", "--job", &job, "--place", "fastest", "--", "true"], "unknown placement policy");
    rejected(&env, &job, &["run", "--job", &job, "--place", "any", "--", "no-such-command-xyz"], "command not found");
    rejected(&env, &job, &["run", "--job", &job, "--place", "any", "--cpus", "100000", "--", "true"], "--cpus 100000");
    rejected(&env, &job, &["run", "--job", &job, "--place", "any", "--weight", "0", "--", "true"], "weight");
    rejected(&env, &job, &["run", "--job", &job, "--place", "any", "--mem-limit", "lots", "--", "true"], "byte count");
    rejected(
        &env,
        &job,
        &["run", "--job", &job, "--place", "any", "--mem-limit", "1", "--", "true"],
        "least memory limit",
    );
    rejected(&env, &job, &["run", "--job", "a/b", "--place", "any", "--", "true"], "invalid job name");
    rejected(&env, &job, &["run", "--job", &job, "--place", "any"], "CMD");
    rejected(&env, &job, &["place", "--policy", "any", "--xml", "/nonexistent.xml"], "does not exist");
    rejected(&env, &job, &["frobnicate"], "frobnicate");
    // Nothing recorded: no store was even made, and a listing makes none either.
    assert!(!env.store().exists(), "a refused command made the store");
    rejected(&env, &job, &["jobs", "--all", "--json"], "no store at");
    assert!(!env.store().exists(), "a listing made the store");
}

#[test]
#[ignore = "needs root"]
fn job_name_in_use_is_rejected_and_the_running_job_is_untouched() {
    common::require_root();
    let env = Env::new();
    let job = name("inuse");
    let (mut child, pid) = start_sleeper(&env, &job);
    let out = env.run(&["run", "--job", &job, "--place", "any", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("in use"), "{}", stderr(&out));
    assert_eq!(procs(&job), vec![pid], "first job still in its cgroup");
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    common::exit_within(&mut child, common::STOP_LIMIT, "lockstep run, after SIGTERM");
    assert_no_cgroup(&job);
}

#[test]
#[ignore = "needs root"]
fn a_cgroup_lockstep_does_not_own_is_not_touched() {
    common::require_root();
    let env = Env::new();
    let job = name("foreign");
    let foreign = &job_dirs(&job)[0];
    std::fs::create_dir_all(foreign.parent().unwrap()).unwrap();
    std::fs::create_dir(foreign).unwrap();
    let out = env.run(&["run", "--job", &job, "--place", "any", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("already exists"), "{}", stderr(&out));
    assert!(foreign.exists(), "foreign cgroup kept");
    std::fs::remove_dir(foreign).unwrap();
    assert_no_cgroup(&job);
}

#[test]
#[ignore = "needs root"]
fn no_permission_is_a_clear_error() {
    common::require_root();
    let env = Env::new();
    // The store directory must be usable by the unprivileged user; the cgroup tree must not be.
    std::fs::set_permissions(env.dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let job = name("noperm");
    let mut cmd = env.cmd();
    cmd.args(["run", "--job", &job, "--place", "any", "--", "true"]);
    // SAFETY: setgid/setuid are async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            if libc::setgroups(0, std::ptr::null()) != 0 || libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("no permission"), "{}", stderr(&out));
    assert_eq!(stderr(&out).lines().count(), 1);
    assert_no_cgroup(&job);
}

#[test]
fn topo_and_place_on_the_live_machine() {
    let env = Env::new();
    let out = env.run(&["topo", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let t: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    assert_eq!(t["kinds"][0]["label"], "P");
    let online = CpuList::parse(&online).unwrap();
    assert_eq!(t["pus"].as_u64().unwrap() as usize, online.len());
    let kind_pus: usize =
        t["kinds"].as_array().unwrap().iter().map(|k| CpuList::parse(k["pus"].as_str().unwrap()).unwrap().len()).sum();
    assert_eq!(kind_pus, online.len());
    let any: Value = serde_json::from_str(&stdout(&env.run(&["place", "--policy", "any", "--json"]))).unwrap();
    assert_eq!(any["pus"].as_str().unwrap(), online.to_string());
    let human = stdout(&env.run(&["topo"]));
    assert!(human.contains("CPU kinds") && human.contains("Package L#0"), "{human}");
}
