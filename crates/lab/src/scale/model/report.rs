//! The scale model's report: the calibration it was given and what it fitted, the validation against the
//! measured cases, and the extrapolation.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use anyhow::Context;

use super::answer::Answer;
use super::calibration::Calibration;
use super::spec::ModelSpec;
use crate::harness::report::{chart, html_page, Report};
use crate::scale::common::log2;
use crate::scale::common::ScaleRecord;

/// How far the model may be from a measurement for the model to count as validated.
pub const TOLERANCE: f64 = 0.10;

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

/// Writes the charts into `dir`; returns the report (summary and page) that shows them.
pub fn write(spec: &ModelSpec, records: &[ScaleRecord], dir: &Path) -> anyhow::Result<Report> {
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
    Ok(Report { summary: md, page: html })
}
