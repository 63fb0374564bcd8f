//! The daemon's status, published for the doors: the loop computes its full status once per tick and after each
//! change it carries out, and swaps it into a shared cell; the control socket answers every `status` from the
//! cell, filtered for the asker (`visible_to`), without reaching the loop. The loop
//! never waits on the cell: it only tries its lock (held by a reader for a pointer's copy), and a status it could
//! not put there is put at its next wake.

use std::sync::{Arc, Mutex, PoisonError, TryLockError};

use lockstep_proto::protocol::Status;

/// Where the doors read the latest status.
#[derive(Clone)]
pub struct Board(Arc<Mutex<Arc<Status>>>);

impl Board {
    /// The latest status published.
    pub fn read(&self) -> Arc<Status> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// The loop's side of the [`Board`].
pub(super) struct Publisher {
    cell: Arc<Mutex<Arc<Status>>>,
    /// A status not yet put in the cell (a reader held its lock).
    pending: Option<Arc<Status>>,
}

impl Publisher {
    /// A board showing `status` (the daemon's at start).
    pub(super) fn new(status: Status) -> Self {
        Self { cell: Arc::new(Mutex::new(Arc::new(status))), pending: None }
    }

    /// Where the doors read what this publisher puts in the cell.
    pub(super) fn board(&self) -> Board {
        Board(self.cell.clone())
    }

    /// Puts `status` in the cell if its lock is free now; else keeps it for [`Publisher::retry`].
    pub(super) fn publish(&mut self, status: Status) {
        self.pending = Some(Arc::new(status));
        self.retry();
    }

    /// Puts the pending status in the cell if its lock is free now; whether one is still pending.
    pub(super) fn retry(&mut self) -> bool {
        let Some(status) = self.pending.take() else { return false };
        let mut cell = match self.cell.try_lock() {
            Ok(cell) => cell,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => {
                self.pending = Some(status);
                return true;
            }
        };
        let old = std::mem::replace(&mut *cell, status);
        drop(cell);
        // The old status is freed (when no reader holds it still) after the lock is given back.
        drop(old);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::Publisher;
    use lockstep_proto::protocol::Status;

    /// A status published while a reader holds the cell is not waited for: it is put there at the next retry.
    #[test]
    fn a_status_published_while_read_is_put_there_at_the_next_retry() {
        let status = |slot| Status { slot, ..Status::new("n1".parse().unwrap()) };
        let mut publisher = Publisher::new(status(1));
        let board = publisher.board();
        assert_eq!(board.read().slot, 1);
        publisher.publish(status(2));
        assert_eq!(board.read().slot, 2);
        let held = board.0.lock().unwrap();
        publisher.publish(status(3));
        assert!(publisher.retry(), "the cell is held: still pending");
        drop(held);
        assert!(!publisher.retry());
        assert_eq!(board.read().slot, 3);
    }
}
