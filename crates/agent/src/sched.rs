//! The scheduling class and nice value of threads: read and changed with only the system calls a change needs.
//! A thread is named by its ID and start time, so that a reused ID is never mistaken for it.

use lockstep_cgroup::procfs::Live as _;
use std::io;

use lockstep_cgroup::procfs::ProcessRef;

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

    /// Reads what [`Sched::encode`] wrote.
    pub fn decode(value: &str) -> Option<Self> {
        let mut it = value.split_whitespace().map(str::parse::<i32>);
        Some(Self { policy: it.next()?.ok()?, priority: it.next()?.ok()?, nice: it.next()?.ok()? })
    }

    /// Whether the thread is in a real-time class already (the job's own choice: never raised, never lowered).
    pub fn is_realtime(&self) -> bool {
        matches!(self.policy, libc::SCHED_FIFO | libc::SCHED_RR | libc::SCHED_DEADLINE)
    }
}

/// A thread of a job: its ID and start time, so that a reused ID is never mistaken for it.
pub type Thread = ProcessRef;

/// Its scheduling now.
pub fn read(thread: &Thread) -> io::Result<Sched> {
    thread.check()?;
    // SAFETY: plain system calls on a thread ID; `param` is a valid out-parameter.
    unsafe {
        let policy = libc::sched_getscheduler(thread.pid);
        if policy < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut param = libc::sched_param { sched_priority: 0 };
        if libc::sched_getparam(thread.pid, &raw mut param) != 0 {
            return Err(io::Error::last_os_error());
        }
        // getpriority may legitimately return -1: errno tells an error apart.
        *libc::__errno_location() = 0;
        let nice = libc::getpriority(libc::PRIO_PROCESS, thread.pid as libc::id_t);
        if nice == -1 && *libc::__errno_location() != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Sched { policy: policy & !libc::SCHED_RESET_ON_FORK, priority: param.sched_priority, nice })
    }
}

/// Changes its scheduling from `from` (what it is now) to `to`, with only the system calls the difference
/// needs: class and priority, then nice (a real-time thread keeps its nice value for when it returns to the
/// normal class). `ESRCH` when its ID no longer names it: a thread that exited is never mistaken for the one
/// that got its ID.
pub fn change(thread: &Thread, from: Option<&Sched>, to: &Sched) -> io::Result<()> {
    thread.check()?;
    let param = libc::sched_param { sched_priority: to.priority };
    // SAFETY: plain system calls on a thread ID with a valid sched_param.
    unsafe {
        if from.is_none_or(|f| (f.policy, f.priority) != (to.policy, to.priority))
            && libc::sched_setscheduler(thread.pid, to.policy, &raw const param) != 0
        {
            return Err(io::Error::last_os_error());
        }
        if from.is_none_or(|f| f.nice != to.nice)
            && libc::setpriority(libc::PRIO_PROCESS, thread.pid as libc::id_t, to.nice) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_this_thread_reads_as_normal() {
        let s = Sched { policy: libc::SCHED_RR, priority: 1, nice: -3 };
        assert_eq!(Sched::decode(&s.encode()), Some(s));
        let me = Thread::threads_of(&[std::process::id() as i32]);
        assert!(!me.is_empty() && me[0].alive());
        assert!(!read(&me[0]).unwrap().is_realtime());
    }
}
