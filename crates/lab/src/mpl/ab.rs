//! The paired comparison (`[ab]` in an mpl spec): each mix's jobs run once, for the spec's `duration`, each
//! started again as it ends, while the `[[policies]]` take turns in windows of `window` in a balanced order (A B,
//! B A, A B, …). Every [`PERIOD`] the private agent is asked for every job's progress totals (`Request::Progress`:
//! MPI calls, CPU time and co-scheduled time, as `auto` reads them), and what each job did between two readings is
//! added to the window it lies in; the first `settle` of a window, the switch's transient, is not counted. Each
//! window is stored (`ab-window` records); the report (`ab_report`) pairs each round's windows and estimates how the
//! policies compare, with a confidence interval. Each window also counts every job's whole runs, those that began
//! after its settle and ended within it, and their wall time: what the report reads with `measure = "runs"`.
//!
//! A job that fails or does not verify fails its comparison, which is stored without its windows, and the run.
//! A policy with a handicap has every process of every job stopped (SIGSTOP, then SIGCONT) for that share of each
//! [`PERIOD`] while it is in force: a waste of known size, for checking that the comparison finds it.

use lockstep_cgroup::procfs::Live as _;
use std::collections::BTreeMap;
use std::io::Read as _;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::ab_held::held_in;
use super::run::{start_job, stderr_file, stop_jobs, Case, Site, Started};
use super::spec::{Ab, By, Spec, PERIOD};
use crate::harness::agent::PrivateAgent;
use crate::harness::outcome::{Failures, Outcome};
use crate::harness::progress_bar::CaseProgress;
use crate::harness::records;
use crate::harness::spec::{Progress, RanksIn};
use crate::harness::teardown::descendants;
use crate::harness::Paths;
use lockstep_cgroup::procfs::{cpus_busy, CpuBusy, ProcessRef};
use lockstep_core::cosched::auto::Sample;
use lockstep_core::cpulist::CpuList;
use lockstep_core::duration;
use lockstep_proto::client::{call, check};
use lockstep_proto::protocol::Request;
use lockstep_store::{now, Store};

/// The record of one window.
pub const WINDOW: &str = "ab-window";

/// The record of one comparison (a mix in a progress mode): whether it ran its course.
pub const COMPARISON: &str = "ab-comparison";

/// The record of what `auto` held in one comparison (super::ab_held::Held), tallied from the agent's records
/// once the run's agent has stopped, so that a report made after the agent's retention still has it.
pub const HELD: &str = "ab-held";

/// The retention the agent gets at least: its own default.
const DEFAULT_RETENTION: Duration = Duration::from_hours(24);

/// What the agent's retention adds to the run's length: the agent's start and the jobs' ends.
const RETENTION_MARGIN: Duration = Duration::from_hours(1);

/// The longest retention the agent takes: ten years.
const LONGEST_RETENTION: Duration = Duration::from_hours(10 * 365 * 24);

/// The periods after a run starts in which the processes a handicap stops are listed every period (its ranks start
/// a little after their launcher), and how often they are listed after that.
const RELIST: u32 = 10;

/// One window: what each job of the mix did while one policy was in force.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// MPI progress mode.
    pub progress: String,
    /// The mix, its workloads joined by `+`.
    pub mix: String,
    /// The policy's place in `[[policies]]`.
    pub arm: usize,
    /// Its label.
    pub label: String,
    /// The round, from 0: each round has a window of every policy.
    pub round: u32,
    /// The seconds counted (the window after its settle).
    pub seconds: f64,
    /// Per job of the mix, in the mix's order (background load included, never measured).
    pub jobs: Vec<Done>,
    /// The share of the CPU time of the CPUs the experiment may use (this harness's affinity: its container's or
    /// cpuset's) that went to other work than the mix's jobs in the counted seconds (the agent, this harness,
    /// anything else on those CPUs): their busy time (`/proc/stat`) less the jobs'. `None` where no counted period
    /// could be read, and in records of builds that did not measure it.
    #[serde(default)]
    pub other_work: Option<f64>,
}

