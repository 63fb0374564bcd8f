//! What the agent needs of its process before it may start: root's UID (every cgroup file it writes and every
//! job's `/proc` entries it reads are root's), and the capabilities docs/security.md lists, without which what
//! needs them fails (said once, at start).

use lockstep_core::error::UsageError;

/// A capability the agent uses, by its number in `linux/capability.h`, with its name and what needs it.
struct Capability {
    bit: u32,
    name: &'static str,
    needed_by: &'static str,
}

/// The capabilities of the systemd unit's bounding set (and of the Makefile's `AGENT_CAPS`). `CAP_SYS_ADMIN`
/// grants what BPF and perf need on kernels older than the split capabilities, so those three are said missing
/// only when `CAP_SYS_ADMIN` is missing too.
const CAPABILITIES: &[Capability] = &[
    Capability { bit: 21, name: "CAP_SYS_ADMIN", needed_by: "tracepoint events, adopt --container" },
    Capability { bit: 23, name: "CAP_SYS_NICE", needed_by: "real-time slot switches, dcs raises" },
    Capability { bit: 19, name: "CAP_SYS_PTRACE", needed_by: "dcs and auto's MPI call counts for other users' jobs" },
    Capability {
        bit: 2,
        name: "CAP_DAC_READ_SEARCH",
        needed_by: "dcs and auto's MPI call counts for other users' jobs",
    },
    Capability { bit: 39, name: "CAP_BPF", needed_by: "the dcs probe and co-scheduled time" },
    Capability { bit: 38, name: "CAP_PERFMON", needed_by: "per-job counters" },
    Capability { bit: 12, name: "CAP_NET_ADMIN", needed_by: "the dcs probe" },
];

/// Bit of `CAP_SYS_ADMIN`, which stands in for `CAP_BPF`, `CAP_PERFMON` and `CAP_NET_ADMIN` where they are missing.
const SYS_ADMIN: u32 = 21;

/// Refuses, as a usage error that names the user, a process whose effective UID is not root's: such an agent
/// could write no cgroup file of a job (they are root's, and the agent has no `CAP_DAC_OVERRIDE`), so it would
/// serve a socket that can do nothing.
pub fn check() -> Result<(), UsageError> {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if euid == 0 {
        return Ok(());
    }
    Err(UsageError::new(format!(
        "needs root (running as UID {euid}: every job's cgroup files and /proc entries are root's; start it as root, \
         e.g. systemctl start lockstep-agent)"
    )))
}

/// The capabilities of [`CAPABILITIES`] missing from `effective` (the `CapEff` mask of /proc/self/status).
fn missing(effective: u64) -> Vec<&'static Capability> {
    let has = |bit: u32| effective & (1 << bit) != 0;
    CAPABILITIES.iter().filter(|c| !has(c.bit)).filter(|c| !matches!(c.bit, 39 | 38 | 12) || !has(SYS_ADMIN)).collect()
}

/// The process's effective capabilities, from /proc/self/status.
fn effective() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// Says once, as a warning, which of the capabilities the agent uses it lacks and what needs them.
pub fn warn_missing() {
    let Some(effective) = effective() else { return };
    let missing = missing(effective);
    if missing.is_empty() {
        return;
    }
    let said: Vec<String> = missing.iter().map(|c| format!("{} (for {})", c.name, c.needed_by)).collect();
    log::warn!(
        "running without {}: what needs them will fail (docs/security.md lists the agent's capabilities)",
        said.join(", ")
    );
}

#[cfg(test)]
mod tests {
    use super::missing;

    #[test]
    fn sys_admin_stands_in_for_the_split_capabilities() {
        let names = |mask: u64| missing(mask).iter().map(|c| c.name).collect::<Vec<_>>();
        assert!(names(u64::MAX).is_empty());
        assert_eq!(names(1 << 21 | 1 << 23 | 1 << 19 | 1 << 2), Vec::<&str>::new());
        assert_eq!(names(1 << 23 | 1 << 19 | 1 << 2 | 1 << 39), ["CAP_SYS_ADMIN", "CAP_PERFMON", "CAP_NET_ADMIN"]);
    }
}
