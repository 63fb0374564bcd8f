//! One tick of the loop: the policy planned and applied to every job, what ended retired, the decisions logged
//! (to the store in batches), and the watchdog fed.

use std::time::{Duration, Instant};

use super::records::Record;
use super::state::Daemon;
use crate::managed::{ChangeError, Managed};
use crate::progress;
use crate::watchdog;
use lockstep_core::cosched::rows::{self, Entry, Place, Schedule};
use lockstep_core::cosched::{self, slot, Desired, JobView};
use lockstep_store::{Action, Decision};

/// Decisions kept while the store cannot take them.
const MAX_PENDING: usize = 100_000;

/// How often decisions reach the store (they are batched: one transaction per interval, not per slot).
const LOG_INTERVAL: Duration = Duration::from_secs(1);

impl Daemon {
    /// Applies the policy for slot `k` to every job; logs the decisions, the tick itself as `slot` at a slot
    /// boundary and as `replan` when jobs or the policy changed within a slot.
    pub(super) fn tick(&mut self, k: u64, boundary: bool) {
        let started = Instant::now();
        let started_at = lockstep_store::now();
        self.drop_ended();
        // Jobs with a cluster-wide place follow it; the others share the node's own cycle of rows. A job left to the
        // kernel or halted by Slurm takes no row and is not planned: thawed, at its own weight.
        let local: Vec<usize> =
            (0..self.jobs.len()).filter(|&i| self.jobs[i].place.is_none() && self.jobs[i].switched()).collect();
        let planned: Vec<usize> = (0..self.jobs.len()).filter(|&i| self.jobs[i].switched()).collect();
        let entries: Vec<Entry> = local
            .iter()
            .map(|&i| Entry { name: &self.jobs[i].name, pus: &self.jobs[i].pus, pinned: self.jobs[i].pinned })
            .collect();
        let (rows, count) = rows::assign(&entries);
        self.rows = count;
        self.current_slot = k;
        self.active_row = (k % u64::from(count)) as u32;
        for (&i, r) in local.iter().zip(&rows) {
            let j = &mut self.jobs[i];
            (j.row, j.round, j.favoured) = (*r, count, *r == self.active_row);
        }
        for j in &mut self.jobs {
            if let Some(schedule) = j.place {
                let place = place_in_slot(&schedule, k, self.slot);
                (j.row, j.round, j.favoured) = (place.row, place.period, place.holds(k));
            }
        }
        // What each job wanted over the slot that ends here, if it ran unfrozen throughout: read at the boundary,
        // before planning, and only of the jobs planned.
        if boundary {
            let published = self.telemetry.published();
            for &i in &planned {
                let j = &mut self.jobs[i];
                let cpu_ns = progress::job_cpu_ns(j);
                j.demand.boundary(published.together(&j.name), cpu_ns);
            }
        }
        let views: Vec<JobView> = planned
            .iter()
            .map(|&i| &self.jobs[i])
            .map(|j| JobView {
                name: &j.name,
                favoured: j.favoured,
                round: j.round,
                pus: &j.pus,
                demand: j.demand.wanted,
            })
            .collect();
        if let Some(auto) = self.planner.measuring() {
            // Only jobs that share PUs with another are measured; a job alone is left to the kernel.
            let jobs = &self.jobs;
            let mut read = self.measures.reader(jobs, &self.telemetry);
            let mut sample = |v: usize| read(&jobs[planned[v]]);
            for c in auto.observe(k, self.slot, &views, &mut sample) {
                if !c.trying {
                    log::info!("auto: {} -> {}: {}", c.jobs.join(" "), c.policy, c.why);
                }
                self.choices.push((lockstep_store::now(), c));
            }
        }
        let mut plan = vec![Desired::default(); self.jobs.len()];
        for (&i, p) in planned.iter().zip(self.planner.plan(&views)) {
            plan[i] = p;
        }
        for (j, p) in self.jobs.iter_mut().zip(plan.iter_mut()) {
            j.planned = *p;
            // A job dcs raised by weight keeps it until its quantum is over.
            p.boosted |= j.switched() && self.dcs.holds_weight(&j.name);
        }
        let (mut decisions, mut gone, prompt_done) = self.switch(&plan, started);
        // A slot in which a job was held frozen says nothing of what it wants; one left to the kernel or halted by
        // Slurm is measured again from scratch when it is switched again.
        for j in &mut self.jobs {
            if j.switched() {
                j.demand.held(j.applied.frozen);
            } else {
                j.demand = crate::demand::Demand::default();
            }
        }
        gone.sort_unstable();
        for i in gone.into_iter().rev() {
            self.retire(i);
        }
        self.last_apply_us = started.elapsed().as_secs_f64() * 1e6;
        let mut slot_record =
            self.decision(None, if boundary { Action::Slot } else { Action::Replan }, started.elapsed());
        slot_record.time = started_at;
        slot_record.prompt_us = Some(prompt_done.as_secs_f64() * 1e6);
        decisions.insert(0, slot_record);
        // Which jobs the slot is for, at its boundary: what agreement across nodes is measured from.
        if boundary && self.policy.slotted() {
            for j in self.jobs.iter().filter(|j| j.favoured && j.switched()) {
                decisions.push(self.decision(Some(&j.name), Action::Favour, Duration::ZERO));
            }
        }
        self.pending.extend(decisions);
        if self.last_flush.elapsed() >= LOG_INTERVAL {
            self.flush();
        }
        self.publish();
    }

