//! The node agent: manages jobs' cgroups under a co-scheduling policy, switching at wall-clock slot
//! boundaries, serving the CLI on a Unix socket, with a watchdog and a restore journal so that no job is left
//! frozen or boosted whatever happens to it.

mod adopt;
mod dcs;
mod doors;
pub mod fuzz;
mod guarded;
mod http;
mod journal;
mod log;
mod managed;
mod progress;
mod restore;
mod sampler;
mod sched;
mod server;
mod slurm;
mod watchdog;

pub use dcs::Settings as DcsSettings;
pub use sampler::{Settings as TelemetrySettings, DEFAULT_EVENTS};
pub use watchdog::watch as watchdog_main;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use nix::sys::signal::{SigSet, Signal};

use guarded::Guarded;
use journal::Journal;
use lockstep_cgroup::Backend;
use lockstep_core::cosched::rows::{self, Entry, Place, Schedule};
use lockstep_core::cosched::{self, slot, JobView, Policy, PolicySpec};
use lockstep_core::error::UsageError;
use lockstep_proto::protocol::{JobStatus, Status};
use lockstep_store::{Action, Decision, SlurmJob, Store};
use managed::{Gone, Managed};
use watchdog::Watchdog;

/// How the agent starts.
#[derive(Clone, Debug)]
pub struct Config {
    /// Unix socket to serve.
    pub socket: PathBuf,
    /// Store path.
    pub store: PathBuf,
    /// Node name (decisions and status carry it).
    pub node: String,
    /// Initial policy.
    pub policy: PolicySpec,
    /// Initial slot length.
    pub slot: Duration,
    /// What every job is counted with.
    pub telemetry: sampler::Settings,
    /// Where to serve `/metrics` over HTTP, if anywhere.
    pub metrics: Option<std::net::SocketAddr>,
    /// This node's name in Slurm (`slurm_<name>` in Slurm's cgroup paths).
    pub slurm_node: String,
    /// How `dcs` runs.
    pub dcs: dcs::Settings,
}

/// Decisions kept while the store cannot take them.
const MAX_PENDING: usize = 100_000;

/// How long a store write of the agent's may wait for a lock another process holds: the slot loop makes them,
/// and must not stall behind a `sqlite3` session (the default wait is 10 s).
const STORE_BUSY: Duration = Duration::from_millis(200);

/// How often decisions reach the store (they are batched: one transaction per interval, not per slot).
const LOG_INTERVAL: Duration = Duration::from_secs(1);

/// Everything the slot loop and the socket server share.
pub(crate) struct Agent {
    /// The policy in force, and its slot planner.
    policy: PolicySpec,
    planner: Box<dyn Policy>,
    slot: Duration,
    jobs: Vec<Managed>,
    journal: Journal,
    store: Store,
    backend: Box<dyn Backend>,
    node: String,
    current_slot: u64,
    active_row: u32,
    rows: u32,
    last_apply_us: f64,
    /// Set by the server when the plan must be redone at once (policy change, new or released job).
    replan: bool,
    /// Decisions not yet in the store, and when they were last written.
    pending: Vec<Decision>,
    /// What `auto` chose or started trying, not yet in the store (time, record).
    choices: Vec<(f64, cosched::auto::Choice)>,
    /// The origin of the monotonic times `auto` measures with.
    epoch: Instant,
    last_flush: Instant,
    /// Where the agent is in its life.
    lifecycle: Lifecycle,
    /// When the slot loop last beat for the watchdog.
    last_beat: Instant,
    /// Faults said once, until they clear.
    faults: Faults,
    /// The file `LOCKSTEP_CLOCK_SKEW_FILE` names, read at start: the test seam for wall-clock steps.
    clock_skew_file: Option<PathBuf>,
    /// Every job's counters.
    telemetry: sampler::SharedTelemetry,
    /// Slurm jobs the prolog announced, by ID.
    slurm: HashMap<u64, SlurmJob>,
    /// The cluster-wide places of Slurm jobs of this node, as the prolog and the last refresh read them.
    places: HashMap<u64, Schedule>,
    /// Slurm jobs whose epilog ran, while their cgroups are still there.
    slurm_done: HashSet<u64>,
    /// Message-driven raises, while a `dcs` policy is in force.
    dcs: Option<dcs::Engine>,
    /// How `dcs` runs when a policy asks for it.
    dcs_settings: dcs::Settings,
    /// The agent itself, for the threads it starts later (`dcs`).
    me: Weak<Guarded<Agent>>,
}

