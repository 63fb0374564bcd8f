//! Which TCP ports belong to the jobs' processes, found at a bounded cost whatever a job holds: the sockets of
//! each network namespace from the kernel's socket diagnostics ([`super::diag`]), matched against the socket
//! inodes each process holds.
//!
//! A process's descriptors are read (`/proc/PID/fd`, one link each) only when the process is new, when its count
//! of descriptors changed (`stat` of `/proc/PID/fd` gives the count, kernel 6.2 on), or every [`REFRESH`]; what
//! they held is kept until then. A process holding more than [`CHEAP`] descriptors whose count keeps changing
//! while its sockets stay the same (one that opens and closes files, or dups a socket to make the agent read) is
//! read again after twice as long each time ([`CALMER`], up to [`REFRESH`]); one whose sockets changed is read at
//! the next change again. One process is read up to [`Budgets::per_process`] descriptors, one scan up to
//! [`Budgets::per_scan`] over all jobs (processes holding the fewest first; the others wait for the next scan),
//! and one scan lists at most [`Budgets::processes`] processes and [`Budgets::threads`] threads. A job a cap left
//! partly scanned is named once in the log, with what was left out.

use lockstep_cgroup::procfs::Live as _;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use super::diag;
use super::port::PortKey;
use super::processes::{Processes, Watched};
use crate::sched::Thread;
use lockstep_cgroup::procfs::{self, ProcessRef};
use lockstep_core::ident::JobKey;

/// How long what a process's descriptors held is trusted while their count stays the same (a socket closed and
/// another opened between two scans leave the count as it was).
pub const REFRESH: Duration = Duration::from_secs(10);

/// How long after its last read a process whose count changed is read again, the first time its read found the
/// sockets as they were: twice as long at each such read after, up to [`REFRESH`].
pub const CALMER: Duration = Duration::from_millis(250);

/// Descriptors of a process that are read again at every change of their count (most processes of a job hold
/// fewer: their new sockets are found at once).
pub const CHEAP: u64 = 64;

/// What one scan may read.
#[derive(Clone, Copy, Debug)]
pub struct Budgets {
    /// Descriptors read of one process (its first ones): sockets past them are not watched.
    pub per_process: usize,
    /// Descriptors read in one scan, over all jobs, of processes new or changed.
    pub per_scan: usize,
    /// Descriptors one scan may add to what it may read of processes that did not change, only to find what
    /// [`REFRESH`] is for (what is not spent is kept, up to one process's budget, so that a process holding many is
    /// read again after some scans): a job that holds many descriptors and does nothing costs the agent little.
    pub refresh: usize,
    /// Processes looked at in one scan, over all jobs.
    pub processes: usize,
    /// Threads listed in one scan, over all jobs (those past it are not raised).
    pub threads: usize,
    /// Sockets read of one network namespace.
    pub sockets: usize,
    /// Network namespaces whose sockets one scan reads (the agent's own first, then as the jobs' processes come).
    pub namespaces: usize,
}

impl Default for Budgets {
    fn default() -> Self {
        Self {
            per_process: 1_024,
            per_scan: 8_192,
            refresh: 256,
            processes: 8_192,
            threads: 16_384,
            sockets: diag::MOST_SOCKETS,
            namespaces: 64,
        }
    }
}

/// What a process's descriptors held when they were last read.
struct Walked {
    process: ProcessRef,
    /// Its count of descriptors then (0: the kernel does not say, read at every scan).
    count: u64,
    /// Inodes of the sockets among the descriptors read.
    inodes: Vec<u64>,
    /// When they were read.
    at: Instant,
    /// How many reads in a row found the same sockets as the one before.
    same: u32,
    /// Whether it held more descriptors than were read (how a kernel that does not say the count tells).
    more: bool,
}

impl Walked {
    /// Whether process `process`, holding `count` descriptors now, is to be read again (`walked` is what its ID's
    /// last read found).
    fn due(walked: Option<&Self>, process: ProcessRef, count: u64) -> bool {
        let Some(w) = walked.filter(|w| w.process == process) else { return true };
        let since = w.at.elapsed();
        let changed = count != w.count || count == 0;
        let wait = match w.same {
            0 => Duration::ZERO,
            _ if w.count <= CHEAP => Duration::ZERO,
            n => CALMER.saturating_mul(1 << (n - 1).min(16)).min(REFRESH),
        };
        since >= REFRESH || (changed && since >= wait)
    }
}

