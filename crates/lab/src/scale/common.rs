//! What a scale experiment and its model share: the stream of jobs a spec and a cluster size give (the same for
//! every policy, and for the model that replays it), what a case stores of its jobs and of the control plane, the
//! measured cases read back from the store and their summary, and the charts' x; how their results are kept in
//! the store ([`ScaleRecord`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::spec::{ScalePolicy, ScaleSpec};
use crate::harness::records;
use lockstep_store::Store;

/// The store's word for a result of a scale experiment or of its model.
pub const RECORD: &str = "scale";

/// One result of a scale experiment or of the scale model: a record [`RECORD`] in the store.
#[derive(Clone, Debug, PartialEq)]
pub struct ScaleRecord {
    /// Experiment name.
    pub experiment: String,
    /// Start time of the `experiment run` invocation.
    pub session: f64,
    /// Cluster size, in nodes (0 for the model's).
    pub nodes: u32,
    /// Policy label (empty for the model's).
    pub policy: String,
    /// What it is: `job`, `case`, `calibration`, `answer`.
    pub record: String,
    /// The result, as JSON.
    pub data: String,
}

/// A [`ScaleRecord`] as the store keeps it: its fields but the key, the result as the JSON it is.
#[derive(Serialize, Deserialize)]
struct Stored {
    nodes: u32,
    policy: String,
    record: String,
    data: Box<serde_json::value::RawValue>,
}

impl ScaleRecord {
    /// Records this result.
    pub fn save(&self, store: &Store) -> anyhow::Result<()> {
        let stored = Stored {
            nodes: self.nodes,
            policy: self.policy.clone(),
            record: self.record.clone(),
            data: serde_json::value::RawValue::from_string(self.data.clone())?,
        };
        records::save(store, &self.experiment, self.session, RECORD, &stored)
    }

    /// The results of session `session` of `experiment` (its latest when `None`), in the order recorded.
    pub fn load(store: &Store, experiment: &str, session: Option<f64>) -> anyhow::Result<Vec<Self>> {
        Ok(Self::from_stored(experiment, records::load(store, experiment, session, RECORD)?))
    }

    /// The results of every session of `experiment`, session by session, each in the order recorded.
    pub fn load_all(store: &Store, experiment: &str) -> anyhow::Result<Vec<Self>> {
        Ok(Self::from_stored(experiment, records::load_all(store, experiment, RECORD)?))
    }

    /// The records of `experiment` read back.
    fn from_stored(experiment: &str, stored: Vec<(f64, Stored)>) -> Vec<Self> {
        stored
            .into_iter()
            .map(|(session, s)| Self {
                experiment: experiment.into(),
                session,
                nodes: s.nodes,
                policy: s.policy,
                record: s.record,
                data: s.data.get().to_string(),
            })
            .collect()
    }
}

/// `n`'s base-2 logarithm, rounded: the x of the scale charts, whose sizes span decades.
pub(crate) fn log2(n: u32) -> u32 {
    f64::from(n.max(1)).log2().round() as u32
}

/// One job of a stream.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamJob {
    /// Seconds after the stream's start it is submitted.
    pub at: f64,
    /// Its nodes (numbers from 1), as many as its ranks.
    pub nodes: Vec<u32>,
    /// Index into the spec's workloads.
    pub workload: usize,
}

