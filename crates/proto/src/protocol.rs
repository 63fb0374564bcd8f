//! The agent's control protocol: one JSON request in (an [`Envelope`]: the protocol's version and the
//! [`Request`]), one JSON [`Response`] out.

use std::path::PathBuf;
use std::time::Duration;

use lockstep_core::cosched::PolicySpec;
use lockstep_core::error::Denied;
use lockstep_core::ident::{JobKey, JobName, NodeName, ProcessRef};
pub use lockstep_core::job::{JobOrigin, ORIGINS};
use serde::{Deserialize, Serialize};

/// The version of the protocol this build speaks. It changes when a request or a response changes its meaning or
/// its fields; an agent refuses a request of another version, with a message that names both. Version 2: a
/// policy request carries the policy and a slot length of any precision (`policy`, `slot`), and a failed
/// response its kind (`failure`). Version 3: an adoption names processes by PID and start time (`pids: [{"pid",
/// "start"}]`).
pub const VERSION: u32 = 3;

/// Requests from before the protocol had a version are of the first one.
fn first_version() -> u32 {
    1
}

/// The version request `body` says it is written in (1 when it says none), whatever else it holds; `None` when
/// it is not a JSON object (valid UTF-8 throughout) with a whole number or nothing as its `version`. Read before
/// the request, so that one of another version is refused as such.
pub fn version_of(body: &[u8]) -> Option<u32> {
    let serde_json::Value::Object(request) = serde_json::from_slice(body).ok()? else { return None };
    match request.get("version") {
        None => Some(first_version()),
        Some(v) => v.as_u64().and_then(|v| u32::try_from(v).ok()),
    }
}

/// A request as it goes over the socket: `{"version": 3, "op": "status"}`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Envelope {
    /// The protocol version the request is written in (1 when absent).
    #[serde(default = "first_version")]
    pub version: u32,
    /// The request.
    #[serde(flatten)]
    pub request: Request,
}

/// A request to the agent. A field it does not have is refused, not ignored: a request written for another
/// version (`slot_ms`) must not quietly do less than it asked (a request without fields, `status` or `progress`,
/// ignores any).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// The live table.
    Status,
    /// Switch policy and/or slot length.
    Policy {
        /// The policy, by one of its names (`gang`, `dcs+boost:rr`).
        policy: PolicySpec,
        /// Slot length (unchanged if absent), as `{"secs": 0, "nanos": 200000000}`.
        #[serde(default)]
        slot: Option<Duration>,
    },
    /// Manage existing cgroups, processes or containers as job `job`.
    Adopt {
        /// Job name.
        job: JobName,
        /// Cgroup paths (relative to the hierarchy roots, or absolute).
        #[serde(default)]
        cgroups: Vec<PathBuf>,
        /// Processes to move into a cgroup of the agent's, each as the sender saw it (PID and start time: one
        /// that has ended, its PID taken by another, is refused).
        #[serde(default)]
        pids: Vec<ProcessRef>,
        /// podman container names or IDs (one cgroup each).
        #[serde(default)]
        containers: Vec<String>,
        /// Row given from outside.
        row: Option<u32>,
    },
    /// A job started by `lockstep run`, with its cgroup directories.
    Register {
        /// Job name.
        job: JobName,
        /// The job's cgroup directories.
        dirs: Vec<PathBuf>,
        /// Row given from outside.
        row: Option<u32>,
    },
    /// Stop managing a job, restoring its cgroups.
    Release {
        /// The job: a named one, or a Slurm job (`slurm-ID`).
        job: JobKey,
    },
    /// The Slurm prolog: job `id` of user `uid` starts on this node, in row `row` of the node's cycle or at
    /// place `place` of the cluster-wide matrix if the controller gave one.
    SlurmProlog {
        /// Slurm job ID.
        id: lockstep_core::job::SlurmJobId,
        /// Owner's UID.
        uid: u32,
        /// Co-scheduling row of the node's own cycle (the same on every node of the job).
        row: Option<u32>,
        /// Place in the cluster-wide matrix, with its pending change.
        #[serde(default)]
        place: Option<lockstep_core::cosched::rows::Schedule>,
    },
    /// The Slurm epilog: job `id` has ended on this node.
    SlurmEpilog {
        /// Slurm job ID.
        id: lockstep_core::job::SlurmJobId,
    },
    /// Every job's progress totals now, as `auto` reads them at slot boundaries (root only): the CPU time its
    /// processes have had, its ranks' co-scheduled time and its live count of MPI calls. What a paired comparison
    /// of policies samples (`lockstep experiment run` with `[ab]`).
    Progress,
    /// Record, for `millis` milliseconds from now, which job's ranks ran on which CPU (root only; one recording
    /// at a time, of [`TIMELINE_MILLIS`]).
    Timeline {
        /// The window's length in milliseconds.
        millis: u64,
    },
}