/// Why a job was only partly scanned: each said once while the job is watched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Partly {
    /// A process holds more descriptors than one process's budget.
    Descriptors,
    /// The scan's budget of descriptors ran out before some of its new processes were read.
    Waiting,
    /// The scan's budget of processes ran out.
    Processes,
    /// The scan's budget of threads ran out.
    Threads,
    /// The scan's budget of network namespaces ran out.
    Namespaces,
}

/// The scan of the jobs' sockets, with what it keeps from one scan to the next.
pub struct Scanner {
    budgets: Budgets,
    /// Per process ID: what its descriptors held.
    walked: HashMap<i32, Walked>,
    /// The network namespace of the scanning thread (whose sockets it reads without entering another).
    own_netns: Option<u32>,
    /// Descriptors read so far, over all scans.
    pub reads: u64,
    /// What the scans may still read of processes that did not change ([`Budgets::refresh`]).
    refresh_credit: usize,
    /// Per job: why it was partly scanned, as said.
    said: HashMap<JobKey, HashSet<Partly>>,
    /// Network namespaces whose sockets could not all be read, as said.
    said_netns: HashSet<u32>,
}

impl Scanner {
    /// A scanner reading at most `budgets`.
    pub fn new(budgets: Budgets) -> Self {
        Self {
            budgets,
            walked: HashMap::new(),
            own_netns: netns_of("thread-self"),
            reads: 0,
            refresh_credit: 0,
            said: HashMap::new(),
            said_netns: HashSet::new(),
        }
    }

    /// Scans `jobs`: per job (in order), its processes' threads and which of them holds each TCP socket, in its
    /// own network namespace. Processes that are gone are skipped.
    pub fn scan(&mut self, jobs: &[Watched]) -> Vec<Processes> {
        let mut partly: Vec<HashMap<Partly, String>> = vec![HashMap::new(); jobs.len()];
        // Each job's processes as they are now: (job, process, descriptors, network namespace).
        let mut found: Vec<(usize, ProcessRef, u64, u32)> = Vec::new();
        let mut listed = 0;
        for (j, job) in jobs.iter().enumerate() {
            for &pid in &job.pids {
                if listed == self.budgets.processes {
                    let left = format!("it has more processes than one scan looks at ({listed})");
                    partly[j].entry(Partly::Processes).or_insert(left);
                    break;
                }
                listed += 1;
                let (Some(process), Some(count), Some(netns)) =
                    (ProcessRef::of(pid), descriptors(pid), netns_of(&pid.to_string()))
                else {
                    continue;
                };
                found.push((j, process, count, netns));
            }
        }
        self.walk(&found, &mut partly);
        let sockets = self.sockets(found.iter().map(|f| (f.3, f.1.pid)));
        let mut out: Vec<Processes> = jobs.iter().map(|_| Processes::default()).collect();
        let mut threads_left = self.budgets.threads;
        for &(j, process, _, netns) in &found {
            let pid = process.pid;
            if let Some(ports) = sockets.get(&netns) {
                let walked = self.walked.get(&pid).filter(|w| w.process == process);
                for port in walked.into_iter().flat_map(|w| &w.inodes).filter_map(|inode| ports.get(inode)) {
                    out[j].owners.entry(PortKey { netns, port: *port }).or_default().push(pid);
                }
            } else {
                let why = format!(
                    "its processes are in more network namespaces than one scan reads ({}); the sockets of process \
                     {pid} are not watched",
                    self.budgets.namespaces
                );
                partly[j].entry(Partly::Namespaces).or_insert(why);
            }
            let tids = procfs::threads(pid).unwrap_or_default();
            if tids.len() > threads_left {
                let left = format!("its threads past the scan's {} are not raised", self.budgets.threads);
                partly[j].entry(Partly::Threads).or_insert(left);
            }
            let taken = tids.len().min(threads_left);
            threads_left -= taken;
            out[j].threads.insert(pid, tids.into_iter().take(taken).filter_map(Thread::of).collect());
        }
        for owners in out.iter_mut().flat_map(|p| p.owners.values_mut()) {
            owners.sort_unstable();
            owners.dedup();
        }
        let seen: HashSet<i32> = found.iter().map(|f| f.1.pid).collect();
        self.walked.retain(|pid, _| seen.contains(pid));
        self.say(jobs, partly);
        out
    }

