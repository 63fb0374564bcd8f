//! What the daemon owns, and how it is made.

use std::path::PathBuf;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use crate::command::{Command, Mailbox};
use crate::dcs::engine::Settings;
use crate::faults::Faults;
use crate::journal::Journal;
use crate::managed::Managed;
use crate::sampler::Counting;
use lockstep_cgroup::Backend;
use lockstep_core::cosched::{self, Planner, PolicySpec};
use lockstep_store::{Decision, Store};

/// The bounds of the slot-switch lateness histogram, in seconds: 100 µs to 1 s.
const LATENESS_BOUNDS: [f64; 13] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0];

/// The agent's state, and its loop ([`Daemon::run`]).
pub struct Daemon {
    /// The policy in force, and its slot planner.
    pub(super) policy: PolicySpec,
    pub(super) planner: Planner,
    /// `auto`'s state while another policy is in force, and since when: taken up again if `auto` comes back within
    /// `AUTO_KEPT` (a minute; `set_policy`).
    pub(super) auto_away: Option<(cosched::auto::Auto, Instant)>,
    pub(super) slot: Duration,
    pub(super) jobs: Vec<Managed>,
    pub(super) journal: Journal,
    pub(super) store: Store,
    pub(super) backend: Box<dyn Backend>,
    pub(super) node: String,
    pub(super) current_slot: u64,
    pub(super) active_row: u32,
    pub(super) rows: u32,
    pub(super) last_apply_us: f64,
    /// How late each slot switch began after its boundary.
    pub(super) lateness: lockstep_proto::protocol::Histogram,
    /// Whether the plan must be redone at once (policy change, new or released job), not at the next boundary.
    pub(super) replan: bool,
    /// The daemon's records the store was too busy to take, in order, for the next flush.
    pub(super) unsaved: Vec<super::records::Record>,
    /// Decisions not yet in the store.
    pub(super) pending: Vec<Decision>,
    /// What `auto` chose or started trying, not yet in the store (time, record).
    pub(super) choices: Vec<(f64, cosched::auto::Choice)>,
    /// What every job's progress is read with (for `auto`, and `progress` requests).
    pub(super) measures: super::measures::Measures,
    /// When decisions last went to the store.
    pub(super) last_flush: Instant,
    /// Where the daemon is in its life.
    pub(super) lifecycle: Lifecycle,
    /// When the loop last beat for the watchdog.
    pub(super) last_beat: Instant,
    /// Faults said once, until they clear.
    pub(super) faults: Faults,
    /// The file `LOCKSTEP_CLOCK_SKEW_FILE` names, read at start: the test seam for wall-clock steps.
    pub(super) clock_skew_file: Option<PathBuf>,
    /// Every job's counters: attached by message, read from the sampler's snapshot, never waited for.
    pub(super) telemetry: Counting,
    /// Slurm's jobs on this node, and what Slurm said of them.
    pub(super) slurm: super::slurm::known::SlurmState,
    /// Message-driven raises (`dcs`).
    pub(super) dcs: super::dcs::host::DcsHost,
    /// Descriptors held for restoring every job at stop, whatever ran the agent out of them.
    pub(super) reserve: crate::restore::Reserve,
    /// Where the other threads' commands come in.
    pub(super) inbox: Receiver<Command>,
    /// The inbox's address, for the threads the daemon starts (`dcs`'s).
    pub(super) mailbox: Mailbox,
    /// Where the status the doors answer with is published.
    pub(super) publisher: super::board::Publisher,
}

/// Where the daemon is in its life. Every cgroup change is undone on the way from `Running` to `Stopping`
/// ([`Daemon::restore_all`]), on a crash by the watchdog, and on the next start by the journal's repair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lifecycle {
    /// Applying the policy at every slot.
    Running,
    /// Told to stop (SIGINT, SIGTERM): the loop ends and everything is restored.
    Stopping,
}

/// What the daemon starts from: made by the agent's setup, which has already started the watchdog and the
/// sampling thread and repaired what a previous agent left changed.
pub struct Start {
    /// The policy and slot length at start.
    pub policy: PolicySpec,
    /// The slot length at start.
    pub slot: Duration,
    /// This node's name.
    pub node: String,
    /// This node's name in Slurm.
    pub slurm_node: String,
    /// The restore journal.
    pub journal: Journal,
    /// The store.
    pub store: Store,
    /// The cgroup backend.
    pub backend: Box<dyn Backend>,
    /// Every job's counters (the daemon's side of the sampler).
    pub telemetry: Counting,
    /// How `dcs` runs.
    pub dcs: Settings,
    /// The test seam for wall-clock steps, if set and trusted.
    pub clock_skew_file: Option<PathBuf>,
}

impl Daemon {
    /// The daemon of `start`, reading commands from `inbox` (whose address is `mailbox`): it takes over the jobs a
    /// previous agent managed, starts `dcs` if the policy raises, and reads the Slurm jobs the prologs announced.
    pub fn new(start: Start, mailbox: Mailbox, inbox: Receiver<Command>) -> anyhow::Result<Self> {
        // The loop never waits for another connection's write lock: what the store cannot take at once waits in
        // memory for the next flush (records, journal entries, decisions).
        start.store.set_busy_timeout(Duration::ZERO)?;
        let slurm = super::slurm::known::SlurmState::load(start.slurm_node, &start.store)?;
        let mut daemon = Self {
            policy: start.policy,
            planner: start.policy.build(),
            auto_away: None,
            slot: start.slot,
            jobs: Vec::new(),
            journal: start.journal,
            store: start.store,
            backend: start.backend,
            node: start.node,
            current_slot: 0,
            active_row: 0,
            rows: 1,
            last_apply_us: 0.0,
            lateness: lockstep_proto::protocol::Histogram::new(&LATENESS_BOUNDS),
            replan: false,
            unsaved: Vec::new(),
            pending: Vec::new(),
            choices: Vec::new(),
            measures: super::measures::Measures::new(),
            last_flush: Instant::now(),
            last_beat: Instant::now(),
            faults: Faults::default(),
            clock_skew_file: start.clock_skew_file,
            lifecycle: Lifecycle::Running,
            telemetry: start.telemetry,
            slurm,
            dcs: super::dcs::host::DcsHost::new(start.dcs),
            reserve: crate::restore::Reserve::hold()?,
            inbox,
            mailbox,
            publisher: super::board::Publisher::new(lockstep_proto::protocol::Status::default()),
        };
        daemon.take_over()?;
        daemon.switch_dcs(daemon.policy.raises())?;
        daemon.retire_ended_slurm_jobs();
        daemon.publish();
        Ok(daemon)
    }
}
