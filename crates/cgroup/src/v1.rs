//! cgroup v1: one hierarchy per controller; the job gets `lockstep/<job>` in each controller it uses.

use std::fs;
use std::path::{Path, PathBuf};

use crate::job::{
    check_within, create_all, ensure_dir, write_knob, Backend, CreateError, JobCgroup, Limits, Version, PARENT,
};
use crate::knobs::weight_to_shares;
use lockstep_core::ident::JobName;

/// Controllers a job cgroup joins when mounted: cpuset (placement), cpu (weight), memory (limit and
/// accounting), freezer (gang scheduling, and a clean kill), perf_event (per-cgroup counters; on a hybrid
/// machine the unified hierarchy, see `detect`).
const USED: [&str; 5] = ["cpuset", "cpu", "memory", "freezer", "perf_event"];

/// The v1 backend: controller name → mount point.
pub struct V1 {
    mounts: Vec<(String, PathBuf)>,
}

impl V1 {
    /// A backend over `(controller, mount point)` pairs, as found in `/proc/self/mountinfo`.
    pub fn new(mounts: Vec<(String, PathBuf)>) -> Self {
        Self { mounts }
    }

    /// Whether `controller` is mounted.
    pub fn has(&self, controller: &str) -> bool {
        self.mount(controller).is_some()
    }

    fn mount(&self, controller: &str) -> Option<&PathBuf> {
        self.mounts.iter().find(|(c, _)| c == controller).map(|(_, p)| p)
    }

    /// A v1 cpuset child is unusable until its cpus and mems are set: give `lockstep/` its parent's.
    fn init_cpuset_parent(root: &std::path::Path) -> Result<(), CreateError> {
        let parent = root.join(PARENT);
        for knob in ["cpuset.cpus", "cpuset.mems"] {
            let current = fs::read_to_string(parent.join(knob)).unwrap_or_default();
            if current.trim().is_empty() {
                let from_root = fs::read_to_string(root.join(knob)).unwrap_or_default();
                write_knob(&parent.join(knob), from_root.trim())?;
            }
        }
        Ok(())
    }
}

impl Backend for V1 {
    fn version(&self) -> Version {
        Version::V1
    }

    fn create_control(&self, name: &JobName) -> Result<JobCgroup, CreateError> {
        let mut roots: Vec<PathBuf> = Vec::new();
        for c in ["freezer", "cpu"] {
            match self.mount(c) {
                Some(m) if !roots.contains(m) => roots.push(m.clone()),
                Some(_) => {}
                None => return Err(CreateError::MissingController(c, "co-scheduling")),
            }
        }
        if let Some(m) = self.mount("perf_event").filter(|m| !roots.contains(m)) {
            roots.push(m.clone());
        }
        for root in &roots {
            ensure_dir(&root.join(PARENT))?;
        }
        create_all(Version::V1, roots.iter().map(|r| r.join(PARENT).join(name.as_str())).collect(), |_| Ok(()))
    }

    fn existing(&self, relative: &Path) -> Vec<PathBuf> {
        let relative = relative.strip_prefix("/").unwrap_or(relative);
        let mut dirs: Vec<PathBuf> = Vec::new();
        for (_, m) in &self.mounts {
            let d = m.join(relative);
            if d.is_dir() && !dirs.contains(&d) {
                dirs.push(d);
            }
        }
        dirs
    }

    fn roots(&self) -> Vec<PathBuf> {
        self.mounts.iter().map(|(_, m)| m.clone()).collect()
    }

    fn parents(&self) -> Vec<PathBuf> {
        // Co-mounted controllers (e.g. cpu,cpuacct) share one directory.
        let mut roots: Vec<&PathBuf> = Vec::new();
        for m in USED.iter().filter_map(|c| self.mount(c)) {
            if !roots.contains(&m) {
                roots.push(m);
            }
        }
        roots.into_iter().map(|r| r.join(PARENT)).collect()
    }

    fn create(&self, name: &JobName, limits: &Limits) -> Result<JobCgroup, CreateError> {
        for (needed, controller, why) in [
            (limits.cpus.is_some() || limits.mems.is_some(), "cpuset", "a placement"),
            (limits.weight.is_some(), "cpu", "--weight"),
            (limits.mem_limit.is_some(), "memory", "--mem-limit"),
        ] {
            if needed && !self.has(controller) {
                return Err(CreateError::MissingController(controller, why));
            }
        }
        let parents = self.parents();
        for parent in &parents {
            ensure_dir(parent)?;
        }
        let cpuset_root = self.mount("cpuset").cloned();
        if let Some(root) = &cpuset_root {
            Self::init_cpuset_parent(root)?;
            check_within("cpus", limits.cpus.as_ref(), &root.join(PARENT).join("cpuset.cpus"))?;
            check_within("mems", limits.mems.as_ref(), &root.join(PARENT).join("cpuset.mems"))?;
        }
        let dirs: Vec<PathBuf> = parents.iter().map(|p| p.join(name.as_str())).collect();
        let job_dir = |controller: &str| self.mount(controller).map(|m| m.join(PARENT).join(name.as_str()));
        create_all(Version::V1, dirs, |_| {
            if let Some(dir) = job_dir("cpuset") {
                // Unset cpus/mems inherit the parent's: a v1 cpuset accepts no task while either is empty.
                for (knob, value) in [("cpuset.cpus", &limits.cpus), ("cpuset.mems", &limits.mems)] {
                    let value = match value {
                        Some(list) => list.to_string(),
                        None => fs::read_to_string(dir.parent().unwrap_or(&dir).join(knob)).unwrap_or_default(),
                    };
                    write_knob(&dir.join(knob), value.trim())?;
                }
            }
            if let (Some(w), Some(dir)) = (limits.weight, job_dir("cpu")) {
                write_knob(&dir.join("cpu.shares"), &weight_to_shares(w).to_string())?;
            }
            if let (Some(bytes), Some(dir)) = (limits.mem_limit, job_dir("memory")) {
                write_knob(&dir.join("memory.limit_in_bytes"), &bytes.to_string())?;
            }
            Ok(())
        })
    }
}
