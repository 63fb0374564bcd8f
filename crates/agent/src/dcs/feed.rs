//! `dcs`'s two threads: the event thread, which hands the probe's arrivals to the daemon (raises happen there),
//! and the scan thread, which keeps the probe's port table in step with the jobs' sockets. Each names its engine
//! in its commands, and ends when the daemon answers that the engine has stopped, or has ended itself. Both run at
//! normal priority: what they read is the jobs' (their sockets, descriptors, threads), and a job must not buy the
//! agent's real-time CPU with it; only the daemon's loop, which raises and lowers, is real-time.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::Msg;
use crate::dcs::probe::{Arrival, Probe, Tables};
use crate::dcs::processes::{Processes, Scanned};
use crate::dcs::sockets::{Budgets, Scanner};
use crate::outlet::Outlet;
use lockstep_cgroup::procfs::thread_cpu;

/// How often the probe's counts go to the daemon, and the probe's port table is brought in step with the jobs'
/// sockets at most (a scan reads the descriptors of the processes that are new or changed, within [`Budgets`]).
const SCAN_INTERVAL: Duration = Duration::from_millis(500);

/// The share of one CPU the scans may take: a scan that took more of the thread's CPU than this share of
/// [`SCAN_INTERVAL`] is followed by a longer wait (what the jobs' processes, threads and sockets make a scan cost
/// is paid by their own jobs, in freshness, not by the node).
const SCAN_SHARE: f64 = 0.01;

/// The longest wait between two scans, whatever the last one cost: a job's new sockets are found within it. One
/// scan that met a job's processes growing their descriptor tables took over a second of CPU in CI, which would
/// have stopped the scans for minutes; a scan that costly every time its job's own processes keep changing costs
/// the node less than they spend.
const SCAN_MOST_APART: Duration = Duration::from_secs(5);

/// How long to wait after a scan that took `cpu` of the thread's CPU: [`SCAN_INTERVAL`], or longer so that the
/// scans take at most [`SCAN_SHARE`] of a CPU, up to [`SCAN_MOST_APART`].
fn scan_wait(cpu: Duration) -> Duration {
    SCAN_INTERVAL.max(cpu.div_f64(SCAN_SHARE).saturating_sub(cpu).min(SCAN_MOST_APART))
}

/// Starts the threads of engine `engine`, which serve `probe` and send their work to `daemon`.
pub fn spawn(daemon: &Outlet<Msg>, engine: u64, probe: Probe) -> anyhow::Result<()> {
    let tables = probe.tables()?;
    let m = daemon.clone();
    std::thread::Builder::new().name("lockstep-dcs".into()).spawn(move || serve(&m, engine, &probe))?;
    let m = daemon.clone();
    std::thread::Builder::new().name("lockstep-dcs-scan".into()).spawn(move || scan(&m, engine, tables))?;
    Ok(())
}

/// The event thread of engine `engine`: polls the probe and sends the daemon its arrivals, as they come and at
/// the latest when the daemon said a raise is due to end; dropping the probe at the end detaches it.
fn serve(daemon: &Outlet<Msg>, engine: u64, probe: &Probe) {
    let sink: Rc<RefCell<Vec<Arrival>>> = Rc::default();
    let events = match probe.events(sink.clone()) {
        Ok(rb) => rb,
        Err(e) => {
            log::warn!("dcs cannot read its probe's events: {e:#}");
            return;
        }
    };
    let mut timeout = Duration::ZERO;
    loop {
        let _ = events.poll(timeout);
        let arrivals = std::mem::take(&mut *sink.borrow_mut());
        let answer = daemon.ask(|reply| Msg::Arrivals { engine, arrivals, reply });
        let Some(Some(next)) = answer else { return };
        timeout = next;
    }
}

/// The scan thread of engine `engine`: every [`SCAN_INTERVAL`], the probe's counts to the daemon, with each job's
/// threads and sockets as the last scan found them; the scan itself (the jobs' TCP ports into the probe's table)
/// at once for a job new to the engine, else as often as [`SCAN_SHARE`] allows.
fn scan(daemon: &Outlet<Msg>, engine: u64, mut tables: Tables) {
    // What went wrong with the port table last, fault once until it changes or clears.
    let mut fault: Option<String> = None;
    let mut scanner = Scanner::new(Budgets::default());
    // Whether the scans were said to be spaced out for their cost (once while the engine runs).
    let mut said = false;
    // What the last scan found of each job (by its slot in the probe's tables), and when the next is due.
    let mut last: HashMap<u32, Processes> = HashMap::new();
    let mut next_scan = Instant::now();
    loop {
        let Some(Some(watched)) = daemon.ask(|reply| Msg::Watched { engine, reply }) else { return };
        for job in watched.iter().filter(|j| j.new) {
            let _ = tables.reset_job(job.slot);
        }
        let unknown = watched.iter().any(|j| j.new || !last.contains_key(&j.slot));
        if unknown || Instant::now() >= next_scan {
            let started = thread_cpu();
            let jobs = scanner.scan(&watched);
            let ports: Vec<_> = watched
                .iter()
                .zip(&jobs)
                .flat_map(|(job, processes)| processes.owners.keys().map(|k| (*k, job.slot)))
                .collect();
            match tables.set_ports(&ports).map_err(|e| format!("{e:#}")) {
                Err(e) if fault.as_ref() != Some(&e) => {
                    log::warn!("dcs port table: {e}");
                    fault = Some(e);
                }
                Err(_) => {}
                Ok(()) => {
                    if fault.take().is_some() {
                        log::info!("dcs port table: every socket watched again");
                    }
                }
            }
            last = watched.iter().map(|j| j.slot).zip(jobs).collect();
            let cpu = thread_cpu().saturating_sub(started);
            let wait = scan_wait(cpu);
            if wait > SCAN_INTERVAL && !said {
                said = true;
                log::info!(
                    "dcs: a scan of the jobs' sockets took {:.1} ms of CPU: scans are {:.1} s apart ({} % of a \
                     CPU), and new sockets of the jobs it knows are found that much later",
                    cpu.as_secs_f64() * 1e3,
                    wait.as_secs_f64() + cpu.as_secs_f64(),
                    SCAN_SHARE * 100.0
                );
            }
            next_scan = Instant::now() + wait.saturating_sub(SCAN_INTERVAL);
        }
        let found = watched
            .iter()
            .map(|job| {
                let processes = last.get(&job.slot).cloned().unwrap_or_default();
                let counts = tables.counts(job.slot).unwrap_or_default();
                Scanned { slot: job.slot, ports: processes.owners.len(), counts, processes }
            })
            .collect();
        if daemon.ask(|reply| Msg::Scanned { engine, scanned: found, reply }) != Some(true) {
            return;
        }
        std::thread::sleep(SCAN_INTERVAL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costly_scans_are_spaced_out_to_their_share_of_a_cpu() {
        assert_eq!(scan_wait(Duration::ZERO), SCAN_INTERVAL);
        assert_eq!(scan_wait(Duration::from_millis(5)), SCAN_INTERVAL, "5 ms in 500 is its 1 %");
        // 20 ms of CPU: 2 s from the start of one scan to the next.
        assert_eq!(scan_wait(Duration::from_millis(20)), Duration::from_millis(1980));
        assert_eq!(scan_wait(Duration::from_secs(1)), SCAN_MOST_APART);
    }
}
