//! The experiment report: per workload × MPL × policy × progress mode, runtime, slowdown against the dedicated
//! run, and communication share, with their spread over repetitions; SVG plots of slowdown and communication
//! share against MPL (one line per policy); a Markdown summary and a self-contained HTML page.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use super::spec::Spec;
use crate::harness::report::{chart, escape, failed_section, html_page, Report};
use crate::harness::spec::RanksIn;
use crate::harness::stats::{
    dedicated_medians, mean, median, mode, paired_means, raises, split_failed, time_of, Paired,
};
use lockstep_store::ExperimentRun;

/// Statistics of one cell of the table.
#[derive(Clone, Debug, Default)]
pub struct Cell {
    /// Jobs measured.
    pub n: usize,
    /// Median time (s).
    pub time: f64,
    /// Median, min and max slowdown against the dedicated median.
    pub slowdown: (f64, f64, f64),
    /// Mean communication share.
    pub comm: Option<f64>,
    /// Mean co-scheduled fraction (the agent's: all ranks on a CPU, of the time one was).
    pub coscheduled: Option<f64>,
    /// Jobs of failed cases, left out of every number of the cell.
    pub failed: usize,
}

/// Key of a cell: mode (MPI progress, `+container` for containerised ranks), policy label, workload, MPL.
type Key = (String, String, String, u32);

/// Aggregates the runs of successful cases (`ok`) into cells, the dedicated runs (each workload alone) their own
/// `dedicated` row at MPL 1, and counts the jobs of failed cases (`failed`) in theirs.
pub fn cells(ok: &[ExperimentRun], failed: &[ExperimentRun]) -> BTreeMap<Key, Cell> {
    let base = dedicated_medians(ok);
    let key = |r: &ExperimentRun| (mode(r), r.policy.clone(), r.workload.clone(), r.mpl);
    let mut groups: BTreeMap<Key, Vec<&ExperimentRun>> = BTreeMap::new();
    for r in ok {
        groups.entry(key(r)).or_default().push(r);
    }
    let mut failures: BTreeMap<Key, usize> = BTreeMap::new();
    for r in failed {
        groups.entry(key(r)).or_default();
        *failures.entry(key(r)).or_default() += 1;
    }
    groups
        .into_iter()
        .map(|(key, rs)| {
            // A job under background load is compared with its dedicated run without it.
            let unloaded_mode = key.0.trim_end_matches("+loaded").to_string();
            let b = base.get(&(unloaded_mode, key.2.clone())).copied().unwrap_or(f64::NAN);
            let mut times: Vec<f64> = rs.iter().map(|r| time_of(r)).collect();
            let mut slow: Vec<f64> = times.iter().map(|t| t / b).collect();
            let comms: Vec<f64> = rs.iter().filter_map(|r| r.comm_ratio).collect();
            let together: Vec<f64> = rs.iter().filter_map(|r| r.coscheduled).collect();
            let cell = Cell {
                n: rs.len(),
                time: median(&mut times),
                slowdown: (
                    median(&mut slow),
                    slow.iter().copied().fold(f64::INFINITY, f64::min),
                    slow.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                ),
                comm: mean_if_any(&comms),
                coscheduled: mean_if_any(&together),
                failed: failures.get(&key).copied().unwrap_or(0),
            };
            (key, cell)
        })
        .collect()
}

/// The mean of `values`; `None` when there are none.
fn mean_if_any(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| mean(values))
}

/// Mean slowdown per (progress, policy, MPL).
pub type CommMeans = BTreeMap<(String, String, u32), f64>;

