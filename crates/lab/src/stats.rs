//! Statistics every report takes of stored runs.

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
