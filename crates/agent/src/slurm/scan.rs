//! Slurm jobs on this node, found by the layout of Slurm's own cgroups, and what the prolog and epilog tell the
//! agent about them. Each Slurm job is one lockstep job named `slurm-<id>` on every node it runs on.
//!
//! - cgroup v1 (`CgroupPlugin=cgroup/v1`): `<controller>/slurm_<node>/uid_<u>/job_<id>` (`slurm/` on a host
//!   with one slurmd). The job directory is the group: the v1 freezer is hierarchical, so freezing it freezes every
//!   step below, and slurmstepd itself lives outside the freezer's step cgroups (when a step ends, its slurmstepd
//!   moves up into `job_<id>` to remove them: never gathered into the job's weight cgroup).
//! - cgroup v2 (`cgroup/v2`): `system.slice/<node>_slurmstepd.scope/job_<id>` (`slurmstepd.scope` with one
//!   slurmd). `job_<id>` also holds each step's slurmstepd (`step_<n>/slurm`), which must never freeze. The
//!   groups are the task directories in each step's `step_<n>/user` (`task_<n>`, `task_special`), added as steps
//!   and tasks start: every process of a step is in one (`user` enables controllers for them, so it holds none
//!   itself). `user` is left to Slurm, which freezes it (`cgroup.freeze`) to suspend the step: had lockstep
//!   frozen and thawed that same file, a thaw in the job's slot would undo Slurm's suspension.
//!
//! The job's user owns directories of this tree (v1: the step's freezer directory; v2: the task directories, and
//! with some Slurm versions the steps' `user` directories) and may make cgroups of their own in them: the tree is hostile
//! input. Processes are read only where Slurm puts them (see [`Found::processes`]), and at most [`ENTRIES`]
//! entries of any directory are looked at per scan. What is found is only a candidate: the daemon takes a job on
//! only while Slurm says it runs here (`daemon::slurm`).
//!
//! This module reads the tree and does the cgroup work that follows a scan; the discovery thread
//! (`feed`, beside this module) runs it, and the daemon (`daemon::slurm`) takes on what it finds.

use lockstep_cgroup::procfs::Live as _;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Instant;

use lockstep_cgroup::procfs::{self, ProcessRef};
use lockstep_cgroup::{self as cgroup, Bounds, Knobs, Version, JOB_TREE};
use lockstep_core::cpulist::CpuList;
use lockstep_core::job::SlurmJobId;

/// The most task directories of one step looked at per scan (v2, where a step's `user` directory is the job's
/// user's, who may fill it with cgroups of their own); every directory above it is Slurm's (root's), and as many
/// as the jobs and steps Slurm runs.
pub const ENTRIES: usize = 256;

/// What slurmctld said of a node's jobs: those it runs there (running, configuring, suspended), each with its
/// row if it has one, as asked at `asked`.
#[derive(Clone, Debug)]
pub struct Answer {
    /// When slurmctld was asked.
    pub asked: Instant,
    /// The jobs it runs on this node.
    pub jobs: Vec<lockstep_slurm::Listed>,
}

/// How long a job's directories may stay after Slurm stopped running it (a slurmstepd cleaning up, its last
/// processes exiting) before they are said to be left behind.
pub const LEFT_BEHIND: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a job's directories may be there before its prolog announces it: Slurm may make them first.
pub const ASK_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// What Slurm said of which of its jobs run on this node.
#[derive(Debug, Default)]
pub struct Word {
    /// When slurmctld was last asked, and the jobs its answer listed; `None` until it first answered.
    pub last: Option<(Instant, HashSet<SlurmJobId>)>,
    /// Jobs announced by their prolog since this agent started, and when.
    pub announced: HashMap<SlurmJobId, Instant>,
    /// Jobs whose directories were found while Slurm did not run them, and since when.
    pub unlisted: HashMap<SlurmJobId, Instant>,
    /// Jobs whose directories were said to be left behind, in the log.
    pub phantoms: HashSet<SlurmJobId>,
    /// Jobs with more task directories in a step than were looked at, already said in the log.
    pub partial: HashSet<SlurmJobId>,
    /// Jobs whose processes were all seen stopped, since when (and not seen running since).
    pub stopped: HashMap<SlurmJobId, Instant>,
    /// When slurmctld was last asked whether a stopped job is halted.
    pub halt_asked: HashMap<SlurmJobId, Instant>,
    /// Jobs taken as halted: seen stopped for [`HALT_AFTER`], and slurmctld said they are suspended or stopped.
    pub halted: HashSet<SlurmJobId>,
}

