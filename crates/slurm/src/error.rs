//! Why lockstep-slurm could not do what it was asked, as a type: callers act on the kind (a job Slurm does not
//! know, a job that finished, a client missing from `PATH`), never on the words.

use std::fmt;

use lockstep_core::error::UsageError;
use lockstep_core::job::SlurmJobId;

/// What slurmctld refused, as a client said it on its last line of stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// It does not know the job (`ESLURM_INVALID_JOB_ID`: "Invalid job id specified").
    UnknownJob,
    /// The job has finished, and slurmctld changes nothing of a finished job (`ESLURM_JOB_FINISHED`: "Job has
    /// already finished").
    JobFinished,
    /// Perhaps slurmctld could not be reached: a last line with "fatal", "contact" or "connect" (a hint, shown as
    /// such; a fatal error of another cause reads the same).
    Unreachable,
    /// Anything else.
    Other,
}

impl Refusal {
    /// The refusal a client's last line of stderr says.
    pub(crate) fn of(last: &str) -> Self {
        if last.contains("Invalid job id") {
            Self::UnknownJob
        } else if last.contains("Job has already finished") {
            Self::JobFinished
        } else if ["fatal", "contact", "connect"].iter().any(|w| last.contains(w)) {
            Self::Unreachable
        } else {
            Self::Other
        }
    }
}

/// Why a client command gave no answer.
#[derive(Debug)]
pub enum ClientError {
    /// It did not answer within `after` (the client module's `TIMEOUT`), and was killed.
    Timeout {
        /// The client.
        program: String,
        /// Its arguments, joined by spaces.
        args: String,
        /// How long it was given.
        after: std::time::Duration,
    },
    /// Waiting for it failed.
    Wait(std::io::Error),
    /// It exited unsuccessfully.
    Failed {
        /// The client.
        program: String,
        /// Its exit status; `None` when a signal ended it.
        status: Option<i32>,
        /// Its last line of stderr, without its own `program: ` prefix.
        said: String,
        /// What that line says was refused.
        refusal: Refusal,
    },
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Timeout { program, args, after } => {
                write!(f, "{program} {args} did not answer within {} s", after.as_secs())
            }
            Self::Wait(e) => write!(f, "waiting for a Slurm client failed: {e}"),
            Self::Failed { program, status, said, refusal } => {
                write!(f, "{program} failed ")?;
                match status {
                    Some(c) => write!(f, "with status {c}")?,
                    None => write!(f, "by a signal")?,
                }
                write!(f, ": {said}")?;
                if *refusal == Refusal::Unreachable {
                    write!(f, " (is slurmctld reachable? scontrol ping)")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Wait(e) => Some(e),
            _ => None,
        }
    }
}

/// Why a call into Slurm or munge failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A client command cannot be run here (not on `PATH`, or on it only where others can change it): the
    /// user's setup, an exit status 2 in a command-line tool (the [`UsageError`] is its source).
    #[error("{0}")]
    Setup(#[source] UsageError),
    /// A client command failed, or did not answer in time.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// A client's answer, slurmctld's configuration or a notice does not say what it must.
    #[error("{0}")]
    Unreadable(String),
    /// slurmctld does not know the job.
    #[error("Slurm does not know job {0}")]
    UnknownJob(SlurmJobId),
    /// The row lock, or its directory, could not be had.
    #[error("{0}")]
    Lock(String),
    /// munged refused a credential: its reason.
    #[error("munged refused the credential: {0}")]
    Refused(String),
}

impl From<UsageError> for Error {
    fn from(e: UsageError) -> Self {
        Self::Setup(e)
    }
}

impl Error {
    /// Whether a client's failure that `refusal` describes is what this is.
    pub fn refused(&self, refusal: Refusal) -> bool {
        matches!(self, Self::Client(ClientError::Failed { refusal: r, .. }) if *r == refusal)
    }

    /// The exit status of the client whose failure this is; `None` for another error, or a client ended by a
    /// signal.
    pub fn status(&self) -> Option<i32> {
        match self {
            Self::Client(ClientError::Failed { status, .. }) => *status,
            _ => None,
        }
    }
}

/// A result of lockstep-slurm.
pub type Result<T> = std::result::Result<T, Error>;
