//! Gunther's Universal Scalability Law, fitted to a throughput curve.
//!
//! `X(N) = λN / (1 + σ(N − 1) + κN(N − 1))`: λ is the throughput of one
//! worker, σ the share of work serialised on something all workers
//! contend for (contention), κ the cost of keeping workers' shared state
//! coherent, paid per pair of workers (coherency). With κ > 0 the curve
//! peaks at `N* = √((1 − σ) / κ)` and falls after it.
//!
//! Written by hand (it is the analysis, and a two-parameter linear least
//! squares): λ is the mean of the one-worker points, and with it the law
//! becomes linear in σ and κ, `Nλ/X − 1 = σ(N − 1) + κN(N − 1)`, fitted
//! without an intercept over the points with N > 1. Both parameters are
//! kept at zero or above; one that would come out negative is fixed at zero
//! and the other refitted alone. With a single worker count above one, only
//! `σ + κN` is known: κ is then taken as zero and
//! [`UslFit::kappa_identified`] says so.

/// A fitted curve.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UslFit {
    /// Throughput of one worker (the mean of the one-worker points).
    pub lambda: f64,
    /// Contention σ (0 = none, 1 = fully serial).
    pub sigma: f64,
    /// Coherency κ.
    pub kappa: f64,
    /// False when the points could not tell κ from σ (one worker count
    /// above one): κ is then 0 by assumption, not by measurement.
    pub kappa_identified: bool,
    /// Points the fit rests on (all worker counts, one-worker included).
    pub points: usize,
    /// Root mean square of the relative residuals `(X_fit − X) / X`.
    pub rms_relative_error: f64,
}

impl UslFit {
    /// Fits `(workers, throughput)` points; `None` without a valid
    /// one-worker point and at least one valid point above one worker.
    /// Points with a non-finite or non-positive value are left out.
    pub fn fit(points: &[(f64, f64)]) -> Option<UslFit> {
        let good: Vec<(f64, f64)> = points
            .iter()
            .copied()
            .filter(|(n, x)| n.is_finite() && x.is_finite() && *n >= 1.0 && *x > 0.0)
            .collect();
        let ones: Vec<f64> = good
            .iter()
            .filter(|(n, _)| (*n - 1.0).abs() < 1e-9)
            .map(|p| p.1)
            .collect();
        if ones.is_empty() {
            return None;
        }
        let lambda = ones.iter().sum::<f64>() / ones.len() as f64;
        // Regressors a = N − 1, b = N(N − 1); response y = Nλ/X − 1.
        let rows: Vec<(f64, f64, f64)> = good
            .iter()
            .filter(|(n, _)| *n > 1.0 + 1e-9)
            .map(|&(n, x)| (n - 1.0, n * (n - 1.0), n * lambda / x - 1.0))
            .collect();
        if rows.is_empty() {
            return None;
        }
        let mut counts: Vec<f64> = rows.iter().map(|r| r.0).collect();
        counts.sort_by(f64::total_cmp);
        counts.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
        let kappa_identified = counts.len() >= 2;
        let one = |pick: fn(&(f64, f64, f64)) -> f64| -> f64 {
            let sxx: f64 = rows.iter().map(|r| pick(r) * pick(r)).sum();
            let sxy: f64 = rows.iter().map(|r| pick(r) * r.2).sum();
            (sxy / sxx).max(0.0)
        };
        let (sigma, kappa) = if kappa_identified {
            let (mut saa, mut sab, mut sbb, mut say, mut sby) = (0.0, 0.0, 0.0, 0.0, 0.0);
            for &(a, b, y) in &rows {
                saa += a * a;
                sab += a * b;
                sbb += b * b;
                say += a * y;
                sby += b * y;
            }
            let det = saa * sbb - sab * sab;
            let (s, k) = if det.abs() > f64::EPSILON * saa * sbb {
                ((say * sbb - sby * sab) / det, (sby * saa - say * sab) / det)
            } else {
                (f64::NAN, f64::NAN)
            };
            if s >= 0.0 && k >= 0.0 {
                (s, k)
            } else {
                // The unconstrained optimum lies outside the quadrant:
                // the better of the two one-parameter fits.
                let only_sigma = (one(|r| r.0), 0.0);
                let only_kappa = (0.0, one(|r| r.1));
                let sse = |(s, k): (f64, f64)| -> f64 {
                    rows.iter()
                        .map(|&(a, b, y)| (y - s * a - k * b).powi(2))
                        .sum()
                };
                if sse(only_sigma) <= sse(only_kappa) {
                    only_sigma
                } else {
                    only_kappa
                }
            }
        } else {
            (one(|r| r.0), 0.0)
        };
        let mut fit = UslFit {
            lambda,
            sigma,
            kappa,
            kappa_identified,
            points: good.len(),
            rms_relative_error: 0.0,
        };
        let sq: f64 = good
            .iter()
            .map(|&(n, x)| ((fit.throughput(n) - x) / x).powi(2))
            .sum();
        fit.rms_relative_error = (sq / good.len() as f64).sqrt();
        Some(fit)
    }

