//! `dcs` in the agent: a thread that waits for the eBPF probe's arrivals, raises the job a message arrived for
//! through the policy's [`raiser::Raiser`] for one quantum, lowers it after, and keeps the probe's port table in
//! step with the jobs' sockets. Its state lives in the [`Agent`] (under the agent's lock), so that a policy change,
//! a job that ends and the agent's exit lower everything at once; the watchdog covers a crash through the journal.

mod nice;
mod probe;
mod raiser;
mod rr;
pub mod sockets;
pub mod threads;
mod weight;

use std::cell::RefCell;
use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::guarded::Guarded;
use crate::managed::Managed;
use crate::realtime_thread;
use crate::sched::Thread;
use crate::Agent;
use lockstep_core::cosched::Raise;
use lockstep_proto::protocol::{DcsJob, DcsStatus};
use lockstep_store::Action;
use probe::{Arrival, JobCounts, Probe, Tables};
pub use raiser::Ctx;
use raiser::{Raised, Raiser, Target};
use sockets::PortKey;

/// How `dcs` runs on this agent.
#[derive(Clone, Debug)]
pub struct Settings {
    /// How long one raise lasts.
    pub quantum: Duration,
    /// BTF file to load the probe against instead of the kernel's own.
    pub btf: Option<PathBuf>,
}

/// How often the probe's port table is brought in step with the jobs' sockets (a scan reads every descriptor
/// of every job process: at 250 ms it cost a few percent of a CPU per agent with Slurm jobs).
const SCAN_INTERVAL: Duration = Duration::from_millis(500);

/// Longest the thread sleeps in the ring buffer when no raise is due to end.
const IDLE_POLL: Duration = Duration::from_millis(50);

/// Latencies kept for the percentiles (the last raises'): sorting them is what a status costs.
const LATENCIES_KEPT: usize = 4_096;

/// The window a job's raises are counted in (longer when a quantum is long: see [`Engine::spend`]).
const WINDOW: Duration = Duration::from_millis(100);

/// The share of each [`WINDOW`] a job may spend raised: a job that sends itself messages, or that anyone can
/// reach with packets, gains at most this much over its neighbours, however many messages arrive.
const RAISED_SHARE: f64 = 0.25;

/// The raiser for `raise`.
fn for_kind(raise: Raise) -> Box<dyn Raiser> {
    match raise {
        Raise::Weight => Box::new(weight::Weight),
        Raise::Rr => Box::new(rr::Rr::default()),
        Raise::Nice => Box::new(nice::Nice::default()),
    }
}

/// `dcs` while a `dcs` policy is in force.
pub struct Engine {
    /// The mechanism.
    pub raise: Raise,
    raiser: Box<dyn Raiser>,
    quantum: Duration,
    /// Set when this engine stops; its thread exits at its next wake-up and detaches the probe.
    stop: Arc<AtomicBool>,
    /// Job slots of the probe, by job name.
    slots: HashMap<String, u32>,
    /// How many slots the probe has.
    max_jobs: u32,
    /// Jobs raised now: since when, and what to put back.
    raised: HashMap<String, (Instant, Raised)>,
    /// Per job: the [`WINDOW`] its raises are counted in (its start), and how many it had there.
    budget: HashMap<String, (Instant, u32)>,
    /// Raises refused because a job had used its share of the window.
    refused: u64,
    /// Per job: ports watched, probe counts, raises.
    seen: HashMap<String, (usize, JobCounts, u64)>,
    /// Per job: its processes' threads on this node, and which processes hold each watched socket, as last
    /// scanned.
    threads: HashMap<String, Processes>,
    events: u64,
    raises: u64,
    latencies_us: VecDeque<f64>,
    held_max: Duration,
    /// Jobs whose raise failed (said once each).
    failed: std::collections::HashSet<String>,
}

/// A job's processes as the scan found them: threads per process, and the processes holding each socket.
#[derive(Debug, Default)]
pub struct Processes {
    threads: HashMap<i32, Vec<Thread>>,
    owners: HashMap<PortKey, Vec<i32>>,
}

impl Processes {
    /// The threads to raise for a message to `socket`: those of the processes holding it (the receiver), or of
    /// every process of the job when the socket is not known yet.
    fn receivers(&self, socket: PortKey) -> Vec<Thread> {
        match self.owners.get(&socket) {
            Some(pids) => pids.iter().filter_map(|p| self.threads.get(p)).flatten().copied().collect(),
            None => self.threads.values().flatten().copied().collect(),
        }
    }
}

/// A decision to log: job, action, duration.
pub type Logged = (String, Action, Duration);