    /// Reads the descriptors of the processes in `found` that are due ([`Walked::due`]), within the budgets: those
    /// new or changed first, holding the fewest first; then those due only because [`REFRESH`] has passed, read
    /// longest ago first, while the refresh credit lasts.
    fn walk(&mut self, found: &[(usize, ProcessRef, u64, u32)], partly: &mut [HashMap<Partly, String>]) {
        let unchanged = |walked: Option<&Walked>, f: &(usize, ProcessRef, u64, u32)| {
            walked.is_some_and(|w| w.process == f.1 && w.count == f.2 && f.2 != 0)
        };
        let (mut fresh, mut stale): (Vec<&(usize, ProcessRef, u64, u32)>, Vec<_>) = found
            .iter()
            .filter(|f| Walked::due(self.walked.get(&f.1.pid), f.1, f.2))
            .partition(|f| !unchanged(self.walked.get(&f.1.pid), f));
        fresh.sort_by_key(|f| f.2);
        stale.sort_by_key(|f| self.walked.get(&f.1.pid).map(|w| w.at));
        let budgets = self.budgets;
        let want = |count: u64| match usize::try_from(count) {
            Ok(0) | Err(_) => budgets.per_process,
            Ok(n) => n.min(budgets.per_process),
        };
        let mut left = budgets.per_scan;
        for &(j, process, count, _) in fresh {
            if want(count) > left {
                let known = self.walked.get(&process.pid).is_some_and(|w| w.process == process);
                if !known {
                    let why = format!(
                        "its processes hold more descriptors than one scan reads ({}); the rest are read at the \
                         next scans",
                        budgets.per_scan
                    );
                    partly[j].entry(Partly::Waiting).or_insert(why);
                }
                continue;
            }
            left -= self.read(process, count).min(left);
        }
        let most = budgets.per_process.max(budgets.refresh);
        self.refresh_credit = (self.refresh_credit + budgets.refresh).min(most);
        for &(_, process, count, _) in stale {
            if want(count) > self.refresh_credit {
                break;
            }
            self.refresh_credit -= self.read(process, count).min(self.refresh_credit);
        }
        // Whether read now or before: a process holding more than its budget was read in part.
        for &(j, process, count, _) in found {
            let Some(walked) = self.walked.get(&process.pid).filter(|w| w.process == process) else { continue };
            let most = self.budgets.per_process;
            // Before kernel 6.2 the count is not said (0): a read that stopped at the budget with more left tells.
            let held = if count > most as u64 {
                Some(count.to_string())
            } else {
                walked.more.then(|| format!("more than {most}"))
            };
            if let Some(held) = held {
                let why = format!(
                    "process {} holds {held} descriptors, the first {most} read; sockets past them are not watched",
                    process.pid
                );
                partly[j].entry(Partly::Descriptors).or_insert(why);
            }
        }
    }

    /// Reads the descriptors of `process`, which holds `count`, up to one process's budget; returns how many
    /// were read.
    fn read(&mut self, process: ProcessRef, count: u64) -> usize {
        let (inodes, read, more) = socket_inodes(process.pid, self.budgets.per_process);
        self.reads += read as u64;
        let before = self.walked.get(&process.pid).filter(|w| w.process == process);
        let same = before.filter(|w| w.inodes == inodes).map_or(0, |w| w.same.saturating_add(1));
        // A process that exited meanwhile is dropped at the next scan.
        self.walked.insert(process.pid, Walked { process, count, inodes, at: Instant::now(), same, more });
        read
    }

