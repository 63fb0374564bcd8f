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
    }
}
