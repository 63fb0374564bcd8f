//! A door's spare descriptor: one kept open (on /dev/null) from the start so that, when the agent or the system
//! is out of descriptors, the door can still take the connection waiting in its backlog (in the spare's place),
//! answer it at once ("busy", or served when root asks) and close it, rather than leave the caller waiting.

use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a door waits before accepting again when it is out of descriptors and its spare is lent or gone:
/// the waiting connections stay queued in the kernel, and a loop that retried at once would spin.
const BACKOFF: Duration = Duration::from_millis(100);

/// The spare descriptor of one door, and whether running out was said.
pub struct Spare {
    door: &'static str,
    file: Arc<Mutex<Option<File>>>,
    said: AtomicBool,
}

/// The spare's place, lent to one connection: the spare is opened again when it is dropped.
pub struct Room(Arc<Mutex<Option<File>>>);

impl Spare {
    /// The spare of door `door` (named in the log), opened now.
    pub fn new(door: &'static str) -> Self {
        Self { door, file: Arc::new(Mutex::new(open())), said: AtomicBool::new(false) }
    }

    /// A connection was accepted: the episode of running out, if any, is over, and the spare is opened again if
    /// it could not be.
    pub fn ok(&self) {
        if self.said.swap(false, Ordering::Relaxed) {
            log::info!("{}: accepting connections again", self.door);
        }
        refill(&self.file);
    }

    /// Accepting failed with `e`. When it failed for want of descriptors: the spare closed and its place lent
    /// (the caller accepts in it at once), or, when there is no spare to close, `None` after a pause. Said once
    /// an episode.
    pub async fn out(&self, e: &std::io::Error) -> Option<Room> {
        if !matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)) {
            return None;
        }
        if !self.said.swap(true, Ordering::Relaxed) {
            log::warn!(
                "{}: cannot accept a connection ({e}); each caller is answered \"busy\" (root's served) in a spare \
                 descriptor's place until descriptors are free again",
                self.door
            );
        }
        let taken = self.file.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(file) = taken {
            drop(file);
            return Some(Room(self.file.clone()));
        }
        refill(&self.file);
        tokio::time::sleep(BACKOFF).await;
        None
    }
}

impl Room {
    /// A connection was accepted in this place: the place again, to answer it in, while the agent is still out
    /// of descriptors; `None` when it no longer is (the spare opened again: the connection is served as any).
    /// A door out of descriptors is refused by `accept` whether or not a connection waits, so its spare may be
    /// lent long before the next one comes.
    pub fn settle(self, spare: &Spare) -> Option<Self> {
        refill(&spare.file);
        let open = spare.file.lock().unwrap_or_else(std::sync::PoisonError::into_inner).is_some();
        if open {
            spare.ok();
            return None;
        }
        Some(self)
    }
}

impl Drop for Room {
    fn drop(&mut self) {
        refill(&self.0);
    }
}

/// The spare, opened again if it is not open (it stays closed while no descriptor is free).
fn refill(spare: &Mutex<Option<File>>) {
    let mut file = spare.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if file.is_none() {
        *file = open();
    }
}

/// /dev/null, opened for nothing but to hold a descriptor's place.
fn open() -> Option<File> {
    File::open("/dev/null").ok()
}
