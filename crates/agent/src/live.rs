//! The live counts of MPI calls that make progress, which ranks publish when the PMPI profiler is loaded
//! (native/pmpi/lockstep_pmpi.c): each rank's count is in a 64-byte memory file of its own (`memfd_create`, labelled
//! `lockstep-pmpi`), which the rank holds open and mapped while it runs. The file is in no directory, so no other
//! user can plant, replace or hold it: the agent finds it through the rank itself, among the rank's open files
//! (`/proc/PID/fd`: CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH for another user's rank). Nothing at a name in a shared
//! directory is ever read, such as `/dev/shm/lockstep-pmpi.<pid>` where the profiler once published.
//!
//! A rank's open files are its user's to make. A descriptor is taken only if its link reads as the profiler's file
//! ([`LINK`]), and, looked at through an `O_PATH` handle (never opened as whatever else it may be by then), it is a
//! regular file of exactly [`LIVE_LEN`] bytes owned by the rank's owner whose bytes carry the profiler's magic and
//! the rank's start time, and the rank's ID still names the rank afterwards. Once found, a rank's file is held and
//! read in place (64 bytes) until the rank leaves the job; its count ends when the profiler clears the magic
//! (`MPI_Finalize`, exit).
//!
//! Until found, a rank is looked for again when its count of open files changed (the `stat` of `/proc/PID/fd`
//! gives it, kernel 6.2 on; at every scan before), and at least every [`AGAIN`]. A look reads at most
//! [`FDS_PER_RANK`] descriptors of a rank, and one scan at most [`FDS_PER_SCAN`] of one job (the other ranks wait
//! for the next scan); a rank that holds more is said once per job.

use lockstep_cgroup::procfs::Live as _;
use std::collections::HashMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::time::{Duration, Instant};

use lockstep_cgroup::procfs::ProcessRef;

/// Size of a rank's live file.
const LIVE_LEN: u64 = 64;

/// What a live file starts with.
const MAGIC: &[u8; 8] = b"LSPMPI1\0";

/// The link of a descriptor of the profiler's live file, as `/proc/PID/fd/N` reads.
const LINK: &str = "/memfd:lockstep-pmpi (deleted)";

/// Most descriptors of one rank read in one look: MPI ranks hold tens, and the profiler opens its file once
/// `MPI_Init` returns, at the lowest number free.
const FDS_PER_RANK: usize = 1024;

/// Most descriptors of one job's ranks read in one scan.
const FDS_PER_SCAN: usize = 4096;

/// How long a rank not found waits, at most, before it is looked for again while its count of open files stays
/// the same (a file closed and the profiler's opened between two looks leave the count as it was).
const AGAIN: Duration = Duration::from_secs(2);

/// What is known of one rank's live file.
enum Seen {
    /// Found: the file, held open.
    Found(File),
    /// Not found at the look at `at`, when the rank held `fds` descriptors (0 where the kernel does not say).
    Looked { fds: u64, at: Instant },
}

/// The live files of one job's ranks, by the ranks' identities.
#[derive(Default)]
pub(crate) struct Published {
    seen: HashMap<ProcessRef, Seen>,
    /// Whether a rank with more than [`FDS_PER_RANK`] descriptors was said.
    said_many: bool,
}

impl Published {
    /// The sum of the counts `ranks` (the job's ranks that preload the profiler) publish now, if any does, and
    /// how many of them publish.
    pub(crate) fn calls(&mut self, ranks: &[ProcessRef]) -> (Option<u64>, u32) {
        let mut seen = HashMap::with_capacity(ranks.len());
        let mut budget = FDS_PER_SCAN;
        let (mut calls, mut publishers) = (None, 0);
        for &rank in ranks {
            let s = match self.seen.remove(&rank) {
                Some(Seen::Found(file)) => Seen::Found(file),
                before => self.look_if_due(rank, before, &mut budget),
            };
            if let Seen::Found(file) = &s {
                if let Some(c) = read(file, rank.start) {
                    calls = Some(calls.unwrap_or(0) + c);
                    publishers += 1;
                }
            }
            seen.insert(rank, s);
        }
        self.seen = seen;
        (calls, publishers)
    }