impl Engine {
    /// Loads and attaches the probe (errors name what is missing) and starts the thread that serves it.
    pub fn start(agent: Weak<Guarded<Agent>>, raise: Raise, settings: &Settings) -> anyhow::Result<Self> {
        let unified = lockstep_cgroup::unified_mount().ok_or_else(|| {
            anyhow::anyhow!("dcs needs the unified (v2) cgroup hierarchy mounted (its eBPF program attaches there)")
        })?;
        // One event per job per quantum: a raise lasts one quantum and is not extended, so the events between
        // would only wake the agent.
        let probe = Probe::load(&unified, settings.btf.as_deref(), settings.quantum)?;
        let tables = probe.tables()?;
        let max_jobs = probe.max_jobs()?;
        let stop = Arc::new(AtomicBool::new(false));
        let (a, s) = (agent.clone(), stop.clone());
        std::thread::Builder::new().name("lockstep-dcs".into()).spawn(move || serve(a, probe, s))?;
        let s = stop.clone();
        std::thread::Builder::new().name("lockstep-dcs-scan".into()).spawn(move || scan(agent, tables, s))?;
        Ok(Self {
            raise,
            raiser: for_kind(raise),
            quantum: settings.quantum,
            stop,
            slots: HashMap::new(),
            max_jobs,
            raised: HashMap::new(),
            budget: HashMap::new(),
            refused: 0,
            seen: HashMap::new(),
            threads: HashMap::new(),
            events: 0,
            raises: 0,
            latencies_us: VecDeque::new(),
            held_max: Duration::ZERO,
            failed: HashSet::default(),
        })
    }

    /// Whether `job` holds a raised weight now (the slot plan must not lower it).
    pub fn holds_weight(&self, job: &str) -> bool {
        self.raise == Raise::Weight && self.raised.contains_key(job)
    }

    /// Raises the jobs `arrivals` are for (those not raised already: a raise lasts one quantum from its start,
    /// never extended), and lowers those whose quantum is over. Returns the decisions to log and how long until
    /// the next raise ends.
    pub fn step(&mut self, arrivals: &[Arrival], jobs: &mut [Managed], mut ctx: Ctx<'_>) -> (Vec<Logged>, Duration) {
        let mut logged = Vec::new();
        for a in arrivals {
            self.events += 1;
            let Some(name) = self.job_in(a.job) else { continue };
            if self.raised.contains_key(&name) {
                continue;
            }
            let Some(job) = jobs.iter_mut().find(|j| j.name == name) else { continue };
            if job.applied.frozen {
                continue;
            }
            if !self.spend(&name) {
                self.refused += 1;
                continue;
            }
            let threads = self.threads.get(&name).map(|p| p.receivers(a.socket)).unwrap_or_default();
            match self.raiser.raise(Target { job, threads: &threads }, &mut ctx) {
                Ok(r) => {
                    let latency = Duration::from_nanos(monotonic_ns().saturating_sub(a.arrived_ns));
                    self.record(latency);
                    if let Some(s) = self.seen.get_mut(&name) {
                        s.2 += 1;
                    }
                    self.raised.insert(name.clone(), (Instant::now(), r));
                    logged.push((name, Action::DcsRaise, latency));
                }
                Err(e) => {
                    if self.failed.insert(name.clone()) {
                        crate::log::warning!("lockstep agent: dcs cannot raise job {name}: {e:#}");
                    }
                }
            }
        }
        let due: Vec<String> = self
            .raised
            .iter()
            .filter(|(_, (since, _))| since.elapsed() >= self.quantum)
            .map(|(n, _)| n.clone())
            .collect();
        for name in due {
            if let Some(held) = self.lower(&name, jobs, &mut ctx) {
                logged.push((name, Action::DcsLower, held));
            }
        }
        let next = self.raised.values().map(|(since, _)| self.quantum.saturating_sub(since.elapsed())).min();
        (logged, next.unwrap_or(IDLE_POLL).min(IDLE_POLL))
    }

    /// Counts a raise of `name` against its share of the window; false when the share is used up. The window is
    /// [`WINDOW`], or long enough for one quantum to be [`RAISED_SHARE`] of it; a job gets as many quanta in it as
    /// fill that share (5 of 5 ms in 100 ms by default).
    fn spend(&mut self, name: &str) -> bool {
        let window = WINDOW.max(self.quantum.div_f64(RAISED_SHARE));
        let most = (window.as_secs_f64() * RAISED_SHARE / self.quantum.as_secs_f64()).round().max(1.0) as u32;
        let now = Instant::now();
        let (start, count) = self.budget.entry(name.to_string()).or_insert((now, 0));
        if now.duration_since(*start) >= window {
            (*start, *count) = (now, 0);
        }
        if *count >= most {
            return false;
        }
        *count += 1;
        true
    }

