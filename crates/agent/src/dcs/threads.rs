//! Raising a job's threads for `dcs`: each thread's scheduling before its first raise is journaled (the entry
//! kept until the job leaves `dcs`), so that the watchdog and a restarted agent can put it back.

use std::collections::{HashMap, HashSet};

use crate::journal::Journal;
use crate::sched::{self, Sched, Thread};
use lockstep_store::Store;

/// Threads of a job changed for one raise: each with its scheduling before and while raised.
pub type Changed = Vec<(Thread, Sched, Sched)>;

/// The scheduling every thread of a job had before its first raise (each journaled then, the entry kept until the
/// job leaves `dcs`: it names the value the thread returns to).
pub type Before = HashMap<Thread, Sched>;

/// Changes every normal-class thread of `threads` to `raised(before)`. A thread seen for the first time is read
/// and journaled first; the entries of threads that have exited since are dropped (a job that makes threads
/// without end keeps only its live ones in the journal). Threads that exit meanwhile are skipped.
pub fn raise(
    job: &str,
    threads: &[Thread],
    raised: impl Fn(&Sched) -> Sched,
    journal: &mut Journal,
    store: &Store,
    known: &mut Before,
) -> anyhow::Result<Changed> {
    forget_exited(threads, journal, known);
    let mut changed = Vec::new();
    for thread in threads {
        let before = if let Some(b) = known.get(thread) {
            *b
        } else {
            let Ok(b) = sched::read(thread) else { continue };
            journal.remember_thread(store, job, *thread, &b.encode())?;
            known.insert(*thread, b);
            b
        };
        if before.is_realtime() {
            continue;
        }
        let to = raised(&before);
        match sched::change(thread, Some(&before), &to) {
            Ok(()) => changed.push((*thread, before, to)),
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            Err(e) => {
                lower(&changed);
                anyhow::bail!("cannot raise thread {} of job {job}: {e}", thread.pid);
            }
        }
    }
    Ok(changed)
}

/// Drops from `known` and the journal the threads that are not in `threads` (the last scan) and have exited.
fn forget_exited(threads: &[Thread], journal: &mut Journal, known: &mut Before) {
    let listed: HashSet<&Thread> = threads.iter().collect();
    let exited: Vec<Thread> = known.keys().filter(|t| !listed.contains(t) && !t.alive()).copied().collect();
    for t in exited {
        known.remove(&t);
        journal.forget_thread(t);
    }
}

/// Puts the threads of one raise back (threads gone meanwhile need nothing).
pub fn lower(changed: &Changed) {
    for (thread, before, raised) in changed {
        if let Err(e) = sched::change(thread, Some(raised), before) {
            if e.raw_os_error() != Some(libc::ESRCH) {
                crate::log::warning!("cannot lower thread {}: {e}", thread.pid);
            }
        }
    }
}