/// What one job did in a window's counted seconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Done {
    /// Its workload.
    pub workload: String,
    /// MPI calls that make progress, as its ranks published them.
    pub calls: u64,
    /// CPU seconds its processes had.
    pub cpu_s: f64,
    /// Rank-seconds in which all its ranks ran at once.
    pub together_s: f64,
    /// Runs of it that ended (verified) within the window.
    pub ended: u32,
    /// Runs of it that began and ended (verified) within the window's counted part.
    #[serde(default)]
    pub whole: u32,
    /// Their wall seconds in all, each from its start to the middle of the period its end was seen in (unbiased by
    /// the period).
    #[serde(default)]
    pub whole_s: f64,
}

/// The record of one comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// MPI progress mode.
    pub progress: String,
    /// The mix.
    pub mix: String,
    /// Why it failed; `None` when it ran its course.
    pub failed: Option<String>,
    /// Its rounds.
    pub rounds: u32,
    /// When it ran (seconds since the epoch, from before its first job started to after its last one stopped):
    /// where what `auto` held meanwhile is found in the agent's records, tallied at the run's end ([`HELD`]).
    /// `None` in records of builds that kept no span.
    #[serde(default)]
    pub span: Option<[f64; 2]>,
}

/// Runs every mix (of more than one workload, or every one with `unloaded`) in every progress mode as a paired
/// comparison of the spec's policies; stores its windows and comparisons.
pub fn run(spec: &Spec, ab: &Ab, paths: &Paths) -> anyhow::Result<Outcome> {
    std::fs::create_dir_all(&paths.work)?;
    let store = Store::open(&paths.store)?;
    let session = now();
    let comparisons: Vec<(Progress, &Vec<String>)> = spec
        .progress
        .iter()
        .flat_map(|&p| spec.mixes.iter().filter(|m| m.len() > 1 || spec.unloaded).map(move |m| (p, m)))
        .collect();
    // The agent keeps its records of slots and choices as long as the run lasts, so that its end finds those of
    // the first comparison too.
    let lasts = ab.duration.saturating_mul(u32::try_from(comparisons.len()).unwrap_or(u32::MAX));
    let retention = lasts.saturating_add(RETENTION_MARGIN).clamp(DEFAULT_RETENTION, LONGEST_RETENTION);
    let agent = PrivateAgent::start(paths, &["--retention".to_string(), duration::format(retention)])?;
    let site = Site { socket: &agent.socket, containers: None, cluster: None };
    let mut bar = CaseProgress::new(comparisons.len());
    let mut failures = Failures::default();
    let mut ran = Vec::new();
    for (number, &(progress, mix)) in comparisons.iter().enumerate() {
        let case = Case {
            mix,
            policy: spec.policies[0],
            label: String::new(),
            progress,
            ranks_in: RanksIn::Process,
            repetition: 1,
            number,
        };
        let what = format!("paired {progress} {}", mix.join("+"));
        bar.start(what.clone());
        let mut comparison =
            Comparison { progress: progress.to_string(), mix: mix.join("+"), failed: None, rounds: 0, span: None };
        let mut runner = Runner { spec, ab, paths, site: &site, case, what, jobs: Vec::new() };
        // This comparison's own failures: its record says its own, the run's end says the first of all.
        let mut failed = Failures::default();
        let from = now();
        let result = runner.compare(&mut failed);
        runner.stop();
        comparison.span = Some([from, now()]);
        let windows = result?;
        let why = failed.first().map(str::to_string).or_else(|| too_little(spec, ab, &runner.what, &windows));
        if let Some(why) = why {
            failures.add(why.clone());
            comparison.failed = Some(why);
        } else {
            comparison.rounds = windows.iter().map(|w| w.round + 1).max().unwrap_or(0);
            for w in &windows {
                records::save(&store, &spec.name, session, WINDOW, w)?;
            }
        }
        records::save(&store, &spec.name, session, COMPARISON, &comparison)?;
        bar.done(comparison.failed.is_some());
        ran.push(comparison);
    }
    bar.finish();
    // Stopped, the agent has stored every record of its slots and choices.
    drop(agent);
    if spec.runs_auto() {
        for c in ran.iter().filter(|c| c.failed.is_none()) {
            let saved = held_in(&store, &c.progress, &c.mix, c.span).and_then(|held| {
                match held.filter(|h| !h.slots.is_empty()) {
                    Some(h) => records::save(&store, &spec.name, session, HELD, &h),
                    None => Ok(()),
                }
            });
            if let Err(e) = saved {
                // What was measured is stored; the report reads the agent's records instead while they are kept.
                eprintln!("lockstep: what auto held in {} {} is not stored: {e:#}", c.progress, c.mix);
            }
        }
    }
    Ok(Outcome { session, failures })
}

