//! Per-job counters in the agent. A job is attached when the agent takes it on (before `lockstep run` starts
//! the command, so it is counted from its start), read every interval into the store and the `/metrics`
//! snapshot, and its final counts are written when it goes.
//!
//! Two ways to count a job, picked per job:
//! - **per cgroup** (perf's `-G`): one counter per event on each PU the job may use, observing every task of
//!   the job's cgroup (and its descendants) on that PU. Cost: events × PUs of the job, whatever its thread
//!   count; exact from the first instruction; processes that enter the cgroup later are counted with no
//!   action. Used whenever the job has a directory in the hierarchy that carries perf_event.
//! - **per thread**: one counter per event on each thread of the job, re-listed every interval; a thread that
//!   exits keeps its final count. Cost: events × threads; threads that live shorter than one interval are
//!   missed. Used for adopted cgroups outside the perf_event hierarchy (e.g. Slurm's v1 job cgroups).
//!
//! Beside the counters, every job gets three measures of how its ranks run (crate::together), as three more events
//! of its samples, in nanoseconds since its first rank was seen: [`RANK_RUNNING`], the time some rank was on a CPU;
//! [`COSCHEDULED`], the time every one of its ranks on this node was at once (its `enabled`: the time some rank
//! was); and [`RANK_WAITING`], the time one of them was runnable but not running.

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use crate::guarded::Guarded;
use std::time::{Duration, Instant};

use lockstep_core::cpulist::CpuList;
use lockstep_store::Store;
use lockstep_telemetry::counters::{Counters, Target};
use lockstep_telemetry::events::EventSpec;
use lockstep_telemetry::Sample;

use crate::together::{Reading, Together};
use lockstep_core::sample::{COSCHEDULED, RANK_RUNNING, RANK_WAITING};

/// What the agent counts, and how often.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The event groups (as `-e` takes them).
    pub groups: Vec<Vec<EventSpec>>,
    /// Read interval; `None`: counters are read only when a job goes (its totals).
    pub interval: Option<Duration>,
    /// Samples and decisions older than this are deleted.
    pub retention: Duration,
    /// Jobs that ended longer ago than this leave the store (`lockstep jobs --all`).
    pub job_history: Duration,
}

/// The agent's default events: perf stat's software events and the two hardware ones the counters paper starts from.
pub const DEFAULT_EVENTS: &str = "task-clock,context-switches,cpu-migrations,page-faults,cycles,instructions";

/// One job's counters.
struct JobCounters {
    counters: Counters,
    /// Per-thread counting: the cgroup directories whose processes' threads are counted.
    threads_of: Option<Vec<PathBuf>>,
    /// Whether some of its threads were left uncounted for want of descriptors (said once).
    short: bool,
}

/// The share of the agent's open-file limit its counters may take: the rest is for what undoes a change (held
/// freezer and weight files), the doors' connections, the store and `/proc`.
const COUNTER_SHARE: f64 = 0.5;

/// The counters of every job and the latest sample of each, shared by the agent, the sampling thread and the
/// HTTP server.
pub struct Telemetry {
    settings: Settings,
    /// Disabled counters of every tracepoint counted, on the agent itself (see [`hold_tracepoints`]).
    _held: Option<Counters>,
    /// The ranks' measures, where the eBPF program loaded.
    together: Option<Together>,
    /// Their failures, said once.
    faults: crate::faults::Faults,
    node: String,
    jobs: BTreeMap<String, JobCounters>,
    /// Latest cumulative sample per job (what `/metrics` shows).
    latest: BTreeMap<String, Vec<Sample>>,
    /// The sample per job before the latest (for shares over the last interval).
    previous: BTreeMap<String, Vec<Sample>>,
    /// Final samples of jobs that went, not yet written.
    finals: Vec<Sample>,
    /// Events this machine cannot count (said once).
    unsupported_said: bool,
    /// Counter targets (a thread, or a cgroup on one PU) all jobs together may have open: each takes one
    /// descriptor per event.
    budget: usize,
    stop: bool,
}

