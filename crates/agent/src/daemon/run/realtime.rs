//! Real-time priority, for the one thread whose work is the slot switch: the daemon's loop. This module is a private
//! child of the loop's (`daemon::run`), so no other thread of the agent can ask for it: the doors, the sampler,
//! `dcs`'s threads, Slurm discovery and the timeline work for users, scrapers and scans, and run at normal
//! priority (docs/agent.md, "Only the slot switch is real-time").

/// The priority: above every ordinary task, so that a slot switch is not late behind the jobs it switches (agents
/// on different nodes must switch within milliseconds), and low among real-time priorities. The loop sleeps between
/// short pieces of work (a switch takes well under a millisecond) and never waits on another thread's lock, a
/// subprocess, the store's write lock or a file a user can make slow: what it needs from the other threads it
/// reads from their published snapshots or gets by message.
const PRIORITY: i32 = 10;

/// Moves the calling thread to `SCHED_FIFO` at [`PRIORITY`]; says so, naming `role`, when it cannot.
pub(super) fn thread(role: &str) {
    if let Err(e) = try_thread() {
        log::warn!("cannot use SCHED_FIFO for {role} ({e}); slot switches may lag under load");
    }
}

/// Moves the calling thread to `SCHED_FIFO` at [`PRIORITY`].
fn try_thread() -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: PRIORITY };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &raw const param) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
