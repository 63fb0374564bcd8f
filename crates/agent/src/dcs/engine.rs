//! The `dcs` engine: while a `dcs` policy is in force, raises the job a message arrived for through the policy's
//! [`Raiser`] for one quantum, within the job's share of raised time, and lowers it after. It lives in the daemon (the
//! threads of `dcs::feed` send it the probe's arrivals and the jobs' sockets), so that a policy change, a job that ends
//! and the agent's exit lower everything at once; the watchdog covers a crash through the journal.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::nice::Nice;
use super::probe::{Arrival, JobCounts, Probe};
use super::processes::{Processes, Scanned, Watched};
use super::raiser::{Ctx, Raised, Raiser, Target};
use super::rr::Rr;
use super::weight::Weight;
use crate::managed::Managed;
use lockstep_core::cosched::Raise;
use lockstep_core::ident::JobKey;
use lockstep_proto::protocol::{DcsJob, DcsStatus};
use lockstep_store::Action;

/// How `dcs` runs on this agent.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// How long one raise lasts.
    pub quantum: Duration,
    /// BTF file to load the probe against instead of the kernel's own.
    pub btf: Option<PathBuf>,
}

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
        Raise::Weight => Box::new(Weight),
        Raise::Rr => Box::new(Rr::default()),
        Raise::Nice => Box::new(Nice::default()),
    }
}

/// `dcs` while a `dcs` policy is in force.
pub struct Engine {
    /// Which engine this is, of those the daemon started: its threads name it in their commands, and end once
    /// the daemon's engine is another one (or none).
    pub id: u64,
    /// The mechanism.
    pub raise: Raise,
    raiser: Box<dyn Raiser>,
    quantum: Duration,
    /// Job slots of the probe, by job.
    slots: HashMap<JobKey, u32>,
    /// How many slots the probe has.
    max_jobs: u32,
    /// Jobs raised now: since when, and what to put back.
    raised: HashMap<JobKey, (Instant, Raised)>,
    /// Per job: the [`WINDOW`] its raises are counted in (its start), and how many it had there.
    budget: HashMap<JobKey, (Instant, u32)>,
    /// Raises refused because a job had used its share of the window.
    refused: u64,
    /// Per job: ports watched, probe counts, raises.
    seen: HashMap<JobKey, (usize, JobCounts, u64)>,
    /// Per job: its processes' threads on this node, and which processes hold each watched socket, as last
    /// scanned.
    threads: HashMap<JobKey, Processes>,
    events: u64,
    raises: u64,
    latencies_us: VecDeque<f64>,
    held_max: Duration,
    /// Jobs whose raise failed (said once each).
    failed: HashSet<JobKey>,
}

/// A decision to log: job, action, duration.
pub type Logged = (JobKey, Action, Duration);

impl Engine {
    /// Engine `id`, with its probe loaded and attached (errors name what is missing): the probe goes to the
    /// threads that serve it (`dcs::feed`).
    pub fn start(id: u64, raise: Raise, settings: &Settings) -> anyhow::Result<(Self, Probe)> {
        let unified = lockstep_cgroup::unified_mount().ok_or_else(|| {
            anyhow::anyhow!("dcs needs the unified (v2) cgroup hierarchy mounted (its eBPF program attaches there)")
        })?;
        // One event per job per quantum: a raise lasts one quantum and is not extended, so the events between
        // would only wake the agent.
        let probe = Probe::load(&unified, settings.btf.as_deref(), settings.quantum)?;
        let max_jobs = probe.max_jobs()?;
        let engine = Self {
            id,
            raise,
            raiser: for_kind(raise),
            quantum: settings.quantum,
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
        };
        Ok((engine, probe))
    }