/// How long a job's processes must be seen stopped, and none running, before slurmctld is asked whether Slurm
/// halted it (a user can stop their own processes: only Slurm's word gives its slots away).
pub const HALT_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// How soon slurmctld is asked again about a job seen stopped that it did not say halted: what a user who stops
/// their own processes can make the agent ask.
pub const HALT_ASK_AGAIN: std::time::Duration = std::time::Duration::from_secs(30);

/// The most jobs slurmctld is asked about per scan.
const HALT_ASKS: usize = 4;

impl Word {
    /// Whether Slurm says job `id` runs on this node: its prolog announced it after slurmctld was last asked, or
    /// slurmctld's last answer lists it.
    pub fn runs(&self, id: SlurmJobId) -> bool {
        let asked = self.last.as_ref().map(|(t, _)| *t);
        let announced = self.announced.get(&id).is_some_and(|&at| asked.is_none_or(|a| at >= a));
        announced || self.last.as_ref().is_some_and(|(_, jobs)| jobs.contains(&id))
    }

    /// Notes that job `id`'s directories were found at `now` while Slurm does not run it; whether they are left
    /// behind: slurmctld was asked at least [`LEFT_BEHIND`] after they were first found so, and did not list it.
    /// (A job whose directories appear between two answers is listed by the next; one that just ended has its
    /// directories removed by Slurm within moments.)
    pub fn left_behind(&mut self, id: SlurmJobId, now: Instant) -> bool {
        let since = *self.unlisted.entry(id).or_insert(now);
        self.last.as_ref().is_some_and(|(asked, _)| *asked >= since + LEFT_BEHIND)
    }

    /// Whether slurmctld is to be asked about job `id`, found at `now` while Slurm does not run it (see
    /// [`Word::left_behind`]): it was never asked, or the job's directories have been there [`ASK_GRACE`] without
    /// its prolog announcing it, and they are not said to be left behind yet.
    pub fn undecided(&self, id: SlurmJobId, now: Instant) -> bool {
        let since = self.unlisted.get(&id).copied().unwrap_or(now);
        !self.phantoms.contains(&id) && (self.last.is_none() || now.duration_since(since) >= ASK_GRACE)
    }

    /// Forgets what was noted of job `id`'s directories while Slurm did not run it: it runs (again).
    pub fn listed(&mut self, id: SlurmJobId) {
        self.unlisted.remove(&id);
        self.phantoms.remove(&id);
    }

    /// Keeps only what concerns the jobs whose directories are there still, and takes what their processes' states
    /// said at `now` of which are halted.
    pub fn retain_found(&mut self, found: &[Found], now: Instant) {
        let there = |id: &SlurmJobId| found.iter().any(|f| f.id == *id);
        self.unlisted.retain(|id, _| there(id));
        self.phantoms.retain(there);
        self.partial.retain(there);
        self.stopped.retain(|id, _| there(id));
        self.halt_asked.retain(|id, _| there(id));
        self.halted.retain(there);
        for f in found {
            match f.stopped {
                Some(true) => {
                    self.stopped.entry(f.id).or_insert(now);
                }
                Some(false) => {
                    self.stopped.remove(&f.id);
                    self.halted.remove(&f.id);
                }
                None => {}
            }
        }
    }

    /// The jobs to ask slurmctld about at `now`: seen stopped for [`HALT_AFTER`], not halted yet, and not asked
    /// within [`HALT_ASK_AGAIN`]; at most [`HALT_ASKS`], each noted as asked.
    pub fn halts_to_ask(&mut self, now: Instant) -> Vec<SlurmJobId> {
        let mut due: Vec<SlurmJobId> = self
            .stopped
            .iter()
            .filter(|(id, since)| now.duration_since(**since) >= HALT_AFTER && !self.halted.contains(id))
            .filter(|(id, _)| self.halt_asked.get(id).is_none_or(|t| now.duration_since(*t) >= HALT_ASK_AGAIN))
            .map(|(id, _)| *id)
            .collect();
        due.sort_unstable();
        due.truncate(HALT_ASKS);
        for id in &due {
            self.halt_asked.insert(*id, now);
        }
        due
    }