    /// The fitted throughput at `n` workers.
    pub fn throughput(&self, n: f64) -> f64 {
        self.lambda * n / (1.0 + self.sigma * (n - 1.0) + self.kappa * n * (n - 1.0))
    }

    /// The fitted speedup over one worker at `n` workers.
    pub fn speedup(&self, n: f64) -> f64 {
        self.throughput(n) / self.lambda
    }

    /// The worker count where the fitted curve peaks, `√((1 − σ)/κ)`;
    /// `None` when it never does (κ = 0: it levels off at `λ/σ`).
    pub fn peak_workers(&self) -> Option<f64> {
        (self.kappa > 0.0 && self.sigma < 1.0).then(|| ((1.0 - self.sigma) / self.kappa).sqrt())
    }

    /// The ceiling the curve approaches or peaks at: `X(N*)` with κ > 0,
    /// `λ/σ` with κ = 0 and σ > 0; `None` when it rises without bound.
    pub fn ceiling(&self) -> Option<f64> {
        match self.peak_workers() {
            Some(n) => Some(self.throughput(n)),
            None => (self.sigma > 0.0).then(|| self.lambda / self.sigma),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::UslFit;

    fn curve(lambda: f64, sigma: f64, kappa: f64, ns: &[f64]) -> Vec<(f64, f64)> {
        ns.iter()
            .map(|&n| {
                (
                    n,
                    lambda * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0)),
                )
            })
            .collect()
    }

    #[test]
    fn recovers_the_parameters_of_an_exact_curve() {
        let pts = curve(10_000.0, 0.05, 0.002, &[1.0, 2.0, 4.0, 8.0, 16.0]);
        let f = UslFit::fit(&pts).unwrap();
        assert!((f.sigma - 0.05).abs() < 1e-9, "{f:?}");
        assert!((f.kappa - 0.002).abs() < 1e-9, "{f:?}");
        assert!(f.kappa_identified);
        assert!(f.rms_relative_error < 1e-9);
        let peak = f.peak_workers().unwrap();
        assert!((peak - (0.95f64 / 0.002).sqrt()).abs() < 1e-6);
        assert!(f.ceiling().unwrap() > f.throughput(16.0));
    }

    #[test]
    fn two_worker_counts_give_sigma_alone() {
        // 1.8x at two workers: σ = 2/1.8 − 1.
        let f = UslFit::fit(&[(1.0, 100.0), (2.0, 180.0)]).unwrap();
        assert!(!f.kappa_identified);
        assert_eq!(f.kappa, 0.0);
        assert!((f.sigma - (2.0 / 1.8 - 1.0)).abs() < 1e-12);
        assert!((f.speedup(2.0) - 1.8).abs() < 1e-12);
        assert_eq!(f.peak_workers(), None);
        assert!((f.ceiling().unwrap() - 100.0 / f.sigma).abs() < 1e-9);
    }

    #[test]
    fn superlinear_points_clamp_at_zero_and_missing_points_give_none() {
        let f = UslFit::fit(&[(1.0, 100.0), (2.0, 230.0), (4.0, 500.0)]).unwrap();
        assert_eq!((f.sigma, f.kappa), (0.0, 0.0));
        assert_eq!(f.ceiling(), None);
        assert!(UslFit::fit(&[(2.0, 100.0), (4.0, 150.0)]).is_none());
        assert!(UslFit::fit(&[(1.0, 100.0), (1.0, 110.0)]).is_none());
        assert!(UslFit::fit(&[(1.0, f64::NAN), (2.0, 10.0)]).is_none());
        // A falling curve with pure coherency cost.
        let pts = curve(1000.0, 0.0, 0.1, &[1.0, 2.0, 3.0, 6.0]);
        let f = UslFit::fit(&pts).unwrap();
        assert!(f.sigma < 1e-9 && (f.kappa - 0.1).abs() < 1e-9, "{f:?}");
    }
}