    /// Looks for `rank`'s file if it is due ([`AGAIN`]) and `budget` allows; what is known of it after.
    fn look_if_due(&mut self, rank: ProcessRef, before: Option<Seen>, budget: &mut usize) -> Seen {
        let fds = descriptors(rank.pid);
        let due = match before {
            Some(Seen::Looked { fds: then, at }) => fds == 0 || fds != then || at.elapsed() >= AGAIN,
            _ => true,
        };
        if !due || *budget == 0 {
            return before.unwrap_or(Seen::Looked { fds: u64::MAX, at: Instant::now() });
        }
        let look = find(rank, (*budget).min(FDS_PER_RANK));
        *budget -= look.read;
        if look.more && look.file.is_none() && !self.said_many {
            self.said_many = true;
            log::info!(
                "auto: PID {} holds more than {FDS_PER_RANK} open files: its live MPI call count is looked for among \
                 its first {FDS_PER_RANK} only",
                rank.pid
            );
        }
        match look.file {
            Some(file) => Seen::Found(file),
            // A file of the profiler's not yet written, or a look the budget cut short: looked for at the next scan.
            None if look.early || look.more => Seen::Looked { fds: u64::MAX, at: Instant::now() },
            None => Seen::Looked { fds, at: Instant::now() },
        }
    }
}

/// How many descriptors process `pid` holds (`stat` of `/proc/PID/fd` says, kernel 6.2 on; 0 before or if gone).
fn descriptors(pid: i32) -> u64 {
    std::fs::metadata(format!("/proc/{pid}/fd")).map_or(0, |m| m.size())
}

/// What one look for a rank's file found.
struct Look {
    /// The rank's live file.
    file: Option<File>,
    /// How many descriptors were read.
    read: usize,
    /// Whether the rank holds more descriptors than were read.
    more: bool,
    /// Whether a file of the profiler's was there whose bytes did not (yet) name the rank.
    early: bool,
}

/// Looks for `rank`'s live file among its first `most` descriptors.
fn find(rank: ProcessRef, most: usize) -> Look {
    let mut look = Look { file: None, read: 0, more: false, early: false };
    let Ok(owner) = std::fs::metadata(format!("/proc/{}", rank.pid)).map(|m| m.uid()) else { return look };
    let Ok(dir) = std::fs::read_dir(format!("/proc/{}/fd", rank.pid)) else { return look };
    let mut entries = dir.flatten();
    for entry in entries.by_ref().take(most) {
        look.read += 1;
        if std::fs::read_link(entry.path()).is_ok_and(|l| l.as_os_str() == LINK) {
            match open_live(&entry.path(), owner) {
                Some(file) if read(&file, rank.start).is_some() && rank.alive() => {
                    look.file = Some(file);
                    return look;
                }
                _ => look.early = true,
            }
        }
    }
    look.more = entries.next().is_some();
    look
}

/// Opens the file `/proc/PID/fd/N` link `link` leads to, for reading, if it is a regular file of [`LIVE_LEN`] bytes
/// owned by `owner`: through an `O_PATH` handle, which opens nothing (a descriptor the process put there meanwhile
/// may be a device or a FIFO), then again through that handle once it is known to be such a file.
fn open_live(link: &std::path::Path, owner: u32) -> Option<File> {
    let handle = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_PATH).open(link).ok()?;
    let meta = handle.metadata().ok()?;
    if !meta.is_file() || meta.len() != LIVE_LEN || meta.uid() != owner {
        return None;
    }
    File::open(format!("/proc/self/fd/{}", handle.as_raw_fd())).ok()
}