    /// Lowers `name` if raised; returns how long it was held.
    fn lower(&mut self, name: &str, jobs: &mut [Managed], ctx: &mut Ctx<'_>) -> Option<Duration> {
        let (since, raised) = self.raised.remove(name)?;
        let held = since.elapsed();
        self.held_max = self.held_max.max(held);
        if let Some(job) = jobs.iter_mut().find(|j| j.name == name) {
            if let Err(e) = self.raiser.lower(job, raised, ctx) {
                crate::log::warning!("lockstep agent: dcs cannot lower job {name}: {e:#}");
            }
        }
        Some(held)
    }

    /// `job` leaves `dcs` (it ended or was released): lowered, its slot freed, its journal entries dropped.
    pub fn leave(&mut self, job: &mut Managed, mut ctx: Ctx<'_>) {
        self.lower(&job.name.clone(), std::slice::from_mut(job), &mut ctx);
        self.slots.remove(&job.name);
        self.budget.remove(&job.name);
        self.seen.remove(&job.name);
        self.threads.remove(&job.name);
        if let Err(e) = self.raiser.leave(&job.name, &mut ctx) {
            crate::log::warning!("lockstep agent: dcs cannot restore job {}: {e:#}", job.name);
        }
    }

    /// Stops: every job lowered and left, the mechanism's own changes put back, the thread told to detach.
    pub fn stop(mut self, jobs: &mut [Managed], mut ctx: Ctx<'_>) {
        for job in jobs.iter_mut() {
            self.leave(job, Ctx { journal: ctx.journal, store: ctx.store });
        }
        if let Err(e) = self.raiser.stop(&mut ctx) {
            crate::log::warning!("lockstep agent: dcs cannot restore: {e:#}");
        }
        // Release: the thread's next load of the flag (Acquire) sees every change made before it.
        self.stop.store(true, Ordering::Release);
    }

    /// Gives every job a slot of the probe; returns, for the scan, each job's (slot, processes, new) — only the
    /// jobs that share PUs with another job of this node: raising a job above nobody gains nothing and costs the
    /// agent's time (measured: 40 % on lu alone on the test cluster), so the probe does not even watch the others.
    fn assign(&mut self, jobs: &[Managed]) -> Vec<(u32, Vec<i32>, bool)> {
        let mut out = Vec::new();
        let shares = |i: usize| jobs.iter().enumerate().any(|(k, o)| k != i && o.pus.intersects(&jobs[i].pus));
        for (_, job) in jobs.iter().enumerate().filter(|(i, _)| shares(*i)) {
            let (slot, new) = if let Some(s) = self.slots.get(&job.name) {
                (*s, false)
            } else {
                let Some(free) = (0..self.max_jobs).find(|s| !self.slots.values().any(|v| v == s)) else { continue };
                self.slots.insert(job.name.clone(), free);
                (free, true)
            };
            out.push((slot, job.pids(), new));
        }
        out
    }

    /// The job holding probe slot `slot`.
    fn job_in(&self, slot: u32) -> Option<String> {
        self.slots.iter().find(|(_, s)| **s == slot).map(|(n, _)| n.clone())
    }

    fn record(&mut self, latency: Duration) {
        self.raises += 1;
        if self.latencies_us.len() == LATENCIES_KEPT {
            self.latencies_us.pop_front();
        }
        self.latencies_us.push_back(latency.as_secs_f64() * 1e6);
    }

