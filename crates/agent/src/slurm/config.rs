//! slurmctld's configuration as the agent needs it ([`Config`]): read when first needed and kept for the agent's
//! life, shared by the discovery thread (which says when Slurm time-slices jobs itself) and the notices door
//! (munged's socket, `SlurmUser`), so that slurmctld is asked once, not once by each.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use lockstep_slurm::config::Config;

/// How long after failing to read slurmctld's configuration it is not asked again: a body shaped like a
/// credential, from anyone, would else make the agent ask slurmctld each time.
const RETRY: Duration = Duration::from_secs(10);

/// slurmctld's configuration, once read; or when reading it last failed.
pub struct SlurmConfig {
    kept: Mutex<Result<Config, Option<Instant>>>,
}

impl SlurmConfig {
    /// Nothing read yet.
    pub fn new() -> Self {
        Self { kept: Mutex::new(Err(None)) }
    }

    /// slurmctld's configuration: read at the first call, kept after; after a failure, asked again at most every
    /// [`RETRY`].
    pub fn get(&self) -> Result<Config, String> {
        let mut kept = self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*kept {
            Ok(c) => return Ok(c.clone()),
            Err(Some(failed)) if failed.elapsed() < RETRY => {
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
}
