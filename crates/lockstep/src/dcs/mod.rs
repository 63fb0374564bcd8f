//! The eBPF side of the `dcs` policy: the program that sees TCP data arrive for a managed job's sockets
//! (`src/bpf/dcs.bpf.c`), loaded and attached with libbpf, and the scan that tells it which ports are whose.
//! Applying boosts is the agent's (`agent::dcs`).

mod probe;
pub mod sockets;

pub use probe::{Arrival, JobCounts, Probe, Tables, MAX_JOBS};
