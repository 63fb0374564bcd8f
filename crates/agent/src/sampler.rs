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
//!
//! The sampler's thread owns all of it (the counters, the ranks' measures, the samples) and runs at normal
//! priority: whatever a job makes it do (walk a tree, list threads, open counters) never holds up a slot switch.
//! The daemon attaches and detaches jobs by message ([`Counting`]: a send, never a wait); after each change and
//! each sample the thread publishes an immutable snapshot ([`Published`]) that the daemon, the doors and the
//! timeline read, taking a lock only to clone a pointer (the daemon not even that: it never waits for it). Each
//! look at a job's cgroup tree is bounded ([`lockstep_cgroup::JOB_TREE`]): a job whose tree was only partly walked
//! is said once; and a job's tree is walked no more often than its walks' cost allows (crate::walks): a wide tree is
//! walked less often than sampled, and said once.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use lockstep_cgroup::{Bounds, Cut, Walk, JOB_TREE};
use lockstep_core::cpulist::CpuList;
use lockstep_core::ident::JobKey;
use lockstep_store::Store;
use lockstep_telemetry::counters::{Counters, Target};
use lockstep_telemetry::events::EventSpec;
use lockstep_telemetry::Sample;

use crate::faults::Place;
use crate::together::timeline::{Recorder, Recording};
use crate::together::{Reading, Times, Together};
use crate::walks::Paced;
use lockstep_core::sample::{COSCHEDULED, RANK_RUNNING, RANK_WAITING};

/// What the agent counts, and how often.
#[derive(Clone, Debug, PartialEq)]
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
    /// Per-thread counting: the threads of the processes of its tree are counted (re-listed at each walk of it).
    per_thread: bool,
    /// Whether some of its threads were left uncounted for want of descriptors (said once).
    short: bool,
}

/// How long a job's final counts stay on `/metrics` after its end: a scrape interval of up to a minute (Prometheus's
/// default) sees them at least once, so the job's last interval is not lost.
pub const FINALS_SERVED: Duration = Duration::from_mins(1);

/// The most ended jobs whose final counts are on `/metrics` at once.
const ENDED_SERVED: usize = 1024;

/// The share of the agent's open-file limit its counters may take: the rest is for what undoes a change (held
/// freezer and weight files), the doors' connections, the store and `/proc`.
const COUNTER_SHARE: f64 = 0.5;

/// The counters of every job and the latest sample of each: the sampler thread's own.
struct State {
    settings: Settings,
    /// Disabled counters of every tracepoint counted, on the agent itself (see [`hold_tracepoints`]).
    _held: Option<Counters>,
    /// The ranks' measures, where the eBPF program loaded.
    together: Option<Together>,
    /// Their failures, said once.
    faults: crate::faults::Faults,
    node: lockstep_core::ident::NodeName,
    jobs: BTreeMap<JobKey, JobCounters>,
    /// Latest cumulative sample per job (what `/metrics` shows).
    latest: BTreeMap<JobKey, Vec<Sample>>,
    /// The sample per job before the latest (for shares over the last interval).
    previous: BTreeMap<JobKey, Vec<Sample>>,
    /// Final samples of jobs that went, not yet written.
    finals: Vec<Sample>,
    /// Final samples of the jobs that went within [`FINALS_SERVED`], and when each went: still on `/metrics`.
    ended: BTreeMap<JobKey, (Instant, Vec<Sample>)>,
    /// Events this machine cannot count (said once).
    unsupported_said: bool,
    /// Counter targets (a thread, or a cgroup on one PU) all jobs together may have open: each takes one
    /// descriptor per event.
    budget: usize,
    /// Jobs whose tree a walk has cut short (said once each).
    cut: HashSet<JobKey>,
    /// Every job's cgroup directories (one per group), whose trees are walked for its ranks and threads, and how
    /// far.
    trees: BTreeMap<JobKey, (Vec<PathBuf>, Bounds)>,
    /// When each job's tree may be walked again, for what its walks cost.
    paced: Paced,
    /// The processes found at the last walk of each job whose tree is costly to walk (walked less often than
    /// sampled): published, so that the daemon's loop never walks such a tree.
    costly: BTreeMap<JobKey, Arc<Vec<i32>>>,
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

/// What the sampler published last: every counted job's latest samples and shares, and the ranks' times to read
/// live. Immutable: a reader holds it as long as it likes, and the sampler publishes the next beside it.
pub struct Published {
    node: lockstep_core::ident::NodeName,
    /// Latest cumulative samples per counted job (none yet: an empty list).
    latest: BTreeMap<JobKey, Vec<Sample>>,
    /// The final samples of the jobs that ended within [`FINALS_SERVED`].
    ended: Vec<Sample>,
    shares: BTreeMap<JobKey, Shares>,
    /// Where the eBPF program loaded.
    together: Option<Times>,
    /// The processes found at the last walk of each job whose tree is costly to walk.
    costly: BTreeMap<JobKey, Arc<Vec<i32>>>,
}

impl Published {
    /// The processes found at the sampler's last walk of job `name`'s tree, when that tree is costly to walk
    /// (walked less often than sampled, crate::walks): whoever needs them reads them here rather than walking it.
    /// `None` for a tree cheap to walk (or not walked by the sampler).
    pub fn costly_tree(&self, name: &JobKey) -> Option<&[i32]> {
        self.costly.get(name).map(|p| p.as_slice())
    }