/// The agent, shared by the slot loop (which sleeps on it between slots) and the threads that change it: the
/// control socket, `dcs`, Slurm discovery, the signal waiter. They change it only through its methods.
pub(crate) type Shared = Arc<Guarded<Agent>>;

/// Faults the agent has said, by where they happen: each is one line when it starts and one when it clears,
/// not a line per slot.
#[derive(Debug, Default)]
pub(crate) struct Faults(HashMap<String, String>);

impl Faults {
    /// Says `what` failed at `place`, unless that is what was said last for it.
    pub(crate) fn report(&mut self, place: &str, what: &str) {
        if self.0.get(place).is_none_or(|said| said != what) {
            crate::log::warning!("lockstep agent: {place}: {what}");
            self.0.insert(place.to_string(), what.to_string());
        }
    }

    /// Says `place` works again, if it had failed.
    pub(crate) fn clear(&mut self, place: &str) {
        if self.0.remove(place).is_some() {
            crate::log::info!("lockstep agent: {place}: works again");
        }
    }
}

/// Where the agent is in its life. Every cgroup change is undone on the way from `Running` to `Stopping`
/// ([`Agent::restore_all`]), on a crash by the watchdog, and on the next start by the journal's repair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lifecycle {
    /// Applying the policy at every slot.
    Running,
    /// Told to stop (SIGINT, SIGTERM, SIGHUP): the slot loop ends and everything is restored.
    Stopping,
}

impl Agent {
    /// Applies the policy for slot `k` to every job; logs the decisions, the tick itself as `slot` at a slot
    /// boundary and as `replan` when jobs or the policy changed within a slot.
    fn tick(&mut self, k: u64, boundary: bool) {
        let started = Instant::now();
        let started_at = lockstep_store::now();
        self.drop_ended();
        // Jobs with a cluster-wide place follow it; the others share the node's own cycle of rows.
        let local: Vec<usize> = (0..self.jobs.len()).filter(|&i| self.jobs[i].place.is_none()).collect();
        let entries: Vec<Entry> = local
            .iter()
            .map(|&i| Entry { name: &self.jobs[i].name, pus: &self.jobs[i].pus, pinned: self.jobs[i].pinned })
            .collect();
        let (rows, count) = rows::assign(&entries);
        self.rows = count;
        self.current_slot = k;
        self.active_row = (k % u64::from(count)) as u32;
        for (&i, r) in local.iter().zip(&rows) {
            let j = &mut self.jobs[i];
            (j.row, j.round, j.favoured) = (*r, count, *r == self.active_row);
        }
        for j in &mut self.jobs {
            if let Some(schedule) = j.place {
                let place = place_in_slot(&schedule, k, self.slot);
                (j.row, j.round, j.favoured) = (place.row, place.period, place.holds(k));
            }
        }
        let views: Vec<JobView> = self
            .jobs
            .iter()
            .map(|j| JobView { name: &j.name, favoured: j.favoured, round: j.round, pus: &j.pus })
            .collect();
        if let Some(auto) = self.planner.measuring() {
            // Only jobs that share PUs with another are measured; a job alone is left to the kernel.
            let (jobs, epoch) = (&self.jobs, self.epoch);
            for c in auto.observe(k, self.slot, &views, |i| progress::sample(&jobs[i].count_dirs(), epoch)) {
                if !c.trying {
                    crate::log::info!("lockstep agent: auto: {} -> {}: {}", c.jobs.join(" "), c.policy, c.why);
                }
                self.choices.push((lockstep_store::now(), c));
            }
        }
        let mut plan = self.planner.plan(&views);
        for (j, p) in self.jobs.iter_mut().zip(plan.iter_mut()) {
            j.planned = *p;
            // A job dcs raised by weight keeps it until its quantum is over.
            p.boosted |= self.dcs.as_ref().is_some_and(|d| d.holds_weight(&j.name));
        }
        // Thaw and boost before freezing and lowering, so that no two sharing jobs are ever frozen together.
        let mut order: Vec<usize> = (0..self.jobs.len()).collect();
        order.sort_by_key(|&i| plan[i].frozen || (!plan[i].boosted && self.jobs[i].applied.boosted));
        let mut decisions = Vec::new();
        let mut gone = Vec::new();
        for i in order {
            let t0 = Instant::now();
            match self.jobs[i].apply(plan[i], &mut self.journal, &self.store) {
                Ok(actions) => {
                    // A job works again when a change of its went through (not when nothing was to be done).
                    if !actions.is_empty() && !self.faults.0.is_empty() {
                        self.faults.clear(&format!("job {}", self.jobs[i].name));
                    }
                    for a in actions {
                        decisions.push(self.decision(Some(&self.jobs[i].name), a, t0.elapsed()));
                    }
                }
                Err(e) if e.is::<Gone>() => gone.push(i),
                Err(e) => {
                    let name = self.jobs[i].name.clone();
                    self.faults.report(&format!("job {name}"), &format!("{e:#}"));
                }
            }
        }
        gone.sort_unstable();
        for i in gone.into_iter().rev() {
            self.retire(i);
        }
        self.last_apply_us = started.elapsed().as_secs_f64() * 1e6;
        let mut slot_record =
            self.decision(None, if boundary { Action::Slot } else { Action::Replan }, started.elapsed());
        slot_record.time = started_at;
        decisions.insert(0, slot_record);
        // Which jobs the slot is for, at its boundary: what agreement across nodes is measured from.
        if boundary && self.policy.slotted() {
            for j in self.jobs.iter().filter(|j| j.favoured) {
                decisions.push(self.decision(Some(&j.name), Action::Favour, Duration::ZERO));
            }
        }
        self.pending.extend(decisions);
        if self.last_flush.elapsed() >= LOG_INTERVAL {
            self.flush();
        }
    }

