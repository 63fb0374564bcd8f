//! The controller's notices of places, taken at the metrics door (`POST /slurm/places`): `lockstep slurm
//! prolog-slurmctld` and `epilog-slurmctld` tell each node of a job the rows or places they give and change, so
//! that no agent asks slurmctld while its jobs run (`lockstep_slurm::push`). The door is open to the network: a
//! notice counts only when munged vouches that root or `SlurmUser` sealed it, for this node, and had not been
//! decoded before, and made after the last one taken; anything that is not shaped like a credential is refused
//! before munged is asked. Taken at
//! normal priority on a door's thread; the daemon gets only the jobs and places, which it takes as slurmctld's.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use hyper::StatusCode;

use crate::command::{Command, Mailbox};
use crate::doors::Reply;
use lockstep_slurm::push::{self, Config};

/// How long after failing to read slurmctld's configuration a notice waits before it is asked again (a body shaped
/// like a credential, from anyone, would else make the agent ask slurmctld each time).
const CONFIG_RETRY: Duration = Duration::from_secs(10);

/// Where notices for node `node` are checked and sent on to the daemon.
pub struct Notices {
    node: String,
    mailbox: Mailbox,
    /// slurmctld's configuration (the munge socket, `SlurmUser`), asked at the first notice; or when asking it
    /// last failed.
    config: Mutex<Result<Config, Option<Instant>>>,
    /// When the last notice taken was made: an older one (a try that timed out, taken after the next) is refused.
    last_at: Mutex<u64>,
}

impl Notices {
    /// Notices for node `node`, sent on to the daemon at `mailbox`.
    pub fn new(node: String, mailbox: Mailbox) -> Self {
        Self { node, mailbox, config: Mutex::new(Err(None)), last_at: Mutex::new(0) }
    }

    /// slurmctld's configuration, asked once (again at most every [`CONFIG_RETRY`] after a failure).
    fn config(&self) -> Result<Config, String> {
        let mut kept = self.config.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*kept {
            Ok(c) => return Ok(c.clone()),
            Err(Some(failed)) if failed.elapsed() < CONFIG_RETRY => {
                return Err("cannot read Slurm's configuration (asked again shortly)".into());
            }
            Err(_) => {}
        }
        match Config::ask() {
            Ok(c) => {
                *kept = Ok(c.clone());
                Ok(c)
            }
            Err(e) => {
                *kept = Err(Some(Instant::now()));
                Err(format!("cannot read Slurm's configuration: {e:#}"))
            }
        }
    }

    /// Takes one notice, `body` its munge credential.
    pub fn take(&self, body: &[u8]) -> Reply {
        if !push::looks_like_credential(body) {
            return Reply::text(StatusCode::BAD_REQUEST, "expected a munge credential (a notice of the controller's)");
        }
        let config = match self.config() {
            Ok(c) => c,
            Err(said) => return Reply::text(StatusCode::SERVICE_UNAVAILABLE, &said),
        };
        let sealed = match push::decode(&config.munge_socket, body) {
            Ok(s) => s,
            Err(e) => return Reply::text(StatusCode::FORBIDDEN, &format!("{e:#}")),
        };
        if sealed.uid != 0 && sealed.uid != config.slurm_user {
            let said = format!(
                "sealed by UID {}: only root or SlurmUser (UID {}) tells places",
                sealed.uid, config.slurm_user
            );
            return Reply::text(StatusCode::FORBIDDEN, &said);
        }
        let told = match push::parse(&sealed.payload) {
            Ok(t) => t,
            Err(e) => return Reply::text(StatusCode::BAD_REQUEST, &format!("{e:#}")),
        };
        if told.node != self.node {
            let said = format!("a notice for node {:?}, not this one ({:?})", told.node, self.node);
            return Reply::text(StatusCode::FORBIDDEN, &said);
        }
        let mut last = self.last_at.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if told.at_ms < *last {
            let said = format!("a notice made at {} ms, before the last one taken ({} ms)", told.at_ms, *last);
            return Reply::text(StatusCode::CONFLICT, &said);
        }
        *last = told.at_ms;
        // Sent while the time is held: two notices reach the daemon in the order they were made.
        let count = told.jobs.len();
        self.mailbox.tell(Command::SlurmTold { jobs: told.jobs });
        drop(last);
        Reply::text(StatusCode::OK, &format!("took the places of {count} job(s)"))
    }
}
