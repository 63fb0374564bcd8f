//! Helpers shared by the integration tests: a private store and socket per test, root checks, the job
//! cgroup directories, waiting.
#![allow(dead_code)] // each test binary uses a different subset

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const V1_CONTROLLERS: [&str; 4] = ["cpuset", "cpu", "memory", "freezer"];

pub struct Env {
    /// Directory of the store and socket.
    pub dir: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Self {
        Self { dir: tempfile::tempdir().unwrap() }
    }

    /// This test's store.
    pub fn store(&self) -> PathBuf {
        self.dir.path().join("lockstep.db")
    }

    /// This test's agent socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("agent.sock")
    }

    pub fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_lockstep"));
        c.env("LOCKSTEP_STORE", self.store()).env("LOCKSTEP_SOCKET", self.socket());
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    pub fn spawn(&self, args: &[&str]) -> Child {
        self.cmd().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
    }
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[macro_export]
macro_rules! needs_root {
    () => {
        if !common::is_root() {
            eprintln!("skipped: needs root for real cgroups");
            return;
        }
    };
}

pub fn name(test: &str) -> String {
    format!("it-{test}-{}", std::process::id())
}

/// Directories a job would own: v1 controllers that are mounted, else the v2 hierarchy.
pub fn job_dirs(job: &str) -> Vec<PathBuf> {
    let v1: Vec<PathBuf> = V1_CONTROLLERS
        .iter()
        .map(|c| Path::new("/sys/fs/cgroup").join(c))
        .filter(|m| m.join("cgroup.procs").exists())
        .map(|m| m.join("lockstep").join(job))
        .collect();
    if v1.is_empty() {
        vec![Path::new("/sys/fs/cgroup/lockstep").join(job)]
    } else {
        v1
    }
}

pub fn assert_no_cgroup(job: &str) {
    for d in job_dirs(job) {
        assert!(!d.exists(), "cgroup {} left behind", d.display());
    }
}

pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A command's stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