    /// Releases the jobs that have ended (their cgroups removed, or their adopted processes exited), and drops the
    /// cgroups that are gone from the jobs that go on.
    fn drop_ended(&mut self) {
        for i in (0..self.jobs.len()).rev() {
            self.jobs[i].prune(&mut self.journal);
            if self.jobs[i].ended() {
                self.retire(i);
            }
        }
    }

    /// Forgets job `i`, which has ended: restores what is left of it (files already gone are fine), removes the
    /// cgroup the agent created for it, and logs `gone`.
    fn retire(&mut self, i: usize) {
        let mut job = self.jobs.remove(i);
        self.dcs_leave(&mut job);
        self.uncount(&job.name);
        match job.release(&mut self.journal, &self.store) {
            Ok(()) => crate::log::info!("lockstep agent: job {} ended", job.name),
            Err(e) => crate::log::warning!("lockstep agent: job {} ended; cannot clean up after it: {e:#}", job.name),
        }
        let _ = self.store.managed_remove(&job.name);
        let d = self.decision(Some(&job.name), Action::Gone, Duration::ZERO);
        self.pending.push(d);
    }

    /// Writes pending decisions and journal removals to the store in one transaction, then `auto`'s pending
    /// choices in another. What was written is dropped, each batch on its own (decisions written are never written
    /// again because the choices failed); when the store cannot take a batch (locked, read-only, full), it waits
    /// for the next flush, the oldest dropped past [`MAX_PENDING`].
    fn flush(&mut self) {
        let restored = self.journal.take_restored();
        let decisions = self.store.log_decisions(&self.pending, &restored);
        if decisions.is_ok() {
            self.pending.clear();
        } else {
            self.journal.restore_pending(restored);
            let excess = self.pending.len().saturating_sub(MAX_PENDING);
            self.pending.drain(..excess);
        }
        let choices = self.store.log_auto(&self.node, &self.choices);
        if choices.is_ok() {
            self.choices.clear();
        } else {
            let excess = self.choices.len().saturating_sub(MAX_PENDING);
            self.choices.drain(..excess);
        }
        match decisions.and(choices) {
            Ok(()) => self.faults.clear("store"),
            Err(e) => self.faults.report("store", &format!("cannot log decisions: {e:#}")),
        }
        self.last_flush = Instant::now();
    }

