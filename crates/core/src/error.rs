//! The one error type that maps to exit status 2 (bad input, reported as one line on stderr), and the exit
//! status of a command from its result, shared by the `lockstep` and `lockstepd` binaries.

/// Bad input from the user: printed as one line, exit status 2, nothing changed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(String);

impl UsageError {
    /// A usage error with its one-line message (what was wrong, what was expected).
    pub fn new(msg: impl Into<String>) -> Self {
        Self(msg.into())
    }
}

/// Exit status of a command that got bad input.
pub const EXIT_USAGE: i32 = 2;

/// A request the caller may not make (another user's job, a change only root may ask for): printed as one line,
/// exit status 1, nothing changed. The agent answers it with HTTP 403.
#[derive(Debug, thiserror::Error)]
#[error("permission denied: {0}")]
pub struct Denied(String);

impl Denied {
    /// A refusal saying what was refused and who may do it.
    pub fn new(msg: impl Into<String>) -> Self {
        Self(msg.into())
    }
}

/// Shorthand: an `Err(UsageError)`, as the caller's error type (`anyhow::Error` in a binary, a crate's own enum
/// that keeps usage errors).
pub fn usage<T, E: From<UsageError>>(msg: impl Into<String>) -> Result<T, E> {
    Err(UsageError::new(msg).into())
}

/// Largest file a user may hand lockstep as input (a spec, a configuration, a topology).
pub const MAX_INPUT_BYTES: u64 = 64 << 20;

/// Opens the file `path` that a user named as input; `what` names it in the message (`config`, `topology
/// file`) and `expected` says what it should be (`an hwloc XML file`). A missing, unreadable, non-regular (a
/// directory, a FIFO: never waited on) or oversized file is a usage error saying which.
pub fn open_input(path: &std::path::Path, what: &str, expected: &str) -> Result<std::fs::File, UsageError> {
    use std::os::unix::fs::OpenOptionsExt;
    let say = |why: String| input_error(path, what, expected, &why);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| say(io_reason(&e)))?;
    let meta = file.metadata().map_err(|e| say(io_reason(&e)))?;
    if meta.is_dir() {
        return Err(say("is a directory".into()));
    }
    if !meta.is_file() {
        return Err(say("is not a regular file".into()));
    }
    if meta.len() > MAX_INPUT_BYTES {
        return Err(say(format!("is larger than {} MiB", MAX_INPUT_BYTES >> 20)));
    }
    Ok(file)
}

/// Reads the text file `path` that a user named as input, as [`open_input`] opens it; text that is not UTF-8 is
/// a usage error too.
pub fn read_input(path: &std::path::Path, what: &str, expected: &str) -> Result<String, UsageError> {
    use std::io::Read;
    let mut bytes = Vec::new();
    open_input(path, what, expected)?
        .take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| input_error(path, what, expected, &io_reason(&e)))?;
    String::from_utf8(bytes).map_err(|_| input_error(path, what, expected, "is not UTF-8 text"))
}

/// The usage error of an input file: `WHAT PATH: WHY (expected EXPECTED)`.
pub fn input_error(path: &std::path::Path, what: &str, expected: &str, why: &str) -> UsageError {
    UsageError::new(format!("{what} {}: {why} (expected {expected})", path.display()))
}

/// An I/O error as a person says it: `does not exist`, `permission denied`, `a part of the path is not a
/// directory`…, or the system's own words without their `(os error N)`; an error made with a message of its own
/// keeps it.
pub fn io_reason(e: &std::io::Error) -> String {
    use std::io::ErrorKind;
    if e.raw_os_error().is_none() {
        return e.to_string();
    }
    let said = match e.kind() {
        ErrorKind::NotFound => "does not exist",
        ErrorKind::PermissionDenied => "permission denied",
        ErrorKind::NotADirectory => "a part of the path is not a directory",
        ErrorKind::IsADirectory => "is a directory",
        ErrorKind::AlreadyExists => "already exists",
        ErrorKind::ReadOnlyFilesystem => "the file system is read-only",
        ErrorKind::StorageFull => "no space left on the device",
        _ => {
            let text = e.to_string();
            let text = text.split(" (os error").next().unwrap_or(&text).to_string();
            let mut chars = text.chars();
            return chars.next().map_or(text.clone(), |c| c.to_lowercase().chain(chars).collect());
        }
    };
    said.into()
}

