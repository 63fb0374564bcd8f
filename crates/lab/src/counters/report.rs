//! The counters report, shaped like the counters paper's table: per workload the uncounted time and, per configuration,
//! the overhead against it with a 95 % confidence interval (Welch), the same for the sum over workloads, the
//! counting tool's CPU time and memory, and whether each target is met.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::spec::{configs, CountersSpec};
use crate::harness::report::{failed_section, html_page, Report};
use crate::harness::stats::{failed, mean, split_failed};
use lockstep_store::ExperimentRun;

/// Mean and sample variance.
fn mean_var(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = if v.len() > 1 { v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0) } else { f64::NAN };
    (mean, var)
}

/// Two-sided 97.5 % quantile of Student's t with `df` degrees of freedom (table to 30, then the normal).
fn t975(df: f64) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ];
    let d = df.floor().max(1.0) as usize;
    T.get(d - 1).copied().unwrap_or(1.96)
}

/// Overhead of `counted` over `base` in percent, and the half-width of its 95 % confidence interval (Welch's
/// interval on the difference of means, relative to the baseline mean).
pub fn overhead(base: &[f64], counted: &[f64]) -> Option<(f64, f64)> {
    if base.len() < 2 || counted.len() < 2 {
        return None;
    }
    let (mb, vb) = mean_var(base);
    let (mc, vc) = mean_var(counted);
    let (sb, sc) = (vb / base.len() as f64, vc / counted.len() as f64);
    let se = (sb + sc).sqrt();
    let df = if se > 0.0 {
        (sb + sc).powi(2) / (sb.powi(2) / (base.len() as f64 - 1.0) + sc.powi(2) / (counted.len() as f64 - 1.0))
    } else {
        1e9
    };
    Some(((mc - mb) / mb * 100.0, t975(df) * se / mb * 100.0))
}

fn cell(o: Option<(f64, f64)>) -> String {
    o.map_or("-".into(), |(p, h)| format!("{p:+.2} % ± {h:.2}"))
}

/// Times per configuration label, per workload.
type PerLabel<'a, T> = BTreeMap<&'a str, BTreeMap<&'a str, Vec<T>>>;

/// The runs of a session, grouped for the tables.
struct Tally<'a> {
    workloads: Vec<String>,
    /// Kernel times and wall times over repetitions.
    times: PerLabel<'a, f64>,
    walls: PerLabel<'a, f64>,
    /// Per label and repetition: the sum of kernel times over workloads, and how many workloads it covers.
    totals: BTreeMap<&'a str, BTreeMap<u32, (f64, usize)>>,
    /// Per label: the counting tool's CPU seconds, the job's wall time and the tool's peak RSS, per run.
    cost: BTreeMap<&'a str, Vec<(f64, f64, u64)>>,
    /// Runs left out (failed or unverified).
    failed: usize,
}

impl<'a> Tally<'a> {
    fn of(spec: &CountersSpec, runs: &'a [ExperimentRun]) -> Self {
        let mut tally = Tally {
            workloads: spec.workloads.keys().cloned().collect(),
            times: BTreeMap::new(),
            walls: BTreeMap::new(),
            totals: BTreeMap::new(),
            cost: BTreeMap::new(),
            failed: 0,
        };
        for r in runs {
            let Some(t) = r.time_s.filter(|_| !failed(r)) else {
                tally.failed += 1;
                continue;
            };
            tally.times.entry(&r.policy).or_default().entry(&r.workload).or_default().push(t);
            tally.walls.entry(&r.policy).or_default().entry(&r.workload).or_default().push(r.wall_s);
            let total = tally.totals.entry(&r.policy).or_default().entry(r.repetition).or_default();
            total.0 += t;
            total.1 += 1;
            if let (Some(c), Some(m)) = (r.tool_cpu_s, r.tool_rss_bytes) {
                tally.cost.entry(&r.policy).or_default().push((c, r.wall_s, m));
            }
        }
        tally
    }

    /// The per-repetition totals of `label`; a repetition counts only when every workload verified in it.
    fn total_of(&self, label: &str) -> Vec<f64> {
        self.totals.get(label).map_or_else(Vec::new, |m| {
            m.values().filter(|(_, n)| *n == self.workloads.len()).map(|(t, _)| *t).collect()
        })
    }
}

/// The values of `label` for workload `w` in a table.
fn series(m: &PerLabel<'_, f64>, label: &str, w: &str) -> Vec<f64> {
    m.get(label).and_then(|x| x.get(w)).cloned().unwrap_or_default()
}

/// `yes` / `no` for a comparison that could be made, `-` otherwise.
fn yes_no(b: Option<bool>) -> &'static str {
    match b {
        Some(true) => "yes",
        Some(false) => "no",
        None => "-",
    }
}

