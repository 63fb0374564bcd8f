//! What the model is given: the calibration, from every session of the measured scale experiment that ran the
//! spec's stream.

use std::collections::BTreeMap;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::spec::ModelSpec;
use crate::scale::common::ScaleRecord;
use crate::scale::common::{cases, stream, summary};
use lockstep_store::Store;

/// Jobs a node of the test cluster runs at once: `OverSubscribe=FORCE:4` in tests/cluster/up's slurm.conf.
const CLUSTER_MPL: u32 = 4;

/// SlurmctldTimeout of the test cluster: Slurm's default (tests/cluster/up's slurm.conf does not set it).
const SLURMCTLD_TIMEOUT_S: u32 = 120;

/// What the model is given.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Calibration {
    /// CPUs of the machine the measured cluster ran on.
    pub host_cpus: u32,
    /// Median time of a freeze or thaw, seconds (the agents' decision records of the measured cases).
    pub switch_s: f64,
    /// How long the `srun` of a job refused its step (the job suspended) waits before asking again, s: Slurm
    /// 22.05's step_wait, SlurmctldTimeout clamped to 60-300 s plus the PID mod 10 (4.5 on average).
    pub step_wait_s: f64,
    /// The communication share of each program and width, measured alone (PMPI) by the scale experiment.
    pub comm: BTreeMap<String, f64>,
    /// The measured cases.
    pub cases: Vec<MeasuredCase>,
    /// Controller time of lockstep's prolog and epilog per job (p50 over the measured cases), ms.
    pub prolog_ctld_ms: f64,
    /// Same for the epilog.
    pub epilog_ctld_ms: f64,
    /// How often agents read their jobs' places, s.
    pub refresh_s: f64,
    /// Jobs a node of the measured cluster ran at once.
    pub mpl: u32,
    /// Jobs a node runs at once in the extrapolation.
    pub extrapolate_mpl: u32,
    /// Extrapolation: sizes, simulated time, load, slot, seed.
    pub extrapolate_nodes: Vec<u32>,
    /// Arrivals simulated, s.
    pub horizon_s: f64,
    /// Work offered per node and second.
    pub load: f64,
    /// lockstep's slot, s.
    pub slot_s: f64,
    /// Seed.
    pub seed: u64,
}

/// One measured case, as the model replays it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MeasuredCase {
    /// Cluster size.
    pub nodes: u32,
    /// `cfs`, `gang` or `slurm-gang` (the cases the model covers).
    pub policy: String,
    /// Slot (Slurm's time slice), s.
    pub slot_s: f64,
    /// p50 spread of the agents' slot switches, s.
    pub skew_s: f64,
    /// Mean slowdown measured: of the programs' timed regions when its jobs report them, else of their wall
    /// times.
    pub measured: f64,
    /// Whether `measured` is of the timed regions.
    #[serde(default)]
    pub timed: bool,
    /// The session that measured it (the store's session id): the same case measured in several sessions is
    /// pooled by the model.
    #[serde(default)]
    pub session: f64,
    /// Its jobs: submitted at, nodes, alone time, communication share.
    pub jobs: Vec<ModelJob>,
}

/// One job as the model sees it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ModelJob {
    /// Seconds after the stream's start it was submitted.
    pub submit: f64,
    /// Seconds after the stream's start Slurm started it (a measured job, replayed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<f64>,
    /// Its measured wall time, s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall: Option<f64>,
    /// Whether it completed (a job whose rank died holds its nodes for its wall time and has no slowdown).
    pub completed: bool,
    /// Its nodes.
    pub nodes: Vec<u32>,
    /// Its time alone, s.
    pub alone_s: f64,
    /// Its program's timed region and the same alone, s (when it reports one and the case is of timed regions):
    /// replayed, its computation starts that long before the job ended and is what is modelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed: Option<(f64, f64)>,
    /// Its program (the workload's command line).
    pub workload: String,
    /// Its communication share alone.
    pub comm: f64,
    /// When Slurm's gang scheduler held it suspended (seconds after the stream's start; a measured Slurm gang
    /// case): replayed as they were instead of Slurm's time slices modelled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suspended: Vec<(f64, f64)>,
}

