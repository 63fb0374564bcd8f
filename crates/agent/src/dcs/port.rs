//! What the eBPF program and the scan key a job's sockets by.

/// A TCP socket as the eBPF program keys it: network namespace inode and local port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortKey {
    /// Inode number of the network namespace (`/proc/PID/ns/net` is `net:[N]`).
    pub netns: u32,
    /// Local port.
    pub port: u16,
}
