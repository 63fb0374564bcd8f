//! The slot clock: the slot length, the slot the daemon is in and the node's row in force in it, how long the last
//! switch took, and how late each switch began after its boundary.

use std::time::Duration;

use lockstep_core::cosched::rows::{Place, Schedule};
use lockstep_core::cosched::slot;
use lockstep_proto::protocol::Histogram;

/// The bounds of the slot-switch lateness histogram, in seconds: 100 µs to 1 s.
const LATENESS_BOUNDS: [f64; 13] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0];

/// Where the daemon is on the wall clock's slots.
pub(super) struct Clock {
    /// The slot length.
    length: Duration,
    /// The slot of the last tick (slots are numbered from the epoch).
    current: u64,
    /// The rows of the node's cycle then.
    rows: u32,
    /// How long the last tick's switch took, in microseconds.
    last_apply_us: f64,
    /// How late each slot switch began after its boundary.
    lateness: Histogram,
}

impl Clock {
    /// A clock of slots of `length`, before its first tick.
    pub(super) fn new(length: Duration) -> Self {
        Self { length, current: 0, rows: 1, last_apply_us: 0.0, lateness: Histogram::new(&LATENESS_BOUNDS) }
    }

    /// The slot length.
    pub(super) fn length(&self) -> Duration {
        self.length
    }

    /// Makes slots `length` long from the next tick on.
    pub(super) fn set_length(&mut self, length: Duration) {
        self.length = length;
    }

    /// The slot that holds `now_ns` (nanoseconds since the epoch, [`slot::realtime_ns`]).
    pub(super) fn index(&self, now_ns: u64) -> u64 {
        slot::index(now_ns, self.length)
    }

    /// When slot `k` starts, in nanoseconds since the epoch.
    pub(super) fn start_ns(&self, k: u64) -> u64 {
        slot::start_ns(k, self.length)
    }

    /// The slot length in nanoseconds.
    pub(super) fn length_ns(&self) -> u64 {
        self.length.as_nanos() as u64
    }

    /// Enters slot `k`, `rows` the node's count of rows (its longest cycle).
    pub(super) fn enter(&mut self, k: u64, rows: u32) {
        self.current = k;
        self.rows = rows;
    }

    /// Notes that the slot's switch took `took`.
    pub(super) fn switched(&mut self, took: Duration) {
        self.last_apply_us = took.as_secs_f64() * 1e6;
    }

    /// Notes that a switch began `late_ns` after the boundary the loop waited for.
    pub(super) fn late(&mut self, late_ns: u64) {
        self.lateness.observe(late_ns as f64 / 1e9);
    }

    /// The place `schedule` holds in slot `k`: the one in force when the slot starts, so that every node of the job
    /// switches in the same slot.
    pub(super) fn place(&self, schedule: &Schedule, k: u64) -> Place {
        schedule.at(self.start_ns(k) / 1_000_000)
    }

    /// The slot of the last tick.
    pub(super) fn current(&self) -> u64 {
        self.current
    }

    /// The node's row in force in the current slot.
    pub(super) fn active_row(&self) -> u32 {
        (self.current % u64::from(self.rows.max(1))) as u32
    }

    /// The rows of the node's cycle.
    pub(super) fn rows(&self) -> u32 {
        self.rows
    }

    /// How long the last switch took, in microseconds.
    pub(super) fn last_apply_us(&self) -> f64 {
        self.last_apply_us
    }

    /// How late the switches began after their boundaries.
    pub(super) fn lateness(&self) -> &Histogram {
        &self.lateness
    }
}
