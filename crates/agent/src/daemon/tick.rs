//! One tick of the loop: the policy planned and applied to every job, what ended retired, the decisions logged
//! (to the store in batches), and the watchdog fed.

use std::time::{Duration, Instant};

use super::state::Daemon;
use crate::faults::Place;
use crate::lock_wait::LockWait;
use crate::managed::{self, ChangeError, Cost, Managed, Verdict};
use crate::progress;
use crate::writer::Record;
use lockstep_core::cosched::rows::{self, Entry};
use lockstep_core::cosched::{self, Desired, JobView};
use lockstep_core::ident::JobKey;
use lockstep_store::{Action, Decision};

impl Daemon {
    /// Applies the policy for slot `k` to every job; logs the decisions, the tick itself as `slot` at a slot
    /// boundary and as `replan` when jobs or the policy changed within a slot.
    pub(super) fn tick(&mut self, k: u64, boundary: bool) {
        let started = Instant::now();
        let started_at = lockstep_store::now();
        self.drop_ended();
        // Jobs with a cluster-wide place follow it; each set of the others that share PUs cycles through its own
        // rows, or the node's where it holds a row given from outside (the node's count, in status, is the longest
        // cycle). A job left to the kernel or halted by Slurm takes no row and is not planned: thawed, at its own
        // weight.
        let jobs = self.table.jobs();
        let local: Vec<usize> = (0..jobs.len()).filter(|&i| jobs[i].place.is_none() && jobs[i].switched()).collect();
        let planned: Vec<usize> = (0..jobs.len()).filter(|&i| jobs[i].switched()).collect();
        let entries: Vec<Entry> =
            local.iter().map(|&i| Entry { name: &jobs[i].key, pus: &jobs[i].pus, pinned: jobs[i].pinned }).collect();
        let (rows, count) = rows::assign(&entries);
        let cycles = rows::cycles(&entries, &rows, count);
        self.clock.enter(k, count);
        let jobs = self.table.jobs_mut();
        for ((&i, &r), &cycle) in local.iter().zip(&rows).zip(&cycles) {
            let j = &mut jobs[i];
            (j.row, j.round, j.favoured) = (r, cycle, u64::from(r) == k % u64::from(cycle));
        }
        for j in jobs.iter_mut() {
            if let Some(schedule) = j.place {
                let place = self.clock.place(&schedule, k);
                (j.row, j.round, j.favoured) = (place.row, place.period, place.holds(k));
            }
        }
        // What each job wanted over the slot that ends here, if it ran unfrozen throughout: read at the boundary,
        // before planning, and only of the jobs planned.
        if boundary {
            let published = self.telemetry.published();
            for &i in &planned {
                let j = &mut self.table.jobs_mut()[i];
                let cpu_ns = progress::job_cpu_ns(j);
                j.demand.boundary(published.together(&j.key), cpu_ns);
            }
        }
        let views: Vec<JobView> = planned
            .iter()
            .map(|&i| &self.table.jobs()[i])
            .map(|j| JobView {
                name: &j.key,
                favoured: j.favoured,
                round: j.round,
                pus: &j.pus,
                demand: j.demand.wanted,
                starting: j.demand.starting(),
            })
            .collect();
        if let Some(auto) = self.planning.measuring() {
            // Only jobs that share PUs with another are measured; a job alone is left to the kernel.
            let jobs = self.table.jobs();
            let mut read = self.measures.reader(jobs, &self.telemetry);
            let mut sample = |v: usize| read(&jobs[planned[v]]);
            for c in auto.observe(k, self.clock.length(), &views, &mut sample) {
                if !c.trying {
                    log::info!("auto: {} -> {}: {}", c.members(), c.policy, c.why);
                }
                self.outbox.choose(lockstep_store::now(), c);
            }
        } else if let Some(auto) = self.planning.away() {
            auto.follow(k, self.clock.length(), &views);
        }
        let mut plan = vec![Desired::default(); self.table.jobs().len()];
        for (&i, p) in planned.iter().zip(self.planning.plan(&views)) {
            plan[i] = p;
        }
        for (j, p) in self.table.jobs_mut().iter_mut().zip(plan.iter_mut()) {
            j.planned = *p;
            // A job dcs raised by weight keeps it until its quantum is over.
            p.boosted |= j.switched() && self.dcs.holds_weight(&j.key);
        }
        let (mut decisions, mut gone, prompt_done) = self.switch(&plan, started);
        self.judge_costs(&mut decisions, &mut gone);
        // A slot in which a job was held frozen says nothing of what it wants; one left to the kernel or halted by
        // Slurm is measured again from scratch when it is switched again.
        for j in self.table.jobs_mut() {
            if j.switched() {
                j.demand.held(j.applied.frozen);
            } else {
                j.demand = crate::demand::Demand::default();
            }
        }
        // Each job once, whatever found it gone: a second retire would take the job that moved into its place.
        gone.sort_unstable();
        gone.dedup();
        for i in gone.into_iter().rev() {
            self.retire(i);
        }
        self.clock.switched(started.elapsed());
        let mut slot_record =
            self.decision(None, if boundary { Action::Slot } else { Action::Replan }, started.elapsed());
        slot_record.time = started_at;
        slot_record.prompt_us = Some(prompt_done.as_secs_f64() * 1e6);
        decisions.insert(0, slot_record);
        // Which jobs the slot is for, at its boundary: what agreement across nodes is measured from.
        if boundary && self.planning.policy().slotted() {
            for j in self.table.jobs().iter().filter(|j| j.favoured && j.switched()) {
                decisions.push(self.decision(Some(&j.key), Action::Favour, Duration::ZERO));
            }
        }
        self.outbox.decide(decisions);
        if self.outbox.due() {
            self.flush();
        }
        self.publish();
    }

