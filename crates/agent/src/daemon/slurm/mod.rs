//! The Slurm jobs of this node: taken on as discovery finds them in Slurm's cgroups while Slurm says they run
//! here, their steps and PUs kept current, their owners, rows and cluster-wide places taken from the controller's
//! notices (`crate::notices`), the prolog and slurmctld, and released by the epilog or once slurmctld no longer
//! runs them here. slurmctld is asked only when the agent finds Slurm's jobs first, and when it finds one that
//! neither its prolog nor slurmctld's last answer named (`slurm::feed`), unless the controller cannot tell
//! this node (no metrics door): then every `lockstep_slurm::REFRESH`.
//!
//! Slurm's word decides which Slurm jobs exist: a `job_<id>` directory is only a candidate, since a user can keep
//! one alive past the job's end (a process moved into a cgroup of their own below their step, which Slurm does
//! not kill). A job is taken on, and kept, only while its prolog announced it (since slurmctld was last asked) or
//! slurmctld's last answer lists it as running, configuring, suspended or stopped on this node; an epilog's end is
//! kept in the store, so that no restart takes the job on again (until slurmctld, asked after that end, lists the
//! job again: a requeued run). Directories Slurm has not run for [`crate::slurm::scan::LEFT_BEHIND`] are said once in
//! the log, with the owners of the processes left in them, and left alone: never managed, never given a row.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use super::state::Daemon;
use crate::adopt;
use crate::faults::Place;
use crate::managed::Origin;
use crate::slurm::{numbered, Answer, Chores, Found, Msg};
use crate::writer::Record;
use lockstep_cgroup::{self as cgroup, Knobs, Version};
use lockstep_core::cosched::rows::Schedule;
use lockstep_core::ident::JobKey;
use lockstep_core::job::SlurmJobId;
use lockstep_slurm::Row;
use lockstep_store::SlurmJob;

pub(super) mod known;

impl Daemon {
    /// Carries out what Slurm discovery or the controller's notices sent; an answer that cannot be sent (the
    /// discovery thread ended) is dropped.
    pub(super) fn slurm_msg(&mut self, msg: Msg) {
        match msg {
            Msg::Told { jobs } => self.told_places(&jobs),
            Msg::Scanned { found, word, halts, made, reply } => {
                match word {
                    Some(Ok(word)) => {
                        self.faults.clear(&Place::Slurmctld);
                        self.heard_slurm(word);
                    }
                    Some(Err(e)) => self.faults.report(Place::Slurmctld, &e),
                    None => {}
                }
                let chores = self.sync_slurm(found, &halts, &made);
                self.publish();
                let _ = reply.send(chores);
            }
        }
    }

    /// Takes what slurmctld said: which jobs it runs on this node, and their cluster-wide places.
    fn heard_slurm(&mut self, answer: Answer) {
        let rows: Vec<(SlurmJobId, Row)> = answer.jobs.iter().filter_map(|l| Some((l.id, l.row?))).collect();
        self.refresh_places(&rows);
        // A job whose end was marked before slurmctld was asked, and which it lists, runs again (requeued).
        let again: Vec<SlurmJobId> = answer
            .jobs
            .iter()
            .filter(|l| self.slurm.done.get(&l.id).is_some_and(|ended| *ended < answer.asked))
            .map(|l| l.id)
            .collect();
        for id in again {
            log::info!("Slurm job {id} runs here again (slurmctld lists it after its end)");
            self.slurm.done.remove(&id);
            self.record(Record::SlurmForget(id));
        }
        let word = &mut self.slurm.word;
        word.announced.retain(|_, at| *at >= answer.asked);
        word.last = Some((answer.asked, answer.jobs.into_iter().map(|l| l.id).collect()));
    }

    /// Gives the slots of the Slurm jobs Slurm holds halted (suspended: seen stopped, and slurmctld said so,
    /// `crate::slurm::Word::halted`) to their neighbours, and takes back those it resumed: a halted job is not
    /// planned (thawed and at its own weight, which its stopped processes do not use) until one of its processes
    /// is seen continued.
    fn follow_halts(&mut self) {
        for job in self.table.jobs_mut() {
            let Origin::Slurm { id, .. } = job.origin else { continue };
            let halted = self.slurm.word.halted.contains(&id);
            if halted == job.halted {
                continue;
            }
            job.halted = halted;
            self.planning.replan();
            if halted {
                log::info!("Slurm job {id} is suspended: its slots go to its neighbours until it resumes");
            } else {
                log::info!("Slurm job {id} resumed: back in its slots");
            }
        }
    }

