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

/// Shorthand: an `Err(UsageError)` inside `anyhow`.
pub fn usage<T>(msg: impl Into<String>) -> anyhow::Result<T> {
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

/// An I/O error as a person says it: `does not exist`, `permission denied`, or the system's own words.
pub fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "does not exist".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
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

/// The exit status of a command that ended with `result`: its own status, [`EXIT_USAGE`] after printing a
/// [`UsageError`] as one line, or 1 after printing any other error with its causes. `program` prefixes the line.
pub fn exit_status(program: &str, result: anyhow::Result<i32>) -> i32 {
    match result {
        Ok(status) => status,
        Err(e) if e.is::<UsageError>() => {
            eprintln!("{program}: {e}");
            EXIT_USAGE
        }
        Err(e) => {
            eprintln!("{program}: error: {e:#}");
            1
        }
    }
}

/// What a command-line parser's rendered message becomes: on stderr (`to_stderr`, a bad argument) its first
/// paragraph as one line and [`EXIT_USAGE`]; otherwise (`--help`, `--version`) the text on stdout and 0.
pub fn clap_exit(program: &str, rendered: &str, to_stderr: bool) -> i32 {
    if !to_stderr {
        print!("{rendered}");
        return 0;
    }
    if !rendered.trim_start().starts_with("error:") {
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
