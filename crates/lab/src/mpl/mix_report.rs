//! The report's per-mix view: every mix's mean slowdown (over all its measured jobs) under every policy, the
//! best fixed policy, how `auto` compares with `cfs`, with that best and with the best chosen on held-out
//! repetitions, against the run-to-run noise (docs/experiments.md), and what `auto` chose; a bar chart of
//! the mean slowdown per policy and progress mode; and the summary in a few lines a newcomer can read.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::noise::{held_out_best, Noise, Repetitions};
use crate::harness::stats::{dedicated_medians, mean, mode, paired_means, time_of};
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

/// Slowdowns of the measured jobs of every mix of two or more jobs, per policy and repetition.
type MixSlowdowns = BTreeMap<(String, String), BTreeMap<String, BTreeMap<u32, Vec<f64>>>>;

/// The slowdown (time / dedicated time) of every measured job of every mix of two or more jobs.
fn slowdowns(runs: &[ExperimentRun]) -> MixSlowdowns {
    let base = dedicated_medians(runs);
    let mut acc = MixSlowdowns::new();
    for r in runs.iter().filter(|r| r.policy != "dedicated" && r.mpl >= 2) {
        let m = mode(r);
        let Some(b) = base.get(&(m.trim_end_matches("+loaded").to_string(), r.workload.clone())) else { continue };
        let per = acc.entry((m, r.mix.clone())).or_default().entry(r.policy.clone()).or_default();
        per.entry(r.repetition).or_default().push(time_of(r) / b);
    }
    acc
}

/// Every mix's mean slowdown of its jobs, per policy, over all repetitions.
fn mix_means(all: &MixSlowdowns) -> MixMeans {
    let over_all = |reps: &BTreeMap<u32, Vec<f64>>| mean(&reps.values().flatten().copied().collect::<Vec<_>>());
    all.iter().map(|(k, per)| (k.clone(), per.iter().map(|(p, reps)| (p.clone(), over_all(reps))).collect())).collect()
}

/// Every mix's mean slowdown of its jobs, per policy and repetition.
fn mix_repetitions(all: &MixSlowdowns) -> BTreeMap<(String, String), Repetitions> {
    let each = |reps: &BTreeMap<u32, Vec<f64>>| reps.iter().map(|(r, s)| (*r, mean(s))).collect();
    all.iter().map(|(k, per)| (k.clone(), per.iter().map(|(p, reps)| (p.clone(), each(reps))).collect())).collect()
}

/// Per mode, per policy: the mean over the mixes of their mean slowdowns. Only the mixes every policy of the mode
/// has a result on count (a policy whose case failed on a mix would otherwise be averaged over other mixes than
/// the rest).
fn policy_means(means: &MixMeans) -> BTreeMap<String, BTreeMap<String, f64>> {
    paired_means(means).means
}

/// The mixes of `means` left out of the policies' means: some policy of their mode has no result on them.
fn incomplete(means: &MixMeans) -> Vec<String> {
    paired_means(means).left_out.into_iter().map(|(m, mix)| format!("{mix} ({m})")).collect()
}

/// What `auto` chose in the runs of one mix: each choice with how many jobs got it (`gang ×4, cfs ×1`).
fn auto_chose(runs: &[ExperimentRun], m: &str, mix: &str) -> String {
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for r in runs.iter().filter(|r| is_auto(&r.policy) && r.mix == mix && mode(r) == m) {
        *count.entry(r.auto_chose.as_deref().unwrap_or("?")).or_default() += 1;
    }
    count.iter().map(|(c, n)| format!("{c} ×{n}")).collect::<Vec<_>>().join("; ")
}

/// How `auto` compares with one other policy on one mix: the ratio of their mean slowdowns and two standard
/// errors of its logarithm (from the noise and both policies' repetitions).
#[derive(Clone, Copy)]
struct Against {
    ratio: f64,
    two_se: Option<f64>,
}

impl Against {
    /// The cell: the ratio, marked when over `limit` — `within noise` when within two standard errors of it.
    fn cell(&self, limit: f64) -> String {
        let mark = match self.two_se {
            _ if self.ratio <= limit => "",
            Some(e) if self.ratio.ln() - limit.ln() <= e => " (over, within noise)",
            _ => " (over)",
        };
        format!("{:.3}{mark}", self.ratio)
    }
}

/// The percentage a factor of `exp(x)` adds: 0.2 → "22.1 %".
fn percent(x: f64) -> String {
    format!("{:.1} %", (x.exp() - 1.0) * 100.0)
}

