//! Faults said once: a failing place (a job, the store, Slurm) is one line when it starts failing and one when it
//! works again, not a line per slot.

use std::collections::HashMap;

/// Faults said and not yet cleared, by where they happen.
#[derive(Debug, Default)]
pub struct Faults(HashMap<String, String>);

impl Faults {
    /// Says `what` failed at `place`, unless that is what was said last for it.
    pub fn report(&mut self, place: &str, what: &str) {
        if self.0.get(place).is_none_or(|said| said != what) {
            log::warn!("{place}: {what}");
            self.0.insert(place.to_string(), what.to_string());
        }
    }

    /// Says `place` works again, if it had failed.
    pub fn clear(&mut self, place: &str) {
        if self.0.remove(place).is_some() {
            log::info!("{place}: works again");
        }
    }

    /// Whether no fault is said now.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
