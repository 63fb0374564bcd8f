//! The controller's notices of places, taken at the metrics door (`POST /slurm/places`): `lockstep slurm
//! prolog-slurmctld` and `epilog-slurmctld` tell each node of a job the rows or places they give and change, so
//! that no agent asks slurmctld while its jobs run (`lockstep_slurm::push`). The door is open to the network: a
//! notice counts only when munged vouches that root or `SlurmUser` sealed it, for this node, and had not been
//! decoded before, and made after the last one taken; anything that is not shaped like a credential is refused
//! before munged is asked. Taken at
//! normal priority on a door's thread; the daemon gets only the jobs and places, which it takes as slurmctld's.

use std::sync::{Arc, Mutex};

use hyper::StatusCode;

use crate::doors::Reply;
use crate::outlet::Outlet;
use crate::slurm::config::SlurmConfig;
use lockstep_slurm::push;

/// Where notices for node `node` are checked and sent on to the daemon.
pub struct Notices {
    node: lockstep_core::ident::NodeName,
    /// Where the places taken go: the daemon, as Slurm's messages.
    outlet: Outlet<crate::slurm::Msg>,
    /// slurmctld's configuration (the munge socket, `SlurmUser`), shared with the discovery thread.
    config: Arc<SlurmConfig>,
    /// When the last notice taken was made: an older one (a try that timed out, taken after the next) is refused.
    last_at: Mutex<u64>,
}

impl Notices {
    /// Notices for node `node`, checked with slurmctld's configuration `config` and sent on to the daemon through
    /// `outlet`.
    pub fn new(
        node: lockstep_core::ident::NodeName,
        outlet: Outlet<crate::slurm::Msg>,
        config: Arc<SlurmConfig>,
    ) -> Self {
        Self { node, outlet, config, last_at: Mutex::new(0) }
    }

    /// Takes one notice, `body` its munge credential.
    pub fn take(&self, body: &[u8]) -> Reply {
        if !push::looks_like_credential(body) {
            return Reply::text(StatusCode::BAD_REQUEST, "expected a munge credential (a notice of the controller's)");
        }
        let config = match self.config.get() {
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
        if told.node != self.node.as_str() {
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
        self.outlet.tell(crate::slurm::Msg::Told { jobs: told.jobs });
        drop(last);
        Reply::text(StatusCode::OK, &format!("took the places of {count} job(s)"))
    }
}