/// How a job's ranks ran since its first rank was seen, as shares of time (see [`COSCHEDULED`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Shares {
    /// Every rank on a CPU at once, of the time some rank was.
    pub coscheduled: Option<f64>,
    /// The same over the last sampling interval.
    pub coscheduled_window: Option<f64>,
    /// Some rank on a CPU, of the job's time.
    pub running: Option<f64>,
    /// Some rank runnable but not on a CPU, of the job's time.
    pub waiting: Option<f64>,
}

/// The telemetry and the condition its thread waits on.
pub type SharedTelemetry = Arc<Guarded<Telemetry>>;

/// A tracepoint stays registered with the kernel while any perf event uses it, and registering one takes tens
/// of milliseconds (the kernel patches code and waits for RCU): 41 tracepoints take 1.5 s here, which would
/// delay every job's start, since `lockstep run` waits for the attach. The agent holds, on itself, one counter
/// of each tracepoint it counts, never enabled (enable-on-exec, and the agent does not exec): attaching a job
/// then registers nothing. The probes stay armed meanwhile, a call per tracepoint hit that finds no counter
/// on that CPU and returns.
fn hold_tracepoints(groups: &[Vec<EventSpec>]) -> Option<Counters> {
    use lockstep_telemetry::events::Kind;
    let tracepoints: Vec<Vec<EventSpec>> =
        groups.iter().flatten().filter(|e| matches!(e.kind, Kind::Tracepoint(_))).map(|e| vec![e.clone()]).collect();
    if tracepoints.is_empty() {
        return None;
    }
    let mut held = Counters::new(&tracepoints, true);
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    match held.attach(0, Target::Thread { tid, inherit: false }) {
        Ok(()) => Some(held),
        Err(e) => {
            crate::log::warning!("cannot hold tracepoints registered ({e:#}); attaching jobs will be slower");
            None
        }
    }
}

impl Telemetry {
    /// Telemetry for `node` with `settings`, shared; the ranks' measures load against the kernel's BTF, or the
    /// BTF file `btf` names.
    pub fn shared(settings: Settings, node: &str, btf: Option<&std::path::Path>) -> SharedTelemetry {
        let together = match Together::load(btf) {
            Ok(t) => Some(t),
            Err(e) => {
                crate::log::warning!("jobs' co-scheduled time is not measured: {e:#}");
                None
            }
        };
        Arc::new(Guarded::new(Self {
            _held: hold_tracepoints(&settings.groups),
            together,
            faults: crate::faults::Faults::default(),
            node: node.to_string(),
            jobs: BTreeMap::new(),
            latest: BTreeMap::new(),
            previous: BTreeMap::new(),
            finals: Vec::new(),
            unsupported_said: false,
            budget: target_budget(settings.groups.iter().map(Vec::len).sum()),
            settings,
            stop: false,
        }))
    }

    /// Counter targets open now, over every job.
    fn targets(&self) -> usize {
        self.jobs.values().map(|j| j.counters.keys().count()).sum()
    }