    /// Whether `job` holds a raised weight now (the slot plan must not lower it).
    pub fn holds_weight(&self, job: &JobKey) -> bool {
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
            let Some(job) = jobs.iter_mut().find(|j| j.key == name) else { continue };
            // A frozen job's threads cannot answer; a job left to the kernel or halted by Slurm is not switched,
            // so not raised either (a left one stays at its own weight).
            if job.applied.frozen || !job.switched() {
                continue;
            }
            if !self.spend(&name) {
                self.refused += 1;
                continue;
            }
            let threads = self.threads.get(&name).map(|p| p.receivers(a.socket)).unwrap_or_default();
            match self.raiser.raise(Target { job, threads: &threads }, &mut ctx) {
                Ok(r) => {
                    let latency = Duration::from_nanos(crate::bpf::ktime_ns().saturating_sub(a.arrived_ns));
                    self.record(latency);
                    if let Some(s) = self.seen.get_mut(&name) {
                        s.2 += 1;
                    }
                    self.raised.insert(name.clone(), (Instant::now(), r));
                    logged.push((name, Action::DcsRaise, latency));
                }
                Err(e) => {
                    if self.failed.insert(name.clone()) {
                        log::warn!("dcs cannot raise job {name}: {e:#}");
                    }
                }
            }
        }
        let due: Vec<JobKey> = self
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
    fn spend(&mut self, name: &JobKey) -> bool {
        let window = WINDOW.max(self.quantum.div_f64(RAISED_SHARE));
        let most = (window.as_secs_f64() * RAISED_SHARE / self.quantum.as_secs_f64()).round().max(1.0) as u32;
        let now = Instant::now();
        let (start, count) = self.budget.entry(name.clone()).or_insert((now, 0));
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
    fn lower(&mut self, name: &JobKey, jobs: &mut [Managed], ctx: &mut Ctx<'_>) -> Option<Duration> {
        let (since, raised) = self.raised.remove(name)?;
        let held = since.elapsed();
        self.held_max = self.held_max.max(held);
        if let Some(job) = jobs.iter_mut().find(|j| j.key == *name) {
            if let Err(e) = self.raiser.lower(job, raised, ctx) {
                log::warn!("dcs cannot lower job {name}: {e:#}");
            }
        }
        Some(held)
    }

    /// `job` leaves `dcs` (it ended or was released): lowered, its slot freed, its journal entries dropped.
    pub fn leave(&mut self, job: &mut Managed, mut ctx: Ctx<'_>) {
        self.lower(&job.key.clone(), std::slice::from_mut(job), &mut ctx);
        self.slots.remove(&job.key);
        self.budget.remove(&job.key);
        self.seen.remove(&job.key);
        self.threads.remove(&job.key);
        if let Err(e) = self.raiser.leave(&job.key, &mut ctx) {
            log::error!("dcs cannot restore job {}: {e:#}", job.key);
        }
    }

    /// Stops: every job lowered and left, the mechanism's own changes put back. Its threads end at their next
    /// command, which the daemon no longer answers for this engine (the event thread detaches the probe then).
    pub fn stop(mut self, jobs: &mut [Managed], mut ctx: Ctx<'_>) {
        for job in jobs.iter_mut() {
            self.leave(job, Ctx { journal: ctx.journal, writer: ctx.writer });
        }
        if let Err(e) = self.raiser.stop(&mut ctx) {
            log::error!("dcs cannot restore: {e:#}");
        }
    }

    /// Gives every job a slot of the probe; returns the jobs to scan — only those that share PUs with another job
    /// of this node: raising a job above nobody gains nothing and costs the agent's time (measured: 40 % on lu
    /// alone on the test cluster), so the probe does not even watch the others. Nor a job that is not switched
    /// (left to the kernel, halted by Slurm): it is never raised, and its processes are not listed for nothing.
    pub fn watched(&mut self, jobs: &[Managed]) -> Vec<Watched> {
        let mut out = Vec::new();
        let shares = |i: usize| jobs.iter().enumerate().any(|(k, o)| k != i && o.pus.intersects(&jobs[i].pus));
        for (_, job) in jobs.iter().enumerate().filter(|&(i, job)| job.switched() && shares(i)) {
            let (slot, new) = if let Some(s) = self.slots.get(&job.key) {
                (*s, false)
            } else {
                let Some(free) = (0..self.max_jobs).find(|s| !self.slots.values().any(|v| v == s)) else { continue };
                self.slots.insert(job.key.clone(), free);
                (free, true)
            };
            out.push(Watched { name: job.key.clone(), slot, pids: job.pids(), new });
        }
        out
    }

    /// Takes what a scan found of each job: its ports, the probe's counts and its processes.
    pub fn scanned(&mut self, scanned: Vec<Scanned>) {
        for s in scanned {
            if let Some(name) = self.job_in(s.slot) {
                let entry = self.seen.entry(name.clone()).or_default();
                entry.0 = s.ports;
                entry.1 = s.counts;
                self.threads.insert(name, s.processes);
            }
        }
    }

    /// The job holding probe slot `slot`.
    fn job_in(&self, slot: u32) -> Option<JobKey> {
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
    pub fn status(&self, wide: bool, shown: &dyn Fn(&JobKey) -> bool) -> DcsStatus {
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
