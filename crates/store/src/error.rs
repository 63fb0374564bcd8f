//! Why a store operation failed, as callers must tell the cases apart: a name taken or a path that cannot hold a
//! store is the user's to fix, the rest is the store's (SQLite, a row it cannot read, the system).

/// A store operation's failure.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A running job has the name already: the user's to fix, so the [`UsageError`] saying so is its cause (found
    /// by [`lockstep_core::error::is_usage`]).
    ///
    /// [`UsageError`]: lockstep_core::error::UsageError
    #[error("{0}")]
    NameInUse(#[source] lockstep_core::error::UsageError),
    /// SQLite failed: locked past the busy timeout, full, read-only, corrupt.
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// A row's JSON could not be written or read.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The path given cannot hold a store, or holds something else: the user's to fix.
    #[error("{0}")]
    Refused(#[from] lockstep_core::error::UsageError),
    /// The system failed the store (its disk full, out of descriptors).
    #[error("store {}: {why}", path.display())]
    System {
        /// The store's path.
        path: std::path::PathBuf,
        /// What failed.
        why: String,
    },
}

impl Error {
    /// `name` is in use by a running job.
    pub fn name_in_use(name: &lockstep_core::ident::JobName) -> Self {
        let why = format!("job name {name:?} is in use by a running job (pick another name, or wait for it to end)");
        Self::NameInUse(lockstep_core::error::UsageError::new(why))
    }

    /// Whether the store was only busy: another connection held the write lock past this one's busy timeout
    /// (the write may go through when tried again), rather than failing for good.
    pub fn is_busy(&self) -> bool {
        matches!(
            self,
            Self::Sqlite(rusqlite::Error::SqliteFailure(e, _))
                if matches!(e.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        )
    }

    /// Whether the write may go through when tried again with nothing of it changed: the store was busy, or its
    /// disk is full, read-only or failing (what an administrator fixes), rather than the write being wrong (a
    /// constraint, a row that cannot be read or written, a corrupt store).
    pub fn may_pass_later(&self) -> bool {
        self.is_busy()
            || matches!(
                self,
                Self::Sqlite(rusqlite::Error::SqliteFailure(e, _))
                    if matches!(
                        e.code,
                        rusqlite::ErrorCode::DiskFull
                            | rusqlite::ErrorCode::ReadOnly
                            | rusqlite::ErrorCode::SystemIoFailure
                            | rusqlite::ErrorCode::CannotOpen
                            | rusqlite::ErrorCode::PermissionDenied
                    )
            )
            || matches!(self, Self::System { .. })
    }
}

/// A store operation's result.
pub type Result<T> = std::result::Result<T, Error>;
