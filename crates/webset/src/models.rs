//! The file-set models. Each turns a seed and options into a [`Manifest`].

use crate::manifest::{Manifest, ManifestEntry};
use connlab_measure::SeededRng;
use rand::seq::SliceRandom;
use rand::Rng;
use rand_distr::{Distribution, LogNormal, Pareto};
use statrs::distribution::{ContinuousCDF, Normal};

/// Files in the paper's set.
pub const PAPER_COUNT: usize = 861;
/// The paper's smallest file, bytes.
pub const PAPER_MIN: u64 = 35;
/// The paper's largest file: 729 KB, with KB = 1,000 bytes.
pub const PAPER_MAX: u64 = 729_000;
/// The paper's mean file size: 9.6 KB, with KB = 1,000 bytes.
pub const PAPER_MEAN: u64 = 9_600;

/// A file-set model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    /// The load-balancing paper's set (see [`paper_sizes`]).
    Paper,
    /// SPECweb96: directories of 36 files in four size classes.
    Specweb96,
    /// SURGE: lognormal body, Pareto tail, Zipf popularity.
    Surge,
}

impl Model {
    /// Every model.
    pub const ALL: [Model; 3] = [Model::Paper, Model::Specweb96, Model::Surge];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Model::Paper => "paper",
            Model::Specweb96 => "specweb96",
            Model::Surge => "surge",
        }
    }
}

impl std::str::FromStr for Model {
    type Err = String;
    fn from_str(s: &str) -> Result<Model, String> {
        Model::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown model {s:?}: expected paper, specweb96 or surge"))
    }
}

/// Options of [`generate`]; each model uses the ones that apply to it.
#[derive(Clone, Copy, Debug)]
pub struct ModelOptions {
    /// Seed of every random choice.
    pub seed: u64,
    /// `specweb96`: directories (36 files each).
    pub directories: usize,
    /// `surge`: files.
    pub files: usize,
    /// `surge`: Zipf exponent of popularity.
    pub zipf: f64,
    /// `surge`: largest file, bytes (the Pareto tail is cut here).
    pub max_size: u64,
}

impl Default for ModelOptions {
    fn default() -> ModelOptions {
        ModelOptions {
            seed: 1,
            directories: 10,
            files: 2_000,
            zipf: 1.0,
            max_size: 10_000_000,
        }
    }
}

/// Generates a model's file set.
pub fn generate(model: Model, o: &ModelOptions) -> Manifest {
    match model {
        Model::Paper => paper(o.seed),
        Model::Specweb96 => specweb96(o.seed, o.directories.max(1)),
        Model::Surge => surge(o),
    }
}

/// The paper's 861 sizes, smallest first.
///
/// The paper gives three facts: 861 files, 35 B to 729 KB, mean 9.6 KB. The
/// sizes are the order statistics of a lognormal, taken deterministically
/// at the plotting positions `(i - 0.5) / 861`, fitted to those facts:
/// - the smallest file is 35 B and is the lognormal's first plotting
///   position, which ties `mu` to `sigma`: `ln 35 = mu + sigma * z(0.5/861)`;
/// - `sigma` is then the one value (found by bisection) for which the 859
///   middle files plus 35 B plus the largest file average exactly 9.6 KB;
/// - the largest file is set to 729 KB, the observed maximum (a web set's
///   largest file is an outlier that a two-parameter body does not place);
/// - sizes are rounded to whole bytes and the rounding remainder is spread
///   over the middle files, one byte each, so the mean is exactly 9,600 B.
///
/// The fit gives `sigma` ≈ 1.5 and a median of about 3.4 KB, typical of web
/// files of the time (most files small, a few large ones carry the bytes).
pub fn paper_sizes() -> Vec<u64> {
    let n = PAPER_COUNT;
    let target_total = PAPER_MEAN * n as u64;
    // A unit normal always builds (mean 0, sd 1).
    let normal = Normal::new(0.0, 1.0).unwrap_or_else(|_| unreachable!());
    let z: Vec<f64> = (1..=n)
        .map(|i| normal.inverse_cdf((i as f64 - 0.5) / n as f64))
        .collect();
    let body = |sigma: f64| -> Vec<f64> {
        // ln x_i = mu + sigma z_i with mu + sigma z_1 = ln 35.
        (1..n - 1)
            .map(|i| (PAPER_MIN as f64) * (sigma * (z[i] - z[0])).exp())
            .map(|x| x.clamp(PAPER_MIN as f64, PAPER_MAX as f64))
            .collect()
    };
    let total =
        |sigma: f64| -> f64 { body(sigma).iter().sum::<f64>() + (PAPER_MIN + PAPER_MAX) as f64 };
    let (mut lo, mut hi) = (0.01f64, 5.0f64);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if total(mid) < target_total as f64 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let mut sizes: Vec<u64> = std::iter::once(PAPER_MIN)
        .chain(body(lo).into_iter().map(|x| x.round() as u64))
        .chain(std::iter::once(PAPER_MAX))
        .collect();
    // Spread the rounding remainder over the middle files, largest first.
    let mut diff = target_total as i64 - sizes.iter().sum::<u64>() as i64;
    let mut i = n - 2;
    while diff != 0 && i > 0 {
        if diff > 0 && sizes[i] < PAPER_MAX {
            sizes[i] += 1;
            diff -= 1;
        } else if diff < 0 && sizes[i] > PAPER_MIN {
            sizes[i] -= 1;
            diff += 1;
        }
        i = if i == 1 { n - 2 } else { i - 1 };
    }
    sizes.sort_unstable();
    sizes
}

