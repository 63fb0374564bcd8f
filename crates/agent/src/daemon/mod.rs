//! The daemon: the one owner of the agent's state (its jobs, the journal, the store's agent tables, the policy
//! and `dcs`) and the one loop that changes it. The loop applies the policy at every slot boundary and, between
//! boundaries, waits on its inbox for the [`Command`](crate::command::Command)s the other threads send: requests
//! from the control socket, what Slurm discovery found, `dcs`'s arrivals and scans, the signal to stop. Work that
//! must not hold up a slot (waiting for slurmctld, moving processes, scanning sockets) is done by those threads,
//! and only its result comes in.

mod board;
mod clock;
mod control;
mod dcs;
mod inbox;
mod jobs;
mod measures;
mod planning;
mod pulse;
mod records;
mod run;
mod slurm;
mod state;
mod status;
mod table;
mod tick;

pub use board::Board;
pub use state::{Daemon, Start};
pub use status::visible_to;
