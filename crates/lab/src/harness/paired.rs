//! Paired estimates: how two policies' speeds compare, from matched windows in which each ran the same jobs, with
//! a confidence interval over the pairs. The estimate is a ratio of the jobs' progress pooled over the pairs, and
//! its uncertainty comes from how much it moves when one pair is left out (the delete-one jackknife), so that what
//! the machine's speed does from one pair to the next (it drifts by 5–10 % over a run here) cancels within each
//! pair; only what it does within a pair's few seconds is left, as noise that the interval includes.

/// A ratio estimated from pairs, with its confidence interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// The ratio over all the pairs.
    pub ratio: f64,
    /// The interval's lower end.
    pub low: f64,
    /// The interval's upper end.
    pub high: f64,
    /// The pairs it is over.
    pub pairs: usize,
}

impl Estimate {
    /// The estimate over `pairs` pairs at `confidence` (0.95), from `log_of`: the natural log of the ratio over
    /// every pair but the one it is given (over all of them with `None`). Its interval is the delete-one
    /// jackknife's: the spread of the `pairs` estimates that each leave one pair out gives the standard error, and
    /// Student's t with `pairs − 1` degrees of freedom its width. `None` with fewer than two pairs (no spread to
    /// bound it by), or where `log_of` gives none or one that is not finite.
    pub fn jackknifed(pairs: usize, confidence: f64, log_of: impl Fn(Option<usize>) -> Option<f64>) -> Option<Self> {
        let finite = |x: Option<f64>| x.filter(|x| x.is_finite());
        if pairs < 2 {
            return None;
        }
        let all = finite(log_of(None))?;
        let left: Vec<f64> = (0..pairs).map(|i| finite(log_of(Some(i)))).collect::<Option<_>>()?;
        let n = pairs as f64;
        let mean = left.iter().sum::<f64>() / n;
        let var = (n - 1.0) / n * left.iter().map(|x| (x - mean).powi(2)).sum::<f64>();
        let half = t_quantile(0.5 + confidence / 2.0, pairs - 1) * var.sqrt();
        Some(Self { ratio: all.exp(), low: (all - half).exp(), high: (all + half).exp(), pairs })
    }

    /// Whether `ratio` lies within the interval.
    pub fn contains(&self, ratio: f64) -> bool {
        (self.low..=self.high).contains(&ratio)
    }

    /// The interval's half-width, relative to the estimate (the larger side): `0.015` is ±1.5 %.
    pub fn precision(&self) -> f64 {
        (self.high / self.ratio - 1.0).max(1.0 - self.low / self.ratio)
    }

    /// `1.031 [1.018, 1.044]`.
    pub fn show(&self) -> String {
        format!("{:.3} [{:.3}, {:.3}]", self.ratio, self.low, self.high)
    }
}

/// The `p`-quantile of Student's t distribution with `df` degrees of freedom (`p` in (0.5, 1)), found by
/// bisection on its distribution function. With x = √df·tan θ, the probability between 0 and x is
/// Γ((df+1)/2) / (Γ(df/2)·√π) times the integral of cos^(df−1) from 0 to θ: a smooth integrand on a bounded range,
/// which Simpson's rule integrates to well below the precision any report prints.
pub fn t_quantile(p: f64, df: usize) -> f64 {
    if df == 0 {
        return f64::INFINITY;
    }
    let v = df as f64;
    let pi = std::f64::consts::PI;
    // Γ((df+1)/2) / Γ(df/2), from df = 1 (1/√π) or df = 2 (√π/2), each step of two multiplying by (k+1)/k.
    let (mut ratio, mut k) = if df % 2 == 1 { (1.0 / pi.sqrt(), 1) } else { (pi.sqrt() / 2.0, 2) };
    while k < df {
        ratio *= (k as f64 + 1.0) / k as f64;
        k += 2;
    }
    let between = |theta: f64| ratio / pi.sqrt() * simpson(|x| x.cos().powf(v - 1.0), theta, 512);
    let (mut low, mut high) = (0.0, std::f64::consts::FRAC_PI_2);
    for _ in 0..64 {
        let mid = f64::midpoint(low, high);
        if between(mid) < p - 0.5 {
            low = mid;
        } else {
            high = mid;
        }
    }
    v.sqrt() * f64::midpoint(low, high).tan()
}

