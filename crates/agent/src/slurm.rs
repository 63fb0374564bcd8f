//! Slurm jobs on this node, found by the layout of Slurm's own cgroups, and what the prolog and epilog tell the
//! agent about them. Each Slurm job is one lockstep job named `slurm-<id>` on every node it runs on.
//!
//! - cgroup v1 (`CgroupPlugin=cgroup/v1`): `<controller>/slurm_<node>/uid_<u>/job_<id>` (`slurm/` on a host
//!   with one slurmd). The job directory is the group: the v1 freezer is hierarchical, so freezing it freezes every
//!   step below, and slurmstepd itself lives outside the freezer's step cgroups (when a step ends, its slurmstepd
//!   moves up into `job_<id>` to remove them: never gathered into the job's weight cgroup).
//! - cgroup v2 (`cgroup/v2`): `system.slice/<node>_slurmstepd.scope/job_<id>` (`slurmstepd.scope` with one
//!   slurmd). `job_<id>` also holds each step's slurmstepd (`step_<n>/slurm`), which must never freeze: the groups
//!   are the steps' `step_<n>/user` directories, added as steps start.
//!
//! This module reads the tree and does the cgroup work that follows a scan; the discovery thread
//! (`feeders::slurm`) runs it, and the daemon (`daemon::slurm`) takes on what it finds.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use lockstep_cgroup::procfs::ProcessRef;
use lockstep_cgroup::{self as cgroup, Version};
use lockstep_core::job::SlurmJobId;

/// A Slurm job found in the cgroup tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// Slurm job ID.
    pub id: SlurmJobId,
    /// Owner, when the layout says (v1's `uid_<u>`).
    pub uid: Option<u32>,
    /// The `job_<id>` directory in every hierarchy that has one (what the job is counted by).
    pub job_dirs: Vec<PathBuf>,
    /// The cgroups co-scheduling acts on, each as its directories.
    pub groups: Vec<Vec<PathBuf>>,
}

/// Every Slurm job of node `node` under the hierarchy `roots` (v1: one per controller; v2: the unified one).
pub fn scan(version: Version, roots: &[PathBuf], node: &str) -> Vec<Found> {
    match version {
        Version::V1 => scan_v1(roots, node),
        Version::V2 => roots.first().map(|r| scan_v2(r, node)).unwrap_or_default(),
    }
}

/// The first of `names` that exists under any of `roots`: a node's own directory before the single-slurmd one.
fn base<'a>(roots: &[PathBuf], names: &'a [String]) -> Option<&'a str> {
    names.iter().find(|n| roots.iter().any(|r| r.join(n).is_dir())).map(String::as_str)
}

/// `(number, path)` of the entries of `dir` named `<prefix><number>`.
pub fn numbered<N: FromStr + Ord>(dir: &Path, prefix: &str) -> Vec<(N, PathBuf)> {
    let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<(N, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_str()?.strip_prefix(prefix)?.parse().ok()?;
            e.file_type().ok()?.is_dir().then(|| (n, e.path()))
        })
        .collect();
    out.sort();
    out
}

fn scan_v1(roots: &[PathBuf], node: &str) -> Vec<Found> {
    let names = [format!("slurm_{node}"), "slurm".to_string()];
    let Some(base) = base(roots, &names) else { return Vec::new() };
    let mut jobs: BTreeMap<SlurmJobId, Found> = BTreeMap::new();
    for root in roots {
        for (uid, user_dir) in numbered::<u32>(&root.join(base), "uid_") {
            for (id, dir) in numbered(&user_dir, "job_") {
                let found = jobs.entry(id).or_insert_with(|| Found {
                    id,
                    uid: Some(uid),
                    job_dirs: Vec::new(),
                    groups: Vec::new(),
                });
                if !found.job_dirs.contains(&dir) {
                    found.job_dirs.push(dir);
                }
            }
        }
    }
    jobs.into_values()
        .map(|mut f| {
            f.groups = vec![f.job_dirs.clone()];
            f
        })
        .collect()
}

fn scan_v2(root: &Path, node: &str) -> Vec<Found> {
    let names = [format!("system.slice/{node}_slurmstepd.scope"), "system.slice/slurmstepd.scope".to_string()];
    let Some(base) = base(&[root.to_path_buf()], &names) else { return Vec::new() };
    numbered(&root.join(base), "job_")
        .into_iter()
        .filter_map(|(id, dir)| {
            let mut groups: Vec<Vec<PathBuf>> = fs::read_dir(&dir)
                .ok()?
                .flatten()
                .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with("step_")))
                .map(|e| e.path().join("user"))
                .filter(|u| u.is_dir())
                .map(|u| vec![u])
                .collect();
            groups.sort();
            (!groups.is_empty()).then(|| Found { id, uid: None, job_dirs: vec![dir], groups })
        })
        .collect()
}

