//! `lockstep experiment run` ends with what ran: a job that fails fails its case and the command, and the report
//! printed is of the runs the command made, never of an earlier run of the same experiment.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::Env;
use lockstep_cgroup::procfs::cpus_busy;
use lockstep_core::cpulist::CpuList;

/// One experiment at a time: each runs its own agent and jobs on the whole machine, and the paired comparison's
/// checks measure speeds that another experiment beside it would change.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Holds the machine for one test's experiments.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The build tree of `make build`, with its kernels; `None` (the test skipped, saying why) without it.
fn built() -> Option<PathBuf> {
    let build = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../build");
    if build.join("bin/lu").exists() && build.join("bin/lockstep").exists() {
        Some(build)
    } else {
        common::missing("build/bin has no kernels (run make build)");
        None
    }
}

/// The small spec of the fixtures with its lu and ep together, named `name`, lu of class `lu_class`, `ep_args` its
/// ep's arguments.
fn spec(env: &Env, name: &str, lu_class: &str, ep_args: &str, description: &str) -> PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/specs/mpl-small.toml");
    let text = std::fs::read_to_string(fixture)
        .unwrap()
        .replace("mpl = [1, 2]", r#"mixes = [["lu", "ep"]]"#)
        .replace("name = \"it-experiment\"", &format!("name = \"{name}\""))
        .replace("description = \"integration test\"", &format!("description = {description:?}"))
        .replace(r#"command = ["lu", "--class", "S"]"#, &format!("command = [\"lu\", \"--class\", {lu_class:?}]"))
        .replace(r#"command = ["ep", "--class", "S"]"#, &format!("command = [\"ep\", {ep_args}]"));
    let path = env.dir.path().join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `lockstep experiment run SPEC` from the build tree (the kernels beside it), its stdout not a terminal.
fn run(build: &Path, env: &Env, spec: &Path) -> Output {
    let reports = env.dir.path().join("reports");
    Command::new(build.join("bin/lockstep"))
        .env("LOCKSTEP_STORE", env.store())
        .args(["experiment", "run", spec.to_str().unwrap(), "--reports", reports.to_str().unwrap()])
        .output()
        .unwrap()
}

#[test]
#[ignore = "needs root"]
fn a_failed_job_fails_the_run_and_the_report_is_of_this_run_only() {
    common::require_root();
    let _serial = serial();
    let Some(build) = built() else { return };
    let env = Env::new();
    // A good run first: its numbers must not be printed as the next run's. Its jobs are `make demo`'s, which end
    // about 3 s after they start under gang: the report opens on a window of each case under cfs and gang all the
    // same (one begun at a fixed 3 s missed them).
    let good = run(&build, &env, &spec(&env, "it-failing", "W", r#""--class", "A""#, "good"));
    let (out, err) = (String::from_utf8_lossy(&good.stdout), String::from_utf8_lossy(&good.stderr));
    assert!(good.status.success(), "{out}{err}");
    assert!(out.contains("## Headline") && out.contains("6 job runs"), "{out}");
    assert!(!err.contains("no timeline"), "{err}");
    let html = std::fs::read_to_string(env.dir.path().join("reports/it-failing/index.html")).unwrap();
    assert!(html.contains("<h2>Which job ran where: lu+ep under cfs and gang/200ms</h2>"), "{err}");
    // Not a terminal: a line per finished case, the time left after all but the last.
    assert!(out.contains("[1/4] dedicated yield lu rep 1: ") && out.contains("(ETA "), "{out}");

    // The same experiment with an ep that refuses its class: every case with ep fails.
    let bad = run(&build, &env, &spec(&env, "it-failing", "S", r#""--class", "Z""#, "<script>alert(1)</script> & co"));
    let (out, err) = (String::from_utf8_lossy(&bad.stdout), String::from_utf8_lossy(&bad.stderr));
    assert_eq!(bad.status.code(), Some(1), "{out}{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains(
            "experiment it-failing: case dedicated yield ep rep 1: job it-failing-ep-0 failed (exit 2): ep: unknown \
             class 'Z'"
        ) && err.contains("2 more failed"),
        "{err}"
    );
    assert!(out.contains("[2/4] dedicated yield ep rep 1: ") && out.contains(", FAILED"), "{out}");
    // Its own six jobs, the failed cases marked, no mean of them and no headline.
    assert!(out.contains("6 job runs") && out.contains("## Failed cases"), "{out}");
    assert!(out.contains("| yield | lu+ep | FAILED | FAILED |"), "{out}");
    assert!(!out.contains("## Headline") && !out.contains("- under "), "{out}");
    let html = std::fs::read_to_string(env.dir.path().join("reports/it-failing/index.html")).unwrap();
    assert!(!html.contains("<script>") && html.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; co"), "{html}");
    assert!(html.contains("<td class=\"failed\">FAILED</td>"), "{html}");

    // A job whose kernel does not verify fails too.
    let unverified =
        run(&build, &env, &spec(&env, "it-unverified", "S", r#""--class", "S", "--perturb""#, "perturbed"));
    let err = String::from_utf8_lossy(&unverified.stderr);
    assert_eq!(unverified.status.code(), Some(1), "{err}");
    assert!(err.contains("job it-unverified-ep-0 failed (exit 1)"), "{err}");
}

#[test]
#[ignore = "needs root"]
fn a_paired_comparison_finds_a_policy_equal_to_itself_and_a_handicap_at_its_size() {
    common::require_root();
    let _serial = serial();
    let Some(build) = built() else { return };
    let env = Env::new();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/specs/ab-check.toml");
    // How busy the CPUs are before the run, with nothing of the test's own at work (scripts/flaky.sh's burners
    // keep them busy): where they are, the handicap's size is not known, and its check may say it was not made.
    let cpus = CpuList::online();
    let (before, t0) = (cpus_busy(&cpus).unwrap(), Instant::now());
    std::thread::sleep(Duration::from_secs(2));
    let after = cpus_busy(&cpus).unwrap();
    let busy = (after.busy_s - before.busy_s) / (f64::from(after.cpus) * t0.elapsed().as_secs_f64());
    let loaded = busy > 0.02;
    let out = run(&build, &env, &fixture);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    // The verdicts are at 99.9 %: a sound method misses one of the two about twice in a thousand runs.
    let checks: Vec<&str> =
        stdout.lines().filter(|l| l.starts_with("- A/A: ") || l.starts_with("- handicap: ")).collect();
    assert_eq!(checks.len(), 2, "{stdout}");
    assert!(checks[0].starts_with("- A/A: `gang again` against `gang/200ms` (busy lu+ep): "), "{stdout}");
    assert!(
        checks[1].starts_with("- handicap: `gang/200ms stopped 20%` against `gang/200ms` (busy lu+ep): "),
        "{stdout}"
    );
    assert!(checks[0].contains("**found**"), "{stdout}");
    // Each policy's row says how much of the CPUs' time other work took.
    for policy in ["gang again", "gang/200ms stopped 20%"] {
        let row = stdout.lines().find(|l| l.starts_with(&format!("| busy | lu+ep | {policy} | "))).unwrap_or_default();
        assert!(row.ends_with(" % |"), "no other work measured for {policy}: {row:?}\n{stdout}");
    }
    // The handicap's size is known only where the jobs own their CPUs: on CPUs busy before the run, its check may
    // say it was not made, with the share of their time other work took; on idle ones it must be made, and found.
    let not_made = checks[1].contains("**not made**: other work than the jobs took ")
        && checks[1].contains("of their CPUs' time (at most 2.0 %");
    assert!(
        checks[1].contains("**found**") || (loaded && not_made),
        "CPUs {:.1} % busy before the run\n{stdout}",
        busy * 100.0
    );

    // A paired comparison whose job fails has no numbers, and fails the run.
    let text = std::fs::read_to_string(&fixture)
        .unwrap()
        .replace("name = \"it-ab-check\"", "name = \"it-ab-failing\"")
        .replace("[\"ep\", \"--class\", \"A\"]", "[\"ep\", \"--class\", \"Z\"]")
        .replace("duration = \"72s\"", "duration = \"24s\"");
    let failing = env.dir.path().join("ab-failing.toml");
    std::fs::write(&failing, text).unwrap();
    let out = run(&build, &env, &failing);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("case paired busy lu+ep: job it-ab-failing-ep-1-0 failed (exit 2)"), "{stderr}");
    assert!(stdout.contains("| busy | lu+ep | FAILED |") && !stdout.contains("**found**"), "{stdout}");
}