/// The lengths of a timeline window a [`Request::Timeline`] may ask for, in milliseconds.
pub const TIMELINE_MILLIS: std::ops::RangeInclusive<u64> = 10..=5000;

/// The agent's answer.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Response {
    /// Whether the request was carried out.
    pub ok: bool,
    /// One-line reason when not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What kind of failure it was, when not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    /// The status table, for `status`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// The recording, for `timeline`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Timeline>,
    /// Every job's progress totals, for `progress`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Vec<JobProgress>>,
    /// For `SlurmProlog`: whether the agent holds the job's row or place (the controller's hooks told it, or the
    /// prolog did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placed: Option<bool>,
}

impl Response {
    /// The answer to a request carried out.
    pub fn done() -> Self {
        Self { ok: true, ..Self::default() }
    }

    /// The answer to a request that failed with `e`, its kind told by the error's type ([`Failure::of`]).
    pub fn failed(e: &(dyn std::error::Error + 'static)) -> Self {
        Self::refused(Failure::of(e), lockstep_core::error::one_line(e))
    }

    /// The refusal of a change asked for by UID `uid`, who is not root: other users may query their own jobs only.
    pub fn only_root(uid: u32) -> Self {
        let why = format!("only root may change what the agent does (UID {uid} may query its own jobs)");
        Self::failed(&Denied::new(why))
    }

    /// The answer to a request refused for a reason of kind `failure`, said in `why`.
    pub fn refused(failure: Failure, why: String) -> Self {
        Self { ok: false, error: Some(why), failure: Some(failure), ..Self::default() }
    }
}

/// How a request failed: what the HTTP status of the answer says, and what the client does with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// Bad input, which the caller can fix: HTTP 400, the command exits with status 2.
    Usage,
    /// The caller may not ask for it (a change only root may make): HTTP 403.
    Denied,
    /// The agent cannot take requests now (it is stopping): HTTP 503.
    Unavailable,
    /// The agent tried and failed: HTTP 500.
    Failed,
}

impl Failure {
    /// The kind of failure `e` is: a [`UsageError`](lockstep_core::error::UsageError) anywhere in its causes is
    /// [`Failure::Usage`], a [`Denied`] among them [`Failure::Denied`], anything else [`Failure::Failed`].
    pub fn of(e: &(dyn std::error::Error + 'static)) -> Self {
        if lockstep_core::error::is_usage(e) {
            Self::Usage
        } else if lockstep_core::error::chain(e).any(<dyn std::error::Error>::is::<Denied>) {
            Self::Denied
        } else {
            Self::Failed
        }
    }

    /// The HTTP status an answer of this kind goes with.
    pub fn http_status(self) -> u16 {
        match self {
            Self::Usage => 400,
            Self::Denied => 403,
            Self::Unavailable => 503,
            Self::Failed => 500,
        }
    }
}

/// One job's progress totals, as [`Request::Progress`] answers them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobProgress {
    /// The job.
    pub job: JobKey,
    /// Its running totals, read now.
    pub totals: lockstep_core::cosched::auto::Sample,
}

/// Which job's ranks ran on which CPU over a window, as the agent's eBPF program saw the scheduler switch them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// The window's length in nanoseconds; every segment lies within `0..=window_ns`.
    pub window_ns: u64,
    /// Switches the recording lacks (its buffer was full): when not 0, some segments are missing or too long.
    pub dropped: u64,
    /// Every CPU of the node, in order, with the segments in which a rank ran on it.
    pub cpus: Vec<CpuLane>,
    /// The jobs the agent measured over the whole window.
    pub jobs: Vec<TimelineJob>,
}

/// One CPU of a [`Timeline`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuLane {
    /// The CPU's number.
    pub cpu: u32,
    /// When a rank of a job ran on it, in order, none overlapping.
    pub segments: Vec<Segment>,
}

/// A rank of job `job` on a CPU from `start_ns` to `end_ns` (nanoseconds since the window's start).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    /// Start, ns into the window.
    pub start_ns: u64,
    /// End, ns into the window.
    pub end_ns: u64,
    /// The job.
    pub job: JobKey,
}

/// One job of a [`Timeline`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimelineJob {
    /// The job.
    pub name: JobKey,
    /// Its ranks on the node.
    pub ranks: u32,
    /// Over the window, the share of the time some of its ranks was on a CPU in which every one of them was at
    /// once; absent when none ran.
    pub coscheduled: Option<f64>,
}

