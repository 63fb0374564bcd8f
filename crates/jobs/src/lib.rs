//! Jobs started by `lockstep run`: each in a cgroup of its own, supervised until it ends ([`launch`]), and the
//! bookkeeping that finds jobs whose supervisor died and cleans up after them ([`reconcile`]); and the one way
//! lockstep starts a user's command, for `run` and `stat` alike ([`spawn`]).

pub mod launch;
pub mod reconcile;
pub mod spawn;

/// Why `lockstep run` could not run its job, or keep its books.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input: a command that cannot be run, a name in use, a placement the machine cannot give.
    #[error("{0}")]
    Usage(#[from] lockstep_core::error::UsageError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] lockstep_store::Error),
    /// No cgroup hierarchy to put the job in.
    #[error(transparent)]
    NoHierarchy(#[from] lockstep_cgroup::NoHierarchy),
    /// The system failed to make the job's cgroup (one the user's input could not make is [`Error::Usage`]).
    #[error(transparent)]
    Cgroup(lockstep_cgroup::CreateError),
    /// The node's agent refused the job, or did not answer.
    #[error(transparent)]
    Agent(#[from] lockstep_proto::client::CallError),
    /// The system refused a step: a cgroup that would not go away, a signal mask.
    #[error("{what}: {source}")]
    System {
        /// The step.
        what: String,
        /// Why.
        source: std::io::Error,
    },
}

impl From<lockstep_cgroup::CreateError> for Error {
    /// A cgroup the user's input could not make (a name in use, a placement beyond the machine, no permission)
    /// is a usage error; the system's failure stays one.
    fn from(e: lockstep_cgroup::CreateError) -> Self {
        if e.is_usage() {
            Self::Usage(lockstep_core::error::UsageError::new(e.to_string()))
        } else {
            Self::Cgroup(e)
        }
    }
}
