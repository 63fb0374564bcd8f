//! The Slurm jobs of this node: taken on as discovery finds them in Slurm's cgroups while Slurm says they run
//! here, their steps and PUs kept current, their owners, rows and cluster-wide places taken from the prolog and
//! slurmctld, and released by the epilog or once slurmctld no longer runs them here.
//!
//! Slurm's word decides which Slurm jobs exist: a `job_<id>` directory is only a candidate, since a user can keep
//! one alive past the job's end (a process moved into a cgroup of their own below their step, which Slurm does
//! not kill). A job is taken on, and kept, only while its prolog announced it (since slurmctld was last asked) or
//! slurmctld's last answer lists it as running, configuring or suspended on this node; an epilog's end is kept in
//! the store, so that no restart takes the job on again. A directory Slurm does not run is said once in the log,
//! with the owners of the processes left in it, and left alone: never managed, never given a row.

use std::fs;
use std::path::PathBuf;
use std::time::Instant;

use super::records::Record;
use super::state::Daemon;
use crate::adopt;
use crate::managed::Origin;
use crate::slurm::{numbered, Answer, Chores, Found};
use lockstep_cgroup::{self as cgroup, Knobs, Version};
use lockstep_core::cosched::rows::Schedule;
use lockstep_core::job::SlurmJobId;
use lockstep_slurm::{job_name, Row};
use lockstep_store::SlurmJob;

impl Daemon {
    /// Takes what slurmctld said: which jobs it runs on this node, and their cluster-wide places.
    pub(super) fn heard_slurm(&mut self, answer: Answer) {
        let rows: Vec<(SlurmJobId, Row)> = answer.jobs.iter().filter_map(|&(id, row)| Some((id, row?))).collect();
        self.refresh_places(&rows);
        let word = &mut self.slurm_word;
        word.announced.retain(|_, at| *at >= answer.asked);
        word.last = Some((answer.asked, answer.jobs.into_iter().map(|(id, _)| id).collect()));
    }

