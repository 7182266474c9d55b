//! Parsing of sizes and durations as people write them: `128`, `10KiB`, `1MiB`, `4k`; `10s`, `500ms`, `2m`.

/// Parses a byte size: a number with an optional unit `B`, `K`/`KiB`/`KB`,
/// `M`/`MiB`/`MB`, `G`/`GiB`/`GB` (all binary: 1 KiB = 1024 B), case-insensitive.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    if digits.is_empty() {
        return Err(format!(
            "{text:?} is not a size: expected a number like 128, 10KiB or 1MiB"
        ));
    }
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is too large a number"))?;
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        other => {
            return Err(format!(
                "unknown size unit {other:?} in {text:?}: use B, KiB, MiB or GiB"
            ))
        }
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("{text:?} overflows 64 bits"))
}

/// A size that must fit in a `u32` (wire-format lengths).
pub fn parse_size_u32(text: &str) -> Result<u32, String> {
    let n = parse_size(text)?;
    u32::try_from(n).map_err(|_| format!("{text:?} is above the 4 GiB - 1 maximum"))
}

/// Parses a rate: `1gbit`, `100mbit`, `512kbit`, `2.5gbit`, `1000000` (bit/s),
/// also `bps`/`kbps`/`mbps`/`gbps` and `bit/s` spellings (decimal units).
pub fn parse_rate(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| {
        format!("{text:?} is not a rate: expected a number with a unit like 1gbit or 100mbit")
    })?;
    let scale = match unit.trim().trim_end_matches("/s") {
        "" | "bit" | "bps" => 1.0,
        "k" | "kbit" | "kbps" => 1e3,
        "m" | "mbit" | "mbps" => 1e6,
        "g" | "gbit" | "gbps" => 1e9,
        other => {
            return Err(format!(
                "unknown rate unit {other:?} in {text:?}: use bit, kbit, mbit or gbit"
            ))
        }
    };
    let bits = n * scale;
    if !bits.is_finite() || !(8_000.0..=1e13).contains(&bits) {
        return Err(format!("{text:?}: a rate between 8kbit and 10000gbit"));
    }
    Ok(bits.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_binary_units() {
        assert_eq!(parse_size("128").unwrap(), 128);
        assert_eq!(parse_size("10KiB").unwrap(), 10240);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
    }

    #[test]
    fn rejects_bad_sizes_saying_why() {
        assert!(parse_size("").unwrap_err().contains("not a size"));
        assert!(parse_size("12XB").unwrap_err().contains("unit"));
        assert!(parse_size("KiB").is_err());
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size_u32("4GiB").is_err());
    }
}

/// Parses a duration: `10s`, `500ms`, `250us`, `2m`, `1h`, or a plain number of seconds.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| {
        format!("{text:?} is not a duration: expected a number with a unit like 10s, 500ms or 2m")
    })?;
    let scale = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "ns" => 1e-9,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => {
            return Err(format!(
                "unknown duration unit {other:?} in {text:?}: use ns, us, ms, s, m or h"
            ))
        }
    };
    let secs = n * scale;
    if !secs.is_finite() || !(0.0..=1e9).contains(&secs) {
        return Err(format!("{text:?} is out of range"));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod duration_tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn parses_durations_with_units() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("100us").unwrap(), Duration::from_micros(100));
    }

    #[test]
    fn rejects_bad_durations() {
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("-1s").is_err());
    }
}