/// The count in live file `file`, if it carries the magic and the start time `start`.
fn read(file: &File, start: u64) -> Option<u64> {
    let mut buf = [0u8; LIVE_LEN as usize];
    file.read_exact_at(&mut buf, 0).ok()?;
    parse_live(&buf, start)
}

/// The count in a live file's bytes, if they carry the magic and the start time `start`.
fn parse_live(buf: &[u8], start: u64) -> Option<u64> {
    let word = |i: usize| Some(u64::from_ne_bytes(buf.get(i * 8..i * 8 + 8)?.try_into().ok()?));
    (buf.get(..8)? == MAGIC && word(1)? == start).then_some(word(2)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(start: u64, calls: u64) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend(start.to_ne_bytes());
        b.extend(calls.to_ne_bytes());
        b.resize(LIVE_LEN as usize, 0);
        b
    }

    #[test]
    fn a_live_file_counts_only_with_its_magic_and_start_time() {
        assert_eq!(parse_live(&live(42, 7), 42), Some(7));
        assert_eq!(parse_live(&live(42, 7), 43), None);
        let mut bad = live(42, 7);
        bad[0] = b'X';
        assert_eq!(parse_live(&bad, 42), None);
        assert_eq!(parse_live(&bad[..20], 42), None);
        assert_eq!(parse_live(&[], 42), None);
    }

    /// A memory file of this process labelled `label` holding `bytes`.
    fn memfd(label: &str, bytes: &[u8]) -> File {
        let label = std::ffi::CString::new(label).unwrap();
        // SAFETY: memfd_create with a NUL-terminated label; a non-negative return is a descriptor we own.
        let fd = unsafe { libc::memfd_create(label.as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
        // SAFETY: fd was just returned to us and is owned by nothing else.
        let file = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        file.write_all_at(bytes, 0).unwrap();
        file
    }

    /// This process stands for a rank: what its own open files publish is found by its identity, and nothing else
    /// it holds is taken for its file (one test, so that no other test's files are among this process's).
    #[test]
    fn a_rank_s_own_live_file_is_found_through_it_and_nothing_else_is() {
        let me = ProcessRef::of(std::process::id() as i32).unwrap();
        let mut published = Published::default();
        // Files that are not the rank's live file, all held open by it: the right bytes in a file of a directory
        // (as planted at the old name), the profiler's label with another process's start time or too short, the
        // right bytes under another label, a FIFO.
        let dir = lockstep_scratch::tempdir().unwrap();
        let planted = dir.path().join("lockstep-pmpi.1");
        std::fs::write(&planted, live(me.start, 5)).unwrap();
        let _named = File::open(&planted).unwrap();
        let _other_start = memfd("lockstep-pmpi", &live(me.start + 1, 5));
        let _short = memfd("lockstep-pmpi", &live(me.start, 5)[..32]);
        let _other_label = memfd("lockstep-pmpx", &live(me.start, 5));
        let fifo = dir.path().join("lockstep-pmpi.2");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let _fifo = std::fs::OpenOptions::new().read(true).write(true).open(&fifo).unwrap();
        assert_eq!(published.calls(&[me]), (None, 0));
        // The profiler's file: found, then read in place as the count grows, until its magic is cleared.
        let real = memfd("lockstep-pmpi", &live(me.start, 7));
        let mut published = Published::default();
        assert_eq!(published.calls(&[me]), (Some(7), 1));
        real.write_all_at(&9u64.to_ne_bytes(), 16).unwrap();
        assert_eq!(published.calls(&[me]), (Some(9), 1));
        real.write_all_at(&[0], 0).unwrap();
        assert_eq!(published.calls(&[me]), (None, 0));
        // A rank that is gone (the same ID, another start time) is not read, and what was found of it is dropped.
        let gone = ProcessRef { start: me.start + 1, ..me };
        assert_eq!(published.calls(&[gone]), (None, 0));
        assert!(published.seen.values().all(|s| matches!(s, Seen::Looked { .. })));
    }
}
