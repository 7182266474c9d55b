//! Self-checks of a measurement in the manner of Lancet (Kogias, Mallon and
//! Bugnion, "Lancet: A self-correcting Latency Measuring Tool", USENIX ATC
//! 2019): did the client send on the distribution it claimed, is the run
//! stationary, are the latency samples independent, and how sure is a
//! percentile. Pure functions of numbers: no I/O, no clock.
//!
//! Distribution functions (normal quantile, binomial CDF) come from
//! `statrs`; the small least-squares fit of the Dickey-Fuller regression is
//! written here, as it is a (p+2)x(p+2) system.

use crate::histogram::LatencyHistogram;
use serde::{Deserialize, Serialize};
use statrs::distribution::{Binomial, ContinuousCDF, Discrete, DiscreteCDF, Normal};

/// Largest sample count for which [`order_stat_ranks`] searches the
/// binomial distribution exactly; above it, the normal approximation.
pub const EXACT_RANKS_MAX_N: u64 = 10_000;

/// Fewest points [`adf_test`] takes.
pub const ADF_MIN_POINTS: usize = 12;

/// Residual degrees of freedom [`adf_test`]'s default lag order leaves at
/// least (when the series is long enough for any lag).
pub const ADF_MIN_DF: usize = 10;

/// Fewest samples [`anderson_darling_exponential`] takes (Marsaglia and
/// Marsaglia's `errfix` is "not well-suited for n < 7").
pub const AD_MIN_SAMPLES: usize = 8;

/// Ranks `(j, k)`, 1-based, `j < k <= n`, of the order statistics that
/// bracket the `q`-quantile `xi_q` of a continuous distribution with at
/// least probability `confidence`, from `n` independent samples.
///
/// Distribution-free: the number of samples below `xi_q` is
/// `B ~ Binomial(n, q)`, and `X(j) <= xi_q < X(k)` exactly when
/// `j <= B <= k-1`, so the coverage is
/// `BinCDF(k-1; n, q) - BinCDF(j-1; n, q)` (Le Boudec, "Performance
/// Evaluation of Computer and Communication Systems", 2010, Theorem 2.1;
/// the interval Lancet reports).
///
/// For `n <= `[`EXACT_RANKS_MAX_N`] the search is exact: starting from the
/// mode of `B`, the interval of counts grows by whichever neighbour is more
/// likely until its mass reaches `confidence`, which gives the narrowest
/// interval (the binomial is unimodal) and keeps it about `n*q`. Above, the
/// normal approximation `j = floor(nq - z*sqrt(nq(1-q)))`,
/// `k = ceil(nq + z*sqrt(nq(1-q))) + 1` with `z` the `(1+confidence)/2`
/// normal quantile; where that leaves `1..=n` (a far tail, where the normal
/// approximation is poor) the exact search is used instead.
///
/// `None` when `q` or `confidence` is outside `(0, 1)`, or `n` is too small
/// to reach `confidence` (the best possible coverage is
/// `1 - q^n - (1-q)^n`: p99 with 50 samples reaches only 0.39).
pub fn order_stat_ranks(n: u64, q: f64, confidence: f64) -> Option<(u64, u64)> {
    if n < 2 || !(q > 0.0 && q < 1.0) || !(confidence > 0.0 && confidence < 1.0) {
        return None;
    }
    if n > EXACT_RANKS_MAX_N {
        let z = standard_normal_quantile((1.0 + confidence) / 2.0)?;
        let nq = n as f64 * q;
        let half = z * (nq * (1.0 - q)).sqrt();
        let j = (nq - half).floor();
        let k = (nq + half).ceil() + 1.0;
        if j >= 1.0 && k <= n as f64 {
            return Some((j as u64, k as u64));
        }
    }
    exact_ranks(n, q, confidence)
}

/// The exact search of [`order_stat_ranks`].
fn exact_ranks(n: u64, q: f64, confidence: f64) -> Option<(u64, u64)> {
    let b = Binomial::new(q, n).ok()?;
    // Counts 0 and n are outside every interval (no sample below, or none
    // above, the quantile).
    let best = 1.0 - q.powf(n as f64) - (1.0 - q).powf(n as f64);
    if best < confidence {
        return None;
    }
    // Counts lo..=hi, within 1..=n-1; ranks j = lo, k = hi + 1.
    let mode = (((n + 1) as f64 * q).floor() as u64).clamp(1, n - 1);
    let (mut lo, mut hi) = (mode, mode);
    let mut mass = b.pmf(mode);
    let center = n as f64 * q;
    let grow = |lo: &mut u64, hi: &mut u64, mass: &mut f64| -> bool {
        let down = (*lo > 1).then(|| b.pmf(*lo - 1));
        let up = (*hi < n - 1).then(|| b.pmf(*hi + 1));
        let take_down = match (down, up) {
            (None, None) => return false,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(d), Some(u)) if d != u => d > u,
            // A tie: keep the interval centred on n*q.
            _ => center - (*lo - 1) as f64 <= (*hi + 1) as f64 - center,
        };
        if take_down {
            *lo -= 1;
            *mass += down.unwrap_or(0.0);
        } else {
            *hi += 1;
            *mass += up.unwrap_or(0.0);
        }
        true
    };
    loop {
        while mass < confidence {
            if !grow(&mut lo, &mut hi, &mut mass) {
                return None;
            }
        }
        // The summed masses may be a rounding off the CDF: check with it.
        let coverage = b.cdf(hi) - b.cdf(lo - 1);
        if coverage >= confidence {
            return Some((lo, hi + 1));
        }
        if !grow(&mut lo, &mut hi, &mut mass) {
            return None;
        }
    }
}

/// Probability that the order statistics of ranks `j < k` (1-based) of `n`
/// samples bracket the `q`-quantile: `BinCDF(k-1; n, q) - BinCDF(j-1; n, q)`.
/// `None` for ranks outside `1..=n` or `q` outside `(0, 1)`.
pub fn order_stat_coverage(n: u64, q: f64, j: u64, k: u64) -> Option<f64> {
    if !(1 <= j && j < k && k <= n && q > 0.0 && q < 1.0) {
        return None;
    }
    let b = Binomial::new(q, n).ok()?;
    Some(b.cdf(k - 1) - b.cdf(j - 1))
}

/// The `p`-quantile of the standard normal distribution.
fn standard_normal_quantile(p: f64) -> Option<f64> {
    if !(p > 0.0 && p < 1.0) {
        return None;
    }
    Some(Normal::new(0.0, 1.0).ok()?.inverse_cdf(p))
}

