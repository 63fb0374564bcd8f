//! Which paths a root daemon may trust: those no other user can plant, replace or redirect. A file is only as safe
//! as every directory above it, so the check walks the whole chain from `/`, as sshd's `StrictModes` does: each
//! directory must belong to root (or to the user running lockstep) and be writable by nobody else, unless it is
//! sticky (`/tmp`), where others cannot rename or remove what root owns. A symbolic link on the way must belong to
//! root (or that user) too, and what it points to is checked the same way. This only reads file metadata.

use std::ffi::OsString;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use crate::error::UsageError;

/// Symbolic links followed at most, as the kernel does (`MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// Whether `uid` may own a directory on a trusted path: root, or the user running this process.
fn trusted_owner(uid: u32) -> bool {
    // SAFETY: geteuid has no preconditions.
    uid == 0 || uid == unsafe { libc::geteuid() }
}

/// Refuses `path` (a file lockstep will create, bind or open as root: the store, the socket, a lock) when any
/// directory above it, or any symbolic link on the way, could be changed by a user other than root or the user
/// running lockstep. Directories that do not exist yet are fine: whoever creates them is then checked with
/// [`ensure_dir`]. `what` names the file in the message (e.g. `store`).
pub fn check_path(path: &Path, what: &str) -> Result<(), UsageError> {
    let absolute = absolute(path, what)?;
    check_chain(absolute.parent().unwrap_or(Path::new("/")), path, what)
}

/// Opens `path` for reading if it is a regular file, without following a link or blocking on a FIFO (a file in a
/// directory other users can write, such as `/dev/shm`, may be either); the file with its metadata.
pub fn open_regular(path: &Path) -> Option<(std::fs::File, std::fs::Metadata)> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok().filter(std::fs::Metadata::is_file)?;
    Some((file, meta))
}

/// Creates directory `dir` (and those above it that are missing) with `mode` unless it exists, then checks that
/// it and every directory above it are as [`check_path`] wants: one that another user created meanwhile, or
/// that existed already, is refused, never used.
pub fn ensure_dir(dir: &Path, mode: u32, what: &str) -> Result<(), UsageError> {
    use std::os::unix::fs::DirBuilderExt;
    let absolute = absolute(dir, what)?;
    check_chain(&absolute, dir, what)?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(&absolute)
        .map_err(|e| UsageError::new(format!("cannot create the directory of {what} {}: {e}", dir.display())))?;
    check_chain(&absolute, dir, what)?;
    Ok(())
}

/// `path` made absolute against the working directory.
fn absolute(path: &Path, what: &str) -> Result<PathBuf, UsageError> {
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    let cwd = std::env::current_dir().map_err(|e| {
        UsageError::new(format!("refusing {what} {}: cannot read the working directory: {e}", path.display()))
    })?;
    Ok(cwd.join(path))
}

/// Checks directory `dir` and every one above it; `shown` and `what` name the file in the message.
fn check_chain(dir: &Path, shown: &Path, what: &str) -> Result<(), UsageError> {
    let mut links = 0;
    walk(dir, &mut links).map_err(|why| {
        UsageError::new(format!(
            "refusing {what} {}: {why} (expected a path whose every directory only root can change, e.g. under /var/lib or /run)",
            shown.display()
        ))
    })
}

/// The program `name` as root may run it: the first `PATH` entry (absolute ones only) holding an executable file
/// of that name that belongs to root (or the user running lockstep), that no one else can write, in a directory
/// chain [`check_path`] accepts. A `PATH` with `.` or `/tmp` in front cannot make root run a user's file.
pub fn program(name: &str) -> Result<PathBuf, UsageError> {
    let path = std::env::var_os("PATH")
        .unwrap_or_else(|| "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
    program_in(name, &path)
}

/// [`program`] over the directories of `path` (as `PATH` lists them).
fn program_in(name: &str, path: &std::ffi::OsStr) -> Result<PathBuf, UsageError> {
    let mut refused = Vec::new();
    for dir in std::env::split_paths(path).filter(|d| d.is_absolute()) {
        let candidate = dir.join(name);
        let Ok(meta) = std::fs::metadata(&candidate) else { continue };
        if !meta.is_file() || meta.mode() & 0o111 == 0 {
            continue;
        }
        let own = trusted_owner(meta.uid()) && meta.mode() & 0o022 == 0;
        match check_path(&candidate, name) {
            Ok(()) if own => return Ok(candidate),
            Ok(()) => {
                refused.push(format!("{} (UID {}, mode {:o})", candidate.display(), meta.uid(), meta.mode() & 0o7777));
            }
            Err(e) => refused.push(e.to_string()),
        }
    }
    Err(UsageError::new(if refused.is_empty() {
        format!("cannot find {name} on PATH")
    } else {
        format!("no {name} on PATH that only root can change: {}", refused.join("; "))
    }))
}

/// A command for program `name` as [`program`] finds it, started in the normal scheduling class (`SCHED_OTHER`)
/// whatever the class of the thread that starts it: the agent's threads run at `SCHED_FIFO`, and a Slurm client
/// or podman that inherited it would run ahead of every job on the node, or spin there.
pub fn command(name: &str) -> Result<std::process::Command, UsageError> {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(program(name)?);
    // SAFETY: sched_setscheduler is async-signal-safe and touches only the child between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let param = libc::sched_param { sched_priority: 0 };
            if libc::sched_setscheduler(0, libc::SCHED_OTHER, &raw const param) == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        });
    }
    Ok(cmd)
}

