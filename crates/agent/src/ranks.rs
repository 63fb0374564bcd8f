//! Which threads of a job are its ranks. A rank is a process an MPI launcher started as one: its environment names
//! its rank (`PMIX_RANK`: Open MPI, and Slurm's `srun --mpi=pmix`; `PMI_RANK`: MPICH's Hydra, and `srun
//! --mpi=pmi2`; `OMPI_COMM_WORLD_RANK`). Its main thread stands for it: a rank's other threads (MPI progress
//! threads, OpenMP workers, a runtime's helpers) are not ranks, and neither are the launchers (`mpirun`, `prted`,
//! `hydra_pmi_proxy`, `srun`, the batch script), which name no rank. A job none of whose processes names a rank (a
//! job that is not MPI) has each of its processes as a rank.
//!
//! Launchers also tell a rank how many ranks its node has (`OMPI_COMM_WORLD_LOCAL_SIZE`: Open MPI;
//! `MPI_LOCALNRANKS`: MPICH's Hydra): until that many have started, the job's ranks are not all running, however
//! many of those started run. And a rank whose `LD_PRELOAD` names lockstep's PMPI profiler
//! (`liblockstep-pmpi.so`) will publish its MPI calls once its `MPI_Init` returns: until every such rank does, the
//! job is still starting (what `auto` waits for).
//!
//! The environment is the job's own, and hostile: at most [`ENV_BYTES`] of it is read, from `/proc` (which never
//! blocks), and a job one of whose processes has more is said once in the log (what lies past it is not seen). A process found to be a rank that preloads the profiler is not read again. Any other is read at its
//! first [`LOOKS`] scans: a process a launcher forked names its rank only once it has executed the program, and a
//! rank started through a wrapper (`env LD_PRELOAD=… program`) preloads the profiler only once the wrapper has
//! executed the program, either of which a scan may just miss.
//! Whatever a job's processes do, the agent reads at most [`READS_PER_SCAN`] environments of it per scan (the
//! others wait for the next) and at most [`LOOKS`] of each process.

use lockstep_cgroup::procfs::Live as _;
use std::collections::HashMap;

use lockstep_cgroup::procfs::{self, ProcessRef};

/// The variables by which a launcher tells a process its rank.
const RANK_VARIABLES: [&[u8]; 3] = [b"PMIX_RANK=", b"PMI_RANK=", b"OMPI_COMM_WORLD_RANK="];

/// The variables by which a launcher tells a rank how many ranks its node has.
const LOCAL_SIZE_VARIABLES: [&[u8]; 2] = [b"OMPI_COMM_WORLD_LOCAL_SIZE=", b"MPI_LOCALNRANKS="];

/// The variable that preloads libraries, and the profiler's name in it.
const PRELOAD: (&[u8], &[u8]) = (b"LD_PRELOAD=", b"lockstep-pmpi");

/// What a process's environment says: whether it is a rank, how many ranks its node has, and whether it preloads
/// the profiler.
#[derive(Clone, Copy, Default)]
struct Names {
    rank: bool,
    local_size: Option<u32>,
    profiled: bool,
}

/// A job's ranks on this node, as their environments say.
pub(crate) struct JobRanks {
    /// Its ranks now: the processes that name their rank, or every process of a job none of whose processes does.
    pub(crate) ranks: Vec<ProcessRef>,
    /// How many ranks its launcher said this node has (the most any rank was told).
    pub(crate) local_size: Option<u32>,
    /// How many ranks will publish their MPI calls: those that preload the profiler, or as many as the launcher
    /// said the node has where one does and more have yet to start.
    pub(crate) profiled: u32,
    /// The ranks seen to preload the profiler: those whose live call counts are looked for (crate::live).
    pub(crate) preloading: Vec<ProcessRef>,
}

/// How many times the environment of one process is read, at most (once per scan).
const LOOKS: u8 = 8;

/// How many environments of one job are read per scan, at most: with [`ENV_BYTES`], 2 MiB per job per scan at
/// worst, each process read at most [`LOOKS`] times in its life.
const READS_PER_SCAN: usize = 32;

/// Most bytes of one process's environment read: launchers' variables, in environments of a few KiB to a few
/// tens of KiB (a module system's), not what a job may pad one with (up to `ARG_MAX`).
const ENV_BYTES: u64 = 64 << 10;

/// What was found out about one process of a job.
#[derive(Clone, Copy, Default)]
struct Seen {
    names: Names,
    /// How many times its environment was read.
    looks: u8,
}