    /// Takes slurmctld's word on whether job `id` is halted: halted, and still seen stopped, it is.
    pub fn slurm_halted(&mut self, id: SlurmJobId, halted: bool) {
        if halted && self.stopped.contains_key(&id) {
            self.halted.insert(id);
        }
    }
}

/// How far the agent walks a Slurm job's cgroup tree (from its `job_<id>` directories on v1, its steps' `user`
/// directories on v2): one level, the steps (v1) or tasks (v2), where Slurm puts the job's processes. The
/// directories below are the user's own making (a v1 step's freezer directory is theirs): never walked.
pub const STEPS: Bounds = Bounds { depth: 1, cgroups: 1 + ENTRIES, procs: JOB_TREE.procs };

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
    /// v2: the steps' `user` directories, which Slurm freezes to suspend a step (v1: none).
    pub users: Vec<PathBuf>,
    /// The layout it was found in.
    pub version: Version,
    /// The PUs it may run on, once [`Found::measure`]d (its cpusets, else its processes' affinity, else every
    /// online PU).
    pub pus: CpuList,
    /// Whether a step held more than [`ENTRIES`] task directories, so that some were not looked at.
    pub partial: bool,
    /// What the states of its processes said of whether it is halted, once [`Found::measure`]d: `Some(true)`
    /// when every one of them (zombies aside) was stopped, `Some(false)` when one ran or could, `None` when
    /// they said nothing (none, or the job was frozen: a frozen process looks neither stopped nor running).
    pub stopped: Option<bool>,
}

impl Found {
    /// The cgroups Slurm puts the job's processes in, and no other: v1, each `step_*` directory right below a
    /// `job_<id>` directory (in every hierarchy); v2, each step's `user` directory and the `task_*` directories
    /// right in it. Never deeper, where the user's own cgroups are.
    fn leaves(&self, partial: &mut bool) -> Vec<PathBuf> {
        match self.version {
            Version::V1 => self.job_dirs.iter().flat_map(|d| children(d, "step_")).collect(),
            Version::V2 => self
                .users
                .iter()
                .flat_map(|user| {
                    let tasks = users_children(user, "task_", partial);
                    std::iter::once(user.clone()).chain(tasks)
                })
                .collect(),
        }
    }