/// The least share of the windows' time after their settles that must have been counted (every job at work) for
/// a comparison to stand: less says that the jobs mostly started and ended, or that the agent could not read them.
const LEAST_COUNTED: f64 = 0.25;

/// The least share of a comparison's rounds in which every measured job had a whole run under every policy, for a
/// comparison by whole runs (`measure = "runs"`) to stand: fewer says that the windows are too short for the runs.
const LEAST_ROUNDS_WITH_RUNS: f64 = 0.5;

/// Why comparison `what` measured too little to stand (see [`LEAST_COUNTED`], and [`LEAST_ROUNDS_WITH_RUNS`] by
/// whole runs); `None` when it measured enough.
fn too_little(spec: &Spec, ab: &Ab, what: &str, windows: &[Window]) -> Option<String> {
    if ab.by == By::Runs {
        let mut rounds: BTreeMap<u32, bool> = BTreeMap::new();
        for w in windows {
            let every = w.jobs.iter().all(|d| d.whole > 0 || spec.workloads[&d.workload].background);
            *rounds.entry(w.round).or_insert(true) &= every;
        }
        let read = rounds.values().filter(|&&r| r).count();
        return ((read as f64) < LEAST_ROUNDS_WITH_RUNS * rounds.len() as f64).then(|| {
            format!(
                "case {what}: only {read} of {} rounds had a whole run of every job under every policy (expected at \
                 least {:.0} %: windows too short for the runs)",
                rounds.len(),
                LEAST_ROUNDS_WITH_RUNS * 100.0
            )
        });
    }
    let counted: f64 = windows.iter().map(|w| w.seconds).sum();
    let span = windows.len() as f64 * ab.window.saturating_sub(ab.settle).as_secs_f64();
    (counted < LEAST_COUNTED * span).then(|| {
        format!(
            "case {what}: only {counted:.0} s of the windows' {span:.0} s had every job at work (expected at least \
             {:.0} %: runs too short for the windows, or jobs the agent could not read)",
            LEAST_COUNTED * 100.0
        )
    })
}

/// One job of the mix as it runs: its current run, and its last reading.
struct Job {
    workload: String,
    /// Its place in the mix.
    index: usize,
    background: bool,
    /// Runs started so far.
    runs: u32,
    run: Option<Started>,
    /// The current run's last reading; `None` before the first, and when the agent did not list it.
    last: Option<Sample>,
}

/// One comparison as it runs.
struct Runner<'a> {
    spec: &'a Spec,
    ab: &'a Ab,
    paths: &'a Paths,
    site: &'a Site<'a>,
    case: Case<'a>,
    what: String,
    jobs: Vec<Job>,
}

