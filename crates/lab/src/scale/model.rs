//! The scale model (`kind = "scale-model"`): a discrete-event model of the cluster (experiments/model/
//! scale_model.py, on SimPy), calibrated from the latest session of a scale experiment (each job's communication
//! share alone, freeze/thaw times, slot-switch spread, hook times); it must reproduce the measured mean slowdowns
//! before its extrapolation to 1,000 and 10,000 nodes counts as a prediction.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::report::cases;
use super::ScaleSpec;
use crate::report::{chart, html_page, write_files};
use crate::Paths;
use lockstep_core::error::UsageError;
use lockstep_store::{now, ScaleRecord, Store};

/// How far the model may be from a measurement for the model to count as validated.
pub const TOLERANCE: f64 = 0.10;

/// A parsed, validated scale-model spec.
#[derive(Clone, Debug)]
pub struct ModelSpec {
    /// Experiment name.
    pub name: String,
    /// What it answers.
    pub description: String,
    /// The scale spec whose latest session calibrates the model (read and checked with this spec).
    pub measured: ScaleSpec,
    /// Cluster sizes to extrapolate to.
    pub extrapolate: Vec<u32>,
    /// How long arrivals are simulated.
    pub horizon: Duration,
    /// Work offered per node and second.
    pub load: f64,
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
    let horizon = lockstep_core::duration::parse(&raw.horizon)
        .filter(|d| (Duration::from_mins(1)..=Duration::from_hours(24)).contains(d))
        .ok_or_else(|| bad(format!("horizon {:?} (expected 1m to 24h)", raw.horizon)))?;
    if !(raw.load > 0.0 && raw.load < 1.0) {
        return Err(bad(format!("load = {} (expected above 0 and below 1)", raw.load)));
    }
    let slot = lockstep_core::cosched::slot::parse(&raw.slot).map_err(|e| bad(e.to_string()))?;
    Ok(ModelSpec {
        name: raw.name,
        description: raw.description,
        measured,
        extrapolate: raw.extrapolate,
        horizon,
        load: raw.load,
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
    /// Mean slowdown measured.
    pub measured: f64,
    /// Its jobs: submitted at, nodes, alone time, communication share.
    pub jobs: Vec<ModelJob>,
}

/// One job as the model sees it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ModelJob {
    /// Seconds after the stream's start it started (after Slurm's queue).
    pub at: f64,
    /// Its nodes.
    pub nodes: Vec<u32>,
    /// Its time alone, s.
    pub alone_s: f64,
    /// Its communication share.
    pub comm: f64,
}

/// What the model answers.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Answer {
    /// The SimPy version it ran on.
    pub simpy: String,
    /// Calibrated penalty of uncoordinated sharing: progress is share ^ (1 + gamma × communication share).
    pub gamma: f64,
    /// Calibrated time a job loses in each slice of Slurm's gang scheduling (suspend and resume), s.
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
    /// Measured mean slowdown.
    pub measured: f64,
    /// Modelled.
    pub model: f64,
    /// model / measured - 1.
    pub error: f64,
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

/// The calibration from the store: the latest session of the measured experiment.
pub fn calibrate(spec: &ModelSpec, store: &Store) -> anyhow::Result<Calibration> {
    let m = &spec.measured;
    let records = store.scale_records(&m.name)?;
    anyhow::ensure!(
        !records.is_empty(),
        "experiment {:?} has no runs in the store: run experiments/{}.toml first",
        m.name,
        m.name
    );
    let mut comm = BTreeMap::new();
    let mut measured_cases = Vec::new();
    let (mut prolog, mut epilog, mut switch) = (Vec::new(), Vec::new(), Vec::new());
    for ((nodes, label), c) in cases(m, &records)? {
        let Some(policy) = m.policies.iter().find(|p| p.label() == label) else { continue };
        let Some(case) = &c.case else { continue };
        if let Some(h) = case.hooks.get("prolog-slurmctld") {
            prolog.push(h.1);
        }
        if let Some(h) = case.hooks.get("epilog-slurmctld") {
            epilog.push(h.1);
        }
        if case.switch_us > 0.0 {
            switch.push(case.switch_us);
        }
        let name = match (policy.config.scheduler.name(), policy.rows) {
            ("cfs", _) => "cfs",
            ("gang", "cluster") => "gang",
            ("slurm-gang", _) => "slurm-gang",
            _ => continue,
        };
        // The completed jobs, each from when it started: the queue before is Slurm's, not co-scheduling's.
        let mut jobs = Vec::new();
        for j in c.jobs.iter().filter(|j| j.exit == Some(0)) {
            let share = j.comm.with_context(|| {
                format!("job {} of {} has no communication share: run experiments/{}.toml again", j.id, m.name, m.name)
            })?;
            comm.entry(format!("{} on {} nodes", j.workload, j.nodes.len())).or_insert(share);
            if let (Some(at), Some(alone_s)) = (j.started_s, j.alone_s) {
                jobs.push(ModelJob { at, nodes: j.nodes.clone(), alone_s, comm: share });
            }
        }
        let Some(measured) = super::report::summary(&c.jobs).slowdown else { continue };
        measured_cases.push(MeasuredCase {
            nodes,
            policy: name.into(),
            slot_s: policy.config.slot.as_secs_f64(),
            skew_s: case.skew_ms.0 / 1e3,
            measured,
            jobs,
        });
    }
    let median = |v: &mut Vec<f64>| if v.is_empty() { 0.0 } else { crate::stats::median(v) };
    Ok(Calibration {
        host_cpus: lockstep_core::cpulist::CpuList::online().iter().count() as u32,
        switch_s: median(&mut switch) / 1e6,
        comm,
        cases: measured_cases,
        prolog_ctld_ms: median(&mut prolog),
        epilog_ctld_ms: median(&mut epilog),
        refresh_s: lockstep_slurm::REFRESH.as_secs_f64(),
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

/// `n`'s base-2 logarithm, rounded: the x of the charts, whose sizes span decades.
pub(crate) fn log2(n: u32) -> u32 {
    f64::from(n.max(1)).log2().round() as u32
}

/// The report's calibration table: what the model was given and what it fitted.
fn calibration_table(cal: &Calibration, a: &Answer) -> String {
    let mut md = String::new();
    md += "## Calibration\n\n| what | value | from |\n|---|---|---|\n";
    let _ = writeln!(md, "| host CPUs of the measured cluster | {} | this machine |", cal.host_cpus);
    let _ =
        writeln!(md, "| freeze/thaw time | {:.0} us | median of the agents' decision records |", cal.switch_s * 1e6);
    for (w, c) in &cal.comm {
        let _ = writeln!(md, "| communication share of `{w}` | {c:.3} | PMPI profile of the job alone |");
    }
    let _ = writeln!(
        md,
        "| controller prolog / epilog per job | {:.0} / {:.0} ms | hook log, p50 |",
        cal.prolog_ctld_ms, cal.epilog_ctld_ms
    );
    let _ = writeln!(
        md,
        "| gamma (uncoordinated progress = share ^ (1 + gamma × c)) | {:.2} | fitted on the cfs cases |",
        a.gamma
    );
    let _ = writeln!(
        md,
        "| agents' switch jitter (deviation per agent) | {:.2} ms | p50 spread of the widest gang case |",
        a.jitter_s * 1e3
    );
    let _ = writeln!(
        md,
        "| beta (time a job loses per Slurm gang slice) | {:.2} s | fitted on the slurm-gang cases |",
        a.beta
    );
    md
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
         header and in docs/experiments.md), calibrated from the latest session of `{}` and from earlier \
         experiments in the store.\n",
        a.simpy, spec.measured.name
    );
    md += &calibration_table(&cal, &a);
    md += "\n## Validation: model against measurement (mean slowdown)\n\nEach case is modelled with gamma and beta \
           fitted on the other cluster sizes' cases only (held out); the extrapolation uses the fit on all.\n\n| nodes | policy | measured | model | error | within 10 % |\n|---|---|---|---|---|---|\n";
    let mut val_chart: BTreeMap<String, Vec<(u32, f64)>> = BTreeMap::new();
    for v in &a.validation {
        let _ = writeln!(
            md,
            "| {} | {} | {:.2} | {:.2} | {:+.1} % | {} |",
            v.nodes,
            v.policy,
            v.measured,
            v.model,
            v.error * 100.0,
            if v.error.abs() <= TOLERANCE { "yes" } else { "no" }
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

    /// The Python with SimPy that scripts/deps.sh prepares.
    fn venv_python() -> PathBuf {
        let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../build/venv/bin/python3");
        assert!(python.exists(), "{} missing: run scripts/deps.sh", python.display());
        python
    }

    #[test]
    fn the_model_replays_a_measured_case_and_answers_every_question() {
        let dir = tempfile::tempdir().unwrap();
        let job = |at: f64, nodes: &[u32], alone_s: f64| ModelJob { at, nodes: nodes.to_vec(), alone_s, comm: 0.2 };
        let jobs =
            vec![job(0.0, &[1, 2], 2.0), job(0.5, &[2, 3], 2.0), job(1.0, &[1, 3], 2.0), job(1.5, &[1, 2, 3, 4], 4.0)];
        let case = |policy: &str, slot_s: f64, measured: f64| MeasuredCase {
            nodes: 4,
            policy: policy.into(),
            slot_s,
            skew_s: 0.001,
            measured,
            jobs: jobs.clone(),
        };
        let cal = Calibration {
            host_cpus: 2,
            switch_s: 1e-4,
            comm: BTreeMap::new(),
            cases: vec![case("cfs", 2.0, 3.0), case("gang", 0.5, 2.5), case("slurm-gang", 5.0, 3.5)],
            prolog_ctld_ms: 20.0,
            epilog_ctld_ms: 20.0,
            refresh_s: 2.0,
            extrapolate_nodes: vec![64, 256],
            horizon_s: 120.0,
            load: 0.6,
            slot_s: 0.5,
            seed: 1,
        };
        let (cal_path, answer_path) = (dir.path().join("cal.json"), dir.path().join("answer.json"));
        std::fs::write(&cal_path, serde_json::to_string(&cal).unwrap()).unwrap();
        let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/model/scale_model.py");
        let out = Command::new(venv_python()).arg(model).arg(&cal_path).arg(&answer_path).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let a: Answer = serde_json::from_str(&std::fs::read_to_string(&answer_path).unwrap()).unwrap();
        assert_eq!(a.validation.len(), 3);
        assert!(a.validation.iter().all(|v| v.model.is_finite() && v.model >= 1.0), "{:?}", a.validation);
        // Five policies (cfs, Slurm gang, lockstep gang under three clocks) per extrapolated size.
        assert_eq!(a.extrapolation.len(), 10);
        // A wider job loses more of its slot to clock spread, and NTP more than PTP.
        let lost = |clock: &str, width: u32| a.skew.iter().find(|s| s.clock == clock && s.width == width).unwrap().lost;
        assert!(lost("NTP 10ms", 1024) > lost("NTP 10ms", 2) && lost("NTP 10ms", 1024) > lost("PTP 1us", 1024));
        assert_eq!(a.controller.len(), 2);
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
