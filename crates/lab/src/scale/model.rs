//! The scale model (`kind = "scale-model"`): a discrete-event model of the cluster (experiments/model/
//! scale_model.py, on SimPy), calibrated from every session of a scale experiment that ran its stream (each job's
//! communication share alone, freeze/thaw times, slot-switch spread, hook times); it must reproduce the measured
//! mean slowdowns before its extrapolation to 1,000 and 10,000 nodes counts as a prediction.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::log2;
use super::report::cases;
use super::ScaleSpec;
use crate::report::{chart, html_page, write_files};
use crate::Paths;
use lockstep_core::error::UsageError;
use lockstep_store::{now, ScaleRecord, Store};

/// How far the model may be from a measurement for the model to count as validated.
pub const TOLERANCE: f64 = 0.10;

/// Jobs a node of the test cluster runs at once: `OverSubscribe=FORCE:4` in tests/cluster/up's slurm.conf.
const CLUSTER_MPL: u32 = 4;

/// SlurmctldTimeout of the test cluster: Slurm's default (tests/cluster/up's slurm.conf does not set it).
const SLURMCTLD_TIMEOUT_S: u32 = 120;

/// A parsed, validated scale-model spec.
#[derive(Clone, Debug)]
pub struct ModelSpec {
    /// Experiment name.
    pub name: String,
    /// What it answers.
    pub description: String,
    /// The scale spec whose sessions calibrate the model (read and checked with this spec).
    pub measured: ScaleSpec,
    /// Where that spec was read from.
    pub measured_path: PathBuf,
    /// Cluster sizes to extrapolate to.
    pub extrapolate: Vec<u32>,
    /// How long arrivals are simulated.
    pub horizon: Duration,
    /// Work offered per node and second.
    pub load: f64,
    /// Jobs a node runs at once in the extrapolation (Slurm's `OverSubscribe=FORCE:mpl`).
    pub mpl: u32,
    /// lockstep's slot in the extrapolation.
    pub slot: Duration,
    /// Seed of the synthetic streams.
    pub seed: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    kind: String,
    name: String,
    #[serde(default)]
    description: String,
    measured: PathBuf,
    extrapolate: Vec<u32>,
    horizon: String,
    load: f64,
    mpl: u32,
    slot: String,
    #[serde(default)]
    seed: u64,
}

/// Validates a scale-model spec, `text` as read from `path` (`measured` is relative to its directory).
pub fn parse(path: &Path, text: &str) -> Result<ModelSpec, UsageError> {
    let bad = |what: String| UsageError::new(format!("bad experiment spec {}: {what}", path.display()));
    let raw: Raw = toml::from_str(text).map_err(|e| bad(lockstep_core::error::toml_message(text, &e)))?;
    crate::spec::check_common(&raw.kind, "scale-model", &raw.name, 2).map_err(bad)?;
    let measured_path = path.parent().unwrap_or(Path::new(".")).join(&raw.measured);
    let measured = match crate::load(&measured_path) {
        Ok(crate::AnySpec::Scale(s)) => s,
        Ok(_) => return Err(bad(format!("measured {} is not a scale experiment", raw.measured.display()))),
        Err(e) => return Err(bad(format!("measured: {e}"))),
    };
    if raw.extrapolate.is_empty() || raw.extrapolate.iter().any(|n| !(2..=100_000).contains(n)) {
        return Err(bad(format!("extrapolate = {:?} (expected cluster sizes from 2 to 100000)", raw.extrapolate)));
    }
    let horizon =
        lockstep_core::duration::within("horizon", &raw.horizon, Duration::from_mins(1)..=Duration::from_hours(24))
            .map_err(|e| bad(e.to_string()))?;
    if !(raw.load > 0.0 && raw.load < 1.0) {
        return Err(bad(format!("load = {} (expected above 0 and below 1)", raw.load)));
    }
    if !(1..=16).contains(&raw.mpl) {
        return Err(bad(format!("mpl = {} (expected jobs per node from 1 to 16)", raw.mpl)));
    }
    let slot = lockstep_core::cosched::slot::parse("slot", &raw.slot).map_err(|e| bad(e.to_string()))?;
    Ok(ModelSpec {
        name: raw.name,
        description: raw.description,
        measured,
        measured_path,
        extrapolate: raw.extrapolate,
        horizon,
        load: raw.load,
        mpl: raw.mpl,
        slot,
        seed: raw.seed,
    })
}

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

