//! Which threads of a job are its ranks. A rank is a process an MPI launcher started as one: its environment names
//! its rank (`PMIX_RANK`: Open MPI, and Slurm's `srun --mpi=pmix`; `PMI_RANK`: MPICH's Hydra, and `srun
//! --mpi=pmi2`; `OMPI_COMM_WORLD_RANK`). Its main thread stands for it: a rank's other threads (MPI progress
//! threads, OpenMP workers, a runtime's helpers) are not ranks, and neither are the launchers (`mpirun`, `prted`,
//! `hydra_pmi_proxy`, `srun`, the batch script), which name no rank. A job none of whose processes names a rank (a
//! job that is not MPI) has each of its processes as a rank.
//!
//! Launchers also tell a rank how many ranks its node has (`OMPI_COMM_WORLD_LOCAL_SIZE`: Open MPI;
//! `MPI_LOCALNRANKS`: MPICH's Hydra): until that many have started, the job's ranks are not all running, however
//! many of those started run.
//!
//! The environment is the job's own, and hostile: at most 1 MiB of it is read, from `/proc` (which never
//! blocks). A process found to be a rank is not read again. One that is not is read at its first [`LOOKS`] scans:
//! a process a launcher forked names its rank only once it has executed the program, which a scan may just miss.
//! Whatever a job's processes do, the agent reads at most [`READS_PER_SCAN`] environments of it per scan (the
//! others wait for the next) and at most [`LOOKS`] of each process.

use std::collections::HashMap;
use std::path::PathBuf;

use lockstep_cgroup::procfs::{self, ProcessRef};
use lockstep_cgroup::procs_below;

/// The variables by which a launcher tells a process its rank.
const RANK_VARIABLES: [&[u8]; 3] = [b"PMIX_RANK=", b"PMI_RANK=", b"OMPI_COMM_WORLD_RANK="];

/// The variables by which a launcher tells a rank how many ranks its node has.
const LOCAL_SIZE_VARIABLES: [&[u8]; 2] = [b"OMPI_COMM_WORLD_LOCAL_SIZE=", b"MPI_LOCALNRANKS="];

/// What a process's environment says: whether it is a rank, and how many ranks its node has.
#[derive(Clone, Copy, Default)]
struct Names {
    rank: bool,
    local_size: Option<u32>,
}

/// How many times the environment of a process that names no rank is read, at most (once per scan).
const LOOKS: u8 = 8;

/// How many environments of one job are read per scan, at most.
const READS_PER_SCAN: usize = 256;

/// What was found out about one process of a job.
#[derive(Clone, Copy, Default)]
struct Seen {
    names: Names,
    /// How many times its environment was read.
    looks: u8,
}

/// The processes of one job that were looked at, by identity.
#[derive(Default)]
pub(super) struct Ranks {
    seen: HashMap<ProcessRef, Seen>,
}

impl Ranks {
    /// The job's ranks now, in its cgroup directories `dirs` (and below), and how many ranks its launcher said
    /// this node has (the most any rank was told).
    pub(super) fn now(&mut self, dirs: &[PathBuf]) -> (Vec<ProcessRef>, Option<u32>) {
        let mut pids: Vec<i32> = dirs.iter().flat_map(|d| procs_below(d).unwrap_or_default()).collect();
        pids.sort_unstable();
        pids.dedup();
        let mut seen = HashMap::with_capacity(pids.len());
        let mut reads = 0;
        for pid in pids {
            let Some(process) = ProcessRef::of(pid) else { continue };
            let mut s = self.seen.remove(&process).unwrap_or_default();
            if !s.names.rank && s.looks < LOOKS && reads < READS_PER_SCAN {
                s = Seen { names: names(pid), looks: s.looks + 1 };
                reads += 1;
            }
            seen.insert(process, s);
        }
        self.seen = seen;
        let ranks: Vec<ProcessRef> = self.seen.iter().filter(|(_, s)| s.names.rank).map(|(p, _)| *p).collect();
        let local_size = self.seen.values().filter_map(|s| s.names.local_size).max();
        if ranks.is_empty() {
            (self.seen.keys().copied().collect(), None)
        } else {
            (ranks, local_size)
        }
    }
}

/// What process `pid`'s environment says of its rank.
fn names(pid: i32) -> Names {
    let Some(env) = procfs::environ(pid) else { return Names::default() };
    let rank = env.iter().any(|v| RANK_VARIABLES.iter().any(|name| v.starts_with(name)));
    let local_size = env.iter().find_map(|v| {
        let name = LOCAL_SIZE_VARIABLES.iter().find(|name| v.starts_with(name))?;
        std::str::from_utf8(&v[name.len()..]).ok()?.parse().ok()
    });
    Names { rank, local_size: local_size.filter(|_| rank) }
}
