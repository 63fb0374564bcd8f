//! The report of a paired comparison (super::ab): for each mix and progress mode, how long every policy makes the
//! jobs take against the first of `[[policies]]`, from the rounds' paired windows, with its confidence interval;
//! the checks of the method (a policy against itself, a known handicap); and the headline.
//!
//! A job's progress in a window is its rate of MPI calls where it communicates and its ranks publish the count, its
//! co-scheduled rank-seconds where it communicates without the profiler, and its CPU seconds otherwise (as `auto`
//! reads them); by whole runs (`measure = "runs"`), its runs per second of their wall time. A job's rate under a
//! policy is its progress summed over the policy's windows over their seconds summed; the estimate is the geometric
//! mean over the measured jobs of (rate under the first policy / rate under the other), the other policy's time
//! relative to the first's; its interval is the delete-one jackknife's over the rounds (crate::harness::paired).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use super::ab::{Comparison, Window, COMPARISON, HELD, WINDOW};
use super::ab_held::{held_in, Held};
use super::spec::{Ab, By, Spec};
use crate::harness::paired::Estimate;
use crate::harness::records;
use crate::harness::report::{html_page, some_runs, Report};
use lockstep_store::Store;

/// What a job's progress is read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Measure {
    Calls,
    Together,
    Cpu,
    /// Whole runs (`[ab] measure = "runs"`): its rate is runs per second of their wall time.
    Runs,
}

impl Measure {
    /// Its amount in `d`.
    fn of(self, d: &super::ab::Done) -> f64 {
        match self {
            Self::Calls => d.calls as f64,
            Self::Together => d.together_s,
            Self::Cpu => d.cpu_s,
            Self::Runs => f64::from(d.whole),
        }
    }

    /// Its name in the report.
    fn name(self) -> &'static str {
        match self {
            Self::Calls => "MPI calls",
            Self::Together => "co-scheduled time",
            Self::Cpu => "CPU time",
            Self::Runs => "whole runs",
        }
    }
}

/// One comparison's windows, by round and policy.
struct Rounds<'a> {
    by_round: BTreeMap<u32, BTreeMap<usize, &'a Window>>,
    /// Per job of the mix: what its progress is read from; `None` for background load.
    measures: Vec<Option<Measure>>,
}