/// A percentile of a latency histogram with its distribution-free
/// confidence interval, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PercentileInterval {
    /// The quantile, e.g. 0.99.
    pub q: f64,
    /// The percentile itself, us.
    pub value: f64,
    /// Lower end of the interval, us.
    pub lo: f64,
    /// Upper end of the interval, us.
    pub hi: f64,
    /// Samples counted as independent: the histogram's count over the
    /// thinning.
    pub n_effective: u64,
    /// Probability with which `lo..=hi` holds the true percentile.
    pub confidence: f64,
}

/// The `q`-quantile of `hist` with an interval that holds the true
/// quantile with probability `confidence`, assuming one value in every
/// `thinning` is independent of the others (0 counts as 1).
///
/// `n_effective = count / thinning`; the ranks `(j, k)` of
/// [`order_stat_ranks`]`(n_effective, q, confidence)` become the quantiles
/// `j/n_effective` and `k/n_effective` of the whole histogram, read with
/// HdrHistogram's `value_at_quantile` (the top of the value's bucket, as in
/// [`LatencyHistogram::summary`]) and converted from ns to us.
///
/// `None` when the histogram is empty or too small for the confidence, or
/// `q`/`confidence` is outside `(0, 1)`.
pub fn percentile_interval(
    hist: &LatencyHistogram,
    q: f64,
    confidence: f64,
    thinning: u64,
) -> Option<PercentileInterval> {
    let count = hist.len();
    let n_effective = count / thinning.max(1);
    let (j, k) = order_stat_ranks(n_effective, q, confidence)?;
    let h = hist.hdr();
    // Rank r of the whole histogram is the quantile (r - 1/2)/count: the
    // half keeps HdrHistogram's ceil(quantile x count) on r despite rounding.
    let at_rank = |rank: u64, of: u64| {
        let r = ((rank as f64 * count as f64 / of as f64).round() as u64).clamp(1, count);
        h.value_at_quantile((r as f64 - 0.5) / count as f64) as f64 / 1e3
    };
    Some(PercentileInterval {
        q,
        value: h.value_at_quantile(q) as f64 / 1e3,
        lo: at_rank(j, n_effective),
        hi: at_rank(k, n_effective),
        n_effective,
        confidence,
    })
}

/// The median of a set of values with its distribution-free interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MedianInterval {
    /// The sample median (the mean of the middle two for an even count).
    pub median: f64,
    /// Lower end of the interval.
    pub lo: f64,
    /// Upper end of the interval.
    pub hi: f64,
    /// Probability that `lo..=hi` holds the true median: at least the
    /// confidence asked for, or less when there were too few values.
    pub coverage: f64,
    /// Values used (finite ones).
    pub n: u64,
}

/// The median of `values` and the narrowest symmetric pair of order
/// statistics `(X(j), X(n+1-j))` that holds the true median with
/// probability at least `confidence`.
///
/// Distribution-free for continuous distributions: the coverage of that
/// pair is `P(j <= B <= n-j)` with `B ~ Binomial(n, 1/2)` (Le Boudec 2010,
/// Theorem 2.1; the table Lancet reads). When even `(X(1), X(n))` falls
/// short (fewer than 6 values for 95 %), the interval is the minimum to the
/// maximum and `coverage` is theirs, `1 - 2 * 0.5^n`.
///
/// Non-finite values are dropped. `None` when no value is left, or
/// `confidence` is outside `(0, 1)`.
pub fn median_interval(values: &[f64], confidence: f64) -> Option<MedianInterval> {
    if !(confidence > 0.0 && confidence < 1.0) {
        return None;
    }
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    let coverage_of = |j: usize| -> f64 {
        // 1 - 2 P(B <= j-1), by the symmetry of Binomial(n, 1/2).
        match Binomial::new(0.5, n as u64) {
            Ok(b) => 1.0 - 2.0 * b.cdf(j as u64 - 1),
            Err(_) => 0.0,
        }
    };
    let widest = 1.0 - 2.0 * 0.5f64.powi(n.min(2000) as i32);
    if n < 2 || widest < confidence {
        return Some(MedianInterval {
            median,
            lo: v[0],
            hi: v[n - 1],
            coverage: widest.max(0.0),
            n: n as u64,
        });
    }
    // The coverage falls as j grows: the largest j that still reaches it.
    let (mut good, mut bad) = (1usize, n / 2 + 1);
    while bad - good > 1 {
        let mid = (good + bad) / 2;
        if coverage_of(mid) >= confidence {
            good = mid;
        } else {
            bad = mid;
        }
    }
    Some(MedianInterval {
        median,
        lo: v[good - 1],
        hi: v[n - good],
        coverage: coverage_of(good),
        n: n as u64,
    })
}

/// An Anderson-Darling goodness-of-fit test.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdTest {
    /// The statistic A^2.
    pub statistic: f64,
    /// Probability of an A^2 at least this large if the samples came from
    /// the distribution tested.
    pub p_value: f64,
    /// Samples used.
    pub n: u64,
}

/// Anderson-Darling test of `samples` against the exponential distribution
/// with `rate` (in the inverse unit of the samples), fully specified: the
/// rate is given, not estimated from the samples ("case 0").
///
/// With `u_i = F(x_(i)) = 1 - exp(-rate x_(i))` over the sorted samples,
/// `A^2 = -n - (1/n) sum_i (2i-1) [ln u_i + ln(1 - u_(n+1-i))]`
/// (Anderson and Darling 1954). `ln(1 - u)` is `-rate x` exactly, and a
/// sample at or below 0, impossible under the exponential, counts as
/// `u = 1e-300` rather than making A^2 infinite.
///
/// The p-value is `1 - AD(n, A^2)` of G. Marsaglia and J. Marsaglia,
/// "Evaluating the Anderson-Darling Distribution", Journal of Statistical
/// Software 9(2), 2004: their `ADinf` approximation of the limiting
/// distribution plus their finite-n correction `errfix` (accurate to about
/// the 5th digit).
///
/// Non-finite samples are dropped. `None` with fewer than
/// [`AD_MIN_SAMPLES`] samples or a rate that is not positive and finite.
pub fn anderson_darling_exponential(samples: &[f64], rate: f64) -> Option<AdTest> {
    if !(rate.is_finite() && rate > 0.0) {
        return None;
    }
    let mut x: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
    if x.len() < AD_MIN_SAMPLES {
        return None;
    }
    x.sort_by(f64::total_cmp);
    let n = x.len();
    // ln F(x) and ln(1 - F(x)) for F(x) = 1 - exp(-rate x).
    let ln_cdf = |v: f64| (-(-rate * v).exp_m1()).max(1e-300).ln();
    let ln_sf = |v: f64| -rate * v.max(0.0);
    let sum: f64 = (0..n)
        .map(|i| (2 * i + 1) as f64 * (ln_cdf(x[i]) + ln_sf(x[n - 1 - i])))
        .sum();
    let statistic = -(n as f64) - sum / n as f64;
    let p_value = (1.0 - marsaglia_ad_cdf(n as u64, statistic)).clamp(0.0, 1.0);
    Some(AdTest {
        statistic,
        p_value,
        n: n as u64,
    })
}

