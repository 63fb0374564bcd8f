//! How fast a job progresses, as `auto` measures it at slot boundaries: the CPU time its processes have had, the
//! time its ranks ran together (crate::together), and the live count of progress-making MPI calls its ranks
//! publish when the PMPI profiler is loaded (crate::live, native/pmpi/lockstep_pmpi.c).

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use lockstep_cgroup::{procfs, procs_within, Bounds};
use lockstep_core::cosched::auto::Sample;

use crate::live::Published;
use crate::managed::{Managed, Origin};
use crate::ranks::Ranks;
use crate::sampler::Counting;
use crate::together::Reading;

/// What is kept of one measured job from one sample to the next: which of its processes are ranks, and where they
/// publish their calls.
#[derive(Default)]
pub(crate) struct Watch {
    ranks: Ranks,
    published: Published,
}

/// Where a job's processes are: its cgroup directories, one per group of processes (a job's containers are
/// several), and, when its tree is costly to walk, the processes the sampler found at its last walk.
pub(crate) struct Tree<'a> {
    /// The job's cgroup directories.
    pub(crate) dirs: &'a [&'a Path],
    /// How far below them its processes are looked for (`Managed::bounds`).
    pub(crate) bounds: Bounds,
    /// The sampler's last walk of a tree costly to walk (`Published::costly_tree`): then the tree is not walked.
    pub(crate) costly: Option<&'a [i32]>,
}

/// Reads one job's totals now; `tree` is where its processes are (walked within its bounds unless costly), `epoch`
/// the agent's monotonic origin, `watch` what is known of the job's ranks (how many will publish, and where),
/// `together` what the eBPF program measured of them (their co-scheduled time), if it runs.
pub(crate) fn sample(tree: &Tree<'_>, epoch: Instant, watch: &mut Watch, together: Option<Reading>) -> Sample {
    let dirs = tree.dirs;
    let mut pids: Vec<i32> = match tree.costly {
        Some(procs) => procs.to_vec(),
        None => procs_within(dirs, tree.bounds).procs,
    };
    pids.sort_unstable();
    pids.dedup();
    let ranks = watch.ranks.of(&pids);
    let (calls, publishers) = watch.published.calls(&ranks.preloading);
    // The cgroups' own totals (v2 `cpu.stat`) include threads that have exited: preferred where they exist, and then
    // no thread is read.
    let cpu_ns = dirs
        .iter()
        .map(|d| cgroup_cpu_ns(d))
        .sum::<Option<u64>>()
        .unwrap_or_else(|| pids.iter().map(|&pid| threads_cpu_ns(pid)).sum());
    Sample {
        at_ns: epoch.elapsed().as_nanos() as u64,
        cpu_ns,
        calls,
        publishers,
        profiled: ranks.profiled,
        together_ns: together.map(|t| t.together),
        ranks: together.map_or(0, |t| t.ranks),
    }
}

/// Reads job `job`'s totals now, as [`sample`] does, with what the sampler published last (`telemetry`): a tree
/// costly to walk is never walked here (its processes are the sampler's last walk's), and the co-scheduled time is
/// the eBPF program's.
pub(crate) fn of_job(job: &Managed, epoch: Instant, watch: &mut Watch, telemetry: &Counting) -> Sample {
    let published = telemetry.published();
    let (dirs, bounds, costly) = (&job.count_dirs(), job.bounds(), published.costly_tree(&job.key));
    let tree = Tree { dirs, bounds, costly };
    sample(&tree, epoch, watch, published.together(&job.key))
}

/// The CPU time of job `job`'s cgroups until now (ns; what it wants is checked against it, crate::demand): a Slurm
/// job's from its `job_<id>` directory (v2; it keeps the time of steps that ended, whatever the job does to its
/// steps' directories) or the agent's own `cpu` directory of it (v1, where Slurm keeps no CPU time); any other
/// job's summed over its groups. `None` where one has none.
pub(crate) fn job_cpu_ns(job: &Managed) -> Option<u64> {
    match &job.origin {
        Origin::Slurm { dirs, weight_dir, .. } => dirs.iter().chain(weight_dir).find_map(|d| cgroup_cpu_ns(d)),
        _ => cpu_ns(job.groups.iter().map(|g| g.dirs.as_slice())),
    }
}

/// The CPU time of cgroups until now (ns), summed over `groups` (each a cgroup's directories, one per v1
/// hierarchy, read as [`cgroup_cpu_ns`] reads one). `None` where a group has none.
fn cpu_ns<'a>(groups: impl IntoIterator<Item = &'a [PathBuf]>) -> Option<u64> {
    groups.into_iter().map(|dirs| dirs.iter().find_map(|d| cgroup_cpu_ns(d))).sum()
}

/// The CPU time of the cgroup and its descendants, in ns: v2 `cpu.stat`'s `usage_usec`, or v1 `cpuacct.usage`
/// (a v1 `cpu` directory's `cpu.stat` has no usage); `None` where the directory keeps neither.
fn cgroup_cpu_ns(dir: &Path) -> Option<u64> {
    let v2 = read_bounded(&dir.join("cpu.stat"), 4096).and_then(|text| {
        text.lines().find_map(|l| Some(l.strip_prefix("usage_usec ")?.trim().parse::<u64>().ok()? * 1000))
    });
    v2.or_else(|| read_bounded(&dir.join("cpuacct.usage"), 64)?.trim().parse().ok())
}

/// Run time of every thread of `pid` (the first field of `/proc/PID/task/TID/schedstat`), in ns.
fn threads_cpu_ns(pid: i32) -> u64 {
    procfs::threads(pid)
        .unwrap_or_default()
        .iter()
        .filter_map(|tid| read_bounded(&PathBuf::from(format!("/proc/{pid}/task/{tid}/schedstat")), 256))
        .filter_map(|t| t.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// Reads at most `max` bytes of a kernel file as text.
fn read_bounded(path: &Path, max: u64) -> Option<String> {
    let mut text = String::new();
    File::open(path).ok()?.take(max).read_to_string(&mut text).ok()?;
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_cpu_time() {
        let me = std::process::id() as i32;
        let t0 = threads_cpu_ns(me);
        // The kernel updates a running thread's total at ticks and switches: spin for many ticks.
        let until = Instant::now() + std::time::Duration::from_millis(100);
        let mut x = 0u64;
        while Instant::now() < until {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
        }
        assert!(threads_cpu_ns(me) > t0);
    }

    #[test]
    fn cpu_time_is_read_from_either_version() {
        let dir = std::env::temp_dir().join(format!("lockstep-demand-{}", std::process::id()));
        let (v2, v1, none) = (dir.join("v2"), dir.join("v1"), dir.join("none"));
        for d in [&v2, &v1, &none] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(v2.join("cpu.stat"), "usage_usec 1500\nuser_usec 1000\n").unwrap();
        std::fs::write(v1.join("cpuacct.usage"), "2000000\n").unwrap();
        // A v1 `cpu` directory's `cpu.stat` has no usage: the next hierarchy's `cpuacct.usage` is read.
        std::fs::write(none.join("cpu.stat"), "nr_periods 0\n").unwrap();
        let groups = [vec![v2.clone()], vec![none.clone(), v1.clone()]];
        assert_eq!(cpu_ns(groups.iter().map(Vec::as_slice)), Some(3_500_000));
        assert_eq!(cpu_ns([vec![none.clone()]].iter().map(Vec::as_slice)), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
