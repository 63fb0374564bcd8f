//! A job's cgroup and how it is made: the hierarchy layouts' common trait ([`Backend`]), what a job's cgroup
//! enforces ([`Limits`]), why making one fails ([`CreateError`]), and the [`JobCgroup`] handle lockstep acts on
//! afterwards (list, kill, remove).

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::files::{procs_below, remove_dir};
use crate::procfs;
use crate::procfs::Live as _;
use lockstep_core::cgroup_record::CgroupRecord;
pub use lockstep_core::cgroup_record::Version;
use lockstep_core::cpulist::CpuList;
use lockstep_core::ident::JobName;

/// Name of the parent directory of every lockstep job cgroup.
pub const PARENT: &str = "lockstep";

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
    /// We may not make the `lockstep/` parent in a hierarchy's root, which is writable only with CAP_DAC_OVERRIDE
    /// (mode 0555): the agent's unit runs without it, and makes the parents first ([`Backend::make_parents`]).
    #[error(
        "no permission to create cgroup {0}: a hierarchy's root takes CAP_DAC_OVERRIDE to write (run `lockstepd \
         --cgroup-parents` as root first, as the agent's systemd unit does before it starts)"
    )]
    ParentPermission(PathBuf),
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
    /// Creates the cgroup of job `name` (one directory, `lockstep/NAME`: a job name is one path component by its
    /// rules) with `limits`; on failure nothing is left behind.
    fn create(&self, name: &JobName, limits: &Limits) -> Result<JobCgroup, CreateError>;
    /// Creates a cgroup for adopted processes of job `name` with only what co-scheduling needs (v1: the freezer
    /// and cpu hierarchies, so that the processes keep their cpuset and memory cgroups; v2: one directory with
    /// the cpu controller enabled where available).
    fn create_control(&self, name: &JobName) -> Result<JobCgroup, CreateError>;
    /// The directories of an existing cgroup given by its path relative to the hierarchy root
    /// (`/slurm_n1/uid_0/job_7/step_0`), in every hierarchy where it exists.
    fn existing(&self, relative: &Path) -> Vec<PathBuf>;
    /// Mount points of the hierarchies (to turn an absolute cgroup path into a relative one).
    fn roots(&self) -> Vec<PathBuf>;
    /// The `lockstep/` directories jobs are made below ([`PARENT`]), one per hierarchy this backend makes jobs in.
    fn parents(&self) -> Vec<PathBuf>;

    /// Makes every one of [`Backend::parents`] that is missing, and returns those it made. A hierarchy's root is
    /// root's with mode 0555: making them takes CAP_DAC_OVERRIDE, which the agent runs without under its unit,
    /// so the unit makes them first (`lockstepd --cgroup-parents`, fully privileged) and the agent finds them.
    fn make_parents(&self) -> Result<Vec<PathBuf>, CreateError> {
        let mut made = Vec::new();
        for parent in self.parents() {
            if ensure_dir(&parent)? {
                made.push(parent);
            }
        }
        Ok(made)
    }
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

/// Creates `path` unless it exists already (the shared `lockstep/` parent); whether it made it.
pub(crate) fn ensure_dir(path: &Path) -> Result<bool, CreateError> {
    match make_dir(path) {
        Ok(()) => Ok(true),
        Err(CreateError::Exists(_)) => Ok(false),
        // Root refused: the hierarchy's root takes CAP_DAC_OVERRIDE. Another user needs the hierarchy delegated.
        Err(CreateError::Permission(p)) if nix::unistd::geteuid().is_root() => Err(CreateError::ParentPermission(p)),
        Err(e) => Err(e),
    }
}

impl From<CgroupRecord> for JobCgroup {
    fn from(record: CgroupRecord) -> Self {
        Self { version: record.version, dirs: record.dirs }
    }
}

impl JobCgroup {
    /// What the store keeps of it.
    pub fn record(&self) -> CgroupRecord {
        CgroupRecord { version: self.version, dirs: self.dirs.clone() }
    }

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
