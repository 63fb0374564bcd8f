//! The daemon's beat for the watchdog: when it last beat, and the test seam for wall-clock steps that is read
//! again at every beat.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::journal::Journal;
use crate::watchdog;
use lockstep_core::cosched::slot;

/// When the loop last beat, and what it reads at each beat.
pub(super) struct Pulse {
    /// When the loop last beat for the watchdog.
    last: Instant,
    /// The file `LOCKSTEP_CLOCK_SKEW_FILE` names, if set and trusted: the test seam for wall-clock steps.
    clock_skew_file: Option<PathBuf>,
}

impl Pulse {
    /// A pulse that beat now, reading `clock_skew_file` at each beat.
    pub(super) fn new(clock_skew_file: Option<PathBuf>) -> Self {
        Self { last: Instant::now(), clock_skew_file }
    }

    /// Whether it is time to beat ([`watchdog::BEAT_INTERVAL`] since the last beat).
    pub(super) fn due(&self) -> bool {
        self.last.elapsed() >= watchdog::BEAT_INTERVAL
    }

    /// Beats for the watchdog through `journal` (which starts a new one if it died), and reads the clock seam
    /// again. Returns the gap since the last beat when it was longer than the watchdog waits
    /// ([`watchdog::BEAT_TIMEOUT`]): the watchdog has put every job back meanwhile.
    pub(super) fn beat(&mut self, journal: &mut Journal) -> Option<Duration> {
        let gap = self.last.elapsed();
        journal.heartbeat();
        self.last = Instant::now();
        if let Some(file) = &self.clock_skew_file {
            // Nanoseconds to add to the clock, re-read at every beat.
            if let Some(ns) = read_small(file).and_then(|t| t.trim().parse::<i64>().ok()) {
                slot::set_clock_offset(ns);
            }
        }
        (gap >= watchdog::BEAT_TIMEOUT).then_some(gap)
    }
}

/// The first 64 bytes of regular file `file` as text, read without following a link or blocking on a FIFO.
fn read_small(file: &std::path::Path) -> Option<String> {
    use std::io::Read;
    let (f, _) = lockstep_core::trust::open_regular(file)?;
    let mut text = String::new();
    f.take(64).read_to_string(&mut text).ok()?;
    Some(text)
}
