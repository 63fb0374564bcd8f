//! Turning an adopt or register request into a managed job: which cgroups, which PUs.
//!
//! An adoption comes in two steps, so that the daemon's loop never waits on what a user can make slow. The
//! control door's thread [`resolve`]s it first: podman asked for its containers' processes (a subprocess),
//! Charliecloud's processes checked (their environments), the cgroups named found in every hierarchy with their
//! first process's owner and the PUs they may run on (a walk of a tree its owner may have made deep or wide), the
//! processes named read from `/proc`. The loop then [`commit`]s it: what other jobs and the agent hold is claimed
//! (each check one small read of `/proc/PID/cgroup`, never a walk of another job's tree), each process checked to
//! still be the one resolved (its start time), and moved.

use lockstep_cgroup::procfs::Live as _;
use std::path::{Path, PathBuf};

use super::managed::{Group, Managed, Origin};
use lockstep_cgroup::procfs::{self, ProcessRef};
use lockstep_cgroup::{Backend, CreateError};
use lockstep_core::cosched::Desired;
use lockstep_core::cpulist::CpuList;
use lockstep_core::error::UsageError;
use lockstep_core::ident::{JobKey, JobName};

/// What an adoption must not take: the processes the agent stands on (init, the agent, its watchdog) and the
/// cgroups and processes other jobs hold. A cgroup or a process belongs to one job at most.
#[derive(Debug, Default)]
pub struct Claims {
    /// Processes no job may hold, with what each is.
    pub protected: Vec<(i32, &'static str)>,
    /// The managed jobs' cgroup directories, by job.
    pub taken: Vec<(JobKey, Vec<PathBuf>)>,
    /// The hierarchies' roots (to tell where a process is from its `/proc/PID/cgroup`).
    pub roots: Vec<PathBuf>,
}

impl Claims {
    /// Refuses `pid` when it is (a thread of) a protected process or in another job's cgroups (or when its
    /// cgroups cannot be read: a claim is never given up on a failed read); else the cgroups it is in now.
    fn check_pid(&self, pid: i32) -> anyhow::Result<Vec<(String, String)>> {
        let process = thread_group(pid).unwrap_or(pid);
        if let Some((_, what)) = self.protected.iter().find(|(p, _)| *p == process) {
            return Err(UsageError::new(format!("PID {pid} is {what}: it cannot be part of a job")).into());
        }
        let cgroups = procfs::cgroups(process).ok_or_else(|| ended(pid))?;
        for (job, dirs) in &self.taken {
            if dirs.iter().any(|d| self.is_in(&cgroups, d)) {
                return Err(UsageError::new(format!("PID {pid} belongs to job {job:?} already")).into());
            }
        }
        Ok(cgroups)
    }

    /// Whether a process whose `/proc/PID/cgroup` says `cgroups` is in cgroup `dir` or below it.
    fn is_in(&self, cgroups: &[(String, String)], dir: &Path) -> bool {
        let Some(root) = self.roots.iter().filter(|r| dir.starts_with(r)).max_by_key(|r| r.as_os_str().len()) else {
            return false;
        };
        original_path(root, cgroups).is_some_and(|p| root.join(p.trim_start_matches('/')).starts_with(dir))
    }

    /// Refuses `dir` when it is, holds or lies within another job's cgroup, or holds a protected process.
    fn check_dir(&self, dir: &Path) -> anyhow::Result<()> {
        let overlaps = |d: &PathBuf| d.starts_with(dir) || dir.starts_with(d);
        if let Some((job, _)) = self.taken.iter().find(|(_, dirs)| dirs.iter().any(overlaps)) {
            return Err(UsageError::new(format!("cgroup {} overlaps the cgroups of job {job:?}", dir.display())).into());
        }
        // Where each protected process is: a read of its `/proc/PID/cgroup`, however big the tree below `dir`. One
        // that cannot be read is taken to be inside (a claim is never given up on a failed read).
        let inside = |pid: i32| procfs::cgroups(pid).is_none_or(|c| self.is_in(&c, dir));
        if let Some((pid, what)) = self.protected.iter().find(|(p, _)| inside(*p)) {
            return Err(UsageError::new(format!(
                "cgroup {} holds {what} (PID {pid}): it cannot be part of a job",
                dir.display()
            ))
            .into());
        }
        Ok(())
    }
}

/// The process (thread group) thread `tid` belongs to.
fn thread_group(tid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("Tgid:")?.trim().parse().ok())
}