    /// Judges each job whose window of what its changes cost ended ([`managed::verdict`]) against what the
    /// freezer's lock alone took ([`crate::lock_wait`]), and leaves to the kernel those whose own trees made their
    /// writes dear; the decisions of the jobs thawed so go to `decisions`, a job found gone to `gone` (once).
    fn judge_costs(&mut self, decisions: &mut Vec<Decision>, gone: &mut Vec<usize>) {
        let mut verdicts = Vec::new();
        for (i, job) in self.table.jobs().iter().enumerate() {
            let Cost { window: Some(window), unjudged: true, .. } = job.cost else { continue };
            // Asked only of a window past the share: the probe measures only while one needs it.
            let lock = if window.share > managed::COST_SHARE { self.lock_probe.wait() } else { LockWait::Unknown };
            verdicts.push((i, managed::verdict(&window, lock)));
        }
        for (i, verdict) in verdicts {
            let job = &mut self.table.jobs_mut()[i];
            job.cost.unjudged = false;
            // A job found gone is retired, not left (a second write to its cgroups would find it gone again).
            if !job.switched() || gone.contains(&i) {
                continue;
            }
            match verdict {
                Verdict::Within | Verdict::Measure => {}
                Verdict::Contended(why) => {
                    if !std::mem::replace(&mut job.cost.said_contended, true) {
                        log::warn!("job {}: {why}: it stays switched", job.key);
                    }
                }
                Verdict::Left(why) => match self.table.leave(i, why) {
                    Ok(actions) => {
                        let key = self.table.jobs()[i].key.clone();
                        for a in actions {
                            decisions.push(self.decision(Some(&key), a, Duration::ZERO));
                        }
                    }
                    Err(ChangeError::Gone(_)) => gone.push(i),
                    Err(e) => {
                        self.faults.report(Place::Job(self.table.jobs()[i].key.clone()), &format!("{e:#}"));
                    }
                },
            }
        }
    }

