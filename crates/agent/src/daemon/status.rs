//! The live table a status request answers with: the policy and slot, each job's row and state, `auto`'s groups
//! and `dcs`'s counts, as each caller may see them.

use std::collections::HashSet;

use super::board::Board;
use super::state::Daemon;
use lockstep_core::cosched::auto::Member;
use lockstep_core::ident::JobKey;
use lockstep_proto::protocol::{DcsStatus, JobStatus, Status};

impl Daemon {
    /// The live table, whole (root's view); [`visible_to`] filters it for another user.
    pub(super) fn status(&self) -> Status {
        let groups = self.planning.choices();
        let telemetry = self.telemetry.published();
        Status {
            node: self.node.clone(),
            pid: std::process::id() as i32,
            watchdog_pid: self.table.watchdog_pid(),
            policy: self.planning.policy().name().to_string(),
            slot_length: self.clock.length(),
            slot: self.clock.current(),
            active_row: self.clock.active_row(),
            rows: self.clock.rows(),
            last_apply_us: self.clock.last_apply_us(),
            dcs: self.dcs.status(),
            groups,
            others: 0,
            lateness: self.clock.lateness().clone(),
            jobs: self
                .table
                .jobs()
                .iter()
                .map(|j| {
                    // A job with a place has its row from it at once, not only from the next slot's plan (a job
                    // found since then still holds the default row 0 there).
                    let place = j.place.map(|s| self.clock.place(&s, self.clock.current()));
                    let shares = telemetry.shares(&j.key).unwrap_or_default();
                    JobStatus {
                        name: j.key.clone(),
                        row: place.map_or(j.row, |p| p.row),
                        pinned: j.pinned.is_some() || j.place.is_some(),
                        // A set of jobs cycling through fewer rows than the node's longest cycle says so: never a
                        // job given its row (its set cycles through the node's count), nor one alone or not yet
                        // planned (a cycle of 1, as a job just taken on holds until the next tick).
                        period: place.map(|p| p.period).or_else(|| {
                            let shorter = (2..self.clock.rows()).contains(&j.round);
                            (j.place.is_none() && j.pinned.is_none() && j.switched() && shorter).then_some(j.round)
                        }),
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
                        cpus_wanted: j.demand.wanted,
                        starting: j.demand.starting(),
                        left: j.unswitched(),
                        frozen_seconds: j.frozen_seconds(),
                        frozen_for_seconds: j.frozen_time.1.map_or(0.0, |at| at.elapsed().as_secs_f64()),
                    }
                })
                .collect(),
        }
    }
}

/// The live table `full` as user `viewer` may see it (`None`: root, all of it): only that user's jobs, and of
/// the others only how many there are; in `auto`'s groups, the other users' jobs unnamed and no measurements of
/// a group that holds one (they would be the other users' progress); in `dcs`'s section,
/// only that user's jobs, without the node-wide latencies.
pub fn visible_to(full: &Status, viewer: Option<u32>) -> Status {
    let Some(uid) = viewer else { return full.clone() };
    let mine: HashSet<&JobKey> = full.jobs.iter().filter(|j| j.owner == uid).map(|j| &j.name).collect();
    let is_mine = |m: &Member| matches!(m, Member::Job(key) if mine.contains(key));
    let groups = full
        .groups
        .iter()
        .filter(|g| g.jobs.iter().any(is_mine))
        .map(|g| {
            let mut g = g.clone();
            if !g.jobs.iter().all(is_mine) {
                // Their progress is theirs to read (the measurements are per job, in the group's order).
                g.rates.clear();
            }
            for m in &mut g.jobs {
                if !is_mine(m) {
                    *m = Member::Unnamed;
                }
            }
            g
        })
        .collect();
    let dcs = full.dcs.as_ref().map(|d| DcsStatus {
        latency_p50_us: 0.0,
        latency_p99_us: 0.0,
        latency_max_us: 0.0,
        jobs: d.jobs.iter().filter(|j| mine.contains(&j.name)).cloned().collect(),
        ..d.clone()
    });
    Status {
        dcs,
        groups,
        others: full.jobs.len() - mine.len(),
        jobs: full.jobs.iter().filter(|j| j.owner == uid).cloned().collect(),
        ..full.clone()
    }
}

impl Daemon {
    /// Where the doors read the daemon's status.
    pub fn board(&self) -> Board {
        self.publisher.board()
    }

    /// Publishes the status as it is now.
    pub(super) fn publish(&mut self) {
        let status = self.status();
        self.publisher.publish(status);
    }
}

#[cfg(test)]
mod tests {
    /// What a user other than root reads from the board: their jobs, a count of the others, `auto`'s groups with
    /// the others' jobs unnamed, `dcs`'s jobs of theirs without the node-wide latencies; root reads it whole.
    #[test]
    fn a_user_reads_only_their_own_jobs_from_the_board() {
        use lockstep_core::cosched::auto::{Choice, Member};
        use lockstep_proto::protocol::{DcsJob, DcsStatus, JobStatus, Status};
        let job = |name: &str, owner: u32| -> JobStatus {
            let fields = serde_json::json!({"name": name, "row": 0, "pinned": false, "pus": "0", "frozen": false,
                "boosted": false, "origin": "pids", "cgroups": [], "owner": owner});
            serde_json::from_value(fields).unwrap()
        };
        let rate = lockstep_core::cosched::auto::Rate { calls_s: Some(9.0), calls: None, cpu_s: 1.0, together_s: None };
        let group = |jobs: &[&str]| Choice {
            jobs: jobs.iter().map(|j| Member::Job(j.parse().unwrap())).collect(),
            policy: "gang".into(),
            trying: false,
            why: String::new(),
            rates: [("gang".to_string(), vec![rate; jobs.len()])].into(),
        };
        let dcs_job = |name: &str| DcsJob {
            name: name.parse().unwrap(),
            ports: 0,
            packets: 0,
            bytes: 0,
            raises: 0,
            raised: false,
        };
        let full = Status {
            jobs: vec![job("mine", 1000), job("roots", 0), job("theirs", 1001)],
            groups: vec![group(&["mine", "roots"]), group(&["roots", "theirs"])],
            dcs: Some(DcsStatus {
                latency_p99_us: 7.0,
                raises: 3,
                jobs: vec![dcs_job("mine"), dcs_job("theirs")],
                ..DcsStatus::default()
            }),
            ..Status::new("n1".parse().unwrap())
        };
        let seen = super::visible_to(&full, Some(1000));
        let names = |jobs: &[JobStatus]| jobs.iter().map(|j| j.name.to_string()).collect::<Vec<_>>();
        assert_eq!(names(&seen.jobs), ["mine"]);
        assert_eq!(seen.others, 2);
        assert_eq!(seen.groups.len(), 1);
        assert_eq!(seen.groups[0].jobs, [Member::Job("mine".parse().unwrap()), Member::Unnamed]);
        assert!(seen.groups[0].rates.is_empty(), "another user's job's progress: {:?}", seen.groups[0].rates);
        // As the CLI reads it: the other job unnamed.
        let text = serde_json::to_string(&seen.groups[0].jobs).unwrap();
        assert_eq!(text, r#"["mine","(another user's job)"]"#);
        let dcs = seen.dcs.unwrap();
        assert_eq!(dcs.jobs.iter().map(|j| j.name.to_string()).collect::<Vec<_>>(), ["mine"]);
        assert_eq!((dcs.latency_p99_us, dcs.raises), (0.0, 3));
        let root = super::visible_to(&full, None);
        assert_eq!(serde_json::to_string(&root).unwrap(), serde_json::to_string(&full).unwrap());
    }
}
