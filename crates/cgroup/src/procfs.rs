//! Small readers of `/proc`.

use lockstep_core::cpulist::CpuList;
use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// Start time of process `pid` in clock ticks since boot (field 22 of `/proc/PID/stat`), or `None` if the
/// process does not exist. Together with the PID it names a process even after PIDs wrap around.
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count fields after the last ')'.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

pub use lockstep_core::ident::ProcessRef;

/// What root does with a [`ProcessRef`]: it reads `/proc`, and acts on the process only while its ID still names
/// it.
pub trait Live: Sized {
    /// Process or thread `pid` as it is now, or `None` if there is none.
    fn of(pid: i32) -> Option<Self>;
    /// Every thread of the processes `pids` (threads that exit while they are listed are left out).
    fn threads_of(pids: &[i32]) -> Vec<Self>;
    /// Whether the ID still names this process (it runs, and no other process has taken its ID).
    fn alive(&self) -> bool;
    /// `ESRCH` unless the ID still names this process: the check before every action on it.
    fn check(&self) -> io::Result<()>;
    /// Moves the process into the cgroup whose `cgroup.procs` file is `procs`, only if its ID still names it;
    /// each of its threads keeps its CPU affinity, which a move into another cpuset on cgroup v2 resets.
    fn move_to(&self, procs: &Path) -> io::Result<()>;
    /// Sends signal `sig` to the process, only if its ID still names it.
    fn signal(&self, sig: i32) -> io::Result<()>;
}

impl Live for ProcessRef {
    fn of(pid: i32) -> Option<Self> {
        Some(Self { pid, start: start_time(pid)? })
    }

    fn threads_of(pids: &[i32]) -> Vec<Self> {
        pids.iter().flat_map(|&pid| threads(pid).unwrap_or_default()).filter_map(Self::of).collect()
    }

    fn alive(&self) -> bool {
        start_time(self.pid) == Some(self.start)
    }

    fn check(&self) -> io::Result<()> {
        if self.alive() {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(libc::ESRCH))
        }
    }

    /// A pidfd taken before the check pins the identity: if the process exits between the check and the write,
    /// the pidfd says so and the move is reported as failed (the ID cannot have been reused while the pidfd
    /// shows the process running). Kernels without pidfds get the check alone.
    fn move_to(&self, procs: &Path) -> io::Result<()> {
        let pidfd = pidfd_open(self.pid);
        self.check()?;
        let kept = affinities(self.pid, procs);
        fs::write(procs, self.pid.to_string())?;
        match pidfd {
            Some(fd) if exited(&fd) => Err(io::Error::from_raw_os_error(libc::ESRCH)),
            _ => {
                keep_affinities(self.pid, &kept);
                Ok(())
            }
        }
    }

    /// Through a pidfd checked after it was opened, so that the signal reaches this process or none.
    fn signal(&self, sig: i32) -> io::Result<()> {
        let pidfd = pidfd_open(self.pid);
        self.check()?;
        send_signal(pidfd.as_ref(), self.pid, sig)
    }
}