    /// The node name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Starts counting job `name`, whose cgroups are `groups` (one list of directories per cgroup) and which
    /// may run on `pus`. Per cgroup when possible, else per thread; a failure is reported and the job runs
    /// uncounted.
    pub fn attach(&mut self, name: &str, groups: &[Vec<PathBuf>], pus: &CpuList) {
        if self.settings.groups.is_empty() || self.jobs.contains_key(name) {
            return;
        }
        if let Some(together) = &mut self.together {
            let dirs = groups.iter().filter_map(|d| d.first().cloned()).collect();
            if let Err(e) = together.attach(name, dirs).and_then(|()| together.rescan()) {
                crate::log::warning!("job {name}: co-scheduled time not measured: {e:#}");
            }
        }
        let mut counters = Counters::new(&self.settings.groups, false);
        let perf_dirs: Vec<PathBuf> = groups.iter().filter_map(|d| lockstep_cgroup::perf_event_dir(d)).collect();
        let free = self.budget.saturating_sub(self.targets());
        let mut short = false;
        let result = if perf_dirs.len() == groups.len() {
            let pus = if pus.is_empty() { CpuList::online() } else { pus.clone() };
            let need = perf_dirs.len() * pus.iter().count();
            if need > free {
                crate::log::warning!(
                    "job {name} is not counted: its cgroups need {need} counter targets, {free} of the \
                     agent's {} are free (half its open-file limit)",
                    self.budget
                );
                return;
            }
            attach_cgroups(&mut counters, &perf_dirs, &pus).map(|()| None)
        } else {
            let dirs: Vec<PathBuf> = groups.iter().filter_map(|d| d.first().cloned()).collect();
            short = rescan(&mut counters, &dirs, free);
            Ok(Some(dirs))
        };
        match result {
            Ok(threads_of) => {
                self.say_unsupported(&mut counters);
                if short {
                    say_short(name, self.budget);
                }
                let mut job = JobCounters { counters, threads_of, short };
                // A first (zero) sample, so that the job and its events show at once.
                if let Some(samples) = self.read_job(name, &mut job, lockstep_store::now()) {
                    self.latest.insert(name.to_string(), samples);
                }
                self.jobs.insert(name.to_string(), job);
            }
            Err(e) => crate::log::warning!("job {name} is not counted: {e:#}"),
        }
    }

    /// Names, once, the events this machine cannot count.
    fn say_unsupported(&mut self, counters: &mut Counters) {
        if self.unsupported_said {
            return;
        }
        if let Ok(readings) = counters.read() {
            let missing: Vec<&str> = counters
                .events
                .iter()
                .zip(&readings)
                .filter(|(_, r)| r.is_none())
                .map(|(e, _)| e.name.as_str())
                .collect();
            if !missing.is_empty() {
                crate::log::warning!("not supported on this machine, not counted: {}", missing.join(","));
            }
            self.unsupported_said = true;
        }
    }

    /// Stops counting job `name`: its final counts are queued for the store.
    pub fn detach(&mut self, name: &str) {
        let Some(mut job) = self.jobs.remove(name) else { return };
        let time = lockstep_store::now();
        if let Some(samples) = self.read_job(name, &mut job, time) {
            self.finals.extend(samples);
        }
        if let Some(together) = &mut self.together {
            together.detach(name);
        }
        self.latest.remove(name);
        self.previous.remove(name);
    }

    /// Detaches every job (the agent is stopping).
    pub fn detach_all(&mut self) {
        let names: Vec<String> = self.jobs.keys().cloned().collect();
        for name in names {
            self.detach(&name);
        }
    }

    fn read_job(&self, name: &str, job: &mut JobCounters, time: f64) -> Option<Vec<Sample>> {
        let readings = match job.counters.read() {
            Ok(r) => r,
            Err(e) => {
                crate::log::warning!("cannot read the counters of job {name}: {e}");
                return None;
            }
        };
        let sample = |event: &str, value, enabled, running| Sample {
            job: name.to_string(),
            node: self.node.clone(),
            time,
            event: event.to_string(),
            value,
            enabled,
            running,
        };
        let mut samples: Vec<Sample> = job
            .counters
            .events
            .iter()
            .zip(readings)
            .filter_map(|(e, r)| r.map(|r| sample(&e.name, r.value, r.enabled, r.running)))
            .collect();
        if let Some(t) = self.together.as_ref().and_then(|t| t.read(name)) {
            samples.push(sample(RANK_RUNNING, t.active, t.span, t.span));
            samples.push(sample(COSCHEDULED, t.together, t.active, t.active));
            samples.push(sample(RANK_WAITING, t.waiting, t.span, t.span));
        }
        Some(samples)
    }

    /// What the eBPF program measured of job `name`'s ranks until now, where it loaded.
    pub fn together(&self, name: &str) -> Option<Reading> {
        self.together.as_ref()?.read(name)
    }