/// The agent's live state.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Status {
    /// The node's name.
    pub node: NodeName,
    /// Agent PID.
    pub pid: i32,
    /// Watchdog PID.
    pub watchdog_pid: i32,
    /// Policy in force.
    pub policy: String,
    /// Slot length, of any precision (`{"secs": 0, "nanos": 12500000}`).
    pub slot_length: Duration,
    /// Current slot index.
    pub slot: u64,
    /// The row in force in the node's longest cycle (`slot mod rows`; a set with a shorter cycle, a job's
    /// `period`, has its own).
    pub active_row: u32,
    /// Number of rows: the node's longest cycle.
    pub rows: u32,
    /// Time the last slot switch took, in microseconds.
    pub last_apply_us: f64,
    /// Message-driven raises, while a `dcs` policy is in force.
    #[serde(default)]
    pub dcs: Option<DcsStatus>,
    /// Under `auto`: the policy in force for every set of jobs sharing PUs, and why.
    #[serde(default)]
    pub groups: Vec<lockstep_core::cosched::auto::Choice>,
    /// Managed jobs (for a user other than root: their own).
    pub jobs: Vec<JobStatus>,
    /// Jobs of other users, counted but not shown (a status asked for by a user other than root).
    #[serde(default)]
    pub others: usize,
    /// How late the slot switches began after their boundaries, since the agent started.
    #[serde(default)]
    pub lateness: Histogram,
}

impl Status {
    /// The state of node `node` before its agent has any: no policy, slot, job or measurement.
    pub fn new(node: NodeName) -> Self {
        Self {
            node,
            pid: 0,
            watchdog_pid: 0,
            policy: String::new(),
            slot_length: Duration::ZERO,
            slot: 0,
            active_row: 0,
            rows: 0,
            last_apply_us: 0.0,
            dcs: None,
            groups: Vec::new(),
            jobs: Vec::new(),
            others: 0,
            lateness: Histogram::default(),
        }
    }
}

/// A histogram of observed values, as Prometheus keeps one: cumulative counts of values at most each bound, their
/// sum and their count.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    /// Upper bounds of the buckets, ascending (`+Inf` implied).
    pub bounds: Vec<f64>,
    /// For each bound, how many values were at most it.
    pub cumulative: Vec<u64>,
    /// Sum of the values.
    pub sum: f64,
    /// Number of values.
    pub count: u64,
}

impl Histogram {
    /// An empty histogram over `bounds` (ascending).
    pub fn new(bounds: &[f64]) -> Self {
        Self { bounds: bounds.to_vec(), cumulative: vec![0; bounds.len()], sum: 0.0, count: 0 }
    }

    /// Counts `value`.
    pub fn observe(&mut self, value: f64) {
        for (bound, n) in self.bounds.iter().zip(&mut self.cumulative) {
            if value <= *bound {
                *n += 1;
            }
        }
        self.sum += value;
        self.count += 1;
    }
}

/// One managed job in the status table.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[allow(clippy::struct_excessive_bools)] // independent facts a reader takes by name from `status --json`, not a state
pub struct JobStatus {
    /// The job (its name, or `slurm-ID` for a Slurm job). Its text follows `JobKey`'s rules, which are part of
    /// this protocol version: a change of them takes a new [`VERSION`].
    pub name: JobKey,
    /// Its row.
    pub row: u32,
    /// Whether the row was given from outside.
    pub pinned: bool,
    /// The period of its cycle where that is not the node's `rows`: its cluster-wide place's (the row is then the
    /// place's row; `pinned` is then true), or, on a node whose sets of jobs sharing PUs have different counts of
    /// rows, its own set's (`pinned` false: a set with a row given from outside cycles through the node's count).
    #[serde(default)]
    pub period: Option<u32>,
    /// PUs.
    pub pus: String,
    /// Frozen now.
    pub frozen: bool,
    /// Boosted now.
    pub boosted: bool,
    /// How the agent came to manage it.
    pub origin: JobOrigin,
    /// First cgroup directory of each group.
    pub cgroups: Vec<PathBuf>,
    /// UID of the job's owner.
    #[serde(default)]
    pub owner: u32,
    /// Since its first rank was seen, the share of the time some of its ranks on this node was on a CPU in which
    /// every one of them was at once (1: its ranks always run together); absent where the agent does not measure
    /// it.
    #[serde(default)]
    pub coscheduled: Option<f64>,
    /// The same share over the agent's last sampling interval.
    #[serde(default)]
    pub coscheduled_window: Option<f64>,
    /// Share of its time since its first rank was seen in which some of its ranks was on a CPU.
    #[serde(default)]
    pub rank_running: Option<f64>,
    /// Share of the same time in which one of its ranks was runnable but not on a CPU.
    #[serde(default)]
    pub rank_waiting: Option<f64>,
    /// How many CPUs its ranks wanted (their runnable time per unit of time) in the last slot the agent held the
    /// job unfrozen throughout, unless its CPU time then showed other threads working: `gang` slices only jobs
    /// that, together, want more than the PUs they share. Absent where not known.
    #[serde(default)]
    pub cpus_wanted: Option<f64>,
    /// Whether the job is starting: found, and no slot of it read unfrozen yet (a few seconds at most). `gang` runs
    /// a starting job in every slot, and what it might want freezes no other job.
    #[serde(default)]
    pub starting: bool,
    /// Why the agent leaves the job to the kernel now (never frozen, favoured or boosted), if it does: changes of
    /// its cgroups cost the agent more than a job may (until it ends), or Slurm holds it suspended (until resumed).
    #[serde(default)]
    pub left: Option<String>,
    /// Seconds the agent has held the job frozen since it took it on.
    #[serde(default)]
    pub frozen_seconds: f64,
    /// Seconds the agent has held it frozen without a break, now (0 while it is not frozen).
    #[serde(default)]
    pub frozen_for_seconds: f64,
}

