//! Job cgroups: one directory per controller under `lockstep/` (v1), or one directory under `lockstep/` (v2).
//!
//! A [`Backend`] knows one hierarchy layout and creates job cgroups with their limits; the resulting
//! [`JobCgroup`] is the only handle lockstep acts on afterwards (join, list, kill, remove).

pub mod bandwidth;
pub mod knobs;
pub mod procfs;
mod v1;
mod v2;

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use knobs::Knobs;
pub use v1::V1;
pub use v2::V2;

use lockstep_core::cpulist::CpuList;

/// Name of the parent directory of every lockstep job cgroup.
pub const PARENT: &str = "lockstep";

/// Which cgroup version a job cgroup lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Version {
    /// Legacy per-controller hierarchies.
    V1,
    /// The unified hierarchy.
    V2,
}

impl Version {
    /// `v1` or `v2`.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V1 => "v1",
            Version::V2 => "v2",
        }
    }
}

/// What a job's cgroup enforces. `None` leaves the kernel default.
#[derive(Clone, Debug, Default)]
pub struct Limits {
    /// `cpuset.cpus`.
    pub cpus: Option<CpuList>,
    /// `cpuset.mems`.
    pub mems: Option<CpuList>,
    /// CPU weight on the cgroup v2 scale (1–10000, default 100).
    pub weight: Option<u64>,
    /// Memory limit in bytes.
    pub mem_limit: Option<u64>,
}

/// Why a job cgroup could not be created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// The directory exists already (another job, or something not ours).
    #[error("cgroup {0} already exists (job name in use, or a cgroup lockstep does not own)")]
    Exists(PathBuf),
    /// We may not write there.
    #[error("no permission to create cgroup {0} (run as root, or delegate the hierarchy to this user)")]
    Permission(PathBuf),
    /// A controller the limits need is not available.
    #[error("cgroup controller {0} is not available here (needed for {1})")]
    MissingController(&'static str, &'static str),
    /// The requested PUs or nodes are outside what the parent cgroup allows.
    #[error("{what} {asked} is beyond this machine's allowed set {allowed}")]
    OutOfRange {
        /// `cpus` or `mems`.
        what: &'static str,
        /// The requested list.
        asked: CpuList,
        /// What the parent allows.
        allowed: CpuList,
    },
    /// Any other I/O failure.
    #[error("cannot set up cgroup {path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

impl CreateError {
    /// Whether this is the user's doing (bad input or permissions) rather than a system failure.
    pub fn is_usage(&self) -> bool {
        !matches!(self, CreateError::Io { .. })
    }
}

/// One cgroup hierarchy layout.
pub trait Backend: Send {
    /// The cgroup version.
    fn version(&self) -> Version;
    /// Creates the cgroup of job `name` with `limits`; on failure nothing is left behind.
    fn create(&self, name: &str, limits: &Limits) -> Result<JobCgroup, CreateError>;
    /// Creates a cgroup for adopted processes of job `name` with only what co-scheduling needs (v1: the freezer
    /// and cpu hierarchies, so that the processes keep their cpuset and memory cgroups; v2: one directory with
    /// the cpu controller enabled where available).
    fn create_control(&self, name: &str) -> Result<JobCgroup, CreateError>;
    /// The directories of an existing cgroup given by its path relative to the hierarchy root
    /// (`/slurm_n1/uid_0/job_7/step_0`), in every hierarchy where it exists.
    fn existing(&self, relative: &Path) -> Vec<PathBuf>;
    /// Mount points of the hierarchies (to turn an absolute cgroup path into a relative one).
    fn roots(&self) -> Vec<PathBuf>;
}

/// A job's cgroup: one directory per v1 controller, or one v2 directory.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JobCgroup {
    /// Cgroup version.
    pub version: Version,
    /// The job's directories, one per hierarchy (the first one is used to list processes).
    pub dirs: Vec<PathBuf>,
}

/// Writes `value` to a cgroup interface file (`echo value > path`).
pub(crate) fn write_knob(path: &Path, value: &str) -> Result<(), CreateError> {
    fs::write(path, value).map_err(|source| match source.kind() {
        io::ErrorKind::PermissionDenied => CreateError::Permission(path.to_path_buf()),
        _ => CreateError::Io { path: path.to_path_buf(), source },
    })
}

/// Creates one cgroup directory; `EEXIST` and `EACCES` become their own errors.
pub(crate) fn make_dir(path: &Path) -> Result<(), CreateError> {
    fs::create_dir(path).map_err(|source| match source.kind() {
        io::ErrorKind::AlreadyExists => CreateError::Exists(path.to_path_buf()),
        io::ErrorKind::PermissionDenied => CreateError::Permission(path.to_path_buf()),
        _ => CreateError::Io { path: path.to_path_buf(), source },
    })
}

