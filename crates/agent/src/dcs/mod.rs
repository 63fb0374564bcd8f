//! `dcs` in the agent: message-driven co-scheduling. An eBPF probe on the unified cgroup hierarchy reports each
//! message that arrives for a job; the [`engine::Engine`], which the daemon owns, raises that job for one quantum
//! through the policy's mechanism (a [`raiser::Raiser`]: CPU weight, `SCHED_RR`, nice) and lowers it after; two
//! threads (`feeders::dcs`) carry the probe's arrivals and the jobs' sockets to it.

pub mod diag;
pub mod engine;
mod nice;
pub mod port;
pub mod probe;
pub mod processes;
pub mod raiser;
mod rr;
pub mod sockets;
pub mod threads;
mod weight;