    fn decision(&self, job: Option<&str>, action: Action, took: Duration) -> Decision {
        Decision {
            time: lockstep_store::now(),
            node: self.node.clone(),
            policy: self.policy.name().to_string(),
            slot: self.current_slot,
            active_row: self.active_row,
            rows: self.rows,
            job: job.map(str::to_string),
            action,
            duration_us: took.as_secs_f64() * 1e6,
        }
    }

    /// Switches to `policy` (and slot length `slot`, when given) at once: `dcs` is started or stopped as the
    /// policy asks (a `dcs` that cannot start leaves everything as it was), and the plan is redone.
    pub fn set_policy(&mut self, policy: PolicySpec, slot: Option<Duration>) -> anyhow::Result<()> {
        self.switch_dcs(policy.raises())?;
        let was = (self.policy, self.slot);
        self.planner = policy.build();
        self.policy = policy;
        if let Some(slot) = slot {
            self.slot = slot;
        }
        crate::log::info!(
            "lockstep agent: policy {} slot {} -> policy {} slot {}",
            was.0,
            lockstep_core::duration::format(was.1),
            self.policy,
            lockstep_core::duration::format(self.slot)
        );
        self.replan = true;
        Ok(())
    }

    /// Takes on a job built by `make` (from this agent's cgroup backend, within what other jobs and the agent
    /// itself hold) unless its name is taken: recorded in the store to be taken over after a restart, counted, and
    /// planned at once.
    pub fn add_job(
        &mut self,
        name: &str,
        make: impl FnOnce(&dyn Backend, &adopt::Claims) -> anyhow::Result<Managed>,
    ) -> anyhow::Result<()> {
        if self.jobs.iter().any(|j| j.name == name) {
            return Err(UsageError::new(format!("job name {name:?} is already managed by this agent")).into());
        }
        let claims = adopt::Claims {
            protected: vec![
                (1, "init"),
                (std::process::id() as i32, "the lockstep agent"),
                (self.journal.watchdog_pid(), "the agent's watchdog"),
            ],
            taken: self
                .jobs
                .iter()
                .map(|j| (j.name.clone(), j.groups.iter().flat_map(|g| g.dirs.clone()).collect()))
                .collect(),
        };
        let mut job = make(self.backend.as_ref(), &claims)?;
        if let Err(e) = self.store.managed_put(name, &serde_json::to_string(&job.saved())?) {
            // Nothing may stay changed by a request that failed.
            let _ = job.release(&mut self.journal, &self.store);
            return Err(e);
        }
        self.count(&job);
        crate::log::info!(
            "lockstep agent: job {name} taken on ({}, {} cgroup(s), PUs {}, owner uid {})",
            job.origin.kind(),
            job.groups.len(),
            job.pus,
            job.owner
        );
        self.jobs.push(job);
        self.replan = true;
        Ok(())
    }

    /// Stops managing job `name`: lowered if `dcs` raised it, its cgroups restored, forgotten by the store.
    pub fn release(&mut self, name: &str) -> anyhow::Result<()> {
        let Some(i) = self.jobs.iter().position(|j| j.name == name) else {
            return Err(UsageError::new(format!("no job {name:?} is managed by this agent")).into());
        };
        let mut job = self.jobs.remove(i);
        self.dcs_leave(&mut job);
        self.uncount(name);
        job.release(&mut self.journal, &self.store)?;
        crate::log::info!("lockstep agent: job {name} released; its cgroups are as they were before");
        self.flush();
        self.store.managed_remove(name)?;
        self.replan = true;
        Ok(())
    }