    /// The eBPF program that measures the jobs' ranks, where it loaded.
    pub(crate) fn together_program(&self) -> Option<&Together> {
        self.together.as_ref()
    }

    /// Reads every job (re-listing the threads of per-thread jobs first); returns the samples.
    fn sample(&mut self) -> Vec<Sample> {
        match self.together.as_mut().map(Together::rescan) {
            Some(Err(e)) => self.faults.report("co-scheduled time", &format!("cannot register the jobs' ranks: {e:#}")),
            Some(Ok(())) => self.faults.clear("co-scheduled time"),
            None => {}
        }
        let time = lockstep_store::now();
        let mut free = self.budget.saturating_sub(self.targets());
        let mut jobs = std::mem::take(&mut self.jobs);
        let mut out = Vec::new();
        for (name, job) in &mut jobs {
            if let Some(dirs) = &job.threads_of {
                let before = job.counters.keys().count();
                let short = rescan(&mut job.counters, dirs, free + before);
                free = (free + before).saturating_sub(job.counters.keys().count());
                if short && !job.short {
                    say_short(name, self.budget);
                }
                job.short = short;
            }
            if let Some(samples) = self.read_job(name, job, time) {
                if let Some(before) = self.latest.insert(name.clone(), samples.clone()) {
                    self.previous.insert(name.clone(), before);
                }
                out.extend(samples);
            }
        }
        self.jobs = jobs;
        out
    }

    /// The latest samples of every job, for `/metrics`.
    pub fn latest(&self) -> impl Iterator<Item = &Sample> {
        self.latest.values().flatten()
    }

    /// The latest samples of job `name`, if the agent counts it now.
    pub fn latest_of(&self, name: &str) -> Option<&[Sample]> {
        if !self.jobs.contains_key(name) {
            return None;
        }
        Some(self.latest.get(name).map_or(&[], Vec::as_slice))
    }

    /// How job `name`'s ranks ran, from its latest samples: `None` where the agent does not measure it.
    pub fn shares(&self, name: &str) -> Option<Shares> {
        let of = |samples: Option<&Vec<Sample>>, event: &str| samples?.iter().find(|s| s.event == event).cloned();
        let (latest, previous) = (self.latest.get(name), self.previous.get(name));
        let now = of(latest, COSCHEDULED)?;
        Some(Shares {
            coscheduled: now.share(),
            coscheduled_window: of(previous, COSCHEDULED).and_then(|before| now.share_since(&before)),
            running: of(latest, RANK_RUNNING).and_then(|s| s.share()),
            waiting: of(latest, RANK_WAITING).and_then(|s| s.share()),
        })
    }

    /// Number of jobs counted.
    pub fn job_count(&self) -> usize {
        self.jobs.len()
    }
}

/// Opens the counters of `dirs` (perf_event cgroups) on each PU.
fn attach_cgroups(counters: &mut Counters, dirs: &[PathBuf], pus: &CpuList) -> anyhow::Result<()> {
    for (i, dir) in dirs.iter().enumerate() {
        let cgroup = File::open(dir).map_err(|e| anyhow::anyhow!("cannot open {}: {e}", dir.display()))?;
        for cpu in pus.iter() {
            // Keys: cgroup index × 2^20 + CPU, distinct from any other target of this job.
            counters.attach(((i as i64) << 20) | cpu as i64, Target::Cgroup { cgroup: &cgroup, cpu })?;
        }
        // The kernel holds the cgroup for as long as its counters live; the directory fd may go.
    }
    Ok(())
}

/// Counter targets the agent's counters may hold together, with `events` descriptors each: [`COUNTER_SHARE`] of
/// its open-file limit.
fn target_budget(events: usize) -> usize {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit with a valid rlimit.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) } == 0 { limit.rlim_cur } else { 1024 };
    let share = (soft.min(1 << 30) as f64 * COUNTER_SHARE) as usize;
    share / events.max(1)
}