/// The calibration from the store: every session of the measured experiment that ran the spec's stream, latest
/// first. A session may have run only some of the cases. The latest session that ran a case says what it measures
/// (timed regions or wall times); an earlier session's case joins only when it ran the same jobs on the same
/// nodes and measured the same quantity.
pub fn calibrate(spec: &ModelSpec, store: &Store) -> anyhow::Result<Calibration> {
    let m = &spec.measured;
    let every = store.scale_records_all(&m.name)?;
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
            let stream = super::stream(m, key.0);
            if c.jobs.iter().zip(&stream).any(|(j, s)| j.nodes != s.nodes) {
                continue;
            }
            // The jobs that ran, completed or not (a job that failed still held its nodes and CPU while it ran).
            let summary = super::report::summary(&c.jobs);
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
    let median = |v: &mut Vec<f64>| if v.is_empty() { 0.0 } else { crate::stats::median(v) };
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

/// The Python that has SimPy: scripts/deps.sh's `build/venv`, else the system's.
fn python(paths: &Paths) -> PathBuf {
    let venv = paths.bin.join("../venv/bin/python3");
    if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

/// Calibrates, runs the model and stores its answer; returns the session id.
pub fn run(spec: &ModelSpec, paths: &Paths) -> anyhow::Result<f64> {
    std::fs::create_dir_all(&paths.work)?;
    let store = Store::open(&paths.store)?;
    let session = now();
    let calibration = calibrate(spec, &store)?;
    let cal_path = paths.work.join("calibration.json");
    let answer_path = paths.work.join("answer.json");
    std::fs::write(&cal_path, serde_json::to_string_pretty(&calibration)?)?;
    let model = paths.bin.join("../../experiments/model/scale_model.py");
    anyhow::ensure!(model.exists(), "the model needs the source tree's experiments/model/scale_model.py");
    let out = Command::new(python(paths))
        .arg(&model)
        .arg(&cal_path)
        .arg(&answer_path)
        .output()
        .context("cannot run python3 (scripts/deps.sh installs it with SimPy in build/venv)")?;
    anyhow::ensure!(out.status.success(), "the model failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    let answer = std::fs::read_to_string(&answer_path)?;
    serde_json::from_str::<Answer>(&answer).context("the model's answer")?;
    for (record, data) in [("calibration", serde_json::to_string(&calibration)?), ("answer", answer)] {
        store.add_scale_record(&ScaleRecord {
            experiment: spec.name.clone(),
            session,
            nodes: 0,
            policy: String::new(),
            record: record.into(),
            data,
        })?;
    }
    Ok(session)
}

/// The report's calibration table: what the model was given and what it fitted.
fn calibration_table(cal: &Calibration, a: &Answer) -> String {
    let mut md = String::new();
    md += "## Calibration\n\n| what | value | from |\n|---|---|---|\n";
    let mut row = |what: &str, value: String, from: &str| {
        let _ = writeln!(md, "| {what} | {value} | {from} |");
    };
    row("host CPUs of the measured cluster", cal.host_cpus.to_string(), "this machine");
    row(
        "jobs per node, measured / extrapolated",
        format!("{} / {}", cal.mpl, cal.extrapolate_mpl),
        "slurm.conf / spec",
    );
    row("freeze/thaw time", format!("{:.0} us", cal.switch_s * 1e6), "median of the agents' decision records");
    for (w, c) in &cal.comm {
        row(&format!("communication share of `{w}`"), format!("{c:.3}"), "PMPI profile of the job alone");
    }
    for (w, c) in &a.comm {
        let from = "mean of its runs alone at its narrowest width, every session";
        row(&format!("`{w}`: c0, its communication share on CPUs of its own"), format!("{c:.3}"), from);
    }
    let hooks = format!("{:.0} / {:.0} ms", cal.prolog_ctld_ms, cal.epilog_ctld_ms);
    row("controller prolog / epilog per job", hooks, "hook log, p50");
    if let Some(g) = a.gamma.values().next() {
        row(
            "gamma, every program (uncoordinated: time × 1 + gamma·c0·log2(w)·o, o the others' demand per CPU)",
            format!("{g:.2}"),
            "fitted with y on the cfs cases' mean slowdowns",
        );
    }
    row(
        "y (part of its MPI waiting time a rank asks for the CPU)",
        format!("{:.2}", a.y),
        "fitted with gamma on the cfs cases' mean slowdowns",
    );
    if cal.cases.iter().any(|c| c.timed) {
        row(
            "u (part of its computing demand a job asks for while launched)",
            format!("{:.2}", a.u),
            "fitted on the slowdowns of the cfs cases' jobs",
        );
    }
    row(
        "srun's wait after a refused step (Slurm gang)",
        format!("{:.1} s", cal.step_wait_s),
        "Slurm 22.05's step_wait: SlurmctldTimeout (120 s) + PID mod 10",
    );
    row("delta (time lost after each thaw)", format!("{:.0} ms", a.delta * 1e3), "fitted on the gang cases, with s");
    row(
        "s (part of a CPU a rank asks for waiting for its job's ranks frozen on other nodes)",
        format!("{:.2}", a.s),
        "fitted on the gang cases, with delta",
    );
    row(
        "agents' switch jitter (deviation per agent)",
        format!("{:.2} ms", a.jitter_s * 1e3),
        "p50 spread of the widest gang case",
    );
    row(
        "beta (time a job makes no progress after a Slurm gang resume, its ranks asking for the CPU)",
        format!("{:.2} s", a.beta),
        "fitted on the slurm-gang cases",
    );
    md
}

/// The validation section: model against measurement per case, whether it passed; and its chart's series.
fn validation_section(a: &Answer) -> (String, BTreeMap<String, Vec<(u32, f64)>>) {
    let mut md = String::from(
        "\n## Validation: model against measurement (mean slowdown)\n\nEach case is modelled with y, u, gamma, delta, \
           s and beta fitted on the other cluster sizes' cases only (held out); the extrapolation uses the fit on all. \
           Model: the case replayed, each job started when Slurm started it and modelled while the others hold \
           their nodes and CPU for their measured time. All at once: every job modelled together (only the start \
           times measured; a job modelled too slow shares the CPU longer, so errors feed back). Measured and model: \
           the mean over the case's jobs of every session that measured it; sessions: each session's own mean, \
           oldest first, for how far measurements of one case fall apart. Of: the timed region is \
           the computation each program reports (NPB's \"Time in seconds\"), from when it started; wall is the whole \
           job, launch and MPI start-up included. Job factor: how far a job's modelled slowdown typically misses \
           its measured one (exp of the root mean square log ratio over the case's jobs).\n\n| nodes | policy | of \
           | measured | model | error | within 10 % | job factor | all at once | sessions |\n\
           |---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut val_chart: BTreeMap<String, Vec<(u32, f64)>> = BTreeMap::new();
    for v in &a.validation {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.2} | {:.2} | {:+.1} % | {} | {:.2} | {:.2} | {} |",
            v.nodes,
            v.policy,
            if v.timed { "timed region" } else { "wall" },
            v.measured,
            v.model,
            v.error * 100.0,
            if v.error.abs() <= TOLERANCE { "yes" } else { "no" },
            v.job_factor,
            v.free,
            v.sessions.iter().map(|e| format!("{e:.2}")).collect::<Vec<_>>().join(", ")
        );
        val_chart.entry(format!("{} measured", v.policy)).or_default().push((log2(v.nodes), v.measured));
        val_chart.entry(format!("{} model", v.policy)).or_default().push((log2(v.nodes), v.model));
    }
    let validated = !a.validation.is_empty() && a.validation.iter().all(|v| v.error.abs() <= TOLERANCE);
    let worst = a.validation.iter().map(|v| v.error.abs()).fold(0.0, f64::max);
    let _ = writeln!(
        md,
        "\n**Validation {}**: the largest error is {:.0} % (the target is {:.0} %).{}\n",
        if validated { "passed" } else { "failed" },
        worst * 100.0,
        TOLERANCE * 100.0,
        if validated {
            ""
        } else {
            " The extrapolation below is therefore not validated: it shows what the model's mechanisms imply, not \
             a prediction."
        }
    );
    (md, val_chart)
}

/// Writes `summary.md`, `index.html` and the charts into `dir`; returns the HTML path.
pub fn write(spec: &ModelSpec, records: &[ScaleRecord], dir: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let get = |name: &str| records.iter().find(|r| r.record == name).map(|r| r.data.as_str());
    let cal: Calibration = serde_json::from_str(get("calibration").context("no calibration stored")?)?;
    let a: Answer = serde_json::from_str(get("answer").context("no answer stored")?)?;
    let mut md = format!("# {} — {}\n\n", spec.name, spec.description);
    let _ = writeln!(
        md,
        "A fluid discrete-event model on SimPy {} (experiments/model/scale_model.py; its assumptions are in its \
         header and in docs/experiments.md), calibrated from every session of `{}` in the store that ran \
         its stream.\n",
        a.simpy, spec.measured.name
    );
    md += &calibration_table(&cal, &a);
    let (validation, val_chart) = validation_section(&a);
    md += &validation;
    md += "## Extrapolation (real nodes, one CPU share per job per node)\n\n| nodes | policy | jobs | mean slowdown | \
           jobs >= 256 nodes |\n|---|---|---|---|---|\n";
    let mut ext_chart: BTreeMap<String, Vec<(u32, f64)>> = BTreeMap::new();
    for e in &a.extrapolation {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.2} | {} |",
            e.nodes,
            e.policy,
            e.jobs,
            e.mean_slowdown,
            e.wide_slowdown.map_or("-".into(), |w| format!("{w:.2}"))
        );
        ext_chart.entry(e.policy.clone()).or_default().push((log2(e.nodes), e.mean_slowdown));
    }
    md += "\n## Clock skew: share of a favoured slot lost\n\n| clock | job width | lost |\n|---|---|---|\n";
    let mut skew_chart: BTreeMap<String, Vec<(u32, f64)>> = BTreeMap::new();
    for s in &a.skew {
        let _ = writeln!(md, "| {} | {} | {:.2} % |", s.clock, s.width, s.lost * 100.0);
        skew_chart.entry(s.clock.clone()).or_default().push((log2(s.width), s.lost * 100.0));
    }
    md += "\n## Controller load\n\n| nodes | jobs/s | lockstep hooks (CPU share) | place reads/s | Slurm gang RPCs/s |\n|---|---|---|---|---|\n";
    for c in &a.controller {
        let _ = writeln!(
            md,
            "| {} | {:.2} | {:.3} | {:.0} | {:.0} |",
            c.nodes, c.jobs_per_s, c.hook_busy, c.refresh_rpcs, c.slurm_gang_rpcs
        );
    }
    md += "\n";
    let mut html = html_page(&spec.name, &spec.description);
    for (file, title, x, y, series) in [
        ("validation.svg", "Model against measurement", "log2 nodes", "mean slowdown", &val_chart),
        ("extrapolation.svg", "Extrapolated mean slowdown", "log2 nodes", "mean slowdown", &ext_chart),
        ("skew.svg", "Favoured slot lost to clock spread", "log2 job width", "% of a slot", &skew_chart),
    ] {
        if series.is_empty() {
            continue;
        }
        let svg = chart(title, x, y, series);
        std::fs::write(dir.join(file), &svg)?;
        html += &svg;
    }
    html += "<h2>Tables</h2>";
    write_files(dir, &md, html)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Python with SimPy that scripts/deps.sh prepares; without it (a plain `cargo test` before any `make`)
    /// the test is skipped with a line saying so, unless `LOCKSTEP_REQUIRE_ALL=1` (`make test`) makes it fail.
    fn venv_python() -> Option<PathBuf> {
        let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../build/venv/bin/python3");
        if python.exists() {
            return Some(python);
        }
        let what = format!("{} missing: run scripts/deps.sh (make does)", python.display());
        assert!(std::env::var_os("LOCKSTEP_REQUIRE_ALL").is_none_or(|v| v != "1"), "prerequisite missing: {what}");
        eprintln!("skipped: {what}");
        None
    }

    #[test]
    fn the_model_replays_a_measured_case_and_answers_every_question() {
        let Some(python) = venv_python() else { return };
        let dir = lockstep_scratch::tempdir().unwrap();
        let job = |submit: f64, nodes: &[u32], alone_s: f64| ModelJob {
            submit,
            start: Some(submit + 0.1),
            wall: Some(alone_s * 2.0),
            completed: true,
            nodes: nodes.to_vec(),
            alone_s,
            timed: None,
            workload: if nodes.len() > 2 { "cg".into() } else { "is".into() },
            comm: 0.2,
            suspended: Vec::new(),
        };
        // The last job failed: it holds its nodes for its wall time and has no slowdown.
        let failed = ModelJob { completed: false, ..job(2.0, &[3, 4], 2.0) };
        let jobs = vec![
            job(0.0, &[1, 2], 2.0),
            job(0.5, &[2, 3], 2.0),
            job(1.0, &[1, 3], 2.0),
            job(1.5, &[1, 2, 3, 4], 4.0),
            failed,
        ];
        let case = |policy: &str, slot_s: f64| MeasuredCase {
            nodes: 4,
            policy: policy.into(),
            slot_s,
            skew_s: 0.001,
            // Every completed job took twice its time alone.
            measured: 2.0,
            timed: false,
            session: 2.0,
            jobs: jobs.clone(),
        };
        // The cfs case measured in an earlier session too, its jobs each three times as long as alone.
        let earlier_jobs = jobs.iter().map(|j| ModelJob { wall: Some(j.alone_s * 3.0), ..j.clone() }).collect();
        let earlier = MeasuredCase { session: 1.0, measured: 3.0, jobs: earlier_jobs, ..case("cfs", 2.0) };
        // The same Slurm gang case measured by the programs' timed regions (half of each job's time alone).
        let timed_jobs: Vec<ModelJob> =
            jobs.iter().map(|j| ModelJob { timed: Some((j.alone_s, j.alone_s / 2.0)), ..j.clone() }).collect();
        let timed_case = MeasuredCase { timed: true, jobs: timed_jobs.clone(), ..case("slurm-gang", 5.0) };
        // The same again, with what slurmctld logged: the second job suspended for 100 s of its computation.
        let mut recorded_jobs = timed_jobs;
        recorded_jobs[1].suspended = vec![(3.0, 103.0)];
        let recorded = MeasuredCase { nodes: 8, jobs: recorded_jobs, ..timed_case.clone() };
        let cal = Calibration {
            host_cpus: 2,
            switch_s: 1e-4,
            step_wait_s: 124.5,
            comm: BTreeMap::new(),
            cases: vec![case("cfs", 2.0), case("gang", 0.5), case("slurm-gang", 5.0), timed_case, recorded, earlier],
            prolog_ctld_ms: 20.0,
            epilog_ctld_ms: 20.0,
            refresh_s: 2.0,
            mpl: 4,
            extrapolate_mpl: 2,
            extrapolate_nodes: vec![64, 256],
            horizon_s: 120.0,
            load: 0.6,
            slot_s: 0.5,
            seed: 1,
        };
        let (cal_path, answer_path) = (dir.path().join("cal.json"), dir.path().join("answer.json"));
        std::fs::write(&cal_path, serde_json::to_string(&cal).unwrap()).unwrap();
        let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/model/scale_model.py");
        let out = Command::new(python).arg(model).arg(&cal_path).arg(&answer_path).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let a: Answer = serde_json::from_str(&std::fs::read_to_string(&answer_path).unwrap()).unwrap();
        assert_eq!(a.validation.len(), 5);
        // The two sessions of the cfs case are one case: its mean is over the four completed jobs of each.
        let cfs = a.validation.iter().find(|v| v.policy == "cfs").unwrap();
        assert_eq!(cfs.sessions, [3.0, 2.0], "each session's mean, oldest first");
        assert!((cfs.measured - 2.5).abs() < 1e-9, "{cfs:?}");
        assert!(a.validation.iter().all(|v| v.model >= 1.0 && v.free >= 1.0), "{:?}", a.validation);
        // Under Slurm gang the second job starts suspended (its neighbour runs in the only row), so its srun
        // waits out step_wait: 124.5 s against 2 s of work.
        let slurm = a.validation.iter().find(|v| v.policy == "slurm-gang" && !v.timed).unwrap();
        assert!(slurm.model > 30.0, "{slurm:?}");
        // A computation starts once its srun has its step: replayed from then, it does not wait.
        let computation = a.validation.iter().find(|v| v.timed && v.nodes == 4).unwrap();
        assert!(computation.model < 30.0, "{computation:?}");
        // Suspended as slurmctld logged it, the second job's computation waits 100 s: one job of four at 50 or
        // more (its computation alone is 1 s).
        let replayed = a.validation.iter().find(|v| v.timed && v.nodes == 8).unwrap();
        assert!(replayed.model > 100.0 / 4.0, "{replayed:?}");
        // Six policies (cfs, Slurm gang, lockstep gang under three clocks and once without thaw loss) per size.
        assert_eq!(a.extrapolation.len(), 12);
        // A wider job loses more of its slot to clock spread, and NTP more than PTP.
        let lost = |clock: &str, width: u32| a.skew.iter().find(|s| s.clock == clock && s.width == width).unwrap().lost;
        assert!(lost("NTP 10ms", 1024) > lost("NTP 10ms", 2) && lost("NTP 10ms", 1024) > lost("PTP 1us", 1024));
        assert_eq!(a.controller.len(), 2);
    }

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
            for (id, j) in super::super::stream(m, nodes).iter().enumerate() {
                let job = super::super::run::JobResult {
                    id: id as u64,
                    nodes: j.nodes.clone(),
                    workload: "cg".into(),
                    started_s: Some(j.at),
                    wall_s: Some(slowdown),
                    alone_s: Some(1.0),
                    comm: Some(0.2),
                    exit: Some(0),
                    ..Default::default()
                };
                store.add_scale_record(&record("job", serde_json::to_string(&job).unwrap())).unwrap();
            }
            let case = super::super::run::CaseResult::default();
            store.add_scale_record(&record("case", serde_json::to_string(&case).unwrap())).unwrap();
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

    #[test]
    fn the_shipped_spec_parses_and_bad_values_are_named() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/scale-model.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        let spec = parse(&path, &text).unwrap();
        assert_eq!(spec.measured.name, "slurm-scale");
        for (from, to, says) in
            [("load = 0.6", "load = 1.5", "load"), ("horizon = \"20m\"", "horizon = \"1s\"", "horizon")]
        {
            let e = parse(&path, &text.replace(from, to)).unwrap_err().to_string();
            assert!(e.contains(says), "{to}: {e}");
        }
    }
}