    /// The node name.
    pub fn node(&self) -> &lockstep_core::ident::NodeName {
        &self.node
    }

    /// The latest samples of every job, for `/metrics`: those counted now, and the final ones of the jobs that
    /// ended within [`FINALS_SERVED`], so that a scrape after a job's end still sees its last interval.
    pub fn latest(&self) -> impl Iterator<Item = &Sample> {
        self.latest.values().flatten().chain(&self.ended)
    }

    /// The latest samples of job `name`, if the agent counts it.
    pub fn latest_of(&self, name: &JobKey) -> Option<&[Sample]> {
        self.latest.get(name).map(Vec::as_slice)
    }

    /// How job `name`'s ranks ran, from its latest samples: `None` where the agent does not measure it.
    pub fn shares(&self, name: &JobKey) -> Option<Shares> {
        self.shares.get(name).copied()
    }

    /// Number of jobs counted.
    pub fn job_count(&self) -> usize {
        self.latest.len()
    }

    /// What the eBPF program measured of job `name`'s ranks until now, read live from the kernel's map (the job as
    /// the sampler last saw it); `None` where it does not measure it.
    pub fn together(&self, name: &JobKey) -> Option<Reading> {
        self.together.as_ref()?.read(name)
    }
}

/// Where the latest [`Published`] is: the lock is held only to swap or clone the pointer, never across work.
type Cell = Arc<Mutex<Arc<Published>>>;

/// What the sampler's thread is asked, in the order it was sent.
enum Message {
    /// Start counting a job: its name, its cgroups (one list of directories per cgroup), the PUs it may use.
    Attach { name: JobKey, groups: Vec<Vec<PathBuf>>, pus: CpuList, bounds: Bounds },
    /// Stop counting a job (its final counts go to the store).
    Detach(JobKey),
    /// Answer once every message sent before is carried out and published.
    Sync(Sender<()>),
    /// Start recording a timeline (crate::together::timeline).
    TimelineStart(Sender<anyhow::Result<Recording>>),
    /// End the window of a recording, and hand it back.
    TimelineEnd(Box<Recording>, Sender<(Box<Recording>, anyhow::Result<()>)>),
    /// Detach every job, write what is left, end.
    Stop,
}

/// The sampler as the doors, the timeline and the agent's setup hold it: the snapshot, and its thread's address.
#[derive(Clone)]
pub struct Sampler {
    inbox: Sender<Message>,
    cell: Cell,
}

impl Sampler {
    /// The latest snapshot (the lock held only to clone its pointer).
    pub fn published(&self) -> Arc<Published> {
        self.cell.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Waits, at most `within`, until the thread has carried out and published every message sent before (a job
    /// the daemon attached before it answered is then counted); whether it has.
    pub fn synced(&self, within: Duration) -> bool {
        let (reply, answer) = mpsc::channel();
        self.inbox.send(Message::Sync(reply)).is_ok() && answer.recv_timeout(within).is_ok()
    }

    /// The daemon's side of it.
    pub fn counting(&self) -> Counting {
        Counting { inbox: self.inbox.clone(), cell: self.cell.clone(), last: RefCell::new(self.published()) }
    }

    /// Tells the thread to detach every job, write what is left and stop; waits for it.
    pub fn stop(&self, thread: std::thread::JoinHandle<()>) {
        let _ = self.inbox.send(Message::Stop);
        let _ = thread.join();
    }
}

impl Recorder for Sampler {
    /// Starts recording a timeline, on the sampler's thread (which owns the program).
    fn start_timeline(&self) -> anyhow::Result<Recording> {
        let (reply, answer) = mpsc::channel();
        self.inbox.send(Message::TimelineStart(reply)).map_err(|_| stopping())?;
        answer.recv().map_err(|_| stopping())?
    }

    /// Ends the window of `recording`, on the sampler's thread.
    fn end_timeline(&self, recording: Recording) -> anyhow::Result<Recording> {
        let (reply, answer) = mpsc::channel();
        self.inbox.send(Message::TimelineEnd(Box::new(recording), reply)).map_err(|_| stopping())?;
        let (recording, ended) = answer.recv().map_err(|_| stopping())?;
        ended.map(|()| *recording)
    }
}

/// The error of a request the sampler's thread will not answer.
fn stopping() -> anyhow::Error {
    anyhow::anyhow!("the agent is stopping (its sampler has ended)")
}

/// The daemon's side of the sampler: jobs attached and detached by message, and the snapshot read without ever
/// waiting (when the sampler is swapping it that moment, the one read before serves).
pub struct Counting {
    inbox: Sender<Message>,
    cell: Cell,
    last: RefCell<Arc<Published>>,
}

impl Counting {
    /// Starts counting job `name`, whose cgroups are `groups` (one list of directories per cgroup), whose tree is
    /// walked within `bounds`, and which may run on `pus`: sent, not waited for.
    pub fn attach(&self, name: &JobKey, groups: Vec<Vec<PathBuf>>, pus: CpuList, bounds: Bounds) {
        let _ = self.inbox.send(Message::Attach { name: name.clone(), groups, pus, bounds });
    }

    /// Stops counting job `name`; its final counts go to the store. Sent, not waited for.
    pub fn detach(&self, name: &JobKey) {
        let _ = self.inbox.send(Message::Detach(name.clone()));
    }

    /// The latest snapshot the lock could be had for without waiting.
    pub fn published(&self) -> Arc<Published> {
        let now = match self.cell.try_lock() {
            Ok(cell) => Some(cell.clone()),
            Err(TryLockError::Poisoned(cell)) => Some(cell.into_inner().clone()),
            Err(TryLockError::WouldBlock) => None,
        };
        if let Some(now) = now {
            *self.last.borrow_mut() = now;
        }
        self.last.borrow().clone()
    }
}

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
            log::warn!("cannot hold tracepoints registered ({e:#}); attaching jobs will be slower");
            None
        }
    }
}