impl<'a> Rounds<'a> {
    fn new(spec: &Spec, windows: &[&'a Window]) -> Self {
        let mut by_round: BTreeMap<u32, BTreeMap<usize, &Window>> = BTreeMap::new();
        for w in windows {
            by_round.entry(w.round).or_default().insert(w.arm, w);
        }
        let jobs = windows.first().map_or(0, |w| w.jobs.len());
        let measures = (0..jobs)
            .map(|j| {
                let workload = &spec.workloads[&windows[0].jobs[j].workload];
                if workload.background {
                    return None;
                }
                let chosen = match (workload.communication, workload.profiler) {
                    _ if spec.ab.as_ref().is_some_and(|ab| ab.by == By::Runs) => Measure::Runs,
                    (true, true) => Measure::Calls,
                    (true, false) if spec.ranks > 1 => Measure::Together,
                    _ => Measure::Cpu,
                };
                // A job whose chosen measure saw nothing (its ranks never published) is read by its CPU time.
                // (Whole runs are what was asked for: none is a measurement too, of runs too long for the windows.)
                let seen = chosen == Measure::Runs || windows.iter().any(|w| chosen.of(&w.jobs[j]) > 0.0);
                Some(if seen { chosen } else { Measure::Cpu })
            })
            .collect();
        Self { by_round, measures }
    }

    /// Job `j`'s progress in window `w` and the seconds it is over, read by `by` (its own measure when `None`);
    /// `None` for background load.
    fn progress(&self, w: &Window, j: usize, by: Option<Measure>) -> Option<(f64, f64)> {
        let measure = self.measures[j].map(|m| by.unwrap_or(m))?;
        let d = &w.jobs[j];
        Some((measure.of(d), if measure == Measure::Runs { d.whole_s } else { w.seconds }))
    }

    /// Policy `b`'s time relative to policy `a`'s, over the rounds that have both (of the jobs `only`, all when
    /// `None`; read by `by`, each by its own measure when `None`): the geometric mean over the jobs of a job's
    /// rate under `a` over its rate under `b`, each rate its progress summed over the rounds' windows of the
    /// policy over their seconds summed, so that a window counts by its length and what a job did in it, not as
    /// one ratio as much as any other (a window in which a job barely moved, starting again or between bursts,
    /// would give a ratio far from all others). Its interval is the jackknife's over the rounds. A round counts
    /// where both windows have time to read every job's rate over (for whole runs, a run of each job in each);
    /// `None` with fewer than two such rounds, or where a job made no progress under a policy in all of them but
    /// one (leaving that one out leaves no rate to compare).
    fn estimate(
        &self,
        a: usize,
        b: usize,
        only: Option<usize>,
        by: Option<Measure>,
        confidence: f64,
    ) -> Option<Estimate> {
        let jobs: Vec<usize> =
            (0..self.measures.len()).filter(|&j| self.measures[j].is_some() && only.is_none_or(|o| o == j)).collect();
        if jobs.is_empty() {
            return None;
        }
        // Per round, per job: its progress and seconds under a, then under b.
        let rounds: Vec<Vec<[(f64, f64); 2]>> = self
            .by_round
            .values()
            .filter_map(|arms| {
                let (wa, wb) = (arms.get(&a)?, arms.get(&b)?);
                let each: Option<Vec<[(f64, f64); 2]>> =
                    jobs.iter().map(|&j| Some([self.progress(wa, j, by)?, self.progress(wb, j, by)?])).collect();
                each.filter(|e| e.iter().flatten().all(|&(_, s)| s > 0.0))
            })
            .collect();
        // Per job, its progress and seconds under a and under b summed over every round, once; a round left out
        // is taken off them.
        let mut total = vec![[(0.0, 0.0); 2]; jobs.len()];
        for r in &rounds {
            for (t, each) in total.iter_mut().zip(r) {
                for arm in 0..2 {
                    t[arm] = (t[arm].0 + each[arm].0, t[arm].1 + each[arm].1);
                }
            }
        }
        let log_of = |skip: Option<usize>| {
            let logs: Option<Vec<f64>> = (0..jobs.len())
                .map(|j| {
                    let sum = |arm: usize| {
                        let (p, s) = total[j][arm];
                        skip.map_or((p, s), |i| (p - rounds[i][j][arm].0, s - rounds[i][j][arm].1))
                    };
                    let ((pa, sa), (pb, sb)) = (sum(0), sum(1));
                    (pa > 0.0 && pb > 0.0).then(|| ((pa / sa) / (pb / sb)).ln())
                })
                .collect();
            logs.map(|l| l.iter().sum::<f64>() / l.len() as f64)
        };
        Estimate::jackknifed(rounds.len(), confidence, log_of)
    }

    /// The share of the CPUs' time that went to other work than the mix's jobs in the windows of policies `a` and
    /// `b`, in the rounds that have both (weighed by their counted seconds; windows that did not measure it left
    /// out); `None` where none did.
    fn other_work(&self, a: usize, b: usize) -> Option<f64> {
        let (mut other, mut seconds) = (0.0, 0.0);
        let both = self.by_round.values().filter_map(|arms| Some([arms.get(&a)?, arms.get(&b)?]));
        for w in both.flatten() {
            if let Some(o) = w.other_work {
                other += o * w.seconds;
                seconds += w.seconds;
            }
        }
        (seconds > 0.0).then(|| other / seconds)
    }
}

/// How far from its size a handicap may come out and still be found, relative to its size. The jobs' processes
/// are stopped exactly that share of the time, but the node's own work (the agent, the harness reading progress
/// and sending the signals, anything beside) need not fall in the stops in that share: where more of it runs
/// while the jobs do, they lose a little more than the handicap (a fresh-clone `make test` measured 1.264
/// [1.253, 1.275] for 1.250), where more runs in the stops, a little less.
const HANDICAP_TOLERANCE: f64 = 0.02;

/// The most other work (than the mix's jobs) on their CPUs, as a share of the CPUs' time, with which a handicap's
/// check is made: the handicap's size is exact only where the jobs own their CPUs. Work that wants the CPUs takes
/// them while the jobs are stopped, and the kernel gives the jobs time back from it once they resume (its fairness
/// to what waited), so that the handicap costs them less than its size: two CPU burners beside a check on 2 CPUs
/// took half their time, and the 20 % handicap came out at 1.06–1.12 in CPU time for 1.25. Other work that takes
/// no more than the check's tolerance of the CPUs wants no more than that: it can move the handicap's cost by
/// about its share at most, which the tolerance allows for. A quiet machine's other work (2 vCPUs: the agent's
/// and this harness's) took 0.3–1.5 % of them per window. The bound assumes the jobs' ranks fill the CPUs they
/// may use, as the check's do: other work on CPUs the jobs leave idle would count against it too.
const MOST_OTHER_WORK: f64 = HANDICAP_TOLERANCE;

/// The check of the method that policy `arm`, the first policy again (`e` its estimate against it), makes in
/// comparison `what`: against itself (A/A) it must come out at 1; with a handicap, at the handicap's size (its
/// interval within [`HANDICAP_TOLERANCE`] of it) and not at 1. A handicap's size is exact in CPU time (every
/// process of every job is stopped that share of the time), so that its check reads every job by its CPU time: a
/// communicating job's calls lose more than that (its ranks resume out of step), which is the handicap's doing,
/// not the measurement's. Where other work took more than [`MOST_OTHER_WORK`] of their CPUs' time, the
/// handicap's size is not known, and its check is not made (and says so). `None` where it cannot be made.
fn check(rounds: &Rounds<'_>, ab: &Ab, arm: usize, e: Estimate, what: &str) -> Option<String> {
    let (base, a) = (&ab.arms[0], &ab.arms[arm]);
    let expected = (1.0 - base.handicap) / (1.0 - a.handicap);
    if (expected - 1.0).abs() < 1e-9 {
        let verdict = if e.contains(1.0) { "found" } else { "MISSED" };
        return Some(format!(
            "- A/A: `{}` against `{}` ({what}): {}, expected 1.000: **{verdict}**",
            a.label,
            base.label,
            e.show()
        ));
    }
    // Compared as shown, so that the line never says a share over the bound is within it.
    let shown = |share: f64| (share * 1000.0).round() / 10.0;
    if let Some(other) = rounds.other_work(0, arm).map(shown).filter(|&o| o > shown(MOST_OTHER_WORK)) {
        return Some(format!(
            "- handicap: `{}` against `{}` ({what}): **not made**: other work than the jobs took {other:.1} % of \
             their CPUs' time (at most {:.1} % for its size to be known; {} by each job's own measure)",
            a.label,
            base.label,
            shown(MOST_OTHER_WORK),
            e.show()
        ));
    }
    let cpu = rounds.estimate(0, arm, None, Some(Measure::Cpu), ab.confidence)?;
    let verdict = if at_size(&cpu, expected) { "found" } else { "MISSED" };
    Some(format!(
        "- handicap: `{}` against `{}` ({what}): {} in CPU time, expected {expected:.3} (within {:.0} %), and not \
         1: **{verdict}** ({} by each job's own measure)",
        a.label,
        base.label,
        cpu.show(),
        HANDICAP_TOLERANCE * 100.0,
        e.show()
    ))
}

/// Whether a handicap's estimate `cpu` finds it at its size `expected`: its interval reaches within
/// [`HANDICAP_TOLERANCE`] of it, and does not hold 1.
fn at_size(cpu: &Estimate, expected: f64) -> bool {
    let near = cpu.low <= expected * (1.0 + HANDICAP_TOLERANCE) && cpu.high >= expected * (1.0 - HANDICAP_TOLERANCE);
    near && !cpu.contains(1.0)
}

/// The report of the paired comparison of session `session` (its latest when `None`); `dir` is where it goes.
pub fn write(spec: &Spec, ab: &Ab, store: &Store, dir: &Path, session: Option<f64>) -> anyhow::Result<Report> {
    let comparisons: Vec<(f64, Comparison)> =
        some_runs(&spec.name, session, records::load(store, &spec.name, session, COMPARISON)?)?;
    let session = comparisons[0].0;
    let comparisons: Vec<Comparison> = comparisons.into_iter().map(|(_, c)| c).collect();
    let windows: Vec<Window> =
        records::load(store, &spec.name, Some(session), WINDOW)?.into_iter().map(|(_, w)| w).collect();
    let fits = |w: &Window| {
        ab.arms.get(w.arm).is_some_and(|a| a.label == w.label)
            && w.jobs.iter().all(|j| spec.workloads.contains_key(&j.workload))
    };
    if let Some(w) = windows.iter().find(|w| !fits(w)) {
        return Err(lockstep_core::error::UsageError::new(format!(
            "experiment {}: its stored windows do not fit the spec as it is now (policy {:?} or workloads {} \
             changed since it ran; expected the spec it ran with)",
            spec.name,
            w.label,
            w.jobs.iter().map(|j| j.workload.as_str()).collect::<Vec<_>>().join("+")
        ))
        .into());
    }
    std::fs::create_dir_all(dir)?;
    let auto = spec.runs_auto();
    // Tallied when the run ended (HELD); for a run that stored none (builds before it), from the agent's records
    // if they are still kept.
    let stored: Vec<Held> =
        records::load(store, &spec.name, Some(session), HELD)?.into_iter().map(|(_, h)| h).collect();
    let mut held = BTreeMap::new();
    for c in comparisons.iter().filter(|c| auto && c.failed.is_none()) {
        let found = match stored.iter().find(|h| h.progress == c.progress && h.mix == c.mix) {
            Some(h) => Some(h.clone()),
            None => held_in(store, &c.progress, &c.mix, c.span)?,
        };
        if let Some(h) = found {
            held.insert((c.progress.clone(), c.mix.clone()), h);
        }
    }
    let md = summary(spec, ab, &comparisons, &windows, &held);
    Ok(Report { summary: md, page: html_page(&spec.name, &spec.description) })
}

/// The report's Markdown; `held` is what `auto` held in each comparison (by progress mode and mix).
fn summary(
    spec: &Spec,
    ab: &Ab,
    comparisons: &[Comparison],
    windows: &[Window],
    held: &BTreeMap<(String, String), Held>,
) -> String {
    let base = &ab.arms[0].label;
    let pct = format!("{}", (ab.confidence * 1000.0).round() / 10.0);
    let mut md = format!("# {} — {}\n\n", spec.name, spec.description);
    md += &intro(spec, ab, &pct);
    let _ =
        writeln!(md, "| progress | mix | policy | time vs {base} | ± | rounds | per job | measured by | other work |");
    md += "|---|---|---|---|---|---|---|---|---|\n";
    let mut headline = Vec::new();
    let mut checks = Vec::new();
    for c in comparisons {
        if c.failed.is_some() {
            let _ = writeln!(md, "| {} | {} | FAILED | | | | | | |", c.progress, c.mix);
            continue;
        }
        let mine: Vec<&Window> = windows.iter().filter(|w| w.progress == c.progress && w.mix == c.mix).collect();
        let rounds = Rounds::new(spec, &mine);
        let measured: Vec<usize> = (0..rounds.measures.len()).filter(|&j| rounds.measures[j].is_some()).collect();
        let workload = |j: usize| mine.first().map_or("", |w| w.jobs[j].workload.as_str()).to_string();
        let by = measured
            .iter()
            .map(|&j| format!("{} {}", workload(j), rounds.measures[j].map_or("", Measure::name)))
            .collect::<Vec<_>>()
            .join(", ");
        let mut best: Option<(usize, Estimate)> = None;
        for (arm, a) in ab.arms.iter().enumerate().skip(1) {
            // No estimate: fewer than two rounds to compare, or a job that moved under a policy in one round only.
            let Some(e) = rounds.estimate(0, arm, None, None, ab.confidence) else {
                let _ = writeln!(md, "| {} | {} | {} | - | | - | | {by} | |", c.progress, c.mix, a.label);
                continue;
            };
            let per_job = measured
                .iter()
                .filter_map(|&j| {
                    Some(format!("{} {:.3}", workload(j), rounds.estimate(0, arm, Some(j), None, ab.confidence)?.ratio))
                })
                .collect::<Vec<_>>()
                .join(", ");
            let other = rounds.other_work(0, arm).map_or_else(String::new, |o| format!("{:.1} %", o * 100.0));
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {:.1} % | {} | {per_job} | {by} | {other} |",
                c.progress,
                c.mix,
                a.label,
                e.show(),
                e.precision() * 100.0,
                e.pairs
            );
            let same = spec.policies[arm] == spec.policies[0];
            if same {
                checks.extend(check(&rounds, ab, arm, e, &format!("{} {}", c.progress, c.mix)));
            } else if best.is_none_or(|(_, b)| e.ratio < b.ratio) {
                best = Some((arm, e));
            }
        }
        if let Some((arm, e)) = best {
            // What the interval says, not the estimate alone: the fastest of the others may still be slower.
            let verdict = if e.high < 1.0 {
                "faster"
            } else if e.low > 1.0 {
                "slower"
            } else {
                "not told apart"
            };
            headline.push(format!(
                "- {} {}: `{}` takes {:.2}× the time of `{base}` ({pct} % interval {:.2}–{:.2}, {} rounds): {verdict}",
                c.progress, c.mix, ab.arms[arm].label, e.ratio, e.low, e.high, e.pairs
            ));
        }
    }
    if ab.arms.len() > 2 {
        md += &pairs(spec, ab, comparisons, windows);
    }
    md += &held_section(held);
    md += &checks_section(&checks);
    let failed: Vec<&Comparison> = comparisons.iter().filter(|c| c.failed.is_some()).collect();
    if failed.is_empty() && !headline.is_empty() {
        md +=
            "\n## Headline\n\nThe fastest of the other policies against the first, per mix (paired), and whether its \
               interval tells it faster or slower:\n\n";
        md += &headline.join("\n");
        md += "\n";
    }
    if !failed.is_empty() {
        md += "\n## Failed comparisons\n\nA job failed or did not verify: the comparison has no numbers.\n\n";
        for c in failed {
            let _ = writeln!(md, "- {} {}: {}", c.progress, c.mix, c.failed.as_deref().unwrap_or_default());
        }
    }
    md
}