/// Mean slowdowns of the communication-heavy workloads, per (progress, policy, MPL ≥ 2), over the workloads every
/// policy of that progress and MPL has a slowdown on; and those left out (`lu at MPL 2 (yield)`), where some
/// policy's cases failed (or its baseline did), so that every policy's mean is over the same workloads.
pub fn comm_heavy_means(spec: &Spec, cells: &BTreeMap<Key, Cell>) -> (CommMeans, Vec<String>) {
    let mut values: BTreeMap<((String, u32), String), BTreeMap<String, f64>> = BTreeMap::new();
    for ((progress, policy, workload, mpl), c) in cells {
        if *mpl < 2 || !spec.workloads.get(workload).is_some_and(|w| w.communication) {
            continue;
        }
        let per = values.entry(((progress.clone(), *mpl), workload.clone())).or_default();
        if c.n > 0 && c.slowdown.0.is_finite() {
            per.insert(policy.clone(), c.slowdown.0);
        }
    }
    let Paired { means, left_out } = paired_means(&values);
    let means = means
        .into_iter()
        .flat_map(|((progress, mpl), per)| per.into_iter().map(move |(p, s)| ((progress.clone(), p, mpl), s)))
        .collect();
    let left_out = left_out.into_iter().map(|((progress, mpl), w)| format!("{w} at MPL {mpl} ({progress})")).collect();
    (means, left_out)
}

/// Experiments on the Slurm test cluster: lockstep's best policy against Slurm's gang scheduling (mean slowdown
/// of the communication-heavy jobs), jobs lost per policy (of `all` the runs), and the cross-node skew of the
/// agents' slot switches (of the successful cases' runs, `ok`).
fn slurm_section(all: &[ExperimentRun], ok: &[ExperimentRun], means: &CommMeans) -> String {
    let slurm_gang = |p: &str| p.starts_with(crate::harness::spec::SLURM_GANG);
    let lockstep = |p: &str| p.starts_with("boost/") || p.starts_with("gang/");
    let mut md = "\n## lockstep against Slurm's gang scheduling\n\nMean slowdown of the communication-heavy jobs; \
                  target: lockstep's best policy below Slurm's gang scheduling, and no job lost.\n\n"
        .to_string();
    md +=
        "| progress | MPL | lockstep's best | its mean slowdown | Slurm gang | its mean slowdown | lockstep better |\n";
    md += "|---|---|---|---|---|---|---|\n";
    for ((progress, policy, mpl), s) in means.iter().filter(|((_, p, _), _)| slurm_gang(p)) {
        let best = means
            .iter()
            .filter(|((pr, p, m), _)| pr == progress && m == mpl && lockstep(p))
            .min_by(|a, b| a.1.total_cmp(b.1));
        let Some(((_, best_policy, _), best_s)) = best else { continue };
        let better = if best_s < s { format!("yes ({:+.1} %)", (best_s - s) / s * 100.0) } else { "no".into() };
        let _ = writeln!(md, "| {progress} | {mpl} | {best_policy} | {best_s:.2} | {policy} | {s:.2} | {better} |");
    }
    md += "\n| policy | jobs | verified | lost (failed or unverified) |\n|---|---|---|---|\n";
    let mut per_policy: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for r in all {
        let e = per_policy.entry(r.policy.as_str()).or_default();
        e.0 += 1;
        e.1 += usize::from(r.verified && r.exit_status == Some(0));
    }
    for (policy, (n, ok)) in &per_policy {
        let _ = writeln!(md, "| {policy} | {n} | {ok} | {} |", n - ok);
    }
    md += "\n### Cross-node skew of slot switches\n\nPer case that ran its course (the failed ones left out): the \
           largest gap between the nodes' agents switching the same slot while the case ran.\n\n| policy | cases | \
           median (ms) | worst (ms) |\n|---|---|---|---|\n";
    let mut skews: BTreeMap<&str, BTreeMap<(String, u32), f64>> = BTreeMap::new();
    for r in ok {
        if let Some(s) = r.slot_skew_ms {
            skews.entry(r.policy.as_str()).or_default().insert((format!("{} {}", r.progress, r.mix), r.repetition), s);
        }
    }
    for (policy, cases) in skews {
        let mut v: Vec<f64> = cases.into_values().collect();
        let worst = v.iter().copied().fold(0.0, f64::max);
        let _ = writeln!(md, "| {policy} | {} | {:.3} | {worst:.3} |", v.len(), median(&mut v));
    }
    md
}

