//! Which TCP ports belong to a set of processes: their socket descriptors (`/proc/PID/fd`) matched against the
//! socket tables of their network namespace (`/proc/PID/net/tcp`, `tcp6`).

use std::collections::{HashMap, HashSet};

/// A TCP socket as the eBPF program keys it: network namespace inode and local port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortKey {
    /// Inode number of the network namespace (`/proc/PID/ns/net` is `net:[N]`).
    pub netns: u32,
    /// Local port.
    pub port: u16,
}

/// The TCP ports (listening and connected) of the sockets `pids` hold, in their own network namespaces, each with
/// the process holding it (a port shared by several processes appears once per process). Processes that are gone
/// are skipped.
pub fn tcp_ports(pids: &[i32]) -> Vec<(PortKey, i32)> {
    // Socket inodes per process, and a process in each network namespace to read its tables through.
    let mut inodes: Vec<(i32, u32, HashSet<u64>)> = Vec::new();
    let mut readers: HashMap<u32, i32> = HashMap::new();
    for &pid in pids {
        let Some(netns) = link_number(&format!("/proc/{pid}/ns/net"), "net:[") else { continue };
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { continue };
        let netns = netns as u32;
        readers.entry(netns).or_insert(pid);
        let own = fds.flatten().filter_map(|fd| link_number(&fd.path().to_string_lossy(), "socket:[")).collect();
        inodes.push((pid, netns, own));
    }
    let mut keys = Vec::new();
    for (netns, reader) in readers {
        for table in ["tcp", "tcp6"] {
            let Ok(text) = std::fs::read_to_string(format!("/proc/{reader}/net/{table}")) else { continue };
            for (inode, port) in parse_table(&text) {
                for (pid, _, _) in inodes.iter().filter(|(_, n, own)| *n == netns && own.contains(&inode)) {
                    keys.push((PortKey { netns, port }, *pid));
                }
            }
        }
    }
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// The number N of a `/proc` link that reads `<prefix>N]`.
fn link_number(link: &str, prefix: &str) -> Option<u64> {
    let target = std::fs::read_link(link).ok()?;
    target.to_str()?.strip_prefix(prefix)?.strip_suffix(']')?.parse().ok()
}

/// (inode, local port) of every socket in a `/proc/net/tcp` or `tcp6` table.
fn parse_table(text: &str) -> Vec<(u64, u16)> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let port = u16::from_str_radix(fields.get(1)?.rsplit(':').next()?, 16).ok()?;
            let inode = fields.get(9)?.parse().ok()?;
            Some((inode, port))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_give_inode_and_local_port() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   \
            0: 0100007F:B26E 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 31337 1 0000 100 0 0 10 0\n   \
            1: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 01 00000000:00000000 00:00000000 00000000     0        0 42 1";
        assert_eq!(parse_table(text), vec![(31337, 45678), (42, 8080)]);
    }

    #[test]
    fn a_listening_socket_of_this_process_is_found() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let keys = tcp_ports(&[std::process::id() as i32]);
        let me = std::process::id() as i32;
        assert!(keys.iter().any(|(k, pid)| k.port == port && *pid == me), "port {port} not in {keys:?}");
        assert!(tcp_ports(&[i32::MAX]).is_empty());
    }
}
