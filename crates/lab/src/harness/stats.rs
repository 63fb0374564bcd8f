//! Statistics every report takes of stored runs.

use std::collections::{BTreeMap, BTreeSet};

use lockstep_core::cosched::PolicySpec;
use lockstep_store::ExperimentRun;

/// Median of `v` (sorted in place); NaN when empty.
pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        f64::midpoint(v[n / 2 - 1], v[n / 2])
    }
}

/// Mean of `v`; NaN when empty.
pub(crate) fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// The `p`-quantile of `v` (0 to 1; sorted in place), the nearest rank; NaN when empty.
pub(crate) fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// A job's time: the kernel's timed section; for a Slurm job its wall time from `srun` to exit, since Slurm's
/// gang scheduling may keep a job suspended before and during its timed section.
pub(crate) fn time_of(r: &ExperimentRun) -> f64 {
    if r.placement == "slurm" {
        r.wall_s
    } else {
        r.time_s.unwrap_or(r.wall_s)
    }
}

/// Whether a stored policy label (`dcs:weight`, `dcs+boost:rr/200ms`, `gang/200ms`, `dedicated`, …) names a policy
/// that raises jobs on message arrival.
pub(crate) fn raises(label: &str) -> bool {
    let name = label.split('/').next().unwrap_or_default();
    name.parse::<PolicySpec>().is_ok_and(|p| p.raises().is_some())
}

/// The run's mode: MPI progress, `+container` / `+charliecloud` / `+slurm` when its ranks ran in podman or
/// Charliecloud containers / as a Slurm job, and
/// `+loaded` when background load (`[name]` in the mix) ran beside it.
pub(crate) fn mode(r: &ExperimentRun) -> String {
    let mut m = r.progress.clone();
    if r.placement != "process" {
        m = format!("{m}+{}", r.placement);
    }
    if r.mix.contains('[') {
        m += "+loaded";
    }
    m
}

/// The median dedicated time of every (mode, workload).
pub(crate) fn dedicated_medians(runs: &[ExperimentRun]) -> BTreeMap<(String, String), f64> {
    let mut dedicated: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.policy == "dedicated") {
        dedicated.entry((mode(r), r.workload.clone())).or_default().push(time_of(r));
    }
    dedicated.into_iter().map(|(k, mut v)| (k, median(&mut v))).collect()
}

/// What [`paired_means`] gives: per group, per policy, a mean; and the (group, item) pairs it left out.
pub(crate) struct Paired<G, I> {
    /// Per group, per policy: its mean over the group's items that every policy has a value on.
    pub means: BTreeMap<G, BTreeMap<String, f64>>,
    /// The (group, item) pairs some policy of the group has no value on.
    pub left_out: Vec<(G, I)>,
}

/// Per group, per policy: the mean of the policy's values over the items (mixes, workloads) of the group that
/// every policy of the group has a value on; and the (group, item) pairs left out, where some policy of the group
/// has none (its case failed). A policy's mean over other items than the rest's would compare different work. A
/// policy with a value on no item of a group is not one of its policies: it has no mean there.
pub(crate) fn paired_means<G: Ord + Clone, I: Ord + Clone>(
    values: &BTreeMap<(G, I), BTreeMap<String, f64>>,
) -> Paired<G, I> {
    let mut policies: BTreeMap<&G, BTreeSet<&String>> = BTreeMap::new();
    for ((group, _), per) in values {
        policies.entry(group).or_default().extend(per.keys());
    }
    let mut acc: BTreeMap<G, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    let mut left_out = Vec::new();
    for ((group, item), per) in values {
        if per.len() < policies[group].len() {
            left_out.push((group.clone(), item.clone()));
            continue;
        }
        for (p, v) in per {
            acc.entry(group.clone()).or_default().entry(p.clone()).or_default().push(*v);
        }
    }
    let means = acc.into_iter().map(|(g, per)| (g, per.into_iter().map(|(p, v)| (p, mean(&v))).collect())).collect();
    Paired { means, left_out }
}

/// Whether a job failed: it exited with other than 0, or its result did not verify.
pub(crate) fn failed(r: &ExperimentRun) -> bool {
    r.exit_status != Some(0) || !r.verified
}

/// What tells one case of a session from another: the jobs that ran together, once (its start, policy, progress
/// mode, where ranks ran, mix and repetition).
type CaseKey = (u64, String, String, String, String, u32);

fn case_of(r: &ExperimentRun) -> CaseKey {
    (r.started_at.to_bits(), r.policy.clone(), r.progress.clone(), r.placement.clone(), r.mix.clone(), r.repetition)
}

/// `runs` split into those of cases whose every job succeeded, and those of failed cases: a case one of whose
/// jobs failed is left out whole (its other jobs ran beside one that did not run its course).
pub(crate) fn split_failed(runs: &[ExperimentRun]) -> (Vec<ExperimentRun>, Vec<ExperimentRun>) {
    let bad: BTreeSet<CaseKey> = runs.iter().filter(|r| failed(r)).map(case_of).collect();
    runs.iter().cloned().partition(|r| !bad.contains(&case_of(r)))
}