    /// Brings every job to its `plan`, the jobs known to switch promptly first; returns the decisions taken, the
    /// jobs found gone, and how long after `started` (the tick's start) every prompt job was switched.
    fn switch(&mut self, plan: &[Desired], started: Instant) -> (Vec<Decision>, Vec<usize>, Duration) {
        // Jobs known to switch promptly first: what a job's own tree makes the kernel's writes cost falls on that
        // job alone. Among the prompt jobs and then among the others: lower before raising, so that no two sharing
        // jobs are ever boosted together, and thaw before freezing, so that no two are ever frozen together (a
        // slow job being thawed may be frozen beside a prompt one for as long as its own thaw takes).
        // A job both lowered and frozen (under `gang`, the favoured job of the slot before, raised beside a job
        // that leaves room) is lowered first and frozen last.
        let jobs = self.table.jobs();
        let prompt: Vec<bool> = jobs.iter().map(Managed::prompt).collect();
        let mut steps: Vec<(usize, Desired, u8)> = Vec::new();
        for (i, j) in jobs.iter().enumerate() {
            let lowered = !plan[i].boosted && j.applied.boosted;
            if plan[i].frozen && lowered {
                steps.push((i, Desired { boosted: false, ..j.applied }, 0));
            }
            let phase = match (plan[i].frozen, lowered) {
                (true, _) => 2,
                (false, true) => 0,
                (false, false) => 1,
            };
            steps.push((i, plan[i], phase));
        }
        steps.sort_by_key(|&(i, _, phase)| (!prompt[i], phase));
        // What the freezer's lock alone takes, measured before one of the switch's freezer writes chosen at random
        // (never after the last: a lock holder who reads right after its own write would then make the probe's
        // alone wait).
        let freezes: Vec<usize> = (0..steps.len())
            .filter(|&n| {
                let (i, want, _) = steps[n];
                want.frozen != jobs[i].applied.frozen
            })
            .collect();
        let probe_before = self.lock_probe.position(freezes.len()).map(|k| freezes[k]);
        let (mut decisions, mut gone) = (Vec::new(), Vec::new());
        let mut prompt_done = None;
        for (n, (i, want, _)) in steps.into_iter().enumerate() {
            if !prompt[i] && prompt_done.is_none() {
                prompt_done = Some(started.elapsed());
            }
            if probe_before == Some(n) {
                self.lock_probe.measure();
            }
            if gone.contains(&i) {
                continue;
            }
            let t0 = Instant::now();
            match self.table.apply(i, want) {
                Ok(actions) => {
                    let key = &self.table.jobs()[i].key;
                    // A job works again when a change of its went through (not when nothing was to be done).
                    if !actions.is_empty() && !self.faults.is_empty() {
                        self.faults.clear(&Place::Job(key.clone()));
                    }
                    for a in &actions {
                        decisions.push(self.decision(Some(key), *a, t0.elapsed()));
                    }
                }
                Err(ChangeError::Gone(_)) => gone.push(i),
                Err(e) => {
                    self.faults.report(Place::Job(self.table.jobs()[i].key.clone()), &format!("{e:#}"));
                }
            }
            // A change measured, whole or failed part-way (its writes made count): said if it makes the job slow.
            if !gone.contains(&i) {
                say_slow(&mut self.table.jobs_mut()[i]);
            }
        }
        (decisions, gone, prompt_done.unwrap_or_else(|| started.elapsed()))
    }

    /// Releases the jobs that have ended (their cgroups removed, or their adopted processes exited), and drops the
    /// cgroups that are gone from the jobs that go on.
    pub(super) fn drop_ended(&mut self) {
        for i in (0..self.table.jobs().len()).rev() {
            self.table.prune(i);
            if self.table.jobs()[i].ended() {
                self.retire(i);
            }
        }
    }

    /// Forgets job `i`, which has ended: restores what is left of it (files already gone are fine), removes the
    /// cgroup the agent created for it, and logs `gone`.
    pub(super) fn retire(&mut self, i: usize) {
        let mut job = self.table.remove(i);
        self.dcs_leave(&mut job);
        self.uncount(&job.key);
        match self.table.release(&mut job) {
            Ok(()) => log::info!("job {} ended", job.key),
            Err(e) => log::error!("job {} ended; cannot clean up after it: {e:#}", job.key),
        }
        let d = self.decision(Some(&job.key), Action::Gone, Duration::ZERO);
        self.record(Record::ManagedRemove(job.key));
        self.outbox.decide([d]);
    }

    /// Gives what waits in the outbox to the store's writer ([`super::records::Outbox::flush`]).
    pub(super) fn flush(&mut self) {
        self.table.flush(&mut self.outbox);
    }

    pub(super) fn decision(&self, job: Option<&JobKey>, action: Action, took: Duration) -> Decision {
        Decision {
            time: lockstep_store::now(),
            node: self.node.clone(),
            policy: self.planning.policy().name().to_string(),
            slot: self.clock.current(),
            active_row: self.clock.active_row(),
            rows: self.clock.rows(),
            job: job.cloned(),
            action,
            duration_us: took.as_secs_f64() * 1e6,
            prompt_us: None,
        }
    }

    /// Beats for the watchdog ([`super::pulse::Pulse::beat`]). After a gap longer than the watchdog waits (the
    /// agent was stopped), the watchdog has put every job back: the jobs are taken as restored and planned again.
    pub(super) fn heartbeat(&mut self) {
        if let Some(gap) = self.table.beat(&mut self.pulse) {
            log::warn!("did not run for {:.1} s; the watchdog restored every job, planning again", gap.as_secs_f64());
            for job in self.table.jobs_mut() {
                job.applied = cosched::Desired::default();
                job.count_frozen_time();
            }
            self.planning.replan();
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
        job.key,
        cost.as_secs_f64() * 1e3,
        crate::managed::PROMPT_SWITCH.as_millis()
    );
}

impl Daemon {
    /// Gives `record` to the store's writer.
    pub(super) fn record(&self, record: Record) {
        self.table.writer().record(record);
    }
}