/// The processes of one job that were looked at, by identity.
#[derive(Default)]
pub(crate) struct Ranks {
    seen: HashMap<ProcessRef, Seen>,
    /// Whether an environment past [`ENV_BYTES`] was said.
    said_cut: bool,
}

impl Ranks {
    /// The ranks among processes `pids` (sorted, without repeats) of the job.
    pub(crate) fn of(&mut self, pids: &[i32]) -> JobRanks {
        let mut seen = HashMap::with_capacity(pids.len());
        let mut reads = 0;
        for &pid in pids {
            let Some(process) = ProcessRef::of(pid) else { continue };
            let mut s = self.seen.remove(&process).unwrap_or_default();
            if !(s.names.rank && s.names.profiled) && s.looks < LOOKS && reads < READS_PER_SCAN {
                // What an earlier read found stays: a process that exited meanwhile reads as naming nothing.
                let now = self.names(pid);
                let names = Names {
                    rank: s.names.rank || now.rank,
                    local_size: now.local_size.or(s.names.local_size),
                    profiled: s.names.profiled || now.profiled,
                };
                s = Seen { names, looks: s.looks + 1 };
                reads += 1;
            }
            seen.insert(process, s);
        }
        self.seen = seen;
        let ranks: Vec<ProcessRef> = self.seen.iter().filter(|(_, s)| s.names.rank).map(|(p, _)| *p).collect();
        let preloading = |rank: bool| -> Vec<ProcessRef> {
            self.seen.iter().filter(|(_, s)| s.names.profiled && (s.names.rank || !rank)).map(|(p, _)| *p).collect()
        };
        if ranks.is_empty() {
            let preloading = preloading(false);
            let profiled = preloading.len() as u32;
            return JobRanks { ranks: self.seen.keys().copied().collect(), local_size: None, profiled, preloading };
        }
        let local_size = self.seen.values().filter_map(|s| s.names.local_size).max();
        let preloading = preloading(true);
        let profiled = preloading.len() as u32;
        let profiled = if profiled > 0 { profiled.max(local_size.unwrap_or(0)) } else { 0 };
        JobRanks { ranks, local_size, profiled, preloading }
    }
}

impl Ranks {
    /// What process `pid`'s environment says of its rank, from its first [`ENV_BYTES`]; one with more is said,
    /// once per job.
    fn names(&mut self, pid: i32) -> Names {
        let Some((env, cut)) = procfs::environ_within(pid, ENV_BYTES) else { return Names::default() };
        if cut && !self.said_cut {
            self.said_cut = true;
            log::info!(
                "auto: the environment of PID {pid} is over {} KiB: only its first {} KiB are read for its rank",
                ENV_BYTES >> 10,
                ENV_BYTES >> 10
            );
        }
        names_in(&env)
    }
}

/// What an environment says of its process's rank.
fn names_in(env: &[Vec<u8>]) -> Names {
    let rank = env.iter().any(|v| RANK_VARIABLES.iter().any(|name| v.starts_with(name)));
    let local_size = env.iter().find_map(|v| {
        let name = LOCAL_SIZE_VARIABLES.iter().find(|name| v.starts_with(name))?;
        std::str::from_utf8(&v[name.len()..]).ok()?.parse().ok()
    });
    let profiled = env
        .iter()
        .any(|v| v.strip_prefix(PRELOAD.0).is_some_and(|list| list.windows(PRELOAD.1.len()).any(|w| w == PRELOAD.1)));
    Names { rank, local_size: local_size.filter(|_| rank), profiled }
}

#[cfg(test)]
mod tests {
    use super::Ranks;

    #[test]
    fn a_rank_that_preloads_the_profiler_stands_for_its_node_s_ranks() {
        // A rank as Open MPI starts one through `env LD_PRELOAD=…`: its rank, its node's two ranks, the profiler.
        // (The library is not there: the loader says so and goes on.)
        let mut child = std::process::Command::new("sleep")
            .arg("10")
            .env("PMIX_RANK", "0")
            .env("OMPI_COMM_WORLD_LOCAL_SIZE", "2")
            .env("LD_PRELOAD", "/nonexistent/liblockstep-pmpi.so")
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        // Until it has executed `sleep`, its environment is this process's: read again at the next scan.
        let mut ranks = Ranks::default();
        let mut found = ranks.of(&[pid]);
        for _ in 1..super::LOOKS {
            if found.profiled > 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            found = ranks.of(&[pid]);
        }
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!((found.ranks.len(), found.local_size, found.profiled), (1, Some(2), 2));
        assert_eq!(found.preloading.iter().map(|p| p.pid).collect::<Vec<_>>(), [pid]);
    }
}
