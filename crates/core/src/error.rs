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
    // The first paragraph names the problem; a list of missing arguments is indented below it.
    let message: Vec<&str> = rendered.lines().take_while(|l| !l.trim().is_empty()).map(str::trim).collect();
    eprintln!("{program}: {}", message.join(" ").trim_start_matches("error: "));
    EXIT_USAGE
}