impl Runner<'_> {
    /// Runs the comparison; returns its windows, none when a job failed (noted in `failures`).
    fn compare(&mut self, failures: &mut Failures) -> anyhow::Result<Vec<Window>> {
        let (ab, spec) = (self.ab, self.spec);
        // Background load first, so that the measured jobs start under it.
        let mut order: Vec<(usize, &String)> = self.case.mix.iter().enumerate().collect();
        order.sort_by_key(|(_, w)| !spec.workloads[*w].background);
        for (index, workload) in order {
            let background = spec.workloads[workload].background;
            self.jobs.push(Job { workload: workload.clone(), index, background, runs: 0, run: None, last: None });
            let last = self.jobs.len() - 1;
            self.start(last)?;
        }
        self.jobs.sort_by_key(|j| j.index);
        let k = ab.arms.len();
        // An even number of rounds, every other one in reverse (A B, B A, …): a drift of the machine's speed that is
        // linear over a pair of rounds weighs on each policy alike, and so does going first or second.
        let rounds = ab.rounds();
        let turns: Vec<(u32, usize)> =
            (0..rounds).flat_map(|r| (0..k).map(move |i| (r, if r % 2 == 0 { i } else { k - 1 - i }))).collect();
        let mut windows = Vec::new();
        let mut turn = 0;
        let mut started = self.switch(turns[0].1)?;
        let mut done = vec![Done::default(); self.jobs.len()];
        let mut seconds = 0.0;
        // The CPUs the jobs may run on, whose other work is measured: this harness's own.
        let cpus = lockstep_cgroup::procfs::cpus_allowed(std::process::id() as i32)
            .and_then(|l| CpuList::parse(&l).ok())
            .unwrap_or_else(CpuList::online);
        let mut other = Other::default();
        let mut stopped = Stopped::default();
        // Readings on a grid of periods from the window's start: its counted part is then a whole number of
        // periods, as long as the spec made it (whole rounds of every slotted policy's rows, checked there: a whole
        // round holds every job's slots, wherever it starts).
        let (mut previous, mut next) = (started, started + PERIOD);
        let mut last_poll = started;
        let half = PERIOD / 2;
        loop {
            let handicap = ab.arms[turns[turn].1].handicap;
            if handicap > 0.0 {
                stopped.waste(&self.jobs, PERIOD.mul_f64(handicap));
            }
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
            next += PERIOD;
            let poll = Instant::now();
            let Some(ended) = self.restart_ended(failures)? else { return Ok(Vec::new()) };
            let answer = check(call(self.site.socket, &Request::Progress)?)?;
            let at = Instant::now();
            let busy = cpus_busy(&cpus);
            let totals: BTreeMap<String, Sample> =
                answer.progress.unwrap_or_default().into_iter().map(|p| (p.job.to_string(), p.totals)).collect();
            // What happened before the window's settle ended is the switch's, and counts nowhere; nor does a period
            // in which a measured job was not at work all through: it ended, or its run was still starting or already
            // ending (not every rank published its calls, or not every rank ran yet), so that what is compared is
            // the jobs' speed while they work, not where their runs' starts fell.
            let mut clean = previous + half >= started + ab.settle && ended.is_empty();
            let mut did = Vec::new();
            // Every job's CPU time, at work or not (background load that is not); `None` when one was not read.
            let mut jobs_cpu = Some(0.0);
            for job in &mut self.jobs {
                let now = job.run.as_ref().and_then(|r| totals.get(&r.name)).copied();
                let working = |s: &Sample| working(s, spec.workloads[&job.workload].profiler, spec.ranks);
                // What it did since its last reading, and whether it was at work at both.
                let step =
                    job.last.zip(now).map(|(before, now)| (between(&before, &now), working(&before) && working(&now)));
                jobs_cpu = jobs_cpu.zip(step).map(|(c, ((_, cpu_s, _), _))| c + cpu_s);
                match step {
                    Some((d, true)) => did.push(d),
                    _ if job.background => did.push((0, 0.0, 0.0)),
                    _ => clean = false,
                }
                job.last = now;
            }
            if clean {
                let period = at.duration_since(previous).as_secs_f64();
                other.add(busy, jobs_cpu, period);
                for (d, (calls, cpu_s, together_s)) in done.iter_mut().zip(did) {
                    d.calls += calls;
                    d.cpu_s += cpu_s;
                    d.together_s += together_s;
                }
                seconds += period;
            }
            other.last = busy;
            count_ended(&mut done, &ended, [last_poll, poll], started + ab.settle);
            last_poll = poll;
            previous = at;
            if at + half >= started + ab.window {
                let (round, arm) = turns[turn];
                for (d, job) in done.iter_mut().zip(&self.jobs) {
                    d.workload.clone_from(&job.workload);
                }
                windows.push(Window {
                    progress: self.case.progress.to_string(),
                    mix: self.case.mix.join("+"),
                    arm,
                    label: ab.arms[arm].label.clone(),
                    round,
                    seconds,
                    jobs: std::mem::replace(&mut done, vec![Done::default(); self.jobs.len()]),
                    other_work: other.share(),
                });
                seconds = 0.0;
                other = Other { last: other.last, ..Other::default() };
                turn += 1;
                if turn == turns.len() {
                    return Ok(windows);
                }
                started = self.switch(turns[turn].1)?;
                (previous, next) = (started, started + PERIOD);
            }
        }
    }

    /// Puts policy `arm` in force; returns when it was.
    fn switch(&self, arm: usize) -> anyhow::Result<Instant> {
        let policy = self.spec.policies[arm];
        check(call(self.site.socket, &policy.agent_request())?)?;
        Ok(Instant::now())
    }

    /// Starts job `j`'s next run.
    fn start(&mut self, j: usize) -> anyhow::Result<()> {
        let job = &mut self.jobs[j];
        let name = format!("{}-{}-{}-{}", self.spec.name, job.workload, job.index, job.runs);
        job.run = Some(start_job(self.spec, self.paths, self.site, &self.case, &job.workload, name)?);
        job.runs += 1;
        job.last = None;
        Ok(())
    }

    /// Starts again every job whose run ended and verified; returns the measured ones that ended, each with when
    /// its run started, or `None` when one failed (noted in `failures`).
    fn restart_ended(&mut self, failures: &mut Failures) -> anyhow::Result<Option<Vec<(usize, Instant)>>> {
        let mut ended = Vec::new();
        for j in 0..self.jobs.len() {
            let background = self.jobs[j].background;
            let Some(run) = self.jobs[j].run.as_mut() else { continue };
            let Some(status) = run.child.try_wait()? else { continue };
            // Reaped: its PID is no longer its own, and nothing may signal it again.
            let Some(mut run) = self.jobs[j].run.take() else { continue };
            let mut stdout = String::new();
            if let Some(mut out) = run.child.stdout.take() {
                out.read_to_string(&mut stdout)?;
            }
            // Background load verifies nothing; a measured job's kernel says whether its result verified.
            let verified = (!background).then(|| verified(&stdout));
            let stderr = stderr_file(self.paths, &run.name);
            if failures.note(&self.what, &run.name, status.code(), verified, Some(&stderr)) {
                return Ok(None);
            }
            // A run that did its work leaves nothing behind: a long comparison starts hundreds.
            let _ = std::fs::remove_file(&stderr);
            let _ = std::fs::remove_file(&run.pmpi);
            if !background {
                ended.push((j, run.t0));
            }
            self.start(j)?;
        }
        Ok(Some(ended))
    }

    /// Stops every job's current run.
    fn stop(&mut self) {
        let runs: Vec<Started> = self.jobs.iter_mut().filter_map(|j| j.run.take()).collect();
        stop_jobs(None, &runs);
    }
}

