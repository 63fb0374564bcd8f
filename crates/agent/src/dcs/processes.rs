//! What `dcs`'s scan thread and its engine tell each other: which jobs to scan, and what a scan found of each
//! (its processes' threads, which process holds which socket, the probe's counts).

use std::collections::HashMap;

use super::port::PortKey;
use super::probe::JobCounts;
use crate::sched::Thread;
use lockstep_core::ident::JobKey;

/// A job to scan: its name, its probe slot, its processes, and whether the slot is new to it (its counts start
/// from zero).
#[derive(Debug)]
pub struct Watched {
    /// The job (what the log says of it).
    pub name: JobKey,
    /// The job's slot in the probe's tables.
    pub slot: u32,
    /// The job's processes on this node.
    pub pids: Vec<i32>,
    /// Whether the slot was just given to the job.
    pub new: bool,
}

/// What a scan found of one job.
#[derive(Debug)]
pub struct Scanned {
    /// The job's slot in the probe's tables.
    pub slot: u32,
    /// How many of its sockets the probe watches.
    pub ports: usize,
    /// What the probe counted for it.
    pub counts: JobCounts,
    /// Its processes.
    pub processes: Processes,
}

/// A job's processes as the scan found them: threads per process, and the processes holding each socket.
#[derive(Clone, Debug, Default)]
pub struct Processes {
    /// Each process's threads.
    pub threads: HashMap<i32, Vec<Thread>>,
    /// The processes holding each socket.
    pub owners: HashMap<PortKey, Vec<i32>>,
}

impl Processes {
    /// The threads to raise for a message to `socket`: those of the processes holding it (the receiver), or of
    /// every process of the job when the socket is not known yet.
    pub fn receivers(&self, socket: PortKey) -> Vec<Thread> {
        match self.owners.get(&socket) {
            Some(pids) => pids.iter().filter_map(|p| self.threads.get(p)).flatten().copied().collect(),
            None => self.threads.values().flatten().copied().collect(),
        }
    }
}