/// Creates `path` unless it exists already (the shared `lockstep/` parent).
pub(crate) fn ensure_dir(path: &Path) -> Result<bool, CreateError> {
    match make_dir(path) {
        Ok(()) => Ok(true),
        Err(CreateError::Exists(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether `path` is on a cgroup file system (v1 or v2), as opposed to a scratch tree used in tests.
fn on_cgroupfs(path: &Path) -> bool {
    use nix::sys::statfs::{statfs, CGROUP2_SUPER_MAGIC, CGROUP_SUPER_MAGIC};
    statfs(path).is_ok_and(|s| s.filesystem_type() == CGROUP_SUPER_MAGIC || s.filesystem_type() == CGROUP2_SUPER_MAGIC)
}

/// Removes one cgroup directory with the cgroups below it (a job's own, an experiment's per-kind children),
/// deepest first. On cgroupfs `rmdir` drops the interface files with it. Anywhere else only an empty directory
/// goes: a path that is not a cgroup never costs a file, however it reached the caller. This crate's own tests
/// build scratch trees whose interface files are plain files; there, and only there, the tree goes whole.
pub fn remove_dir(path: &Path) -> io::Result<()> {
    if on_cgroupfs(path) {
        for child in fs::read_dir(path)?.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())) {
            remove_dir(&child.path())?;
        }
        fs::remove_dir(path)
    } else if cfg!(test) {
        fs::remove_dir_all(path)
    } else {
        fs::remove_dir(path)
    }
}

/// Reads a cgroup's `cgroup.procs`. A cgroup that is gone has no processes; any other failure (no descriptor
/// left, no memory) is an error, never "no processes": a job taken for ended while it runs would be forgotten in
/// whatever state it was left.
pub fn read_procs(dir: &Path) -> io::Result<Vec<i32>> {
    match fs::read_to_string(dir.join("cgroup.procs")) {
        Ok(text) => Ok(text.lines().filter_map(|l| l.trim().parse().ok()).collect()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Every process in the cgroup `dir` and in the cgroups below it (a Slurm job's steps, a pod's containers); an
/// error as [`read_procs`] has one.
pub fn procs_below(dir: &Path) -> io::Result<Vec<i32>> {
    let mut out = read_procs(dir)?;
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for e in entries {
        let e = e?;
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(procs_below(&e.path())?);
        }
    }
    Ok(out)
}

impl JobCgroup {
    /// Processes of the job the kernel's OOM killer killed for its memory limit (v2 `memory.events`, v1
    /// `memory.oom_control`); 0 when the job has no memory cgroup or it cannot be read.
    pub fn oom_kills(&self) -> u64 {
        self.dirs
            .iter()
            .flat_map(|d| [d.join("memory.events"), d.join("memory.oom_control")])
            .filter_map(|f| fs::read_to_string(f).ok())
            .flat_map(|text| {
                text.lines().filter_map(|l| l.strip_prefix("oom_kill ")?.trim().parse::<u64>().ok()).collect::<Vec<_>>()
            })
            .sum()
    }

    /// NUL-terminated paths of every `cgroup.procs` file, prepared before `fork` so that the child can join
    /// without allocating.
    pub fn procs_paths(&self) -> Vec<CString> {
        self.dirs
            .iter()
            .map(|d| CString::new(d.join("cgroup.procs").as_os_str().as_bytes()).expect("no NUL in cgroup path"))
            .collect()
    }

    /// Processes in the job's cgroup and in the cgroups below it (an error as [`read_procs`] has one).
    pub fn pids(&self) -> io::Result<Vec<i32>> {
        self.dirs.first().map_or_else(|| Ok(Vec::new()), |d| procs_below(d))
    }

    /// Whether any directory of the job still exists.
    pub fn exists(&self) -> bool {
        self.dirs.iter().any(|d| d.exists())
    }

    /// Kills every process left in the cgroup and removes its directories, waiting up to `timeout` for the
    /// processes to be gone. Directories already removed are fine.
    pub fn destroy(&self, timeout: Duration) -> io::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let pids = self.pids()?;
            if pids.is_empty() {
                break;
            }
            for process in pids.into_iter().filter_map(procfs::ProcessRef::of) {
                let _ = process.signal(libc::SIGKILL);
            }
            if Instant::now() > deadline {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "processes survive SIGKILL in the job cgroup"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        for dir in &self.dirs {
            // Exited tasks can keep a v1 cgroup busy for a moment after they leave cgroup.procs.
            loop {
                match remove_dir(dir) {
                    Ok(()) => break,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                    Err(e) if Instant::now() > deadline => return Err(e),
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        }
        Ok(())
    }
}

/// One mounted cgroup hierarchy, from `/proc/self/mountinfo`.
#[derive(Clone, Debug)]
struct Mount {
    path: PathBuf,
    v2: bool,
    controllers: Vec<String>,
}

fn mounts() -> Vec<Mount> {
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

/// The backend for this machine: v2 when the unified hierarchy has the cpuset and cpu controllers (v2-only
/// machines, and hybrids that moved them), else v1 when its cpuset and cpu hierarchies are mounted.
pub fn detect() -> anyhow::Result<Box<dyn Backend>> {
    let all = mounts();
    let has = |m: &Mount, c: &str| m.controllers.iter().any(|x| x == c);
    if let Some(m) = all.iter().find(|m| m.v2 && has(m, "cpuset") && has(m, "cpu")) {
        return Ok(Box::new(V2::new(m.path.clone())));
    }
    let mut v1: Vec<(String, PathBuf)> = all
        .iter()
        .filter(|m| !m.v2)
        .flat_map(|m| m.controllers.iter().map(move |c| (c.clone(), m.path.clone())))
        .collect();
    // perf_event not bound to v1 lives, implicitly, on the unified hierarchy: a job directory there gives
    // per-cgroup counters (and membership) even though that hierarchy has no other controller.
    if let Some(root) = perf_event_root_in(&all).filter(|_| !v1.iter().any(|(c, _)| c == "perf_event")) {
        v1.push(("perf_event".into(), root));
    }
    let v1 = V1::new(v1);
    if v1.has("cpuset") && v1.has("cpu") {
        return Ok(Box::new(v1));
    }
    anyhow::bail!("no usable cgroup hierarchy: need cgroup v2 with cpuset+cpu, or cgroup v1 cpuset and cpu mounts")
}

/// Where per-cgroup perf counters find cgroups: the v1 hierarchy with the `perf_event` controller, else the
/// unified hierarchy (perf_event is implicitly enabled on every v2 cgroup when not bound to v1).
fn perf_event_root_in(all: &[Mount]) -> Option<PathBuf> {
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

/// Converts a cgroup v2 CPU weight (1–10000, default 100) to v1 `cpu.shares` (2–262144, default 1024), as
/// systemd does: `shares = weight × 1024 / 100`, clamped.
pub fn weight_to_shares(weight: u64) -> u64 {
    (weight * 1024 / 100).clamp(2, 262_144)
}

#[cfg(test)]
mod tests;

/// Moves the calling process into the cgroup whose `cgroup.procs` is `path` (writing `0` names the writer).
/// Async-signal-safe: usable between fork and exec.
pub fn join(path: &CString) -> std::io::Result<()> {
    // SAFETY: `path` is a valid NUL-terminated string; the buffer outlives the write.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let written = libc::write(fd, b"0".as_ptr().cast(), 1);
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        if written != 1 {
            return Err(err);
        }
    }
    Ok(())
}

/// Fails with [`CreateError::OutOfRange`] unless `asked` is within the cpulist stored in `allowed_file`
/// (an unreadable file means no restriction is known).
pub(crate) fn check_within(
    what: &'static str,
    asked: Option<&CpuList>,
    allowed_file: &Path,
) -> Result<(), CreateError> {
    let (Some(asked), Ok(text)) = (asked, fs::read_to_string(allowed_file)) else {
        return Ok(());
    };
    match CpuList::parse(&text) {
        Ok(allowed) if !allowed.is_empty() && !asked.is_subset(&allowed) => {
            Err(CreateError::OutOfRange { what, asked: asked.clone(), allowed })
        }
        _ => Ok(()),
    }
}

/// Creates `dirs` in order and configures them with `setup`; on any failure removes the directories this
/// call created, so that nothing is left behind.
pub(crate) fn create_all(
    version: Version,
    dirs: Vec<PathBuf>,
    setup: impl FnOnce(&[PathBuf]) -> Result<(), CreateError>,
) -> Result<JobCgroup, CreateError> {
    let mut made = Vec::new();
    let result = dirs.iter().try_for_each(|d| make_dir(d).map(|()| made.push(d.clone()))).and_then(|()| setup(&dirs));
    match result {
        Ok(()) => Ok(JobCgroup { version, dirs }),
        Err(e) => {
            for d in made.iter().rev() {
                let _ = remove_dir(d);
            }
            Err(e)
        }
    }
}