    /// The processes of the job's steps, where Slurm puts them (see [`Found::leaves`]); `partial` is set when a
    /// step held more than [`ENTRIES`] task directories.
    pub fn processes(&self, partial: &mut bool) -> Vec<i32> {
        let mut pids: Vec<i32> =
            self.leaves(partial).iter().flat_map(|d| cgroup::read_procs(d).unwrap_or_default()).collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Fills in what is learnt by reading the job's cgroups rather than their names: the PUs it may run on (its
    /// cpusets, else the affinity of the processes in its groups' first directories and one level below, where
    /// Slurm puts them: on v1 that includes the job's slurmstepd, whose affinity is the job's allocation, as
    /// before these walks were bounded) and, where the layout does not say it (v2), its owner (that of its first
    /// task: a step's tasks are the user's). Done by the discovery thread, never the daemon's loop.
    pub fn measure(&mut self) {
        let cpusets: Vec<CpuList> = self.groups.iter().filter_map(|g| Knobs::find(g).pus()).collect();
        let lists: Vec<CpuList> = if cpusets.is_empty() {
            let firsts: Vec<&PathBuf> = self.groups.iter().filter_map(|g| g.first()).collect();
            let mut pids = cgroup::procs_within(&firsts, STEPS).procs;
            pids.sort_unstable();
            pids.dedup();
            pids.iter().filter_map(|&p| CpuList::parse(&procfs::cpus_allowed(p)?).ok()).collect()
        } else {
            cpusets
        };
        self.pus = if lists.is_empty() { CpuList::online() } else { lists.iter().flat_map(CpuList::iter).collect() };
        // Listed once for both readings below.
        let mut partial = self.partial;
        let pids = self.processes(&mut partial);
        self.partial = partial;
        if self.uid.is_none() {
            self.uid = pids.iter().find_map(|&p| procfs::owner(p));
        }
        self.stopped = self.stopped(&pids);
    }

    /// Whether the job looks halted: a step of it frozen by Slurm (v1: frozen by itself, `freezer.self_freezing`,
    /// lockstep freezing whole jobs above the steps; v2: its `user` directory's `cgroup.freeze` set, a file only
    /// root writes and lockstep never does), or every process of its steps stopped (`T`), read while none of its
    /// groups is asked to be frozen, before and after (a frozen process looks neither stopped nor running; asked,
    /// not whether it is: see [`cgroup::knobs::freezing`]); `pids` are its
    /// processes ([`Found::processes`]). The reading stops at the first process that runs or could (`R`, `S`,
    /// `I`); one in `D` or a zombie says nothing. A user can make their job look halted: slurmctld decides
    /// ([`Word::halts_to_ask`]).
    fn stopped(&self, pids: &[i32]) -> Option<bool> {
        let slurm_froze = match self.version {
            Version::V1 => self.job_dirs.first().is_some_and(|d| {
                children(d, "step_")
                    .iter()
                    .any(|s| fs::read_to_string(s.join("freezer.self_freezing")).is_ok_and(|v| v.trim() == "1"))
            }),
            Version::V2 => {
                self.users.iter().any(|u| fs::read_to_string(u.join("cgroup.freeze")).is_ok_and(|v| v.trim() == "1"))
            }
        };
        if slurm_froze {
            return Some(true);
        }
        let frozen = || {
            self.groups
                .iter()
                .any(|g| Knobs::find(g).freeze.is_some_and(|f| cgroup::knobs::freezing(&f).unwrap_or(true)))
        };
        if frozen() {
            return None;
        }
        let mut stopped = false;
        for &pid in pids {
            match procfs::state(pid) {
                Some('T' | 't') => stopped = true,
                Some('R' | 'S' | 'I' | 'W' | 'P') => return (!frozen()).then_some(false),
                _ => {}
            }
        }
        (stopped && !frozen()).then_some(true)
    }
}

/// The directories right in `dir` (one of Slurm's, root's) named `<prefix>…`.
fn children(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with(prefix)))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// The directories right in `dir`, a directory the job's user may fill, named `<prefix>…`, among its first
/// [`ENTRIES`] directories (`partial` set when there were more; its files are not counted).
fn users_children(dir: &Path, prefix: &str, partial: &mut bool) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
    let mut out = Vec::new();
    let dirs = entries.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir()));
    for (i, e) in dirs.enumerate() {
        if i == ENTRIES {
            *partial = true;
            break;
        }
        if e.file_name().to_str().is_some_and(|n| n.starts_with(prefix)) {
            out.push(e.path());
        }
    }
    out.sort();
    out
}

/// `(number, path)` of the directories in `dir` (one of Slurm's, root's) named `<prefix><number>`.
pub fn numbered<N: FromStr + Ord>(dir: &Path, prefix: &str) -> Vec<(N, PathBuf)> {
    let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<(N, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_str()?.strip_prefix(prefix)?.parse().ok()?;
            e.file_type().ok()?.is_dir().then(|| (n, e.path()))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Every Slurm job of node `node` under the hierarchy `roots` (v1: one per controller; v2: the unified one).
pub fn scan(version: Version, roots: &[PathBuf], node: &lockstep_core::ident::NodeName) -> Vec<Found> {
    match version {
        Version::V1 => scan_v1(roots, node),
        Version::V2 => roots.first().map(|r| scan_v2(r, node)).unwrap_or_default(),
    }
}

/// The first of `names` that exists under any of `roots`: a node's own directory before the single-slurmd one.
fn base<'a>(roots: &[PathBuf], names: &'a [String]) -> Option<&'a str> {
    names.iter().find(|n| roots.iter().any(|r| r.join(n).is_dir())).map(String::as_str)
}