    /// Takes on the Slurm jobs found on this node that Slurm says run here, adds the steps that started since the
    /// last scan and keeps each job's PUs current, and releases the managed ones Slurm no longer runs here;
    /// returns the cgroup work left to do outside the loop (making the weight cgroups of jobs to take on, which are
    /// taken on at the scan after, with `made` saying how the making went; gathering each job's new processes into
    /// its weight cgroup, removing those of jobs gone, saying which directories Slurm does not run). Jobs whose
    /// epilog ran are left alone; a job adopted by hand is not taken twice.
    fn sync_slurm(
        &mut self,
        found: Vec<Found>,
        halts: &[(SlurmJobId, bool)],
        made: &[(SlurmJobId, Result<(), String>)],
    ) -> Chores {
        self.forget_ended_and_gone(&found);
        let now = Instant::now();
        self.slurm.word.retain_found(&found, now);
        for &(id, halted) in halts {
            self.slurm.word.slurm_halted(id, halted);
        }
        let mut changed = self.release_slurm_jobs_not_running();
        let mut phantoms = Vec::new();
        let mut gathered = Vec::new();
        let mut ask = false;
        let mut to_make = Vec::new();
        for f in found {
            let id = f.id;
            if !self.slurm.word.runs(id) {
                if self.slurm.word.left_behind(id, now) && self.slurm.word.phantoms.insert(id) {
                    phantoms.push(f);
                } else {
                    ask |= self.slurm.word.undecided(id, now) && !self.slurm.done.contains_key(&id);
                }
                continue;
            }
            self.slurm.word.listed(id);
            if self.slurm.done.contains_key(&id) {
                continue;
            }
            if f.partial && self.slurm.word.partial.insert(id) {
                log::warn!(
                    "Slurm job {id}: a step holds more than {} directories; only the first were looked at for its \
                     tasks (the job's user may make cgroups in their step)",
                    crate::slurm::ENTRIES
                );
            }
            gathered.push(f.clone());
            let name = JobKey::Slurm(id);
            let hint = self.slurm.announced.get(&f.id).copied();
            if let Some(i) = self.table.slurm(id) {
                for dirs in f.groups {
                    if !self.table.jobs()[i].groups.iter().any(|g| g.dirs == dirs) {
                        if let Err(e) = self.table.add_group(i, dirs) {
                            log::info!("job {name}: {e:#}");
                        }
                        changed = true;
                    }
                }
                let job = &mut self.table.jobs_mut()[i];
                if f.pus != job.pus {
                    job.pus = f.pus;
                    changed = true;
                }
                continue;
            }
            let adopted_by_hand =
                self.table.jobs().iter().any(|j| {
                    j.groups.iter().flat_map(|g| &g.dirs).any(|d| f.job_dirs.iter().any(|jd| d.starts_with(jd)))
                });
            // Taken on once the store takes its record again (the fault is said).
            if adopted_by_hand || self.table.store_refusal().is_some() {
                continue;
            }
            // A weight cgroup to make is made by the discovery thread; the job is taken on at the next scan.
            let weight_dir = match self.weight_dir(&f) {
                Some(dir) if !dir.is_dir() => {
                    if let Some((_, Err(e))) = made.iter().find(|(m, _)| *m == id) {
                        log::warn!("Slurm job {id}: no CPU weight to boost (cannot make {}: {e})", dir.display());
                        None
                    } else {
                        to_make.push((id, dir));
                        continue;
                    }
                }
                dir => dir,
            };
            let owner = hint.map(|h| h.uid).or(f.uid);
            let mut job = adopt::from_slurm(f, owner, weight_dir, hint.and_then(|h| h.row));
            job.place = self.slurm.places.get(&id).copied();
            match serde_json::to_string(&job.saved()) {
                Ok(saved) => {
                    self.record(Record::ManagedPut(JobKey::Slurm(id), saved));
                    self.count(&job);
                    self.table.push(job);
                    changed = true;
                }
                Err(e) => log::warn!("cannot take on Slurm job {id}: {e:#}"),
            }
        }
        if changed {
            self.planning.replan();
        }
        self.follow_halts();
        let gather = gathered
            .into_iter()
            .filter_map(|f| {
                let job = &self.table.jobs()[self.table.slurm(f.id)?];
                match &job.origin {
                    Origin::Slurm { weight_dir: Some(w), .. } => Some((f, w.clone())),
                    _ => None,
                }
            })
            .collect();
        let halts = self.slurm.word.halts_to_ask(now);
        Chores { make: to_make, gather, sweep: self.unmanaged_weight_dirs(), phantoms, ask, halts }
    }

