//! A stateless 64-bit mixer for choices that must be reproducible and agree
//! between threads or processes without shared state (which file a request
//! asks for, which backend an address maps to).

/// splitmix64 (Steele, Lea and Flood): a bijective mix of `x` whose outputs
/// pass as uniform for neighbouring inputs.
pub fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_and_spread() {
        // The reference implementation's first output for seed 0.
        assert_eq!(splitmix64(0), 0xe220_a839_7b1d_cdaf);
        let high = (0..10_000u64).filter(|i| splitmix64(*i) >> 63 == 1).count();
        assert!((4_500..5_500).contains(&high), "{high}");
    }
}
