//! The node agent: manages jobs' cgroups under a co-scheduling policy, switching at wall-clock slot
//! boundaries, serving the CLI on a Unix socket, with a watchdog and a restore journal so that no job is left
//! frozen or boosted whatever happens to it.
//!
//! One thread owns the agent's state: the [`daemon`](crate::daemon)'s loop. Every other thread (the control
//! socket's, Slurm discovery, `dcs`'s, the store's [`writer`](crate::writer), the signal waiter) sends it
//! [`command`](crate::command)s, and those that ask wait for the answer; [`setup`](crate::setup) starts them all
//! and restores every job at the end.

mod adopt;
mod bpf;
mod command;
mod daemon;
mod dcs;
mod demand;
mod doors;
mod faults;
pub mod fuzz;
mod http;
mod journal;
mod live;
mod lock_wait;
mod logging;
mod managed;
mod notices;
mod outlet;
mod privileges;
mod progress;
mod ranks;
mod restore;
mod sampler;
mod sched;
mod server;
mod setup;
mod slurm;
mod together;
mod walks;
mod watchdog;
mod writer;

pub use dcs::engine::Settings as DcsSettings;
pub use doors::Scrapers;
pub use logging::{flush as flush_log, say_last};
pub use privileges::check as check_privileges;
pub use sampler::{Settings as TelemetrySettings, DEFAULT_EVENTS};
pub use setup::{run, Config};
pub use watchdog::watch as watchdog_main;