    /// Forgets the end of the Slurm jobs whose directories are gone (`found`: those there), in memory and in the
    /// store: should the job run here again, its prolog or slurmctld says so.
    fn forget_ended_and_gone(&mut self, found: &[Found]) {
        let gone: Vec<SlurmJobId> =
            self.slurm.done.keys().filter(|id| !found.iter().any(|f| f.id == **id)).copied().collect();
        for id in gone {
            self.slurm.done.remove(&id);
            self.record(Record::SlurmForget(id));
        }
    }

    /// Releases (restoring them) the managed Slurm jobs that Slurm no longer says run on this node: slurmctld
    /// answered without them, and no prolog announced them since. Whether any was.
    fn release_slurm_jobs_not_running(&mut self) -> bool {
        if self.slurm.word.last.is_none() {
            return false;
        }
        let stale: Vec<SlurmJobId> = self
            .table
            .jobs()
            .iter()
            .filter_map(|j| match j.origin {
                Origin::Slurm { id, .. } if !self.slurm.word.runs(id) => Some(id),
                _ => None,
            })
            .collect();
        // Released, not ended: should slurmctld list it again, it is taken on again.
        for &id in &stale {
            log::info!("Slurm job {id}: slurmctld no longer runs it on this node; released");
            if let Some(i) = self.table.slurm(id) {
                self.retire(i);
            }
        }
        if !stale.is_empty() {
            self.flush();
        }
        !stale.is_empty()
    }

    /// Restores and forgets the Slurm jobs taken over from the store whose end it also holds (an agent that died
    /// between the two writes).
    pub(super) fn retire_ended_slurm_jobs(&mut self) {
        while let Some(i) = self
            .table
            .jobs()
            .iter()
            .position(|j| matches!(j.origin, Origin::Slurm { id, .. } if self.slurm.done.contains_key(&id)))
        {
            log::info!("job {}: its Slurm job ended (its epilog); released", self.table.jobs()[i].key);
            self.retire(i);
        }
    }

    /// Marks Slurm job `id` ended on this node, in memory and (for good) in the store.
    fn end_slurm_job(&mut self, id: SlurmJobId) {
        self.slurm.announced.remove(&id);
        self.slurm.places.remove(&id);
        self.slurm.node_rows.remove(&id);
        self.slurm.word.announced.remove(&id);
        self.slurm.done.insert(id, Instant::now());
        self.record(Record::SlurmEnd(id));
    }

    /// The v1 cpu hierarchy's root, if mounted.
    fn v1_cpu_root(&self) -> Option<PathBuf> {
        self.table.backend().roots().into_iter().find(|r| r.join("cpu.shares").exists())
    }

    /// The weight cgroups of this node whose job the agent no longer manages (it ended, or an agent died before
    /// cleaning up).
    fn unmanaged_weight_dirs(&self) -> Vec<PathBuf> {
        let Some(root) = self.v1_cpu_root() else { return Vec::new() };
        let prefix = format!("slurm_{}_job_", self.slurm.node);
        numbered::<SlurmJobId>(&root.join(cgroup::PARENT), &prefix)
            .into_iter()
            .filter(|(id, _)| self.table.slurm(*id).is_none())
            .map(|(_, dir)| dir)
            .collect()
    }

    /// On cgroup v1, where Slurm's job cgroups have no cpu controller: `cpu/lockstep/slurm_<node>_job_<id>` (named
    /// like Slurm's, by node, as several slurmd may share a host), the weight cgroup for the job's processes,
    /// whether made yet or not. `None` when the job's cgroups have a CPU weight of their own, or no cpu hierarchy
    /// exists.
    fn weight_dir(&self, found: &Found) -> Option<PathBuf> {
        let has_weight = found.groups.iter().any(|g| Knobs::find(g).weight.is_some());
        if has_weight || self.table.backend().version() != Version::V1 {
            return None;
        }
        let root = self.v1_cpu_root()?;
        Some(root.join(cgroup::PARENT).join(format!("slurm_{}_job_{}", self.slurm.node, found.id)))
    }