    /// The TCP sockets of each network namespace in `processes` ((namespace, a process in it)), up to the
    /// budget's count of namespaces: inode to local port. A namespace whose sockets cannot be read, or not all of
    /// them, is said once.
    fn sockets(&mut self, processes: impl Iterator<Item = (u32, i32)>) -> HashMap<u32, HashMap<u64, u16>> {
        let mut readers: Vec<(u32, i32)> = Vec::new();
        let mut seen = HashSet::new();
        for (netns, pid) in processes {
            if seen.insert(netns) {
                readers.push((netns, pid));
            }
        }
        // The agent's own namespace (most jobs') first.
        readers.sort_by_key(|r| Some(r.0) != self.own_netns);
        readers.truncate(self.budgets.namespaces);
        let mut out = HashMap::new();
        for (netns, pid) in readers {
            let dump = if Some(netns) == self.own_netns { diag::open() } else { open_in(netns, pid) }
                .and_then(|d| diag::tcp(&d, self.budgets.sockets));
            let ports = match dump {
                Ok(dump) => {
                    if dump.capped && self.said_netns.insert(netns) {
                        log::warn!(
                            "dcs: network namespace {netns} holds more than {} TCP sockets; only the first {} are \
                             matched to jobs (sockets past them are not watched)",
                            self.budgets.sockets,
                            self.budgets.sockets
                        );
                    }
                    dump.sockets.into_iter().map(|s| (s.inode, s.port)).collect()
                }
                Err(e) => {
                    if self.said_netns.insert(netns) {
                        log::warn!(
                            "dcs: cannot read the TCP sockets of network namespace {netns} (process {pid}'s): {e}; \
                             the sockets of its jobs are not watched"
                        );
                    }
                    HashMap::new()
                }
            };
            out.insert(netns, ports);
        }
        self.said_netns.retain(|n| out.contains_key(n));
        out
    }

    /// Says once per job and reason why it was partly scanned; forgets the jobs no longer watched.
    fn say(&mut self, jobs: &[Watched], partly: Vec<HashMap<Partly, String>>) {
        for (job, reasons) in jobs.iter().zip(partly) {
            let said = self.said.entry(job.name.clone()).or_default();
            let mut reasons: Vec<(Partly, String)> = reasons.into_iter().filter(|(r, _)| !said.contains(r)).collect();
            reasons.sort_by_key(|(r, _)| *r as u8);
            for (reason, why) in reasons {
                log::warn!("dcs: job {} only partly scanned: {why}", job.name);
                said.insert(reason);
            }
        }
        self.said.retain(|name, _| jobs.iter().any(|j| &j.name == name));
    }
}

/// How many descriptors process `pid` holds (`stat` of `/proc/PID/fd` says, kernel 6.2 on; 0 before), or `None`
/// if it is gone.
fn descriptors(pid: i32) -> Option<u64> {
    std::fs::metadata(format!("/proc/{pid}/fd")).ok().map(|m| m.size())
}

/// The network namespace of `/proc/<which>` (a process ID, or `thread-self`).
fn netns_of(which: &str) -> Option<u32> {
    let target = std::fs::read_link(format!("/proc/{which}/ns/net")).ok()?;
    target.to_str()?.strip_prefix("net:[")?.strip_suffix(']')?.parse().ok()
}

/// Inodes of the sockets among the first `most` descriptors of process `pid`, how many descriptors were read, and
/// whether it holds more than those.
fn socket_inodes(pid: i32, most: usize) -> (Vec<u64>, usize, bool) {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return (Vec::new(), 0, false) };
    let mut entries = dir.flatten();
    let mut read = 0;
    let mut inodes = Vec::new();
    for entry in entries.by_ref().take(most) {
        read += 1;
        let Ok(target) = std::fs::read_link(entry.path()) else { continue };
        let inode: Option<u64> =
            target.to_str().and_then(|t| t.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok());
        inodes.extend(inode);
    }
    // One more name listed (no link read) says whether the budget left some out.
    let more = entries.next().is_some();
    (inodes, read, more)
}

