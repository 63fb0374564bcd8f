//! The report's per-mix view: every mix's mean slowdown (over all its measured jobs) under every policy, the
//! best fixed policy, how `auto` compares with `cfs` and with that best, and what `auto` chose; a bar chart of
//! the mean slowdown per policy and progress mode; and the summary in a few lines a newcomer can read.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use plotters::prelude::*;

use crate::harness::stats::{dedicated_medians, mode, time_of};
use lockstep_store::ExperimentRun;

/// Mean slowdown per (mode, mix), per policy label.
type MixMeans = BTreeMap<(String, String), BTreeMap<String, f64>>;

/// `auto` may be this much slower than `cfs` on a mix (issue 20: never worse than doing nothing).
const AUTO_VS_CFS: f64 = 1.02;

/// … and this much slower than the best fixed policy.
const AUTO_VS_BEST: f64 = 1.03;

/// Whether a policy label is `auto`'s.
fn is_auto(label: &str) -> bool {
    label == "auto" || label.starts_with("auto/")
}

/// The policy labels of `runs` in the order the report shows them: `cfs` first, `auto` last.
fn policies(runs: &[ExperimentRun]) -> Vec<String> {
    let mut p: Vec<String> = runs.iter().filter(|r| r.policy != "dedicated").map(|r| r.policy.clone()).collect();
    p.sort_by_key(|l| (l != "cfs", is_auto(l), l.clone()));
    p.dedup();
    p
}

/// Mean slowdown of the measured jobs of every mix of two or more jobs, per policy.
fn mix_means(runs: &[ExperimentRun]) -> MixMeans {
    let base = dedicated_medians(runs);
    let mut acc: BTreeMap<(String, String), BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.policy != "dedicated" && r.mpl >= 2) {
        let m = mode(r);
        let Some(b) = base.get(&(m.trim_end_matches("+loaded").to_string(), r.workload.clone())) else { continue };
        acc.entry((m, r.mix.clone())).or_default().entry(r.policy.clone()).or_default().push(time_of(r) / b);
    }
    acc.into_iter()
        .map(|(k, per)| (k, per.into_iter().map(|(p, v)| (p, v.iter().sum::<f64>() / v.len() as f64)).collect()))
        .collect()
}

/// Per mode, per policy: the mean over the mixes of their mean slowdowns.
fn policy_means(means: &MixMeans) -> BTreeMap<String, BTreeMap<String, f64>> {
    let mut acc: BTreeMap<String, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    for ((m, _), per) in means {
        for (p, s) in per {
            acc.entry(m.clone()).or_default().entry(p.clone()).or_default().push(*s);
        }
    }
    acc.into_iter()
        .map(|(m, per)| (m, per.into_iter().map(|(p, v)| (p, v.iter().sum::<f64>() / v.len() as f64)).collect()))
        .collect()
}

/// What `auto` chose in the runs of one mix: each choice with how many jobs got it (`gang ×4, cfs ×1`).
fn auto_chose(runs: &[ExperimentRun], m: &str, mix: &str) -> String {
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for r in runs.iter().filter(|r| is_auto(&r.policy) && r.mix == mix && mode(r) == m) {
        *count.entry(r.auto_chose.as_deref().unwrap_or("?")).or_default() += 1;
    }
    count.iter().map(|(c, n)| format!("{c} ×{n}")).collect::<Vec<_>>().join("; ")
}

