//! The daemon's status, published for the doors: the loop computes its full status once per tick and after each
//! change it carries out, and swaps it into a shared cell; the control socket answers every `status` from the
//! cell, filtered for the asker ([`visible_to`](super::status::visible_to)), without reaching the loop. The loop
//! never waits on the cell: it only tries its lock (held by a reader for a pointer's copy), and a status it could
//! not put there is put at its next wake.

use std::sync::{Arc, Mutex, PoisonError, TryLockError};

use super::state::Daemon;
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

    /// Puts `status` in the cell if its lock is free now; else keeps it for [`Publisher::retry`].
    fn publish(&mut self, status: Status) {
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

impl Daemon {
    /// Where the doors read the daemon's status.
    pub fn board(&self) -> Board {
        Board(self.publisher.cell.clone())
    }

    /// Publishes the status as it is now.
    pub(super) fn publish(&mut self) {
        let status = self.status();
        self.publisher.publish(status);
    }
}

#[cfg(test)]
mod tests {
    use super::Publisher;
    use lockstep_proto::protocol::Status;

    /// A status published while a reader holds the cell is not waited for: it is put there at the next retry.
    #[test]
    fn a_status_published_while_read_is_put_there_at_the_next_retry() {
        let status = |slot| Status { slot, ..Status::default() };
        let mut publisher = Publisher::new(status(1));
        let board = super::Board(publisher.cell.clone());
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

    /// What a user other than root reads from the board: their jobs, a count of the others, `auto`'s groups with
    /// the others' jobs unnamed, `dcs`'s jobs of theirs without the node-wide latencies; root reads it whole.
    #[test]
    fn a_user_reads_only_their_own_jobs_from_the_board() {
        use lockstep_core::cosched::auto::Choice;
        use lockstep_proto::protocol::{DcsJob, DcsStatus, JobStatus};
        let job = |name: &str, owner| JobStatus { name: name.into(), owner, ..JobStatus::default() };
        let group = |jobs: &[&str]| Choice {
            jobs: jobs.iter().map(|j| (*j).to_string()).collect(),
            policy: "gang".into(),
            trying: false,
            why: String::new(),
            rates: std::collections::BTreeMap::new(),
        };
        let dcs_job = |name: &str| DcsJob { name: name.into(), ..DcsJob::default() };
        let full = Status {
            jobs: vec![job("mine", 1000), job("root's", 0), job("theirs", 1001)],
            groups: vec![group(&["mine", "root's"]), group(&["root's", "theirs"])],
            dcs: Some(DcsStatus {
                latency_p99_us: 7.0,
                raises: 3,
                jobs: vec![dcs_job("mine"), dcs_job("theirs")],
                ..DcsStatus::default()
            }),
            ..Status::default()
        };
        let seen = super::super::visible_to(&full, Some(1000));
        let names = |jobs: &[JobStatus]| jobs.iter().map(|j| j.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&seen.jobs), ["mine"]);
        assert_eq!(seen.others, 2);
        assert_eq!(seen.groups.len(), 1);
        assert_eq!(seen.groups[0].jobs, ["mine", "(another user's job)"]);
        let dcs = seen.dcs.unwrap();
        assert_eq!(dcs.jobs.iter().map(|j| j.name.as_str()).collect::<Vec<_>>(), ["mine"]);
        assert_eq!((dcs.latency_p99_us, dcs.raises), (0.0, 3));
        let root = super::super::visible_to(&full, None);
        assert_eq!(serde_json::to_string(&root).unwrap(), serde_json::to_string(&full).unwrap());
    }
}
