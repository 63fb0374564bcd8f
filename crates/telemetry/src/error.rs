//! Why counting could not start, go on, or be fetched from an agent, as a type: a caller tells the user's
//! mistakes (a process that is gone, counters the user may not open, a malformed address) from the system's
//! failures by the kind, never by the words.

use std::io;

use lockstep_core::error::UsageError;

/// Why a counter could not be opened or read, or an agent's counts fetched.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The user's mistake (counters they may not open, a malformed address): exit status 2 in a command-line
    /// tool, the [`UsageError`] its source.
    #[error("{0}")]
    Usage(#[source] UsageError),
    /// The process or thread to count exited before its counters were opened (`ESRCH`): the user named it, so
    /// this is bad input too (its [`UsageError`] is the source), but a caller counting several may pass over it.
    #[error("{0}")]
    Gone(#[source] UsageError),
    /// The kernel failed to open or read a counter.
    #[error("cannot count {event}: {why}")]
    Kernel {
        /// The event.
        event: String,
        /// What the kernel said (in the message, not a separate cause).
        why: io::Error,
    },
    /// Reading or enabling counters failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// An agent could not be reached at its address.
    #[error("cannot reach the agent at {addr}: {why}")]
    Unreachable {
        /// `HOST:PORT`.
        addr: String,
        /// Why (in the message, not a separate cause).
        why: lockstep_proto::http::HttpError,
    },
    /// An agent answered with a failure.
    #[error("the agent at {addr} answered {code}: {said}")]
    Answered {
        /// `HOST:PORT`.
        addr: String,
        /// The HTTP status.
        code: u16,
        /// The answer's body.
        said: String,
    },
    /// An agent's answer is not what an agent sends.
    #[error("bad answer from {addr}: {why}")]
    BadAnswer {
        /// `HOST:PORT`.
        addr: String,
        /// What did not parse (in the message, not a separate cause).
        why: serde_json::Error,
    },
    /// An agent answered with the counts of another job than the one asked for.
    #[error("the agent at {addr} answered with the counts of job {answered}, not of {asked}")]
    OtherJob {
        /// `HOST:PORT`.
        addr: String,
        /// The job asked for.
        asked: lockstep_core::ident::JobKey,
        /// The job answered for.
        answered: lockstep_core::ident::JobKey,
    },
}

impl Error {
    /// A user's mistake, said as `msg`.
    pub fn usage(msg: impl Into<String>) -> Self {
        Self::Usage(UsageError::new(msg))
    }
}

/// A result of lockstep-telemetry.
pub type Result<T> = std::result::Result<T, Error>;