/// A TOML parse error as one line: `line N: what was wrong`.
pub fn toml_message(text: &str, e: &toml::de::Error) -> String {
    let line = e.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
    let what = e.message().lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; ");
    match line {
        Some(l) => format!("line {l}: {what}"),
        None => what,
    }
}

/// Exit status of a command that failed for a reason other than its input (the system refused, a program it
/// needed failed, the agent did not answer).
pub const EXIT_FAILURE: i32 = 1;

/// The exit status of a command that ended with `result`: its own status, or, after printing the error as one
/// line `PROGRAM: WHAT: WHY (HINT)`, [`EXIT_USAGE`] for a [`UsageError`] anywhere in its causes ([`is_usage`]: bad
/// input, the user can fix it) and
/// [`EXIT_FAILURE`] for any other error (shown with its causes). Both kinds of line look alike: the exit status
/// tells them apart, as every manual page's EXIT STATUS says.
pub fn exit_status<E: AsRef<dyn std::error::Error + 'static>>(program: &str, result: Result<i32, E>) -> i32 {
    exit_status_to(program, result, |line| eprintln!("{line}"))
}

/// [`exit_status`], the error's line (without its newline) said through `say` instead of written to stderr: a
/// daemon whose stderr may not take it (lockstepd, whose log queue never waits on stderr) says it its own way.
pub fn exit_status_to<E: AsRef<dyn std::error::Error + 'static>>(
    program: &str,
    result: Result<i32, E>,
    say: impl FnOnce(&str),
) -> i32 {
    match result {
        Ok(status) => status,
        Err(e) => {
            say(&format!("{program}: {}", one_line(e.as_ref())));
            if is_usage(e.as_ref()) {
                EXIT_USAGE
            } else {
                EXIT_FAILURE
            }
        }
    }
}

/// Whether `e` is bad input: a [`UsageError`], or an error a [`UsageError`] caused (a crate's error type that
/// keeps one as its source, as lockstep-slurm's does for a client missing from `PATH`).
pub fn is_usage(e: &(dyn std::error::Error + 'static)) -> bool {
    chain(e).any(<dyn std::error::Error>::is::<UsageError>)
}

/// `e` and its causes, outermost first.
pub fn chain<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(e), |e| e.source())
}

/// `e` with its causes (`what: why: deeper why`) on one line: a cause's own line breaks become `; `. A cause the
/// one above it already says (a crate's error whose message is its source's, a context that ends with its cause
/// or quotes it in parentheses) is said once. A usage error under a context keeps both: the context says what was
/// being done, the usage error what to fix (`cannot ask Slurm for the nodes of job 5: cannot find squeue on PATH`).
pub fn one_line(e: &(dyn std::error::Error + 'static)) -> String {
    let says = |above: &str, cause: &str| {
        above == cause || above.ends_with(&format!(": {cause}")) || above.contains(&format!("({cause})"))
    };
    let mut said: Vec<String> = Vec::new();
    for cause in chain(e).map(ToString::to_string) {
        if !said.last().is_some_and(|above| says(above, &cause)) {
            said.push(cause);
        }
    }
    let text = said.join(": ");
    text.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; ")
}

/// What a command-line parser's rendered message becomes: on stderr (`to_stderr`, a bad argument) its first
/// paragraph as one line and [`EXIT_USAGE`]; otherwise (`--help`, `--version`) the text on stdout and 0. Where
/// the parser's error was a missing subcommand (`no_subcommand`), the message was the command's help: the line
/// names the subcommands it lists instead.
pub fn clap_exit(program: &str, rendered: &str, to_stderr: bool, no_subcommand: bool) -> i32 {
    if !to_stderr {
        print!("{rendered}");
        return 0;
    }
    if no_subcommand {
        // A command that needs a subcommand, given none (`lockstep policy`): its help came as the error.
        let usage = rendered.lines().find_map(|l| l.trim().strip_prefix("Usage: ")).unwrap_or("COMMAND");
        let commands: Vec<&str> = rendered
            .lines()
            .skip_while(|l| !l.starts_with("Commands:"))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|c| *c != "help")
            .collect();
        eprintln!(
            "{program}: a subcommand is missing (usage: {usage}, COMMAND one of {}; see --help)",
            commands.join(", ")
        );
        return EXIT_USAGE;
    }
    // The first paragraph names the problem; a list of missing arguments is indented below it.
    let message: Vec<&str> = rendered.lines().take_while(|l| !l.trim().is_empty()).map(str::trim).collect();
    eprintln!("{program}: {}", message.join(" ").trim_start_matches("error: "));
    EXIT_USAGE
}