/// What an adoption takes on, resolved off the daemon's loop (see the module doc).
#[derive(Debug)]
pub enum Resolved {
    /// Existing cgroups (given by path, or those of podman containers): each group's directories, the owner of
    /// their first process, the PUs they may run on.
    Cgroups {
        /// Each group's directories, one per hierarchy.
        groups: Vec<Vec<PathBuf>>,
        /// Whoever owns the first process found in them.
        owner: Option<u32>,
        /// Their cpusets, else their processes' affinity, else every online PU.
        pus: CpuList,
    },
    /// Processes to move into a cgroup of the agent's, each the process named (PID and start time).
    Pids(Vec<ProcessRef>),
}

/// Resolves an adoption of exactly one of `cgroups`, `pids` or `containers` on this machine's cgroups: the slow
/// part, done by the caller's thread before the daemon sees the request. A usage error when what is named is
/// not there.
pub fn resolve(cgroups: &[PathBuf], pids: &[ProcessRef], containers: &[String]) -> anyhow::Result<Resolved> {
    let backend = lockstep_cgroup::detect()?;
    match (cgroups.is_empty(), pids.is_empty(), containers.is_empty()) {
        (false, true, true) => resolve_cgroups(backend.as_ref(), cgroups),
        (true, false, true) => resolve_pids(pids),
        (true, true, false) => resolve_containers(backend.as_ref(), containers),
        _ => Err(UsageError::new("adopt needs exactly one of --cgroup, --pid, --container").into()),
    }
}

/// Takes on the job `resolved` names, as `name`, within what other jobs and the agent hold (`claims`): the
/// daemon's step, on its loop. Nothing here waits on a user (see the module doc).
pub fn commit(
    backend: &dyn Backend,
    claims: &Claims,
    name: &JobName,
    resolved: Resolved,
    row: Option<u32>,
) -> anyhow::Result<Managed> {
    match resolved {
        Resolved::Cgroups { groups, owner, pus } => {
            for dir in groups.iter().flatten() {
                claims.check_dir(dir)?;
            }
            let groups: Vec<Group> = groups.into_iter().map(Group::new).collect();
            let mut job = managed_over(name.clone().into(), groups, row, Origin::Cgroup, pus);
            job.owner = owner.unwrap_or(0);
            Ok(job)
        }
        Resolved::Pids(processes) => from_pids(backend, claims, name, processes, row),
    }
}

/// Existing cgroup paths (absolute, or relative to the hierarchy roots), found in every hierarchy. Paths must
/// name cgroups below a hierarchy's root (no `..`, not the root itself).
fn resolve_cgroups(backend: &dyn Backend, paths: &[PathBuf]) -> anyhow::Result<Resolved> {
    let mut groups = Vec::new();
    for path in paths {
        let relative = relative_to_roots(backend, path);
        let plain =
            relative.components().all(|c| matches!(c, std::path::Component::Normal(_) | std::path::Component::RootDir));
        if !plain || relative.components().all(|c| matches!(c, std::path::Component::RootDir)) {
            return Err(UsageError::new(format!(
                "cgroup {} is not a cgroup below a hierarchy's root (expected a path like /slurm_node/uid_0/job_1/step_0)",
                path.display()
            ))
            .into());
        }
        check_not_lockstep_tree(path, &relative)?;
        let dirs = backend.existing(&relative);
        if dirs.is_empty() {
            return Err(UsageError::new(format!(
                "cgroup {} does not exist in any mounted hierarchy (expected a path like /slurm_node/uid_0/job_1/step_0)",
                path.display()
            ))
            .into());
        }
        groups.push(Group::new(dirs));
    }
    let firsts: Vec<PathBuf> = groups.iter().filter_map(|g| g.dirs.first().cloned()).collect();
    let (owner, pus) = (process_owner(&firsts), pus(&groups));
    Ok(Resolved::Cgroups { groups: groups.into_iter().map(|g| g.dirs).collect(), owner, pus })
}