    /// Beats for the watchdog (starting a new one if it died). After a gap longer than the watchdog waits (the
    /// agent was stopped), the watchdog has put every job back: the jobs are taken as restored and planned again.
    fn heartbeat(&mut self) {
        if self.last_beat.elapsed() >= watchdog::BEAT_TIMEOUT {
            crate::log::warning!(
                "lockstep agent: did not run for {:.1} s; the watchdog restored every job, planning again",
                self.last_beat.elapsed().as_secs_f64()
            );
            for job in &mut self.jobs {
                job.applied = cosched::Desired::default();
            }
            self.replan = true;
        }
        self.journal.heartbeat();
        self.last_beat = Instant::now();
        if let Some(file) = &self.clock_skew_file {
            // The test seam for wall-clock steps: nanoseconds to add to the clock, re-read at every beat.
            if let Some(ns) = read_small(file).and_then(|t| t.trim().parse::<i64>().ok()) {
                slot::set_clock_offset(ns);
            }
        }
    }

    /// Tells the slot loop to end; [`run`] then restores every job.
    pub fn stop(&mut self) {
        self.lifecycle = Lifecycle::Stopping;
    }

    /// Whether the agent has been told to stop (threads that take the lock end then).
    pub fn stopping(&self) -> bool {
        self.lifecycle == Lifecycle::Stopping
    }

    /// Lowers `job`, which leaves the agent, if `dcs` raised it, and drops what `dcs` keeps of it.
    fn dcs_leave(&mut self, job: &mut Managed) {
        if let Some(engine) = self.dcs.as_mut() {
            engine.leave(job, dcs::Ctx { journal: &mut self.journal, store: &self.store });
        }
    }

    /// Switches `dcs` to `want` (the policy's [`PolicySpec::raises`]): started (probe loaded and attached, or the error saying what is
    /// missing, with nothing changed), stopped (every raise put back), or kept.
    fn switch_dcs(&mut self, want: Option<cosched::Raise>) -> anyhow::Result<()> {
        if self.dcs.as_ref().map(|e| e.raise) == want {
            return Ok(());
        }
        let started = match want {
            Some(raise) => Some(dcs::Engine::start(self.me.clone(), raise, &self.dcs_settings)?),
            None => None,
        };
        if let Some(old) = std::mem::replace(&mut self.dcs, started) {
            old.stop(&mut self.jobs, dcs::Ctx { journal: &mut self.journal, store: &self.store });
        }
        Ok(())
    }

    /// Restores every job's cgroups on the way out. Jobs stay in the store, so that the next agent takes them
    /// over; adopted processes stay in the agent's cgroups for the same reason.
    fn restore_all(&mut self) {
        if let Some(old) = self.dcs.take() {
            old.stop(&mut self.jobs, dcs::Ctx { journal: &mut self.journal, store: &self.store });
        }
        for job in &mut self.jobs {
            if let Err(e) = job.apply(cosched::Desired::default(), &mut self.journal, &self.store) {
                if !e.is::<Gone>() {
                    crate::log::warning!("lockstep agent: cannot restore job {}: {e:#}", job.name);
                }
            }
        }
        self.flush();
    }

    /// Takes over the jobs a previous agent managed (their cgroups still exist); counting restarts from zero.
    fn take_over(&mut self) -> anyhow::Result<()> {
        for (name, saved) in self.store.managed_all()? {
            match serde_json::from_str(&saved).ok().and_then(|s| Managed::restore_saved(&name, s)) {
                Some(job) => {
                    self.count(&job);
                    self.jobs.push(job);
                }
                None => self.store.managed_remove(&name)?,
            }
        }
        Ok(())
    }

    /// Starts counting `job`.
    fn count(&self, job: &Managed) {
        let groups: Vec<Vec<PathBuf>> = match &job.origin {
            managed::Origin::Slurm { dirs, .. } => vec![dirs.clone()],
            _ => job.groups.iter().map(|g| g.dirs.clone()).collect(),
        };
        self.telemetry.lock().attach(&job.name, &groups, &job.pus);
    }

    /// Stops counting job `name`; its final counts go to the store.
    fn uncount(&self, name: &str) {
        self.telemetry.lock().detach(name);
        self.telemetry.notify();
    }