/// The report's opening paragraph: how the comparison ran and what its numbers are (`pct`: the intervals'
/// confidence, in per cent).
fn intro(spec: &Spec, ab: &Ab, pct: &str) -> String {
    let base = &ab.arms[0].label;
    let progress = match ab.by {
        By::Rate => {
            "its rate of MPI calls (communicating, profiled), co-scheduled time (communicating, unprofiled) or CPU \
             time while every job is at work"
        }
        By::Runs => {
            "its whole runs' speed: the wall time of its runs that began and ended within one window's counted \
             part, start and end included (runs across a switch left out)"
        }
    };
    format!(
        "Paired comparison: each mix ran for {}{} while the policies took turns in windows of {} (the first {} of \
         each not counted), every other round in reverse order; {} ranks per job, each job started again as it \
         ended. A job's progress is {progress}. **time vs {base}** is how long a policy makes the jobs take \
         against `{base}`: per job, its rate under `{base}` over its rate under the policy, each rate its progress \
         summed over the policy's windows over their counted time summed (by whole runs, the runs' wall time), the \
         geometric mean of that over the jobs, with its {pct} % interval (delete-one jackknife over the rounds, \
         Student's t); below 1 is faster. **±** is the interval's larger side, relative to the estimate. **other \
         work** is the share of the CPUs' time in the two policies' windows \
         that went to other work than the mix's jobs (the agent, this harness, anything else on the CPUs the \
         experiment may use).\n\n",
        lockstep_core::duration::format(ab.length()),
        if ab.length() == ab.duration {
            String::new()
        } else {
            format!(
                " ({} rounds: the spec's {} less what is short of a pair of rounds)",
                ab.rounds(),
                lockstep_core::duration::format(ab.duration)
            )
        },
        lockstep_core::duration::format(ab.window),
        lockstep_core::duration::format(ab.settle),
        spec.ranks,
    )
}