/// Refuses the cgroup `asked` (`relative` to the hierarchies' roots) when it is lockstep's own tree (`lockstep/`
/// of every hierarchy, the parent of every job's cgroup that `lockstep run`, adoption by PID and Slurm discovery
/// make) or holds it, whether or not it exists yet: as one job, every job below would be frozen or weighted
/// together (under `gang`, all frozen at once).
fn check_not_lockstep_tree(asked: &Path, relative: &Path) -> Result<(), UsageError> {
    let relative = relative.strip_prefix("/").unwrap_or(relative);
    if !Path::new(lockstep_cgroup::PARENT).starts_with(relative) {
        return Ok(());
    }
    let what = if relative == Path::new(lockstep_cgroup::PARENT) { "it is" } else { "it holds" };
    Err(UsageError::new(format!(
        "cannot adopt cgroup {}: {what} lockstep's own tree /{}, the parent of every job's cgroup (expected the \
         cgroup of one job, e.g. /slurm_node/uid_0/job_1/step_0)",
        asked.display(),
        lockstep_cgroup::PARENT
    )))
}

/// The prefix of a Charliecloud container in `adopt`: `charliecloud:PID`, the process `ch-run` became.
const CHARLIECLOUD: &str = "charliecloud:";

/// Containers: podman containers by name or ID (the v1 freezer or v2 cgroup of each container's init process),
/// or Charliecloud containers as `charliecloud:PID` (processes, to be moved into a cgroup of the agent's, as
/// `from_pids` does: Charliecloud makes no cgroup of its own). One job is all of one kind.
fn resolve_containers(backend: &dyn Backend, ids: &[String]) -> anyhow::Result<Resolved> {
    let charliecloud = ids.iter().filter(|id| id.starts_with(CHARLIECLOUD)).count();
    if charliecloud == ids.len() {
        let mut processes = Vec::new();
        for id in ids {
            let pid = charliecloud_pid(id)?;
            processes.push(ProcessRef::of(pid).ok_or_else(|| ended(pid))?);
        }
        return resolve_pids(&processes);
    }
    if charliecloud > 0 {
        return Err(UsageError::new("a job's containers are all podman or all charliecloud:PID, not both").into());
    }
    let mut paths = Vec::new();
    for id in ids {
        if id.starts_with('-') || id.is_empty() {
            return Err(UsageError::new(format!("bad container {id:?} (expected a podman name or ID)")).into());
        }
        let out = lockstep_core::trust::command("podman")?.args(["inspect", "--format", "{{.State.Pid}}", id]).output();
        let pid: Option<i32> = out
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .filter(|&p| p > 0);
        let Some(pid) = pid else {
            return Err(UsageError::new(format!(
                "container {id:?} is not running under podman (podman inspect found no PID)"
            ))
            .into());
        };
        paths.push(PathBuf::from(
            process_cgroup(pid)
                .ok_or_else(|| UsageError::new(format!("cannot read the cgroup of container {id:?} (PID {pid})")))?,
        ));
    }
    resolve_cgroups(backend, &paths)
}

