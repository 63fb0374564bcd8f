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
//! The environment is the job's own, and hostile: it is read at most 1 MiB of it, from `/proc` (which never
//! blocks). A process found to be a rank is not read again. One that is not is read again at the next
//! [`LOOKS`] scans and whenever its command name changes: a process a launcher forked names its rank only once it
//! has executed the program, which a scan may just miss (and an `exec` of the same program keeps the name).

use std::collections::HashMap;
use std::fs;
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

/// Scans at which a process that names no rank is looked at again.
const LOOKS: u8 = 8;

/// What was found out about one process of a job.
struct Seen {
    /// Its command name when its environment was read.
    comm: Vec<u8>,
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
        for pid in pids {
            let (Some(process), Some(comm)) = (ProcessRef::of(pid), command(pid)) else { continue };
            let seen_now = match self.seen.remove(&process) {
                Some(s) if s.names.rank || (s.comm == comm && s.looks >= LOOKS) => s,
                Some(s) => Seen { names: names(pid), comm, looks: s.looks.saturating_add(1) },
                None => Seen { names: names(pid), comm, looks: 1 },
            };
            seen.insert(process, seen_now);
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

/// The command name of process `pid` (`/proc/PID/comm`: at most 16 bytes).
fn command(pid: i32) -> Option<Vec<u8>> {
    fs::read(format!("/proc/{pid}/comm")).ok()
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
