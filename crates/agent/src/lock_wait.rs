//! What the freezer's lock alone makes a freezer write take now: among a switch's freezer writes, before one of
//! them chosen at random, the slot loop writes the state an empty cgroup of the agent's own is in
//! (`lockstep/.lock-probe`, thawed), and times it as it times the jobs', in the writing thread's CPU time. A v1
//! freezer write holds one lock for the whole machine while it walks the cgroups below the one written; another
//! user who holds that lock (reading a wide tree's `freezer.state`, which anyone may) makes every write spin on
//! it, an empty cgroup's as long as a job's. What a job's writes cost beyond that is its own tree's
//! (`managed::verdict`).
//!
//! The agent measures only while a judgement needs it (a job's writes past their share of a CPU), over its
//! last [`KEPT_WRITES`] writes. The cgroup is made when first needed and removed when the agent stops, never
//! while the slot loop switches. A name that starts with a dot is no job's (job names may not), so the cgroup never
//! collides with one; an agent killed while it measured leaves the empty cgroup, which the next one takes as its
//! own, and agents of one machine (a test cluster's) share it.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher as _, Hasher as _};
use std::io;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lockstep_cgroup::procfs::thread_cpu;
use lockstep_cgroup::{Backend, Version};

/// The empty cgroup's name, below `lockstep/` in the hierarchy jobs are frozen in.
const NAME: &str = ".lock-probe";

/// How many writes a mean is taken over at the least: fewer, and the job is judged at its next window (in its
/// favour meanwhile; the share past which a job is left whatever the lock took bounds what that gives away).
const FEW: usize = 8;

/// How many of the last writes the mean is taken over.
pub const KEPT_WRITES: usize = 32;

/// How long after the last judgement that needed it the agent goes on measuring (four of the 5-s windows costs are
/// judged over).
const KEPT: Duration = Duration::from_secs(20);

/// What a freezer write of an empty cgroup takes now: the freezer's lock alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockWait {
    /// Not measured where the agent freezes jobs (no freezer it may make a cgroup in).
    Unknown,
    /// Being measured: too few writes yet.
    Measuring,
    /// What one write took on the mean.
    Mean(Duration),
}

/// The probe: where it writes, and what its last writes took.
pub struct Probe {
    /// The `lockstep/` directories jobs are made below (the one with a freezer holds the empty cgroup).
    parents: Vec<PathBuf>,
    /// The freezer's state file in a cgroup, and the value that leaves one thawed.
    file: (&'static str, &'static str),
    /// The empty cgroup's directory and its state file, open, once made.
    held: Option<(PathBuf, File)>,
    /// Since when it could not be made or written (said once): tried again after [`KEPT`].
    failed: Option<Instant>,
    /// When measuring was last needed: it goes on for [`KEPT`] after.
    wanted: Option<Instant>,
    /// What the last writes took, the newest last.
    took: VecDeque<Duration>,
}

impl Probe {
    /// The probe of the hierarchy `backend` freezes jobs in: v1's freezer, or v2's (`cgroup.freeze`); it makes
    /// nothing until needed.
    pub fn new(backend: &dyn Backend) -> Self {
        let file = match backend.version() {
            Version::V1 => ("freezer.state", "THAWED"),
            Version::V2 => ("cgroup.freeze", "0"),
        };
        Self { parents: backend.parents(), file, held: None, failed: None, wanted: None, took: VecDeque::new() }
    }

    /// What a write of the empty cgroup took on the mean over its last writes, or why not known; asking makes the
    /// slot loop measure for [`KEPT`] from now, where it can.
    pub fn wait(&mut self) -> LockWait {
        if self.failed.is_some_and(|at| at.elapsed() < KEPT) {
            return LockWait::Unknown;
        }
        if self.held.is_none() {
            let (file, _) = self.file;
            let Some(parent) = self.parents.iter().find(|p| p.join(file).exists()) else { return LockWait::Unknown };
            let dir = parent.join(NAME);
            match open(&dir, &dir.join(file)) {
                Ok(held) => (self.held, self.failed) = (Some((dir, held)), None),
                Err(e) => {
                    self.give_up(&dir, &e);
                    return LockWait::Unknown;
                }
            }
        }
        // Writes of an earlier need, long past, say nothing of the lock now.
        if self.wanted.is_none_or(|at| at.elapsed() > KEPT) {
            self.took.clear();
        }
        self.wanted = Some(Instant::now());
        if self.took.len() < FEW {
            return LockWait::Measuring;
        }
        let sum: Duration = self.took.iter().sum();
        LockWait::Mean(sum / u32::try_from(self.took.len()).unwrap_or(u32::MAX))
    }