/// Sends `sig` through `pidfd`, or to `pid` with kill(2) where there is no pidfd.
fn send_signal(pidfd: Option<&OwnedFd>, pid: i32, sig: i32) -> io::Result<()> {
    // SAFETY: pidfd_send_signal on a descriptor we own, no siginfo; kill(2) with a plain PID otherwise.
    let rc = match pidfd {
        Some(fd) => unsafe {
            libc::syscall(libc::SYS_pidfd_send_signal, fd.as_raw_fd(), sig, std::ptr::null::<u8>(), 0)
        },
        None => i64::from(unsafe { libc::kill(pid, sig) }),
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A pidfd on process `pid`, or `None` where the kernel has none (before 5.3) or the process is gone.
fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a PID and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a non-negative return is a descriptor this process owns now.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Most threads of one process whose CPU affinity a move keeps: a process can have as many threads as the kernel
/// allows (10⁵ and more), and a move is made on the agent's real-time loop. MPI ranks and their OpenMP threads are
/// far fewer; the threads listed after these keep what the move gives them.
const KEPT_THREADS: usize = 1024;

/// Each of the first [`KEPT_THREADS`] threads of process `pid` with its CPU affinity, where a move into the cgroup
/// whose `cgroup.procs` is `procs` may change it: on cgroup v2 (its directory has `cgroup.controllers`) and into a
/// v1 cpuset (it has `cpuset.cpus`); none into v1's other hierarchies, whose moves leave affinities alone. A
/// thread that exits while listed is left out, as is every thread where affinities do not fit a `CpuSet` (more
/// than 1024 CPU IDs).
fn affinities(pid: i32, procs: &Path) -> Vec<(i32, CpuSet)> {
    let dir = procs.parent().unwrap_or(procs);
    if !dir.join("cgroup.controllers").exists() && !dir.join("cpuset.cpus").exists() {
        return Vec::new();
    }
    task_ids(pid)
        .into_iter()
        .flatten()
        .take(KEPT_THREADS)
        .filter_map(|tid| Some((tid, sched_getaffinity(Pid::from_raw(tid)).ok()?)))
        .collect()
}

/// Gives each thread of process `pid` in `kept` back the affinity it had before a move, where the move widened
/// it. On cgroup v2 a process moved into another cpuset has every thread's affinity set to that whole cpuset, even
/// one with the same PUs (kernel 6.18, from the root cgroup to a child): an MPI rank bound to its core, adopted by
/// PID, would lose its binding, and keep it lost after release. Only a widened affinity (a superset of the one
/// before) is given back, so that a thread that bound itself while it was moved keeps its own binding; one the
/// kernel refuses (outside the new cpuset) keeps what the move gave it.
///
/// A thread is set only while it is listed under the process, and checked again after: one that ended in
/// between may have left its ID to another process's thread, which then got this mask (within its own cpuset,
/// which the kernel enforces); that is said, as nothing tells what that thread had before.
fn keep_affinities(pid: i32, kept: &[(i32, CpuSet)]) {
    for (tid, before) in kept {
        let thread = Pid::from_raw(*tid);
        let listed = format!("/proc/{pid}/task/{tid}");
        if !sched_getaffinity(thread).is_ok_and(|now| widened(before, &now)) || !Path::new(&listed).exists() {
            continue;
        }
        if sched_setaffinity(thread, before).is_ok() && !Path::new(&listed).exists() {
            log::warn!(
                "thread {tid} of process {pid} ended as its CPU affinity was given back after a move: a thread that \
                 took its ID since may have got that affinity in its place"
            );
        }
    }
}

/// Whether `now` holds every CPU of `before` and more.
fn widened(before: &CpuSet, now: &CpuSet) -> bool {
    now != before
        && (0..CpuSet::count()).all(|cpu| !before.is_set(cpu).unwrap_or(false) || now.is_set(cpu).unwrap_or(false))
}

/// Whether the process behind `pidfd` has exited (the descriptor polls readable then).
fn exited(pidfd: &OwnedFd) -> bool {
    let mut poll = libc::pollfd { fd: pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd, no wait.
    unsafe { libc::poll(&raw mut poll, 1, 0) > 0 && poll.revents & libc::POLLIN != 0 }
}

/// The owner of process `pid`: its real UID (the `Uid:` line of its status, which the process cannot make look
/// like another user's, as a process that is not dumpable makes its `/proc/PID` root's).
pub fn owner(pid: i32) -> Option<u32> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("Uid:"))?.split_whitespace().next()?.parse().ok()
}

/// The CPU time the calling thread has used (its `CLOCK_THREAD_CPUTIME_ID`; zero should the clock fail).
pub fn thread_cpu() -> std::time::Duration {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime with a valid timespec.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut t) } != 0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// The `Cpus_allowed_list` of process `pid`.
pub fn cpus_allowed(pid: i32) -> Option<String> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).map(|v| v.trim().to_string())
}

/// The cgroups of process `pid` from `/proc/PID/cgroup`: `(controllers, path)` per line, e.g.
/// `("freezer", "/lockstep/job")` for v1 and `("", "/lockstep/job")` for the v2 hierarchy.
pub fn cgroups(pid: i32) -> Option<Vec<(String, String)>> {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    Some(
        text.lines()
            .filter_map(|l| {
                let mut parts = l.splitn(3, ':');
                let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                Some((controllers.to_string(), path.to_string()))
            })
            .collect(),
    )
}

/// The thread ids of process `pid` (`/proc/PID/task`), or `None` if the process does not exist.
pub fn threads(pid: i32) -> Option<Vec<i32>> {
    Some(task_ids(pid)?.collect())
}

/// The thread ids of process `pid` as `/proc/PID/task` lists them, read as they are taken (a caller may take a
/// bounded number), or `None` if the process does not exist.
fn task_ids(pid: i32) -> Option<impl Iterator<Item = i32>> {
    let dir = fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    Some(dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()))
}

