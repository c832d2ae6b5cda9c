//! Byte counts as people write them on command lines and in configurations: `4096`, `64k`, `256mb`, `1GiB`.

/// A byte count that [`parse_size`] refuses.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SizeError {
    #[error("{0:?} is not a byte count like 4096, 64k, 256mb or 1g")]
    NotASize(String),
    #[error("{0} is too large")]
    TooLarge(String),
}

/// Parses a byte count: digits, then optionally a unit `k`, `m` or `g` (powers of 1024, as Redis' `kb`, `mb`,
/// `gb`), written alone or followed by `b` or `ib`, in any case.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let s = text.trim();
    let lower = s.to_ascii_lowercase();
    let unit = lower.trim_start_matches(|c: char| c.is_ascii_digit());
    let digits = &s[..s.len() - unit.len()];
    let shift = match unit {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(SizeError::NotASize(s.into())),
    };
    let n: u64 = digits.parse().map_err(|_| SizeError::NotASize(s.into()))?;
    n.checked_mul(1 << shift).ok_or_else(|| SizeError::TooLarge(s.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_redis_and_binary_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert_eq!(parse_size("256mb"), Ok(256 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("12b"), Ok(12));
        for bad in ["M", "12X", "-1", "1.5g", "", "k12"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            parse_size(" 12X ").unwrap_err().to_string(),
            "\"12X\" is not a byte count like 4096, 64k, 256mb or 1g"
        );
        assert_eq!(parse_size("99999999999G").unwrap_err().to_string(), "99999999999G is too large");
    }
}