    /// The prolog announced job `job` on this node: remember its owner and row or place (a job already found
    /// gets them at once); a row or place the prolog does not give is the one the controller's hooks told, if
    /// they did. Whether the agent now holds one.
    pub(super) fn slurm_prolog(&mut self, mut job: SlurmJob, place: Option<Schedule>) -> anyhow::Result<bool> {
        job.row = job.row.or_else(|| self.slurm.node_rows.get(&job.id).copied());
        let place = place.or_else(|| self.slurm.places.get(&job.id).copied());
        self.record(Record::SlurmPut(job));
        log::info!(
            "Slurm job {} registered by its prolog (uid {}, row {})",
            job.id,
            job.uid,
            job.row.map_or_else(|| "from the name".to_string(), |r| r.to_string())
        );
        self.slurm.announced.insert(job.id, job);
        self.slurm.done.remove(&job.id);
        self.slurm.word.announced.insert(job.id, Instant::now());
        self.slurm.word.listed(job.id);
        if let Some(p) = place {
            self.slurm.places.insert(job.id, p);
        }
        if let Some(i) = self.table.slurm(job.id) {
            let m = &mut self.table.jobs_mut()[i];
            m.pinned = job.row;
            m.place = place.or(m.place);
            m.owner = job.uid;
            let record = Record::ManagedPut(m.key.clone(), serde_json::to_string(&m.saved())?);
            self.record(record);
            self.planning.replan();
        }
        Ok(job.row.is_some() || place.is_some())
    }

    /// The controller's hooks told this node the rows or places they gave or changed (`lockstep_slurm::push`):
    /// taken as slurmctld's answer's are, whether or not the jobs run here yet (the controller's prolog tells
    /// before the job starts).
    fn told_places(&mut self, jobs: &[lockstep_slurm::Listed]) {
        // A notice names every job that holds this node: the places of the others it held for jobs that never came
        // (cancelled before they started here) go.
        let named = |id: &SlurmJobId| jobs.iter().any(|l| l.id == *id);
        let kept = |id: &SlurmJobId, jobs: &[crate::managed::Managed], slurm: &HashMap<SlurmJobId, SlurmJob>| {
            named(id) || slurm.contains_key(id) || jobs.iter().any(|j| j.slurm_id() == Some(*id))
        };
        let (managed, slurm) = (self.table.jobs(), &self.slurm.announced);
        self.slurm.places.retain(|id, _| kept(id, managed, slurm));
        self.slurm.node_rows.retain(|id, _| kept(id, managed, slurm));
        let rows: Vec<(SlurmJobId, Row)> = jobs.iter().filter_map(|l| Some((l.id, l.row?))).collect();
        let told: Vec<String> = rows.iter().map(|(id, row)| format!("{id}: {}", lockstep_slurm::show(*row))).collect();
        log::info!("the controller's hooks told: {}", told.join(", "));
        self.refresh_places(&rows);
    }

    /// Takes the cluster-wide places slurmctld holds for this node's jobs now (a change of place carries the
    /// time it takes effect, so every node of a job switches in the same slot), and the rows of the nodes' own
    /// cycles for their prologs.
    pub(super) fn refresh_places(&mut self, rows: &[(SlurmJobId, Row)]) {
        for &(id, row) in rows {
            let schedule = match row {
                Row::Cluster(schedule) => schedule,
                Row::Node(r) => {
                    self.slurm.node_rows.insert(id, r);
                    continue;
                }
            };
            if self.slurm.places.insert(id, schedule) == Some(schedule) {
                continue;
            }
            if let Some(i) = self.table.slurm(id) {
                self.table.jobs_mut()[i].place = Some(schedule);
                self.planning.replan();
            }
        }
    }

    /// The epilog ran for job `id`: its processes are gone; restore and forget it, and do not take it on again
    /// while Slurm removes its cgroups.
    pub(super) fn slurm_epilog(&mut self, id: SlurmJobId) {
        log::info!("Slurm job {id} ended (its epilog)");
        if let Some(i) = self.table.slurm(id) {
            self.retire(i);
            self.flush();
            self.planning.replan();
        }
        self.end_slurm_job(id);
    }
}
