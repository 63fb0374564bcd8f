//! Scratch directories for lockstep's tests: `tempdir()` makes a fresh directory under the system's temporary
//! directory (`$TMPDIR`, else /tmp) that only its owner can enter, and dropping the [`TempDir`] removes it with
//! everything in it.
//!
//! The name is made of the process ID, a counter and the clock, and the directory is made with `mkdir`, which
//! fails rather than follow a name someone else made first: on such a clash the next name is tried.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Names tried before `tempdir()` gives up on clashes.
const ATTEMPTS: u32 = 64;

/// A directory that is removed, with its contents, when this value is dropped.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Where the directory is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // A test that failed may have left anything inside; what cannot be removed stays, as with `rm -rf`.
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Makes a new, empty directory with mode 0700 under the temporary directory.
pub fn tempdir() -> io::Result<TempDir> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let base = std::env::temp_dir();
    for _ in 0..ATTEMPTS {
        let clock = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |t| t.subsec_nanos());
        let name =
            format!(".lockstep-test-{}-{}-{clock:08x}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let path = base.join(name);
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => return Ok(TempDir { path }),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!("{ATTEMPTS} scratch directory names under {} were taken", base.display()),
    ))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn each_directory_is_new_private_and_removed_with_its_contents() {
        let (a, b) = (super::tempdir().unwrap(), super::tempdir().unwrap());
        assert_ne!(a.path(), b.path());
        let mode = std::fs::metadata(a.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        std::fs::create_dir(a.path().join("sub")).unwrap();
        std::fs::write(a.path().join("sub/file"), "x").unwrap();
        let path = a.path().to_path_buf();
        drop(a);
        assert!(!path.exists());
        assert!(b.path().is_dir());
    }
}
