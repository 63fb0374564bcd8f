//! `dcs` as the daemon holds it: only its `dcs` part (the parent module) starts, stops or steps the engine.

use crate::dcs::engine::{Engine, Settings};
use lockstep_proto::protocol::DcsStatus;

/// The engine in force, if a `dcs` policy is, and how to start the next one; its fields are the `dcs` part's
/// alone.
pub(crate) struct DcsHost {
    /// Message-driven raises, while a `dcs` policy is in force.
    pub(super) engine: Option<Engine>,
    /// How `dcs` runs when a policy asks for it.
    pub(super) settings: Settings,
    /// How many engines were started: the next one's ID.
    pub(super) started: u64,
}

impl DcsHost {
    /// No engine yet; one started later runs with `settings`.
    pub(crate) fn new(settings: Settings) -> Self {
        Self { engine: None, settings, started: 0 }
    }

    /// What `status` shows of the engine in force.
    pub(crate) fn status(&self) -> Option<DcsStatus> {
        self.engine.as_ref().map(|d| d.status(true, &|_| true))
    }

    /// Whether the engine in force holds job `name`'s weight raised (until its quantum is over).
    pub(crate) fn holds_weight(&self, name: &lockstep_core::ident::JobKey) -> bool {
        self.engine.as_ref().is_some_and(|d| d.holds_weight(name))
    }

    /// The engine in force, if it is engine `id`.
    pub(super) fn in_force(&mut self, id: u64) -> Option<&mut Engine> {
        self.engine.as_mut().filter(|e| e.id == id)
    }
}