/// Says that job `name` has threads left uncounted, the agent's counters holding all of `budget`.
fn say_short(name: &str, budget: usize) {
    crate::log::warning!(
        "job {name} is counted in part: some of its threads are not, the agent's counters holding \
         all {budget} targets their descriptors allow (half its open-file limit)"
    );
}

/// Attaches to the threads now in `dirs` (and below) that are not counted yet, while the job holds fewer than
/// `most` targets; detaches threads that exited (their final counts stay in the totals). Returns whether some
/// threads were left uncounted.
fn rescan(counters: &mut Counters, dirs: &[PathBuf], most: usize) -> bool {
    let pids: Vec<i32> = dirs.iter().flat_map(|d| lockstep_cgroup::procs_below(d).unwrap_or_default()).collect();
    let tids: Vec<i64> =
        pids.iter().filter_map(|&p| lockstep_cgroup::procfs::threads(p)).flatten().map(i64::from).collect();
    let listed: HashSet<i64> = tids.iter().copied().collect();
    let gone: Vec<i64> = counters.keys().filter(|k| !listed.contains(k)).collect();
    for k in gone {
        let _ = counters.detach(k);
    }
    let known: HashSet<i64> = counters.keys().collect();
    let mut held = known.len();
    for tid in tids.into_iter().filter(|t| !known.contains(t)) {
        if held >= most {
            return true;
        }
        // A thread may exit between listing and attaching: skip it.
        if counters.attach(tid, Target::Thread { tid: tid as i32, inherit: false }).is_ok() {
            held += 1;
        }
    }
    false
}

/// Samples every interval (and writes final samples as jobs go) on a thread of its own, with its own store
/// connection; deletes samples and decisions past the retention, and ended jobs past the job history, once a
/// minute.
pub fn spawn(telemetry: SharedTelemetry, store_path: PathBuf) -> anyhow::Result<std::thread::JoinHandle<()>> {
    let mut store = Store::open(&store_path)?;
    Ok(std::thread::spawn(move || {
        // The daemon takes the telemetry lock to count and uncount jobs as they come and go: held by an
        // ordinary thread preempted by the jobs, it would hold a slot switch back (a whole slot, measured).
        crate::realtime::thread("sampling");
        let mut t = telemetry.lock();
        let interval = t.settings.interval;
        let (retention, job_history) = (t.settings.retention, t.settings.job_history);
        let mut next = interval.map(|i| Instant::now() + i);
        let mut next_expiry = Instant::now();
        let mut faults = crate::faults::Faults::default();
        loop {
            let mut batch = std::mem::take(&mut t.finals);
            if let Some(at) = next.filter(|at| Instant::now() >= *at) {
                batch.extend(t.sample());
                next = interval.map(|i| at + i);
            }
            let stop = t.stop;
            drop(t);
            if !batch.is_empty() {
                match store.insert_samples(&batch) {
                    Ok(()) => faults.clear("samples"),
                    Err(e) => faults.report("samples", &format!("cannot store them: {e:#}")),
                }
            }
            if Instant::now() >= next_expiry {
                let now = lockstep_store::now();
                let _ = store.expire_samples(now - retention.as_secs_f64());
                let _ = store.expire_decisions(now - retention.as_secs_f64());
                let _ = store.expire_jobs(now - job_history.as_secs_f64());
                next_expiry = Instant::now() + Duration::from_mins(1);
            }
            if stop {
                return;
            }
            t = telemetry.lock();
            if t.finals.is_empty() && !t.stop {
                let wait = next.map_or(Duration::from_mins(1), |at| at.saturating_duration_since(Instant::now()));
                t = telemetry.wait(t, wait);
            }
        }
    }))
}

/// Tells the sampling thread to write what is left and stop; waits for it.
pub fn stop(telemetry: &SharedTelemetry, thread: std::thread::JoinHandle<()>) {
    {
        let mut t = telemetry.lock();
        t.detach_all();
        t.stop = true;
    }
    telemetry.notify();
    let _ = thread.join();
}
