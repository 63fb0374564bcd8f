//! The discovery thread: looks for this node's Slurm jobs in the cgroup tree, asks slurmctld which of them run
//! here when it must, sends what it found to the daemon, and does the cgroup work the daemon answers with.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::config::SlurmConfig;
use super::{scan, Answer, Msg};
use crate::outlet::Outlet;
use lockstep_cgroup::Version;

/// How often the agent looks for new Slurm jobs and steps.
pub const SCAN_INTERVAL: Duration = Duration::from_millis(200);

/// How soon slurmctld is asked again while a job is found that nobody told this node of: a few asks decide it
/// (listed, or left behind after [`super::scan::LEFT_BEHIND`]).
pub const ASK_AGAIN: Duration = Duration::from_secs(5);

/// Looks for Slurm jobs of node `node` (cgroup `version`, hierarchies `roots`) every [`SCAN_INTERVAL`] until the
/// daemon ends, and asks slurmctld which jobs it runs here and their places: when `told` (the controller's hooks
/// tell this node its jobs' places through the metrics door), only when Slurm's jobs are first found and while the
/// daemon finds one that neither its prolog nor slurmctld's last answer named (at most every [`ASK_AGAIN`]), and
/// about each job the daemon saw stopped, whether Slurm halted it (`crate::slurm::Word::halts_to_ask`);
/// else, while there are Slurm cgroups, every [`lockstep_slurm::REFRESH`] (a running job's place changes when a
/// neighbour comes or goes). The daemon takes on only the jobs Slurm says run here. Waiting for slurmctld, making
/// cgroups and moving processes between them are done here, never in the daemon's loop, and at normal priority:
/// what Slurm's tree and slurmctld make this thread wait for or do holds up no slot switch.
pub fn spawn(
    daemon: Outlet<Msg>,
    version: Version,
    roots: Vec<PathBuf>,
    node: lockstep_core::ident::NodeName,
    told: bool,
    config: Arc<SlurmConfig>,
) {
    let spawned = std::thread::Builder::new().name("lockstep-slurm".into()).spawn(move || {
        let mut asked: Option<Instant> = None;
        // Whether the daemon's last answer asks for slurmctld's word: at first, whatever is found.
        let mut wanted = true;
        let mut checked = false;
        let mut halts = Vec::new();
        let mut made = Vec::new();
        loop {
            let mut found = scan(version, &roots, &node);
            if !found.is_empty() && !checked {
                checked = true;
                if told {
                    log::info!("Slurm jobs here: the controller's hooks tell their places (POST /slurm/places)");
                } else {
                    log::info!(
                        "Slurm jobs here: slurmctld is asked their places every {} s (no metrics door open to the \
                         controller's notices)",
                        lockstep_slurm::REFRESH.as_secs()
                    );
                }
                check_preemption(&config);
            }
            for f in &mut found {
                f.measure();
            }
            let since = |every: Duration| asked.is_none_or(|t| t.elapsed() >= every);
            let due =
                !found.is_empty() && if told { wanted && since(ASK_AGAIN) } else { since(lockstep_slurm::REFRESH) };
            let word = due.then(|| {
                let at = Instant::now();
                asked = Some(at);
                lockstep_slurm::on_node(&node).map(|jobs| Answer { asked: at, jobs }).map_err(|e| format!("{e:#}"))
            });
            let Some(chores) = daemon.ask(|reply| Msg::Scanned { found, word, halts, made, reply }) else { return };
            wanted = chores.ask;
            // Slurm's word on the jobs seen stopped, for the next scan.
            halts = chores.halts.iter().filter_map(|&id| Some((id, halted(id)?))).collect();
            made = chores.run();
            std::thread::sleep(SCAN_INTERVAL);
        }
    });
    if let Err(e) = spawned {
        log::warn!("Slurm jobs are not looked for: cannot start the discovery thread: {e}");
    }
}

/// Whether Slurm holds job `id` halted (suspended or stopped), as slurmctld says (`squeue -j`); `None` when it
/// cannot be asked.
fn halted(id: lockstep_slurm::SlurmJobId) -> Option<bool> {
    match lockstep_slurm::show_job(id) {
        Ok(job) => Some(job.is_some_and(|j| j.halted())),
        Err(e) => {
            log::info!("Slurm job {id}: cannot ask slurmctld whether it is suspended: {e:#}");
            None
        }
    }
}

/// Says once, at the first Slurm job found, when slurmctld time-slices jobs itself (`PreemptMode=GANG`): its slices
/// and lockstep's slots would each stop jobs in turns of their own, so neither gets what it plans. Slurm's
/// configuration is the one the notices door reads: one question to slurmctld in the agent's life.
fn check_preemption(config: &SlurmConfig) {
    match config.get() {
        Ok(c) if lockstep_slurm::slices_time(&c.preempt_mode) => log::warn!(
            "Slurm time-slices jobs itself here (PreemptMode={}): its slices and lockstep's slots would stop \
             jobs in turns of their own; keep one of the two (PreemptMode without GANG, or policy cfs on this \
             node; deploy/slurm/README.md)",
            c.preempt_mode
        ),
        Ok(_) => {}
        Err(e) => log::info!("{e}"),
    }
}
