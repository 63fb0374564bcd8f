//! The agent's and the watchdog's log: one line per event on stderr, after the name of the process that writes it
//! (`lockstep agent: `, `lockstep watchdog: `). Under systemd (stderr is the journal's stream, as `JOURNAL_STREAM`
//! says) each line starts with its syslog priority, `<4>` or `<6>`, and the journal stamps it; anywhere else each
//! starts with the UTC time, `2026-11-27T21:50:01.123Z`.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// How much a line matters, as syslog numbers it.
#[derive(Clone, Copy, Debug)]
pub enum Level {
    /// Something did not work, or works worse than asked (syslog `warning`).
    Warning = 4,
    /// A change of state, or a fact about the start (syslog `info`).
    Info = 6,
}

/// The name every line of this process starts with: the agent's unless [`speaker`] named another.
static SPEAKER: OnceLock<&'static str> = OnceLock::new();

/// Names the process whose lines follow (the watchdog names itself once, at its start).
pub fn speaker(name: &'static str) {
    let _ = SPEAKER.set(name);
}

/// Writes one line at `level`.
pub fn line(level: Level, text: std::fmt::Arguments) {
    let prefix = if to_journal() { format!("<{}>", level as u8) } else { format!("{} ", utc(SystemTime::now())) };
    let speaker = SPEAKER.get().copied().unwrap_or("lockstep agent");
    // One write per line, so that lines of different threads never interleave.
    let line = format!("{prefix}{speaker}: {text}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// A line at [`Level::Info`], formatted as by `format!`.
macro_rules! info {
    ($($arg:tt)*) => { $crate::log::line($crate::log::Level::Info, format_args!($($arg)*)) };
}

/// A line at [`Level::Warning`], formatted as by `format!`.
macro_rules! warning {
    ($($arg:tt)*) => { $crate::log::line($crate::log::Level::Warning, format_args!($($arg)*)) };
}

pub(crate) use {info, warning};

/// Whether stderr is the stream systemd connected to the journal (`JOURNAL_STREAM=DEVICE:INODE` names it).
fn to_journal() -> bool {
    static JOURNAL: OnceLock<bool> = OnceLock::new();
    *JOURNAL.get_or_init(|| {
        let Some(stream) = std::env::var_os("JOURNAL_STREAM") else { return false };
        let Some((dev, ino)) = stream.to_str().and_then(|s| s.split_once(':')) else { return false };
        let stderr = std::io::stderr();
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: fstat writes a stat into `st`; it is read only when fstat succeeded.
        if unsafe { libc::fstat(stderr.as_raw_fd(), st.as_mut_ptr()) } != 0 {
            return false;
        }
        // SAFETY: fstat succeeded, so `st` is initialised.
        let st = unsafe { st.assume_init() };
        dev.parse() == Ok(st.st_dev) && ino.parse() == Ok(st.st_ino)
    })
}

/// `time` as an RFC 3339 UTC timestamp with milliseconds.
fn utc(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, of_day) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60,
        since.subsec_millis()
    )
}

/// The proleptic Gregorian date of `days` since 1970-01-01: counted in 400-year eras of 146 097 days that start
/// on a 1 March, so that the leap day is the last day of its year.
fn civil(days: u64) -> (u64, u64, u64) {
    let shifted = days + 719_468; // days from 0000-03-01 to 1970-01-01
    let era = shifted / 146_097;
    let of_era = shifted % 146_097;
    let year_of_era = (of_era - of_era / 1460 + of_era / 36_524 - of_era / 146_096) / 365;
    let of_year = of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * of_year + 2) / 153;
    let day = of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 { month_from_march + 3 } else { month_from_march - 9 };
    let year = era * 400 + year_of_era + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::utc;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn stamps_are_utc_dates() {
        let at = |s: u64, ms: u64| utc(UNIX_EPOCH + Duration::from_secs(s) + Duration::from_millis(ms));
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(at(1_795_631_761, 887), "2026-11-25T18:36:01.887Z");
        assert_eq!(at(4_107_456_000, 0), "2100-02-28T00:00:00.000Z");
        assert_eq!(at(4_107_542_400, 0), "2100-03-01T00:00:00.000Z");
    }
}
