//! What the daemon gives the store's writer (`crate::writer`), which writes it off the loop: its own records (the
//! jobs it manages, the Slurm jobs the prologs announced) at once, its decisions and `auto`'s choices in batches
//! kept in its [`Outbox`].

use std::time::{Duration, Instant};

use crate::journal::Journal;
use crate::writer::Writer;
use lockstep_core::cosched::auto::Choice;
use lockstep_store::Decision;

/// How often decisions go to the writer (they are batched: one transaction per interval, not per slot).
const LOG_INTERVAL: Duration = Duration::from_secs(1);

/// Decisions and `auto`'s choices not yet given to the writer (they go in batches, every [`LOG_INTERVAL`]), and
/// when they last went.
pub(super) struct Outbox {
    /// Decisions not yet given.
    decisions: Vec<Decision>,
    /// What `auto` chose or started trying, not yet given (time, record).
    choices: Vec<(f64, Choice)>,
    /// When decisions last went.
    last_flush: Instant,
}

impl Outbox {
    /// An empty outbox, flushed now.
    pub(super) fn new() -> Self {
        Self { decisions: Vec::new(), choices: Vec::new(), last_flush: Instant::now() }
    }

    /// Keeps `decisions` for the next flush.
    pub(super) fn decide(&mut self, decisions: impl IntoIterator<Item = Decision>) {
        self.decisions.extend(decisions);
    }

    /// Keeps `auto`'s `choice`, made at `time` (seconds since the epoch), for the next flush.
    pub(super) fn choose(&mut self, time: f64, choice: Choice) {
        self.choices.push((time, choice));
    }

    /// Whether the decisions are due to go to the writer ([`LOG_INTERVAL`] since the last flush).
    pub(super) fn due(&self) -> bool {
        self.last_flush.elapsed() >= LOG_INTERVAL
    }

    /// Gives `writer` the decisions, the `journal`'s removals and `auto`'s choices, to be written together.
    pub(super) fn flush(&mut self, writer: &Writer, journal: &mut Journal) {
        writer.batch(std::mem::take(&mut self.decisions), journal.take_restored(), std::mem::take(&mut self.choices));
        self.last_flush = Instant::now();
    }
}