/// Moves the processes of a Slurm job's steps (the cgroups below `job_dirs`) that are not yet in `weight_dir`
/// into it; a process moved there stays in Slurm's own cgroups of every other controller.
///
/// A process directly in `job_<id>` is Slurm's, never the job's: a slurmstepd whose step ended moves itself up
/// there to remove the step's cgroups. Moved into the weight cgroup, it kept that cgroup and the job's own alive
/// past the job's end.
fn gather(job_dirs: &[PathBuf], weight_dir: &Path) {
    let there = cgroup::read_procs(weight_dir).unwrap_or_default();
    let procs = weight_dir.join("cgroup.procs");
    let steps = job_dirs.iter().flat_map(|d| fs::read_dir(d).into_iter().flatten().flatten());
    let step_dirs = steps.filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path());
    for pid in step_dirs.flat_map(|d| cgroup::procs_below(&d).unwrap_or_default()) {
        // Named with its start time as soon as it is listed: a process that exits meanwhile is left out, and its
        // PID, if another process gets it, is not moved.
        if let Some(process) = ProcessRef::of(pid).filter(|_| !there.contains(&pid)) {
            let _ = process.move_to(&procs);
        }
    }
}

/// The cgroup work a scan leaves for the discovery thread, not the daemon's loop, to do: moving processes into a
/// cgroup and removing one wait on the kernel's cgroup locks (tens of milliseconds when the machine is busy), and
/// a slot switch must never wait behind them.
#[derive(Debug, Default)]
pub struct Chores {
    /// Each Slurm job's `job_<id>` directories and its weight cgroup, to gather its new processes into.
    pub gather: Vec<(Vec<PathBuf>, PathBuf)>,
    /// Weight cgroups of jobs no longer managed, to remove once empty.
    pub sweep: Vec<PathBuf>,
}

impl Chores {
    /// Does the work.
    pub fn run(self) {
        for (dirs, weight_dir) in &self.gather {
            gather(dirs, weight_dir);
        }
        // A job's last processes may still be exiting when its epilog runs: its cgroup goes once they have.
        for dir in self.sweep {
            if cgroup::read_procs(&dir).is_ok_and(|p| p.is_empty()) {
                let _ = cgroup::remove_dir(&dir);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkdirs(root: &Path, paths: &[&str]) {
        for p in paths {
            fs::create_dir_all(root.join(p)).unwrap();
        }
    }

    #[test]
    fn v1_jobs_of_this_node_across_controllers() {
        let t = lockstep_scratch::tempdir().unwrap();
        let (freezer, cpuset) = (t.path().join("freezer"), t.path().join("cpuset"));
        mkdirs(
            &freezer,
            &["slurm_n1/uid_0/job_7/step_0", "slurm_n1/uid_1000/job_9/step_batch", "slurm_n2/uid_0/job_8"],
        );
        mkdirs(&cpuset, &["slurm_n1/uid_0/job_7/step_0", "slurm_n1/uid_0/not_a_job"]);
        let found = scan(Version::V1, &[freezer.clone(), cpuset.clone()], "n1");
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].id, SlurmJobId(7));
        assert_eq!(found[0].uid, Some(0));
        let both = vec![freezer.join("slurm_n1/uid_0/job_7"), cpuset.join("slurm_n1/uid_0/job_7")];
        assert_eq!(found[0].job_dirs, both);
        assert_eq!(found[0].groups, vec![both]);
        assert_eq!((found[1].id, found[1].uid), (SlurmJobId(9), Some(1000)));
        assert!(scan(Version::V1, std::slice::from_ref(&freezer), "n3").is_empty());
    }

    #[test]
    fn v1_single_slurmd_layout() {
        let t = lockstep_scratch::tempdir().unwrap();
        mkdirs(t.path(), &["slurm/uid_5/job_3/step_0"]);
        let found = scan(Version::V1, &[t.path().to_path_buf()], "anything");
        assert_eq!((found[0].id, found[0].uid), (SlurmJobId(3), Some(5)));
    }

    #[test]
    fn v2_groups_are_the_steps_user_cgroups() {
        let t = lockstep_scratch::tempdir().unwrap();
        let scope = "system.slice/n1_slurmstepd.scope";
        mkdirs(
            t.path(),
            &[
                &format!("{scope}/job_4/step_0/slurm"),
                &format!("{scope}/job_4/step_0/user/task_0"),
                &format!("{scope}/job_4/step_batch/user/task_special"),
                &format!("{scope}/job_5/step_0/slurm"),
                "system.slice/slurmstepd.scope/job_6/step_0/user",
            ],
        );
        let found = scan(Version::V2, &[t.path().to_path_buf()], "n1");
        assert_eq!(found.len(), 1, "job 5 has no task cgroup yet; job 6 belongs to the single-slurmd scope");
        let job = t.path().join(scope).join("job_4");
        assert_eq!(found[0].job_dirs, vec![job.clone()]);
        assert_eq!(found[0].groups, vec![vec![job.join("step_0/user")], vec![job.join("step_batch/user")]]);
        assert_eq!(scan(Version::V2, &[t.path().to_path_buf()], "n9")[0].id, SlurmJobId(6));
    }
}
