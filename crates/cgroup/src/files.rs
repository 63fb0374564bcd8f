//! Cgroup directories as files: removing one (only ever a cgroup), listing its processes, joining it.

use std::ffi::CString;
use std::fs;
use std::io;
use std::path::Path;

/// Whether `path` is on a cgroup file system (v1 or v2), as opposed to a scratch tree used in tests.
fn on_cgroupfs(path: &Path) -> bool {
    use nix::sys::statfs::{statfs, CGROUP2_SUPER_MAGIC, CGROUP_SUPER_MAGIC};
    statfs(path).is_ok_and(|s| s.filesystem_type() == CGROUP_SUPER_MAGIC || s.filesystem_type() == CGROUP2_SUPER_MAGIC)
}

/// Removes one cgroup directory with the cgroups below it (a job's own, an experiment's per-kind children),
/// deepest first. On cgroupfs `rmdir` drops the interface files with it. Anywhere else only an empty directory
/// goes: a path that is not a cgroup never costs a file, however it reached the caller. This crate's own tests
/// build scratch trees whose interface files are plain files; there, and only there, the tree goes whole.
/// A cgroup with no cgroup below it goes by one `rmdir`, which needs no descriptor: a job's cgroup is removed even
/// when the agent has run out of them (listing the cgroups below needs one).
pub fn remove_dir(path: &Path) -> io::Result<()> {
    if on_cgroupfs(path) {
        // EBUSY: cgroups below it (removed first, then this one again), or a process in it (refused again).
        match fs::remove_dir(path) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
            done => return done,
        }
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

/// How far a walk of a job's cgroup tree goes. A delegated tree is its user's to make: as deep and as wide as the
/// kernel lets them (cgroup v1 sets no limit), and as full of processes as their limits allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Levels walked below the top directories (which are level 0).
    pub depth: usize,
    /// Cgroups whose processes are read, the top directories included.
    pub cgroups: usize,
    /// Processes listed.
    pub procs: usize,
}

/// What the agent walks of one job's tree at most, per look: 32 levels, 4,096 cgroups, 65,536 processes.
pub const JOB_TREE: Bounds = Bounds { depth: 32, cgroups: 4096, procs: 65_536 };

/// Which bound cut a walk short.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cut {
    /// The tree goes deeper than [`Bounds::depth`].
    Depth,
    /// It has more cgroups than [`Bounds::cgroups`].
    Cgroups,
    /// It holds more processes than [`Bounds::procs`].
    Procs,
}

/// What a bounded walk found: the processes listed (shallowest cgroups first), and the bounds that cut it short
/// (empty when the whole tree was walked).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Walk {
    /// The processes listed.
    pub procs: Vec<i32>,
    /// The bounds hit, each once, in the order of [`Cut`].
    pub cuts: Vec<Cut>,
}

impl Walk {
    /// Notes that `cut` stopped part of the walk (or of what the caller made of it: the threads of its
    /// processes, say).
    pub fn cut(&mut self, cut: Cut) {
        if !self.cuts.contains(&cut) {
            self.cuts.push(cut);
            self.cuts.sort_unstable();
        }
    }

    /// The bounds hit, in words (`deeper than 32 levels, more than 4096 cgroups`), with `bounds` the walk's.
    pub fn said(&self, bounds: &Bounds) -> String {
        let word = |c: &Cut| match c {
            Cut::Depth => format!("deeper than {} levels", bounds.depth),
            Cut::Cgroups => format!("more than {} cgroups", bounds.cgroups),
            Cut::Procs => format!("more than {} processes", bounds.procs),
        };
        self.cuts.iter().map(word).collect::<Vec<_>>().join(", ")
    }
}

/// The processes in the cgroups `tops` and below, walked breadth first within `bounds`: what lies past a bound is
/// left out, and the walk says which bounds it hit. A cgroup that cannot be read (gone, or no descriptor left) is
/// passed over: what this lists is for measuring, never for deciding that a job ended (see [`procs_below`]).
pub fn procs_within(tops: &[impl AsRef<Path>], bounds: Bounds) -> Walk {
    use std::collections::VecDeque;
    let mut walk = Walk::default();
    let mut queue: VecDeque<(std::path::PathBuf, usize)> = VecDeque::new();
    for top in tops {
        if queue.len() >= bounds.cgroups {
            walk.cut(Cut::Cgroups);
            break;
        }
        queue.push_back((top.as_ref().to_path_buf(), 0));
    }
    // Cgroups taken into the walk so far (read or queued): the queue never holds more than the bound allows.
    let mut taken = queue.len();
    while let Some((dir, depth)) = queue.pop_front() {
        if !read_procs_into(&dir, bounds.procs, &mut walk.procs) {
            walk.cut(Cut::Procs);
            break;
        }
        let Ok(entries) = fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if depth >= bounds.depth {
                walk.cut(Cut::Depth);
                break;
            }
            if taken >= bounds.cgroups {
                walk.cut(Cut::Cgroups);
                break;
            }
            taken += 1;
            queue.push_back((e.path(), depth + 1));
        }
    }
    walk
}

/// Appends the processes of cgroup `dir` to `out` while it holds fewer than `most`; returns `false` when some were
/// left out for want of room. A cgroup that cannot be read adds none.
fn read_procs_into(dir: &Path, most: usize, out: &mut Vec<i32>) -> bool {
    use std::io::BufRead;
    let Ok(file) = fs::File::open(dir.join("cgroup.procs")) else { return true };
    for line in io::BufReader::new(file).lines() {
        let Ok(line) = line else { break };
        let Ok(pid) = line.trim().parse() else { continue };
        if out.len() >= most {
            return false;
        }
        out.push(pid);
    }
    true
}

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