/// The integral of `f` from 0 to `to` by Simpson's rule over `n` (even) intervals.
fn simpson(f: impl Fn(f64) -> f64, to: f64, n: usize) -> f64 {
    let h = to / n as f64;
    let inner: f64 = (1..n).map(|i| f(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 }).sum();
    (f(0.0) + inner + f(to)) * h / 3.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_the_tables() {
        // (p, df, the table's value)
        for (p, df, table) in [
            (0.975, 1, 12.706),
            (0.975, 2, 4.303),
            (0.975, 3, 3.182),
            (0.975, 5, 2.571),
            (0.975, 10, 2.228),
            (0.975, 30, 2.042),
            (0.975, 1000, 1.962),
            (0.9995, 3, 12.924),
            (0.9995, 4, 8.610),
            (0.9995, 9, 4.781),
            (0.9995, 30, 3.646),
            (0.995, 20, 2.845),
            (0.95, 60, 1.671),
        ] {
            let t = t_quantile(p, df);
            assert!((t / table - 1.0).abs() < 3e-4, "t({p}, {df}) = {t}, the table says {table}");
        }
    }

    #[test]
    fn a_pooled_estimate_has_the_jackknife_interval_which_narrows_with_pairs() {
        // Pair i: the same amount of progress under a and b, in a's time a_s[i] and b's b_s[i]; b is slower.
        let estimate = |a_s: &[f64], b_s: &[f64]| {
            let log_of = |skip: Option<usize>| {
                let kept =
                    |s: &[f64]| s.iter().enumerate().filter(|&(i, _)| Some(i) != skip).map(|(_, x)| x).sum::<f64>();
                Some((kept(b_s) / kept(a_s)).ln())
            };
            Estimate::jackknifed(a_s.len(), 0.95, log_of)
        };
        let (a_s, b_s) = ([1.0, 1.0, 1.0, 1.0, 1.0], [1.02, 1.06, 1.04, 1.03, 1.05]);
        let e = estimate(&a_s, &b_s).unwrap();
        assert!((e.ratio - 1.04).abs() < 1e-9, "{e:?}");
        // With equal weights the jackknife's standard error is the delta method's for the log of a mean:
        // sd / (√n · mean), sd of the ratios 0.0158.
        let half = t_quantile(0.975, 4) * 0.015_811 / 5_f64.sqrt();
        assert!(((e.high / e.ratio).ln() - half / 1.04).abs() < 1e-4, "{e:?} {half}");
        assert!(e.low < e.ratio && e.ratio < e.high && e.contains(1.04) && !e.contains(1.0), "{e:?}");
        let (more_a, more_b): (Vec<f64>, Vec<f64>) = a_s.iter().zip(&b_s).cycle().take(20).unzip();
        let f = estimate(&more_a, &more_b).unwrap();
        assert!(f.precision() < e.precision() && f.pairs == 20, "{e:?} {f:?}");
        // A long pair weighs more than a short one: pooled, one slow pair of three long ones moves the estimate
        // by its share of the time.
        let g = estimate(&[1.0, 1.0, 3.0], &[1.0, 1.0, 3.3]).unwrap();
        assert!((g.ratio - 5.3 / 5.0).abs() < 1e-9, "{g:?}");
        assert_eq!(estimate(&a_s[..1], &b_s[..1]), None);
        assert_eq!(Estimate::jackknifed(3, 0.95, |skip| (skip != Some(1)).then_some(0.1)), None);
        assert_eq!(Estimate::jackknifed(3, 0.95, |_| Some(f64::INFINITY)), None);
        assert_eq!(e.show(), format!("{:.3} [{:.3}, {:.3}]", e.ratio, e.low, e.high));
    }
}
