//! Real-time priority for the agent's threads that must not wait behind the jobs they switch: the daemon's loop
//! first, and the threads that feed it (the control socket's, Slurm discovery, `dcs`, sampling).

/// The priority: above every ordinary task, so that a slot switch is not late behind the jobs it switches (agents
/// on different nodes must switch within milliseconds), and low among real-time priorities. Every thread at it
/// sleeps between short pieces of work; a switch takes well under a millisecond. The threads that send the daemon
/// commands run at it too: one preempted by the jobs would hold up what it carries (a request, a raise, a new
/// Slurm job), and the sampling thread holds the telemetry lock the daemon takes as jobs come and go (std's mutex
/// does not inherit priority).
const PRIORITY: i32 = 10;

/// Moves the calling thread to `SCHED_FIFO` at [`PRIORITY`]; says so, naming `role`, when it cannot.
pub fn thread(role: &str) {
    if let Err(e) = try_thread() {
        crate::log::warning!("cannot use SCHED_FIFO for {role} ({e}); slot switches may lag under load");
    }
}

/// Moves the calling thread to `SCHED_FIFO` at [`PRIORITY`].
pub fn try_thread() -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: PRIORITY };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &raw const param) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
