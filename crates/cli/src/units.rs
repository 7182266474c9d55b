//! Parsing of sizes given on the command line: `128`, `10KiB`, `1MiB`, `4k`.

/// Parses a byte size: a number with an optional unit `B`, `K`/`KiB`/`KB`,
/// `M`/`MiB`/`MB`, `G`/`GiB`/`GB` (all binary: 1 KiB = 1024 B), case-insensitive.
pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
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
pub(crate) fn parse_size_u32(text: &str) -> Result<u32, String> {
    let n = parse_size(text)?;
    u32::try_from(n).map_err(|_| format!("{text:?} is above the 4 GiB - 1 maximum"))
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
