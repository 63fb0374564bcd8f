//! How finely an experiment's repetitions resolve a difference between two policies on a mix: the run-to-run
//! noise of a mix's mean slowdown, pooled over every mix and policy; the uncertainty it puts on the ratio of two
//! policies' means; and the best fixed policy chosen on held-out repetitions, which the lowest of several noisy
//! means is not (that one is the luckiest, below every policy's true mean).

use std::collections::BTreeMap;

use crate::harness::stats::mean;

/// One mix's mean slowdown under each policy (by label) in each repetition (by number).
pub type Repetitions = BTreeMap<String, BTreeMap<u32, f64>>;

/// The run-to-run noise of a mix's mean slowdown under one policy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Noise {
    /// The standard deviation of the natural logarithm of one repetition's mean slowdown around the mean of its
    /// policy's repetitions on the mix: about the relative deviation of one repetition.
    pub sigma: f64,
    /// The estimate's degrees of freedom: the repetitions beyond the first, summed over every mix and policy.
    pub df: usize,
}

impl Noise {
    /// The noise pooled over every policy of every one of `mixes` that ran two or more repetitions; `None` when
    /// none did.
    pub fn pooled<'a>(mixes: impl IntoIterator<Item = &'a Repetitions>) -> Option<Self> {
        let (mut squares, mut df) = (0.0, 0);
        for reps in mixes.into_iter().flat_map(BTreeMap::values).filter(|r| r.len() > 1) {
            let logs: Vec<f64> = reps.values().map(|s| s.ln()).collect();
            let centre = mean(&logs);
            squares += logs.iter().map(|l| (l - centre).powi(2)).sum::<f64>();
            df += logs.len() - 1;
        }
        (df > 0).then(|| Self { sigma: (squares / df as f64).sqrt(), df })
    }

    /// Two standard errors of the logarithm of the ratio of two means, over `n` and `m` repetitions: the ratio
    /// is known within a factor of `exp` of this either way.
    pub fn two_se(&self, n: usize, m: usize) -> f64 {
        2.0 * self.sigma * (1.0 / n.max(1) as f64 + 1.0 / m.max(1) as f64).sqrt()
    }

    /// The repetitions of each of two policies that make two standard errors of their ratio `ratio` (1.03: 3 %).
    pub fn repetitions_for(&self, ratio: f64) -> usize {
        (8.0 * self.sigma.powi(2) / ratio.ln().powi(2)).ceil() as usize
    }
}

/// The mean slowdown of the fixed policy chosen without looking at the repetition it is measured on: for each
/// repetition, the one of `fixed` with the lowest mean over the other repetitions, measured in that one; the mean
/// over the repetitions. It is what a user who picks a fixed policy from earlier runs gets. `None` when a policy of
/// `fixed` has fewer than two repetitions, or not the same ones as the others.
pub fn held_out_best(reps: &Repetitions, fixed: &[&str]) -> Option<f64> {
    let per: Vec<&BTreeMap<u32, f64>> = fixed.iter().map(|p| reps.get(*p)).collect::<Option<_>>()?;
    let first = per.first()?;
    if first.len() < 2 || per.iter().any(|r| !r.keys().eq(first.keys())) {
        return None;
    }
    let others = |r: &BTreeMap<u32, f64>, left: u32| {
        r.iter().filter(|&(&k, _)| k != left).map(|(_, s)| s).sum::<f64>() / (r.len() - 1) as f64
    };
    let measured: Vec<f64> = first
        .keys()
        .map(|&left| {
            let chosen = per.iter().min_by(|a, b| others(a, left).total_cmp(&others(b, left))).expect("a policy");
            chosen[&left]
        })
        .collect();
    Some(mean(&measured))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reps(policies: &[(&str, &[f64])]) -> Repetitions {
        policies
            .iter()
            .map(|(p, s)| (p.to_string(), s.iter().enumerate().map(|(i, &v)| (i as u32 + 1, v)).collect()))
            .collect()
    }

    #[test]
    fn the_noise_is_pooled_over_mixes_and_policies_on_a_log_scale() {
        let a = reps(&[("gang", &[(0.1f64).exp(), (-0.1f64).exp()]), ("cfs", &[2.0, 2.0])]);
        let b = reps(&[("gang", &[1.5])]);
        let noise = Noise::pooled([&a, &b]).expect("two policies with two repetitions");
        // Squares 0.02 over two degrees of freedom; one repetition adds none.
        assert_eq!(noise.df, 2);
        assert!((noise.sigma - 0.1).abs() < 1e-12, "{noise:?}");
        assert!((noise.two_se(2, 2) - 0.2).abs() < 1e-12);
        // 2 SE of a ratio within 3 %: 8 σ² / ln(1.03)² = 91.5 repetitions.
        assert_eq!(noise.repetitions_for(1.03), 92);
        assert_eq!(Noise::pooled([&b]), None);
    }

    #[test]
    fn the_held_out_best_is_chosen_on_the_other_repetitions_and_is_no_lower_than_the_luckiest_mean() {
        // gang's mean 1.75 is the lowest, from one lucky repetition; chosen on the other repetition each time,
        // the fixed policy measures 2.0 (gang, chosen on repetition 2) and 1.9 (boost, chosen on repetition 1).
        let r = reps(&[("gang", &[2.0, 1.5]), ("boost", &[1.7, 1.9]), ("auto", &[1.8])]);
        let best = held_out_best(&r, &["gang", "boost"]).expect("both have two repetitions");
        assert!((best - 1.95).abs() < 1e-12, "{best}");
        assert_eq!(held_out_best(&r, &["gang", "auto"]), None);
        assert_eq!(held_out_best(&reps(&[("gang", &[2.0])]), &["gang"]), None);
    }
}
