//! The one seeded random-number generator of connlab.

use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256StarStar;

/// connlab's seeded generator: xoshiro256** (from `rand_xoshiro`) seeded
/// from a `u64` through SplitMix64, so the same seed gives the same sequence
/// on every platform and version. It implements [`RngCore`], so `rand`'s
/// distributions and sampling take it too.
#[derive(Clone, Debug)]
pub struct SeededRng(Xoshiro256StarStar);

impl SeededRng {
    /// A generator for this seed.
    pub fn new(seed: u64) -> Self {
        SeededRng(Xoshiro256StarStar::seed_from_u64(seed))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A uniform sample in `[0, 1)` (53 random bits).
    pub fn unit_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform sample in `0..n`, without bias (Lemire's multiply and
    /// reject); 0 when `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // 2^64 mod n: low products under it would over-represent some values.
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = u128::from(self.next_u64()) * u128::from(n);
            if m as u64 >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// True with probability `p` (never for `p <= 0`, always for `p >= 1`).
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (p >= 1.0 || self.unit_f64() < p)
    }
}

impl RngCore for SeededRng {
    fn next_u32(&mut self) -> u32 {
        self.0.next_u32()
    }

    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        self.0.fill_bytes(dst);
    }
}

#[cfg(test)]
mod tests {
    use super::SeededRng;

    #[test]
    fn keeps_its_sequence() {
        // xoshiro256** seeded by SplitMix64: linkem's validation runs were
        // made with these values, so a change of generator shows here.
        let mut r = SeededRng::new(1);
        let v: Vec<u64> = (0..3).map(|_| r.next_u64()).collect();
        assert_eq!(
            v,
            [
                12966619160104079557,
                9600361134598540522,
                10590380919521690900
            ]
        );
        let mut r = SeededRng::new(0xdead_beef);
        assert_eq!(r.next_u64(), 14219364052333592195);
        assert_eq!(r.next_u64(), 7332719151195188792);
    }

    #[test]
    fn unit_is_in_the_unit_interval_and_below_in_range() {
        let mut r = SeededRng::new(7);
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            let u = r.unit_f64();
            assert!((0.0..1.0).contains(&u));
            seen[r.below(10) as usize] += 1;
        }
        // Every value comes up, none far from a tenth.
        assert!(seen.iter().all(|&n| (800..1200).contains(&n)), "{seen:?}");
        assert_eq!(r.below(0), 0);
        assert_eq!(r.below(1), 0);
    }

    #[test]
    fn chance_keeps_its_bounds() {
        let mut r = SeededRng::new(3);
        assert!((0..100).all(|_| !r.chance(0.0)));
        assert!((0..100).all(|_| r.chance(1.0)));
        let hits = (0..10_000).filter(|_| r.chance(0.25)).count();
        assert!((2_200..2_800).contains(&hits), "{hits}");
    }
}