    /// Brings every job to its `plan`, the jobs known to switch promptly first; returns the decisions taken, the
    /// jobs found gone, and how long after `started` (the tick's start) every prompt job was switched.
    fn switch(&mut self, plan: &[Desired], started: Instant) -> (Vec<Decision>, Vec<usize>, Duration) {
        // Jobs known to switch promptly first: what a job's own tree makes the kernel's writes cost falls on that
        // job alone. Among the prompt jobs and then among the others: lower before raising, so that no two sharing
        // jobs are ever boosted together, and thaw before freezing, so that no two are ever frozen together (a
        // slow job being thawed may be frozen beside a prompt one for as long as its own thaw takes).
        let prompt: Vec<bool> = self.jobs.iter().map(Managed::prompt).collect();
        let mut order: Vec<usize> = (0..self.jobs.len()).collect();
        order.sort_by_key(|&i| {
            let lowered = !plan[i].boosted && self.jobs[i].applied.boosted;
            let phase = match (plan[i].frozen, lowered) {
                (true, _) => 2,
                (false, true) => 0,
                (false, false) => 1,
            };
            (!prompt[i], phase)
        });
        let (mut decisions, mut gone) = (Vec::new(), Vec::new());
        let mut prompt_done = None;
        for i in order {
            if !prompt[i] && prompt_done.is_none() {
                prompt_done = Some(started.elapsed());
            }
            let t0 = Instant::now();
            match self.jobs[i].apply(plan[i], &mut self.journal, &self.store) {
                Ok(actions) => {
                    // A job works again when a change of its went through (not when nothing was to be done).
                    if !actions.is_empty() && !self.faults.is_empty() {
                        self.faults.clear(&format!("job {}", self.jobs[i].name));
                    }
                    if !actions.is_empty() {
                        say_slow(&mut self.jobs[i]);
                    }
                    for a in actions {
                        decisions.push(self.decision(Some(&self.jobs[i].name), a, t0.elapsed()));
                    }
                }
                Err(ChangeError::Gone(_)) => gone.push(i),
                Err(e) => {
                    let name = self.jobs[i].name.clone();
                    self.faults.report(&format!("job {name}"), &format!("{e:#}"));
                }
            }
        }
        (decisions, gone, prompt_done.unwrap_or_else(|| started.elapsed()))
    }

    /// Releases the jobs that have ended (their cgroups removed, or their adopted processes exited), and drops the
    /// cgroups that are gone from the jobs that go on.
    pub(super) fn drop_ended(&mut self) {
        for i in (0..self.jobs.len()).rev() {
            self.jobs[i].prune(&mut self.journal);
            if self.jobs[i].ended() {
                self.retire(i);
            }
        }
    }

    /// Forgets job `i`, which has ended: restores what is left of it (files already gone are fine), removes the
    /// cgroup the agent created for it, and logs `gone`.
    pub(super) fn retire(&mut self, i: usize) {
        let mut job = self.jobs.remove(i);
        self.dcs_leave(&mut job);
        self.uncount(&job.name);
        match job.release(&mut self.journal, &self.store) {
            Ok(()) => log::info!("job {} ended", job.name),
            Err(e) => log::error!("job {} ended; cannot clean up after it: {e:#}", job.name),
        }
        let _ = self.record(Record::ManagedRemove(job.name.clone()));
        let d = self.decision(Some(&job.name), Action::Gone, Duration::ZERO);
        self.pending.push(d);
    }

