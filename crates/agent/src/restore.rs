//! What the restore journal names and how each is put back: a cgroup interface file (written back), or a
//! thread whose scheduling `dcs` changed. In the store and on the watchdog's pipe a target is one line of text:
//! the file's path, or `thread:<tid>:<start time>`.

use lockstep_cgroup::procfs::Live as _;
use std::io;
use std::path::{Path, PathBuf};

use lockstep_cgroup::knobs::is_freeze_file;

use crate::sched::{self, Sched, Thread};

/// Something the agent changed and must put back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A cgroup interface file.
    File(PathBuf),
    /// A thread's scheduling class and nice value.
    Thread(Thread),
}

/// How a thread target starts in its text form.
const THREAD_PREFIX: &str = "thread:";

impl Target {
    /// The text form (see the module doc).
    pub fn encode(&self) -> String {
        match self {
            Self::File(path) => path.to_string_lossy().into_owned(),
            Self::Thread(t) => format!("{THREAD_PREFIX}{}:{}", t.pid, t.start),
        }
    }

    /// Reads the text form; anything that is not a well-formed thread target is a file.
    pub fn decode(text: &str) -> Self {
        let thread = text.strip_prefix(THREAD_PREFIX).and_then(|rest| {
            let (tid, start) = rest.split_once(':')?;
            Some(Thread { pid: tid.parse().ok()?, start: start.parse().ok()? })
        });
        thread.map_or_else(|| Self::File(PathBuf::from(text)), Self::Thread)
    }

    /// The order targets are put back in: thaw first (no job stays frozen if a later write fails), then
    /// threads (a real-time budget cannot be taken from a group that still holds real-time threads), then the
    /// other files, deepest first (a parent group's budget only after its children's).
    pub fn order(&self) -> (u8, std::cmp::Reverse<usize>) {
        match self {
            Self::File(path) if is_freeze_file(path) => (0, std::cmp::Reverse(path.components().count())),
            Self::Thread(_) => (1, std::cmp::Reverse(0)),
            Self::File(path) => (2, std::cmp::Reverse(path.components().count())),
        }
    }

    /// Puts the target back to `value` (a file's contents, a thread's encoded [`Sched`]); gone is fine.
    pub fn put_back(&self, value: &str) -> io::Result<()> {
        let result = match self {
            Self::File(path) => std::fs::write(path, value),
            Self::Thread(thread) => restore_thread(*thread, value),
        };
        match result {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    /// Whether the target holds `value` now. A thread always counts as changed while it lives (its value is
    /// written back whatever it holds); a file or thread that is gone holds nothing to restore.
    pub fn holds(&self, value: &str) -> io::Result<bool> {
        match self {
            Self::File(path) => match std::fs::read_to_string(path) {
                Ok(current) => Ok(current.trim() == value),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(true),
                Err(e) => Err(e),
            },
            Self::Thread(thread) => Ok(!thread.alive()),
        }
    }
}

/// The file a target names, for cgroup files known as paths.
impl From<&Path> for Target {
    fn from(path: &Path) -> Self {
        Self::File(path.to_path_buf())
    }
}

/// Puts a thread back to `value`; a thread that is gone needs nothing.
fn restore_thread(thread: Thread, value: &str) -> io::Result<()> {
    let Some(want) = Sched::decode(value) else {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("bad thread entry {value:?}")));
    };
    match sched::change(&thread, None, &want) {
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
        other => other,
    }
}

/// Descriptors held for the way out: opened at start (`/dev/null`) and closed just before every job is restored
/// at stop, so that what the stop needs a new descriptor for (listing an ended job's processes, moving adopted
/// processes back, the store's last writes) finds room even when the agent has run out of them (a flood of
/// connections, a leak). The restore itself needs none: a thaw or an unboost writes through the descriptor opened
/// for the change, and an ended job's cgroup goes by `rmdir`.
pub struct Reserve(Vec<std::fs::File>);

impl Reserve {
    /// How many descriptors are held.
    const SIZE: usize = 16;

    /// Holds [`Reserve::SIZE`] descriptors.
    pub fn hold() -> io::Result<Self> {
        (0..Self::SIZE).map(|_| std::fs::File::open("/dev/null")).collect::<io::Result<_>>().map(Self)
    }

    /// Closes them, for the restore at stop to use.
    pub fn release(&mut self) {
        self.0.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_round_trip_and_restore_in_order() {
        let thread = Target::Thread(Thread { pid: 42, start: 1234 });
        assert_eq!(thread.encode(), "thread:42:1234");
        assert_eq!(Target::decode(&thread.encode()), thread);
        let weight = Target::decode("/sys/fs/cgroup/cpu/lockstep/a/cpu.shares");
        assert_eq!(weight, Target::File("/sys/fs/cgroup/cpu/lockstep/a/cpu.shares".into()));
        assert_eq!(Target::decode("thread:x:1"), Target::File("thread:x:1".into()));
        let freeze = Target::decode("/sys/fs/cgroup/freezer/lockstep/a/freezer.state");
        let parent = Target::decode("/sys/fs/cgroup/cpu/lockstep/cpu.rt_runtime_us");
        let mut all = [parent.clone(), weight.clone(), thread.clone(), freeze.clone()];
        all.sort_by_key(Target::order);
        assert_eq!(all, [freeze, thread, weight, parent]);
    }

    #[test]
    fn a_gone_thread_restores_to_nothing() {
        let me = Thread::threads_of(&[std::process::id() as i32]);
        let s = crate::sched::read(&me[0]).unwrap();
        let gone = Target::Thread(Thread { pid: me[0].pid, start: me[0].start + 1 });
        assert!(gone.put_back(&s.encode()).is_ok());
        assert!(gone.holds(&s.encode()).unwrap());
    }
}