/// Most bytes of a process's environment read: an environment is at most a few hundred KiB (`ARG_MAX`).
const MAX_ENVIRON: u64 = 1 << 20;

/// The environment of process `pid` (`/proc/PID/environ`, at most 1 MiB of it) as `NAME=value` entries, or
/// `None` if it cannot be read (no such process, or not ours to read).
pub fn environ(pid: i32) -> Option<Vec<Vec<u8>>> {
    environ_within(pid, MAX_ENVIRON).map(|(env, _)| env)
}

/// The first `max` bytes of process `pid`'s environment as [`environ`] reads it, and whether there was more (the
/// entry cut in two is left out then).
pub fn environ_within(pid: i32, max: u64) -> Option<(Vec<Vec<u8>>, bool)> {
    use std::io::Read;
    let mut env = Vec::new();
    fs::File::open(format!("/proc/{pid}/environ")).ok()?.take(max + 1).read_to_end(&mut env).ok()?;
    let cut = env.len() as u64 > max;
    if cut {
        let whole = env[..max as usize].iter().rposition(|&b| b == 0).map_or(0, |i| i + 1);
        env.truncate(whole);
    }
    Some((env.split(|&b| b == 0).filter(|v| !v.is_empty()).map(<[u8]>::to_vec).collect(), cut))
}

/// The parent of process `pid` (field 4 of `/proc/PID/stat`).
pub fn parent(pid: i32) -> Option<i32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].split_whitespace().nth(1)?.parse().ok()
}

/// The state letter of process `pid` (field 3 of `/proc/PID/stat`: `R`, `S`, `D`, `T` stopped by a signal, `t`
/// by a tracer, `Z`, …), or `None` if it does not exist.
pub fn state(pid: i32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].split_whitespace().next()?.chars().next()
}

/// CPU time (user + system) process `pid` has used, in seconds (fields 14 and 15 of `/proc/PID/stat`).
pub fn cpu_seconds(pid: i32) -> Option<f64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut after = stat[stat.rfind(')')? + 1..].split_whitespace();
    let utime: u64 = after.nth(11)?.parse().ok()?;
    let stime: u64 = after.next()?.parse().ok()?;
    Some(ticks_to_seconds(utime + stime))
}

/// Clock ticks (`USER_HZ`, the unit of `/proc`'s CPU times) in seconds.
fn ticks_to_seconds(ticks: u64) -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    ticks as f64 / hz.max(1) as f64
}

/// How long CPUs have been busy since boot, from `/proc/stat`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuBusy {
    /// CPU-seconds busy, summed over the CPUs read.
    pub busy_s: f64,
    /// How many CPUs were read.
    pub cpus: u32,
}

/// How long the CPUs of `cpus` that `/proc/stat` lists (the online ones) have been busy since boot; `None` where
/// it cannot be read or lists none of them.
pub fn cpus_busy(cpus: &CpuList) -> Option<CpuBusy> {
    let (ticks, n) = busy_ticks(&fs::read_to_string("/proc/stat").ok()?, cpus)?;
    Some(CpuBusy { busy_s: ticks_to_seconds(ticks), cpus: n })
}

/// From the text of `/proc/stat`: the clock ticks its `cpuN` lines of the CPUs in `cpus` count busy (user, nice,
/// system, irq, softirq and steal; not idle nor iowait, and not guest, which user already holds), and how many
/// such lines there are; `None` when there is none, or one does not read.
fn busy_ticks(stat: &str, cpus: &CpuList) -> Option<(u64, u32)> {
    let (mut busy, mut n) = (0, 0);
    for line in stat.lines() {
        let Some((cpu, fields)) = line.strip_prefix("cpu").and_then(|l| l.split_once(' ')) else { continue };
        if !cpu.parse::<usize>().is_ok_and(|c| cpus.contains(c)) {
            continue;
        }
        let fields: Vec<u64> = fields.split_whitespace().map(str::parse).collect::<Result<_, _>>().ok()?;
        // user nice system idle iowait irq softirq steal …
        busy += [0, 1, 2, 5, 6, 7].iter().map(|&i| fields.get(i).copied().unwrap_or(0)).sum::<u64>();
        n += 1;
    }
    (n > 0).then_some((busy, n))
}

/// A memory field of `/proc/PID/status` (`VmRSS`, `VmHWM`, …) in bytes.
fn status_bytes(pid: i32, field: &str) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let value = status.lines().find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?;
    let kb: u64 = value.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb * 1024)
}