/// Counts the runs `ended` (each its job's place and when it started), seen between two looks `[before, now]`, in
/// the window whose counted part began at `counted`: each as ended, and those that began in the counted part as
/// whole, each run's wall time taken to the middle of the two looks. That is unbiased where its end is as likely
/// anywhere between them: runs start at a look, so it needs their lengths to vary by a period or more.
fn count_ended(done: &mut [Done], ended: &[(usize, Instant)], [before, now]: [Instant; 2], counted: Instant) {
    let end = before + now.duration_since(before) / 2;
    for &(i, t0) in ended {
        done[i].ended += 1;
        if t0 >= counted {
            done[i].whole += 1;
            done[i].whole_s += end.duration_since(t0).as_secs_f64();
        }
    }
}

/// Whether a kernel's output (`--json`) says its result verified.
fn verified(stdout: &str) -> bool {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .any(|v| v.get("kernel").is_some() && v["verified"] == true)
}

/// Whether a run whose reading is `s` is at work: every one of its `ranks` publishes its MPI calls (a `profiled`
/// job's), or runs where the agent counts its ranks (a job without the profiler's).
fn working(s: &Sample, profiled: bool, ranks: u32) -> bool {
    if profiled {
        s.publishers >= ranks
    } else {
        s.together_ns.is_none() || s.ranks >= ranks
    }
}