/// The calibration from the store: every session of the measured experiment that ran the spec's stream, latest
/// first. A session may have run only some of the cases. The latest session that ran a case says what it measures
/// (timed regions or wall times); an earlier session's case joins only when it ran the same jobs on the same
/// nodes and measured the same quantity.
pub fn calibrate(spec: &ModelSpec, store: &Store) -> anyhow::Result<Calibration> {
    let m = &spec.measured;
    let every = ScaleRecord::load_all(store, &m.name)?;
    let sessions: Vec<&[ScaleRecord]> = every.chunk_by(|a, b| a.session.to_bits() == b.session.to_bits()).collect();
    if sessions.is_empty() {
        anyhow::bail!("experiment {:?} has no runs in the store: run experiments/{}.toml first", m.name, m.name)
    }
    let mut comm = BTreeMap::new();
    let mut measured_cases = Vec::new();
    // What the latest session that ran each case (size, policy label) measured: timed regions or wall times. A
    // session may have run only some of the cases (a spec with fewer policies, under the same name).
    let mut quantity: BTreeMap<(u32, String), bool> = BTreeMap::new();
    let (mut prolog, mut epilog, mut switch) = (Vec::new(), Vec::new(), Vec::new());
    for records in sessions.iter().rev() {
        for (key, c) in cases(m, records)? {
            let Some(policy) = m.policies.iter().find(|p| p.label() == key.1) else { continue };
            let Some(case) = &c.case else { continue };
            let name = match (policy.config.scheduler.name(), policy.rows) {
                ("cfs", _) => "cfs",
                ("gang", "cluster") => "gang",
                ("slurm-gang", _) => "slurm-gang",
                _ => continue,
            };
            // The completed jobs, submitted when the stream submitted them (the same stream for every case of a
            // size). A session of another stream (an earlier spec's seed or sizes) is another case.
            let stream = stream(m, key.0);
            if c.jobs.iter().zip(&stream).any(|(j, s)| j.nodes != s.nodes) {
                continue;
            }
            // A case one of whose jobs failed measured nothing: it gives no summary and calibrates nothing.
            let summary = summary(&c.jobs);
            // Timed regions leave out what the model does not model: the launch and MPI start-up of a job on a
            // loaded host, and (Slurm gang) `srun`'s wait for its step.
            let Some((measured, timed)) =
                summary.timed_slowdown.map(|t| (t, true)).or(summary.slowdown.map(|w| (w, false)))
            else {
                continue;
            };
            if *quantity.entry(key.clone()).or_insert(timed) != timed {
                continue;
            }
            if let Some(h) = case.hooks.get("prolog-slurmctld") {
                prolog.push(h.1);
            }
            if let Some(h) = case.hooks.get("epilog-slurmctld") {
                epilog.push(h.1);
            }
            if case.switch_us > 0.0 {
                switch.push(case.switch_us);
            }
            let mut jobs = Vec::new();
            for (j, s) in c.jobs.iter().zip(&stream) {
                let (Some(start), Some(wall), Some(alone_s)) = (j.started_s, j.wall_s, j.alone_s) else { continue };
                let share = j.comm.with_context(|| {
                    format!(
                        "job {} of {} has no communication share: run experiments/{}.toml again",
                        j.id, m.name, m.name
                    )
                })?;
                comm.entry(format!("{} on {} nodes", j.workload, j.nodes.len())).or_insert(share);
                jobs.push(ModelJob {
                    submit: s.at,
                    start: Some(start),
                    wall: Some(wall),
                    completed: j.exit == Some(0),
                    nodes: j.nodes.clone(),
                    alone_s,
                    timed: j.timed_s.zip(j.alone_timed_s).filter(|_| timed && j.exit == Some(0)),
                    workload: j.workload.clone(),
                    comm: share,
                    suspended: j.suspended.clone(),
                });
            }
            measured_cases.push(MeasuredCase {
                nodes: key.0,
                policy: name.into(),
                slot_s: policy.config.slot.as_secs_f64(),
                skew_s: case.skew_ms.0 / 1e3,
                measured,
                timed,
                session: records[0].session,
                jobs,
            });
        }
    }
    let median = |v: &mut Vec<f64>| if v.is_empty() { 0.0 } else { crate::harness::stats::median(v) };
    Ok(Calibration {
        host_cpus: lockstep_core::cpulist::CpuList::online().iter().count() as u32,
        switch_s: median(&mut switch) / 1e6,
        step_wait_s: f64::from(SLURMCTLD_TIMEOUT_S.clamp(60, 300)) + 4.5,
        comm,
        cases: measured_cases,
        prolog_ctld_ms: median(&mut prolog),
        epilog_ctld_ms: median(&mut epilog),
        refresh_s: lockstep_slurm::REFRESH.as_secs_f64(),
        mpl: CLUSTER_MPL,
        extrapolate_mpl: spec.mpl,
        extrapolate_nodes: spec.extrapolate.clone(),
        horizon_s: spec.horizon.as_secs_f64(),
        load: spec.load,
        slot_s: spec.slot.as_secs_f64(),
        seed: spec.seed,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::scale::model::spec::parse;

    #[test]
    fn sessions_that_ran_some_of_the_cases_are_pooled_case_by_case() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/scale-model.toml");
        let spec = parse(&path, &std::fs::read_to_string(&path).unwrap()).unwrap();
        let m = &spec.measured;
        let nodes = m.nodes[0];
        let label = |name: &str| m.policies.iter().find(|p| p.config.scheduler.name() == name).unwrap().label();
        let store = Store::open(&dir.path().join("store.db")).unwrap();
        // Every job of the stream took `slowdown` times its time alone.
        let add = |session: f64, policy: &str, slowdown: f64| {
            let record = |record: &str, data: String| ScaleRecord {
                experiment: m.name.clone(),
                session,
                nodes,
                policy: label(policy),
                record: record.into(),
                data,
            };
            for (id, j) in stream(m, nodes).iter().enumerate() {
                let job = crate::scale::common::JobResult {
                    id: lockstep_slurm::SlurmJobId(id as u64),
                    nodes: j.nodes.clone(),
                    workload: "cg".into(),
                    started_s: Some(j.at),
                    wall_s: Some(slowdown),
                    alone_s: Some(1.0),
                    comm: Some(0.2),
                    exit: Some(0),
                    ..Default::default()
                };
                record("job", serde_json::to_string(&job).unwrap()).save(&store).unwrap();
            }
            let case = crate::scale::common::CaseResult::default();
            record("case", serde_json::to_string(&case).unwrap()).save(&store).unwrap();
        };
        add(1.0, "cfs", 2.0);
        add(1.0, "slurm-gang", 3.0);
        // A later session of Slurm gang only: the cfs case of the first session still counts.
        add(2.0, "slurm-gang", 5.0);
        let cal = calibrate(&spec, &store).unwrap();
        let of = |policy: &str| {
            let mut v: Vec<(f64, f64)> =
                cal.cases.iter().filter(|c| c.policy == policy).map(|c| (c.session, c.measured)).collect();
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
            v
        };
        assert_eq!(of("cfs"), [(1.0, 2.0)]);
        assert_eq!(of("slurm-gang"), [(1.0, 3.0), (2.0, 5.0)]);
    }
}
