//! What the daemon owns, and how it is made.

use std::path::PathBuf;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use crate::command::{Command, Mailbox};
use crate::dcs::engine::Settings;
use crate::faults::Faults;
use crate::journal::Journal;
use crate::sampler::Counting;
use lockstep_cgroup::Backend;
use lockstep_core::cosched::PolicySpec;
use lockstep_core::ident::NodeName;
use lockstep_store::Store;

/// The agent's state, and its loop ([`Daemon::run`]).
pub struct Daemon {
    /// The policy in force, and what plans its slots.
    pub(super) planning: super::planning::Planning,
    /// The slot clock: slot length, the slot and row in force, switch times.
    pub(super) clock: super::clock::Clock,
    /// The jobs, and the journal, store and backend their changes go through.
    pub(super) table: super::table::Table,
    /// This node's name, in its records.
    pub(super) node: NodeName,
    /// What waits for the store: records, decisions, `auto`'s choices.
    pub(super) outbox: super::records::Outbox,
    /// What every job's progress is read with (for `auto`, and `progress` requests).
    pub(super) measures: super::measures::Measures,
    /// The beat for the watchdog.
    pub(super) pulse: super::pulse::Pulse,
    /// Faults said once, until they clear.
    pub(super) faults: Faults,
    /// Every job's counters: attached by message, read from the sampler's snapshot, never waited for.
    pub(super) telemetry: Counting,
    /// Slurm's jobs on this node, and what Slurm said of them.
    pub(super) slurm: super::slurm::known::SlurmState,
    /// Message-driven raises (`dcs`).
    pub(super) dcs: super::dcs::host::DcsHost,
    /// Descriptors held for restoring every job at stop, whatever ran the agent out of them.
    pub(super) reserve: crate::restore::Reserve,
    /// Where the other threads' commands come in, and whether the daemon was told to stop.
    pub(super) inbox: super::inbox::Inbox,
    /// Where the status the doors answer with is published.
    pub(super) publisher: super::board::Publisher,
    /// What the freezer's lock alone makes a freezer write take, measured while a job's costs are judged.
    pub(super) lock_probe: crate::lock_wait::Probe,
}

/// What the daemon starts from: made by the agent's setup, which has already started the watchdog and the
/// sampling thread and repaired what a previous agent left changed.
pub struct Start {
    /// The policy and slot length at start.
    pub policy: PolicySpec,
    /// The slot length at start.
    pub slot: Duration,
    /// This node's name.
    pub node: NodeName,
    /// This node's name in Slurm.
    pub slurm_node: NodeName,
    /// The restore journal.
    pub journal: Journal,
    /// The store, read as the daemon starts (the jobs a previous agent managed, the Slurm jobs the prologs
    /// announced); the loop never writes it.
    pub store: Store,
    /// The store's writer: what the loop writes goes through it.
    pub writer: crate::writer::Writer,
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
        let slurm = super::slurm::known::SlurmState::load(start.slurm_node, &start.store)?;
        let start_node = start.node;
        let lock_probe = crate::lock_wait::Probe::new(start.backend.as_ref());
        let mut daemon = Self {
            planning: super::planning::Planning::new(start.policy),
            clock: super::clock::Clock::new(start.slot),
            table: super::table::Table::new(start.journal, start.writer, start.backend),
            node: start_node.clone(),
            outbox: super::records::Outbox::new(),
            measures: super::measures::Measures::new(),
            pulse: super::pulse::Pulse::new(start.clock_skew_file),
            faults: Faults::default(),
            telemetry: start.telemetry,
            slurm,
            dcs: super::dcs::host::DcsHost::new(start.dcs),
            reserve: crate::restore::Reserve::hold()?,
            inbox: super::inbox::Inbox::new(mailbox, inbox),
            publisher: super::board::Publisher::new(lockstep_proto::protocol::Status::new(start_node)),
            lock_probe,
        };
        daemon.take_over(&start.store)?;
        daemon.switch_dcs(daemon.planning.policy().raises())?;
        daemon.retire_ended_slurm_jobs();
        daemon.publish();
        Ok(daemon)
    }
}
