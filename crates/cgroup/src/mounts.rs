//! The mounted cgroup hierarchies, as `/proc/self/mountinfo` lists them.

use std::fs;
use std::path::PathBuf;

/// One mounted cgroup hierarchy, from `/proc/self/mountinfo`.
#[derive(Clone, Debug)]
pub struct Mount {
    /// The mount point.
    pub path: PathBuf,
    /// Whether it is the unified hierarchy.
    pub v2: bool,
    /// Its controllers.
    pub controllers: Vec<String>,
}

/// Every mounted cgroup hierarchy.
pub fn mounts() -> Vec<Mount> {
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    info.lines()
        .filter_map(|line| {
            // mountinfo: id parent maj:min root mount-point options [optional…] - fstype source super-options
            let (left, right) = line.split_once(" - ")?;
            let mut right = right.split_whitespace();
            let fstype = right.next()?;
            let path = PathBuf::from(left.split_whitespace().nth(4)?);
            let supers = right.nth(1).unwrap_or("");
            match fstype {
                "cgroup2" => {
                    let controllers = fs::read_to_string(path.join("cgroup.controllers")).unwrap_or_default();
                    Some(Mount {
                        v2: true,
                        controllers: controllers.split_whitespace().map(String::from).collect(),
                        path,
                    })
                }
                "cgroup" => Some(Mount { v2: false, controllers: supers.split(',').map(String::from).collect(), path }),
                _ => None,
            }
        })
        .collect()
}

/// Where per-cgroup perf counters find cgroups: the v1 hierarchy with the `perf_event` controller, else the
/// unified hierarchy (perf_event is implicitly enabled on every v2 cgroup when not bound to v1).
pub fn perf_event_root_in(all: &[Mount]) -> Option<PathBuf> {
    let v1 = all.iter().find(|m| !m.v2 && m.controllers.iter().any(|c| c == "perf_event"));
    v1.or_else(|| all.iter().find(|m| m.v2)).map(|m| m.path.clone())
}

/// The directory among a job's cgroup `dirs` that per-cgroup perf counters can observe, if any.
pub fn perf_event_dir(dirs: &[PathBuf]) -> Option<PathBuf> {
    let root = perf_event_root_in(&mounts())?;
    dirs.iter().find(|d| d.starts_with(&root)).cloned()
}

/// The cgroup v2 mount point, with or without controllers (used for membership and freezing).
pub fn unified_mount() -> Option<PathBuf> {
    mounts().into_iter().find(|m| m.v2).map(|m| m.path)
}
