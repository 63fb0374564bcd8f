//! cgroup v2: one unified hierarchy; the job gets `lockstep/<job>`, with the controllers it needs enabled in
//! the `subtree_control` of the root and of `lockstep/`.

use std::fs;
use std::path::{Path, PathBuf};

use crate::job::{
    check_within, create_all, ensure_dir, write_knob, Backend, CreateError, JobCgroup, Limits, Version, PARENT,
};
use lockstep_core::ident::JobName;

/// The v2 backend, rooted at the unified mount point (or a scratch tree with the same files, in tests).
pub struct V2 {
    root: PathBuf,
}

impl V2 {
    /// A backend over the hierarchy mounted at `root`.
    pub fn new(root: PathBuf) -> Self {
        Self { root }
    }

    /// Enables `controllers` (names: `cpu`, …) for the children of the root and of `lockstep/`, which holds no
    /// process itself, so the no-internal-process rule allows it.
    fn enable_below(&self, controllers: &[&str]) -> Result<(), CreateError> {
        if controllers.is_empty() {
            return Ok(());
        }
        let line = controllers.iter().map(|c| format!("+{c}")).collect::<Vec<_>>().join(" ");
        write_knob(&self.root.join("cgroup.subtree_control"), &line)?;
        write_knob(&self.root.join(PARENT).join("cgroup.subtree_control"), &line)
    }

    fn available(&self) -> Vec<String> {
        fs::read_to_string(self.root.join("cgroup.controllers"))
            .unwrap_or_default()
            .split_whitespace()
            .map(String::from)
            .collect()
    }
}

impl Backend for V2 {
    fn version(&self) -> Version {
        Version::V2
    }

    fn create_control(&self, name: &JobName) -> Result<JobCgroup, CreateError> {
        let parent = self.root.join(PARENT);
        ensure_dir(&parent)?;
        if self.available().iter().any(|c| c == "cpu") {
            self.enable_below(&["cpu"])?;
        }
        create_all(Version::V2, vec![parent.join(name.as_str())], |_| Ok(()))
    }

    fn existing(&self, relative: &Path) -> Vec<PathBuf> {
        let d = self.root.join(relative.strip_prefix("/").unwrap_or(relative));
        if d.is_dir() {
            vec![d]
        } else {
            Vec::new()
        }
    }

    fn roots(&self) -> Vec<PathBuf> {
        vec![self.root.clone()]
    }

    fn parents(&self) -> Vec<PathBuf> {
        vec![self.root.join(PARENT)]
    }

    fn create(&self, name: &JobName, limits: &Limits) -> Result<JobCgroup, CreateError> {
        let available = self.available();
        let mut enable = Vec::new();
        for (needed, controller, why) in [
            (limits.cpus.is_some() || limits.mems.is_some(), "cpuset", "a placement"),
            (limits.weight.is_some(), "cpu", "--weight"),
            (limits.mem_limit.is_some(), "memory", "--mem-limit"),
        ] {
            if !needed {
                continue;
            }
            if !available.iter().any(|c| c == controller) {
                return Err(CreateError::MissingController(controller, why));
            }
            enable.push(controller);
        }
        let parent = self.root.join(PARENT);
        ensure_dir(&parent)?;
        // The agent's boost and dcs weigh every job through its cpu.weight: cpu is enabled for every job where
        // it can be, not only for --weight. The kernel refuses it while a real-time process sits in a cgroup
        // below the root; the job then goes without (as it would without the agent), unless --weight needs it.
        let cpu_too = available.iter().any(|c| c == "cpu") && !enable.contains(&"cpu");
        if !cpu_too || self.enable_below(&[enable.as_slice(), &["cpu"]].concat()).is_err() {
            self.enable_below(&enable)?;
        }
        check_within("cpus", limits.cpus.as_ref(), &self.root.join("cpuset.cpus.effective"))?;
        check_within("mems", limits.mems.as_ref(), &self.root.join("cpuset.mems.effective"))?;
        create_all(Version::V2, vec![parent.join(name.as_str())], |dirs| {
            let dir = &dirs[0];
            if let Some(cpus) = &limits.cpus {
                write_knob(&dir.join("cpuset.cpus"), &cpus.to_string())?;
            }
            if let Some(mems) = &limits.mems {
                write_knob(&dir.join("cpuset.mems"), &mems.to_string())?;
            }
            if let Some(w) = limits.weight {
                write_knob(&dir.join("cpu.weight"), &w.to_string())?;
            }
            if let Some(bytes) = limits.mem_limit {
                write_knob(&dir.join("memory.max"), &bytes.to_string())?;
            }
            Ok(())
        })
    }
}