/// `P(A^2 < z)` for `n` uniform samples: Marsaglia and Marsaglia (2004),
/// `AD(n, z) = ADinf(z) + errfix(n, ADinf(z))`.
fn marsaglia_ad_cdf(n: u64, z: f64) -> f64 {
    if z.is_nan() || z <= 0.0 {
        return 0.0;
    }
    let x = ad_inf(z);
    (x + ad_errfix(n as f64, x)).clamp(0.0, 1.0)
}

/// The limiting distribution of A^2, Marsaglia and Marsaglia (2004),
/// "short, practical version": max error 2e-6 below 2, 8e-7 above.
fn ad_inf(z: f64) -> f64 {
    if z < 2.0 {
        (-1.2337141 / z).exp() / z.sqrt()
            * (2.00012
                + (0.247105 - (0.0649821 - (0.0347962 - (0.011672 - 0.00168691 * z) * z) * z) * z)
                    * z)
    } else {
        (-(1.0776
            - (2.30695 - (0.43424 - (0.082433 - (0.008056 - 0.0003146 * z) * z) * z) * z) * z)
            .exp())
        .exp()
    }
}

/// The finite-n correction of Marsaglia and Marsaglia (2004) to `x = ADinf(z)`.
fn ad_errfix(n: f64, x: f64) -> f64 {
    if x > 0.8 {
        return (-130.2137
            + (745.2337 - (1705.091 - (1950.646 - (1116.360 - 255.7844 * x) * x) * x) * x) * x)
            / n;
    }
    let c = 0.01265 + 0.1757 / n;
    if x < c {
        let t = x / c;
        let t = t.sqrt() * (1.0 - t) * (49.0 * t - 102.0);
        return t * (0.0037 / (n * n) + 0.00078 / n + 0.00006) / n;
    }
    let t = (x - c) / (0.8 - c);
    let t = -0.00022633 + (6.54034 - (14.6538 - (14.458 - (8.259 - 1.91864 * t) * t) * t) * t) * t;
    t * (0.04213 + 0.01365 / n) / n
}

/// An augmented Dickey-Fuller unit-root test (constant, no trend).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdfTest {
    /// The statistic: the coefficient of `y_{t-1}` over its standard error.
    pub tau: f64,
    /// Lagged differences in the regression.
    pub lags: usize,
    /// Observations in the regression (`T`): the points less one less the lags.
    pub n: usize,
    /// MacKinnon (2010) critical value at 1 %, for `T`.
    pub critical_1pc: f64,
    /// MacKinnon (2010) critical value at 5 %, for `T`.
    pub critical_5pc: f64,
    /// MacKinnon (2010) critical value at 10 %, for `T`.
    pub critical_10pc: f64,
    /// `tau < critical_5pc`: the unit root is rejected at 5 %.
    pub stationary: bool,
}

/// Augmented Dickey-Fuller test of `series` with a constant and no trend
/// (Said and Dickey 1984): the least-squares regression
/// `dy_t = a + g y_{t-1} + sum_{i=1..p} c_i dy_{t-i} + e_t` over
/// `t = p+1 .. N-1`, and `tau = g / se(g)`. A series is stationary at 5 %
/// when `tau` is below the critical value: more negative means a stronger
/// pull back to the mean.
///
/// `lags` is `p`; by default Schwert's (1989) `floor(12 (N/100)^(1/4))`,
/// lowered so that at least [`ADF_MIN_DF`] residual degrees of freedom
/// remain (to 0 when even that cannot: at 12 points, 9 remain). An explicit
/// `lags` is used as given and needs one degree of freedom.
///
/// Critical values: MacKinnon, "Critical Values for Cointegration Tests",
/// Queen's Economics Department Working Paper 1227 (2010), Table 2, one
/// variable with a constant, `crit(T) = b0 + b1/T + b2/T^2 + b3/T^3` with
/// `T` the observations in the regression (as statsmodels' `adfuller`).
///
/// `None` when the series has fewer than [`ADF_MIN_POINTS`] points or a
/// non-finite one, the lags leave no degree of freedom, or the regression
/// is degenerate: a constant series (trivially stationary: a caller that
/// meets one should say so itself, as it has no statistic), an exact
/// straight line, or collinear lags.
pub fn adf_test(series: &[f64], lags: Option<usize>) -> Option<AdfTest> {
    let (y, dy) = adf_series(series)?;
    let p = lags.unwrap_or_else(|| adf_default_lags(series.len()));
    adf_result(&y, &dy, p)
}

/// [`adf_test`] with the lag order chosen by the Bayesian information
/// criterion among `0..=max_lags` (by default [`adf_test`]'s default lag
/// order), as statsmodels' `adfuller(autolag="BIC")`: every order is fitted
/// on the same observations (those the largest leaves), the one with the
/// smallest `BIC = T (ln 2pi + ln(RSS/T) + 1) + k ln T` wins (the smaller
/// order on a tie), and the test is that order's on all the observations
/// it leaves.
///
/// On short series this matters: with 40 points Schwert's rule gives 9
/// lags, and at that order white noise rejects the unit root about as
/// rarely as a random walk does (7 % and 5 % of 400 simulated series),
/// while the BIC choice rejects it for 99 % of the white noise and still
/// 5 % of the walks.
///
/// `None` as [`adf_test`].
pub fn adf_test_bic(series: &[f64], max_lags: Option<usize>) -> Option<AdfTest> {
    let (y, dy) = adf_series(series)?;
    let most = max_lags.unwrap_or_else(|| adf_default_lags(series.len()));
    let mut best: Option<(f64, usize)> = None;
    for p in 0..=most {
        let Some(fit) = adf_fit(&y, &dy, p, most) else {
            continue;
        };
        let t = fit.nobs as f64;
        let bic = t * ((2.0 * std::f64::consts::PI).ln() + (fit.rss / t).ln() + 1.0)
            + fit.k as f64 * t.ln();
        if best.is_none_or(|(b, _)| bic < b) {
            best = Some((bic, p));
        }
    }
    adf_result(&y, &dy, best?.1)
}

