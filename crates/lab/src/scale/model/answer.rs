//! What the model answers: its validation against the measured cases, its extrapolation to larger clusters, the
//! slot lost to clock skew, and the controller's load.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What the model answers.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Answer {
    /// The SimPy version it ran on.
    pub simpy: String,
    /// Calibrated sensitivity to uncoordinated sharing, one value given to every program: beyond its CPU share,
    /// a `w`-wide job's time grows by `1 + gamma × c0 × log2(w) × o`, `o` the other jobs' CPU demand per CPU it
    /// shares and `c0` the program's communication share on CPUs of its own.
    pub gamma: BTreeMap<String, f64>,
    /// Calibrated part of its time waiting in MPI that a rank asks for the CPU (its demand is `1 - y × c`).
    #[serde(default)]
    pub y: f64,
    /// Calibrated part of what it asks for computing that a job being launched asks for the CPU (replayed jobs
    /// outside their measured computation, in cases of computations).
    #[serde(default)]
    pub u: f64,
    /// Calibrated time a job's ranks lose after each thaw before they run in step again, s.
    pub delta: f64,
    /// Calibrated part of a CPU each rank asks for while it waits for its job's ranks frozen on other nodes
    /// (lockstep gang on the measured cluster).
    #[serde(default)]
    pub s: f64,
    /// The communication share each program is given in the extrapolation.
    pub comm: BTreeMap<String, f64>,
    /// Calibrated time a job makes no progress each time Slurm's gang scheduling resumes it (its ranks continued
    /// and back in step), while its ranks ask for the CPU, s.
    pub beta: f64,
    /// Deviation of one agent's slot switch on the measured cluster (from its widest gang case), s: added to the
    /// clocks' offsets in the extrapolation.
    #[serde(default)]
    pub jitter_s: f64,
    /// Model against measurement.
    pub validation: Vec<Validation>,
    /// Larger clusters.
    pub extrapolation: Vec<Extrapolated>,
    /// A favoured slot's loss to clock spread, per clock and job width.
    pub skew: Vec<SkewLoss>,
    /// Controller load per cluster size.
    pub controller: Vec<ControllerLoad>,
}

/// One measured case and the model's value.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Validation {
    /// Cluster size.
    pub nodes: u32,
    /// Policy.
    pub policy: String,
    /// Measured mean slowdown, over the case's jobs of every session.
    pub measured: f64,
    /// Whether it is of the programs' timed regions (else of wall times).
    #[serde(default)]
    pub timed: bool,
    /// Each pooled session's own measured mean slowdown, oldest first (`measured` is over the jobs of all).
    #[serde(default)]
    pub sessions: Vec<f64>,
    /// Modelled, the case replayed one job at a time (the others as measured).
    pub model: f64,
    /// Modelled with every job at once (only the start times measured).
    #[serde(default)]
    pub free: f64,
    /// model / measured - 1.
    pub error: f64,
    /// The factor by which a job's modelled slowdown typically misses its measured one: exp of the root mean
    /// square of log(model / measured) over the case's jobs, replayed.
    #[serde(default)]
    pub job_factor: f64,
}

/// One extrapolated case.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Extrapolated {
    /// Cluster size.
    pub nodes: u32,
    /// Policy (and clock).
    pub policy: String,
    /// Jobs simulated.
    pub jobs: u32,
    /// Mean slowdown.
    pub mean_slowdown: f64,
    /// Mean slowdown of the jobs 256 nodes wide or more.
    pub wide_slowdown: Option<f64>,
}

/// A favoured slot's loss.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SkewLoss {
    /// Clock synchronisation.
    pub clock: String,
    /// Job width.
    pub width: u32,
    /// Share of the slot lost.
    pub lost: f64,
}

/// Controller load.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ControllerLoad {
    /// Cluster size.
    pub nodes: u32,
    /// Jobs started per second.
    pub jobs_per_s: f64,
    /// Share of one controller CPU lockstep's hooks take.
    pub hook_busy: f64,
    /// Place reads per second (one per node running jobs, every refresh).
    pub refresh_rpcs: f64,
    /// Slurm gang's suspend/resume RPCs per second.
    pub slurm_gang_rpcs: f64,
}
