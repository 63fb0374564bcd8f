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