    /// Writes what waited for the store (the daemon's records and journal entries the store was busy for), then
    /// pending decisions and journal removals in one transaction, then `auto`'s pending choices in another. What
    /// was written is dropped, each batch on its own (decisions written are never written again because the
    /// choices failed); when the store cannot take a batch (locked, read-only, full), it waits for the next flush,
    /// the oldest decisions and choices dropped past [`MAX_PENDING`]. Nothing here waits for another connection's
    /// lock (the loop's store connection has no busy timeout).
    pub(super) fn flush(&mut self) {
        let records = self.save_records().and(self.journal.save_unsaved(&self.store));
        let restored = self.journal.take_restored();
        let decisions = self.store.log_decisions(&self.pending, &restored);
        if decisions.is_ok() {
            self.pending.clear();
        } else {
            self.journal.restore_pending(restored);
            let excess = self.pending.len().saturating_sub(MAX_PENDING);
            self.pending.drain(..excess);
        }
        let choices = self.store.log_auto(&self.node, &self.choices);
        if choices.is_ok() {
            self.choices.clear();
        } else {
            let excess = self.choices.len().saturating_sub(MAX_PENDING);
            self.choices.drain(..excess);
        }
        match records.and(decisions).and(choices) {
            Ok(()) => self.faults.clear("store"),
            Err(e) => self.faults.report("store", &format!("cannot log decisions: {e:#}")),
        }
        self.last_flush = Instant::now();
    }

    pub(super) fn decision(&self, job: Option<&str>, action: Action, took: Duration) -> Decision {
        Decision {
            time: lockstep_store::now(),
            node: self.node.clone(),
            policy: self.policy.name().to_string(),
            slot: self.current_slot,
            active_row: self.active_row,
            rows: self.rows,
            job: job.map(str::to_string),
            action,
            duration_us: took.as_secs_f64() * 1e6,
            prompt_us: None,
        }
    }

    /// Beats for the watchdog (starting a new one if it died). After a gap longer than the watchdog waits (the
    /// agent was stopped), the watchdog has put every job back: the jobs are taken as restored and planned again.
    pub(super) fn heartbeat(&mut self) {
        if self.last_beat.elapsed() >= watchdog::BEAT_TIMEOUT {
            log::warn!(
                "did not run for {:.1} s; the watchdog restored every job, planning again",
                self.last_beat.elapsed().as_secs_f64()
            );
            for job in &mut self.jobs {
                job.applied = cosched::Desired::default();
                job.count_frozen_time();
            }
            self.replan = true;
        }
        self.journal.heartbeat();
        self.last_beat = Instant::now();
        if let Some(file) = &self.clock_skew_file {
            // The test seam for wall-clock steps: nanoseconds to add to the clock, re-read at every beat.
            if let Some(ns) = read_small(file).and_then(|t| t.trim().parse::<i64>().ok()) {
                slot::set_clock_offset(ns);
            }
        }
    }
}

/// Says once that `job`, whose change was just measured, is switched after the others, when it is.
fn say_slow(job: &mut Managed) {
    let Some(cost) = job.switch_cost.filter(|_| !job.prompt() && !job.said_slow) else { return };
    job.said_slow = true;
    log::info!(
        "job {}: a change of its cgroups took the kernel {:.1} ms (more than {} ms: each write walks the cgroups and \
         processes below them): it is switched after every other job, so that this falls on it alone",
        job.name,
        cost.as_secs_f64() * 1e3,
        crate::managed::PROMPT_SWITCH.as_millis()
    );
}

/// The place `schedule` holds in slot `k` of length `slot`: the one in force when the slot starts, so that every
/// node of the job switches in the same slot.
pub(super) fn place_in_slot(schedule: &Schedule, k: u64, slot: Duration) -> Place {
    schedule.at(slot::start_ns(k, slot) / 1_000_000)
}

/// The first 64 bytes of regular file `file` as text, read without following a link or blocking on a FIFO.
fn read_small(file: &std::path::Path) -> Option<String> {
    use std::io::Read;
    let (f, _) = lockstep_core::trust::open_regular(file)?;
    let mut text = String::new();
    f.take(64).read_to_string(&mut text).ok()?;
    Some(text)
}

impl Daemon {
    /// Writes `record` now, or, when the store is busy (or writes are already waiting, which go first), keeps it
    /// for the next flush. Any other failure is the caller's.
    pub(super) fn record(&mut self, record: Record) -> lockstep_store::Result<()> {
        if self.unsaved.is_empty() {
            match record.write(&self.store) {
                Err(e) if e.is_busy() => {}
                done => return done,
            }
        }
        self.unsaved.push(record);
        Ok(())
    }

    /// Writes the records kept while the store was busy, in the order they were made, up to the first that still
    /// cannot be written (busy again: it and those after it wait for the next flush; failed for good: said and
    /// dropped).
    pub(super) fn save_records(&mut self) -> lockstep_store::Result<()> {
        while let Some(record) = self.unsaved.first() {
            match record.write(&self.store) {
                Ok(()) => {}
                Err(e) if e.is_busy() => return Err(e),
                Err(e) => log::error!("cannot write {} to the store: {e:#}", record.what()),
            }
            self.unsaved.remove(0);
        }
        Ok(())
    }
}