/// The table of every cell: one row per (progress, policy, workload, MPL), the dedicated baseline its own rows,
/// a cell whose every job was in a failed case `FAILED`.
fn cells_table(cells: &BTreeMap<Key, Cell>) -> String {
    let mut md = String::new();
    md +=
        "| progress | policy | workload | MPL | jobs | median time (s) | slowdown | spread | comm share | together | \
         verified |\n";
    md += "|---|---|---|---|---|---|---|---|---|---|---|\n";
    for ((progress, policy, workload, mpl), c) in cells {
        let verified =
            if c.failed == 0 { "yes".to_string() } else { format!("FAILED {} of {}", c.failed, c.n + c.failed) };
        if c.n == 0 {
            let _ = writeln!(
                md,
                "| {progress} | {policy} | {workload} | {mpl} | 0 | FAILED | FAILED | - | - | - | {verified} |"
            );
            continue;
        }
        // Without a dedicated run that ran its course there is no slowdown to give.
        let (slowdown, spread) = if c.slowdown.0.is_finite() {
            (format!("{:.2}", c.slowdown.0), format!("{:.2}–{:.2}", c.slowdown.1, c.slowdown.2))
        } else {
            ("- (no baseline)".to_string(), "-".to_string())
        };
        let _ = writeln!(
            md,
            "| {progress} | {policy} | {workload} | {mpl} | {} | {:.2} | {slowdown} | {spread} | {} | {} | {verified} |",
            c.n,
            c.time,
            c.comm.map_or("-".into(), |v| format!("{:.1} %", v * 100.0)),
            c.coscheduled.map_or("-".into(), |v| format!("{:.0} %", v * 100.0)),
        );
    }
    md
}