/// What a run did between readings `a` and `b`: MPI calls, CPU seconds, and co-scheduled rank-seconds. A count
/// that went back (a rank ended, and its count with it) or ranks counted afresh give none of it.
fn between(a: &Sample, b: &Sample) -> (u64, f64, f64) {
    let calls = b.calls.unwrap_or(0).saturating_sub(a.calls.unwrap_or(0));
    let cpu = b.cpu_ns.saturating_sub(a.cpu_ns) as f64 / 1e9;
    let together = match (a.together_ns, b.together_ns) {
        (Some(x), Some(y)) if a.ranks == b.ranks => y.saturating_sub(x) as f64 / 1e9 * f64::from(b.ranks),
        _ => 0.0,
    };
    (calls, cpu, together)
}

/// The CPU time that went to other work than the mix's jobs in a window's counted periods, on the CPUs the jobs
/// may run on.
#[derive(Default)]
struct Other {
    /// Those CPUs' busy time at the last reading; `None` where it could not be read.
    last: Option<CpuBusy>,
    /// CPU-seconds of other work in the periods read so far.
    work_s: f64,
    /// CPU-seconds the CPUs had in those periods.
    capacity_s: f64,
}

impl Other {
    /// Adds a counted period of `seconds` that ended at the CPUs' reading `busy`, in which the jobs had `jobs_s`
    /// CPU-seconds. A period of which either is not known is left out. Its first reading is that of the period
    /// before, never a switch's: a window's first period is in its settle (at least a period long), never counted.
    fn add(&mut self, busy: Option<CpuBusy>, jobs_s: Option<f64>, seconds: f64) {
        if let (Some(before), Some(now), Some(jobs_s)) = (self.last, busy, jobs_s) {
            if before.cpus == now.cpus {
                self.work_s += now.busy_s - before.busy_s - jobs_s;
                self.capacity_s += f64::from(now.cpus) * seconds;
            }
        }
    }

    /// The share of the CPUs' time that went to other work in the periods read, none below 0 (their clock ticks
    /// and the jobs' nanoseconds are read at slightly different moments); `None` where none was read.
    fn share(&self) -> Option<f64> {
        (self.capacity_s > 0.0).then(|| (self.work_s / self.capacity_s).max(0.0))
    }
}

/// The processes a handicap stops: every process of every job's run, listed again every period while some run is
/// young (its ranks are still being started), and every [`RELIST`] periods after.
#[derive(Default)]
struct Stopped {
    processes: Vec<ProcessRef>,
    /// The runs they were listed for.
    runs: Vec<u32>,
    /// Periods since the runs last changed, and since the processes were last listed.
    steady: u32,
    age: u32,
}

impl Stopped {
    /// Stops every process of the jobs' runs for `stop`, then lets them go on; a signal that ends the experiment
    /// meanwhile lets them go on too (crate::harness::teardown), before it stops them.
    fn waste(&mut self, jobs: &[Job], stop: Duration) {
        let runs: Vec<u32> = jobs.iter().map(|j| j.runs).collect();
        if runs != self.runs {
            (self.runs, self.steady) = (runs, 0);
        }
        if self.steady < RELIST || self.age >= RELIST {
            let roots: Vec<i32> = jobs.iter().filter_map(|j| Some(j.run.as_ref()?.child.id() as i32)).collect();
            self.processes = descendants(&roots);
            self.age = 0;
        }
        self.steady += 1;
        self.age += 1;
        let held = Held(&self.processes);
        let go_on = self.processes.clone();
        let _teardown = crate::harness::teardown::register(move || {
            for p in go_on {
                let _ = p.signal(libc::SIGCONT);
            }
        });
        for p in held.0 {
            let _ = p.signal(libc::SIGSTOP);
        }
        std::thread::sleep(stop);
        drop(held);
    }
}

/// Stopped processes, sent SIGCONT when dropped (also when what stopped them unwinds).
struct Held<'a>(&'a [ProcessRef]);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        for p in self.0 {
            let _ = p.signal(libc::SIGCONT);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(calls: Option<u64>, cpu_ns: u64, together_ns: Option<u64>, ranks: u32) -> Sample {
        Sample { calls, cpu_ns, together_ns, ranks, ..Sample::default() }
    }

