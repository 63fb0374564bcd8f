//! Paired estimates: how two policies' speeds compare, from matched windows in which each ran the same jobs, with
//! a Student-t confidence interval over the pairs. Each pair gives one log ratio; their mean is the estimate and
//! their spread its uncertainty, so that what the machine's speed does between pairs (it drifts by 5–10 % over a
//! run here) cancels within each pair and never enters the estimate.

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

/// The `p`-quantile of Student's t distribution with `df` degrees of freedom (`p` in (0.5, 1)): exact for one and
/// two degrees of freedom; above, the Cornish–Fisher expansion about the normal quantile to the fourth order in
/// 1/df (within 0.3 % of the tables from 3 degrees of freedom at the 97.5 and 99.95 % points).
pub fn t_quantile(p: f64, df: usize) -> f64 {
    match df {
        0 => f64::INFINITY,
        1 => (std::f64::consts::PI * (p - 0.5)).tan(),
        2 => (2.0 * p - 1.0) / (2.0 * p * (1.0 - p)).sqrt(),
        _ => {
            let z = normal_quantile(p);
            let v = df as f64;
            let (z3, z5, z7, z9) = (z.powi(3), z.powi(5), z.powi(7), z.powi(9));
            let g1 = (z3 + z) / 4.0;
            let g2 = (5.0 * z5 + 16.0 * z3 + 3.0 * z) / 96.0;
            let g3 = (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / 384.0;
            let g4 = (79.0 * z9 + 776.0 * z7 + 1482.0 * z5 - 1920.0 * z3 - 945.0 * z) / 92160.0;
            z + g1 / v + g2 / v.powi(2) + g3 / v.powi(3) + g4 / v.powi(4)
        }
    }
}

/// The `p`-quantile of the standard normal distribution (`p` in (0, 1)): Hastings' rational approximation
/// (Abramowitz and Stegun 26.2.23), within 4.5e-4.
fn normal_quantile(p: f64) -> f64 {
    let tail = p.min(1.0 - p);
    let t = (-2.0 * tail.ln()).sqrt();
    let x = t
        - (2.515_517 + 0.802_853 * t + 0.010_328 * t * t)
            / (1.0 + 1.432_788 * t + 0.189_269 * t * t + 0.001_308 * t.powi(3));
    if p < 0.5 {
        -x
    } else {
        x
    }
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
            (0.9995, 9, 4.781),
            (0.9995, 30, 3.646),
            (0.995, 20, 2.845),
        ] {
            let t = t_quantile(p, df);
            assert!((t / table - 1.0).abs() < 3e-3, "t({p}, {df}) = {t}, the table says {table}");
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
