//! The one error type that maps to exit status 2: bad input, reported as one line on stderr.

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