    /// The live table; `viewer` set (a user other than root) lists only that user's jobs.
    fn status(&self, viewer: Option<u32>) -> Status {
        // What a user other than root sees: their jobs, and of the others only how many there are.
        let visible = |j: &Managed| viewer.is_none_or(|uid| j.owner == uid);
        let mine: HashSet<&str> = self.jobs.iter().filter(|j| visible(j)).map(|j| j.name.as_str()).collect();
        let shown = |name: &str| viewer.is_none() || mine.contains(name);
        let groups = self
            .planner
            .choices()
            .into_iter()
            .filter(|g| g.jobs.iter().any(|n| shown(n)))
            .map(|mut g| {
                for n in &mut g.jobs {
                    if !shown(n) {
                        *n = OTHER_JOB.to_string();
                    }
                }
                g
            })
            .collect();
        Status {
            node: self.node.clone(),
            pid: std::process::id() as i32,
            watchdog_pid: self.journal.watchdog_pid(),
            policy: self.policy.name().to_string(),
            slot_ms: self.slot.as_millis() as u64,
            slot: self.current_slot,
            active_row: self.active_row,
            rows: self.rows,
            last_apply_us: self.last_apply_us,
            dcs: self.dcs.as_ref().map(|d| d.status(viewer.is_none(), &shown)),
            groups,
            others: self.jobs.len() - mine.len(),
            jobs: self
                .jobs
                .iter()
                .filter(|j| visible(j))
                .map(|j| {
                    // A job with a place has its row from it at once, not only from the next slot's plan (a job
                    // found since then still holds the default row 0 there).
                    let place = j.place.map(|s| place_in_slot(&s, self.current_slot, self.slot));
                    JobStatus {
                        name: j.name.clone(),
                        row: place.map_or(j.row, |p| p.row),
                        pinned: j.pinned.is_some() || j.place.is_some(),
                        period: place.map(|p| p.period),
                        pus: j.pus.to_string(),
                        frozen: j.applied.frozen,
                        boosted: j.applied.boosted,
                        origin: j.origin.kind(),
                        owner: j.owner,
                        cgroups: j.groups.iter().filter_map(|g| g.dirs.first().cloned()).collect(),
                    }
                })
                .collect(),
        }
    }
}

/// The test seam for wall-clock steps, `LOCKSTEP_CLOCK_SKEW_FILE`, if it names a file in directories only root
/// (or the agent's user) can change: one that another user could write or replace is refused, once, at start.
fn clock_skew_file() -> Option<PathBuf> {
    let file = PathBuf::from(std::env::var_os("LOCKSTEP_CLOCK_SKEW_FILE")?);
    match lockstep_core::trust::check_path(&file, "LOCKSTEP_CLOCK_SKEW_FILE") {
        Ok(()) => Some(file),
        Err(e) => {
            crate::log::warning!("lockstep agent: {e}");
            None
        }
    }
}

/// The first 64 bytes of regular file `file` as text, read without following a link or blocking on a FIFO.
fn read_small(file: &std::path::Path) -> Option<String> {
    use std::io::Read;
    let (f, _) = lockstep_core::trust::open_regular(file)?;
    let mut text = String::new();
    f.take(64).read_to_string(&mut text).ok()?;
    Some(text)
}

/// How a job of another user is named in a group of `auto` that a user's status shows.
const OTHER_JOB: &str = "(another user's job)";

/// The place `schedule` holds in slot `k` of length `slot`: the one in force when the slot starts, so that every
/// node of the job switches in the same slot.
fn place_in_slot(schedule: &Schedule, k: u64, slot: Duration) -> Place {
    schedule.at(slot::start_ns(k, slot) / 1_000_000)
}

/// What the agent makes sure of before it serves: its descriptors, and a store no other user can plant or swap
/// (it holds the restore journal, which the agent replays as root).
fn prepare(config: &Config) -> anyhow::Result<()> {
    raise_open_files();
    if let Some(dir) = config.store.parent().filter(|d| !d.as_os_str().is_empty()) {
        lockstep_core::trust::ensure_dir(dir, 0o700, "the store directory")?;
    }
    Ok(())
}

/// Raises the agent's limit of open descriptors to the hard limit: every job's counters and cgroup files take
/// some, and the descriptors that undo a change are opened when the change is made, so the agent must not be the
/// first process on the node to run out. Said when it cannot.
fn raise_open_files() {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit with a valid rlimit.
    let raised = unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) == 0 && {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &raw const limit) == 0
        }
    };
    if !raised {
        crate::log::warning!("lockstep agent: cannot raise the open-file limit: {}", std::io::Error::last_os_error());
    }
}

