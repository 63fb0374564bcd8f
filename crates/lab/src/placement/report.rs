//! The placement report: per workload, where ranks ran and placement policy, the median time and its ratio to
//! `p-only`, or corebench's score; beside it the hybrid-CPU paper's own CG class D times.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::spec::PlacementSpec;
use crate::harness::report::{failed_section, html_page, Report};
use crate::harness::stats::{failed, median, split_failed};
use lockstep_store::ExperimentRun;

/// S000's NPB CG class D times (s) on an i9-13900K, by placement.
const PAPER: [(&str, f64); 3] = [("p-only", 446.47), ("mixed", 728.47), ("e-only", 880.47)];

/// What emulated kinds leave out, said under every emulated table.
const EMULATION_LIMITS: &str = "Emulated kinds differ from real ones only in CPU time: a rank on an emulated E core \
    runs at full speed for its share of every bandwidth period and not at all for the rest, on the same core, caches \
    and memory path as a P rank. Real efficiency cores are slower per cycle and (Intel's) share an L2 cache per \
    4-core cluster, run at lower clocks and have no SMT; memory-bound phases that run as fast on E as on P cores are slowed here, and the \
    quota's on/off pacing adds waits at synchronisation points that a uniformly slower core spreads out. The \
    shape (a mixed job paced by its slowest rank) carries over; the size of each gap does not.";

/// One (workload, runtime, policy) cell.
struct Cell {
    runs: usize,
    failed: usize,
    time: Option<f64>,
    score: Option<f64>,
    hybrid: String,
}

/// The report: its summary and page (it has no plots).
pub fn build(spec: &PlacementSpec, runs: &[ExperimentRun]) -> anyhow::Result<Report> {
    let mut groups: BTreeMap<(String, String, String), Vec<&ExperimentRun>> = BTreeMap::new();
    for r in runs {
        groups.entry((r.workload.clone(), r.placement.clone(), r.policy.clone())).or_default().push(r);
    }
    let cells: BTreeMap<(String, String, String), Cell> = groups
        .into_iter()
        .map(|(k, rs)| {
            let ok: Vec<&&ExperimentRun> = rs.iter().filter(|r| !failed(r)).collect();
            let mut times: Vec<f64> = ok.iter().filter_map(|r| r.time_s).collect();
            let mut scores: Vec<f64> = ok.iter().filter_map(|r| r.score).collect();
            let cell = Cell {
                runs: rs.len(),
                failed: rs.len() - ok.len(),
                time: (!times.is_empty()).then(|| median(&mut times)),
                score: (!scores.is_empty()).then(|| median(&mut scores)),
                hybrid: rs[0].hybrid.clone().unwrap_or_default(),
            };
            (k, cell)
        })
        .collect();
    let hybrids: Vec<&str> = {
        let mut h: Vec<&str> = cells.values().map(|c| c.hybrid.as_str()).collect();
        h.sort_unstable();
        h.dedup();
        h
    };
    let emulated = hybrids.iter().any(|h| h.starts_with("emulated"));
    let mut md = format!("# {} — {}\n\n", spec.name, spec.description);
    let _ = writeln!(
        md,
        "{} job runs; {} ranks (corebench: copies) per job, each pinned to one PU of its placement; MPI progress \
         `{}`; {} repetitions. Core kinds: {}. Time = the kernel's timed section, median over repetitions; \
         × p-only = that time over the same runtime's `p-only` time; score = corebench's single-thread overall \
         score summed over the copies (the placement's throughput), median over repetitions.\n",
        runs.len(),
        spec.ranks,
        spec.progress,
        spec.repetitions,
        hybrids.join("; ")
    );
    let workloads: Vec<String> = {
        let mut w: Vec<String> = cells.keys().map(|k| k.0.clone()).collect();
        w.dedup();
        w
    };
    for w in &workloads {
        let _ = writeln!(md, "## {w}\n");
        md += "| cores | runs in | placement | runs | median time (s) | × p-only | score | score × p-only | failed |\n";
        md += "|---|---|---|---|---|---|---|---|---|\n";
        // Rows in the spec's order: where ranks run, then placement.
        let order =
            spec.ranks_in.iter().flat_map(|r| spec.policies.iter().map(move |p| (r.to_string(), p.to_string())));
        for (runtime, policy) in order {
            let Some(c) = cells.get(&(w.clone(), runtime.clone(), policy.clone())) else { continue };
            let base = cells.get(&(w.clone(), runtime.clone(), "p-only".into()));
            let ratio = |v: Option<f64>, b: Option<f64>| match (v, b) {
                (Some(v), Some(b)) if b > 0.0 => format!("{:.2}", v / b),
                _ => "-".into(),
            };
            let cores = if c.hybrid.starts_with("emulated") { "emulated hybrid" } else { "native hybrid" };
            let _ = writeln!(
                md,
                "| {cores} | {runtime} | {policy} | {} | {} | {} | {} | {} | {} |",
                c.runs,
                c.time.map_or_else(
                    || if c.runs == c.failed { "FAILED".into() } else { "-".into() },
                    |t| format!("{t:.2}")
                ),
                ratio(c.time, base.and_then(|b| b.time)),
                c.score.map_or("-".into(), |s| format!("{s:.0}")),
                ratio(c.score, base.and_then(|b| b.score)),
                if c.failed == 0 { "0".into() } else { format!("FAILED {} of {}", c.failed, c.runs) }
            );
        }
        md += "\n";
    }
    md += "## The hybrid-CPU paper (S000): NPB CG class D on an i9-13900K, Singularity containers\n\n";
    md += "| placement | time (s) | × p-only |\n|---|---|---|\n";
    for (policy, t) in PAPER {
        let _ = writeln!(md, "| {policy} | {t:.2} | {:.2} |", t / PAPER[0].1);
    }
    md += "\n";
    if emulated {
        md += "## What emulation cannot show\n\n";
        md += EMULATION_LIMITS;
        md += "\n";
    }
    md += &failed_section(&split_failed(runs).1);
    Ok(Report { summary: md, page: html_page(&spec.name, &spec.description) })
}