/// Checks the directories from `/` down to `dir` itself; a missing one ends the walk (nothing below it exists).
fn walk(dir: &Path, links: &mut usize) -> Result<(), String> {
    let mut now = PathBuf::from("/");
    check_dir(&now, &std::fs::symlink_metadata(&now).map_err(|e| format!("cannot read /: {e}"))?)?;
    let mut rest: Vec<OsString> = Vec::new();
    for c in dir.components() {
        match c {
            Component::Normal(name) => rest.push(name.to_os_string()),
            Component::ParentDir => rest.push("..".into()),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    for name in rest {
        if name == ".." {
            now.pop();
            continue;
        }
        let next = now.join(&name);
        let meta = match std::fs::symlink_metadata(&next) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(format!("cannot read {}: {e}", next.display())),
        };
        if meta.file_type().is_symlink() {
            if !trusted_owner(meta.uid()) {
                return Err(format!("symbolic link {} belongs to UID {}", next.display(), meta.uid()));
            }
            *links += 1;
            if *links > MAX_LINKS {
                return Err(format!("too many symbolic links at {}", next.display()));
            }
            let target = std::fs::read_link(&next).map_err(|e| format!("cannot read {}: {e}", next.display()))?;
            let resolved = if target.is_absolute() { target } else { now.join(target) };
            // The target is walked from `/` like any path; once it stands, the walk goes on from it.
            walk(&resolved, links)?;
            match std::fs::canonicalize(&resolved) {
                Ok(real) => now = real,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(format!("cannot resolve {}: {e}", next.display())),
            }
            continue;
        }
        if !meta.is_dir() {
            return Err(format!("{} is not a directory", next.display()));
        }
        check_dir(&next, &meta)?;
        now = next;
    }
    Ok(())
}

/// One directory: owned by a trusted user, and writable by no one else unless sticky.
fn check_dir(dir: &Path, meta: &std::fs::Metadata) -> Result<(), String> {
    if !trusted_owner(meta.uid()) {
        return Err(format!("directory {} belongs to UID {}", dir.display(), meta.uid()));
    }
    let (others_write, sticky) = (meta.mode() & 0o022 != 0, meta.mode() & 0o1000 != 0);
    if others_write && !sticky {
        return Err(format!(
            "directory {} can be written by other users (mode {:o})",
            dir.display(),
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn private_directories_pass_and_open_ones_are_refused() {
        let tmp = lockstep_scratch::tempdir().unwrap();
        let store = tmp.path().join("a/b/lockstep.db");
        assert!(check_path(&store, "store").is_ok(), "missing directories under a private one are fine");
        ensure_dir(store.parent().unwrap(), 0o700, "store").unwrap();
        assert!(check_path(&store, "store").is_ok());
        let open = tmp.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = check_path(&open.join("x/lockstep.db"), "store").unwrap_err().to_string();
        assert!(err.contains("can be written by other users"), "{err}");
        assert!(ensure_dir(&open.join("x"), 0o700, "store").is_err());
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(check_path(&open.join("lockstep.db"), "store").is_ok(), "a sticky directory is fine");
        let file = tmp.path().join("file");
        std::fs::write(&file, "").unwrap();
        assert!(check_path(&file.join("x"), "store").unwrap_err().to_string().contains("not a directory"));
        // A link this user made to a private directory is followed and checked.
        std::os::unix::fs::symlink(store.parent().unwrap(), tmp.path().join("link")).unwrap();
        assert!(check_path(&tmp.path().join("link/lockstep.db"), "store").is_ok());
        std::os::unix::fs::symlink(&open, tmp.path().join("to-open")).unwrap();
        assert!(check_path(&tmp.path().join("to-open/x/lockstep.db"), "store").is_ok(), "sticky, then missing");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(check_path(&tmp.path().join("to-open/x/lockstep.db"), "store").is_err(), "through a link too");
        // A directory that exists and belongs to another user is refused as the store's own directory.
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            let theirs = tmp.path().join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            let err = ensure_dir(&theirs, 0o700, "store").unwrap_err().to_string();
            assert!(err.contains("belongs to UID 65534"), "{err}");
            assert!(check_path(&theirs.join("lockstep.db"), "store").is_err());
            // A program of the same name in nobody's directory, first on PATH, is passed over for root's.
            let mine = tmp.path().join("bin");
            std::fs::create_dir(&mine).unwrap();
            for dir in [&theirs, &mine] {
                let prog = dir.join("lockstep-test-prog");
                std::fs::write(&prog, "#!/bin/sh\n").unwrap();
                std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
            std::os::unix::fs::chown(theirs.join("lockstep-test-prog"), Some(65534), Some(65534)).unwrap();
            let path = std::env::join_paths([&theirs, &mine, &PathBuf::from("relative")]).unwrap();
            assert_eq!(program_in("lockstep-test-prog", &path).unwrap(), mine.join("lockstep-test-prog"));
            let only_theirs = std::env::join_paths([&theirs]).unwrap();
            let err = program_in("lockstep-test-prog", &only_theirs).unwrap_err().to_string();
            assert!(err.contains("only root can change"), "{err}");
            assert!(program_in("no-such-program-here", &path).unwrap_err().to_string().contains("cannot find"));
        }
    }
}