/// Resident set size of process `pid` in bytes (`VmRSS`).
pub fn rss_bytes(pid: i32) -> Option<u64> {
    status_bytes(pid, "VmRSS")
}

/// Peak resident set size of process `pid` in bytes (`VmHWM`).
pub fn peak_rss_bytes(pid: i32) -> Option<u64> {
    status_bytes(pid, "VmHWM")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only an affinity the move widened is given back: one the thread narrowed itself is its own.
    #[test]
    fn an_affinity_is_widened_only_by_a_strict_superset() {
        let set = |cpus: &[usize]| {
            let mut s = CpuSet::new();
            for &c in cpus {
                s.set(c).unwrap();
            }
            s
        };
        assert!(widened(&set(&[1]), &set(&[0, 1, 2])));
        assert!(!widened(&set(&[1]), &set(&[1])), "unchanged");
        assert!(!widened(&set(&[0, 1, 2]), &set(&[1])), "narrowed");
        assert!(!widened(&set(&[1]), &set(&[0, 2])), "moved elsewhere");
    }

    #[test]
    fn cpus_are_busy_for_what_their_lines_count_outside_idle_iowait_and_guest() {
        let stat =
            "cpu  100 5 40 9000 30 2 3 1 50 0\ncpu0 60 5 20 4500 15 1 2 1 50 0\ncpu1 40 0 20 4500 15 1 1 0 0 0\n\
                    cpu2 7 0 0 10 0 0 0 0 0 0\nintr 12345\nctxt 999\ncpufreq 1\n";
        let list = |l: &str| CpuList::parse(l).unwrap();
        assert_eq!(busy_ticks(stat, &list("0-1")), Some((151, 2)));
        assert_eq!(busy_ticks(stat, &list("1-2,5")), Some((69, 2)));
        assert_eq!(busy_ticks(stat, &list("5")), None);
        assert_eq!(busy_ticks("intr 1\n", &list("0")), None);
        assert_eq!(busy_ticks("cpu0 1 x 3\n", &list("0")), None);
        let busy = cpus_busy(&CpuList::online()).expect("/proc/stat");
        assert!(busy.busy_s > 0.0 && busy.cpus >= 1, "{busy:?}");
    }

    #[test]
    fn own_process_is_alive() {
        let me = std::process::id() as i32;
        let start = start_time(me).expect("own stat readable");
        let this = ProcessRef { pid: me, start };
        assert_eq!(ProcessRef::of(me), Some(this));
        assert!(this.alive() && this.check().is_ok());
        let recycled = ProcessRef { pid: me, start: start + 1 };
        assert!(!recycled.alive());
        assert_eq!(recycled.check().unwrap_err().raw_os_error(), Some(libc::ESRCH));
        assert!(ProcessRef::threads_of(&[me]).contains(&this));
        assert!(cpus_allowed(me).is_some());
        assert!(!cgroups(me).expect("own cgroups readable").is_empty());
        assert!(threads(me).expect("own threads readable").contains(&me));
        assert!(cpu_seconds(me).is_some_and(|s| s >= 0.0));
        assert_eq!(parent(me), Some(std::os::unix::process::parent_id() as i32));
        let env = environ(me).expect("own environment readable");
        assert!(env.iter().all(|v| !v.is_empty()));
        assert_eq!(env.len(), std::env::vars_os().count());
        assert_eq!(environ(-1), None);
        // Resident memory first: the peak read after it is at least that (other tests' threads allocate meanwhile).
        let rss = rss_bytes(me);
        assert!(rss.is_some_and(|b| b > 0));
        assert!(peak_rss_bytes(me) >= rss);
    }
}

#[cfg(test)]
mod environ_tests {
    use super::{environ, environ_within};

    #[test]
    fn an_environment_read_within_a_bound_keeps_whole_entries_and_says_it_was_cut() {
        let mut child = std::process::Command::new("sleep")
            .arg("10")
            .env_clear()
            .env("A", "1")
            .env("PAD", "x".repeat(100))
            .env("B", "2")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        // Until it has executed `sleep`, its environment is this process's: wait for the one given.
        let mut whole = environ(pid).unwrap_or_default();
        for _ in 0..100 {
            if whole.len() == 3 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            whole = environ(pid).unwrap_or_default();
        }
        let cut = environ_within(pid, 50);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(whole.len(), 3, "{whole:?}");
        let (first, was_cut) = cut.unwrap();
        assert!(was_cut);
        assert!(first.iter().all(|e| whole.contains(e)) && first.len() < 3, "{first:?}");
    }
}