/// Schwert's lag order for `len` points, lowered to leave [`ADF_MIN_DF`]
/// residual degrees of freedom (0 when none can).
fn adf_default_lags(len: usize) -> usize {
    let schwert = (12.0 * (len as f64 / 100.0).powf(0.25)).floor() as usize;
    // T - (p+2) = (len-1-p) - (p+2) >= ADF_MIN_DF.
    schwert.min(len.saturating_sub(3 + ADF_MIN_DF) / 2)
}

/// The standardised series and its differences; `None` when too short,
/// not finite or constant. tau does not change under `y -> a + b y` (the
/// constant absorbs `a`), and the standardised system is well conditioned.
fn adf_series(series: &[f64]) -> Option<(Vec<f64>, Vec<f64>)> {
    let len = series.len();
    if len < ADF_MIN_POINTS || series.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mean = series.iter().sum::<f64>() / len as f64;
    let sd = (series.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / len as f64).sqrt();
    if !(sd > 0.0 && sd.is_finite()) {
        return None;
    }
    let y: Vec<f64> = series.iter().map(|v| (v - mean) / sd).collect();
    let dy: Vec<f64> = y.windows(2).map(|w| w[1] - w[0]).collect();
    Some((y, dy))
}

/// The test with `p` lags on every observation they leave.
fn adf_result(y: &[f64], dy: &[f64], p: usize) -> Option<AdfTest> {
    let fit = adf_fit(y, dy, p, p)?;
    let crit = |b: [f64; 4]| {
        let r = 1.0 / fit.nobs as f64;
        b[0] + b[1] * r + b[2] * r * r + b[3] * r * r * r
    };
    let critical_5pc = crit([-2.86154, -2.8903, -4.234, -40.040]);
    Some(AdfTest {
        tau: fit.tau,
        lags: p,
        n: fit.nobs,
        critical_1pc: crit([-3.43035, -6.5393, -16.786, -79.433]),
        critical_5pc,
        critical_10pc: crit([-2.56677, -1.5384, -2.809, 0.0]),
        stationary: fit.tau < critical_5pc,
    })
}

/// One Dickey-Fuller regression.
struct AdfFit {
    tau: f64,
    rss: f64,
    /// Observations.
    nobs: usize,
    /// Coefficients.
    k: usize,
}

/// The regression with `p` lags over the observations `t = first..`
/// (`first >= p`, an index into `dy`); `None` when it leaves no degree of
/// freedom or is degenerate.
fn adf_fit(y: &[f64], dy: &[f64], p: usize, first: usize) -> Option<AdfFit> {
    let k = p + 2;
    let nobs = dy.len().checked_sub(first)?;
    if first < p || nobs <= k {
        return None;
    }
    // Row of observation t: the regressors [1, y_{t-1}, dy_{t-1}, ...,
    // dy_{t-p}] of the formula, i.e. [1, y[t], dy[t-1], ..., dy[t-p]] here,
    // as dy[t] = y[t+1] - y[t].
    let row = |t: usize, out: &mut [f64]| {
        out[0] = 1.0;
        out[1] = y[t];
        for i in 1..=p {
            out[1 + i] = dy[t - i];
        }
    };
    let mut xtx = vec![0.0; k * k];
    let mut xty = vec![0.0; k];
    let mut x = vec![0.0; k];
    for (t, &d) in dy.iter().enumerate().skip(first) {
        row(t, &mut x);
        for a in 0..k {
            xty[a] += x[a] * d;
            for b in 0..=a {
                xtx[a * k + b] += x[a] * x[b];
            }
        }
    }
    for a in 0..k {
        for b in a + 1..k {
            xtx[a * k + b] = xtx[b * k + a];
        }
    }
    let chol = Cholesky::new(&xtx, k)?;
    let beta = chol.solve(&xty);
    let mut rss = 0.0;
    let mut tss = 0.0;
    for (t, &d) in dy.iter().enumerate().skip(first) {
        row(t, &mut x);
        let fit: f64 = x.iter().zip(&beta).map(|(a, b)| a * b).sum();
        rss += (d - fit).powi(2);
        tss += d * d;
    }
    // An exact fit (a straight line) leaves no error to scale tau by.
    if rss.is_nan() || rss <= 1e-20 * tss {
        return None;
    }
    let mut e1 = vec![0.0; k];
    e1[1] = 1.0;
    let inv_11 = chol.solve(&e1)[1];
    let se = (rss / (nobs - k) as f64 * inv_11).sqrt();
    let tau = beta[1] / se;
    tau.is_finite().then_some(AdfFit { tau, rss, nobs, k })
}

/// The Cholesky factor `L` (row-major, lower) of a symmetric positive
/// definite `k x k` matrix.
struct Cholesky {
    l: Vec<f64>,
    k: usize,
}

impl Cholesky {
    /// `None` when the matrix is not (numerically) positive definite.
    fn new(a: &[f64], k: usize) -> Option<Cholesky> {
        let mut l = vec![0.0; k * k];
        for i in 0..k {
            for j in 0..=i {
                let s: f64 = (0..j).map(|m| l[i * k + m] * l[j * k + m]).sum();
                if i == j {
                    let d = a[i * k + i] - s;
                    if d.is_nan() || d <= 1e-10 * a[i * k + i].abs() {
                        return None;
                    }
                    l[i * k + i] = d.sqrt();
                } else {
                    l[i * k + j] = (a[i * k + j] - s) / l[j * k + j];
                }
            }
        }
        Some(Cholesky { l, k })
    }

    /// `x` with `L L' x = b`.
    fn solve(&self, b: &[f64]) -> Vec<f64> {
        let (l, k) = (&self.l, self.k);
        let mut z = vec![0.0; k];
        for i in 0..k {
            let s: f64 = (0..i).map(|m| l[i * k + m] * z[m]).sum();
            z[i] = (b[i] - s) / l[i * k + i];
        }
        let mut x = vec![0.0; k];
        for i in (0..k).rev() {
            let s: f64 = (i + 1..k).map(|m| l[m * k + i] * x[m]).sum();
            x[i] = (z[i] - s) / l[i * k + i];
        }
        x
    }
}

/// The lag-1 sample autocorrelation
/// `r1 = sum_{t=1}^{n-1} (x_t - m)(x_{t+1} - m) / sum_{t=1}^{n} (x_t - m)^2`
/// (Box and Jenkins; statsmodels' `acf`), `m` the mean.
///
/// Non-finite values are dropped. `None` with fewer than 3 values or when
/// they are all equal.
pub fn lag1_autocorrelation(x: &[f64]) -> Option<f64> {
    let v: Vec<f64> = x.iter().copied().filter(|a| a.is_finite()).collect();
    lag1_of(&v)
}