/// The Markdown section of the runs of successful cases (`runs`), the failed cases (`failed`) marked in their
/// cells, or nothing when no mix of two or more jobs ran.
pub fn section(runs: &[ExperimentRun], failed: &[ExperimentRun]) -> String {
    let all = slowdowns(runs);
    let mut means = mix_means(&all);
    // Failed repetitions per (mode, mix) and policy; a mix whose every case failed still gets its row.
    let mut failures: BTreeMap<(String, String), BTreeMap<String, BTreeSet<u32>>> = BTreeMap::new();
    for r in failed.iter().filter(|r| r.policy != "dedicated" && r.mpl >= 2) {
        let key = (mode(r), r.mix.clone());
        failures.entry(key.clone()).or_default().entry(r.policy.clone()).or_default().insert(r.repetition);
        means.entry(key).or_default();
    }
    if means.is_empty() {
        return String::new();
    }
    let repetitions = mix_repetitions(&all);
    let noise = Noise::pooled(repetitions.values());
    let policies = {
        let mut both = runs.to_vec();
        both.extend(failed.iter().cloned());
        policies(&both)
    };
    let auto = policies.iter().find(|p| is_auto(p)).cloned();
    let fixed: Vec<&str> = policies.iter().filter(|p| !is_auto(p)).map(String::as_str).collect();
    let mut md = "\n## Every mix: mean slowdown of its jobs per policy\n\nMean over the mix's measured jobs and \
                  repetitions of time / dedicated time. Best fixed: the lowest of the other policies."
        .to_string();
    if auto.is_some() {
        let _ = write!(
            md,
            " Targets for `auto`: at most {AUTO_VS_CFS:.2} × cfs and {AUTO_VS_BEST:.2} × the best fixed policy; \
             `within noise`: over, by less than two standard errors of the ratio (below the table). Held-out best: \
             for each repetition, the fixed policy with the lowest mean over the other repetitions, measured in that \
             one (what a user who picks a fixed policy from earlier runs gets; the lowest of several noisy means is \
             the luckiest)."
        );
    }
    md += "\n\n| progress | mix |";
    for p in &policies {
        let _ = write!(md, " {p} |");
    }
    md += " best fixed |";
    if auto.is_some() {
        md += " auto / cfs | auto / best | auto / held-out best | auto chose |";
    }
    md += "\n|---|---|";
    md += &"---|".repeat(policies.len() + 1 + if auto.is_some() { 4 } else { 0 });
    md += "\n";
    // Per mix, auto against cfs, the best and the held-out best, for the summary.
    let mut logs: Vec<[Option<Against>; 3]> = Vec::new();
    for (key, per) in &means {
        let (m, mix) = key;
        let _ = write!(md, "| {m} | {mix} |");
        for p in &policies {
            let lost = failures.get(key).and_then(|f| f.get(p)).map_or(0, BTreeSet::len);
            let cell = match (per.get(p), lost) {
                (Some(s), 0) => format!("{s:.2}"),
                (Some(s), n) => format!("{s:.2} (FAILED in {n} rep.)"),
                (None, 0) => "-".into(),
                (None, _) => "FAILED".into(),
            };
            let _ = write!(md, " {cell} |");
        }
        let best = per.iter().filter(|(p, _)| !is_auto(p)).min_by(|a, b| a.1.total_cmp(b.1));
        let _ = write!(md, " {} |", best.map_or("-".into(), |(p, s)| format!("{p} {s:.2}")));
        let Some(a) = &auto else {
            md += "\n";
            continue;
        };
        let Some(reps) = repetitions.get(key) else {
            md += " - | - | - | - |\n";
            continue;
        };
        let count = |p: &str| reps.get(p).map_or(1, BTreeMap::len);
        let against = |other: Option<f64>, n: usize| {
            Some(Against { ratio: per.get(a)? / other?, two_se: noise.map(|e| e.two_se(count(a), n)) })
        };
        let cfs = against(per.get("cfs").copied(), count("cfs"));
        let best = against(best.map(|b| *b.1), best.map_or(1, |b| count(b.0.as_str())));
        let held_out = against(held_out_best(reps, &fixed), fixed.first().map_or(1, |p| count(p)));
        let cell = |x: &Option<Against>, limit| x.as_ref().map_or("-".into(), |x| x.cell(limit));
        let _ = write!(
            md,
            " {} | {} | {} | {} |",
            cell(&cfs, AUTO_VS_CFS),
            cell(&best, AUTO_VS_BEST),
            cell(&held_out, AUTO_VS_BEST),
            auto_chose(runs, m, mix)
        );
        md += "\n";
        logs.push([cfs, best, held_out]);
    }
    if let (Some(noise), true) = (noise, auto.is_some()) {
        let most = repetitions.values().flat_map(BTreeMap::values).map(BTreeMap::len).max().unwrap_or(1);
        md += &summary(noise, most, &logs);
    }
    md
}

