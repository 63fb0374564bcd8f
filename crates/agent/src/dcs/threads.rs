//! The scheduling class and nice value of a job's threads: read, changed for a boost, and put back. A changed
//! thread is journaled as the target `thread:<tid>:<start time>` with its value before, so that the watchdog
//! and a restarted agent can put it back, and never touch another thread that reused the ID.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use super::super::journal::Journal;
use lockstep_cgroup::procfs;
use lockstep_store::Store;

/// A thread's scheduling: policy (`SCHED_OTHER`, `SCHED_RR`, ...), real-time priority, nice value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sched {
    /// Scheduling policy.
    pub policy: i32,
    /// Real-time priority (0 for the normal classes).
    pub priority: i32,
    /// Nice value.
    pub nice: i32,
}

impl Sched {
    /// As the journal keeps it: `policy priority nice`.
    pub fn encode(&self) -> String {
        format!("{} {} {}", self.policy, self.priority, self.nice)
    }

    fn decode(value: &str) -> Option<Self> {
        let mut it = value.split_whitespace().map(str::parse::<i32>);
        Some(Self { policy: it.next()?.ok()?, priority: it.next()?.ok()?, nice: it.next()?.ok()? })
    }

    /// Whether the thread is in a real-time class already (the job's own choice: never raised, never lowered).
    pub fn is_realtime(&self) -> bool {
        matches!(self.policy, libc::SCHED_FIFO | libc::SCHED_RR | libc::SCHED_DEADLINE)
    }
}

/// A thread of a job, named so that a reused ID is not mistaken for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Thread {
    /// Thread ID.
    pub tid: i32,
    /// Its start time (clock ticks since boot).
    pub start: u64,
}

impl Thread {
    /// The journal target naming the thread.
    pub fn target(&self) -> PathBuf {
        PathBuf::from(format!("thread:{}:{}", self.tid, self.start))
    }

    /// Its scheduling now.
    pub fn read(&self) -> io::Result<Sched> {
        // SAFETY: plain system calls on a thread ID; `param` is a valid out-parameter.
        unsafe {
            let policy = libc::sched_getscheduler(self.tid);
            if policy < 0 {
                return Err(io::Error::last_os_error());
            }
            let mut param = libc::sched_param { sched_priority: 0 };
            if libc::sched_getparam(self.tid, &raw mut param) != 0 {
                return Err(io::Error::last_os_error());
            }
            // getpriority may legitimately return -1: errno tells an error apart.
            *libc::__errno_location() = 0;
            let nice = libc::getpriority(libc::PRIO_PROCESS, self.tid as libc::id_t);
            if nice == -1 && *libc::__errno_location() != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(Sched { policy: policy & !libc::SCHED_RESET_ON_FORK, priority: param.sched_priority, nice })
        }
    }

    /// Changes its scheduling from `from` (what it is now) to `to`, with only the system calls the difference
    /// needs: class and priority, then nice (a real-time thread keeps its nice value for when it returns to the
    /// normal class).
    pub fn change(&self, from: Option<&Sched>, to: &Sched) -> io::Result<()> {
        let param = libc::sched_param { sched_priority: to.priority };
        // SAFETY: plain system calls on a thread ID with a valid sched_param.
        unsafe {
            if from.is_none_or(|f| (f.policy, f.priority) != (to.policy, to.priority))
                && libc::sched_setscheduler(self.tid, to.policy, &raw const param) != 0
            {
                return Err(io::Error::last_os_error());
            }
            if from.is_none_or(|f| f.nice != to.nice)
                && libc::setpriority(libc::PRIO_PROCESS, self.tid as libc::id_t, to.nice) != 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

/// The thread a journal target names, if it names one.
fn parse_target(target: &Path) -> Option<Thread> {
    let rest = target.to_str()?.strip_prefix("thread:")?;
    let (tid, start) = rest.split_once(':')?;
    Some(Thread { tid: tid.parse().ok()?, start: start.parse().ok()? })
}

/// Whether a journal target is a thread (not a cgroup file).
pub fn is_thread_target(target: &Path) -> bool {
    parse_target(target).is_some()
}

/// Puts a journaled thread back to `value`; a thread that is gone needs nothing.
pub fn restore(target: &Path, value: &str) -> io::Result<()> {
    let (Some(thread), Some(sched)) = (parse_target(target), Sched::decode(value)) else {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("bad thread entry {}", target.display())));
    };
    if !procfs::alive(thread.tid, thread.start) {
        return Ok(());
    }
    match thread.change(None, &sched) {
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
        other => other,
    }
}

/// Every thread of the processes `pids`.
pub fn of(pids: &[i32]) -> Vec<Thread> {
    pids.iter()
        .flat_map(|&pid| procfs::threads(pid).unwrap_or_default())
        .filter_map(|tid| Some(Thread { tid, start: procfs::start_time(tid)? }))
        .collect()
}

/// Threads of a job changed for one raise: each with its scheduling before and while raised.
pub type Changed = Vec<(Thread, Sched, Sched)>;

/// The scheduling every thread of a job had before its first raise (each journaled then, the entry kept until the
/// job leaves `dcs`: it names the value the thread returns to).
pub type Before = HashMap<Thread, Sched>;

/// Changes every normal-class thread of `threads` to `raised(before)`. A thread seen for the first time is read
/// and journaled first. Threads that exit meanwhile are skipped.
pub fn raise(
    job: &str,
    threads: &[Thread],
    raised: impl Fn(&Sched) -> Sched,
    journal: &mut Journal,
    store: &Store,
    known: &mut Before,
) -> anyhow::Result<Changed> {
    let mut changed = Vec::new();
    for thread in threads {
        let before = if let Some(b) = known.get(thread) {
            *b
        } else {
            let Ok(b) = thread.read() else { continue };
            journal.remember(store, job, &thread.target(), &b.encode())?;
            known.insert(*thread, b);
            b
        };
        if before.is_realtime() {
            continue;
        }
        let to = raised(&before);
        match thread.change(Some(&before), &to) {
            Ok(()) => changed.push((*thread, before, to)),
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            Err(e) => {
                lower(&changed);
                anyhow::bail!("cannot raise thread {} of job {job}: {e}", thread.tid);
            }
        }
    }
    Ok(changed)
}

/// Puts the threads of one raise back (threads gone meanwhile need nothing).
pub fn lower(changed: &Changed) {
    for (thread, before, raised) in changed {
        if let Err(e) = thread.change(Some(raised), before) {
            if e.raw_os_error() != Some(libc::ESRCH) {
                eprintln!("lockstep agent: cannot lower thread {}: {e}", thread.tid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_and_values_round_trip() {
        let t = Thread { tid: 42, start: 1234 };
        assert_eq!(parse_target(&t.target()), Some(t));
        assert!(is_thread_target(&t.target()));
        assert!(!is_thread_target(Path::new("/sys/fs/cgroup/cpu/lockstep/a/cpu.shares")));
        let s = Sched { policy: libc::SCHED_RR, priority: 1, nice: -3 };
        assert_eq!(Sched::decode(&s.encode()), Some(s));
    }

    #[test]
    fn this_thread_reads_as_normal_and_a_gone_thread_restores_to_nothing() {
        let me = of(&[std::process::id() as i32]);
        assert!(!me.is_empty());
        let s = me[0].read().unwrap();
        assert!(!s.is_realtime());
        let gone = Thread { tid: me[0].tid, start: me[0].start + 1 };
        assert!(restore(&gone.target(), &s.encode()).is_ok());
    }
}
