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
//!
//! No thread waits for stderr to take a line: a line goes to a queue of [`QUEUE`] lines that the `lockstep-log`
//! thread writes out, and a line that finds it full is dropped and counted (the count is said once stderr takes
//! lines again). Stderr is whatever reads it: the journal's stream, which a journald slowed by a flood of other
//! lines drains late, a pipe, a file on a disk a user keeps busy; the slot loop logs, and must never wait behind
//! it. The process waits at most [`FLUSH_WAIT`] for the queue as it exits ([`flush`]). A panic is said through the
//! queue too, as an error line (the hook [`say_panic`]).

use std::io::Write;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use log::{Level, LevelFilter};

/// The variable that chooses which lines are written (`env_logger`'s filter syntax).
pub const FILTER_VAR: &str = "LOCKSTEP_LOG";

/// How many lines may wait for stderr; a line past them is dropped and counted.
const QUEUE: usize = 4096;

/// How long the process waits, as it exits, for the lines still queued to be written.
pub const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// What the log's queue carries.
enum Out {
    /// A whole line, as one write.
    Line(Vec<u8>),
    /// Answer once every line queued before is written.
    Flush(mpsc::Sender<()>),
}

/// The queue's sending side, once the log started.
static QUEUED: OnceLock<SyncSender<Out>> = OnceLock::new();

/// The log's target: each line goes to the queue without waiting, or is counted in `dropped`.
struct Queue {
    tx: SyncSender<Out>,
    dropped: Arc<AtomicU64>,
}