/// The PID of `charliecloud:PID`, checked to be a process ch-run started (its environment has `CH_RUNNING`).
fn charliecloud_pid(id: &str) -> Result<i32, UsageError> {
    let bad = || UsageError::new(format!("bad container {id:?} (expected charliecloud:PID, the PID ch-run became)"));
    let pid: i32 = id[CHARLIECLOUD.len()..].parse().map_err(|_| bad())?;
    if pid <= 0 {
        return Err(bad());
    }
    let env = procfs::environ(pid).ok_or_else(|| {
        UsageError::new(format!("PID {pid} does not exist (expected a running Charliecloud container)"))
    })?;
    if !env.iter().any(|v| v.starts_with(b"CH_RUNNING=")) {
        return Err(UsageError::new(format!("PID {pid} is not in a Charliecloud container (no CH_RUNNING)")));
    }
    Ok(pid)
}

/// Processes `named`, each still the process it was when named (its start time), and a process, not one thread
/// of one.
fn resolve_pids(named: &[ProcessRef]) -> anyhow::Result<Resolved> {
    for process in named {
        let pid = process.pid;
        let leader = thread_group(pid);
        if !process.alive() {
            return Err(ended(pid).into());
        }
        if let Some(leader) = leader.filter(|&l| l != pid) {
            return Err(UsageError::new(format!(
                "PID {pid} is a thread of process {leader} (expected process IDs: adopt --pid {leader})"
            ))
            .into());
        }
    }
    Ok(Resolved::Pids(named.to_vec()))
}

/// The usage error of a process named for adoption that is not (or no longer) there.
fn ended(pid: i32) -> UsageError {
    UsageError::new(format!("PID {pid} does not exist, or ended since it was named (expected running processes)"))
}

/// A job over resolved processes moved into a new cgroup `lockstep/<name>` of the agent's (freezer and cpu only
/// on v1), each still the process resolved. When a process cannot be moved, those moved already go back and the
/// new cgroup is removed: nothing changes.
fn from_pids(
    backend: &dyn Backend,
    claims: &Claims,
    name: &JobName,
    named: Vec<ProcessRef>,
    row: Option<u32>,
) -> anyhow::Result<Managed> {
    // Where each process is now, which release puts it back to: read before the process is checked to be still
    // the one named (the read could be of another that took its PID since, never after the check).
    let mut before = Vec::new();
    for process in named {
        let cgroups = claims.check_pid(process.pid)?;
        if !process.alive() {
            return Err(ended(process.pid).into());
        }
        before.push((process, cgroups));
    }
    let created = backend.create_control(name).map_err(|e| match e {
        CreateError::Exists(_) => {
            UsageError::new(format!("job name {name:?} is in use (cgroup lockstep/{name} exists)")).into()
        }
        e if e.is_usage() => anyhow::Error::from(UsageError::new(e.to_string())),
        e => anyhow::Error::from(e),
    })?;
    let roots = backend.roots();
    let mut moved = Vec::new();
    for (process, cgroups) in before {
        // Where the process was in each hierarchy the new cgroup spans, to move it back on release.
        let mut back = Vec::new();
        for dir in &created.dirs {
            let Some(root) = roots.iter().filter(|r| dir.starts_with(r)).max_by_key(|r| r.as_os_str().len()) else {
                continue;
            };
            if let Some(path) = original_path(root, &cgroups) {
                back.push(root.join(path.trim_start_matches('/')).join("cgroup.procs"));
            }
        }
        // Release must be able to put the process back: a cgroup the agent may not write (another user's, to an
        // agent without CAP_DAC_OVERRIDE, as the systemd unit runs it) is refused now, with nothing changed.
        if let Some((procs, e)) = back.iter().find_map(|p| writable(p).err().map(|e| (p, e))) {
            undo_moves(&moved, &created.dirs);
            let pid = process.pid;
            return Err(UsageError::new(format!(
                "cannot adopt PID {pid}: its cgroup's {} is not writable by the agent ({e}), so release could not \
                 put it back",
                procs.display()
            ))
            .into());
        }
        moved.push((process, back));
        for dir in &created.dirs {
            if let Err(e) = process.move_to(&dir.join("cgroup.procs")) {
                undo_moves(&moved, &created.dirs);
                let pid = process.pid;
                return Err(UsageError::new(format!("cannot move PID {pid} into {}: {e}", dir.display())).into());
            }
        }
    }
    // The processes' affinity, not the new cgroup's cpuset: lockstep sets none there, so on v2 it shows its
    // parent's (every PU, or what another job's placement left there), which says nothing of where they run.
    let group = Group::new(created.dirs.clone());
    let moved_pids: Vec<i32> = moved.iter().map(|(process, _)| process.pid).collect();
    let pus = affinity(&moved_pids).unwrap_or_else(|| pus(std::slice::from_ref(&group)));
    let mut job = managed_over(name.clone().into(), vec![group], row, Origin::Pids { moved, created }, pus);
    job.owner = process_owner(&job.groups[0].dirs).unwrap_or(0);
    Ok(job)
}

