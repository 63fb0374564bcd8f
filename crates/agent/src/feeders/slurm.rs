//! The discovery thread: looks for this node's Slurm jobs in the cgroup tree and reads their places from
//! slurmctld, sends what it found to the daemon, and does the cgroup work the daemon answers with.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::command::{Command, Mailbox};
use crate::slurm::{scan, Answer};
use lockstep_cgroup::Version;

/// How often the agent looks for new Slurm jobs and steps.
pub const SCAN_INTERVAL: Duration = Duration::from_millis(200);

/// Looks for Slurm jobs of node `node` (cgroup `version`, hierarchies `roots`) every [`SCAN_INTERVAL`] until the
/// daemon ends, and while there are Slurm cgroups asks slurmctld every [`lockstep_slurm::REFRESH`] which jobs it
/// runs here and their places (a running job's place changes when a neighbour comes or goes): the daemon takes
/// on only the jobs Slurm says run here. Waiting for slurmctld and moving processes
/// between cgroups are done here, never in the daemon's loop, and at normal priority: what Slurm's tree and
/// slurmctld make this thread wait for or do holds up no slot switch.
pub fn spawn(mailbox: Mailbox, version: Version, roots: Vec<PathBuf>, node: String) {
    let spawned = std::thread::Builder::new().name("lockstep-slurm".into()).spawn(move || {
        let mut refreshed: Option<Instant> = None;
        let mut checked = false;
        loop {
            let mut found = scan(version, &roots, &node);
            if !found.is_empty() && !checked {
                checked = true;
                check_preemption();
            }
            for f in &mut found {
                f.measure();
            }
            let due = !found.is_empty() && refreshed.is_none_or(|t| t.elapsed() >= lockstep_slurm::REFRESH);
            let word = due.then(|| {
                let asked = Instant::now();
                refreshed = Some(asked);
                lockstep_slurm::on_node(&node).map(|jobs| Answer { asked, jobs }).map_err(|e| format!("{e:#}"))
            });
            let Some(chores) = mailbox.ask(|reply| Command::Slurm { found, word, reply }) else { return };
            chores.run();
            std::thread::sleep(SCAN_INTERVAL);
        }
    });
    if let Err(e) = spawned {
        crate::log::warning!("Slurm jobs are not looked for: cannot start the discovery thread: {e}");
    }
}

/// Says once, at the first Slurm job found, when slurmctld time-slices jobs itself (`PreemptMode=GANG`): its slices
/// and lockstep's slots would each stop jobs in turns of their own, so neither gets what it plans. One question to
/// slurmctld in the agent's life.
fn check_preemption() {
    match lockstep_slurm::preempt_mode() {
        Ok(mode) if lockstep_slurm::slices_time(&mode) => crate::log::warning!(
            "Slurm time-slices jobs itself here (PreemptMode={mode}): its slices and lockstep's slots would stop \
             jobs in turns of their own; keep one of the two (PreemptMode without GANG, or policy cfs on this \
             node; deploy/slurm/README.md)"
        ),
        Ok(_) => {}
        Err(e) => crate::log::info!("cannot read Slurm's PreemptMode: {e:#}"),
    }
}