fn scan_v1(roots: &[PathBuf], node: &lockstep_core::ident::NodeName) -> Vec<Found> {
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
                    users: Vec::new(),
                    version: Version::V1,
                    pus: CpuList::new(),
                    partial: false,
                    stopped: None,
                });
                if !found.job_dirs.contains(&dir) {
                    found.job_dirs.push(dir);
                }
            }
        }
    }
    jobs.into_values()
        .map(|mut f| {
            // The freezer's first: Slurm puts tasks right in its step directories (other controllers may have a
            // `task_*` level below), and what looks at a job's first directory only (its counters, its progress)
            // walks one level.
            f.job_dirs.sort_by_key(|d| !d.join("freezer.state").exists());
            f.groups = vec![f.job_dirs.clone()];
            f
        })
        .collect()
}

fn scan_v2(root: &Path, node: &lockstep_core::ident::NodeName) -> Vec<Found> {
    let names = [format!("system.slice/{node}_slurmstepd.scope"), "system.slice/slurmstepd.scope".to_string()];
    let Some(base) = base(&[root.to_path_buf()], &names) else { return Vec::new() };
    numbered(&root.join(base), "job_")
        .into_iter()
        .filter_map(|(id, dir)| {
            let users: Vec<PathBuf> =
                children(&dir, "step_").into_iter().map(|step| step.join("user")).filter(|u| u.is_dir()).collect();
            let mut partial = false;
            let groups: Vec<Vec<PathBuf>> =
                users.iter().flat_map(|u| users_children(u, "task_", &mut partial)).map(|task| vec![task]).collect();
            (!groups.is_empty()).then(|| Found {
                id,
                uid: None,
                job_dirs: vec![dir],
                groups,
                users,
                version: Version::V2,
                pus: CpuList::new(),
                partial,
                stopped: None,
            })
        })
        .collect()
}

/// Moves the processes of a Slurm job's steps (where Slurm puts them: [`Found::processes`]) that are not yet in
/// `weight_dir` into it; a process moved there stays in Slurm's own cgroups of every other controller.
///
/// A process directly in `job_<id>` is Slurm's, never the job's: a slurmstepd whose step ended moves itself up
/// there to remove the step's cgroups. Moved into the weight cgroup, it kept that cgroup and the job's own alive
/// past the job's end.
fn gather(found: &Found, weight_dir: &Path) {
    let there = cgroup::read_procs(weight_dir).unwrap_or_default();
    let procs = weight_dir.join("cgroup.procs");
    let mut partial = false;
    for pid in found.processes(&mut partial) {
        // Named with its start time as soon as it is listed: a process that exits meanwhile is left out, and its
        // PID, if another process gets it, is not moved.
        if let Some(process) = ProcessRef::of(pid).filter(|_| !there.contains(&pid)) {
            let _ = process.move_to(&procs);
        }
    }
}

/// The cgroup work a scan leaves for the discovery thread, not the daemon's loop, to do: making a cgroup, moving
/// processes into one and removing one wait on the kernel's cgroup locks (tens of milliseconds when the machine is
/// busy), and a slot switch must never wait behind them; and what is said of Slurm's tree that takes reading it.
#[derive(Debug, Default)]
pub struct Chores {
    /// Weight cgroups to make, each for the Slurm job that is taken on once it is made (the next scan says how
    /// that went).
    pub make: Vec<(SlurmJobId, PathBuf)>,
    /// Each Slurm job and its weight cgroup, to gather its new processes into.
    pub gather: Vec<(Found, PathBuf)>,
    /// Weight cgroups of jobs no longer managed, to remove once empty.
    pub sweep: Vec<PathBuf>,
    /// Jobs whose cgroups are there though Slurm does not run them here (each said once): to say in the log,
    /// with who owns the processes left in them.
    pub phantoms: Vec<Found>,
    /// Whether a job was found that neither its prolog announced nor slurmctld's last answer lists, and that is not
    /// yet said to be left behind: slurmctld is to be asked.
    pub ask: bool,
    /// Jobs seen stopped that slurmctld is to be asked about: halted or not.
    pub halts: Vec<SlurmJobId>,
}