/// What `n` repetitions of each policy can resolve, and `auto`'s ratios over all mixes (`logs`: per mix, against
/// cfs, the best and the held-out best).
fn summary(noise: Noise, n: usize, logs: &[[Option<Against>; 3]]) -> String {
    let mut md = format!(
        "\nRun-to-run noise: one repetition's mean slowdown of a mix under a policy strays from the policy's mean on \
         the mix by σ = {:.1} % (pooled over every mix and policy, {} degrees of freedom). A ratio of two policies' \
         means over {n} repetitions each is known within ±{} (2 SE); the targets' 3 % would take {} repetitions of \
         each, 2 % {}.",
        noise.sigma * 100.0,
        noise.df,
        percent(noise.two_se(n, n)),
        noise.repetitions_for(AUTO_VS_BEST),
        noise.repetitions_for(AUTO_VS_CFS),
    );
    md += " Over all mixes (geometric mean of the ratios, ±2 SE of it): ";
    let said: Vec<String> = ["auto / cfs", "auto / best", "auto / held-out best"]
        .iter()
        .enumerate()
        .filter_map(|(i, name)| {
            let each: Vec<(f64, Option<f64>)> =
                logs.iter().filter_map(|l| l[i]).map(|x| (x.ratio.ln(), x.two_se)).collect();
            if each.is_empty() {
                return None;
            }
            let n = each.len() as f64;
            let log = each.iter().map(|e| e.0).sum::<f64>() / n;
            // The mixes' ratios are independent: the mean's variance is the sum of theirs over n².
            let spread = each.iter().map(|e| e.1.map(|s| s * s)).sum::<Option<f64>>().map(|v| v.sqrt() / n);
            Some(format!("{name} {:.3}{}", log.exp(), spread.map_or(String::new(), |s| format!(" ±{}", percent(s)))))
        })
        .collect();
    md += &said.join(", ");
    md += ".\n";
    md
}

/// Bar chart of the mean slowdown per policy (bars) and progress mode (groups); empty when no mix ran.
pub fn bar_chart(runs: &[ExperimentRun]) -> String {
    let means = policy_means(&mix_means(&slowdowns(runs)));
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
            // Each bar with its value above it.
            let tops: Vec<(f64, f64)> = modes
                .iter()
                .enumerate()
                .filter_map(|(i, m)| Some((i as f64 + width * (j as f64 + 0.5), *means[*m].get(policy)?)))
                .collect();
            let bars = tops.iter().map(|&(x0, s)| Rectangle::new([(x0, 0.0), (x0 + width * 0.9, s)], color.filled()));
            let _ = chart.draw_series(bars);
            let style = TextStyle::from(("sans-serif", 12)).pos(Pos::new(HPos::Center, VPos::Bottom));
            let labels =
                tops.iter().map(|&(x0, s)| Text::new(format!("{s:.2}"), (x0 + width * 0.45, s), style.clone()));
            let _ = chart.draw_series(labels);
        }
        crate::harness::plot::legend(&side, &entries, true);
        let _ = whole.present();
    }
    svg
}