/// The report's section on the checks of the method (the lines of [`check`]); empty without them.
fn checks_section(checks: &[String]) -> String {
    if checks.is_empty() {
        return String::new();
    }
    format!(
        "\n## Checks of the method\n\nA policy compared with itself must come out at 1 within its interval (A/A); \
         one whose jobs are all stopped a known share of the time (`handicap`, SIGSTOP for that share of every 200 \
         ms) at its known size (within {:.0} %: the node's own work need not fall in the stops in that share), and \
         not at 1; the handicap's check only where other work than the jobs took at most {:.1} % of their CPUs' \
         time (work that wants more takes the CPUs while the jobs are stopped, and the kernel gives the jobs time \
         back from it once they resume: the handicap costs them less than its size).\n\n{}\n",
        HANDICAP_TOLERANCE * 100.0,
        MOST_OTHER_WORK * 100.0,
        checks.join("\n")
    )
}

/// The report's section on what `auto` held, per comparison (`held`: by progress mode and mix); empty without
/// `auto`.
fn held_section(held: &BTreeMap<(String, String), Held>) -> String {
    if held.is_empty() {
        return String::new();
    }
    let mut md =
        "\n## What `auto` held\n\nEach of `auto`'s slots under the policy its latest choice or trial's window \
                  had put in force (the agent's records: `auto_choices`, and its slots in `decisions`); the windows \
                  of `cfs` its trials tried, and the choices it made or kept from the set before. Tallied when the \
                  run ended and stored with it; for a run stored without the tally, read from the agent's records \
                  while it keeps them (24 h by default).\n\n| progress | mix | slots | held | cfs \
                  windows tried | choices |\n|---|---|---|---|---|---|\n"
            .to_string();
    for ((progress, mix), h) in held {
        let total: u32 = h.slots.values().sum();
        if total == 0 {
            // A run stored without the tally, reported after the agent's retention (24 h by default) dropped its
            // records.
            let _ = writeln!(md, "| {progress} | {mix} | no records | | | |");
            continue;
        }
        let shares = h
            .slots
            .iter()
            .map(|(p, n)| format!("{p} {:.1} %", f64::from(*n) * 100.0 / f64::from(total)))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(md, "| {progress} | {mix} | {total} | {shares} | {} | {} |", h.cfs_tried, h.chosen);
    }
    md
}

