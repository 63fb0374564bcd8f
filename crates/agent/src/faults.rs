//! Faults said once: a failing place (a job, the store, Slurm) is one line when it starts failing and one when it
//! works again, not a line per slot.

use std::collections::HashMap;
use std::fmt;

/// Where a fault happens.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Place {
    /// A job's cgroups.
    Job(lockstep_core::ident::JobKey),
    /// The node's store, where the daemon logs its decisions.
    Store,
    /// The store, where the sampler keeps its samples.
    Samples,
    /// The eBPF maps the jobs' ranks are registered in (the co-scheduled time).
    CoScheduled,
    /// slurmctld, asked which jobs run here.
    Slurmctld,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Job(name) => write!(f, "job {name}"),
            Self::Store => f.write_str("store"),
            Self::Samples => f.write_str("samples"),
            Self::CoScheduled => f.write_str("co-scheduled time"),
            Self::Slurmctld => f.write_str("asking slurmctld which jobs run here"),
        }
    }
}

/// Faults said and not yet cleared, by where they happen, with what was said of each (a fault said again in
/// other words is a new line).
#[derive(Debug, Default)]
pub struct Faults(HashMap<Place, String>);

impl Faults {
    /// Says `what` failed at `place`, unless that is what was said last for it.
    pub fn report(&mut self, place: Place, what: &str) {
        if self.0.get(&place).is_none_or(|said| said != what) {
            log::warn!("{place}: {what}");
            self.0.insert(place, what.to_string());
        }
    }

    /// Says `place` works again, if it had failed.
    pub fn clear(&mut self, place: &Place) {
        if self.0.remove(place).is_some() {
            log::info!("{place}: works again");
        }
    }

    /// Forgets what was said of `place`, which is gone (a job that left), without a line.
    pub fn forget(&mut self, place: &Place) {
        self.0.remove(place);
    }

    /// Whether no fault is said now.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
