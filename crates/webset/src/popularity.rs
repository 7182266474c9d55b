//! Which file each request asks for.

use crate::manifest::Manifest;
use connlab_measure::SeededRng;

/// How requests choose among a manifest's files.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Popularity {
    /// By the manifest's `weight` column.
    Manifest,
    /// Every file equally often.
    Uniform,
    /// Zipf with this exponent over the manifest's order (the first file is
    /// the most popular).
    Zipf(f64),
}

impl std::str::FromStr for Popularity {
    type Err = String;
    /// `manifest`, `uniform`, `zipf` (exponent 1) or `zipf:S`.
    fn from_str(s: &str) -> Result<Popularity, String> {
        match s.trim() {
            "manifest" => Ok(Popularity::Manifest),
            "uniform" => Ok(Popularity::Uniform),
            "zipf" => Ok(Popularity::Zipf(1.0)),
            other => {
                let exp = other.strip_prefix("zipf:").ok_or_else(|| {
                    format!("{other:?}: expected manifest, uniform, zipf or zipf:EXPONENT")
                })?;
                let v: f64 = exp
                    .parse()
                    .map_err(|_| format!("{other:?}: {exp:?} is not a number"))?;
                if v.is_finite() && (0.0..=10.0).contains(&v) {
                    Ok(Popularity::Zipf(v))
                } else {
                    Err(format!("{other:?}: the exponent must be between 0 and 10"))
                }
            }
        }
    }
}

/// Picks manifest entries (their indices) by a popularity: a cumulative
/// table searched by a uniform number, so a caller can derive the choice
/// from any uniform source (the load generator hashes each request's
/// sequence number, so sender and receiver agree without sharing state).
#[derive(Clone, Debug)]
pub struct RequestPicker {
    /// Running sums of the weights, normalised to end at 1.
    cumulative: Vec<f64>,
}

impl RequestPicker {
    /// A picker over `manifest`'s entries (the manifest is never empty and
    /// its weights are positive, so this only fails on overflow to infinity).
    pub fn new(manifest: &Manifest, popularity: Popularity) -> Result<RequestPicker, String> {
        let weights: Vec<f64> = match popularity {
            Popularity::Manifest => manifest.entries.iter().map(|e| e.weight).collect(),
            Popularity::Uniform => vec![1.0; manifest.entries.len()],
            Popularity::Zipf(s) => (1..=manifest.entries.len())
                .map(|r| 1.0 / (r as f64).powf(s))
                .collect(),
        };
        let total: f64 = weights.iter().sum();
        if weights.is_empty() || !(total.is_finite() && total > 0.0) {
            return Err(format!(
                "popularity weights sum to {total}: nothing to pick"
            ));
        }
        let mut run = 0.0;
        let cumulative = weights
            .iter()
            .map(|w| {
                run += w;
                run / total
            })
            .collect();
        Ok(RequestPicker { cumulative })
    }

    /// The entry for a uniform number `u` in [0, 1).
    pub fn pick_at(&self, u: f64) -> usize {
        self.cumulative
            .partition_point(|&c| c <= u)
            .min(self.cumulative.len() - 1)
    }

    /// The index of the next request's file.
    pub fn pick(&self, rng: &mut SeededRng) -> usize {
        self.pick_at(rng.unit_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::ManifestEntry;

    fn three(weights: [f64; 3]) -> Manifest {
        Manifest {
            entries: weights
                .iter()
                .enumerate()
                .map(|(i, w)| ManifestEntry {
                    path: format!("f{i}"),
                    size_bytes: 1,
                    weight: *w,
                })
                .collect(),
        }
    }

    #[test]
    fn picks_follow_the_popularity() {
        let m = three([1.0, 2.0, 7.0]);
        let mut rng = SeededRng::new(1);
        for (pop, expect) in [
            (Popularity::Manifest, [0.1, 0.2, 0.7]),
            (Popularity::Uniform, [1.0 / 3.0; 3]),
            (Popularity::Zipf(1.0), [6.0 / 11.0, 3.0 / 11.0, 2.0 / 11.0]),
        ] {
            let p = RequestPicker::new(&m, pop).unwrap();
            let mut counts = [0usize; 3];
            for _ in 0..60_000 {
                counts[p.pick(&mut rng)] += 1;
            }
            for (c, e) in counts.iter().zip(expect) {
                let share = *c as f64 / 60_000.0;
                assert!((share - e).abs() < 0.01, "{pop:?}: {counts:?}");
            }
        }
    }

    #[test]
    fn popularity_parses() {
        assert_eq!("zipf:0.8".parse(), Ok(Popularity::Zipf(0.8)));
        assert_eq!("uniform".parse(), Ok(Popularity::Uniform));
        assert!("zipf:x".parse::<Popularity>().is_err());
        assert!("zipf:-1".parse::<Popularity>().is_err());
        assert!("popular".parse::<Popularity>().is_err());
    }
}
