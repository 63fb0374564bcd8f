//! Wall-clock slots: slot `k` covers `[k·L, (k+1)·L)` of `CLOCK_REALTIME`, so agents with synchronised clocks
//! switch together without talking.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use crate::error::UsageError;

/// Shortest slot.
pub const MIN: Duration = Duration::from_millis(10);
/// Longest slot.
pub const MAX: Duration = Duration::from_mins(1);
/// Slot length when none is given (the MPL paper).
pub const DEFAULT: Duration = Duration::from_secs(2);

/// Parses a slot length, the value of `what` (a flag or key), from 10 ms to 60 s (`200ms`, `2s`, `0.5s`).
pub fn parse(what: &str, text: &str) -> Result<Duration, UsageError> {
    crate::duration::within(what, text, MIN..=MAX)
}

/// Checks a slot length that came as a duration (the control protocol's `slot`): from 10 ms to 60 s.
pub fn check(what: &str, slot: Duration) -> Result<Duration, UsageError> {
    if (MIN..=MAX).contains(&slot) {
        return Ok(slot);
    }
    let (min, max) = (crate::duration::format(MIN), crate::duration::format(MAX));
    Err(UsageError::new(format!(
        "bad {what} {} (expected a duration from {min} to {max})",
        crate::duration::format(slot)
    )))
}

/// A shift of the clock slots are read from, in nanoseconds: the one seam through which a test steps the wall
/// clock (the agent sets it from the file `LOCKSTEP_CLOCK_SKEW_FILE` names; 0 otherwise).
static CLOCK_OFFSET_NS: AtomicI64 = AtomicI64::new(0);

/// Shifts the slots' clock by `ns` (see [`CLOCK_OFFSET_NS`]).
pub fn set_clock_offset(ns: i64) {
    // Relaxed: a single value, read on its own; nothing else is published with it.
    CLOCK_OFFSET_NS.store(ns, Ordering::Relaxed);
}

/// The clock shift in force.
fn clock_offset() -> i64 {
    CLOCK_OFFSET_NS.load(Ordering::Relaxed)
}

/// Nanoseconds since the epoch (`CLOCK_REALTIME`, shifted by the test seam).
pub fn realtime_ns() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    now.saturating_add_signed(clock_offset())
}

/// The slot that contains `now_ns`.
pub fn index(now_ns: u64, slot: Duration) -> u64 {
    now_ns / slot.as_nanos() as u64
}

/// Start of slot `k`, in nanoseconds since the epoch.
pub fn start_ns(k: u64, slot: Duration) -> u64 {
    k * slot.as_nanos() as u64
}

/// Sleeps until `deadline_ns` of `CLOCK_REALTIME` (absolute), or returns at once if it has passed.
pub fn sleep_until(deadline_ns: u64) {
    let deadline_ns = deadline_ns.saturating_add_signed(-clock_offset());
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `ts` is a valid timespec; a null remainder is allowed with TIMER_ABSTIME.
    while unsafe {
        libc::clock_nanosleep(libc::CLOCK_REALTIME, libc::TIMER_ABSTIME, &raw const ts, std::ptr::null_mut())
    } == libc::EINTR
    {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_that_came_as_a_duration_is_held_to_the_same_bounds() {
        let ms = Duration::from_millis;
        assert_eq!(check("slot", ms(200)).unwrap(), ms(200));
        assert_eq!(check("slot", Duration::from_micros(12_500)).unwrap(), Duration::from_micros(12_500));
        assert_eq!(check("slot", MIN).unwrap(), MIN);
        assert_eq!(check("slot", MAX).unwrap(), MAX);
        for d in [Duration::ZERO, Duration::from_micros(9_999), MAX + Duration::from_nanos(1), Duration::MAX] {
            let e = check("slot", d).unwrap_err().to_string();
            assert!(e.starts_with("bad slot ") && e.contains("expected a duration from 10ms to 1m"), "{e}");
        }
    }
}
