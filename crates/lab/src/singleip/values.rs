//! Byte counts, durations and bit rates as an experiment file writes them.

use serde::{Deserialize, Deserializer, Serialize};
use std::time::Duration;

// ------------------------------------------------------------------ typed values

/// A byte count: a number, or text with a decimal (`100KB`, `1MB`: powers
/// of 1000, as the paper counts) or binary (`16KiB`) unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Bytes(pub u64);

/// Parses `100KB`, `1MB`, `16KiB`, `4`, `4B`.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size: write 4, 100KB, 1MB or 16KiB"))?;
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        other => {
            return Err(format!(
            "unknown unit {other:?} in {text:?}: B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB"
        ))
        }
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("{text:?} overflows 64 bits"))
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            T(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(Bytes(n)),
            Raw::T(t) => parse_bytes(&t).map(Bytes).map_err(serde::de::Error::custom),
        }
    }
}

/// A label for a byte count as the paper writes sizes: `4B`, `100KB`, `1MB`.
pub fn bytes_label(n: u64) -> String {
    if n >= 1_000_000 && n.is_multiple_of(1_000_000) {
        format!("{}MB", n / 1_000_000)
    } else if n >= 1_000 && n.is_multiple_of(1_000) {
        format!("{}KB", n / 1_000)
    } else {
        format!("{n}B")
    }
}

/// A duration written as text: `1ms`, `3s`, `0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Dur(pub Duration);

impl Serialize for Dur {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}us", self.0.as_micros()))
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let t = String::deserialize(d)?;
        connlab_measure::units::parse_duration(&t)
            .map(Dur)
            .map_err(serde::de::Error::custom)
    }
}

/// A link rate written as text: `100mbit`, `1gbit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BitRate(pub u64);

impl Serialize for BitRate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}bit", self.0))
    }
}

impl<'de> Deserialize<'de> for BitRate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let t = String::deserialize(d)?;
        connlab_measure::units::parse_rate(&t)
            .map(BitRate)
            .map_err(serde::de::Error::custom)
    }
}