/// The paper's set: sizes from [`paper_sizes`], assigned to file names in a
/// seeded random order, every file equally popular (the paper's clients
/// chose files at random).
fn paper(seed: u64) -> Manifest {
    let mut sizes = paper_sizes();
    sizes.shuffle(&mut SeededRng::new(seed));
    Manifest {
        entries: sizes
            .into_iter()
            .enumerate()
            .map(|(i, size_bytes)| ManifestEntry {
                path: format!("paper/f{:03}.html", i + 1),
                size_bytes,
                weight: 1.0,
            })
            .collect(),
    }
}

/// SPECweb96: each directory holds four classes of nine files, class `c`
/// file `k` (1..=9) being `k * 1024 * 10^c / 10` bytes (class 0: 102 B to
/// 921 B, ... class 3: 102 KB to 921 KB). Requests go 35% to class 0, 50%
/// to class 1, 14% to class 2 and 1% to class 3. Within a class every file
/// is equally likely here (SPECweb96's own within-class distribution is not
/// reproduced), and every directory is equally popular. The seed does not
/// change this model.
fn specweb96(_seed: u64, directories: usize) -> Manifest {
    const CLASS_MIX: [f64; 4] = [0.35, 0.50, 0.14, 0.01];
    let mut entries = Vec::with_capacity(directories * 36);
    for d in 0..directories {
        for (c, class_share) in CLASS_MIX.iter().enumerate() {
            for k in 1..=9u64 {
                entries.push(ManifestEntry {
                    path: format!("specweb96/dir{d:05}/class{c}_{k}"),
                    size_bytes: k * 1024 * 10u64.pow(c as u32) / 10,
                    // Per million requests.
                    weight: class_share / 9.0 / directories as f64 * 1e6,
                });
            }
        }
    }
    Manifest { entries }
}

/// SURGE (Barford and Crovella, 1998): sizes from a lognormal body
/// (mu 9.357, sigma 1.318, in bytes) with probability 0.93 and a Pareto
/// tail (k 133,000 B, alpha 1.1) otherwise, cut at `max_size`; popularity
/// Zipf with exponent `zipf` over a seeded random ranking (popularity and
/// size independent, as SURGE assumes).
fn surge(o: &ModelOptions) -> Manifest {
    let mut rng = SeededRng::new(o.seed);
    // Constant, valid parameters.
    let body = LogNormal::new(9.357, 1.318).unwrap_or_else(|_| unreachable!());
    let tail = Pareto::new(133_000.0, 1.1).unwrap_or_else(|_| unreachable!());
    let n = o.files.max(1);
    let max = o.max_size.max(1) as f64;
    let sizes: Vec<u64> = (0..n)
        .map(|_| {
            let x: f64 = if rng.random_bool(0.93) {
                body.sample(&mut rng)
            } else {
                tail.sample(&mut rng)
            };
            x.clamp(1.0, max).round() as u64
        })
        .collect();
    let mut ranks: Vec<usize> = (1..=n).collect();
    ranks.shuffle(&mut rng);
    let s = if o.zipf.is_finite() && o.zipf >= 0.0 {
        o.zipf
    } else {
        1.0
    };
    Manifest {
        entries: sizes
            .into_iter()
            .zip(ranks)
            .enumerate()
            .map(|(i, (size_bytes, rank))| ManifestEntry {
                path: format!("surge/f{:05}.html", i + 1),
                size_bytes,
                weight: 1e6 / (rank as f64).powf(s),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_paper_set_has_the_papers_three_facts() {
        let m = generate(Model::Paper, &ModelOptions::default());
        let s = m.stats().unwrap();
        assert_eq!(s.count, 861);
        assert_eq!(s.min, 35);
        assert_eq!(s.max, 729_000);
        assert_eq!(s.total, 861 * 9_600, "mean exactly 9.6 KB");
        assert!(s.median > 1_000.0 && s.median < 9_600.0, "{s:?}");
    }

    #[test]
    fn models_are_reproducible_and_seeded() {
        for model in Model::ALL {
            let a = generate(model, &ModelOptions::default());
            let b = generate(model, &ModelOptions::default());
            assert_eq!(a, b, "{model:?}");
        }
        let other = ModelOptions {
            seed: 2,
            ..ModelOptions::default()
        };
        assert_ne!(
            generate(Model::Surge, &ModelOptions::default()),
            generate(Model::Surge, &other)
        );
        assert_ne!(
            generate(Model::Paper, &ModelOptions::default()),
            generate(Model::Paper, &other),
            "the seed reorders which name gets which size"
        );
    }

    #[test]
    fn specweb96_classes_and_mix() {
        let m = generate(
            Model::Specweb96,
            &ModelOptions {
                directories: 2,
                ..ModelOptions::default()
            },
        );
        assert_eq!(m.entries.len(), 72);
        let total: f64 = m.entries.iter().map(|e| e.weight).sum();
        let class = |c: u32| -> f64 {
            m.entries
                .iter()
                .filter(|e| e.path.contains(&format!("class{c}_")))
                .map(|e| e.weight)
                .sum::<f64>()
                / total
        };
        for (c, share) in [(0, 0.35), (1, 0.50), (2, 0.14), (3, 0.01)] {
            assert!((class(c) - share).abs() < 1e-9, "class {c}");
        }
        let s = m.stats().unwrap();
        assert_eq!(s.min, 102);
        assert_eq!(s.max, 9 * 1024 * 100);
    }

    #[test]
    fn surge_sizes_stay_under_the_cut() {
        let o = ModelOptions {
            files: 5_000,
            max_size: 1_000_000,
            ..ModelOptions::default()
        };
        let s = generate(Model::Surge, &o).stats().unwrap();
        assert!(s.max <= 1_000_000);
        assert_eq!(s.count, 5_000);
        // The lognormal body's median is e^9.357 ≈ 11.6 KB.
        assert!(s.median > 6_000.0 && s.median < 20_000.0, "{s:?}");
    }
}
