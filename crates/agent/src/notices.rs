//! The controller's notices of places, taken at the metrics door (`POST /slurm/places`): `lockstep slurm
//! prolog-slurmctld` and `epilog-slurmctld` tell each node of a job the rows or places they give and change, so
//! that no agent asks slurmctld while its jobs run (`lockstep_slurm::push`). The door is open to the network: a
//! notice counts only when munged vouches that root or `SlurmUser` sealed it, for this node, and had not been
//! decoded before; anything that is not shaped like a credential is refused before munged is asked. Taken at
//! normal priority on a door's thread; the daemon gets only the jobs and places, which it takes as slurmctld's.

use std::sync::Mutex;

use hyper::StatusCode;

use crate::command::{Command, Mailbox};
use crate::doors::Reply;
use lockstep_slurm::push::{self, Config};

/// Where notices for node `node` are checked and sent on to the daemon.
pub struct Notices {
    node: String,
    mailbox: Mailbox,
    /// slurmctld's configuration (the munge socket, `SlurmUser`): asked at the first notice, and again after a
    /// failure to.
    config: Mutex<Option<Config>>,
}

impl Notices {
    /// Notices for node `node`, sent on to the daemon at `mailbox`.
    pub fn new(node: String, mailbox: Mailbox) -> Self {
        Self { node, mailbox, config: Mutex::new(None) }
    }

    /// Takes one notice, `body` its munge credential.
    pub fn take(&self, body: &[u8]) -> Reply {
        if !push::looks_like_credential(body) {
            return Reply::text(StatusCode::BAD_REQUEST, "expected a munge credential (a notice of the controller's)");
        }
        let config = {
            let mut kept = self.config.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if kept.is_none() {
                match Config::ask() {
                    Ok(c) => *kept = Some(c),
                    Err(e) => {
                        let said = format!("cannot read Slurm's configuration: {e:#}");
                        return Reply::text(StatusCode::SERVICE_UNAVAILABLE, &said);
                    }
                }
            }
            kept.clone().expect("asked")
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
        let (node, jobs) = match push::parse(&sealed.payload) {
            Ok(n) => n,
            Err(e) => return Reply::text(StatusCode::BAD_REQUEST, &format!("{e:#}")),
        };
        if node != self.node {
            let said = format!("a notice for node {node:?}, not this one ({:?})", self.node);
            return Reply::text(StatusCode::FORBIDDEN, &said);
        }
        let count = jobs.len();
        self.mailbox.tell(Command::SlurmTold { jobs });
        Reply::text(StatusCode::OK, &format!("took the places of {count} job(s)"))
    }
}