/// The summary in a few lines: per policy, how much slower the jobs ran together than alone, per progress mode
/// (the kernel's scheduler first), from the runs of successful cases (`runs`); a policy whose every case of a mode
/// failed (in `failed`) is `FAILED` there. Empty when no mix ran its course or `cfs` had none.
pub fn headline(runs: &[ExperimentRun], failed: &[ExperimentRun]) -> String {
    let means = policy_means(&mix_means(&slowdowns(runs)));
    if means.is_empty() || !means.values().any(|p| p.contains_key("cfs")) {
        return String::new();
    }
    let mut md = "\n## Headline\n\nHow many times slower the jobs ran sharing the node than alone (mean over \
                  jobs and mixes; MPI progress "
        .to_string();
    md += &means.keys().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(" / ");
    md += ")";
    let left_out = incomplete(&mix_means(&slowdowns(runs)));
    if !left_out.is_empty() {
        let _ = write!(md, "; left out, a policy failed on them: {}", left_out.join(", "));
    }
    md += ":\n\n";
    let all: Vec<ExperimentRun> = runs.iter().chain(failed).cloned().collect();
    for p in policies(&all) {
        let who = if p == "cfs" { "the kernel's scheduler (cfs)".to_string() } else { format!("lockstep {p}") };
        let lost = |m: &str| failed.iter().any(|r| r.policy == p && r.mpl >= 2 && mode(r) == m);
        let each: Vec<String> = means
            .iter()
            .map(|(m, per)| match per.get(&p) {
                Some(s) => format!("{s:.2}x"),
                None if lost(m) => "FAILED".into(),
                None => "-".into(),
            })
            .collect();
        let _ = writeln!(md, "- under {who}: {}", each.join(" / "));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One job's run of `workload` (its mix `mix`; `dedicated` alone) under `policy` in repetition `rep`, timed
    /// `time_s`.
    fn run(policy: &str, mix: &str, workload: &str, rep: u32, time_s: f64) -> ExperimentRun {
        ExperimentRun {
            policy: policy.into(),
            progress: "busy".into(),
            placement: "process".into(),
            mix: mix.into(),
            mpl: if policy == "dedicated" { 1 } else { 2 },
            workload: workload.into(),
            repetition: rep,
            time_s: Some(time_s),
            auto_chose: is_auto(policy).then(|| "gang".into()),
            ..ExperimentRun::default()
        }
    }

    #[test]
    fn a_miss_within_two_standard_errors_of_the_noise_is_told_from_a_clear_one() {
        let mut runs = Vec::new();
        // Alone 1 s each; under gang a+a strays ±5 % (log) between its repetitions, nothing else strays.
        for (mix, w, auto) in [("a+a", "a", 1.08), ("b+b", "b", 1.5)] {
            let gang = if w == "a" { [0.05f64.exp(), (-0.05f64).exp()] } else { [1.0, 1.0] };
            for rep in 1..=2 {
                runs.push(run("dedicated", w, w, rep, 1.0));
                runs.push(run("cfs", mix, w, rep, 2.0));
                runs.push(run("gang/200ms", mix, w, rep, gang[rep as usize - 1]));
                runs.push(run("auto/200ms", mix, w, rep, auto));
            }
        }
        let md = section(&runs, &[]);
        // σ = sqrt(0.005 / 6) = 2.9 %; 2 SE of a ratio of two 2-repetition means 5.8 % (log): a+a's 1.079 is 4.6 %
        // (log) over 1.03, b+b's 1.5 is clearly over.
        assert!(md.contains("σ = 2.9 % (pooled over every mix and policy, 6 degrees of freedom)"), "{md}");
        assert!(md.contains("| 0.540 | 1.079 (over, within noise) | 1.079 (over, within noise) | gang ×2 |"), "{md}");
        assert!(md.contains("| 0.750 | 1.500 (over) | 1.500 (over) | gang ×2 |"), "{md}");
        assert!(md.contains("auto / cfs 0.636"), "{md}");
    }

    #[test]
    fn a_failed_case_is_marked_and_kept_out_of_the_means_and_the_headline() {
        let mut runs = Vec::new();
        for rep in 1..=2 {
            for w in ["a", "b"] {
                runs.push(run("dedicated", w, w, rep, 1.0));
            }
            for (mix, w) in [("a+a", "a"), ("b+b", "b")] {
                runs.push(run("cfs", mix, w, rep, 2.0));
                runs.push(run("gang/200ms", mix, w, rep, 1.5));
            }
        }
        // gang's case on b+b in repetition 1 failed: its job ran 0.1 s and did not verify.
        let mut bad = run("gang/200ms", "b+b", "b", 1, 0.1);
        bad.exit_status = Some(1);
        for r in &mut runs {
            r.exit_status = Some(0);
            r.verified = true;
        }
        runs.push(bad);
        let (ok, failed) = crate::harness::stats::split_failed(&runs);
        // The case's other job ran beside it: it goes too.
        assert_eq!(failed.len(), 2);
        let md = section(&ok, &failed);
        assert!(md.contains("| busy | b+b | 2.00 | 1.50 (FAILED in 1 rep.) |"), "{md}");
        assert!(headline(&ok, &failed).contains("- under lockstep gang/200ms: 1.50x\n"), "{}", headline(&ok, &failed));
        // Every case of gang failed on b+b: b+b is left out of both policies' means, and said to be.
        let (ok, failed): (Vec<_>, Vec<_>) =
            runs.iter().cloned().partition(|r| !(r.policy == "gang/200ms" && r.mix == "b+b"));
        let md = section(&ok, &failed);
        assert!(md.contains("| busy | b+b | 2.00 | FAILED |"), "{md}");
        let head = headline(&ok, &failed);
        assert!(head.contains("left out, a policy failed on them: b+b (busy)"), "{head}");
        assert!(head.contains("under the kernel's scheduler (cfs): 2.00x") && head.contains("1.50x"), "{head}");
        // Nothing ran its course: no headline at all.
        // gang failed on every mix: FAILED in its line, its mixes' other results kept.
        let (ok, failed): (Vec<_>, Vec<_>) = runs.iter().cloned().partition(|r| r.policy != "gang/200ms");
        let head = headline(&ok, &failed);
        assert!(head.contains("- under lockstep gang/200ms: FAILED\n") && head.contains("(cfs): 2.00x"), "{head}");
        assert!(headline(&[], &failed).is_empty());
        assert!(bar_chart(&[]).is_empty());
    }
}