/// Writes the SVG plots into `dir`; returns the report (summary and page, the page opening on `timeline`, the HTML
/// of the timeline section).
pub fn write(spec: &Spec, all: &[ExperimentRun], dir: &Path, timeline: &str) -> anyhow::Result<Report> {
    std::fs::create_dir_all(dir)?;
    // Every number below is of the cases whose jobs all ran their course; the failed ones are marked.
    let (ok, failed) = split_failed(all);
    let runs = ok.as_slice();
    let cells = cells(runs, &failed);
    let (means, left_out) = comm_heavy_means(spec, &cells);
    let mut md = format!("# {} — {}\n\n", spec.name, spec.description);
    // Where the ranks ran, for the places the spec has other than bare processes.
    let places: Vec<&str> = (spec.ranks_in.iter())
        .filter_map(|r| match r {
            RanksIn::Process => None,
            RanksIn::Container => Some("`+container`: one podman container per rank"),
            RanksIn::Charliecloud => Some("`+charliecloud`: one Charliecloud `ch-run` per rank"),
            RanksIn::Slurm => {
                Some("`+slurm`: one `srun` across the test cluster's nodes, timed from submission to exit")
            }
        })
        .collect();
    let places = if places.is_empty() { String::new() } else { format!("; {}", places.join("; ")) };
    let _ = writeln!(
        md,
        "{} job runs; {} ranks per job; placement `{}`; repetitions {}; MPI progress: `yield` = \
         `mpi_yield_when_idle 1`, `busy` = busy polling{places}. Slowdown = median kernel time / median dedicated \
         time (the workload alone on the node, under cfs: the `dedicated` rows, the MPL-1 baseline of every policy); \
         spread = min–max over jobs and repetitions; comm = PMPI time in MPI / wall time, mean over ranks and \
         jobs; together = the agent's co-scheduled fraction (the share of the time some rank of the job ran in \
         which all its ranks on the node did, measured in the kernel), mean over jobs; verified: `FAILED` counts \
         the jobs of failed cases, left out of every number.\n",
        all.len(),
        spec.ranks,
        spec.placement,
        spec.repetitions
    );
    md += &cells_table(&cells);
    md += "\n## Communication-heavy workloads: mean slowdown, and change against cfs\n\n";
    md += "| progress | MPL | policy | mean slowdown | vs cfs |\n|---|---|---|---|---|\n";
    for ((progress, policy, mpl), s) in &means {
        let cfs = means.get(&(progress.clone(), "cfs".into(), *mpl));
        let change = cfs.map_or("-".into(), |c| format!("{:+.1} %", (s - c) / c * 100.0));
        let _ = writeln!(md, "| {progress} | {mpl} | {policy} | {s:.2} | {change} |");
    }
    if !left_out.is_empty() {
        let _ = writeln!(
            md,
            "\nEvery policy's mean is over the same workloads; left out, a policy failed on them: {}.",
            left_out.join(", ")
        );
    }

    if all.iter().any(|r| r.placement == "slurm") {
        md += &slurm_section(all, runs, &means);
    }
    md += &super::mix_report::section(runs, &failed);
    if runs.iter().any(|r| raises(&r.policy)) {
        md += &super::dcs_report::section(runs);
    }
    md += &super::mix_report::headline(runs, &failed);
    md += &failed_section(&failed);

    let mut html = html_page(&spec.name, &spec.description);
    html += timeline;
    let bars = super::mix_report::bar_chart(runs);
    if !bars.is_empty() {
        std::fs::write(dir.join("slowdown-per-policy.svg"), &bars)?;
        html += &bars;
    }
    let progresses: Vec<String> = {
        let mut p: Vec<String> = cells.keys().map(|k| k.0.clone()).collect();
        p.dedup();
        p
    };
    let workloads: Vec<String> = spec.workloads.keys().cloned().collect();
    for progress in &progresses {
        let _ = write!(html, "<h2>MPI progress: {}</h2>", escape(progress));
        for w in &workloads {
            let mut slow: BTreeMap<String, Vec<(u32, f64)>> = BTreeMap::new();
            let mut comm: BTreeMap<String, Vec<(u32, f64)>> = BTreeMap::new();
            for ((p, policy, workload, mpl), c) in cells.iter().filter(|(_, c)| c.n > 0 && c.slowdown.0.is_finite()) {
                if p == progress && workload == w {
                    slow.entry(policy.clone()).or_default().push((*mpl, c.slowdown.0));
                    if let Some(v) = c.comm {
                        comm.entry(policy.clone()).or_default().push((*mpl, v * 100.0));
                    }
                }
            }
            if slow.is_empty() {
                continue;
            }
            for (kind, data, label) in [("slowdown", &slow, "slowdown (x)"), ("comm", &comm, "time in MPI (%)")] {
                let svg = chart(&format!("{w}: {kind} vs MPL ({progress})"), "MPL (jobs per node)", label, data);
                std::fs::write(dir.join(format!("{w}-{kind}-{progress}.svg")), &svg)?;
                html += &svg;
            }
        }
    }
    html += "<h2>Tables</h2>";
    Ok(Report { summary: md, page: html })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One job's run: `workload` in `mix` under `policy`, timed `time_s`, exiting `exit`.
    fn run(policy: &str, mix: &str, workload: &str, time_s: f64, exit: i32) -> ExperimentRun {
        ExperimentRun {
            policy: policy.into(),
            progress: "yield".into(),
            placement: "process".into(),
            mix: mix.into(),
            mpl: mix.split('+').count() as u32,
            workload: workload.into(),
            job: format!("x-{workload}"),
            repetition: 1,
            time_s: Some(time_s),
            verified: exit == 0,
            exit_status: Some(exit),
            started_at: f64::from(u32::from(mix.contains('+')) + u32::from(policy == "cfs")),
            ..ExperimentRun::default()
        }
    }

    #[test]
    fn the_baseline_is_shown_once_and_a_failed_one_leaves_no_number_made_of_it() {
        let spec = super::super::spec::tests::parse(
            &super::super::spec::tests::GOOD.replace("mpl = [1, 2]", "mixes = [[\"lu\", \"ep\"]]"),
        )
        .unwrap();
        let dir = lockstep_scratch::tempdir().unwrap();
        let runs = [
            run("dedicated", "lu", "lu", 1.0, 0),
            run("dedicated", "ep", "ep", 1.0, 1),
            run("cfs", "lu+ep", "lu", 2.0, 0),
            run("cfs", "lu+ep", "ep", 2.0, 0),
            run("gang/200ms", "lu+ep", "lu", 1.5, 0),
            run("gang/200ms", "lu+ep", "ep", 1.5, 0),
        ];
        let md = write(&spec, &runs, dir.path(), "").unwrap().summary;
        assert!(!md.contains("NaN") && !md.contains("inf"), "{md}");
        // The dedicated runs once, as their own rows; none under cfs or gang at MPL 1.
        assert!(md.contains("| yield | dedicated | lu | 1 | 1 | 1.00 | 1.00 | 1.00–1.00 |"), "{md}");
        assert!(md.contains("| yield | dedicated | ep | 1 | 0 | FAILED | FAILED |"), "{md}");
        assert!(!md.contains("| yield | cfs | lu | 1 |") && !md.contains("| yield | gang/200ms | lu | 1 |"), "{md}");
        assert!(md.contains("| yield | cfs | ep | 2 | 1 | 2.00 | - (no baseline) | - |"), "{md}");
        assert!(md.contains("| yield | cfs | lu | 2 | 1 | 2.00 | 2.00 | 2.00–2.00 |"), "{md}");
        assert!(
            md.contains("## Failed cases")
                && md.contains("| dedicated | yield | process | ep | 1 | x-ep | 1 | no | FAILED |")
        );
    }

    #[test]
    fn every_policy_s_mean_of_the_communication_heavy_workloads_is_over_the_same_workloads() {
        let spec = super::super::spec::tests::parse(
            &(super::super::spec::tests::GOOD.to_string()
                + "[workloads.cg]\ncommand = [\"cg\", \"--class\", \"S\"]\ncommunication = true\n"),
        )
        .unwrap();
        let dir = lockstep_scratch::tempdir().unwrap();
        // gang's case on cg+cg failed: its mean must not be of lu alone against cfs's of lu and cg.
        let runs = [
            run("dedicated", "lu", "lu", 1.0, 0),
            run("dedicated", "cg", "cg", 1.0, 0),
            run("cfs", "lu+lu", "lu", 2.0, 0),
            run("cfs", "cg+cg", "cg", 3.0, 0),
            run("gang/200ms", "lu+lu", "lu", 1.5, 0),
            run("gang/200ms", "cg+cg", "cg", 0.1, 1),
        ];
        let (ok, failed) = split_failed(&runs);
        let (means, left_out) = comm_heavy_means(&spec, &cells(&ok, &failed));
        assert_eq!(means.get(&("yield".into(), "cfs".into(), 2)), Some(&2.0));
        assert_eq!(means.get(&("yield".into(), "gang/200ms".into(), 2)), Some(&1.5));
        assert_eq!(left_out, ["cg at MPL 2 (yield)"]);
        let md = write(&spec, &runs, dir.path(), "").unwrap().summary;
        assert!(md.contains("| yield | 2 | gang/200ms | 1.50 | -25.0 % |"), "{md}");
        assert!(md.contains("left out, a policy failed on them: cg at MPL 2 (yield)."), "{md}");
        // Nothing failed: both workloads count for both.
        let mut fine = runs.to_vec();
        fine[5] = run("gang/200ms", "cg+cg", "cg", 1.5, 0);
        let (means, left_out) = comm_heavy_means(&spec, &cells(&fine, &[]));
        assert_eq!(means.get(&("yield".into(), "cfs".into(), 2)), Some(&2.5));
        assert_eq!(means.get(&("yield".into(), "gang/200ms".into(), 2)), Some(&1.5));
        assert!(left_out.is_empty());
    }

    #[test]
    fn the_slurm_skew_is_of_the_cases_that_ran_their_course() {
        let on_slurm = |policy: &str, rep: u32, skew: f64, exit: i32| ExperimentRun {
            placement: "slurm".into(),
            repetition: rep,
            wall_s: 2.0,
            slot_skew_ms: Some(skew),
            ..run(policy, "lu+lu", "lu", 2.0, exit)
        };
        let all =
            [on_slurm("gang/200ms", 1, 2.0, 0), on_slurm("gang/200ms", 2, 4.0, 0), on_slurm("gang/200ms", 3, 900.0, 1)];
        let (ok, _) = split_failed(&all);
        let md = slurm_section(&all, &ok, &BTreeMap::new());
        assert!(md.contains("| gang/200ms | 2 | 3.000 | 4.000 |"), "{md}");
        assert!(md.contains("| gang/200ms | 3 | 2 | 1 |"), "{md}");
    }
}