/// The report: its summary and page (it has no plots).
pub fn build(spec: &CountersSpec, runs: &[ExperimentRun]) -> anyhow::Result<Report> {
    let labels: Vec<String> = configs(spec).iter().map(|c| c.label(spec)).collect();
    let tally = Tally::of(spec, runs);
    let mut md = format!("# {} — {}\n\n", spec.name, spec.description);
    let _ = writeln!(
        md,
        "{} job runs ({} failed or unverified, left out); {} ranks per job; {} repetitions, every repetition's \
         cases in a random order (seed {}). Time = the kernels' own timed sections, summed over the runs of a job. \
         Overhead = mean counted time / mean uncounted time − 1, with the half-width of a 95 % confidence interval \
         (Welch). `lockstep` = the node agent counting the job from its start (per-cgroup counters on the job's PUs); \
         `perf` = one `perf stat -p` per rank, attached as the rank appears (the comparison the counters experiment \
         makes). Intervals: `none` = counts read once at the end. Event sets: {}.\n",
        runs.len(),
        tally.failed,
        spec.ranks,
        spec.repetitions,
        spec.seed,
        spec.event_sets
            .iter()
            .map(|(n, e)| format!("*{n}* ({} events)", e.split(',').count()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    uncounted_section(&mut md, &tally);
    overhead_sections(&mut md, &tally, &labels);
    cost_section(&mut md, &tally, &labels);
    targets_section(&mut md, spec, &tally);
    md += &failed_section(&split_failed(runs).1);
    Ok(Report { summary: md, page: html_page(&spec.name, &spec.description) })
}

/// The uncounted times: the baseline every overhead is measured against.
fn uncounted_section(md: &mut String, tally: &Tally<'_>) {
    let workloads = &tally.workloads;
    *md += "## Uncounted time (s), mean over repetitions\n\n| | ";
    *md += &workloads.join(" | ");
    *md += " | sum |\n|---|";
    *md += &"---|".repeat(workloads.len() + 1);
    *md += "\n| none |";
    for w in workloads {
        let _ = write!(md, " {:.2} |", mean(&series(&tally.times, "none", w)));
    }
    let _ = writeln!(md, " {:.2} |\n", mean(&tally.total_of("none")));
}

/// Overhead on kernel time and on wall time, per workload and (kernel time) in total.
fn overhead_sections(md: &mut String, tally: &Tally<'_>, labels: &[String]) {
    let workloads = &tally.workloads;
    let base_total = tally.total_of("none");
    for (title, table, with_total) in
        [("kernel time", &tally.times, true), ("wall time (launch to exit)", &tally.walls, false)]
    {
        let _ = writeln!(md, "## Overhead on {title}, per workload and in total\n");
        *md += "| configuration | ";
        *md += &workloads.join(" | ");
        *md += " | total |\n|---|";
        *md += &"---|".repeat(workloads.len() + 1);
        *md += "\n";
        for label in labels.iter().skip(1) {
            let _ = write!(md, "| {label} |");
            for w in workloads {
                let _ = write!(md, " {} |", cell(overhead(&series(table, "none", w), &series(table, label, w))));
            }
            let total = if with_total { cell(overhead(&base_total, &tally.total_of(label))) } else { "-".into() };
            let _ = writeln!(md, " {total} |");
        }
        *md += "\n";
    }
}

/// What the counting tool itself cost: CPU time and memory.
fn cost_section(md: &mut String, tally: &Tally<'_>, labels: &[String]) {
    *md += "## Cost of the counting tool, mean per job\n\n";
    *md += "| configuration | CPU time (s) | CPU time / job wall time | peak RSS (MiB) |\n|---|---|---|---|\n";
    for label in labels {
        if let Some(c) = tally.cost.get(label.as_str()).filter(|c| !c.is_empty()) {
            let n = c.len() as f64;
            let cpu = c.iter().map(|x| x.0).sum::<f64>() / n;
            let share = c.iter().map(|x| x.0 / x.1).sum::<f64>() / n * 100.0;
            let rss = c.iter().map(|x| x.2 as f64).sum::<f64>() / n / f64::from(1 << 20);
            let _ = writeln!(md, "| {label} | {cpu:.3} | {share:.3} % | {rss:.1} |");
        }
    }
    *md += "\n(`none` and `perf` rows: the agent runs but counts nothing; for `perf` the row is the sum over its \
            `perf stat` processes.)\n\n";
}

/// Per event set and interval: lockstep's and perf's total overhead against the spec's target.
fn targets_section(md: &mut String, spec: &CountersSpec, tally: &Tally<'_>) {
    let base_total = tally.total_of("none");
    *md += "## Targets (total kernel-time overhead)\n\n";
    *md += "| event set | interval | lockstep | perf | target | lockstep within target | lockstep ≤ perf |\n\
            |---|---|---|---|---|---|---|\n";
    for (set, (name, _)) in spec.event_sets.iter().enumerate() {
        for &interval in &spec.intervals {
            let label = |tool: &str| format!("{tool}/{name}/{}", super::spec::interval_text(interval));
            let ours = overhead(&base_total, &tally.total_of(&label("lockstep")));
            let theirs = overhead(&base_total, &tally.total_of(&label("perf")));
            let target = spec.targets[set];
            let within = yes_no(ours.zip(target).map(|((p, _), t)| p <= t));
            let below = yes_no(ours.zip(theirs).map(|((a, _), (b, _))| a <= b));
            let _ = writeln!(
                md,
                "| {name} | {} | {} | {} | {} | {within} | {below} |",
                super::spec::interval_text(interval),
                cell(ours),
                cell(theirs),
                target.map_or("-".into(), |t| format!("≤ {t} %"))
            );
        }
    }
    *md += "\nA target is met by the point estimate; where the confidence interval is wider than the target, this \
            machine's run-to-run noise is larger than the effect and more repetitions are needed to resolve it.\n";
}

#[cfg(test)]
mod tests {
    use super::overhead;

    #[test]
    fn overhead_and_welch_interval() {
        // Equal variances, 4 samples each: difference 1 on a mean of 100; s² = 4/3 each, se = √(2·s²/4),
        // df = 6, t = 2.447.
        let base = vec![99.0, 101.0, 99.0, 101.0];
        let counted: Vec<f64> = base.iter().map(|x| x + 1.0).collect();
        let (p, h) = overhead(&base, &counted).unwrap();
        assert!((p - 1.0).abs() < 1e-9, "{p}");
        let s2 = 4.0 / 3.0;
        let expected = 2.447 * (2.0 * s2 / 4.0_f64).sqrt();
        assert!((h - expected).abs() < 1e-9, "{h} vs {expected}");
        assert!(overhead(&[1.0], &counted).is_none());
    }
}
