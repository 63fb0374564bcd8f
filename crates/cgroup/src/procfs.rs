//! Small readers of `/proc`.

use std::fs;

/// Start time of process `pid` in clock ticks since boot (field 22 of `/proc/PID/stat`), or `None` if the
/// process does not exist. Together with the PID it names a process even after PIDs wrap around.
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count fields after the last ')'.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the process `pid` that started at `start` still runs.
pub fn alive(pid: i32, start: u64) -> bool {
    start_time(pid) == Some(start)
}

/// The `Cpus_allowed_list` of process `pid`.
pub fn cpus_allowed(pid: i32) -> Option<String> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).map(|v| v.trim().to_string())
}

/// The cgroups of process `pid` from `/proc/PID/cgroup`: `(controllers, path)` per line, e.g.
/// `("freezer", "/lockstep/job")` for v1 and `("", "/lockstep/job")` for the v2 hierarchy.
pub fn cgroups(pid: i32) -> Option<Vec<(String, String)>> {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    Some(
        text.lines()
            .filter_map(|l| {
                let mut parts = l.splitn(3, ':');
                let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                Some((controllers.to_string(), path.to_string()))
            })
            .collect(),
    )
}

/// The thread ids of process `pid` (`/proc/PID/task`), or `None` if the process does not exist.
pub fn threads(pid: i32) -> Option<Vec<i32>> {
    let dir = fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    Some(dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
}

/// Most bytes of a process's environment read: an environment is at most a few hundred KiB (`ARG_MAX`).
const MAX_ENVIRON: u64 = 1 << 20;

/// The environment of process `pid` (`/proc/PID/environ`, at most 1 MiB of it) as `NAME=value` entries, or
/// `None` if it cannot be read (no such process, or not ours to read).
pub fn environ(pid: i32) -> Option<Vec<Vec<u8>>> {
    use std::io::Read;
    let mut env = Vec::new();
    fs::File::open(format!("/proc/{pid}/environ")).ok()?.take(MAX_ENVIRON).read_to_end(&mut env).ok()?;
    Some(env.split(|&b| b == 0).filter(|v| !v.is_empty()).map(<[u8]>::to_vec).collect())
}

/// The parent of process `pid` (field 4 of `/proc/PID/stat`).
pub fn parent(pid: i32) -> Option<i32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].split_whitespace().nth(1)?.parse().ok()
}

/// CPU time (user + system) process `pid` has used, in seconds (fields 14 and 15 of `/proc/PID/stat`).
pub fn cpu_seconds(pid: i32) -> Option<f64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut after = stat[stat.rfind(')')? + 1..].split_whitespace();
    let utime: u64 = after.nth(11)?.parse().ok()?;
    let stime: u64 = after.next()?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Some((utime + stime) as f64 / ticks.max(1) as f64)
}

/// A memory field of `/proc/PID/status` (`VmRSS`, `VmHWM`, …) in bytes.
fn status_bytes(pid: i32, field: &str) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let value = status.lines().find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?;
    let kb: u64 = value.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb * 1024)
}

/// Resident set size of process `pid` in bytes (`VmRSS`).
pub fn rss_bytes(pid: i32) -> Option<u64> {
    status_bytes(pid, "VmRSS")
}

/// Peak resident set size of process `pid` in bytes (`VmHWM`).
pub fn peak_rss_bytes(pid: i32) -> Option<u64> {
    status_bytes(pid, "VmHWM")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_alive() {
        let me = std::process::id() as i32;
        let start = start_time(me).expect("own stat readable");
        assert!(alive(me, start));
        assert!(!alive(me, start + 1));
        assert!(cpus_allowed(me).is_some());
        assert!(!cgroups(me).expect("own cgroups readable").is_empty());
        assert!(threads(me).expect("own threads readable").contains(&me));
        assert!(cpu_seconds(me).is_some_and(|s| s >= 0.0));
        assert_eq!(parent(me), Some(std::os::unix::process::parent_id() as i32));
        let env = environ(me).expect("own environment readable");
        assert!(env.iter().all(|v| !v.is_empty()));
        assert_eq!(env.len(), std::env::vars_os().count());
        assert_eq!(environ(-1), None);
        // Resident memory first: the peak read after it is at least that (other tests' threads allocate meanwhile).
        let rss = rss_bytes(me);
        assert!(rss.is_some_and(|b| b > 0));
        assert!(peak_rss_bytes(me) >= rss);
    }
}