    /// Takes on the Slurm jobs found on this node that Slurm says run here, adds the steps that started since the
    /// last scan and keeps each job's PUs current, and releases the managed ones Slurm no longer runs here;
    /// returns the cgroup work left to do outside the loop (gathering each job's new processes into its weight
    /// cgroup, removing those of jobs gone, saying which directories Slurm does not run). Jobs whose epilog ran
    /// are left alone; a job adopted by hand is not taken twice.
    pub(super) fn sync_slurm(&mut self, found: Vec<Found>) -> Chores {
        let gone: Vec<SlurmJobId> =
            self.slurm_done.iter().filter(|id| !found.iter().any(|f| f.id == **id)).copied().collect();
        for id in gone {
            self.slurm_done.remove(&id);
            if let Err(e) = self.record(Record::SlurmForget(id)) {
                crate::log::warning!("Slurm job {id}: {e:#}");
            }
        }
        let word = &mut self.slurm_word;
        word.phantoms.retain(|id| found.iter().any(|f| f.id == *id));
        word.partial.retain(|id| found.iter().any(|f| f.id == *id));
        let mut changed = self.release_slurm_jobs_not_running();
        let mut phantoms = Vec::new();
        let mut gathered = Vec::new();
        for f in found {
            let id = f.id;
            if self.slurm_done.contains(&id) {
                continue;
            }
            if !self.slurm_word.runs(f.id) {
                // Said once slurmctld has answered: before, nothing is known either way.
                if self.slurm_word.last.is_some() && self.slurm_word.phantoms.insert(f.id) {
                    phantoms.push(f);
                }
                continue;
            }
            if f.partial && self.slurm_word.partial.insert(f.id) {
                crate::log::warning!(
                    "Slurm job {}: a directory of its cgroup tree holds more than {} entries; only the first were \
                     looked at (the job's user may make cgroups in their steps)",
                    f.id,
                    crate::slurm::ENTRIES
                );
            }
            gathered.push(f.clone());
            let name = job_name(id);
            let hint = self.slurm.get(&f.id).copied();
            if let Some(job) = self.jobs.iter_mut().find(|j| j.name == name) {
                for dirs in f.groups {
                    if !job.groups.iter().any(|g| g.dirs == dirs) {
                        if let Err(e) = job.add_group(dirs, &mut self.journal, &self.store) {
                            crate::log::info!("job {name}: {e:#}");
                        }
                        changed = true;
                    }
                }
                if f.pus != job.pus {
                    job.pus = f.pus;
                    changed = true;
                }
                continue;
            }
            let adopted_by_hand = self
                .jobs
                .iter()
                .any(|j| j.groups.iter().flat_map(|g| &g.dirs).any(|d| f.job_dirs.iter().any(|jd| d.starts_with(jd))));
            if adopted_by_hand {
                continue;
            }
            let weight_dir = match self.weight_dir(&f) {
                Ok(dir) => dir,
                Err(e) => {
                    crate::log::warning!("Slurm job {}: no CPU weight to boost ({e})", f.id);
                    None
                }
            };
            let owner = hint.map(|h| h.uid).or(f.uid);
            let mut job = adopt::from_slurm(&name, f, owner, weight_dir, hint.and_then(|h| h.row));
            job.place = self.places.get(&id).copied();
            match serde_json::to_string(&job.saved())
                .map_err(anyhow::Error::from)
                .and_then(|s| Ok(self.record(Record::ManagedPut(name.clone(), s))?))
            {
                Ok(()) => {
                    self.count(&job);
                    self.jobs.push(job);
                    changed = true;
                }
                Err(e) => crate::log::warning!("cannot take on Slurm job {id}: {e:#}"),
            }
        }
        if changed {
            self.replan = true;
        }
        let gather = gathered
            .into_iter()
            .filter_map(|f| {
                let job = self.jobs.iter().find(|j| j.name == job_name(f.id))?;
                match &job.origin {
                    Origin::Slurm { weight_dir: Some(w), .. } => Some((f, w.clone())),
                    _ => None,
                }
            })
            .collect();
        Chores { gather, sweep: self.unmanaged_weight_dirs(), phantoms }
    }

    /// Releases (restoring them) the managed Slurm jobs that Slurm no longer says run on this node: slurmctld
    /// answered without them, and no prolog announced them since. Whether any was.
    fn release_slurm_jobs_not_running(&mut self) -> bool {
        if self.slurm_word.last.is_none() {
            return false;
        }
        let stale: Vec<SlurmJobId> = self
            .jobs
            .iter()
            .filter_map(|j| match j.origin {
                Origin::Slurm { id, .. } if !self.slurm_word.runs(id) => Some(id),
                _ => None,
            })
            .collect();
        for &id in &stale {
            crate::log::info!("Slurm job {id}: slurmctld no longer runs it on this node; released");
            if let Some(i) = self.jobs.iter().position(|j| j.name == job_name(id)) {
                self.retire(i);
            }
            if let Err(e) = self.end_slurm_job(id) {
                crate::log::warning!("Slurm job {id}: {e:#}");
            }
        }
        if !stale.is_empty() {
            self.flush();
        }
        !stale.is_empty()
    }

    /// Marks Slurm job `id` ended on this node, in memory and (for good) in the store.
    fn end_slurm_job(&mut self, id: SlurmJobId) -> anyhow::Result<()> {
        self.slurm.remove(&id);
        self.places.remove(&id);
        self.slurm_word.announced.remove(&id);
        self.slurm_done.insert(id);
        Ok(self.record(Record::SlurmEnd(id))?)
    }

    /// The v1 cpu hierarchy's root, if mounted.
    fn v1_cpu_root(&self) -> Option<PathBuf> {
        self.backend.roots().into_iter().find(|r| r.join("cpu.shares").exists())
    }