/// The stream of `spec`'s jobs on a cluster of `cluster` nodes: exponential gaps of mean `arrival`, sizes and
/// workloads drawn uniformly, nodes a uniform random subset (so jobs overlap at random). The same seed and size
/// give the same stream, for every policy.
pub fn stream(spec: &ScaleSpec, cluster: u32) -> Vec<StreamJob> {
    let mut rng = Rng::new(spec.seed ^ u64::from(cluster).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut at = 0.0;
    (0..spec.jobs)
        .map(|_| {
            let job_at = at;
            at += -spec.arrival.as_secs_f64() * (1.0 - rng.unit()).ln();
            let size = spec.sizes[rng.below(spec.sizes.len() as u64) as usize];
            let mut all: Vec<u32> = (1..=cluster).collect();
            // A partial Fisher-Yates shuffle: the first `size` are a uniform subset.
            for i in 0..size as usize {
                let j = i + rng.below((all.len() - i) as u64) as usize;
                all.swap(i, j);
            }
            let mut nodes = all[..size as usize].to_vec();
            nodes.sort_unstable();
            StreamJob { at: job_at, nodes, workload: rng.below(spec.workloads.len() as u64) as usize }
        })
        .collect()
}

/// xorshift64*: a small generator whose streams are the same on every machine and build.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The agreement the issue asks of every job under a slotted policy with cluster-wide places.
pub const TARGET_AGREEMENT: f64 = 0.95;

/// One case's records, parsed.
#[derive(Default)]
pub struct Case {
    /// Its jobs.
    pub jobs: Vec<JobResult>,
    /// Its control-plane measurements.
    pub case: Option<CaseResult>,
}

/// The records of a session, by (cluster size, policy label), in the spec's policy order.
pub fn cases(spec: &ScaleSpec, records: &[ScaleRecord]) -> anyhow::Result<Vec<((u32, String), Case)>> {
    let mut by: BTreeMap<(u32, String), Case> = BTreeMap::new();
    for r in records {
        let c = by.entry((r.nodes, r.policy.clone())).or_default();
        match r.record.as_str() {
            "job" => c.jobs.push(serde_json::from_str(&r.data)?),
            "case" => c.case = Some(serde_json::from_str(&r.data)?),
            _ => {}
        }
    }
    let order: Vec<String> = spec.policies.iter().map(ScalePolicy::label).collect();
    let mut out: Vec<((u32, String), Case)> = by.into_iter().collect();
    out.sort_by_key(|((n, p), _)| (*n, order.iter().position(|o| o == p).unwrap_or(usize::MAX)));
    Ok(out)
}

/// Summary numbers of a case's jobs. A job that did not complete (`srun` exited other than 0, was killed or was
/// cancelled at the deadline; a kernel that does not verify exits 1) fails its case: the jobs of the stream ran
/// beside it, so none of the case's numbers is given (`failed` counts its failed jobs).
pub struct Summary {
    /// Jobs that did not complete; when any, every number below is `None`.
    pub failed: usize,
    /// Mean slowdown of the jobs.
    pub slowdown: Option<f64>,
    /// Mean slowdown of their timed regions (the computation alone).
    pub timed_slowdown: Option<f64>,
    /// Lowest and mean agreement (slotted policies).
    pub agreement: Option<(f64, f64)>,
    /// Jobs below [`TARGET_AGREEMENT`].
    pub below: usize,
    /// Lowest agreement of a job that failed, if one did.
    pub failed_agreement: Option<f64>,
    /// Mean co-run share and mean matrix share.
    pub co_run: Option<(f64, f64)>,
}

/// The summary of `jobs`, one case's.
pub fn summary(jobs: &[JobResult]) -> Summary {
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let lost = jobs.iter().filter(|j| j.exit != Some(0)).count();
    // A case with a failed job gives no number: nothing of it is measured.
    let done: Vec<&JobResult> = if lost == 0 { jobs.iter().collect() } else { Vec::new() };
    let slow: Vec<f64> = done.iter().filter_map(|j| j.slowdown()).collect();
    let timed: Vec<f64> = done.iter().filter_map(|j| j.timed_slowdown()).collect();
    let agree: Vec<f64> = done.iter().filter_map(|j| j.agreement).collect();
    let co: Vec<f64> = done.iter().filter_map(|j| j.co_run).collect();
    let share: Vec<f64> = done.iter().filter_map(|j| j.share).collect();
    let failed: Vec<f64> = jobs.iter().filter(|j| j.exit != Some(0)).filter_map(|j| j.agreement).collect();
    Summary {
        failed: lost,
        slowdown: mean(&slow),
        timed_slowdown: mean(&timed),
        agreement: mean(&agree).map(|m| (agree.iter().copied().fold(1.0, f64::min), m)),
        below: agree.iter().filter(|a| **a < TARGET_AGREEMENT).count(),
        failed_agreement: (!failed.is_empty()).then(|| failed.iter().copied().fold(1.0, f64::min)),
        co_run: mean(&co).zip(mean(&share)),
    }
}

/// One job's measurements, as stored (`record = "job"`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct JobResult {
    /// Slurm job ID.
    pub id: lockstep_slurm::SlurmJobId,
    /// Its nodes.
    pub nodes: Vec<u32>,
    /// The command it ran.
    pub workload: String,
    /// Seconds from the stream's start to its start (it may have waited in the queue).
    pub started_s: Option<f64>,
    /// Wall time from its batch script's start to `srun`'s end.
    pub wall_s: Option<f64>,
    /// The same job's wall time alone on the cluster.
    pub alone_s: Option<f64>,
    /// The time its program reports for its timed region (NPB's "Time in seconds": the computation, without
    /// the launch, MPI start-up and any wait of `srun` for its step).
    #[serde(default)]
    pub timed_s: Option<f64>,
    /// The same, alone.
    #[serde(default)]
    pub alone_timed_s: Option<f64>,
    /// The share of its time alone its ranks spent in MPI (the PMPI profiler, mean over ranks).
    #[serde(default)]
    pub comm: Option<f64>,
    /// `srun`'s exit status (`None`: it never ended, or was cancelled at the deadline).
    pub exit: Option<i32>,
    /// Agreement of its nodes (slotted policies).
    pub agreement: Option<f64>,
    /// Share of the slots some node favoured it in: the matrix's share for it.
    pub share: Option<f64>,
    /// Share of its measured slots during which no node had it frozen.
    pub co_run: Option<f64>,
    /// Its measured slots not agreed: those some node did not switch to, and those every node switched to but
    /// some held another place for it in ([`super::measure::Favoured`]).
    #[serde(default)]
    pub apart: Option<(u32, u32)>,
    /// When Slurm's gang scheduler held it suspended: intervals in seconds from the stream's start (slurmctld's
    /// log; empty under the other policies).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suspended: Vec<(f64, f64)>,
}

