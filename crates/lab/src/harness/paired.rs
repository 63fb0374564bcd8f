//! Paired estimates: how two policies' speeds compare, from matched windows in which each ran the same jobs, with
//! a Student-t confidence interval over the pairs. Each pair gives one log ratio; their mean is the estimate and
//! their spread its uncertainty, so that what the machine's speed does from one pair to the next (it drifts by
//! 5–10 % over a run here) cancels within each pair; only what it does within a pair's few seconds is left, as
//! noise that the interval includes.

/// A ratio estimated from pairs, with its confidence interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// The geometric mean of the pairs' ratios.
    pub ratio: f64,
    /// The interval's lower end.
    pub low: f64,
    /// The interval's upper end.
    pub high: f64,
    /// The pairs it is over.
    pub pairs: usize,
}

impl Estimate {
    /// The estimate from `logs` (one natural log of a ratio per pair) at `confidence` (0.95); `None` with fewer
    /// than two pairs (no spread to bound it by).
    pub fn from_logs(logs: &[f64], confidence: f64) -> Option<Self> {
        let n = logs.len();
        if n < 2 || logs.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let mean = logs.iter().sum::<f64>() / n as f64;
        let var = logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let half = t_quantile(0.5 + confidence / 2.0, n - 1) * (var / n as f64).sqrt();
        Some(Self { ratio: mean.exp(), low: (mean - half).exp(), high: (mean + half).exp(), pairs: n })
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
    fn an_estimate_is_the_geometric_mean_with_an_interval_that_narrows_with_pairs() {
        let logs: Vec<f64> = [1.02_f64, 1.06, 1.04, 1.03, 1.05].iter().map(|r| r.ln()).collect();
        let e = Estimate::from_logs(&logs, 0.95).unwrap();
        assert!((e.ratio - 1.0399).abs() < 1e-3, "{e:?}");
        assert!(e.low < e.ratio && e.ratio < e.high && e.contains(1.04) && !e.contains(1.0), "{e:?}");
        let more: Vec<f64> = logs.iter().cycle().take(20).copied().collect();
        let f = Estimate::from_logs(&more, 0.95).unwrap();
        assert!(f.precision() < e.precision() && f.pairs == 20, "{e:?} {f:?}");
        assert_eq!(Estimate::from_logs(&logs[..1], 0.95), None);
        assert_eq!(Estimate::from_logs(&[0.1, f64::INFINITY], 0.95), None);
        assert_eq!(e.show(), format!("{:.3} [{:.3}, {:.3}]", e.ratio, e.low, e.high));
    }
}