/// `text`, which someone else controls (a peer's answer, a Slurm field, a process's name), as one printable line:
/// control characters are written escaped, as Rust escapes them (`\n`, `\u{1b}`), so that no newline starts a line
/// of its own and no escape sequence reaches a terminal; a text longer than `max` bytes is cut at a character
/// boundary and says so.
pub fn printable(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    use std::fmt::Write as _;
    if text.len() <= max && !text.chars().any(char::is_control) {
        return text.into();
    }
    let mut line = String::with_capacity(text.len().min(max + 32));
    for (at, c) in text.char_indices() {
        let escaped = if c.is_control() { c.escape_default().to_string() } else { c.to_string() };
        if line.len() + escaped.len() > max {
            let _ = write!(line, " … ({} bytes cut)", text.len() - at);
            break;
        }
        line.push_str(&escaped);
    }
    line.into()
}

#[cfg(test)]
mod tests {
    use super::{io_reason, is_usage, one_line, UsageError};

    /// A crate's error whose message is its source's, as lockstep-slurm's `Setup`.
    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    struct Wraps(#[source] UsageError);

    #[test]
    fn a_usage_error_is_found_among_the_causes_and_a_repeated_cause_said_once() {
        let wrapped = anyhow::Error::new(Wraps(UsageError::new("cannot find squeue on PATH")));
        assert!(is_usage(&*wrapped));
        assert_eq!(one_line(&*wrapped), "cannot find squeue on PATH");
        let failed = anyhow::Error::new(std::io::Error::other("no route")).context("cannot reach x");
        assert!(!is_usage(&*failed));
        assert_eq!(one_line(&*failed), "cannot reach x: no route");
        let under = anyhow::Error::new(Wraps(UsageError::new("cannot find squeue on PATH"))).context("counting");
        assert!(is_usage(&*under));
        assert_eq!(one_line(&*under), "counting: cannot find squeue on PATH", "the context and what to fix");
        let quoted = anyhow::Error::new(std::io::Error::other("no route")).context("cannot reach x (no route)");
        assert_eq!(one_line(&*quoted), "cannot reach x (no route)", "a cause the context quotes is said once");
        let word = anyhow::Error::new(std::io::Error::other("invalid")).context("an invalid answer from x");
        assert_eq!(one_line(&*word), "an invalid answer from x: invalid", "a word of the context is no quote");
    }

    #[test]
    fn io_errors_are_said_without_their_numbers() {
        let os = |n| io_reason(&std::io::Error::from_raw_os_error(n));
        assert_eq!(os(libc::ENOENT), "does not exist");
        assert_eq!(os(libc::ENOTDIR), "a part of the path is not a directory");
        assert_eq!(os(libc::EBUSY), "device or resource busy");
        assert_eq!(io_reason(&std::io::Error::other("its own words")), "its own words");
    }
}