    /// The status section: of the jobs `shown` only, with the node-wide latencies when `wide` (root asks).
    pub fn status(&self, wide: bool, shown: &dyn Fn(&str) -> bool) -> DcsStatus {
        // The node-wide latencies are root's to see (and the only part whose cost is not in jobs).
        let mut sorted: Vec<f64> = if wide { self.latencies_us.iter().copied().collect() } else { Vec::new() };
        sorted.sort_by(f64::total_cmp);
        let pct = |p: f64| sorted.get(((sorted.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(0.0);
        let mut jobs: Vec<DcsJob> = self
            .seen
            .iter()
            .filter(|(name, _)| shown(name))
            .map(|(name, (ports, counts, raises))| DcsJob {
                name: name.clone(),
                ports: *ports,
                packets: counts.packets,
                bytes: counts.bytes,
                raises: *raises,
                raised: self.raised.contains_key(name),
            })
            .collect();
        jobs.sort_by(|a, b| a.name.cmp(&b.name));
        DcsStatus {
            raise: format!("{:?}", self.raise).to_lowercase(),
            quantum_ms: self.quantum.as_secs_f64() * 1e3,
            events: self.events,
            raises: self.raises,
            latency_p50_us: pct(0.5),
            latency_p99_us: pct(0.99),
            latency_max_us: sorted.last().copied().unwrap_or(0.0),
            held_max_us: self.held_max.as_secs_f64() * 1e6,
            refused: self.refused,
            jobs,
        }
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of `bpf_ktime_get_ns`.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &raw mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The engine's event thread: polls the probe, hands arrivals to the engine under the agent's lock; exits when
/// the engine stops or the agent is gone (dropping the probe detaches it).
fn serve(agent: Weak<Guarded<Agent>>, probe: Probe, stop: Arc<AtomicBool>) {
    realtime_thread("dcs raises");
    let sink: Rc<RefCell<Vec<Arrival>>> = Rc::default();
    let events = match probe.events(sink.clone()) {
        Ok(rb) => rb,
        Err(e) => {
            crate::log::warning!("lockstep agent: dcs cannot read its probe's events: {e:#}");
            return;
        }
    };
    let mut timeout = Duration::ZERO;
    loop {
        let _ = events.poll(timeout);
        let arrivals = std::mem::take(&mut *sink.borrow_mut());
        let Some(shared) = agent.upgrade() else { return };
        let mut guard = shared.lock();
        let agent = &mut *guard;
        // Acquire: pairs with the Release in Engine::stop (made under this same lock).
        if stop.load(Ordering::Acquire) {
            return;
        }
        let Some(next) = agent.dcs_arrivals(&arrivals) else { return };
        timeout = next;
    }
}

impl Agent {
    /// Hands the probe's arrivals to `dcs` (raises, and lowers what is due), logging what it did; returns how
    /// long the event thread may wait for the next arrival, `None` when `dcs` is off.
    fn dcs_arrivals(&mut self, arrivals: &[Arrival]) -> Option<Duration> {
        let engine = self.dcs.as_mut()?;
        let (logged, next) =
            engine.step(arrivals, &mut self.jobs, Ctx { journal: &mut self.journal, store: &self.store });
        for (job, action, took) in logged {
            let d = self.decision(Some(&job), action, took);
            self.pending.push(d);
        }
        Some(next)
    }

    /// The jobs' probe slots for a port scan (see [`Engine::assign`]), `None` when `dcs` is off.
    fn dcs_assign(&mut self) -> Option<Vec<(u32, Vec<i32>, bool)>> {
        let jobs = &self.jobs;
        self.dcs.as_mut().map(|engine| engine.assign(jobs))
    }

    /// What a port scan found, per probe slot, into `dcs`; false when `dcs` is off.
    fn dcs_found(&mut self, found: Vec<(u32, usize, JobCounts, Processes)>) -> bool {
        let Some(engine) = self.dcs.as_mut() else { return false };
        for (slot, n, counts, procs) in found {
            if let Some(name) = engine.job_in(slot) {
                let entry = engine.seen.entry(name.clone()).or_default();
                entry.0 = n;
                entry.1 = counts;
                engine.threads.insert(name, procs);
            }
        }
        true
    }
}

/// The engine's scan thread: every [`SCAN_INTERVAL`], the jobs' TCP ports into the probe's table, their threads
/// and the probe's counts into the engine. At the slot thread's real-time priority like every thread that takes
/// the agent's lock: a holder preempted by threads `dcs:rr` raised would keep the event thread from lowering them.
fn scan(agent: Weak<Guarded<Agent>>, mut tables: Tables, stop: Arc<AtomicBool>) {
    realtime_thread("dcs port scans");
    // What went wrong with the port table last, said once until it changes or clears.
    let mut said: Option<String> = None;
    loop {
        let Some(shared) = agent.upgrade() else { return };
        let work = {
            let mut agent = shared.lock();
            // Acquire: as in `serve`.
            if stop.load(Ordering::Acquire) {
                return;
            }
            let Some(work) = agent.dcs_assign() else { return };
            work
        };
        let mut ports = Vec::new();
        let mut found = Vec::new();
        for (slot, pids, new) in work {
            if new {
                let _ = tables.reset_job(slot);
            }
            let keys = sockets::tcp_ports(&pids);
            let mut procs = Processes::default();
            for (key, pid) in &keys {
                procs.owners.entry(*key).or_default().push(*pid);
            }
            for pid in pids {
                procs.threads.insert(pid, Thread::threads_of(&[pid]));
            }
            found.push((slot, procs.owners.len(), tables.counts(slot).unwrap_or_default(), procs));
            ports.extend(keys.into_iter().map(|(k, _)| (k, slot)));
        }
        match tables.set_ports(&ports).map_err(|e| format!("{e:#}")) {
            Err(e) if said.as_ref() != Some(&e) => {
                crate::log::warning!("lockstep agent: dcs port table: {e}");
                said = Some(e);
            }
            Err(_) => {}
            Ok(()) => {
                if said.take().is_some() {
                    crate::log::info!("lockstep agent: dcs port table: every socket watched again");
                }
            }
        }
        {
            let mut agent = shared.lock();
            if stop.load(Ordering::Acquire) || !agent.dcs_found(found) {
                return;
            }
        }
        drop(shared);
        std::thread::sleep(SCAN_INTERVAL);
    }
}