impl State {
    /// The state for `node` with `settings`; the ranks' measures load against the kernel's BTF, or the BTF file
    /// `btf` names.
    fn new(settings: Settings, node: &lockstep_core::ident::NodeName, btf: Option<&std::path::Path>) -> Self {
        let together = match Together::load(btf) {
            Ok(t) => Some(t),
            Err(e) => {
                log::warn!("jobs' co-scheduled time is not measured: {e:#}");
                None
            }
        };
        Self {
            _held: hold_tracepoints(&settings.groups),
            together,
            faults: crate::faults::Faults::default(),
            node: node.clone(),
            jobs: BTreeMap::new(),
            latest: BTreeMap::new(),
            previous: BTreeMap::new(),
            finals: Vec::new(),
            ended: BTreeMap::new(),
            unsupported_said: false,
            budget: target_budget(settings.groups.iter().map(Vec::len).sum()),
            settings,
            cut: HashSet::new(),
            trees: BTreeMap::new(),
            paced: Paced::default(),
            costly: BTreeMap::new(),
        }
    }

    /// Counter targets open now, over every job.
    fn targets(&self) -> usize {
        self.jobs.values().map(|j| j.counters.keys().count()).sum()
    }

    /// Starts counting job `name`, whose cgroups are `groups` (one list of directories per cgroup), walked within
    /// `bounds`, and which may run on `pus`. Per cgroup when possible, else per thread; a failure is reported and
    /// the job runs uncounted.
    fn attach(&mut self, name: &JobKey, groups: &[Vec<PathBuf>], pus: &CpuList, bounds: Bounds) {
        if self.settings.groups.is_empty() || self.jobs.contains_key(name) {
            return;
        }
        let dirs: Vec<PathBuf> = groups.iter().filter_map(|d| d.first().cloned()).collect();
        let perf_dirs: Vec<PathBuf> = groups.iter().filter_map(|d| lockstep_cgroup::perf_event_dir(d)).collect();
        let per_thread = perf_dirs.len() != groups.len();
        self.trees.insert(name.clone(), (dirs.clone(), bounds));
        // The job's tree is walked once for this look, by the ranks' measures and the per-thread counters alike
        // (and to know whether it is costly to walk).
        let mut walks = HashMap::new();
        if let Some(walk) = self.paced.walk(name, &dirs, bounds, self.settings.interval) {
            walks.insert(name.clone(), walk);
        }
        self.note_costly(&walks);
        if let Some(together) = &mut self.together {
            if let Err(e) = together.attach(name).and_then(|()| together.rescan(&walks)) {
                log::warn!("job {name}: co-scheduled time not measured: {e:#}");
            }
        }
        let mut counters = Counters::new(&self.settings.groups, false);
        let free = self.budget.saturating_sub(self.targets());
        let mut short = false;
        let result = if per_thread {
            if let Some(walk) = walks.get_mut(name) {
                short = rescan(&mut counters, walk, free);
            }
            Ok(())
        } else {
            let pus = if pus.is_empty() { CpuList::online() } else { pus.clone() };
            let need = perf_dirs.len() * pus.iter().count();
            if need > free {
                log::warn!(
                    "job {name} is not counted: its cgroups need {need} counter targets, {free} of the \
                     agent's {} are free (half its open-file limit)",
                    self.budget
                );
                return;
            }
            attach_cgroups(&mut counters, &perf_dirs, &pus)
        };
        for (job, walk) in &walks {
            say_cut(&mut self.cut, job, walk, &bounds);
        }
        match result {
            Ok(()) => {
                self.say_unsupported(&mut counters);
                if short {
                    say_short(name, self.budget);
                }
                let mut job = JobCounters { counters, per_thread, short };
                // A first (zero) sample, so that the job and its events show at once.
                if let Some(samples) = self.read_job(name, &mut job, lockstep_store::now()) {
                    self.latest.insert(name.clone(), samples);
                }
                self.jobs.insert(name.clone(), job);
            }
            Err(e) => log::warn!("job {name} is not counted: {}", lockstep_core::error::one_line(&*e)),
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
                log::warn!("not supported on this machine, not counted: {}", missing.join(","));
            }
            self.unsupported_said = true;
        }
    }

    /// Stops counting job `name`: its final counts, its ranks' measures with them, are queued for the store.
    fn detach(&mut self, name: &JobKey) {
        // Read before its ranks' measures end: the final samples held none of them (the store kept the last
        // interval's, and a job shorter than an interval showed the co-scheduled share of its first milliseconds:
        // `make demo`'s lu alone 0 % in one run of two).
        let time = lockstep_store::now();
        let finals = self.jobs.remove(name).and_then(|mut job| self.read_job(name, &mut job, time));
        // A job whose counters did not open may still be measured and walked: that ends too.
        if let Some(together) = &mut self.together {
            together.detach(name);
        }
        self.trees.remove(name);
        self.paced.forget(name);
        self.costly.remove(name);
        self.cut.remove(name);
        if let Some(samples) = finals {
            // At most ENDED_SERVED jobs: a flood of short jobs keeps the latest ones on /metrics, not more memory.
            if self.ended.len() >= ENDED_SERVED {
                let oldest = self.ended.iter().min_by_key(|(_, (at, _))| *at).map(|(n, _)| n.clone());
                oldest.map(|n| self.ended.remove(&n));
            }
            self.ended.insert(name.clone(), (Instant::now(), samples.clone()));
            self.finals.extend(samples);
        }
        self.latest.remove(name);
        self.previous.remove(name);
    }

    /// Detaches every job (the agent is stopping).
    fn detach_all(&mut self) {
        let names: Vec<JobKey> = self.jobs.keys().cloned().collect();
        for name in names {
            self.detach(&name);
        }
    }

    fn read_job(&self, name: &JobKey, job: &mut JobCounters, time: f64) -> Option<Vec<Sample>> {
        let readings = match job.counters.read() {
            Ok(r) => r,
            Err(e) => {
                log::warn!("cannot read the counters of job {name}: {e}");
                return None;
            }
        };
        let sample = |event: &str, value, enabled, running| Sample {
            job: name.clone(),
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

    /// The eBPF program that measures the jobs' ranks, or the error saying it did not load.
    fn together_program(&self) -> anyhow::Result<&Together> {
        self.together.as_ref().ok_or_else(|| {
            anyhow::anyhow!("the agent does not measure its jobs' ranks (its eBPF program did not load)")
        })
    }

    /// Reads every job (re-listing the ranks, and the threads of per-thread jobs, of those whose trees are walked
    /// this time); returns the samples.
    fn sample(&mut self) -> Vec<Sample> {
        // Each job's tree is walked at most once per sample, as its pace allows, for the ranks' measures, the
        // per-thread counters and the daemon's `auto` (the processes of a tree costly to walk) alike; a job not
        // walked this time keeps the ranks, threads and processes found before.
        let mut walks = HashMap::new();
        for (name, (dirs, bounds)) in &self.trees {
            if let Some(walk) = self.paced.walk(name, dirs, *bounds, self.settings.interval) {
                walks.insert(name.clone(), walk);
            }
        }
        self.note_costly(&walks);
        match self.together.as_mut().map(|t| t.rescan(&walks)) {
            Some(Err(e)) => self.faults.report(Place::CoScheduled, &format!("cannot register the jobs' ranks: {e:#}")),
            Some(Ok(())) => self.faults.clear(&Place::CoScheduled),
            None => {}
        }
        let time = lockstep_store::now();
        let mut free = self.budget.saturating_sub(self.targets());
        let mut jobs = std::mem::take(&mut self.jobs);
        let mut out = Vec::new();
        for (name, job) in &mut jobs {
            if let Some(walk) = walks.get_mut(name).filter(|_| job.per_thread) {
                let before = job.counters.keys().count();
                let short = rescan(&mut job.counters, walk, free + before);
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
        for (job, walk) in &walks {
            let bounds = self.trees.get(job).map_or(JOB_TREE, |(_, b)| *b);
            say_cut(&mut self.cut, job, walk, &bounds);
        }
        out
    }

    /// Keeps the processes `walks` found of each job whose tree is costly to walk, for the snapshot; a job whose
    /// tree is cheap again leaves it.
    fn note_costly(&mut self, walks: &HashMap<JobKey, Walk>) {
        for (name, walk) in walks {
            if self.paced.spaced(name) {
                self.costly.insert(name.clone(), Arc::new(walk.procs.clone()));
            } else {
                self.costly.remove(name);
            }
        }
    }

    /// The snapshot of what is counted now: each counted job's latest samples and shares, and the processes of
    /// the trees that are costly to walk.
    fn publish(&mut self) -> Published {
        self.ended.retain(|name, (at, _)| at.elapsed() < FINALS_SERVED && !self.jobs.contains_key(name));
        Published {
            node: self.node.clone(),
            costly: self.costly.clone(),
            latest: self.jobs.keys().map(|n| (n.clone(), self.latest.get(n).cloned().unwrap_or_default())).collect(),
            ended: self.ended.values().flat_map(|(_, samples)| samples.clone()).collect(),
            shares: self.jobs.keys().filter_map(|n| Some((n.clone(), self.shares(n)?))).collect(),
            together: self.together.as_ref().map(Together::times),
        }
    }

    /// How job `name`'s ranks ran, from its latest samples: `None` where the agent does not measure it.
    fn shares(&self, name: &JobKey) -> Option<Shares> {
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
fn say_short(name: &JobKey, budget: usize) {
    log::warn!(
        "job {name} is counted in part: some of its threads are not, the agent's counters holding \
         all {budget} targets their descriptors allow (half its open-file limit)"
    );
}

/// Says once that job `name`'s tree was only partly walked, when `walk` (within `bounds`) was cut short (`said`:
/// the jobs said).
fn say_cut(said: &mut HashSet<JobKey>, name: &JobKey, walk: &Walk, bounds: &Bounds) {
    if !walk.cuts.is_empty() && said.insert(name.clone()) {
        log::warn!(
            "job {name}: its cgroup tree was only partly walked ({}): the agent walks at most {} levels, {} cgroups \
             and {} processes of this job per sample, and measures what it found",
            walk.said(bounds),
            bounds.depth,
            bounds.cgroups,
            bounds.procs
        );
    }
}

/// Attaches to the threads of the processes `walk` found in the job's tree (at most [`JOB_TREE`]'s count of
/// processes: more is a cut of the walk) that are not counted yet, while the job holds fewer than `most` targets;
/// detaches threads that exited (their final counts stay in the totals). Returns whether some threads were left
/// uncounted for want of descriptors.
fn rescan(counters: &mut Counters, walk: &mut Walk, most: usize) -> bool {
    let mut tids: Vec<i64> = Vec::new();
    let mut more = false;
    for &pid in &walk.procs {
        let Some(threads) = lockstep_cgroup::procfs::threads(pid) else { continue };
        if tids.len() + threads.len() > JOB_TREE.procs {
            more = true;
            break;
        }
        tids.extend(threads.into_iter().map(i64::from));
    }
    if more {
        walk.cut(Cut::Procs);
    }
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

/// Starts the sampler for `node` with `settings` (the ranks' measures against the kernel's BTF, or the file `btf`
/// names) on a thread of its own at normal priority, with its own connection to the store at `store_path`: it
/// samples every interval, writes final samples as jobs go, and deletes samples and decisions past the retention,
/// and ended jobs past the job history, once a minute. Returns its handle and its thread.
pub fn spawn(
    settings: Settings,
    node: &lockstep_core::ident::NodeName,
    btf: Option<&std::path::Path>,
    store_path: &std::path::Path,
) -> anyhow::Result<(Sampler, std::thread::JoinHandle<()>)> {
    let store = Store::open(store_path)?;
    let mut state = State::new(settings, node, btf);
    let cell: Cell = Arc::new(Mutex::new(Arc::new(state.publish())));
    let (inbox, messages) = mpsc::channel();
    let sampler = Sampler { inbox, cell: cell.clone() };
    let thread = std::thread::Builder::new()
        .name("lockstep-sample".into())
        .spawn(move || run(state, &messages, &cell, store))?;
    Ok((sampler, thread))
}

/// Puts `published` in `cell`; the one it replaces is dropped after the lock is let go.
fn put(cell: &Cell, published: Published) {
    let new = Arc::new(published);
    let old = {
        let mut held = cell.lock().unwrap_or_else(PoisonError::into_inner);
        std::mem::replace(&mut *held, new)
    };
    drop(old);
}

/// The sampler's thread: carries out the messages as they come and samples when due, publishing after each.
fn run(mut state: State, messages: &Receiver<Message>, cell: &Cell, mut store: Store) {
    let interval = state.settings.interval;
    let (retention, job_history) = (state.settings.retention, state.settings.job_history);
    let mut next = interval.map(|i| Instant::now() + i);
    let mut next_expiry = Instant::now();
    let mut faults = crate::faults::Faults::default();
    loop {
        let wait = next.map_or(Duration::from_mins(1), |at| at.saturating_duration_since(Instant::now()));
        let first = match messages.recv_timeout(wait) {
            Ok(m) => Some(m),
            Err(RecvTimeoutError::Timeout) => None,
            // Every handle is gone: nothing is left to count for.
            Err(RecvTimeoutError::Disconnected) => Some(Message::Stop),
        };
        let (mut changed, mut stop) = (false, false);
        let mut synced = Vec::new();
        for message in first.into_iter().chain(messages.try_iter()) {
            match message {
                Message::Attach { name, groups, pus, bounds } => {
                    state.attach(&name, &groups, &pus, bounds);
                    changed = true;
                }
                Message::Detach(name) => {
                    state.detach(&name);
                    changed = true;
                }
                Message::Sync(reply) => synced.push(reply),
                Message::TimelineStart(reply) => {
                    let _ = reply.send(state.together_program().and_then(Together::start_timeline));
                }
                Message::TimelineEnd(mut recording, reply) => {
                    let ended = state.together_program().and_then(|t| t.end_timeline(&mut recording));
                    let _ = reply.send((recording, ended));
                }
                Message::Stop => {
                    state.detach_all();
                    (changed, stop) = (true, true);
                    break;
                }
            }
        }
        let mut batch = std::mem::take(&mut state.finals);
        if let Some(at) = next.filter(|at| Instant::now() >= *at) {
            batch.extend(state.sample());
            next = interval.map(|i| at + i);
            changed = true;
        }
        // Final counts in the store before the job leaves the snapshot: a reader finds them in one or the other.
        if !batch.is_empty() {
            match store.insert_samples(&batch) {
                Ok(()) => faults.clear(&Place::Samples),
                Err(e) => faults.report(Place::Samples, &format!("cannot store them: {e:#}")),
            }
        }
        if changed {
            put(cell, state.publish());
        }
        for reply in synced {
            let _ = reply.send(());
        }
        if stop {
            return;
        }
        if Instant::now() >= next_expiry {
            let now = lockstep_store::now();
            let _ = store.expire_samples(now - retention.as_secs_f64());
            let _ = store.expire_decisions(now - retention.as_secs_f64());
            let _ = store.expire_jobs(now - job_history.as_secs_f64());
            next_expiry = Instant::now() + Duration::from_mins(1);
        }
    }
}

#[cfg(test)]
mod tests {
    /// Job `name` as the sampler keys it.
    fn key(name: &str) -> lockstep_core::ident::JobKey {
        name.parse().unwrap()
    }

    use super::*;
    use lockstep_cgroup::procs_within;

    fn settings() -> Settings {
        Settings {
            groups: lockstep_telemetry::events::parse_list("task-clock").unwrap(),
            interval: None,
            retention: Duration::from_hours(1),
            job_history: Duration::from_hours(1),
        }
    }

    /// A scratch cgroup `dir` (a plain directory) whose `cgroup.procs` lists `procs`.
    fn scratch_cgroup(dir: &std::path::Path, procs: &[u32]) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("cgroup.procs"), procs.iter().map(|p| p.to_string() + "\n").collect::<String>())
            .unwrap();
    }

    #[test]
    fn jobs_are_attached_and_detached_by_message_and_published() {
        let t = lockstep_scratch::tempdir().unwrap();
        let (sampler, thread) = spawn(settings(), &"n1".parse().unwrap(), None, &t.path().join("store.db")).unwrap();
        let counting = sampler.counting();
        // This test's own process, counted per thread (the scratch directory is in no perf_event hierarchy).
        let dir = t.path().join("job");
        scratch_cgroup(&dir, &[std::process::id()]);
        assert!(counting.published().latest_of(&key("a")).is_none());
        counting.attach(&key("a"), vec![vec![dir.clone()]], CpuList::default(), JOB_TREE);
        assert!(sampler.synced(Duration::from_secs(20)), "the sampler did not answer");
        let published = sampler.published();
        assert_eq!((published.node().as_str(), published.job_count()), ("n1", 1));
        let latest = published.latest_of(&key("a")).expect("job a is counted once the sampler answered");
        assert!(latest.iter().any(|s| s.event == "task-clock"), "{latest:?}");
        assert_eq!(counting.published().job_count(), 1, "the daemon reads the same snapshot");
        counting.detach(&key("a"));
        assert!(sampler.synced(Duration::from_secs(20)));
        assert!(sampler.published().latest_of(&key("a")).is_none());
        // Its final counts are in the store by the time it left the snapshot.
        let finals = Store::open(&t.path().join("store.db"))
            .unwrap()
            .latest_samples(&"a".parse().unwrap(), &"n1".parse().unwrap())
            .unwrap();
        assert!(finals.iter().any(|s| s.event == "task-clock"), "{finals:?}");
        sampler.stop(thread);
    }

    #[test]
    fn the_daemon_never_waits_for_the_snapshot() {
        let t = lockstep_scratch::tempdir().unwrap();
        let (sampler, thread) = spawn(settings(), &"n1".parse().unwrap(), None, &t.path().join("store.db")).unwrap();
        let counting = sampler.counting();
        let before = counting.published();
        // Whoever holds the cell (here: this test, as the sampler would while swapping), the daemon gets the last
        // snapshot it read, at once.
        let held = sampler.cell.lock().unwrap();
        let during = counting.published();
        assert!(Arc::ptr_eq(&before, &during));
        // And a message sent meanwhile is not waited for either.
        counting.detach(&key("no-such-job"));
        drop(held);
        assert!(sampler.synced(Duration::from_secs(20)));
        sampler.stop(thread);
    }

    #[test]
    fn the_processes_of_a_tree_costly_to_walk_are_published_for_the_loop() {
        let t = lockstep_scratch::tempdir().unwrap();
        let dir = t.path().join("job");
        scratch_cgroup(&dir, &[std::process::id()]);
        // Sampled every nanosecond, any walk is spaced out past the interval: the tree counts as costly.
        let mut state = State::new(
            Settings { interval: Some(Duration::from_nanos(1)), ..settings() },
            &"n1".parse().unwrap(),
            None,
        );
        state.attach(&key("j"), &[vec![dir.clone()]], &CpuList::default(), JOB_TREE);
        assert_eq!(state.publish().costly_tree(&key("j")), Some(&[std::process::id() as i32][..]));
        state.detach(&key("j"));
        assert_eq!(state.publish().costly_tree(&key("j")), None);
        // Sampled every second, a tree of one cgroup is cheap: the loop walks it itself.
        let mut state =
            State::new(Settings { interval: Some(Duration::from_secs(1)), ..settings() }, &"n1".parse().unwrap(), None);
        state.attach(&key("j"), &[vec![dir]], &CpuList::default(), JOB_TREE);
        assert_eq!(state.publish().costly_tree(&key("j")), None);
    }

    #[test]
    fn a_tree_past_the_bounds_is_walked_in_part_and_said_once() {
        let t = lockstep_scratch::tempdir().unwrap();
        let top = t.path().join("job");
        let mut dir = top.clone();
        for _ in 0..=JOB_TREE.depth + 1 {
            scratch_cgroup(&dir, &[]);
            dir = dir.join("d");
        }
        scratch_cgroup(&top, &[std::process::id()]);
        let mut state = State::new(settings(), &"n1".parse().unwrap(), None);
        state.attach(&key("deep"), &[vec![top.clone()]], &CpuList::default(), JOB_TREE);
        assert!(state.cut.contains(&key("deep")), "the cut was not noted");
        assert!(state.jobs.contains_key(&key("deep")), "a job walked in part is still counted");
        let mut walk = procs_within(&[top], JOB_TREE);
        assert!(!rescan(&mut state.jobs.get_mut(&key("deep")).unwrap().counters, &mut walk, usize::MAX));
        assert_eq!((walk.cuts, walk.procs), (vec![Cut::Depth], vec![std::process::id() as i32]));
        state.detach(&key("deep"));
        assert!(!state.cut.contains(&key("deep")), "a job that comes again is said again");
    }
}
