//! The live table a status request answers with: the policy and slot, each job's row and state, `auto`'s groups
//! and `dcs`'s counts, as each caller may see them.

use std::collections::HashSet;

use super::state::Daemon;
use super::tick::place_in_slot;
use crate::managed::Managed;
use lockstep_proto::protocol::{JobStatus, Status};

/// How a job of another user is named in a group of `auto` that a user's status shows.
const OTHER_JOB: &str = "(another user's job)";

impl Daemon {
    /// The live table; `viewer` set (a user other than root) lists only that user's jobs.
    pub(super) fn status(&self, viewer: Option<u32>) -> Status {
        // What a user other than root sees: their jobs, and of the others only how many there are.
        let visible = |j: &Managed| viewer.is_none_or(|uid| j.owner == uid);
        let mine: HashSet<&str> = self.jobs.iter().filter(|j| visible(j)).map(|j| j.name.as_str()).collect();
        let shown = |name: &str| viewer.is_none() || mine.contains(name);
        let groups = self
            .planner
            .choices()
            .into_iter()
            .filter(|g| g.jobs.iter().any(|n| shown(n)))
            .map(|mut g| {
                for n in &mut g.jobs {
                    if !shown(n) {
                        *n = OTHER_JOB.to_string();
                    }
                }
                g
            })
            .collect();
        let telemetry = self.telemetry.published();
        Status {
            node: self.node.clone(),
            pid: std::process::id() as i32,
            watchdog_pid: self.journal.watchdog_pid(),
            policy: self.policy.name().to_string(),
            slot_ms: self.slot.as_millis() as u64,
            slot: self.current_slot,
            active_row: self.active_row,
            rows: self.rows,
            last_apply_us: self.last_apply_us,
            dcs: self.dcs.as_ref().map(|d| d.status(viewer.is_none(), &shown)),
            groups,
            others: self.jobs.len() - mine.len(),
            jobs: self
                .jobs
                .iter()
                .filter(|j| visible(j))
                .map(|j| {
                    // A job with a place has its row from it at once, not only from the next slot's plan (a job
                    // found since then still holds the default row 0 there).
                    let place = j.place.map(|s| place_in_slot(&s, self.current_slot, self.slot));
                    let shares = telemetry.shares(&j.name).unwrap_or_default();
                    JobStatus {
                        name: j.name.clone(),
                        row: place.map_or(j.row, |p| p.row),
                        pinned: j.pinned.is_some() || j.place.is_some(),
                        period: place.map(|p| p.period),
                        pus: j.pus.to_string(),
                        frozen: j.applied.frozen,
                        boosted: j.applied.boosted,
                        origin: j.origin.kind(),
                        owner: j.owner,
                        cgroups: j.groups.iter().filter_map(|g| g.dirs.first().cloned()).collect(),
                        coscheduled: shares.coscheduled,
                        coscheduled_window: shares.coscheduled_window,
                        rank_running: shares.running,
                        rank_waiting: shares.waiting,
                    }
                })
                .collect(),
        }
    }
}