/// What `status` shows of `dcs`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DcsStatus {
    /// Raise mechanism.
    pub raise: String,
    /// Quantum in milliseconds.
    pub quantum_ms: f64,
    /// Arrival events the probe sent.
    pub events: u64,
    /// Raises applied.
    pub raises: u64,
    /// Arrival → raise applied, microseconds: median, 99th percentile, maximum (of the last raises).
    pub latency_p50_us: f64,
    /// See `latency_p50_us`.
    pub latency_p99_us: f64,
    /// See `latency_p50_us`.
    pub latency_max_us: f64,
    /// Longest a raise was held, microseconds.
    pub held_max_us: f64,
    /// Raises refused because the job had spent its share of the window raised (a quarter of it).
    #[serde(default)]
    pub refused: u64,
    /// Per job: data packets seen, payload bytes, raises.
    pub jobs: Vec<DcsJob>,
}

/// One job in [`DcsStatus`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DcsJob {
    /// The job.
    pub name: JobKey,
    /// TCP ports of the job the probe watches.
    pub ports: usize,
    /// Data packets that arrived for it.
    pub packets: u64,
    /// Their payload bytes.
    pub bytes: u64,
    /// Raises it got.
    pub raises: u64,
    /// Raised now.
    pub raised: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_a_request_does_not_have_is_refused() {
        let read = |body: &str| serde_json::from_str::<Envelope>(body).map(|e| e.request);
        let slot = read(r#"{"version":3,"op":"policy","policy":"gang","slot":{"secs":0,"nanos":12500000}}"#);
        assert!(matches!(slot, Ok(Request::Policy { slot: Some(s), .. }) if s == Duration::from_micros(12_500)));
        let old = read(r#"{"version":3,"op":"policy","policy":"gang","slot_ms":500}"#).unwrap_err();
        assert!(old.to_string().contains("slot_ms"), "{old}");
        assert!(read(r#"{"version":3,"op":"release","job":"lu","pids":[1]}"#).is_err());
        // A process is its PID and start time: a bare PID is refused.
        assert!(read(r#"{"version":3,"op":"adopt","job":"lu","pids":[1]}"#).is_err());
        let adopt = read(r#"{"version":3,"op":"adopt","job":"lu","pids":[{"pid":1,"start":5}]}"#);
        assert!(matches!(adopt, Ok(Request::Adopt { pids, .. }) if pids == [ProcessRef { pid: 1, start: 5 }]));
        assert!(read(r#"{"version":3,"op":"adopt","job":"lu","pids":[{"pid":1,"start":5,"uid":0}]}"#).is_err());
        assert!(matches!(read(r#"{"version":3,"op":"status"}"#), Ok(Request::Status)));
        assert_eq!(version_of(br#"{"op":"policy","name":"gang","slot_ms":500}"#), Some(1));
        assert_eq!(version_of(br#"{"version":3,"op":"anything"}"#), Some(3));
        assert_eq!(version_of(b"op=status"), None);
        assert_eq!(version_of(b"{\"op\":\"status\xff\"}"), None);
        assert_eq!(version_of(br#"{"version":"2","op":"status"}"#), None);
    }

    #[test]
    fn a_request_goes_out_with_this_builds_version() {
        let sent = serde_json::to_string(&Envelope {
            version: VERSION,
            request: Request::Release { job: "a".parse().unwrap() },
        })
        .unwrap();
        assert_eq!(sent, format!(r#"{{"version":{VERSION},"op":"release","job":"a"}}"#));
        let back: Envelope = serde_json::from_str(&sent).unwrap();
        assert!(matches!(back.request, Request::Release { job } if job.to_string() == "a"));
    }

    #[test]
    fn origins_print_as_they_travel() {
        for (name, origin) in ORIGINS.0 {
            assert_eq!(serde_json::to_value(origin).unwrap(), *name);
            assert_eq!(origin.to_string(), *name);
        }
    }
}