impl Chores {
    /// Does the work; returns, for each weight cgroup it was to make, whether it was made or why not.
    pub fn run(self) -> Vec<(SlurmJobId, Result<(), String>)> {
        let made =
            self.make.iter().map(|(id, dir)| (*id, fs::create_dir_all(dir).map_err(|e| e.to_string()))).collect();
        for (found, weight_dir) in &self.gather {
            gather(found, weight_dir);
        }
        // A job's last processes may still be exiting when its epilog runs: its cgroup goes once they have.
        for dir in self.sweep {
            if cgroup::read_procs(&dir).is_ok_and(|p| p.is_empty()) {
                let _ = cgroup::remove_dir(&dir);
            }
        }
        // Said once per job: the whole tree is walked (within the bounds of any job's), the user's own cgroups
        // included, to name whose processes keep it.
        for found in &self.phantoms {
            let mut walk = cgroup::procs_within(&found.job_dirs, JOB_TREE);
            // The same process is in the job's directory of every v1 hierarchy.
            walk.procs.sort_unstable();
            walk.procs.dedup();
            let partial = found.partial || !walk.cuts.is_empty();
            let mut owners: BTreeMap<u32, usize> = BTreeMap::new();
            for pid in &walk.procs {
                if let Some(uid) = procfs::owner(*pid) {
                    *owners.entry(uid).or_default() += 1;
                }
            }
            let said: Vec<String> = owners.iter().map(|(uid, n)| format!("{n} of uid {uid}")).collect();
            let left = if said.is_empty() { "none".to_string() } else { said.join(", ") };
            let more = if partial { "; its tree holds more than was looked at" } else { "" };
            log::warn!(
                "Slurm job {}: its cgroups remain ({}) but slurmctld has not run it on this node for {} s: left \
                 alone, never co-scheduled (processes: {left}{more})",
                found.id,
                found.job_dirs.first().map_or_else(String::new, |d| d.display().to_string()),
                LEFT_BEHIND.as_secs()
            );
        }
        made
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
        let found = scan(Version::V1, &[freezer.clone(), cpuset.clone()], &"n1".parse().unwrap());
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].id, SlurmJobId(7));
        assert_eq!(found[0].uid, Some(0));
        let both = vec![freezer.join("slurm_n1/uid_0/job_7"), cpuset.join("slurm_n1/uid_0/job_7")];
        assert_eq!(found[0].job_dirs, both);
        assert_eq!(found[0].groups, vec![both]);
        assert_eq!((found[1].id, found[1].uid), (SlurmJobId(9), Some(1000)));
        assert!(scan(Version::V1, std::slice::from_ref(&freezer), &"n3".parse().unwrap()).is_empty());
    }

    #[test]
    fn v1_single_slurmd_layout() {
        let t = lockstep_scratch::tempdir().unwrap();
        mkdirs(t.path(), &["slurm/uid_5/job_3/step_0"]);
        let found = scan(Version::V1, &[t.path().to_path_buf()], &"anything".parse().unwrap());
        assert_eq!((found[0].id, found[0].uid), (SlurmJobId(3), Some(5)));
    }

    #[test]
    fn v2_groups_are_the_steps_task_cgroups() {
        let t = lockstep_scratch::tempdir().unwrap();
        let scope = "system.slice/n1_slurmstepd.scope";
        mkdirs(
            t.path(),
            &[
                &format!("{scope}/job_4/step_0/slurm"),
                &format!("{scope}/job_4/step_0/user/task_0"),
                &format!("{scope}/job_4/step_batch/user/task_special"),
                &format!("{scope}/job_5/step_0/slurm"),
                &format!("{scope}/job_5/step_1/user"),
                "system.slice/slurmstepd.scope/job_6/step_0/user/task_0",
            ],
        );
        let found = scan(Version::V2, &[t.path().to_path_buf()], &"n1".parse().unwrap());
        assert_eq!(found.len(), 1, "job 5 has no task cgroup yet; job 6 belongs to the single-slurmd scope");
        let job = t.path().join(scope).join("job_4");
        assert_eq!(found[0].job_dirs, vec![job.clone()]);
        let (task_0, special) = (job.join("step_0/user/task_0"), job.join("step_batch/user/task_special"));
        assert_eq!(found[0].groups, vec![vec![task_0], vec![special]]);
        assert_eq!(found[0].users, vec![job.join("step_0/user"), job.join("step_batch/user")]);
        assert_eq!(scan(Version::V2, &[t.path().to_path_buf()], &"n9".parse().unwrap())[0].id, SlurmJobId(6));
    }

    /// A step's processes are read where Slurm puts them; the cgroups a user makes below their step are never
    /// read (v1), and a v2 step's task directories past [`ENTRIES`] are not looked at, the scan saying so.
    #[test]
    fn processes_are_read_only_where_slurm_puts_them_and_within_the_bound() {
        let t = lockstep_scratch::tempdir().unwrap();
        let job = "slurm_n1/uid_65534/job_3";
        mkdirs(t.path(), &[&format!("{job}/step_batch/hidden/deeper"), &format!("{job}/step_0")]);
        let write = |rel: &str, text: &str| fs::write(t.path().join(rel).join("cgroup.procs"), text).unwrap();
        write(job, "1\n");
        write(&format!("{job}/step_batch"), "10\n11\n");
        write(&format!("{job}/step_0"), "12\n10\n");
        write(&format!("{job}/step_batch/hidden"), "98\n");
        write(&format!("{job}/step_batch/hidden/deeper"), "99\n");
        let found = scan(Version::V1, &[t.path().to_path_buf()], &"n1".parse().unwrap()).remove(0);
        let mut partial = false;
        assert_eq!(found.processes(&mut partial), vec![10, 11, 12], "slurmstepd in job_3 and the hidden ones left");
        assert!(!partial && !found.partial);
        let user = "system.slice/n1_slurmstepd.scope/job_4/step_0/user";
        mkdirs(t.path(), &[&format!("{user}/task_0")]);
        write(&format!("{user}/task_0"), "20\n");
        for i in 0..ENTRIES {
            fs::create_dir(t.path().join(user).join(format!("mine_{i}"))).unwrap();
            fs::write(t.path().join(user).join(format!("file_{i}")), "").unwrap();
        }
        let found = scan(Version::V2, &[t.path().to_path_buf()], &"n1".parse().unwrap()).remove(0);
        let mut partial = false;
        let pids = found.processes(&mut partial);
        assert!(partial, "{} directories in the step's user directory were all looked at", ENTRIES + 1);
        assert!(pids.len() <= 1, "{pids:?}");
    }

    /// A job runs while its prolog announced it after slurmctld was last asked, or slurmctld's last answer lists
    /// it; nothing else (a directory, a registration from before a restart) makes it run.
    #[test]
    fn slurms_word_is_the_prolog_since_the_last_answer_or_that_answer() {
        let (a, b) = (SlurmJobId(1), SlurmJobId(2));
        let t0 = Instant::now();
        let (t1, t2) = (t0 + std::time::Duration::from_millis(1), t0 + std::time::Duration::from_millis(2));
        let mut word = Word::default();
        assert!(!word.runs(a), "nothing said yet");
        word.announced.insert(a, t0);
        assert!(word.runs(a), "announced, slurmctld not yet asked");
        word.last = Some((t1, HashSet::from([b])));
        assert!(!word.runs(a), "slurmctld asked after the announcement and without it");
        assert!(word.runs(b));
        word.announced.insert(a, t2);
        assert!(word.runs(a), "announced after slurmctld was asked");
    }

    /// Directories of a job Slurm does not run are left behind only once slurmctld, asked [`LEFT_BEHIND`] after
    /// they were first found so, still does not list it; a job listed meanwhile starts over.
    #[test]
    fn a_job_is_left_behind_only_past_the_grace_and_listing_starts_it_over() {
        let id = SlurmJobId(3);
        let t0 = Instant::now();
        let mut word = Word::default();
        assert!(!word.left_behind(id, t0), "slurmctld never answered");
        word.last = Some((t0 + LEFT_BEHIND / 2, HashSet::new()));
        assert!(!word.left_behind(id, t0 + LEFT_BEHIND), "asked within the grace");
        word.last = Some((t0 + LEFT_BEHIND, HashSet::new()));
        assert!(word.left_behind(id, t0 + LEFT_BEHIND * 2), "asked past the grace, still not listed");
        word.listed(id);
        assert!(!word.left_behind(id, t0 + LEFT_BEHIND * 2), "found so anew after being listed");
    }

    /// slurmctld is asked about a job nobody announced at once while it never answered, else once its directories
    /// have been there [`ASK_GRACE`] (its prolog may come after Slurm made them), and never once they are left
    /// behind.
    #[test]
    fn slurmctld_is_asked_about_an_unannounced_job_past_the_grace_until_it_is_left_behind() {
        let id = SlurmJobId(4);
        let t0 = Instant::now();
        let mut word = Word::default();
        word.left_behind(id, t0);
        assert!(word.undecided(id, t0), "never asked: at once");
        word.last = Some((t0, HashSet::new()));
        assert!(!word.undecided(id, t0 + ASK_GRACE / 2), "within the grace");
        assert!(word.undecided(id, t0 + ASK_GRACE), "past the grace");
        word.phantoms.insert(id);
        assert!(!word.undecided(id, t0 + LEFT_BEHIND * 2), "said to be left behind");
    }

    /// A job seen stopped for [`HALT_AFTER`] (a look while it was frozen says nothing) is asked about, at most
    /// every [`HALT_ASK_AGAIN`]; it is halted once slurmctld says so, and back at the first process seen running.
    #[test]
    fn a_job_seen_stopped_is_halted_only_on_slurmctld_s_word_and_back_at_the_first_running_process() {
        let mut found = Found {
            id: SlurmJobId(5),
            uid: None,
            job_dirs: Vec::new(),
            groups: Vec::new(),
            users: Vec::new(),
            version: Version::V1,
            pus: CpuList::new(),
            partial: false,
            stopped: Some(true),
        };
        let id = found.id;
        let t0 = Instant::now();
        let mut word = Word::default();
        let mut look = |word: &mut Word, stopped: Option<bool>, at: std::time::Duration| {
            found.stopped = stopped;
            word.retain_found(std::slice::from_ref(&found), t0 + at);
            word.halts_to_ask(t0 + at)
        };
        assert!(look(&mut word, Some(true), std::time::Duration::ZERO).is_empty(), "stopped at one look");
        assert!(look(&mut word, None, HALT_AFTER / 2).is_empty(), "frozen: says nothing");
        assert_eq!(look(&mut word, Some(true), HALT_AFTER), [id], "stopped for HALT_AFTER: ask slurmctld");
        word.slurm_halted(id, false);
        assert!(!word.halted.contains(&id), "slurmctld says it runs: the user stopped it");
        assert!(look(&mut word, Some(true), HALT_AFTER * 2).is_empty(), "asked not long ago");
        assert_eq!(look(&mut word, Some(true), HALT_ASK_AGAIN + HALT_AFTER), [id], "asked again later");
        word.slurm_halted(id, true);
        assert!(word.halted.contains(&id), "slurmctld says it is suspended");
        assert!(look(&mut word, None, HALT_ASK_AGAIN * 2).is_empty(), "frozen: still halted, nothing to ask");
        assert!(word.halted.contains(&id));
        look(&mut word, Some(false), HALT_ASK_AGAIN * 2);
        assert!(!word.halted.contains(&id), "one process running: back at once");
    }

    /// Slurm suspends a v2 step by setting its `user` directory's `cgroup.freeze`, which lockstep never writes (it
    /// freezes the task directories below): read as the job halted, whatever its processes do (a task may ignore
    /// SIGTSTP); cleared by Slurm's resume, it says nothing.
    #[test]
    fn a_v2_step_slurm_froze_reads_as_halted() {
        let t = lockstep_scratch::tempdir().unwrap();
        let user = t.path().join("system.slice/n1_slurmstepd.scope/job_4/step_0/user");
        mkdirs(t.path(), &["system.slice/n1_slurmstepd.scope/job_4/step_0/user/task_0"]);
        let look = |freeze: &str| {
            fs::write(user.join("cgroup.freeze"), freeze).unwrap();
            let mut found = scan(Version::V2, &[t.path().to_path_buf()], &"n1".parse().unwrap()).remove(0);
            found.measure();
            found.stopped
        };
        assert_eq!(look("1\n"), Some(true), "Slurm froze the step");
        assert_eq!(look("0\n"), None, "thawed, and no process says anything");
    }
}