/// Whether the agent, with the capabilities it runs with, may write `procs` (a `cgroup.procs` file).
fn writable(procs: &Path) -> nix::Result<()> {
    use nix::fcntl::AtFlags;
    use nix::unistd::{faccessat, AccessFlags};
    faccessat(None, procs, AccessFlags::W_OK, AtFlags::AT_EACCESS)
}

/// Puts the processes of a failed adoption back where they were and removes the cgroup made for them.
fn undo_moves(moved: &[(ProcessRef, Vec<PathBuf>)], dirs: &[PathBuf]) {
    for (process, back) in moved {
        for procs in back {
            let _ = process.move_to(procs);
        }
    }
    for d in dirs {
        let _ = lockstep_cgroup::remove_dir(d);
    }
}

/// A job registered by `lockstep run` with its cgroup directories.
pub fn from_run(name: &JobName, dirs: Vec<PathBuf>, row: Option<u32>) -> Managed {
    managed(name.clone().into(), vec![Group::new(dirs)], row, Origin::Run)
}

/// A Slurm job found in Slurm's cgroups (see [`super::slurm`]) and measured there, owned by `owner` when the
/// prolog or Slurm's path says (else by root until a prolog does); `weight_dir` joins its first group.
pub fn from_slurm(
    found: super::slurm::Found,
    owner: Option<u32>,
    weight_dir: Option<PathBuf>,
    row: Option<u32>,
) -> Managed {
    let super::slurm::Found { id, job_dirs, mut groups, pus, .. } = found;
    if let (Some(w), Some(first)) = (&weight_dir, groups.first_mut()) {
        first.push(w.clone());
    }
    let origin = Origin::Slurm { id, dirs: job_dirs, weight_dir };
    let mut job = managed_over(JobKey::Slurm(id), groups.into_iter().map(Group::new).collect(), row, origin, pus);
    job.owner = owner.unwrap_or(0);
    job
}

/// Job `key` over `groups`, owned by whoever owns its first process (root when it has none yet).
fn managed(key: JobKey, groups: Vec<Group>, row: Option<u32>, origin: Origin) -> Managed {
    let dirs: Vec<PathBuf> = groups.iter().filter_map(|g| g.dirs.first().cloned()).collect();
    let pus = pus(&groups);
    let mut job = managed_over(key, groups, row, origin, pus);
    job.owner = process_owner(&dirs).unwrap_or(0);
    job
}

/// Job `key` over `groups` that may run on `pus`, owned by root until said otherwise.
fn managed_over(key: JobKey, groups: Vec<Group>, row: Option<u32>, origin: Origin, pus: CpuList) -> Managed {
    Managed {
        owner: 0,
        key,
        pus,
        groups,
        pinned: row,
        place: None,
        row: row.unwrap_or(0),
        round: 1,
        favoured: false,
        applied: Desired::default(),
        planned: Desired::default(),
        origin,
        switch_cost: None,
        said_slow: false,
        spent: crate::managed::Spent::default(),
        cost: crate::managed::Cost::default(),
        left: None,
        halted: false,
        frozen_time: (std::time::Duration::ZERO, None),
        demand: crate::demand::Demand::found(),
    }
}

