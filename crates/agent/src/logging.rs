//! The agent's and the watchdog's log, written through the `log` facade by `env_logger`: one line per event on
//! stderr, after the name of the process that writes it (`lockstep agent: `, `lockstep watchdog: `).
//!
//! Under systemd (stderr is the journal's stream, as `JOURNAL_STREAM` says) each line starts with its syslog
//! priority (`<3>` error, `<4>` warning, `<6>` info, `<7>` debug and trace), which the journal files the line under
//! (`journalctl -p warning`), and the journal stamps it; anywhere else each starts with the UTC time and the level,
//! `2026-11-27T21:50:01.123Z WARN  lockstep agent: …`. `LOCKSTEP_LOG` chooses what is written, in `env_logger`'s
//! syntax, in place of the default as `RUST_LOG` does (`warn`: warnings and errors only; `warn,lockstepd::setup=info`;
//! a target matches by prefix, and one no directive matches is not written); unset or empty, the agent's lines
//! from `info` up and other crates' from `warn` up.

use std::io::Write;
use std::os::fd::AsRawFd;

use log::{Level, LevelFilter};

/// The variable that chooses which lines are written (`env_logger`'s filter syntax).
pub const FILTER_VAR: &str = "LOCKSTEP_LOG";

/// Starts the log of this process, whose lines are spoken by `speaker` (`lockstep agent`, `lockstep watchdog`).
/// A second call in one process changes nothing.
pub fn init(speaker: &'static str) {
    let journal = to_journal();
    let mut builder = env_logger::Builder::new();
    match std::env::var(FILTER_VAR) {
        Ok(filter) if !filter.trim().is_empty() => builder.parse_filters(&filter),
        _ => builder.filter_level(LevelFilter::Warn).filter_module(env!("CARGO_CRATE_NAME"), LevelFilter::Info),
    };
    builder.target(env_logger::Target::Stderr).format(move |out, record| {
        let said = record.args().to_string();
        let text = one_line(&said);
        if journal {
            writeln!(out, "<{}>{speaker}: {text}", priority(record.level()))
        } else {
            writeln!(out, "{} {:<5} {speaker}: {text}", out.timestamp_millis(), record.level())
        }
    });
    let _ = builder.try_init();
}

/// The longest text a line carries, in bytes: with its prefix, one line stays one write of at most `PIPE_BUF`
/// (4096) bytes, which the kernel never interleaves with the other process's (agent and watchdog share stderr).
const LINE_MAX: usize = 3968;

/// `text` as one line: a line may quote what users control (a Slurm field, a path, a process's name), and a
/// newline there would start a line of their own, with a priority of their choosing under the journal
/// ([`lockstep_core::error::printable`], cut at [`LINE_MAX`]).
fn one_line(text: &str) -> std::borrow::Cow<'_, str> {
    lockstep_core::error::printable(text, LINE_MAX)
}

/// The syslog priority (RFC 5424's severity) the journal files a line of `level` under.
fn priority(level: Level) -> u8 {
    match level {
        Level::Error => 3,
        Level::Warn => 4,
        Level::Info => 6,
        Level::Debug | Level::Trace => 7,
    }
}

/// Whether stderr is the stream systemd connected to the journal (`JOURNAL_STREAM=DEVICE:INODE` names it).
fn to_journal() -> bool {
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
}

#[cfg(test)]
mod tests {
    use super::{one_line, priority};
    use log::Level;

    #[test]
    fn a_quoted_newline_cannot_start_a_line() {
        assert_eq!(one_line("job x ended"), "job x ended");
        assert_eq!(
            one_line("Slurm job 7: comment \"a\n<0>forged\"\r\u{1b}[2J"),
            "Slurm job 7: comment \"a\\n<0>forged\"\\r\\u{1b}[2J"
        );
        assert_eq!(one_line("tab\there, ünïcode kept"), "tab\\there, ünïcode kept");
    }

    #[test]
    fn a_long_text_is_cut_at_a_character_and_says_so() {
        let long = "é".repeat(3000);
        let line = one_line(&long);
        let kept = line.split(" … (").next().unwrap();
        assert!(kept.len() <= super::LINE_MAX && kept.chars().all(|c| c == 'é'), "{}", kept.len());
        assert_eq!(line.strip_prefix(kept).unwrap(), format!(" … ({} bytes cut)", long.len() - kept.len()));
    }

    #[test]
    fn levels_map_to_syslog_priorities() {
        let all = [Level::Error, Level::Warn, Level::Info, Level::Debug, Level::Trace].map(priority);
        assert_eq!(all, [3, 4, 6, 7, 7]);
    }
}
