//! The active ratio: the share of open connections that carry traffic
//! (communication locality). Parsed once, valid everywhere after.

use serde::Serialize;
use std::str::FromStr;

/// The share of connections that carry traffic, in (0, 1]; parsed once,
/// valid everywhere after.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ActiveRatio(f64);

/// Why a ratio did not parse.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RatioError {
    /// Not a decimal, fraction or percentage (or a fraction over 0, or NaN):
    /// write it as `0.0625`, `1/16` or `6.25%`.
    #[error(
        "{0:?} is not a ratio: use a decimal (0.0625), a fraction (1/16) or a percentage (6.25%)"
    )]
    Syntax(String),
    /// A number outside (0, 1]: at least one connection must carry traffic,
    /// and no more than all of them.
    #[error("active ratio {0} must be above 0 and at most 1")]
    OutOfRange(String),
}

impl ActiveRatio {
    /// A ratio in (0, 1].
    ///
    /// # Errors
    ///
    /// [`RatioError::OutOfRange`] for 0, negatives, values above 1 and NaN.
    pub fn new(r: f64) -> Result<Self, RatioError> {
        if r.is_finite() && r > 0.0 && r <= 1.0 {
            Ok(ActiveRatio(r))
        } else {
            Err(RatioError::OutOfRange(r.to_string()))
        }
    }

    /// The ratio as a number in (0, 1].
    pub fn get(self) -> f64 {
        self.0
    }

    /// `ceil(ratio x n)` active connections, at least one when `n > 0`.
    pub fn active_count(self, connections: usize) -> usize {
        if connections == 0 {
            return 0;
        }
        // Parsing the ratio and multiplying each round by at most half an ulp, so
        // shaving a few ulps off absorbs exactly that: 0.1 x 30 is
        // 3.0000000000000004 and must give 3, not 4; 62.5 still gives 63.
        let product = self.0 * connections as f64;
        let count = (product * (1.0 - 4.0 * f64::EPSILON)).ceil() as usize;
        count.clamp(1, connections)
    }
}

/// Accepts a decimal (`0.0625`), a fraction (`1/16`) or a percentage
/// (`6.25%`); errors name the text as given.
impl FromStr for ActiveRatio {
    type Err = RatioError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let syntax = || RatioError::Syntax(s.to_string());
        let value = if let Some((a, b)) = t.split_once('/') {
            let a: f64 = a.trim().parse().map_err(|_| syntax())?;
            let b: f64 = b.trim().parse().map_err(|_| syntax())?;
            if b == 0.0 {
                return Err(syntax());
            }
            a / b
        } else if let Some(p) = t.strip_suffix('%') {
            p.trim().parse::<f64>().map_err(|_| syntax())? / 100.0
        } else {
            t.parse().map_err(|_| syntax())?
        };
        if value.is_nan() {
            return Err(syntax());
        }
        ActiveRatio::new(value).map_err(|_| RatioError::OutOfRange(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_decimals_fractions_and_percentages() {
        assert_eq!("1/16".parse::<ActiveRatio>().unwrap().get(), 0.0625);
        assert_eq!("0.25".parse::<ActiveRatio>().unwrap().get(), 0.25);
        assert_eq!("1".parse::<ActiveRatio>().unwrap().get(), 1.0);
        assert_eq!("50%".parse::<ActiveRatio>().unwrap().get(), 0.5);
    }

    #[test]
    fn rejects_bad_ratios_naming_the_text() {
        for bad in [
            "0", "-0.5", "1.5", "3/2", "1/0", "abc", "NaN", "inf", "0/0", "",
        ] {
            let e = bad.parse::<ActiveRatio>().unwrap_err();
            assert!(e.to_string().contains(bad), "{bad}: {e}");
        }
        assert_eq!(
            "abc".parse::<ActiveRatio>().unwrap_err().to_string(),
            "\"abc\" is not a ratio: use a decimal (0.0625), a fraction (1/16) or a percentage (6.25%)"
        );
        assert_eq!(
            "150%".parse::<ActiveRatio>().unwrap_err().to_string(),
            "active ratio 150% must be above 0 and at most 1"
        );
        assert_eq!(
            "1/0".parse::<ActiveRatio>().unwrap_err(),
            RatioError::Syntax("1/0".into())
        );
        assert!(ActiveRatio::new(f64::NAN).is_err());
    }

    #[test]
    fn counts_active_connections_as_the_ceiling() {
        let r = |s: &str| s.parse::<ActiveRatio>().unwrap();
        assert_eq!(r("1/16").active_count(1000), 63);
        assert_eq!(r("0.25").active_count(200), 50);
        assert_eq!(r("0.1").active_count(30), 3);
        assert_eq!(r("1/16").active_count(1), 1);
        assert_eq!(r("1").active_count(10_000), 10_000);
        assert_eq!(r("0.7").active_count(10), 7);
        assert_eq!(r("1/3").active_count(300), 100);
        assert_eq!(r("1/16").active_count(0), 0);
    }

    proptest! {
        #[test]
        fn active_count_is_the_ceiling_and_never_zero(
            num in 1u32..=1000, extra in 0u32..1000, n in 1usize..1_000_000
        ) {
            // num/den with den >= num, checked against exact integer arithmetic.
            let den = num + extra;
            let ratio = ActiveRatio::new(f64::from(num) / f64::from(den)).unwrap();
            let exact = (n as u64 * u64::from(num)).div_ceil(u64::from(den)) as usize;
            prop_assert_eq!(ratio.active_count(n), exact);
        }
    }
}