impl Write for Queue {
    fn write(&mut self, line: &[u8]) -> std::io::Result<usize> {
        if self.tx.try_send(Out::Line(line.to_vec())).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        Ok(line.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The `lockstep-log` thread: writes the queued lines to stderr, each in one write, and says how many were dropped
/// once it has caught up with the queue. It takes no signal: started before the agent blocks SIGINT and SIGTERM for
/// its waiter thread, it would otherwise be the one the kernel picks, and die of the default action (the agent did,
/// without restoring, in the first try).
fn drain(rx: &Receiver<Out>, dropped: &AtomicU64) {
    let _ = nix::sys::signal::SigSet::all().thread_block();
    for out in rx {
        match out {
            Out::Line(line) => {
                // A line stderr refuses is lost: there is nowhere else to say so.
                let _ = std::io::stderr().write_all(&line);
            }
            Out::Flush(reply) => {
                let _ = reply.send(());
            }
        }
        let n = dropped.swap(0, Ordering::Relaxed);
        if n > 0 {
            log::warn!("{n} log line(s) dropped: stderr did not take them as fast as they came");
        }
    }
}

/// Waits, at most [`FLUSH_WAIT`], until the lines queued so far are written to stderr; for the process's exit.
pub fn flush() {
    flush_by(FLUSH_WAIT);
}

/// Waits, at most `wait`, until the lines queued so far are written to stderr.
fn flush_by(wait: Duration) {
    let Some(tx) = QUEUED.get() else { return };
    let deadline = Instant::now() + wait;
    let (reply, done) = mpsc::channel();
    if send_by(tx, Out::Flush(reply), deadline).is_ok() {
        let _ = done.recv_timeout(deadline.saturating_duration_since(Instant::now()));
    }
}

/// Puts `out` in the queue `tx`, waiting for room in it until `deadline` at most; `Err` gives back what did not
/// go (the queue still full at the deadline, or no log thread to take it).
fn send_by(tx: &SyncSender<Out>, mut out: Out, deadline: Instant) -> Result<(), TrySendError<Out>> {
    loop {
        match tx.try_send(out) {
            Err(TrySendError::Full(again)) if Instant::now() < deadline => {
                out = again;
                std::thread::sleep(Duration::from_millis(5));
            }
            sent => return sent,
        }
    }
}

/// Says `line` (without its newline) on stderr as the process's last word: through the log's queue once the log
/// started, without waiting on stderr (at most [`FLUSH_WAIT`] for room in the queue; the exit's [`flush`] then waits
/// as long at most for it to be written, and a stderr that takes nothing loses it). Before the log started (a bad
/// flag or configuration file, an agent that is not root) it is written at once, as any command's error is, and
/// waits for a stderr that takes nothing.
pub fn say_last(line: &str) {
    let text = format!("{line}\n").into_bytes();
    let Some(tx) = QUEUED.get() else {
        let _ = std::io::stderr().write_all(&text);
        return;
    };
    queue_or_write(tx, text, FLUSH_WAIT);
}

/// Puts `line` in the queue `tx`, waiting at most `wait` for room in it (still full then, the line is lost);
/// where no log thread takes the queue (it could not be started), writes it to stderr at once.
fn queue_or_write(tx: &SyncSender<Out>, line: Vec<u8>, wait: Duration) {
    if let Err(TrySendError::Disconnected(Out::Line(line))) = send_by(tx, Out::Line(line), Instant::now() + wait) {
        let _ = std::io::stderr().write_all(&line);
    }
}

/// Starts the log of this process, whose lines are spoken by `speaker` (`lockstep agent`, `lockstep watchdog`).
/// A second call in one process changes nothing.
pub fn init(speaker: &'static str) {
    let journal = to_journal();
    let mut builder = env_logger::Builder::new();
    match std::env::var(FILTER_VAR) {
        Ok(filter) if !filter.trim().is_empty() => builder.parse_filters(&filter),
        _ => builder.filter_level(LevelFilter::Warn).filter_module(env!("CARGO_CRATE_NAME"), LevelFilter::Info),
    };
    let (tx, rx) = mpsc::sync_channel(QUEUE);
    let dropped = Arc::new(AtomicU64::new(0));
    builder.target(env_logger::Target::Pipe(Box::new(Queue { tx: tx.clone(), dropped: dropped.clone() })));
    builder.format(format(speaker, journal));
    // A panic's lines, whatever the filter, with the same format: `LOCKSTEP_LOG=off` must not hide a panic.
    let mut panics = env_logger::Builder::new();
    panics.filter_level(LevelFilter::Error).format(format(speaker, journal));
    panics.target(env_logger::Target::Pipe(Box::new(PanicQueue(tx.clone()))));
    if builder.try_init().is_ok() && QUEUED.set(tx).is_ok() {
        let spawned = std::thread::Builder::new().name(LOG_THREAD.into()).spawn(move || drain(&rx, &dropped));
        match spawned {
            Ok(_) => {
                let _ = PANICS.set(panics.build());
                std::panic::set_hook(Box::new(say_panic));
            }
            // Nothing would write the queue: say so where the log would have gone.
            Err(e) => {
                let _ =
                    writeln!(std::io::stderr(), "{speaker}: cannot start the log's thread ({e}); no line is written");
            }
        }
    }
}

/// The format of a line of `speaker`'s: its syslog priority first under the journal, else the UTC time and level.
fn format(
    speaker: &'static str,
    journal: bool,
) -> impl Fn(&mut env_logger::fmt::Formatter, &log::Record<'_>) -> std::io::Result<()> + Send + Sync + 'static {
    move |out, record| {
        let said = record.args().to_string();
        let text = one_line(&said);
        if journal {
            writeln!(out, "<{}>{speaker}: {text}", priority(record.level()))
        } else {
            writeln!(out, "{} {:<5} {speaker}: {text}", out.timestamp_millis(), record.level())
        }
    }
}

/// The name of the thread that writes the log's queue to stderr.
const LOG_THREAD: &str = "lockstep-log";

/// The logger of panics ([`say_panic`]), once the log runs.
static PANICS: OnceLock<env_logger::Logger> = OnceLock::new();

/// How long a panicking thread other than the main one waits for room in the log's queue for each of its lines,
/// and then for them to be written: it may hold what the slot loop waits for. (In this crate's tests, whose child
/// process aborts on a panic, 2 s: the log's thread of a test binary on a loaded machine may be late.)
const PANIC_WAIT: Duration = if cfg!(test) { Duration::from_secs(2) } else { Duration::from_millis(20) };

/// Where a panic's lines go: the log's queue, waiting for room in it ([`FLUSH_WAIT`] on the main thread, whose
/// panic ends the process; [`PANIC_WAIT`] on the others), or stderr at once on the log's own thread, which no
/// queue serves, and where no log thread takes the queue.
struct PanicQueue(SyncSender<Out>);

impl Write for PanicQueue {
    fn write(&mut self, line: &[u8]) -> std::io::Result<usize> {
        match std::thread::current().name() {
            Some(LOG_THREAD) => {
                let _ = std::io::stderr().write_all(line);
            }
            Some("main") => queue_or_write(&self.0, line.to_vec(), FLUSH_WAIT),
            _ => queue_or_write(&self.0, line.to_vec(), PANIC_WAIT),
        }
        Ok(line.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The panic hook once the log runs, in place of Rust's default one, which writes to stderr itself and waits for
/// a stderr that takes nothing: says the panic as an error line of the log ([`panic_line`]), whatever
/// `LOCKSTEP_LOG` says, and the backtrace's lines where `RUST_BACKTRACE` asks for one (set, and not `0`), through
/// the queue ([`PanicQueue`]), then waits for them to be written: a panic of the main thread ends the process, and
/// waits as the exit's [`flush`] does (at most [`FLUSH_WAIT`]); one that cannot unwind (out of an `extern "C"`
/// function: libbpf calls the agent's ring-buffer code so) aborts it as soon as this returns, and as the hook cannot
/// tell which panics can unwind, every other thread's waits too (at most [`PANIC_WAIT`]), but the log's own.
fn say_panic(info: &std::panic::PanicHookInfo<'_>) {
    let Some(logger) = PANICS.get() else { return };
    let say = |text: &str| {
        let mut record = log::Record::builder();
        record.level(Level::Error).target(env!("CARGO_CRATE_NAME"));
        log::Log::log(logger, &record.args(format_args!("{text}")).build());
    };
    say(&panic_line(info));
    if std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0") {
        for frame in std::backtrace::Backtrace::force_capture().to_string().lines() {
            say(&format!("  {frame}"));
        }
    }
    match std::thread::current().name() {
        Some("main") => flush(),
        // The log's own thread wrote its lines at once, and cannot wait for itself.
        Some(LOG_THREAD) => {}
        _ => flush_by(PANIC_WAIT),
    }
}

/// What a panic says, as Rust's default hook says it, on one line: the thread, where, and the message.
fn panic_line(info: &std::panic::PanicHookInfo<'_>) -> String {
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("<unnamed>");
    let what = info.payload_as_str().unwrap_or("Box<dyn Any>");
    match info.location() {
        Some(at) => format!("thread '{name}' panicked at {at}: {what}"),
        None => format!("thread '{name}' panicked: {what}"),
    }
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

    /// A panic is said on one line, with its thread, place and message, whatever its payload.
    #[test]
    fn a_panic_is_one_line_with_thread_place_and_message() {
        type Hook = Box<dyn Fn(&std::panic::PanicHookInfo<'_>) + Send + Sync>;
        static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
        // Another test's panic in the meantime goes to the hook before, as it would have.
        let before: std::sync::Arc<Hook> = std::sync::Arc::new(std::panic::take_hook());
        let others = before.clone();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().name().is_some_and(|n| n.starts_with("panic-test-")) {
                SAID.lock().unwrap().push(super::panic_line(info));
            } else {
                others(info);
            }
        }));
        let named = |name: &str| std::thread::Builder::new().name(format!("panic-test-{name}"));
        let line = line!() + 1;
        let _ = named("slot").spawn(|| panic!("job {} gone\nforged", 7)).unwrap().join();
        let _ = named("any").spawn(|| std::panic::panic_any(7_u8)).unwrap().join();
        let _ours = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| before(info)));
        let said = SAID.lock().unwrap();
        let here = format!("{}:{line}", file!());
        assert_eq!(said[0], format!("thread 'panic-test-slot' panicked at {here}:40: job 7 gone\nforged"));
        assert_eq!(one_line(&said[0]).lines().count(), 1, "{said:?}");
        assert!(said[1].starts_with("thread 'panic-test-any' panicked at ") && said[1].ends_with(": Box<dyn Any>"));
    }

    /// Set in the child process of [`a_panic_that_aborts_the_process_is_still_said`].
    const ABORTING_CHILD: &str = "LOCKSTEP_TEST_ABORTING_CHILD";

    /// A panic where Rust cannot unwind (out of an `extern "C"` function, as libbpf calls the agent's ring-buffer
    /// code) aborts the process as soon as the hook returns: its line is written before that. Played in a child
    /// process (this test binary again, running this test alone), which the abort ends.
    #[test]
    fn a_panic_that_aborts_the_process_is_still_said() {
        extern "C" fn callback() {
            panic!("a ring buffer's record: 7");
        }
        if std::env::var_os(ABORTING_CHILD).is_some() {
            // No core dump, neither a file left behind nor a crash handler's entry.
            // SAFETY: prctl with an integer option and value.
            unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0) };
            super::init("lockstep test");
            let _ = std::thread::Builder::new().name("ring".into()).spawn(|| callback()).unwrap().join();
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "logging::tests::a_panic_that_aborts_the_process_is_still_said", "--nocapture"])
            .env(ABORTING_CHILD, "1")
            .env_remove("RUST_BACKTRACE")
            .env_remove("JOURNAL_STREAM")
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        let signal = std::os::unix::process::ExitStatusExt::signal(&out.status);
        assert_eq!(signal, Some(libc::SIGABRT), "the child did not abort ({}): {said}", out.status);
        // The panic, then Rust's own, in the hook too, as it stops the unwinding at the function's edge: the abort
        // follows that one at once (without the hook's wait, its line was lost in 9 runs of 12, and both in some).
        let lines: Vec<&str> = said.lines().filter(|l| l.contains("thread 'ring' panicked at")).collect();
        assert!(
            lines.len() == 2
                && lines.iter().all(|l| l.contains(" ERROR lockstep test: "))
                && lines[0].ends_with(": a ring buffer's record: 7")
                && lines[1].ends_with("cannot unwind"),
            "not both lines of the panic: {said}"
        );
    }

    #[test]
    fn levels_map_to_syslog_priorities() {
        let all = [Level::Error, Level::Warn, Level::Info, Level::Debug, Level::Trace].map(priority);
        assert_eq!(all, [3, 4, 6, 7, 7]);
    }
}