fn lag1_of(v: &[f64]) -> Option<f64> {
    if v.len() < 3 {
        return None;
    }
    let m = v.iter().sum::<f64>() / v.len() as f64;
    let den: f64 = v.iter().map(|a| (a - m).powi(2)).sum();
    if !(den > 0.0 && den.is_finite()) {
        return None;
    }
    let num: f64 = v.windows(2).map(|w| (w[0] - m) * (w[1] - m)).sum();
    Some(num / den)
}

/// How often a series must be sampled for its samples to look independent.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Thinning {
    /// Keep one value in `stride`.
    pub stride: u64,
    /// Lag-1 autocorrelation of the thinned series (`None`: too short or
    /// constant).
    pub lag1: Option<f64>,
    /// Values in the thinned series.
    pub n: u64,
    /// `|lag1| <= 1.96 / sqrt(n)` at this stride.
    pub independent: bool,
}

/// Lancet's "sample less often until the samples are independent": the
/// smallest stride `k` in 1, 2, 4, ... up to `max_stride` for which the
/// thinned series `x[0], x[k], x[2k], ...` has a lag-1 autocorrelation
/// within `1.96/sqrt(n_thinned)` of zero (the 95 % band of white noise,
/// Bartlett). When none passes, the largest stride tried, with
/// `independent` false; when the autocorrelation is undefined (fewer than 3
/// values, or all equal), stride 1 with `lag1` `None` and `independent`
/// false. Non-finite values are dropped first.
pub fn independence_thinning(x: &[f64], max_stride: usize) -> Thinning {
    let v: Vec<f64> = x.iter().copied().filter(|a| a.is_finite()).collect();
    let mut stride = 1usize;
    let mut last = Thinning {
        stride: 1,
        lag1: None,
        n: v.len() as u64,
        independent: false,
    };
    loop {
        let thinned: Vec<f64> = v.iter().copied().step_by(stride).collect();
        let Some(r1) = lag1_of(&thinned) else {
            return last;
        };
        let n = thinned.len();
        last = Thinning {
            stride: stride as u64,
            lag1: Some(r1),
            n: n as u64,
            independent: r1.abs() <= 1.96 / (n as f64).sqrt(),
        };
        if last.independent || stride.saturating_mul(2) > max_stride.max(1) {
            return last;
        }
        stride *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    // Expected ranks: a brute-force search in Python over every pair
    // (j, k) for the narrowest with scipy.stats.binom coverage >= the
    // confidence (ties: the one centred on n*q), with that coverage.
    #[test]
    fn order_stat_ranks_are_the_narrowest_binomial_intervals() {
        for (n, q, c, width, coverage) in [
            (100, 0.5, 0.95, 20, 0.9539559330706572),
            (100, 0.9, 0.95, 12, 0.955690107191223),
            (1000, 0.99, 0.95, 13, 0.9635363098183776),
            (300, 0.99, 0.95, 10, 0.950694262223382),
            (20, 0.5, 0.95, 9, 0.9586105346679688),
            (1000, 0.5, 0.99, 82, 0.9904859597157918),
        ] {
            let (j, k) = order_stat_ranks(n, q, c).expect("reachable");
            assert_eq!(k - j, width, "n {n} q {q}: ({j}, {k})");
            let got = order_stat_coverage(n, q, j, k).expect("valid ranks");
            assert!(
                close(got, coverage, 1e-9),
                "n {n} q {q}: {got} vs {coverage}"
            );
        }
        // Where the narrowest pair is unique.
        assert_eq!(order_stat_ranks(1000, 0.99, 0.95), Some((984, 997)));
        assert_eq!(order_stat_ranks(20, 0.5, 0.95), Some((6, 15)));
    }

    #[test]
    fn order_stat_ranks_need_enough_samples() {
        // p99 of 50 samples: at most 1 - 0.99^50 - 0.01^50 = 0.39 coverage.
        assert_eq!(order_stat_ranks(50, 0.99, 0.95), None);
        assert_eq!(order_stat_ranks(0, 0.5, 0.95), None);
        assert_eq!(order_stat_ranks(1, 0.5, 0.95), None);
        assert_eq!(order_stat_ranks(100, 0.0, 0.95), None);
        assert_eq!(order_stat_ranks(100, 1.0, 0.95), None);
        assert_eq!(order_stat_ranks(100, f64::NAN, 0.95), None);
        assert_eq!(order_stat_ranks(100, 0.5, 1.0), None);
        // p99.99 of 50,000 samples: the normal bounds leave 1..=n, the
        // exact search answers; of 20,000 it is out of reach (1 - e^-2).
        let (j, k) = order_stat_ranks(50_000, 0.9999, 0.95).expect("reachable");
        assert!(k <= 50_000 && j >= 1);
        assert!(order_stat_coverage(50_000, 0.9999, j, k).unwrap() >= 0.95);
        assert_eq!(order_stat_ranks(20_000, 0.9999, 0.95), None);
    }

    // Normal-approximation ranks and their scipy.stats.binom coverage.
    #[test]
    fn large_samples_use_the_normal_approximation() {
        for (n, q, j, k, coverage) in [
            (10_001, 0.5, 4902, 5100, 0.9522907611993354),
            (20_000, 0.99, 19772, 19829, 0.9573016475419849),
            (1_000_000, 0.9, 899_412, 900_589, 0.9501989552212792),
        ] {
            assert_eq!(order_stat_ranks(n, q, 0.95), Some((j, k)), "n {n} q {q}");
            let got = order_stat_coverage(n, q, j, k).unwrap();
            assert!(close(got, coverage, 1e-7), "n {n} q {q}: {got}");
        }
    }

    proptest! {
        #[test]
        fn exact_ranks_reach_the_confidence(
            n in 2u64..3000, q in 0.01f64..0.99, c in 0.5f64..0.995
        ) {
            if let Some((j, k)) = order_stat_ranks(n, q, c) {
                prop_assert!(1 <= j && j < k && k <= n);
                prop_assert!(order_stat_coverage(n, q, j, k).unwrap() >= c);
            } else {
                // None only when even (1, n) falls short.
                let best = 1.0 - q.powf(n as f64) - (1.0 - q).powf(n as f64);
                prop_assert!(best < c + 1e-12, "best {}", best);
            }
        }

        #[test]
        fn approximate_ranks_nearly_reach_the_confidence(
            n in 10_001u64..5_000_000, q in 0.01f64..0.999, c in 0.8f64..0.99
        ) {
            let (j, k) = order_stat_ranks(n, q, c).expect("large n");
            prop_assert!(1 <= j && j < k && k <= n);
            prop_assert!(order_stat_coverage(n, q, j, k).unwrap() >= c - 0.002);
        }

        #[test]
        fn median_interval_holds_the_median(
            v in proptest::collection::vec(-1e6f64..1e6, 1..400), c in 0.5f64..0.99
        ) {
            let m = median_interval(&v, c).expect("values");
            prop_assert!(m.lo <= m.median && m.median <= m.hi);
            prop_assert_eq!(m.n, v.len() as u64);
            if m.lo > v.iter().copied().fold(f64::INFINITY, f64::min) {
                prop_assert!(m.coverage >= c);
            }
        }
    }

    #[test]
    fn percentile_interval_reads_the_ranks_from_the_histogram() {
        // 1, 2, ..., 1000 us.
        let mut h = LatencyHistogram::new();
        for i in 1..=1000u64 {
            h.record(i * 1000);
        }
        let p50 = percentile_interval(&h, 0.5, 0.95, 1).expect("enough values");
        let (j, k) = order_stat_ranks(1000, 0.5, 0.95).unwrap();
        // Buckets are 512 ns wide here and report their top.
        assert!(close(p50.lo, j as f64, 0.6), "{p50:?} vs {j}");
        assert!(close(p50.hi, k as f64, 0.6), "{p50:?} vs {k}");
        assert!(close(p50.value, 500.0, 0.6));
        assert!(p50.lo < p50.value && p50.value < p50.hi);
        assert_eq!((p50.q, p50.n_effective, p50.confidence), (0.5, 1000, 0.95));
        // One value in four independent: ranks of 250, read at 4x.
        let thin = percentile_interval(&h, 0.5, 0.95, 4).unwrap();
        let (j, k) = order_stat_ranks(250, 0.5, 0.95).unwrap();
        assert_eq!(thin.n_effective, 250);
        assert!(close(thin.lo, (4 * j) as f64, 0.6), "{thin:?}");
        assert!(close(thin.hi, (4 * k) as f64, 0.6), "{thin:?}");
        assert!(thin.hi - thin.lo > p50.hi - p50.lo);
        // p99 of 1000 values, but not of 50 effective ones.
        let p99 = percentile_interval(&h, 0.99, 0.95, 1).unwrap();
        assert!(p99.lo <= p99.value && p99.value <= p99.hi && p99.hi <= 1000.6);
        assert_eq!(percentile_interval(&h, 0.99, 0.95, 20), None);
        assert_eq!(
            percentile_interval(&LatencyHistogram::new(), 0.5, 0.95, 1),
            None
        );
        // Thinning 0 reads as 1.
        assert_eq!(percentile_interval(&h, 0.5, 0.95, 0), Some(p50));
    }

    #[test]
    fn percentile_interval_serialises_with_its_field_names() {
        let p = PercentileInterval {
            q: 0.99,
            value: 10.0,
            lo: 9.0,
            hi: 12.5,
            n_effective: 4000,
            confidence: 0.95,
        };
        let text = serde_json::to_string(&p).unwrap();
        assert_eq!(
            text,
            r#"{"q":0.99,"value":10.0,"lo":9.0,"hi":12.5,"n_effective":4000,"confidence":0.95}"#
        );
    }

    // Expected pairs: the largest j with scipy.stats.binom coverage
    // cdf(n-j) - cdf(j-1) >= 0.95 for Binomial(n, 1/2).
    #[test]
    fn median_interval_takes_the_narrowest_symmetric_pair() {
        for (n, j, coverage) in [
            (6usize, 1usize, 0.96875),
            (10, 2, 0.978515625),
            (20, 6, 0.9586105346679688),
            (101, 41, 0.9539559330706573),
            (1000, 469, 0.9537088026395018),
        ] {
            // Shuffled 1..=n.
            let v: Vec<f64> = (0..n).map(|i| ((i * 7919) % n + 1) as f64).collect();
            let m = median_interval(&v, 0.95).unwrap();
            assert_eq!((m.lo, m.hi), (j as f64, (n + 1 - j) as f64), "n {n}");
            assert!(close(m.coverage, coverage, 1e-12), "n {n}: {}", m.coverage);
            assert_eq!(m.median, (n as f64 + 1.0) / 2.0);
        }
    }

    #[test]
    fn median_interval_of_few_values_is_their_range() {
        let m = median_interval(&[3.0, 1.0, f64::NAN, 2.0, 5.0, 4.0], 0.95).unwrap();
        assert_eq!((m.median, m.lo, m.hi, m.n), (3.0, 1.0, 5.0, 5));
        assert_eq!(m.coverage, 1.0 - 2.0 * 0.5f64.powi(5));
        let m = median_interval(&[2.0, 1.0], 0.95).unwrap();
        assert_eq!((m.median, m.lo, m.hi, m.coverage), (1.5, 1.0, 2.0, 0.5));
        let m = median_interval(&[7.0], 0.95).unwrap();
        assert_eq!((m.median, m.lo, m.hi, m.coverage), (7.0, 7.0, 7.0, 0.0));
        assert_eq!(median_interval(&[], 0.95), None);
        assert_eq!(median_interval(&[f64::INFINITY], 0.95), None);
        assert_eq!(median_interval(&[1.0, 2.0], 1.5), None);
    }

    /// 20 draws from an exponential of mean 50 (numpy, seed 20261127,
    /// rounded to 3 decimals).
    const EXP_50: [f64; 20] = [
        42.572, 9.234, 14.745, 8.384, 222.008, 5.684, 75.5, 32.177, 48.869, 16.403, 6.01, 51.687,
        9.665, 6.09, 43.006, 19.138, 78.819, 15.731, 46.816, 162.58,
    ];

    // A^2 computed directly with numpy from the case-0 formula; p-values
    // from 400,000 Monte Carlo samples of 20 uniforms (standard error
    // below 0.001).
    #[test]
    fn anderson_darling_matches_numpy_and_monte_carlo() {
        for (rate, statistic, p_mc) in [
            (0.02, 0.787697187065767, 0.4889675),
            (0.04, 2.8256581514003116, 0.03453),
            (0.01, 5.452648414260658, 0.00191),
        ] {
            let t = anderson_darling_exponential(&EXP_50, rate).unwrap();
            assert!(close(t.statistic, statistic, 1e-9), "{rate}: {t:?}");
            assert!(close(t.p_value, p_mc, 0.005), "{rate}: {t:?} vs {p_mc}");
            assert_eq!(t.n, 20);
        }
    }

    // Stephens' (1974) asymptotic case-0 percentage points: A^2 = 1.933,
    // 2.492 and 3.857 at 10 %, 5 % and 1 %.
    #[test]
    fn anderson_darling_limit_has_stephens_points() {
        for (z, p) in [(1.933, 0.10), (2.492, 0.05), (3.857, 0.01)] {
            assert!(close(1.0 - ad_inf(z), p, 5e-4), "{z}: {}", 1.0 - ad_inf(z));
            // The finite-n correction vanishes as n grows.
            assert!(close(marsaglia_ad_cdf(1_000_000, z), ad_inf(z), 1e-6));
        }
        assert_eq!(marsaglia_ad_cdf(10, 0.0), 0.0);
        // At the far tail errfix leaves about 6e-4/n.
        assert!(marsaglia_ad_cdf(10, 50.0) > 0.9999);
    }

    #[test]
    fn anderson_darling_refuses_bad_input_without_panicking() {
        assert_eq!(anderson_darling_exponential(&EXP_50[..7], 0.02), None);
        assert_eq!(anderson_darling_exponential(&EXP_50, 0.0), None);
        assert_eq!(anderson_darling_exponential(&EXP_50, f64::NAN), None);
        let mut with_bad = EXP_50.to_vec();
        with_bad.extend([f64::NAN, f64::INFINITY]);
        assert_eq!(
            anderson_darling_exponential(&with_bad, 0.02),
            anderson_darling_exponential(&EXP_50, 0.02)
        );
        // A zero gap is impossible under the exponential: a huge but
        // finite statistic, p-value about 0.
        let mut zero = EXP_50.to_vec();
        zero[0] = 0.0;
        let t = anderson_darling_exponential(&zero, 0.02).unwrap();
        assert!(t.statistic.is_finite() && t.statistic > 10.0);
        assert!(t.p_value < 1e-4, "{t:?}");
    }

    /// An AR(1) series, y_t = 0.5 y_{t-1} + e_t + 100, and the random walk
    /// of the same 60 normal draws (numpy default_rng(7), 4 decimals).
    const AR: [f64; 60] = [
        100.0, 100.2987, 99.8752, 99.047, 99.0688, 98.5428, 99.3315, 101.006, 100.0108, 99.3849,
        100.1822, 100.448, 100.3294, 99.2342, 99.5878, 100.4892, 98.9004, 98.9926, 97.5951,
        97.5081, 96.9123, 98.2211, 97.8431, 99.1929, 99.7532, 99.6897, 97.3281, 98.1253, 99.0142,
        99.6204, 98.2801, 98.6622, 98.3526, 98.3675, 100.2447, 99.3148, 99.6249, 100.6969, 99.7648,
        99.7707, 99.9959, 100.0617, 98.8058, 99.479, 101.0983, 99.002, 100.3604, 100.2996, 99.5083,
        101.7546, 101.6396, 99.6205, 99.8847, 100.5191, 100.0707, 100.7183, 100.2926, 100.8135,
        101.8453, 100.2469,
    ];
    const WALK: [f64; 60] = [
        100.0012, 100.2999, 100.0258, 99.1352, 98.6805, 97.6889, 97.749, 99.0892, 98.597, 97.9765,
        98.4663, 98.8232, 98.9286, 97.9981, 97.9688, 98.6641, 97.3199, 96.8623, 94.9611, 93.6716,
        91.8299, 91.5948, 90.3274, 90.5987, 90.7555, 90.5686, 88.0518, 87.5131, 87.4646, 87.5779,
        86.0478, 85.57, 84.5915, 83.7827, 84.8436, 84.0361, 84.0036, 84.888, 84.3044, 84.1927,
        84.3032, 84.367, 83.1419, 83.218, 84.5768, 83.0297, 83.8891, 84.0085, 83.367, 85.3674,
        86.1297, 84.9304, 85.0049, 85.5816, 85.3928, 86.0757, 86.0092, 86.6764, 88.1149, 87.4392,
    ];

    // statsmodels 0.14 adfuller(x, maxlag=p, autolag=None, regression='c'):
    // (tau, nobs, 1 %, 5 %, 10 % critical values).
    #[test]
    fn adf_matches_statsmodels() {
        /// Series, lags, tau, observations, critical values.
        type Case<'a> = (&'a [f64], usize, f64, usize, [f64; 3]);
        let cases: [Case; 6] = [
            (
                &AR,
                0,
                -4.01734567828259,
                59,
                [-3.5463945337644063, -2.911939409384601, -2.5936515282964665],
            ),
            (
                &AR,
                2,
                -2.041451540795853,
                57,
                [-3.5506699942762414, -2.913766394626147, -2.5946240473991997],
            ),
            (
                &AR,
                10,
                -1.1204304601790114,
                49,
                [-3.5714715250448363, -2.922629480573571, -2.5993358475635153],
            ),
            (
                &WALK,
                0,
                -1.6702957263412916,
                59,
                [-3.5463945337644063, -2.911939409384601, -2.5936515282964665],
            ),
            (
                &WALK,
                2,
                -1.8367069123055015,
                57,
                [-3.5506699942762414, -2.913766394626147, -2.5946240473991997],
            ),
            (
                &WALK,
                10,
                -2.1473013642178054,
                49,
                [-3.5714715250448363, -2.922629480573571, -2.5993358475635153],
            ),
        ];
        for (series, p, tau, nobs, crit) in cases {
            let t = adf_test(series, Some(p)).unwrap();
            assert!(close(t.tau, tau, 1e-8), "p {p}: {} vs {tau}", t.tau);
            assert_eq!((t.lags, t.n), (p, nobs));
            assert!(close(t.critical_1pc, crit[0], 1e-12));
            assert!(close(t.critical_5pc, crit[1], 1e-12));
            assert!(close(t.critical_10pc, crit[2], 1e-12));
            assert_eq!(t.stationary, tau < crit[1]);
        }
        // Default lags for 60 points: floor(12 * 0.6^(1/4)) = 10.
        assert_eq!(adf_test(&AR, None), adf_test(&AR, Some(10)));
        assert!(adf_test(&AR, Some(0)).unwrap().stationary);
        assert!(!adf_test(&WALK, Some(0)).unwrap().stationary);
    }

    /// A stationary AR(2), y_t = 1.3 y_{t-1} - 0.6 y_{t-2} + e_t + 50
    /// (numpy default_rng(21), 4 decimals): its differences need a lag.
    const AR2: [f64; 80] = [
        50.0, 50.0, 48.2137, 49.3644, 50.1982, 49.839, 48.8689, 47.5433, 47.2613, 48.7476, 50.5992,
        52.1686, 50.7649, 48.1223, 48.6538, 50.3454, 53.44, 55.4746, 54.0286, 53.2376, 52.4202,
        51.4185, 49.5721, 48.5954, 48.2837, 49.5042, 50.5097, 52.5448, 52.228, 51.8406, 51.5548,
        50.0526, 47.9542, 48.3225, 49.5642, 50.2774, 51.0165, 50.4797, 50.252, 49.4347, 49.3027,
        50.4188, 50.6231, 51.4086, 50.4231, 49.4164, 47.6227, 47.1591, 47.8118, 48.6627, 49.3067,
        51.2413, 53.4535, 52.5291, 52.3899, 49.8663, 47.6578, 46.8619, 47.4369, 47.5034, 47.5698,
        48.4154, 48.7047, 48.6257, 49.6568, 51.3102, 51.8491, 51.6359, 50.9976, 49.8609, 48.7092,
        47.3677, 48.0008, 48.8963, 49.6273, 50.3782, 51.246, 52.8139, 52.6369, 51.3385,
    ];

    // statsmodels adfuller(x, maxlag=m, autolag='BIC', regression='c'): the
    // lag chosen, tau and nobs; and autolag=None at that lag.
    #[test]
    fn adf_bic_chooses_the_lags_statsmodels_does() {
        for m in [3, 10] {
            let t = adf_test_bic(&AR2, Some(m)).unwrap();
            assert_eq!((t.lags, t.n), (1, 78), "maxlag {m}");
            assert!(close(t.tau, -6.181525055812224, 1e-8), "{t:?}");
            assert!(close(t.critical_5pc, -2.8993754262546574, 1e-12));
        }
        assert_eq!(adf_test_bic(&AR2, None).unwrap().lags, 1);
        // At a fixed order: statsmodels' tau for 0 and 2 lags.
        assert!(close(
            adf_test(&AR2, Some(0)).unwrap().tau,
            -2.9997860763229154,
            1e-8
        ));
        assert!(close(
            adf_test(&AR2, Some(2)).unwrap().tau,
            -5.149194914061211,
            1e-8
        ));
        // The AR(1) and the walk need none: the lag-free test.
        assert_eq!(adf_test_bic(&AR, Some(10)), adf_test(&AR, Some(0)));
        assert_eq!(adf_test_bic(&WALK, Some(10)), adf_test(&WALK, Some(0)));
        // First 40 points, maxlag 9: statsmodels' tau of the lag-free test.
        let t = adf_test_bic(&AR[..40], Some(9)).unwrap();
        assert_eq!((t.lags, t.n), (0, 39));
        assert!(close(t.tau, -3.2956972479932993, 1e-8), "{t:?}");
        let t = adf_test_bic(&WALK[..40], None).unwrap();
        assert!(close(t.tau, -0.13984755861819445, 1e-8), "{t:?}");
        assert_eq!(adf_test_bic(&[5.0; 40], None), None);
        assert_eq!(adf_test_bic(&AR[..11], None), None);
    }

    #[test]
    fn adf_default_lags_keep_ten_degrees_of_freedom() {
        // 20 points: Schwert gives 8, which would leave 19 - 8 - 10 = 1.
        let t = adf_test(&AR[..20], None).unwrap();
        assert_eq!(t.lags, 3);
        assert!(t.n - (t.lags + 2) >= ADF_MIN_DF);
        // 12 points: lag-free, 9 left.
        assert_eq!(adf_test(&AR[..12], None).unwrap().lags, 0);
    }

    #[test]
    fn adf_refuses_short_constant_and_degenerate_series() {
        assert_eq!(adf_test(&AR[..11], None), None);
        assert_eq!(adf_test(&[5.0; 40], None), None);
        let line: Vec<f64> = (0..40).map(|i| 3.0 + 0.5 * i as f64).collect();
        assert_eq!(adf_test(&line, Some(0)), None);
        let mut bad = AR.to_vec();
        bad[3] = f64::NAN;
        assert_eq!(adf_test(&bad, None), None);
        // Lags that leave no degree of freedom.
        assert_eq!(adf_test(&AR[..20], Some(17)), None);
        assert_eq!(adf_test(&AR[..20], Some(30)), None);
    }

    // statsmodels acf(x, nlags=1, fft=False)[1].
    #[test]
    fn lag1_autocorrelation_matches_statsmodels() {
        assert!(close(
            lag1_autocorrelation(&AR).unwrap(),
            0.552928643639007,
            1e-12
        ));
        assert!(close(
            lag1_autocorrelation(&WALK).unwrap(),
            0.9653945790593094,
            1e-12
        ));
        assert_eq!(lag1_autocorrelation(&[1.0, 2.0]), None);
        assert_eq!(lag1_autocorrelation(&[4.0; 10]), None);
    }

    #[test]
    fn thinning_stops_at_the_first_independent_stride() {
        // Runs of four: correlated at lag 1 (r1 = 1/2), not at stride 2.
        let runs: Vec<f64> = (0..400)
            .map(|i| if (i / 4) % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        let t = independence_thinning(&runs, 64);
        assert_eq!((t.stride, t.n, t.independent), (2, 200, true));
        assert!(close(t.lag1.unwrap(), 1.0 / 200.0, 1e-12), "{t:?}");
        // Alternating values: r1 ~ -1, and constant at stride 2 (no r1):
        // stride 1, flagged.
        let alternating: Vec<f64> = (0..400).map(|i| f64::from(i % 2)).collect();
        let t = independence_thinning(&alternating, 64);
        assert_eq!((t.stride, t.independent), (1, false), "{t:?}");
        assert!(t.lag1.unwrap() < -0.99);
        // Seeded white noise is independent at once.
        let mut rng = crate::SeededRng::new(3);
        let noise: Vec<f64> = (0..2000).map(|_| rng.below(1000) as f64).collect();
        let t = independence_thinning(&noise, 64);
        assert_eq!((t.stride, t.n), (1, 2000));
        assert!(t.independent, "{t:?}");
        // A random walk is not, even at stride 64: the largest stride, flagged.
        let mut walk = vec![0.0];
        for _ in 0..4000 {
            let step = if rng.below(2) == 0 { -1.0 } else { 1.0 };
            walk.push(walk[walk.len() - 1] + step);
        }
        let t = independence_thinning(&walk, 64);
        assert_eq!((t.stride, t.n), (64, 63));
        assert!(!t.independent);
        assert_eq!(independence_thinning(&[1.0], 64).lag1, None);
    }
}