/// A socket-diagnostics socket in network namespace `netns`, which process `pid` is in: made by a short-lived
/// thread that enters the namespace (the socket stays in it), so that the scanning thread never leaves its own.
fn open_in(netns: u32, pid: i32) -> std::io::Result<OwnedFd> {
    let ns = File::open(format!("/proc/{pid}/ns/net"))?;
    // The process may have moved, or its ID gone to another, since its namespace was read.
    if ns.metadata()?.ino() != u64::from(netns) {
        return Err(std::io::Error::other(format!("process {pid} left the namespace")));
    }
    std::thread::scope(|s| {
        let entered = std::thread::Builder::new().name("lockstep-dcs-ns".into()).spawn_scoped(s, || {
            // SAFETY: setns(2) of this thread only, to the namespace file we hold open.
            if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            diag::open()
        })?;
        entered.join().unwrap_or_else(|_| Err(std::io::Error::other("the namespace thread panicked")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> i32 {
        std::process::id() as i32
    }

    fn watched(name: &str, pids: Vec<i32>) -> Watched {
        Watched { name: name.parse().unwrap(), slot: 0, pids, new: false }
    }

    #[test]
    fn a_listening_socket_of_this_process_is_found_with_its_port() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut scanner = Scanner::new(Budgets::default());
        let found = scanner.scan(&[watched("a", vec![me()]), watched("b", vec![i32::MAX])]);
        assert!(found[0].owners.iter().any(|(k, pids)| k.port == port && pids == &[me()]), "{:?}", found[0].owners);
        assert!(found[0].threads[&me()].iter().any(|t| t.pid == me()));
        assert!(found[1].owners.is_empty() && found[1].threads.is_empty());
    }

    #[test]
    fn the_count_of_descriptors_is_what_the_kernel_says() {
        // Kernel 6.2 on: the size of /proc/PID/fd is the count of open descriptors (of an idle child: this
        // process's other tests open and close their own meanwhile).
        let mut child = holder(1, 10);
        ports_of(&mut child);
        let pid = child.id() as i32;
        let listed = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count() as u64;
        assert!(listed >= 11);
        assert_eq!(descriptors(pid), Some(listed));
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(descriptors(i32::MAX), None);
    }

    /// A child process holding `sockets` listening sockets and `files` more descriptors, until killed.
    fn holder(sockets: usize, files: usize) -> std::process::Child {
        holder_in(&[], "127.0.0.1", sockets, files)
    }

    /// [`holder`] run by `prefix` (e.g. `unshare --net`), its sockets on address `host`.
    fn holder_in(prefix: &[&str], host: &str, sockets: usize, files: usize) -> std::process::Child {
        let script = format!(
            "import socket,os,sys\nls=[socket.create_server(('{host}',0)) for _ in range({sockets})]\n\
             fs=[os.open('/dev/null',os.O_RDONLY) for _ in range({files})]\nprint(' '.join(str(l.getsockname()[1]) \
             for l in ls),flush=True)\nsys.stdin.read()"
        );
        let (program, args) = prefix.split_first().unwrap_or((&"python3", &[]));
        let python: &[&str] = if prefix.is_empty() { &[] } else { &["python3"] };
        std::process::Command::new(program)
            .args(args)
            .args(python)
            .args(["-c", &script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }

    fn ports_of(child: &mut std::process::Child) -> Vec<u16> {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        line.split_whitespace().map(|p| p.parse().unwrap()).collect()
    }

    #[test]
    fn a_process_whose_count_did_not_change_is_not_read_again() {
        let mut child = holder(2, 50);
        let ports = ports_of(&mut child);
        let pid = child.id() as i32;
        let mut scanner = Scanner::new(Budgets::default());
        let jobs = [watched("a", vec![pid])];
        let first = scanner.scan(&jobs);
        let reads = scanner.reads;
        assert!(reads >= 52, "only {reads} descriptors read");
        for _ in 0..3 {
            let again = scanner.scan(&jobs);
            assert_eq!(again[0].owners, first[0].owners);
        }
        assert_eq!(scanner.reads, reads, "a process whose count did not change was read again");
        let found: Vec<u16> = first[0].owners.keys().map(|k| k.port).collect();
        assert!(ports.iter().all(|p| found.contains(p)), "{ports:?} not all in {found:?}");
        let _ = child.kill();
        let _ = child.wait();
        assert!(scanner.scan(&jobs)[0].owners.is_empty());
        assert!(scanner.walked.is_empty(), "a process gone is forgotten");
    }

    #[test]
    fn a_process_whose_count_changes_but_not_its_sockets_is_read_less_and_less_often() {
        let mut child = holder(1, 100);
        ports_of(&mut child);
        let pid = child.id() as i32;
        let mut scanner = Scanner::new(Budgets::default());
        let jobs = [watched("a", vec![pid])];
        scanner.scan(&jobs);
        // A cheap one is read at every change.
        let mut cheap = holder(1, 5);
        ports_of(&mut cheap);
        let cheap_pid = cheap.id() as i32;
        let cheap_jobs = [watched("b", vec![cheap_pid])];
        let mut cheap_scanner = Scanner::new(Budgets::default());
        for n in 1..=4 {
            cheap_scanner.scan(&cheap_jobs);
            assert_eq!(cheap_scanner.reads, n * descriptors(cheap_pid).unwrap());
            cheap_scanner.walked.get_mut(&cheap_pid).unwrap().count += 1;
        }
        let _ = cheap.kill();
        let _ = cheap.wait();
        // Its count changes (as if it opened a file): read again at once, finding the same sockets.
        let changed = |s: &mut Scanner| s.walked.get_mut(&pid).unwrap().count += 1;
        let each = scanner.reads;
        changed(&mut scanner);
        scanner.scan(&jobs);
        assert_eq!(scanner.reads, 2 * each);
        assert_eq!(scanner.walked[&pid].same, 1);
        // Changed again: not read before CALMER has passed since, then read.
        changed(&mut scanner);
        scanner.scan(&jobs);
        assert_eq!(scanner.reads, 2 * each, "read again before {CALMER:?}");
        scanner.walked.get_mut(&pid).unwrap().at -= CALMER;
        scanner.scan(&jobs);
        assert_eq!(scanner.reads, 3 * each);
        // Twice as long the next time.
        changed(&mut scanner);
        scanner.walked.get_mut(&pid).unwrap().at -= CALMER;
        scanner.scan(&jobs);
        assert_eq!(scanner.reads, 3 * each, "read again before {:?}", CALMER * 2);
        scanner.walked.get_mut(&pid).unwrap().at -= CALMER;
        scanner.scan(&jobs);
        assert_eq!(scanner.reads, 4 * each);
        // Sockets that changed make the next change read at once again.
        scanner.walked.get_mut(&pid).unwrap().inodes.clear();
        changed(&mut scanner);
        scanner.walked.get_mut(&pid).unwrap().at -= CALMER * 4;
        scanner.scan(&jobs);
        assert_eq!(scanner.walked[&pid].same, 0);
        changed(&mut scanner);
        scanner.scan(&jobs);
        assert_eq!(scanner.reads, 6 * each);
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn one_process_is_read_up_to_its_budget_and_one_scan_up_to_its_own() {
        // Sockets first: they are among the first descriptors.
        let mut big = holder(1, 300);
        let mut small = holder(1, 5);
        let (big_port, small_port) = (ports_of(&mut big)[0], ports_of(&mut small)[0]);
        let budgets = Budgets { per_process: 100, per_scan: 150, ..Budgets::default() };
        let mut scanner = Scanner::new(budgets);
        let (big_pid, small_pid) = (big.id() as i32, small.id() as i32);
        let jobs = [watched("big", vec![big_pid]), watched("small", vec![small_pid])];
        // The small one first (fewest descriptors), whole; then the big one's first 100 (of the 150 a scan reads).
        let found = scanner.scan(&jobs);
        assert_eq!(scanner.reads, 100 + descriptors(small_pid).unwrap(), "{} read", scanner.reads);
        assert!(found[0].owners.keys().any(|k| k.port == big_port));
        assert!(found[1].owners.keys().any(|k| k.port == small_port));
        assert_eq!(scanner.said[&"big".parse::<JobKey>().unwrap()], HashSet::from([Partly::Descriptors]));
        assert!(scanner.said[&"small".parse::<JobKey>().unwrap()].is_empty());
        // Two new big ones: the second waits for the next scan, and is read then.
        let mut other = holder(1, 300);
        let other_port = ports_of(&mut other)[0];
        let mut scanner = Scanner::new(budgets);
        let jobs = [watched("big", vec![big_pid, other.id() as i32])];
        let found = scanner.scan(&jobs);
        assert_eq!(scanner.reads, 100, "read past the scan's budget");
        assert_eq!(found[0].owners.len(), 1, "{:?}", found[0].owners);
        assert_eq!(
            scanner.said[&"big".parse::<JobKey>().unwrap()],
            HashSet::from([Partly::Descriptors, Partly::Waiting])
        );
        let found = scanner.scan(&jobs);
        assert_eq!(scanner.reads, 200);
        let ports: HashSet<u16> = found[0].owners.keys().map(|k| k.port).collect();
        assert_eq!(ports, HashSet::from([big_port, other_port]));
        // Nothing changed: nothing read.
        scanner.scan(&jobs);
        assert_eq!(scanner.reads, 200);
        for mut c in [big, small, other] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    #[test]
    fn a_process_that_did_not_change_is_read_again_as_the_refresh_credit_allows() {
        let mut child = holder(1, 80);
        ports_of(&mut child);
        let pid = child.id() as i32;
        let budgets = Budgets { per_process: 100, refresh: 30, ..Budgets::default() };
        let mut scanner = Scanner::new(budgets);
        let jobs = [watched("a", vec![pid])];
        scanner.scan(&jobs);
        let each = scanner.reads;
        assert!(each > 80 && each <= 100, "{each} read");
        // Due again only because REFRESH passed: 60 of credit after two scans, not enough for its 80-odd; 90 at the
        // next scan.
        scanner.walked.get_mut(&pid).unwrap().at -= REFRESH;
        scanner.scan(&jobs);
        assert_eq!(scanner.reads, each, "read again with less credit than it holds");
        scanner.scan(&jobs);
        assert_eq!(scanner.reads, 2 * each);
        // A change is read as before, whatever the credit (spent now).
        scanner.walked.get_mut(&pid).unwrap().count += 1;
        scanner.walked.get_mut(&pid).unwrap().at -= CALMER;
        scanner.scan(&jobs);
        assert_eq!(scanner.reads, 3 * each);
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn processes_and_threads_past_the_budgets_are_left_out() {
        let budgets = Budgets { processes: 1, threads: 1, ..Budgets::default() };
        let mut scanner = Scanner::new(budgets);
        let found = scanner.scan(&[watched("a", vec![me(), me()])]);
        assert_eq!(found[0].threads[&me()].len(), 1);
        assert_eq!(scanner.said[&"a".parse::<JobKey>().unwrap()], HashSet::from([Partly::Processes, Partly::Threads]));
    }

    #[test]
    fn sockets_in_another_network_namespace_are_read_there_within_the_budget() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: a network namespace of its own needs root");
            return;
        }
        let mut child = holder_in(&["unshare", "--net"], "", 1, 0);
        let port = ports_of(&mut child)[0];
        let pid = child.id() as i32;
        let netns = netns_of(&pid.to_string()).unwrap();
        let jobs = [watched("a", vec![pid])];
        let found = Scanner::new(Budgets::default()).scan(&jobs);
        assert_ne!(Some(netns), netns_of("thread-self"));
        assert_eq!(found[0].owners.keys().copied().collect::<Vec<_>>(), vec![PortKey { netns, port }]);
        // The agent's own namespace first: with a budget of one, the other is left out and said.
        let mut scanner = Scanner::new(Budgets { namespaces: 1, ..Budgets::default() });
        let found = scanner.scan(&[watched("a", vec![pid]), watched("b", vec![me()])]);
        assert!(found[0].owners.is_empty());
        assert!(found[0].threads[&pid].iter().any(|t| t.pid == pid), "its threads are raised all the same");
        assert_eq!(scanner.said[&"a".parse::<JobKey>().unwrap()], HashSet::from([Partly::Namespaces]));
        assert!(scanner.said[&"b".parse::<JobKey>().unwrap()].is_empty());
        let _ = child.kill();
        let _ = child.wait();
    }
}
