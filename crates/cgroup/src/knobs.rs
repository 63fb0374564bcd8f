//! The interface files co-scheduling writes in a job's cgroup, found by what each directory holds, so that they
//! work for cgroups lockstep created and for adopted ones (Slurm steps, containers) alike.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use lockstep_core::cpulist::CpuList;

/// Freezer and CPU-weight files of one cgroup (v1: across its controller directories; v2: one directory).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Knobs {
    /// `freezer.state` (v1) or `cgroup.freeze` (v2).
    pub freeze: Option<PathBuf>,
    /// `cpu.shares` (v1) or `cpu.weight` (v2).
    pub weight: Option<PathBuf>,
    /// The effective cpuset file, to learn the cgroup's PUs.
    pub cpus: Option<PathBuf>,
}

impl Knobs {
    /// Looks for the files in `dirs`, each name in turn over every directory (a v1 job may also have a
    /// membership directory on the unified hierarchy, whose `cgroup.freeze` must not win over `freezer.state`).
    pub fn find(dirs: &[PathBuf]) -> Self {
        let first =
            |names: &[&str]| names.iter().flat_map(|n| dirs.iter().map(move |d| d.join(n))).find(|p| p.exists());
        Self {
            freeze: first(&["freezer.state", "cgroup.freeze"]),
            weight: first(&["cpu.shares", "cpu.weight"]),
            cpus: first(&["cpuset.effective_cpus", "cpuset.cpus.effective", "cpuset.cpus"]),
        }
    }

    /// The PUs the cgroup may use, when its cpuset is readable.
    pub fn pus(&self) -> Option<CpuList> {
        let text = fs::read_to_string(self.cpus.as_ref()?).ok()?;
        CpuList::parse(text.trim()).ok().filter(|l| !l.is_empty())
    }
}

/// What to write to a freezer file to freeze (`true`) or thaw the cgroup.
pub fn freeze_value(file: &Path, frozen: bool) -> &'static str {
    match (is_v1(file), frozen) {
        (true, true) => "FROZEN",
        (true, false) => "THAWED",
        (false, true) => "1",
        (false, false) => "0",
    }
}

/// Whether the freezer file says the cgroup is frozen or freezing. On v1 this reads `freezer.state`, which takes
/// the kernel's freezer mutex for a walk of everything below: see [`freezing`] for readers that must not.
pub fn is_frozen(file: &Path) -> io::Result<bool> {
    let state = fs::read_to_string(file)?;
    Ok(matches!(state.trim(), "FROZEN" | "FREEZING" | "1"))
}

/// Whether the cgroup of freezer file `file` is asked to be frozen, by a write to it or to a cgroup above it (v1:
/// `freezer.self_freezing` or `freezer.parent_freezing`; v2: its `cgroup.freeze`, which a cgroup frozen from
/// above does not say). Unlike reading v1's `freezer.state`, which walks every cgroup and task below under the
/// kernel's one freezer mutex (every freeze and thaw on the machine waits meanwhile, a slot switch among them),
/// these reads take no lock: for readers other than tests.
pub fn freezing(file: &Path) -> io::Result<bool> {
    if !is_v1(file) {
        return Ok(fs::read_to_string(file)?.trim() == "1");
    }
    let dir = file.parent().unwrap_or(Path::new("/"));
    for flag in ["freezer.self_freezing", "freezer.parent_freezing"] {
        if fs::read_to_string(dir.join(flag))?.trim() == "1" {
            return Ok(true);
        }
    }
    Ok(false)
}

/// What to write to a weight file for a CPU weight on the v2 scale (v1 files take `cpu.shares`).
pub fn weight_value(file: &Path, weight: u64) -> String {
    if is_v1(file) {
        weight_to_shares(weight).to_string()
    } else {
        weight.to_string()
    }
}

/// Whether `file` is a freezer file (`freezer.state` or `cgroup.freeze`): restorers thaw these first.
pub fn is_freeze_file(file: &Path) -> bool {
    file.file_name().is_some_and(|n| n == "freezer.state" || n == "cgroup.freeze")
}

fn is_v1(file: &Path) -> bool {
    file.file_name().is_some_and(|n| n == "freezer.state" || n == "cpu.shares")
}

/// Converts a cgroup v2 CPU weight (1–10000, default 100) to v1 `cpu.shares` (2–262144, default 1024), as
/// systemd does: `shares = weight × 1024 / 100`, clamped.
pub fn weight_to_shares(weight: u64) -> u64 {
    (weight * 1024 / 100).clamp(2, 262_144)
}

#[cfg(test)]
mod tests {
    use super::freezing;
    use std::fs;

    /// A v1 cgroup is asked to freeze when it or a cgroup above it was (its two flags, never `freezer.state`); a
    /// v2 one when its own `cgroup.freeze` says 1.
    #[test]
    fn freezing_reads_the_flags_not_the_state() {
        let t = lockstep_scratch::tempdir().unwrap();
        let write = |name: &str, text: &str| fs::write(t.path().join(name), text).unwrap();
        write("freezer.state", "it would take the freezer mutex: never read\n");
        for (own, parent, want) in [("0", "0", false), ("1", "0", true), ("0", "1", true)] {
            write("freezer.self_freezing", own);
            write("freezer.parent_freezing", parent);
            assert_eq!(freezing(&t.path().join("freezer.state")).unwrap(), want, "self {own}, parent {parent}");
        }
        write("cgroup.freeze", "1\n");
        assert!(freezing(&t.path().join("cgroup.freeze")).unwrap());
        write("cgroup.freeze", "0\n");
        assert!(!freezing(&t.path().join("cgroup.freeze")).unwrap());
    }
}
