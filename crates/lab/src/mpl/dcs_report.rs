//! The report's `dcs` section (the DCS paper): each measured job's slowdown per scenario under every policy — with
//! background load (`[name]` in the mix), beside another job, and alone (`unloaded`) — the policy that wins each,
//! and the arrival-to-raise latency of the `dcs` policies.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::harness::stats::{median, raises, time_of};
use lockstep_store::ExperimentRun;

/// Slowdowns per policy, per (scenario, progress, mix, measured job).
type Table<'a> = BTreeMap<(&'a str, &'a str, &'a str, &'a str), BTreeMap<&'a str, Vec<f64>>>;

/// Per policy, per case (mix, repetition, start time): raises, p50 and p99 latency.
type Latencies<'a> = BTreeMap<&'a str, BTreeMap<(String, u32, u64), (u64, f64, f64)>>;

/// What a scenario is, from its mix.
fn scenario(r: &ExperimentRun) -> &'static str {
    if r.mix.contains('[') {
        "background load"
    } else if r.mpl == 1 {
        "unloaded"
    } else {
        "beside other jobs"
    }
}

/// The Markdown section.
pub fn section(runs: &[ExperimentRun]) -> String {
    let base: BTreeMap<(&str, &str), f64> = {
        let mut d: BTreeMap<(&str, &str), Vec<f64>> = BTreeMap::new();
        for r in runs.iter().filter(|r| r.policy == "dedicated") {
            d.entry((r.progress.as_str(), r.workload.as_str())).or_default().push(time_of(r));
        }
        d.into_iter().map(|(k, mut v)| (k, median(&mut v))).collect()
    };
    let mut policies: Vec<&str> = runs.iter().filter(|r| r.policy != "dedicated").map(|r| r.policy.as_str()).collect();
    policies.sort_unstable();
    policies.dedup();
    // (scenario, progress, mix, workload) → policy → slowdowns.
    let mut table: Table = BTreeMap::new();
    for r in runs.iter().filter(|r| r.policy != "dedicated") {
        let Some(b) = base.get(&(r.progress.as_str(), r.workload.as_str())) else { continue };
        table
            .entry((scenario(r), r.progress.as_str(), r.mix.as_str(), r.workload.as_str()))
            .or_default()
            .entry(r.policy.as_str())
            .or_default()
            .push(time_of(r) / b);
    }
    let mut md =
        "\n## dcs: message-driven co-scheduling (the DCS paper)\n\nMedian slowdown of each measured job against \
                  its dedicated run (alone under cfs), per scenario; **bold**: the best policy of the row. \
                  `[name]`: background load, not measured.\n\n"
            .to_string();
    let _ = writeln!(md, "| scenario | progress | mix | job | {} | best |", policies.join(" | "));
    let _ = writeln!(md, "|---|---|---|---|{}---|", "---|".repeat(policies.len()));
    let mut verdicts = Vec::new();
    for ((scen, progress, mix, workload), per) in &table {
        let medians: Vec<(&str, f64)> =
            policies.iter().filter_map(|p| per.get(p).map(|v| (*p, median(&mut v.clone())))).collect();
        let best = medians.iter().min_by(|a, b| a.1.total_cmp(&b.1)).map_or("-", |b| b.0);
        let cells: Vec<String> = policies
            .iter()
            .map(|p| match medians.iter().find(|m| m.0 == *p) {
                Some((_, s)) if *p == best => format!("**{s:.2}**"),
                Some((_, s)) => format!("{s:.2}"),
                None => "-".into(),
            })
            .collect();
        let _ = writeln!(md, "| {scen} | {progress} | {mix} | {workload} | {} | {best} |", cells.join(" | "));
        let of = |name: &str| medians.iter().find(|m| m.0 == name).map(|m| m.1);
        let best_dcs = medians.iter().filter(|m| raises(m.0)).min_by(|a, b| a.1.total_cmp(&b.1));
        let best_other = medians.iter().filter(|m| !raises(m.0)).min_by(|a, b| a.1.total_cmp(&b.1));
        match (*scen, best_dcs, best_other) {
            ("unloaded", _, _) => {
                for (p, s) in medians.iter().filter(|m| raises(m.0)) {
                    if let Some(c) = of("cfs") {
                        verdicts.push(format!(
                            "- unloaded, {workload}: {p} costs {:+.1} % against cfs (target ≤ 2 %)",
                            (s / c - 1.0) * 100.0
                        ));
                    }
                }
            }
            (_, Some((d, ds)), Some((o, os))) => verdicts.push(format!(
                "- {scen}, {mix}, {workload}: best dcs policy {d} {ds:.2} against best other {o} {os:.2}: {}",
                if ds < os {
                    format!("dcs better by {:.1} %", (1.0 - ds / os) * 100.0)
                } else {
                    "dcs not better".into()
                }
            )),
            _ => {}
        }
    }
    if !verdicts.is_empty() {
        md += "\n";
        md += &verdicts.join("\n");
        md += "\n";
    }
    md += "\n### Arrival to raise applied\n\nFrom the agents' `dcs-raise` decisions (the packet's arrival time in the \
           eBPF program to the raise written), per policy over its cases: raises, median of the cases' medians, worst \
           99th percentile.\n\n| policy | cases | raises | p50 (us) | worst p99 (us) |\n|---|---|---|---|---|\n";
    let mut lat: Latencies = BTreeMap::new();
    for r in runs {
        if let (Some(n), Some(p50), Some(p99)) = (r.dcs_raises, r.dcs_p50_us, r.dcs_p99_us) {
            let case = (r.mix.clone(), r.repetition, r.started_at.to_bits());
            lat.entry(r.policy.as_str()).or_default().insert(case, (n, p50, p99));
        }
    }
    for (policy, cases) in lat {
        let raises: u64 = cases.values().map(|c| c.0).sum();
        let p50 = median(&mut cases.values().map(|c| c.1).collect::<Vec<f64>>());
        let p99 = cases.values().map(|c| c.2).fold(0.0, f64::max);
        let _ = writeln!(md, "| {policy} | {} | {raises} | {p50:.0} | {p99:.0} |", cases.len());
    }
    md
}