impl JobResult {
    /// Wall time over wall time alone.
    pub fn slowdown(&self) -> Option<f64> {
        Some(self.wall_s? / self.alone_s?)
    }

    /// Timed region over timed region alone: the slowdown of the computation itself.
    pub fn timed_slowdown(&self) -> Option<f64> {
        Some(self.timed_s? / self.alone_timed_s?)
    }
}

/// One case's control-plane measurements, as stored (`record = "case"`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CaseResult {
    /// Jobs submitted.
    pub submitted: u32,
    /// Jobs whose `srun` exited 0 before the deadline.
    pub completed: u32,
    /// Seconds from the first submission to the last job's end.
    pub makespan_s: f64,
    /// Per hook (`prolog-slurmctld`, `epilog-slurmctld`, `prolog`, `epilog`): calls, p50 and p99 in ms.
    pub hooks: BTreeMap<String, (u32, f64, f64)>,
    /// Spread of the agents' switches of one slot: p50, p99 and the largest, in ms; and how many slots.
    pub skew_ms: (f64, f64, f64),
    /// Slots whose switches were compared.
    pub skew_slots: u32,
    /// Median time an agent took to freeze or thaw a job, in microseconds (0 when nothing was frozen).
    #[serde(default)]
    pub switch_us: f64,
    /// The agents' CPU over the case, as a share of one CPU: mean and largest over agents.
    pub agent_cpu: (f64, f64),
    /// The agents' resident memory at the end, MiB: mean and largest.
    pub agent_rss_mib: (f64, f64),
    /// slurmctld's CPU over the case, as a share of one CPU.
    pub slurmctld_cpu: f64,
    /// Prometheus: targets up at the end, mean and largest scrape duration (ms), and the most series one
    /// agent exposed; `None` without Prometheus.
    pub prometheus: Option<Scrapes>,
}

/// What Prometheus saw scraping the agents.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Scrapes {
    /// Targets up at the end.
    pub up: u32,
    /// Targets configured.
    pub targets: u32,
    /// Scrape duration, mean over the run and agents, in ms.
    pub mean_ms: f64,
    /// Scrape duration, largest mean of an agent, in ms.
    pub max_ms: f64,
    /// The most samples one scrape of one agent returned (its series).
    pub max_series: f64,
    /// Series of all the agents together at the end (with Prometheus's own per-target series).
    pub head_series: f64,
}