/// Serves /metrics and the counters API on the bound `listener`; says where, and warns when that is reachable
/// from the network.
fn serve_metrics(
    doors: &doors::Doors,
    listener: std::net::TcpListener,
    telemetry: &sampler::SharedTelemetry,
    store: &Path,
) -> anyhow::Result<()> {
    let bound = doors.tcp(listener, doors::METRICS, http::handler(telemetry.clone(), store.to_path_buf()))?;
    crate::log::info!("lockstep agent: metrics on http://{bound}/metrics");
    if !bound.ip().is_loopback() {
        crate::log::warning!(
            "lockstep agent: {bound} is reachable from the network: every job's name and counts are readable \
             there (bind 127.0.0.1 and scrape through a proxy, or firewall the port)"
        );
    }
    Ok(())
}

/// Runs the agent in the foreground until SIGINT or SIGTERM; returns the exit status.
pub fn run(config: Config) -> anyhow::Result<i32> {
    let backend = lockstep_cgroup::detect()?;
    server::check(&config.socket)?;
    prepare(&config)?;
    // A client or scraper that hangs up mid-answer is an EPIPE error for that connection, never a signal.
    // SAFETY: ignoring a signal installs no handler code.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    // From the moment the socket answers, SIGINT/SIGTERM must mean "restore and exit", never a plain death:
    // block them now; the waiter thread takes them.
    let mut signals = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        signals.add(s);
    }
    signals.thread_block()?;
    // Everything that can refuse the start is tried before the socket exists: a refused start leaves nothing.
    let store = Store::open(&config.store)?;
    store.set_busy_timeout(STORE_BUSY)?;
    let metrics = config.metrics.map(http::bind).transpose()?;
    let (listener, socket) = server::bind(&config.socket)?;
    // The watchdog before any change: from now on, every change is journaled before it is made.
    let watchdog = Watchdog::spawn(&config.store)?;
    let telemetry = sampler::Telemetry::shared(config.telemetry.clone(), &config.node);
    let sampling = sampler::spawn(telemetry.clone(), config.store.clone())?;
    let repaired = journal::repair(&store)?;
    if repaired > 0 {
        crate::log::info!("lockstep agent: restored {repaired} cgroup file(s) left changed by a previous agent");
    }

    let shared: Shared = Arc::new_cyclic(|me| {
        Guarded::new(Agent {
            policy: config.policy,
            planner: config.policy.build(),
            slot: config.slot,
            jobs: Vec::new(),
            journal: Journal::new(watchdog, config.store.clone()),
            store,
            backend,
            node: config.node.clone(),
            current_slot: 0,
            active_row: 0,
            rows: 1,
            last_apply_us: 0.0,
            replan: false,
            pending: Vec::new(),
            choices: Vec::new(),
            epoch: Instant::now(),
            last_flush: Instant::now(),
            last_beat: Instant::now(),
            faults: Faults::default(),
            clock_skew_file: clock_skew_file(),
            lifecycle: Lifecycle::Running,
            telemetry: telemetry.clone(),
            slurm: HashMap::new(),
            places: HashMap::new(),
            slurm_done: HashSet::new(),
            dcs: None,
            dcs_settings: config.dcs.clone(),
            me: me.clone(),
        })
    });
    {
        let mut agent = shared.lock();
        agent.take_over()?;
        let raise = agent.policy.raises();
        agent.switch_dcs(raise)?;
        agent.slurm = agent.store.slurm_all()?.into_iter().map(|j| (j.id, j)).collect();
    }
    {
        let shared = shared.clone();
        std::thread::spawn(move || {
            let _ = signals.wait();
            shared.lock().stop();
            shared.notify();
        });
    }
    // The doors' threads come and go with the load: say it once if they cannot be real-time.
    let said = std::sync::Once::new();
    let doors = doors::Doors::new(move || {
        if let Err(e) = try_realtime() {
            said.call_once(|| {
                crate::log::warning!("lockstep agent: cannot use SCHED_FIFO for the control socket ({e})");
            });
        }
    })?;
    doors.unix(listener, doors::CONTROL, server::handler(shared.clone()))?;
    slurm::spawn_discovery(shared.clone(), config.slurm_node.clone());
    if let Some(metrics) = metrics {
        serve_metrics(&doors, metrics, &telemetry, &config.store)?;
    }
    crate::log::info!(
        "lockstep agent: node {} serving {} (store {}, policy {}, slot {})",
        config.node,
        config.socket.display(),
        config.store.display(),
        config.policy,
        lockstep_core::duration::format(config.slot)
    );
    slot_loop(&shared);
    let mut agent = shared.lock();
    agent.restore_all();
    drop(agent);
    sampler::stop(&telemetry, sampling);
    drop(socket);
    crate::log::info!("lockstep agent: stopped; every job restored");
    Ok(0)
}

