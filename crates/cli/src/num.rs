//! Numbers on the command line: decimal or `0x` hexadecimal, `_` allowed;
//! sizes printed in binary units.

/// Parses `123`, `0x7b`, `0X7B` or `1_000`.
pub fn parse_num(s: &str) -> Result<u64, String> {
    let t = s.trim().replace('_', "");
    let r = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => t.parse::<u64>(),
    };
    r.map_err(|_| format!("{s:?} is not a number (decimal, or hexadecimal with 0x)"))
}

/// `bytes` in binary units with one decimal: `1.5 GiB`.
pub fn human_size(bytes: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", units[u])
}

/// `bytes` in binary units, exact when whole (`4 KiB`, `3.75 MiB`),
/// else with two decimals.
pub fn bytes_h(bytes: impl Into<u128>) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes.into() as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if v.fract() == 0.0 {
        format!("{v} {}", UNITS[u])
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_and_hex() {
        assert_eq!(parse_num("4096"), Ok(4096));
        assert_eq!(parse_num("0x1000"), Ok(4096));
        assert_eq!(parse_num("0X1_000"), Ok(4096));
        assert!(parse_num("0x").is_err());
        assert!(parse_num("-1").is_err());
        assert!(parse_num("ten").is_err());
    }
}