/// The Markdown section, or nothing when no mix of two or more jobs ran.
pub fn section(runs: &[ExperimentRun]) -> String {
    let means = mix_means(runs);
    if means.is_empty() {
        return String::new();
    }
    let policies = policies(runs);
    let auto = policies.iter().find(|p| is_auto(p)).cloned();
    let mut md = "\n## Every mix: mean slowdown of its jobs per policy\n\nMean over the mix's measured jobs and \
                  repetitions of time / dedicated time. Best fixed: the lowest of the other policies."
        .to_string();
    if auto.is_some() {
        let _ = write!(
            md,
            " Targets for `auto`: at most {AUTO_VS_CFS:.2} × cfs and {AUTO_VS_BEST:.2} × the best fixed policy."
        );
    }
    md += "\n\n| progress | mix |";
    for p in &policies {
        let _ = write!(md, " {p} |");
    }
    md += " best fixed |";
    if auto.is_some() {
        md += " auto / cfs | auto / best | auto chose |";
    }
    md += "\n|---|---|";
    md += &"---|".repeat(policies.len() + 1 + if auto.is_some() { 3 } else { 0 });
    md += "\n";
    for ((m, mix), per) in &means {
        let _ = write!(md, "| {m} | {mix} |");
        for p in &policies {
            let _ = write!(md, " {} |", per.get(p).map_or("-".into(), |s| format!("{s:.2}")));
        }
        let best = per.iter().filter(|(p, _)| !is_auto(p)).min_by(|a, b| a.1.total_cmp(b.1));
        let _ = write!(md, " {} |", best.map_or("-".into(), |(p, s)| format!("{p} {s:.2}")));
        if let Some(a) = &auto {
            let ratio = |x: Option<f64>, limit: f64| match (per.get(a), x) {
                (Some(a), Some(x)) => {
                    let r = a / x;
                    format!("{r:.3}{}", if r <= limit { "" } else { " (over)" })
                }
                _ => "-".into(),
            };
            let _ = write!(
                md,
                " {} | {} | {} |",
                ratio(per.get("cfs").copied(), AUTO_VS_CFS),
                ratio(best.map(|b| *b.1), AUTO_VS_BEST),
                auto_chose(runs, m, mix)
            );
        }
        md += "\n";
    }
    md
}

/// Bar chart of the mean slowdown per policy (bars) and progress mode (groups); empty when no mix ran.
pub fn bar_chart(runs: &[ExperimentRun]) -> String {
    let means = policy_means(&mix_means(runs));
    let policies = policies(runs);
    if means.is_empty() {
        return String::new();
    }
    let modes: Vec<&String> = means.keys().collect();
    let top = means.values().flat_map(|p| p.values()).copied().fold(0.0, f64::max) * 1.1 + 1e-9;
    let width = 1.0 / (policies.len() as f64 + 1.0);
    let mut svg = String::new();
    {
        let whole =
            SVGBackend::with_string(&mut svg, (720 + crate::harness::plot::LEGEND_WIDTH, 360)).into_drawing_area();
        let _ = whole.fill(&WHITE);
        let (root, side) = whole.split_horizontally(720);
        let Ok(mut chart) = ChartBuilder::on(&root)
            .caption("Mean slowdown of jobs sharing the node, per policy", ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(50)
            .build_cartesian_2d(0.0..modes.len() as f64, 0.0..top)
        else {
            return String::new();
        };
        let names: Vec<String> = modes.iter().map(|m| (*m).clone()).collect();
        let _ = chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(modes.len() * 2 + 1)
            .x_label_formatter(&|x| {
                let i = x.floor() as usize;
                if (x - x.floor() - 0.5).abs() < 1e-6 && i < names.len() {
                    format!("MPI progress: {}", names[i])
                } else {
                    String::new()
                }
            })
            .y_desc("mean slowdown (x, 1 = alone)")
            .draw();
        let mut entries = Vec::new();
        for (j, policy) in policies.iter().enumerate() {
            let color = crate::harness::plot::series_colour(policy);
            entries.push((policy.clone(), color));
            let bars: Vec<Rectangle<(f64, f64)>> = modes
                .iter()
                .enumerate()
                .filter_map(|(i, m)| {
                    let s = *means[*m].get(policy)?;
                    let x0 = i as f64 + width * (j as f64 + 0.5);
                    Some(Rectangle::new([(x0, 0.0), (x0 + width * 0.9, s)], color.filled()))
                })
                .collect();
            let _ = chart.draw_series(bars);
        }
        crate::harness::plot::legend(&side, &entries, true);
        let _ = whole.present();
    }
    svg
}

/// The summary in a few lines: per policy, how much slower the jobs ran together than alone, per progress mode
/// (the kernel's scheduler first); empty when no mix ran or `cfs` did not.
pub fn headline(runs: &[ExperimentRun]) -> String {
    let means = policy_means(&mix_means(runs));
    if means.is_empty() || !means.values().any(|p| p.contains_key("cfs")) {
        return String::new();
    }
    let mut md = "\n## Headline\n\nHow many times slower the jobs ran sharing the node than alone (mean over \
                  jobs and mixes; MPI progress "
        .to_string();
    md += &means.keys().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(" / ");
    md += "):\n\n";
    for p in policies(runs) {
        let who = if p == "cfs" { "the kernel's scheduler (cfs)".to_string() } else { format!("lockstep {p}") };
        let each: Vec<String> =
            means.values().map(|per| per.get(&p).map_or("-".into(), |s| format!("{s:.2}x"))).collect();
        let _ = writeln!(md, "- under {who}: {}", each.join(" / "));
    }
    md
}
