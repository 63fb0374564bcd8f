//! CPU bandwidth limits (v2 `cpu.max`, v1 `cpu.cfs_quota_us`) on a process's cgroup, or on child cgroups of it
//! that group a job's processes by kind: how an experiment emulates slower cores on a machine with one core kind.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::files::{read_procs, remove_dir};
use crate::job::Version;
use crate::mounts::mounts;

/// The kernel's default bandwidth period, in microseconds.
pub const DEFAULT_PERIOD_US: u64 = 100_000;

/// A CPU bandwidth limit: `cpus` CPUs' worth of time (0.5: half of one CPU) in every period of `period_us`
/// microseconds (the kernel accepts 1 ms to 1 s). A shorter period makes a limited process look more evenly slow,
/// with shorter stops.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bandwidth {
    /// CPUs' worth of time per period.
    pub cpus: f64,
    /// The period in microseconds.
    pub period_us: u64,
}

/// The cgroup of process `pid` that the cpu controller governs: its v1 `cpu` hierarchy directory, or its v2
/// directory when the cpu controller is enabled there. `None` when the process is gone or has no such cgroup.
pub fn cpu_cgroup(pid: i32) -> Option<(Version, PathBuf)> {
    let lines = crate::procfs::cgroups(pid)?;
    for m in mounts() {
        if m.v2 {
            let Some((_, path)) = lines.iter().find(|(c, _)| c.is_empty()) else { continue };
            let dir = m.path.join(path.trim_start_matches('/'));
            if dir.join("cpu.max").exists() {
                return Some((Version::V2, dir));
            }
        } else if m.controllers.iter().any(|c| c == "cpu") {
            let Some((_, path)) = lines.iter().find(|(c, _)| c.split(',').any(|c| c == "cpu")) else { continue };
            return Some((Version::V1, m.path.join(path.trim_start_matches('/'))));
        }
    }
    None
}

/// Limits the cgroup `dir` to `bandwidth`; `None` lifts the limit (and puts back the default period).
pub fn limit(version: Version, dir: &Path, bandwidth: Option<Bandwidth>) -> io::Result<()> {
    let period = bandwidth.map_or(DEFAULT_PERIOD_US, |b| b.period_us);
    // The kernel's least quota is 1 ms.
    let quota = bandwidth.map(|b| ((b.cpus * b.period_us as f64).round() as u64).max(1000));
    match version {
        Version::V2 => {
            let quota = quota.map_or_else(|| "max".to_string(), |q| q.to_string());
            fs::write(dir.join("cpu.max"), format!("{quota} {period}"))
        }
        Version::V1 => {
            // The quota first when lifting it: a period shorter than the quota in force is refused.
            let quota = quota.map_or_else(|| "-1".to_string(), |q| q.to_string());
            if quota == "-1" {
                fs::write(dir.join("cpu.cfs_quota_us"), &quota)?;
                fs::write(dir.join("cpu.cfs_period_us"), period.to_string())
            } else {
                fs::write(dir.join("cpu.cfs_period_us"), period.to_string())?;
                fs::write(dir.join("cpu.cfs_quota_us"), quota)
            }
        }
    }
}

/// One child cgroup of [`split`]: its name, the processes that go there, and its limit (`None`: none).
#[derive(Clone, Debug)]
pub struct Child {
    /// Directory name (`P`, `E`).
    pub name: String,
    /// Processes to move there.
    pub pids: Vec<i32>,
    /// Bandwidth limit.
    pub limit: Option<Bandwidth>,
}

/// How long [`split`] keeps moving processes that a job forks meanwhile before giving up on v2.
const SPLIT_TIMEOUT: Duration = Duration::from_secs(5);

/// Moves processes of the cgroup `dir` into child cgroups of it and limits each child. On v2 a cgroup that
/// passes the cpu controller on to its children may hold no process itself, so every other process of `dir`
/// goes to the first child. Returns the children's directories; on failure the children made are removed again
/// (their processes back in `dir`) and nothing changes.
pub fn split(version: Version, dir: &Path, children: &[Child]) -> io::Result<Vec<PathBuf>> {
    let dirs: Vec<PathBuf> = children.iter().map(|c| dir.join(&c.name)).collect();
    let result = populate(version, dir, children, &dirs);
    if result.is_err() {
        undo(version, dir, &dirs);
    }
    result.map(|()| dirs)
}

fn populate(version: Version, dir: &Path, children: &[Child], dirs: &[PathBuf]) -> io::Result<()> {
    for d in dirs {
        fs::create_dir(d)?;
    }
    for (c, d) in children.iter().zip(dirs) {
        for pid in &c.pids {
            fs::write(d.join("cgroup.procs"), pid.to_string())?;
        }
    }
    if version == Version::V2 {
        // Whatever else runs in `dir` (the launcher, processes forked meanwhile) joins the first child until the
        // controller can be enabled.
        let deadline = Instant::now() + SPLIT_TIMEOUT;
        loop {
            for pid in read_procs(dir).unwrap_or_default() {
                let _ = fs::write(dirs[0].join("cgroup.procs"), pid.to_string());
            }
            match fs::write(dir.join("cgroup.subtree_control"), "+cpu") {
                Ok(()) => break,
                Err(e) if Instant::now() > deadline => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    }
    for (c, d) in children.iter().zip(dirs) {
        limit(version, d, c.limit)?;
    }
    Ok(())
}

/// Moves the children's processes back into `dir` and removes the children.
fn undo(version: Version, dir: &Path, dirs: &[PathBuf]) {
    if version == Version::V2 {
        // Processes may come back only once `dir` no longer passes the controller on.
        let _ = fs::write(dir.join("cgroup.subtree_control"), "-cpu");
    }
    for d in dirs {
        for pid in read_procs(d).unwrap_or_default() {
            let _ = fs::write(dir.join("cgroup.procs"), pid.to_string());
        }
        let _ = remove_dir(d);
    }
}

/// Removes the children [`split`] made (processes still there go back to the parent first, so that nothing is
/// left limited).
pub fn unsplit(version: Version, dirs: &[PathBuf]) {
    if let Some(parent) = dirs.first().and_then(|d| d.parent()) {
        undo(version, parent, dirs);
    }
}