    /// The weight cgroups of this node whose job the agent no longer manages (it ended, or an agent died before
    /// cleaning up).
    fn unmanaged_weight_dirs(&self) -> Vec<PathBuf> {
        let Some(root) = self.v1_cpu_root() else { return Vec::new() };
        let prefix = format!("slurm_{}_job_", self.slurm_node);
        numbered(&root.join(cgroup::PARENT), &prefix, &mut false)
            .into_iter()
            .filter(|(id, _)| !self.jobs.iter().any(|j| j.name == job_name(*id)))
            .map(|(_, dir)| dir)
            .collect()
    }

    /// On cgroup v1, where Slurm's job cgroups have no cpu controller: creates
    /// `cpu/lockstep/slurm_<node>_job_<id>` (named like Slurm's, by node, as several slurmd may share a host) for
    /// the job's processes. `None` when the job's cgroups have a CPU weight of their own, or no cpu hierarchy
    /// exists.
    fn weight_dir(&self, found: &Found) -> std::io::Result<Option<PathBuf>> {
        let has_weight = found.groups.iter().any(|g| Knobs::find(g).weight.is_some());
        if has_weight || self.backend.version() != Version::V1 {
            return Ok(None);
        }
        let Some(root) = self.v1_cpu_root() else { return Ok(None) };
        let dir = root.join(cgroup::PARENT).join(format!("slurm_{}_job_{}", self.slurm_node, found.id));
        fs::create_dir_all(&dir)?;
        Ok(Some(dir))
    }

    /// The prolog announced job `job` on this node: remember its owner and row or place (a job already found
    /// gets them at once).
    pub(super) fn slurm_prolog(&mut self, job: SlurmJob, place: Option<Schedule>) -> anyhow::Result<()> {
        self.record(Record::SlurmPut(job))?;
        crate::log::info!(
            "Slurm job {} registered by its prolog (uid {}, row {})",
            job.id,
            job.uid,
            job.row.map_or_else(|| "from the name".to_string(), |r| r.to_string())
        );
        self.slurm.insert(job.id, job);
        self.slurm_done.remove(&job.id);
        self.slurm_word.announced.insert(job.id, Instant::now());
        self.slurm_word.phantoms.remove(&job.id);
        if let Some(p) = place {
            self.places.insert(job.id, p);
        }
        let name = job_name(job.id);
        if let Some(m) = self.jobs.iter_mut().find(|j| j.name == name) {
            m.pinned = job.row;
            m.place = place.or(m.place);
            m.owner = job.uid;
            let saved = serde_json::to_string(&m.saved())?;
            self.record(Record::ManagedPut(name, saved))?;
            self.replan = true;
        }
        Ok(())
    }

    /// Takes the cluster-wide places slurmctld holds for this node's jobs now (a change of place carries the
    /// time it takes effect, so every node of a job switches in the same slot).
    pub(super) fn refresh_places(&mut self, rows: &[(SlurmJobId, Row)]) {
        for &(id, row) in rows {
            let Row::Cluster(schedule) = row else { continue };
            if self.places.insert(id, schedule) == Some(schedule) {
                continue;
            }
            let name = job_name(id);
            if let Some(m) = self.jobs.iter_mut().find(|j| j.name == name) {
                m.place = Some(schedule);
                self.replan = true;
            }
        }
    }

    /// The epilog ran for job `id`: its processes are gone; restore and forget it, and do not take it on again
    /// while Slurm removes its cgroups.
    pub(super) fn slurm_epilog(&mut self, id: SlurmJobId) -> anyhow::Result<()> {
        crate::log::info!("Slurm job {id} ended (its epilog)");
        self.end_slurm_job(id)?;
        let name = job_name(id);
        if let Some(i) = self.jobs.iter().position(|j| j.name == name) {
            self.retire(i);
            self.flush();
            self.replan = true;
        }
        Ok(())
    }
}
