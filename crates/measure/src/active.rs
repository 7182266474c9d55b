//! The seeded choice of which connections carry traffic.

use crate::ratio::ActiveRatio;
use crate::rng::SeededRng;

/// Seeded choice of `ratio.active_count(n)` distinct connection indices out
/// of `0..n`, sorted ascending; the same seed gives the same set.
pub fn choose_active(n: usize, ratio: ActiveRatio, seed: u64) -> Vec<usize> {
    let k = ratio.active_count(n);
    let mut rng = SeededRng::new(seed);
    let mut chosen = rand::seq::index::sample(&mut rng, n, k).into_vec();
    chosen.sort_unstable();
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn same_seed_same_set() {
        let r = ActiveRatio::new(0.25).unwrap();
        assert_eq!(choose_active(1000, r, 9), choose_active(1000, r, 9));
        assert_ne!(choose_active(1000, r, 9), choose_active(1000, r, 10));
    }

    #[test]
    fn chooses_a_sixteenth_of_a_thousand_as_63_distinct_sorted_indices() {
        let set = choose_active(1000, "1/16".parse().unwrap(), 1);
        assert_eq!(set.len(), 63);
        assert!(set.windows(2).all(|w| w[0] < w[1]));
        assert!(set.iter().all(|&i| i < 1000));
    }

    #[test]
    fn full_ratio_chooses_every_connection() {
        let all = choose_active(500, ActiveRatio::new(1.0).unwrap(), 4);
        assert_eq!(all, (0..500).collect::<Vec<_>>());
        assert!(choose_active(0, ActiveRatio::new(0.5).unwrap(), 4).is_empty());
    }

    proptest! {
        #[test]
        fn chooses_the_right_number_of_distinct_sorted_indices(
            n in 1usize..5000, r in 0.0001f64..=1.0, seed in any::<u64>()
        ) {
            let ratio = ActiveRatio::new(r).unwrap();
            let set = choose_active(n, ratio, seed);
            prop_assert_eq!(set.len(), ratio.active_count(n));
            prop_assert!(set.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(set.iter().all(|&i| i < n));
        }
    }
}