/// With more than two policies, every pair of them (the later one's time against the earlier one's), from the
/// rounds' windows of the two: which of two close policies is faster, with its interval.
fn pairs(spec: &Spec, ab: &Ab, comparisons: &[Comparison], windows: &[Window]) -> String {
    let mut md = "\n## Every pair\n\n| progress | mix | policy | against | time ratio | ± | rounds |\n\
                  |---|---|---|---|---|---|---|\n"
        .to_string();
    for c in comparisons.iter().filter(|c| c.failed.is_none()) {
        let mine: Vec<&Window> = windows.iter().filter(|w| w.progress == c.progress && w.mix == c.mix).collect();
        let rounds = Rounds::new(spec, &mine);
        for a in 0..ab.arms.len() {
            for b in a + 1..ab.arms.len() {
                let Some(e) = rounds.estimate(a, b, None, None, ab.confidence) else { continue };
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | {} | {:.1} % | {} |",
                    c.progress,
                    c.mix,
                    ab.arms[b].label,
                    ab.arms[a].label,
                    e.show(),
                    e.precision() * 100.0,
                    e.pairs
                );
            }
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::super::ab::Done;
    use super::super::spec::tests::{parse, GOOD};
    use super::*;
    use lockstep_core::cosched::auto::Choice;
    use lockstep_store::Action;

    /// A spec comparing gang with itself and with a 20 % handicap, on lu (calls) and ep (CPU time).
    fn spec() -> Spec {
        let text = GOOD.replace("mpl = [1, 2]", "mixes = [[\"lu\", \"ep\"]]")
            + "[[policies]]\nname = \"gang\"\nslot = \"200ms\"\nlabel = \"again\"\n\
               [[policies]]\nname = \"gang\"\nslot = \"200ms\"\nhandicap = 0.2\n\
               [ab]\nduration = \"1m\"\nwindow = \"2s\"\n";
        let text = text.replace("[[policies]]\nname = \"cfs\"\n", "");
        parse(&text).unwrap()
    }

    /// A window of `arm` in `round` in which lu made `calls` calls and ep had `cpu` CPU seconds, in 1 s.
    fn window(arm: usize, round: u32, calls: u64, cpu: f64) -> Window {
        let job = |workload: &str, calls, cpu_s| Done { workload: workload.into(), calls, cpu_s, ..Done::default() };
        Window {
            progress: "yield".into(),
            mix: "lu+ep".into(),
            arm,
            label: String::new(),
            round,
            seconds: 1.0,
            jobs: vec![job("lu", calls, calls as f64 / 1000.0), job("ep", 0, cpu)],
            other_work: Some(0.01),
        }
    }

    /// A record of `auto` putting `policy` in force, on trial (`trying`) or chosen.
    fn record(policy: &str, trying: bool) -> Choice {
        Choice { jobs: Vec::new(), policy: policy.into(), trying, why: String::new(), rates: BTreeMap::new() }
    }

    #[test]
    fn each_slot_under_auto_counts_for_what_its_latest_record_put_in_force() {
        let records = vec![
            (10.0, record("gang", true)),
            (10.6, record("cfs", true)),
            (10.8, record("gang", false)),
            (20.0, record("gang", true)),
            (20.6, record("cfs", true)),
            (20.8, record("cfs", false)),
        ];
        // Each record is made in its slot's tick, after the slot's record: it governs that slot. A slot with no
        // record by its end (the next slot's record) is left out.
        let slots = [9.7, 9.99, 10.59, 10.79, 10.99, 19.99, 20.59, 20.79, 20.99];
        let held = Held::tally(&slots, &records);
        assert_eq!(held.slots, BTreeMap::from([("gang".to_string(), 4), ("cfs".to_string(), 4)]));
        assert_eq!((held.cfs_tried, held.chosen), (2, 2));
        let md = held_section(&BTreeMap::from([(("busy".to_string(), "lu+ep".to_string()), held)]));
        assert!(md.contains("| busy | lu+ep | 8 | cfs 50.0 %, gang 50.0 % | 2 | 2 |"), "{md}");
        assert!(held_section(&BTreeMap::new()).is_empty());
        // Records gone (past the agent's retention): said so, not read as zeros.
        let none = Held::tally(&slots, &[]);
        let md = held_section(&BTreeMap::from([(("busy".to_string(), "lu+ep".to_string()), none)]));
        assert!(md.contains("| busy | lu+ep | no records |"), "{md}");
    }

    #[test]
    fn the_report_reads_what_auto_held_from_the_tally_the_run_stored_and_else_from_the_agents_records() {
        let text =
            GOOD.replace("mpl = [1, 2]", "mixes = [[\"lu\", \"ep\"]]").replace("name = \"gang\"", "name = \"auto\"")
                + "[ab]\nduration = \"1m\"\nwindow = \"2s\"\n";
        let spec = parse(&text).unwrap();
        let ab = spec.ab.clone().unwrap();
        let dir = lockstep_scratch::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("s.db")).unwrap();
        let comparison = Comparison {
            progress: "busy".into(),
            mix: "lu+ep".into(),
            failed: None,
            rounds: 2,
            span: Some([100.0, 200.0]),
        };
        records::save(&store, &spec.name, 1.0, COMPARISON, &comparison).unwrap();
        for round in 0..2 {
            for (arm, a) in ab.arms.iter().enumerate() {
                let w = Window { progress: "busy".into(), label: a.label.clone(), ..window(arm, round, 1000, 1.0) };
                records::save(&store, &spec.name, 1.0, WINDOW, &w).unwrap();
            }
        }
        // No tally stored and no records of the agent (past its retention): said so.
        let md = write(&spec, &ab, &store, dir.path(), None).unwrap().summary;
        assert!(md.contains("| busy | lu+ep | no records |"), "{md}");
        // No tally stored (a build before it), the agent's records still kept: read from them, within the span.
        let node: lockstep_core::ident::NodeName = "n".parse().unwrap();
        let slot = |time: f64| lockstep_store::Decision {
            time,
            node: node.clone(),
            policy: "auto".into(),
            slot: time as u64,
            active_row: 0,
            rows: 2,
            job: None,
            action: Action::Slot,
            duration_us: 1.0,
            prompt_us: None,
        };
        let decisions: Vec<_> = [99.0, 150.0, 151.0, 152.0, 250.0].into_iter().map(slot).collect();
        store.log_decisions(&decisions, &[]).unwrap();
        store.log_auto(&node, &[(150.1, record("cfs", true)), (151.1, record("gang", false))]).unwrap();
        let md = write(&spec, &ab, &store, dir.path(), None).unwrap().summary;
        assert!(md.contains("| busy | lu+ep | 3 | cfs 33.3 %, gang 66.7 % | 1 | 1 |"), "{md}");
        // The tally stored at the run's end stands, whatever the agent still keeps.
        let held = Held {
            progress: "busy".into(),
            mix: "lu+ep".into(),
            slots: BTreeMap::from([("gang".to_string(), 99), ("cfs".to_string(), 1)]),
            cfs_tried: 1,
            chosen: 3,
        };
        records::save(&store, &spec.name, 1.0, HELD, &held).unwrap();
        let md = write(&spec, &ab, &store, dir.path(), None).unwrap().summary;
        assert!(md.contains("| busy | lu+ep | 100 | cfs 1.0 %, gang 99.0 % | 1 | 3 |"), "{md}");
    }

    #[test]
    fn whole_runs_compare_the_jobs_runs_wall_time_and_a_round_without_one_does_not_count() {
        let text = GOOD.replace("mpl = [1, 2]", "mixes = [[\"lu\", \"ep\"]]")
            + "[ab]\nduration = \"1m\"\nwindow = \"2s\"\nmeasure = \"runs\"\n";
        let spec = parse(&text).unwrap();
        let ab = spec.ab.clone().unwrap();
        let mut windows = Vec::new();
        for round in 0..4 {
            for (arm, a) in ab.arms.iter().enumerate() {
                // Runs take 3 s under the first policy and 10 % longer under the second, the machine slowing down
                // round by round; the calls and CPU time say nothing of it.
                let slower = if arm == 1 { 1.1 * (1.0 + 0.002 * f64::from(round % 2)) } else { 1.0 };
                let each = 3.0 * slower * (1.0 + 0.05 * f64::from(round));
                let mut w = Window { label: a.label.clone(), ..window(arm, round, 1000, 1.0) };
                // Three runs fit under the first policy, two under the second: their time per run is compared.
                let runs = 3 - arm as u32;
                for d in &mut w.jobs {
                    (d.whole, d.whole_s) = (runs, f64::from(runs) * each);
                }
                windows.push(w);
            }
        }
        // ep had no whole run under the second policy in the last round.
        (windows[7].jobs[1].whole, windows[7].jobs[1].whole_s) = (0, 0.0);
        let comparison =
            Comparison { progress: "yield".into(), mix: "lu+ep".into(), failed: None, rounds: 4, span: None };
        let md = summary(&spec, &ab, &[comparison], &windows, &BTreeMap::new());
        assert!(md.contains("its whole runs' speed"), "{md}");
        assert!(md.contains(&format!("| yield | lu+ep | {} | 1.10", ab.arms[1].label)), "{md}");
        assert!(md.contains("| 3 | lu 1.10") && md.contains("lu whole runs, ep whole runs"), "{md}");
    }

    #[test]
    fn a_jobs_progress_is_pooled_over_the_rounds_so_a_window_counts_by_its_length_and_what_it_did() {
        let spec = spec();
        // Under the first policy lu makes 1000 calls and ep has 1 CPU second in every window of 1 s. Under the
        // second, lu makes none in round 0 (starting again), and round 1's window is 2 s long with twice the work.
        let mut windows = Vec::new();
        for round in 0..4 {
            windows.push(window(0, round, 1000, 1.0));
            let mut w = window(1, round, if round == 0 { 0 } else { 1000 }, 1.0);
            // Starting again, lu burned its CPU second without a call.
            w.jobs[0].cpu_s = 1.0;
            if round == 1 {
                w = Window { seconds: 2.0, ..window(1, round, 2000, 2.0) };
            }
            windows.push(w);
        }
        let refs: Vec<&Window> = windows.iter().collect();
        let e = Rounds::new(&spec, &refs).estimate(0, 1, None, None, 0.95).unwrap();
        // lu: 4000 calls in 5 s against 1000 a second, 1.25 the time; ep 1; their geometric mean.
        assert_eq!(e.pairs, 4, "{e:?}");
        assert!((e.ratio - 1.25_f64.sqrt()).abs() < 1e-9, "{e:?}");
        let lu = Rounds::new(&spec, &refs).estimate(0, 1, Some(0), None, 0.95).unwrap();
        assert!((lu.ratio - 1.25).abs() < 1e-9 && lu.contains(1.25), "{lu:?}");
        // Read by CPU time, lu had as much under both.
        let cpu = Rounds::new(&spec, &refs).estimate(0, 1, Some(0), Some(Measure::Cpu), 0.95).unwrap();
        assert!((cpu.ratio - 1.0).abs() < 1e-9, "{cpu:?}");
        // A window with no time to read the jobs' rates over (none in which every job worked) does not count.
        let mut fewer = windows.clone();
        fewer[7].seconds = 0.0;
        let refs: Vec<&Window> = fewer.iter().collect();
        let three = Rounds::new(&spec, &refs).estimate(0, 1, None, None, 0.95).unwrap();
        assert_eq!(three.pairs, 3, "{three:?}");
        // lu moved in one round only under the second policy: leaving it out leaves no rate, so no estimate.
        for w in windows.iter_mut().filter(|w| w.arm == 1 && w.round != 2) {
            w.jobs[0].calls = 0;
        }
        let refs: Vec<&Window> = windows.iter().collect();
        assert_eq!(Rounds::new(&spec, &refs).estimate(0, 1, None, None, 0.95), None);
    }

    #[test]
    fn a_handicap_is_found_within_its_tolerance_and_never_at_1() {
        let e = |ratio, low, high| Estimate { ratio, low, high, pairs: 10 };
        assert!(at_size(&e(1.25, 1.2, 1.3), 1.25));
        // What a fresh-clone make test measured: the jobs lost a little more than they were stopped.
        assert!(at_size(&e(1.264, 1.253, 1.275), 1.25));
        assert!(at_size(&e(1.236, 1.225, 1.247), 1.25));
        assert!(!at_size(&e(1.30, 1.285, 1.315), 1.25) && !at_size(&e(1.20, 1.19, 1.21), 1.25));
        assert!(!at_size(&e(1.1, 0.95, 1.3), 1.25), "an interval holding 1 finds nothing");
    }

    #[test]
    fn a_policy_against_itself_and_a_handicap_are_checked_against_what_they_must_show() {
        let spec = spec();
        let ab = spec.ab.clone().unwrap();
        assert_eq!(
            ab.arms.iter().map(|a| a.label.as_str()).collect::<Vec<_>>(),
            ["gang/200ms", "again", "gang/200ms stopped 20%"]
        );
        // The machine slows down round by round; within a round the jobs go as fast under the first two, and 80 %
        // as fast under the handicap.
        let mut windows = Vec::new();
        for round in 0..6 {
            let speed = 1.0 - 0.05 * f64::from(round) + if round % 2 == 0 { 0.01 } else { -0.01 };
            // Each window strays from its round's speed by a percent or two, as windows do.
            let stray = [1.012, 0.991, 1.004, 0.985, 1.009, 0.998][round as usize];
            windows.push(window(0, round, (1000.0 * speed) as u64, speed));
            windows.push(window(1, round, (1000.0 * speed * stray) as u64, speed * stray));
            windows.push(window(2, round, (800.0 * speed * stray) as u64, speed * 0.8 * stray));
        }
        let comparison =
            Comparison { progress: "yield".into(), mix: "lu+ep".into(), failed: None, rounds: 6, span: None };
        let md = summary(&spec, &ab, std::slice::from_ref(&comparison), &windows, &BTreeMap::new());
        assert!(md.contains("- A/A: `again` against `gang/200ms` (yield lu+ep): 1.000 ["), "{md}");
        assert!(md.contains("expected 1.000: **found**"), "{md}");
        assert!(md.contains("- handicap: `gang/200ms stopped 20%` against `gang/200ms` (yield lu+ep): 1.25"), "{md}");
        assert!(md.contains("in CPU time, expected 1.250 (within 2 %), and not 1: **found**"), "{md}");
        assert!(md.contains("lu MPI calls, ep CPU time | 1.0 % |"), "{md}");
        // Three policies: every pair, the later against the earlier.
        assert!(md.contains("| yield | lu+ep | gang/200ms stopped 20% | again | 1.25"), "{md}");
        // Other work beside the jobs took a fifth of the node's CPU time in a window of the handicap's: its size is
        // not known, and its check not made; the A/A check is.
        windows[5].other_work = Some(0.2);
        let md = summary(&spec, &ab, std::slice::from_ref(&comparison), &windows, &BTreeMap::new());
        assert!(md.contains("expected 1.000: **found**"), "{md}");
        assert!(
            md.contains(
                "- handicap: `gang/200ms stopped 20%` against `gang/200ms` (yield lu+ep): **not made**: other work \
                 than the jobs took 2.6 % of their CPUs' time (at most 2.0 % for its size to be known; 1.25"
            ),
            "{md}"
        );
        // Windows that did not measure other work (builds before it) are checked as they were.
        for w in &mut windows {
            w.other_work = None;
        }
        let md = summary(&spec, &ab, &[comparison], &windows, &BTreeMap::new());
        assert!(md.contains("in CPU time, expected 1.250 (within 2 %), and not 1: **found**"), "{md}");
        assert!(md.contains("lu MPI calls, ep CPU time |  |"), "{md}");
        // A failed comparison has no numbers and no headline.
        let failed = Comparison {
            progress: "busy".into(),
            mix: "lu+ep".into(),
            failed: Some("job lu failed".into()),
            rounds: 0,
            span: None,
        };
        let md = summary(&spec, &ab, &[failed], &[], &BTreeMap::new());
        assert!(md.contains("| busy | lu+ep | FAILED |") && md.contains("## Failed comparisons"), "{md}");
        assert!(!md.contains("## Headline"), "{md}");
    }
}
