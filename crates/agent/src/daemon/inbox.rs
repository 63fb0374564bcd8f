//! Where the other threads' commands come in, and whether one of them asked the daemon to stop.

use std::sync::mpsc::Receiver;
use std::time::Duration;

use crate::command::{Command, Mailbox};

/// The daemon's inbox, the address it hands the threads it starts (`dcs`'s), and where it is in its life.
pub(super) struct Inbox {
    /// The commands.
    commands: Receiver<Command>,
    /// The inbox's address.
    address: Mailbox,
    /// Where the daemon is in its life.
    lifecycle: Lifecycle,
}

/// Where the daemon is in its life. Every cgroup change is undone on the way from `Running` to `Stopping`
/// (`Daemon::restore_all`), on a crash by the watchdog, and on the next start by the journal's repair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lifecycle {
    /// Applying the policy at every slot.
    Running,
    /// Told to stop (SIGINT, SIGTERM): the loop ends and everything is restored.
    Stopping,
}

impl Inbox {
    /// The inbox of `commands`, whose address is `address`, of a daemon that runs.
    pub(super) fn new(address: Mailbox, commands: Receiver<Command>) -> Self {
        Self { commands, address, lifecycle: Lifecycle::Running }
    }

    /// The next command, waiting for it at most `wait`. (The inbox's own address is held here: it is never
    /// disconnected.)
    pub(super) fn next(&self, wait: Duration) -> Option<Command> {
        self.commands.recv_timeout(wait).ok()
    }

    /// The inbox's address, for a thread the daemon starts.
    pub(super) fn address(&self) -> &Mailbox {
        &self.address
    }

    /// Marks the daemon told to stop: its loop ends at its next turn.
    pub(super) fn stop(&mut self) {
        self.lifecycle = Lifecycle::Stopping;
    }

    /// Whether the daemon was told to stop.
    pub(super) fn stopping(&self) -> bool {
        self.lifecycle == Lifecycle::Stopping
    }
}