/// The owner of the first process in `dirs` (or below them).
fn process_owner(dirs: &[PathBuf]) -> Option<u32> {
    let pid = dirs.iter().flat_map(|d| lockstep_cgroup::procs_below(d).unwrap_or_default()).next()?;
    procfs::owner(pid)
}

/// The PUs `groups` may run on: their cpusets, else the affinity of the processes in them (and below), else
/// every online PU.
pub fn pus(groups: &[Group]) -> CpuList {
    let mut pus = CpuList::new();
    for g in groups {
        let mine = g.knobs.pus().or_else(|| affinity(&lockstep_cgroup::procs_below(g.dirs.first()?).ok()?));
        for pu in mine.unwrap_or_else(CpuList::online).iter() {
            pus.insert(pu);
        }
    }
    pus
}

/// The PUs the processes `pids` may run on together (the union of their affinities), or `None` when none of them
/// could be read.
fn affinity(pids: &[i32]) -> Option<CpuList> {
    let lists: Vec<CpuList> = pids.iter().filter_map(|&p| CpuList::parse(&procfs::cpus_allowed(p)?).ok()).collect();
    (!lists.is_empty()).then(|| lists.iter().flat_map(CpuList::iter).collect())
}

/// `path` relative to whichever hierarchy root it lies under; a relative path stays as given.
fn relative_to_roots(backend: &dyn Backend, path: &Path) -> PathBuf {
    backend
        .roots()
        .iter()
        .filter_map(|r| path.strip_prefix(r).ok())
        .min_by_key(|p| p.as_os_str().len())
        .map_or_else(|| path.to_path_buf(), Path::to_path_buf)
}

/// The cgroup path of `pid` in the freezer hierarchy (v1) or the unified one (v2).
fn process_cgroup(pid: i32) -> Option<String> {
    let cgroups = procfs::cgroups(pid)?;
    cgroups
        .iter()
        .find(|(c, _)| c.split(',').any(|x| x == "freezer"))
        .or_else(|| cgroups.iter().find(|(c, _)| c.is_empty()))
        .map(|(_, p)| p.clone())
}

/// The path, in `/proc/PID/cgroup` terms, of the hierarchy mounted at `root`.
fn original_path(root: &Path, cgroups: &[(String, String)]) -> Option<String> {
    let name = root.file_name()?.to_string_lossy().into_owned();
    cgroups
        .iter()
        .find(|(c, _)| !c.is_empty() && name.split(',').all(|n| c.split(',').any(|x| x == n)))
        .or_else(|| cgroups.iter().find(|(c, _)| c.is_empty()))
        .map(|(_, p)| p.clone())
}

#[cfg(test)]
mod tests {
    use super::{check_not_lockstep_tree, resolve_pids, Resolved};
    use lockstep_cgroup::procfs::{Live as _, ProcessRef};
    use std::path::Path;

    #[test]
    fn a_process_is_taken_only_while_its_pid_still_names_it() {
        let me = ProcessRef::of(std::process::id() as i32).unwrap();
        assert!(matches!(resolve_pids(&[me]), Ok(Resolved::Pids(p)) if p == [me]));
        // The same PID with another start time: the process named has ended and another took its PID.
        let before = ProcessRef { start: me.start.wrapping_sub(1), ..me };
        let refused = resolve_pids(&[before]).err().unwrap();
        assert!(refused.is::<lockstep_core::error::UsageError>(), "{refused:#}");
        assert!(refused.to_string().contains("ended since it was named"), "{refused}");
    }

    #[test]
    fn locksteps_own_tree_and_what_holds_it_are_refused() {
        let refused = |p: &str| check_not_lockstep_tree(Path::new(p), Path::new(p)).is_err();
        assert!(refused("/lockstep") && refused("lockstep") && refused("lockstep/") && refused("/"));
        assert!(!refused("/lockstep/job") && !refused("/slurm_n1/uid_0/job_7") && !refused("/lockstep2"));
    }
}