/// Real-time priority of the slot thread: above every ordinary task, so that a slot switch is not late behind
/// the jobs it switches (agents on different nodes must switch within milliseconds), and low among real-time
/// priorities. The thread sleeps between switches; a switch takes well under a millisecond. The Slurm discovery
/// thread, which takes the agent's lock five times a second, the control socket's threads and the sampling
/// thread (whose telemetry lock the slot thread takes as jobs go) run at it too: a lock holder preempted by the
/// jobs would delay the switch (std's mutex does not inherit priority).
const SLOT_PRIORITY: i32 = 10;

/// Moves the calling thread to `SCHED_FIFO` at [`SLOT_PRIORITY`]; says so, naming `role`, when it cannot.
pub(crate) fn realtime_thread(role: &str) {
    if let Err(e) = try_realtime() {
        crate::log::warning!(
            "lockstep agent: cannot use SCHED_FIFO for {role} ({e}); slot switches may lag under load"
        );
    }
}

/// Moves the calling thread to `SCHED_FIFO` at [`SLOT_PRIORITY`].
fn try_realtime() -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: SLOT_PRIORITY };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &raw const param) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A slot's length in nanoseconds.
fn slot_ns(slot: Duration) -> u64 {
    slot.as_nanos() as u64
}

/// Applies the policy at every slot boundary (and at once when asked to replan) until told to stop.
fn slot_loop(shared: &Shared) {
    realtime_thread("slot switches");
    let mut agent = shared.lock();
    let mut k = slot::index(slot::realtime_ns(), agent.slot);
    agent.tick(k, false);
    loop {
        let next = slot::start_ns(k + 1, agent.slot);
        // Wait on the condition variable until close to the boundary (waking to beat for the watchdog at least
        // every BEAT_INTERVAL), then sleep the rest precisely.
        loop {
            if agent.stopping() {
                return;
            }
            if agent.last_beat.elapsed() >= watchdog::BEAT_INTERVAL {
                agent.heartbeat();
            }
            if agent.replan {
                agent.replan = false;
                // A replan that comes after the boundary it was waiting for is that slot's first tick: its
                // boundary (recorded as such, with the jobs it favours).
                let now_k = slot::index(slot::realtime_ns(), agent.slot);
                let boundary = now_k != k;
                k = now_k;
                agent.tick(k, boundary);
                break;
            }
            let now = slot::realtime_ns();
            // The wall clock stepped back by more than a slot: start again from the slot it says it is, rather
            // than wait (perhaps an hour) for the boundary the old time was heading to.
            if now.saturating_add(slot_ns(agent.slot)) < next {
                crate::log::info!("lockstep agent: the wall clock stepped back; slots follow it");
                k = slot::index(now, agent.slot);
                agent.tick(k, true);
                break;
            }
            if now >= next {
                k = slot::index(now, agent.slot);
                agent.tick(k, true);
                break;
            }
            let left = Duration::from_nanos(next - now);
            if left <= Duration::from_millis(2) {
                drop(agent);
                slot::sleep_until(next);
                agent = shared.lock();
                continue;
            }
            let wait = left.saturating_sub(Duration::from_millis(1)).min(watchdog::BEAT_INTERVAL);
            agent = shared.wait(agent, wait);
        }
    }
}