    #[test]
    fn a_run_is_whole_when_it_began_in_the_counted_part_and_lasts_to_the_middle_of_the_looks_it_ended_between() {
        let t = Instant::now();
        let at = |ms: u64| t + Duration::from_millis(ms);
        let mut done = vec![Done::default(); 3];
        // Job 0 began before the counted part (at 300 ms, from 400 ms on), job 1 at its start, job 2 after.
        count_ended(&mut done, &[(0, at(300)), (1, at(400)), (2, at(1000))], [at(3800), at(4000)], at(400));
        assert_eq!(done.iter().map(|d| (d.ended, d.whole)).collect::<Vec<_>>(), [(1, 0), (1, 1), (1, 1)]);
        assert!((done[1].whole_s - 3.5).abs() < 1e-9 && (done[2].whole_s - 2.9).abs() < 1e-9, "{done:?}");
        assert!(done[0].whole_s.abs() < 1e-9, "{done:?}");
    }

    #[test]
    fn a_comparison_by_whole_runs_stands_with_a_whole_run_of_every_job_in_half_its_rounds() {
        let text = super::super::spec::tests::GOOD.replace("mpl = [1, 2]", "mixes = [[\"lu\", \"ep\"]]")
            + "[ab]\nduration = \"1m\"\nmeasure = \"runs\"\n";
        let spec = super::super::spec::tests::parse(&text).unwrap();
        let ab = spec.ab.clone().unwrap();
        let window = |round, arm, whole: [u32; 2]| Window {
            progress: "busy".into(),
            mix: "lu+ep".into(),
            arm,
            label: ab.arms[arm].label.clone(),
            round,
            seconds: 1.0,
            jobs: ["lu", "ep"]
                .iter()
                .zip(whole)
                .map(|(j, w)| Done { workload: (*j).into(), whole: w, ..Done::default() })
                .collect(),
            other_work: None,
        };
        // Rounds 0 and 1 have a whole run of both jobs under both policies; rounds 2 and 3 miss one each.
        let mut windows: Vec<Window> =
            (0..4).flat_map(|r| (0..2).map(move |a| (r, a))).map(|(r, a)| window(r, a, [1, 2])).collect();
        assert_eq!(too_little(&spec, &ab, "paired busy lu+ep", &windows), None);
        windows[5].jobs[0].whole = 0;
        assert_eq!(too_little(&spec, &ab, "paired busy lu+ep", &windows), None);
        windows[6].jobs[1].whole = 0;
        windows[2].jobs[1].whole = 0;
        let why = too_little(&spec, &ab, "paired busy lu+ep", &windows).unwrap();
        assert!(why.contains("only 1 of 4 rounds had a whole run of every job under every policy"), "{why}");
    }

    #[test]
    fn a_run_counts_what_grew_between_readings_and_nothing_that_went_back() {
        let first = reading(Some(40), 2_000_000_000, Some(1_000_000_000), 2);
        let later = reading(Some(100), 3_000_000_000, Some(1_500_000_000), 2);
        assert_eq!(between(&first, &later), (60, 1.0, 1.0));
        // A rank ended: its calls left the sum, and the ranks counted changed.
        let ending = reading(Some(70), 3_100_000_000, Some(1_550_000_000), 1);
        assert_eq!(between(&later, &ending), (0, 0.1, 0.0));
        // A run whose ranks publish no calls (no profiler) counts none.
        assert_eq!(between(&reading(None, 5, None, 0), &reading(None, 9, None, 0)).0, 0);
    }

    #[test]
    fn a_run_works_once_every_rank_publishes_or_runs() {
        let s = |publishers, ranks| Sample { publishers, ranks, together_ns: Some(1), ..Sample::default() };
        assert!(!working(&s(1, 2), true, 2) && working(&s(2, 2), true, 2));
        // Starting (no rank exec'd yet: none preloads, none publishes) is not working.
        assert!(!working(&s(0, 0), true, 2));
        assert!(!working(&s(0, 1), false, 2) && working(&s(0, 2), false, 2));
        assert!(working(&Sample::default(), false, 2), "without the eBPF count a run works once seen");
    }

    #[test]
    fn a_kernel_verified_only_when_its_json_line_says_so() {
        assert!(verified("noise\n{\"kernel\":\"lu\",\"verified\":true}\n"));
        assert!(!verified("{\"kernel\":\"lu\",\"verified\":false}\n"));
        assert!(!verified("{\"verified\":true}\n"));
        assert!(!verified(""));
    }
}
