//! How fast a job progresses, as `auto` measures it at slot boundaries: the CPU time its processes have had, the
//! time its ranks ran together (crate::together), and the live count of progress-making MPI calls its ranks
//! publish when the PMPI profiler is loaded (`/dev/shm/lockstep-pmpi.<pid>`, native/pmpi/lockstep_pmpi.c).
//!
//! The files are written by the jobs: each is opened without following links and without blocking, must be a
//! regular file of exactly [`LIVE_LEN`] bytes owned by the process's owner, and must name the process's start
//! time, or it is ignored. At most [`LIVE_LEN`] bytes are read.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use lockstep_cgroup::{procfs, procs_within, Bounds};
use lockstep_core::cosched::auto::Sample;
use lockstep_core::trust::open_regular;

use crate::ranks::Ranks;
use crate::together::Reading;

/// Size of a rank's live file.
const LIVE_LEN: u64 = 64;

/// What a live file starts with.
const MAGIC: &[u8; 8] = b"LSPMPI1\0";

/// The directory the profiler publishes in.
const LIVE_DIR: &str = "/dev/shm";

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

/// Reads one job's totals now; `tree` is where its processes are (walked within its bounds unless costly), `epoch` the agent's monotonic origin, `ranks` what is known of the
/// job's ranks (to tell how many will publish), `together` what the eBPF program measured of them (their
/// co-scheduled time), if it runs.
pub(crate) fn sample(tree: &Tree<'_>, epoch: Instant, ranks: &mut Ranks, together: Option<Reading>) -> Sample {
    let dirs = tree.dirs;
    let mut pids: Vec<i32> = match tree.costly {
        Some(procs) => procs.to_vec(),
        None => procs_within(dirs, tree.bounds).procs,
    };
    pids.sort_unstable();
    pids.dedup();
    let profiled = ranks.of(&pids).profiled;
    let mut calls = None;
    let mut publishers = 0;
    let mut cpu_ns = 0;
    for &pid in &pids {
        cpu_ns += threads_cpu_ns(pid);
        if let Some(c) = live_calls(pid) {
            calls = Some(calls.unwrap_or(0) + c);
            publishers += 1;
        }
    }
    // The cgroups' own totals (v2 `cpu.stat`) include threads that have exited: preferred where they exist.
    if let Some(total) = dirs.iter().map(|d| cgroup_cpu_ns(d)).sum::<Option<u64>>() {
        cpu_ns = total;
    }
    Sample {
        at_ns: epoch.elapsed().as_nanos() as u64,
        cpu_ns,
        calls,
        publishers,
        profiled,
        together_ns: together.map(|t| t.together),
        ranks: together.map_or(0, |t| t.ranks),
    }
}

/// v2 `cpu.stat` `usage_usec` of the cgroup and its descendants, in ns.
fn cgroup_cpu_ns(dir: &Path) -> Option<u64> {
    let text = read_bounded(&dir.join("cpu.stat"), 4096)?;
    let usec = text.lines().find_map(|l| l.strip_prefix("usage_usec "))?.trim().parse::<u64>().ok()?;
    Some(usec * 1000)
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

/// The live call count process `pid` publishes, if its file is there and is what the profiler writes.
fn live_calls(pid: i32) -> Option<u64> {
    let (file, meta) = open_regular(Path::new(&format!("{LIVE_DIR}/lockstep-pmpi.{pid}")))?;
    let owner = std::fs::metadata(format!("/proc/{pid}")).ok()?.uid();
    if meta.len() != LIVE_LEN || meta.uid() != owner {
        return None;
    }
    let mut buf = [0u8; LIVE_LEN as usize];
    file.take(LIVE_LEN).read_exact(&mut buf).ok()?;
    parse_live(&buf, procfs::start_time(pid)?)
}

/// The count in a live file's bytes, if they carry the magic and the start time `start`.
fn parse_live(buf: &[u8], start: u64) -> Option<u64> {
    let word = |i: usize| Some(u64::from_ne_bytes(buf.get(i * 8..i * 8 + 8)?.try_into().ok()?));
    (buf.get(..8)? == MAGIC && word(1)? == start).then_some(word(2)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(start: u64, calls: u64) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend(start.to_ne_bytes());
        b.extend(calls.to_ne_bytes());
        b.resize(LIVE_LEN as usize, 0);
        b
    }

    #[test]
    fn a_live_file_counts_only_with_its_magic_and_start_time() {
        assert_eq!(parse_live(&live(42, 7), 42), Some(7));
        assert_eq!(parse_live(&live(42, 7), 43), None);
        let mut bad = live(42, 7);
        bad[0] = b'X';
        assert_eq!(parse_live(&bad, 42), None);
        assert_eq!(parse_live(&bad[..20], 42), None);
        assert_eq!(parse_live(&[], 42), None);
    }

    #[test]
    fn this_process_has_cpu_time_and_no_live_file() {
        let me = std::process::id() as i32;
        let t0 = threads_cpu_ns(me);
        // The kernel updates a running thread's total at ticks and switches: spin for many ticks.
        let until = Instant::now() + std::time::Duration::from_millis(100);
        let mut x = 0u64;
        while Instant::now() < until {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
        }
        assert!(threads_cpu_ns(me) > t0);
        assert_eq!(live_calls(me), None);
    }
}