    /// Where among `n` freezer writes of a switch the probe's goes (before the write of that index), if measuring.
    pub fn position(&self, n: usize) -> Option<usize> {
        let measuring = self.held.is_some() && self.wanted.is_some_and(|at| at.elapsed() <= KEPT);
        // A fresh random hasher's output: a lock holder who times its reads by the slot's boundary cannot tell
        // which write is the probe's.
        (measuring && n > 0).then(|| {
            let random = std::collections::hash_map::RandomState::new().build_hasher().finish();
            usize::try_from(random % n as u64).unwrap_or(0)
        })
    }

    /// Writes the empty cgroup's state once, timed.
    pub fn measure(&mut self) {
        let Some((dir, held)) = &self.held else { return };
        let cpu = thread_cpu();
        if let Err(e) = held.write_at(self.file.1.as_bytes(), 0) {
            // Removed under it (another agent of this machine that stopped, in a test cluster): made again when
            // next needed. Anything else is said once, and tried again after a while.
            let (dir, gone) =
                (dir.clone(), e.raw_os_error() == Some(libc::ENODEV) || e.kind() == io::ErrorKind::NotFound);
            self.held = None;
            if !gone {
                self.give_up(&dir, &e);
            }
            return;
        }
        if self.took.len() == KEPT_WRITES {
            self.took.pop_front();
        }
        self.took.push_back(thread_cpu().saturating_sub(cpu));
    }

    /// Removes the empty cgroup, at the agent's stop.
    pub fn stop(&mut self) {
        self.took.clear();
        let Some((dir, held)) = self.held.take() else { return };
        drop(held);
        if let Err(e) = std::fs::remove_dir(&dir) {
            if e.kind() != io::ErrorKind::NotFound {
                log::warn!("cannot remove {}: {e}", dir.display());
            }
        }
    }

    /// Says once that the lock cannot be measured in `dir` (`e`), until it is tried again after [`KEPT`].
    fn give_up(&mut self, dir: &Path, e: &io::Error) {
        if self.failed.is_none() {
            log::warn!(
                "cannot measure the freezer's lock in {}: {e}; a job whose changes cost more than its share of a CPU \
                 is left to the kernel, whatever holds the lock",
                dir.display()
            );
        }
        self.failed = Some(Instant::now());
        self.took.clear();
    }
}

/// Makes the empty cgroup `dir` (or takes the one an earlier agent left) and opens its state file `state`.
fn open(dir: &Path, state: &Path) -> io::Result<File> {
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    OpenOptions::new().write(true).open(state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_cgroup::V2;

    #[test]
    fn the_lock_is_measured_only_while_needed_over_the_last_writes() {
        let root = lockstep_scratch::tempdir().unwrap();
        let parent = root.path().join("lockstep");
        // A directory laid out as cgroup v2's (a plain one: its empty cgroup's file is made by hand).
        std::fs::create_dir_all(parent.join(NAME)).unwrap();
        std::fs::write(parent.join("cgroup.freeze"), "0").unwrap();
        std::fs::write(parent.join(NAME).join("cgroup.freeze"), "0").unwrap();
        let mut probe = Probe::new(&V2::new(root.path().to_path_buf()));
        assert_eq!(probe.position(3), None, "not measuring before a judgement asks");
        probe.measure();
        assert_eq!(probe.wait(), LockWait::Measuring, "nothing measured before it was asked for");
        for _ in 0..FEW - 1 {
            assert!(probe.position(3).is_some_and(|k| k < 3), "before one of the three writes, never after");
            probe.measure();
        }
        assert_eq!(probe.wait(), LockWait::Measuring, "{} writes", FEW - 1);
        assert_eq!(probe.position(0), None, "no freezer write, no probe");
        for _ in 0..KEPT_WRITES * 2 {
            probe.measure();
        }
        assert!(matches!(probe.wait(), LockWait::Mean(_)));
        assert_eq!(probe.took.len(), KEPT_WRITES, "the last writes only");
        // Asked again long after: the writes of then say nothing of now.
        probe.wanted = Some(Instant::now().checked_sub(KEPT * 2).unwrap());
        assert_eq!(probe.position(3), None, "measuring stopped with the need");
        assert_eq!(probe.wait(), LockWait::Measuring);
        probe.stop();
        assert!(probe.held.is_none() && probe.took.is_empty());
    }

    #[test]
    fn no_freezer_where_jobs_are_made_is_said_as_unknown() {
        let root = lockstep_scratch::tempdir().unwrap();
        let mut probe = Probe::new(&V2::new(root.path().to_path_buf()));
        assert_eq!(probe.wait(), LockWait::Unknown);
        // A parent with a freezer, where the empty cgroup cannot be made: said once, tried again later.
        std::fs::create_dir_all(root.path().join("lockstep")).unwrap();
        std::fs::write(root.path().join("lockstep/cgroup.freeze"), "0").unwrap();
        assert_eq!(probe.wait(), LockWait::Unknown, "a plain directory has no cgroup.freeze in a new one");
        assert!(probe.failed.is_some());
    }
}
