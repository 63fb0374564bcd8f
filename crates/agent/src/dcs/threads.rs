//! Raising a job's threads for `dcs`: each thread's scheduling before its first raise is journaled (the entry
//! kept until the job leaves `dcs`), so that the watchdog and a restarted agent can put it back.
//!
//! A thread is changed through its ID, and the system calls that change scheduling take no pidfd: the ID must name
//! the thread that was checked for the whole call. Every raise and lower checks the thread's start time before
//! its system calls and again after them ([`change`]). An ID passes to another thread only once its thread is
//! gone, so when the second check finds the same thread, the ID named it throughout and the change reached it and
//! no other. When it does not, the thread exited meanwhile, and the change may have reached a thread that took
//! its ID in between (the kernel hands an ID out again only after every other one, `kernel.pid_max` of them): a
//! thread holding the ID now with the scheduling just set is put back to the normal class at nice 0 or lower, and
//! the agent says so. (A pidfd of the thread group would say only when the whole group exits, not this thread.)

use lockstep_cgroup::procfs::Live as _;
use std::collections::{HashMap, HashSet};

use crate::journal::Journal;
use crate::sched::{self, Sched, Thread};
use crate::writer::Writer;
use lockstep_core::ident::JobKey;

/// Threads of a job changed for one raise: each with its scheduling before and while raised.
pub type Changed = Vec<(Thread, Sched, Sched)>;

/// The scheduling every thread of a job had before its first raise (each journaled then, the entry kept until the
/// job leaves `dcs`: it names the value the thread returns to).
pub type Before = HashMap<Thread, Sched>;

/// Changes every normal-class thread of `threads` to `raised(before)`. A thread seen for the first time is read
/// and journaled first; the entries of threads that have exited since are dropped (a job that makes threads
/// without end keeps only its live ones in the journal). Threads that exit meanwhile are skipped.
pub fn raise(
    job: &JobKey,
    threads: &[Thread],
    raised: impl Fn(&Sched) -> Sched,
    journal: &mut Journal,
    writer: &Writer,
    known: &mut Before,
) -> anyhow::Result<Changed> {
    forget_exited(threads, journal, known);
    let mut changed = Vec::new();
    for thread in threads {
        let before = if let Some(b) = known.get(thread) {
            *b
        } else {
            let Ok(b) = sched::read(thread) else { continue };
            journal.remember_thread(writer, job, *thread, &b.encode())?;
            known.insert(*thread, b);
            b
        };
        if before.is_realtime() {
            continue;
        }
        let to = raised(&before);
        match change(thread, &before, &to) {
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
        if let Err(e) = change(thread, raised, before) {
            if e.raw_os_error() != Some(libc::ESRCH) {
                log::warn!("cannot lower thread {}: {e}", thread.pid);
            }
        }
    }
}

/// Changes `thread`'s scheduling from `from` to `to`, checking after the change that its ID still names it:
/// `ESRCH` when it does not (it exited meanwhile), after putting back a thread that took its ID and may have got
/// the change in its place (see the module's comment).
fn change(thread: &Thread, from: &Sched, to: &Sched) -> std::io::Result<()> {
    sched::change(thread, Some(from), to)?;
    if thread.alive() {
        return Ok(());
    }
    if let Some(other) = Thread::of(thread.pid).filter(|o| o != thread) {
        if put_back_stranger(&other, to) {
            log::warn!(
                "dcs: thread {} exited as its scheduling was changed, and the thread that took its ID may have been                  changed in its place: put back to the normal class",
                thread.pid
            );
        }
    }
    Err(std::io::Error::from_raw_os_error(libc::ESRCH))
}

/// Puts `other`, a thread that may have been changed to `set` in another's place, back to the normal class at
/// its nice value or 0, whichever is lower in priority, if it has `set` now; whether it did.
fn put_back_stranger(other: &Thread, set: &Sched) -> bool {
    let Ok(now) = sched::read(other) else { return false };
    if (now.policy, now.priority, now.nice) != (set.policy & !libc::SCHED_RESET_ON_FORK, set.priority, set.nice) {
        return false;
    }
    let normal = Sched { policy: libc::SCHED_OTHER, priority: 0, nice: now.nice.max(0) };
    sched::change(other, Some(&now), &normal).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread of this process that waits until `done` is sent, with its reference.
    fn waiter() -> (Thread, std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>) {
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let handle = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tid_tx.send(unsafe { libc::gettid() }).unwrap();
            let _ = done_rx.recv();
        });
        let thread = Thread::of(tid_rx.recv().unwrap()).unwrap();
        (thread, done_tx, handle)
    }

    #[test]
    fn a_change_reaches_the_thread_checked_and_not_one_gone() {
        let (thread, done, handle) = waiter();
        let before = sched::read(&thread).unwrap();
        let to = Sched { nice: before.nice + 1, ..before };
        change(&thread, &before, &to).unwrap();
        assert_eq!(sched::read(&thread).unwrap(), to);
        let gone = Thread { start: thread.start + 1, ..thread };
        assert_eq!(change(&gone, &to, &before).unwrap_err().raw_os_error(), Some(libc::ESRCH));
        assert_eq!(sched::read(&thread).unwrap(), to, "a thread not the one checked was changed");
        done.send(()).unwrap();
        handle.join().unwrap();
    }

    #[test]
    fn a_thread_that_may_have_been_raised_in_anothers_place_is_put_back() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: raising a thread needs root");
            return;
        }
        let (thread, done, handle) = waiter();
        let before = sched::read(&thread).unwrap();
        let raised = Sched { nice: -20, policy: before.policy | libc::SCHED_RESET_ON_FORK, ..before };
        sched::change(&thread, Some(&before), &raised).unwrap();
        // Only a thread that shows what was set is put back.
        assert!(!put_back_stranger(&thread, &Sched { nice: -19, ..raised }));
        assert!(put_back_stranger(&thread, &raised));
        assert_eq!(sched::read(&thread).unwrap(), Sched { policy: libc::SCHED_OTHER, priority: 0, nice: 0 });
        done.send(()).unwrap();
        handle.join().unwrap();
    }
}
