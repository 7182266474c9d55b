//! What one direction of an emulated link does to packets, and the parsers for
//! the values people type (`1ms`, `1gbit`, `0.5%`).

use serde::Serialize;
use std::time::Duration;

/// How packets are lost on the link.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "model", rename_all = "snake_case")]
pub enum Loss {
    /// No loss.
    None,
    /// Each packet is lost independently with probability `p` (0..=1).
    Bernoulli {
        /// Loss probability.
        p: f64,
    },
    /// Gilbert-Elliott: a good and a bad state, each with its own loss
    /// probability; the state changes before each packet.
    GilbertElliott {
        /// Probability of moving from good to bad.
        p_good_to_bad: f64,
        /// Probability of moving from bad to good.
        p_bad_to_good: f64,
        /// Loss probability in the good state.
        loss_good: f64,
        /// Loss probability in the bad state.
        loss_bad: f64,
    },
}

impl Loss {
    /// The long-run loss fraction of the model.
    pub fn mean(&self) -> f64 {
        match *self {
            Loss::None => 0.0,
            Loss::Bernoulli { p } => p,
            Loss::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_good,
                loss_bad,
            } => {
                let sum = p_good_to_bad + p_bad_to_good;
                if sum == 0.0 {
                    return loss_good;
                }
                let bad = p_good_to_bad / sum;
                (1.0 - bad) * loss_good + bad * loss_bad
            }
        }
    }

    fn validate(&self) -> Result<(), String> {
        let probs: &[f64] = match self {
            Loss::None => &[],
            Loss::Bernoulli { p } => &[*p][..],
            Loss::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_good,
                loss_bad,
            } => &[*p_good_to_bad, *p_bad_to_good, *loss_good, *loss_bad][..],
        };
        match probs.iter().find(|p| !(0.0..=1.0).contains(*p)) {
            Some(p) => Err(format!("loss probability {p} is not within 0..=1")),
            None => Ok(()),
        }
    }
}

/// How much the queue in front of the rate limiter may hold before tail drop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "unit", content = "limit", rename_all = "snake_case")]
pub enum QueueLimit {
    /// At most this many packets waiting (the one being sent included).
    Packets(u64),
    /// At most this many bytes waiting (the one being sent included).
    Bytes(u64),
}

/// One direction of an emulated link.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinkConfig {
    /// One-way propagation delay added to every packet.
    pub delay: Duration,
    /// Jitter: a uniform sample in `[-jitter, +jitter]` added to the delay
    /// (the total never goes below zero).
    pub jitter: Duration,
    /// Let jitter reorder packets. Off by default: a packet never leaves
    /// before the one ahead of it (`departure = max(previous, arrival +
    /// delay + jitter)`).
    pub allow_reorder: bool,
    /// Loss model.
    pub loss: Loss,
    /// Rate limit in bits per second (serialization delay); `None` is unlimited.
    pub rate_bit_s: Option<u64>,
    /// Bound of the queue in front of the rate limiter (only with a rate).
    pub queue_limit: QueueLimit,
    /// Seed of the random choices (loss, jitter) of this direction.
    pub seed: u64,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            allow_reorder: false,
            loss: Loss::None,
            rate_bit_s: None,
            queue_limit: QueueLimit::Packets(1000),
            seed: 1,
        }
    }
}

impl LinkConfig {
    /// Checks the values; the message names what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        self.loss.validate()?;
        if let Some(r) = self.rate_bit_s {
            if r < 8_000 {
                return Err(format!("rate {r} bit/s: at least 8000 bit/s"));
            }
        }
        if self.delay > Duration::from_secs(60) || self.jitter > Duration::from_secs(60) {
            return Err("delay and jitter: at most 60 s".into());
        }
        match self.queue_limit {
            QueueLimit::Packets(0) | QueueLimit::Bytes(0) => {
                Err("queue limit must be at least 1".into())
            }
            _ => Ok(()),
        }
    }
}

pub use connlab_measure::units::parse_rate;

/// Parses a probability: `0.01`, `1%`, `0`.
pub fn parse_probability(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (num, scale) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), 0.01),
        None => (t, 1.0),
    };
    let p = num
        .parse::<f64>()
        .map_err(|_| format!("{text:?} is not a probability: use 0.01 or 1%"))?
        * scale;
    if !(0.0..=1.0).contains(&p) {
        return Err(format!(
            "{text:?}: a probability between 0 and 1 (0% and 100%)"
        ));
    }
    Ok(p)
}

/// Parses a loss model: a probability (`1%`, Bernoulli) or
/// `ge:P_GB,P_BG,LOSS_GOOD,LOSS_BAD` (Gilbert-Elliott).
pub fn parse_loss(text: &str) -> Result<Loss, String> {
    if let Some(rest) = text.trim().strip_prefix("ge:") {
        let v = rest
            .split(',')
            .map(parse_probability)
            .collect::<Result<Vec<_>, _>>()?;
        let [p_good_to_bad, p_bad_to_good, loss_good, loss_bad] = v[..] else {
            return Err(format!(
                "{text:?}: Gilbert-Elliott takes four values: ge:P_GB,P_BG,LOSS_GOOD,LOSS_BAD"
            ));
        };
        return Ok(Loss::GilbertElliott {
            p_good_to_bad,
            p_bad_to_good,
            loss_good,
            loss_bad,
        });
    }
    let p = parse_probability(text)?;
    Ok(if p == 0.0 {
        Loss::None
    } else {
        Loss::Bernoulli { p }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rates() {
        assert_eq!(parse_rate("1gbit").unwrap(), 1_000_000_000);
        assert_eq!(parse_rate("100mbit").unwrap(), 100_000_000);
        assert_eq!(parse_rate("2.5Gbit/s").unwrap(), 2_500_000_000);
        assert_eq!(parse_rate("64000").unwrap(), 64_000);
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("1tbyte").is_err());
        assert!(parse_rate("10bit").is_err());
    }

    #[test]
    fn parses_losses() {
        assert_eq!(parse_loss("0").unwrap(), Loss::None);
        assert_eq!(parse_loss("1%").unwrap(), Loss::Bernoulli { p: 0.01 });
        assert_eq!(parse_loss("0.25").unwrap(), Loss::Bernoulli { p: 0.25 });
        assert!(parse_loss("150%").is_err());
        let ge = parse_loss("ge:0.01,0.1,0,50%").unwrap();
        assert!((ge.mean() - 0.01 / 0.11 * 0.5).abs() < 1e-12);
        assert!(parse_loss("ge:0.1,0.2").is_err());
    }

    #[test]
    fn validates() {
        assert!(LinkConfig::default().validate().is_ok());
        let bad = LinkConfig {
            queue_limit: QueueLimit::Bytes(0),
            ..LinkConfig::default()
        };
        assert!(bad.validate().is_err());
    }
}
