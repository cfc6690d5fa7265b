//! Durations and sizes as people type them: `500ms`, `10s`, `2m`, `1h`; `64KiB`, `1MiB`,
//! `1GiB` (binary) and `1KB`, `1MB` (decimal); or a plain number in the flag's own unit
//! (the unit its name carries: `--linger-ms 5` is 5 ms, `--duration 10` is 10 s,
//! `--record-size 1024` is 1024 bytes), so every value that worked before still means
//! the same.
//!
//! Pure functions, used as clap value parsers by every duration and size flag (client
//! subcommands and `serve`). A refused value becomes clap's usage error (exit 2) with the
//! message written here, which names the accepted forms. Invariant: a value converted to
//! an integer flag is exact (a fraction of the flag's unit is refused, never rounded).

/// The unit a plain number of a duration flag stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeUnit {
    Micros,
    Millis,
    Seconds,
}

impl TimeUnit {
    fn nanos(self) -> f64 {
        match self {
            TimeUnit::Micros => 1e3,
            TimeUnit::Millis => 1e6,
            TimeUnit::Seconds => 1e9,
        }
    }

    fn name(self) -> &'static str {
        match self {
            TimeUnit::Micros => "microseconds",
            TimeUnit::Millis => "milliseconds",
            TimeUnit::Seconds => "seconds",
        }
    }
}

/// Duration suffixes (lower case) and their length in nanoseconds.
const DURATION_UNITS: [(&str, f64); 8] = [
    ("ns", 1.0),
    ("us", 1e3),
    ("µs", 1e3),
    ("ms", 1e6),
    ("s", 1e9),
    ("m", 60e9),
    ("min", 60e9),
    ("h", 3600e9),
];

/// Size suffixes (lower case) and their bytes: decimal `KB` = 1000, binary `KiB` = 1024.
const SIZE_UNITS: [(&str, f64); 9] = [
    ("b", 1.0),
    ("kb", 1e3),
    ("mb", 1e6),
    ("gb", 1e9),
    ("tb", 1e12),
    ("kib", 1024.0),
    ("mib", 1_048_576.0),
    ("gib", 1_073_741_824.0),
    ("tib", 1_099_511_627_776.0),
];

/// Splits `text` into its number and its unit suffix (trimmed, possibly empty).
fn split(text: &str) -> Result<(f64, &str), String> {
    let text = text.trim();
    let end = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(end);
    if number.is_empty() {
        return Err(format!("'{text}' does not start with a number"));
    }
    let value: f64 = number.parse().map_err(|_| format!("'{number}' is not a number"))?;
    Ok((value, unit.trim()))
}

/// A duration in `unit`: a plain number is already in `unit`, a suffixed one is converted.
pub fn duration_in(text: &str, unit: TimeUnit) -> Result<f64, String> {
    let forms = format!("write e.g. 500ms, 10s, 2m or 1h, or a plain number of {}", unit.name());
    if let Ok(plain) = text.trim().parse::<f64>() {
        return non_negative(plain, &forms);
    }
    let (value, suffix) = split(text).map_err(|e| format!("{e}; {forms}"))?;
    let lower = suffix.to_lowercase();
    let Some((_, nanos)) = DURATION_UNITS.iter().find(|(name, _)| *name == lower) else {
        return Err(format!("unknown duration unit '{suffix}'; {forms}"));
    };
    non_negative(value * nanos / unit.nanos(), &forms)
}

/// A size in bytes: a plain number is bytes, a suffixed one is converted.
pub fn size_bytes_f64(text: &str) -> Result<f64, String> {
    let forms = "write e.g. 64KiB, 1MiB, 1GiB (1024-based), 1KB, 1MB (1000-based), \
                 or a plain number of bytes";
    if let Ok(plain) = text.trim().parse::<f64>() {
        return non_negative(plain, forms);
    }
    let (value, suffix) = split(text).map_err(|e| format!("{e}; {forms}"))?;
    let lower = suffix.to_lowercase();
    if matches!(lower.as_str(), "k" | "m" | "g" | "t") {
        let u = suffix.to_uppercase();
        return Err(format!("ambiguous size unit '{suffix}': write {u}iB (1024-based) or {u}B"));
    }
    let Some((_, bytes)) = SIZE_UNITS.iter().find(|(name, _)| *name == lower) else {
        return Err(format!("unknown size unit '{suffix}'; {forms}"));
    };
    non_negative(value * bytes, forms)
}

fn non_negative(value: f64, forms: &str) -> Result<f64, String> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(format!("must be a finite number >= 0; {forms}"))
    }
}

/// `value` as an integer type, refusing fractions and values that do not fit.
fn whole<T: TryFrom<u64>>(value: f64, unit: &str) -> Result<T, String> {
    if value.fract() != 0.0 {
        return Err(format!("is {value} {unit}: give a whole number of {unit}"));
    }
    // 2^64 as f64: anything at or above it does not fit any integer flag.
    if value >= 18_446_744_073_709_551_616.0 {
        return Err(format!("is too large ({value} {unit})"));
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let exact = value as u64;
    T::try_from(exact).map_err(|_| format!("is too large ({exact} {unit})"))
}

/// A plain integer in the flag's unit, parsed exactly (no trip through `f64`).
fn plain_integer<T: TryFrom<u64>>(text: &str, unit: &str) -> Option<Result<T, String>> {
    let n: u64 = text.trim().parse().ok()?;
    Some(T::try_from(n).map_err(|_| format!("is too large ({n} {unit})")))
}

/// Value parser of a duration flag counted in seconds (fractional allowed).
pub fn seconds(text: &str) -> Result<f64, String> {
    duration_in(text, TimeUnit::Seconds)
}

/// Value parser of a duration flag counted in milliseconds (fractional allowed).
pub fn millis_f64(text: &str) -> Result<f64, String> {
    duration_in(text, TimeUnit::Millis)
}

/// Value parser of a duration flag counted in whole milliseconds.
pub fn millis<T: TryFrom<u64>>(text: &str) -> Result<T, String> {
    plain_integer(text, "ms").unwrap_or_else(|| whole(duration_in(text, TimeUnit::Millis)?, "ms"))
}

/// Value parser of a duration flag counted in whole microseconds.
pub fn micros<T: TryFrom<u64>>(text: &str) -> Result<T, String> {
    plain_integer(text, "us").unwrap_or_else(|| whole(duration_in(text, TimeUnit::Micros)?, "us"))
}

/// Value parser of a size flag counted in whole bytes.
pub fn bytes<T: TryFrom<u64>>(text: &str) -> Result<T, String> {
    plain_integer(text, "bytes").unwrap_or_else(|| whole(size_bytes_f64(text)?, "bytes"))
}

/// Value parser of a rate flag in bytes per second (`10MiB` means 10 MiB/s).
pub fn bytes_per_second(text: &str) -> Result<f64, String> {
    size_bytes_f64(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_numbers_keep_the_flag_unit() {
        assert_eq!(seconds("10"), Ok(10.0));
        assert_eq!(seconds("0.5"), Ok(0.5));
        assert_eq!(millis::<u64>("300"), Ok(300));
        assert_eq!(millis_f64("2.5"), Ok(2.5));
        assert_eq!(micros::<u64>("0"), Ok(0));
        assert_eq!(bytes::<usize>("1024"), Ok(1024));
        assert_eq!(bytes::<u64>("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(bytes_per_second("1e6"), Ok(1e6));
    }

    #[test]
    fn duration_suffixes_convert_to_the_flag_unit() {
        assert_eq!(seconds("10s"), Ok(10.0));
        assert_eq!(seconds("2m"), Ok(120.0));
        assert_eq!(seconds("1h"), Ok(3600.0));
        assert_eq!(seconds("500ms"), Ok(0.5));
        assert_eq!(seconds("1.5 min"), Ok(90.0));
        assert_eq!(millis::<u64>("5s"), Ok(5000));
        assert_eq!(millis::<i32>("250ms"), Ok(250));
        assert_eq!(millis_f64("500us"), Ok(0.5));
        assert_eq!(micros::<u64>("2ms"), Ok(2000));
        assert_eq!(millis::<u64>("5S"), Ok(5000), "units are case-insensitive");
    }

    #[test]
    fn size_suffixes_are_binary_or_decimal() {
        assert_eq!(bytes::<usize>("64KiB"), Ok(65_536));
        assert_eq!(bytes::<u64>("1MiB"), Ok(1 << 20));
        assert_eq!(bytes::<u64>("1GiB"), Ok(1 << 30));
        assert_eq!(bytes::<u64>("1KB"), Ok(1000));
        assert_eq!(bytes::<u64>("1MB"), Ok(1_000_000));
        assert_eq!(bytes::<u64>("1.5KiB"), Ok(1536));
        assert_eq!(bytes::<u32>("100b"), Ok(100));
        assert_eq!(bytes::<i32>("8mib"), Ok(8 << 20));
        assert_eq!(bytes_per_second("10MiB"), Ok(10.0 * 1_048_576.0));
    }

    #[test]
    fn bad_input_is_refused_with_the_accepted_forms() {
        let err = seconds("5x").expect_err("unknown unit");
        assert!(err.contains("unknown duration unit 'x'") && err.contains("10s"), "{err}");
        assert!(err.contains("plain number of seconds"), "{err}");
        let err = millis::<u64>("fast").expect_err("no number");
        assert!(err.contains("does not start with a number") && err.contains("500ms"), "{err}");
        let err = seconds("-1").expect_err("negative");
        assert!(err.contains(">= 0"), "{err}");
        let err = millis::<u64>("1500us").expect_err("fraction of a ms");
        assert!(err.contains("whole number of ms"), "{err}");
        let err = bytes::<u64>("1K").expect_err("ambiguous");
        assert!(err.contains("KiB") && err.contains("KB"), "{err}");
        let err = bytes::<u64>("3 parsecs").expect_err("unknown unit");
        assert!(err.contains("unknown size unit 'parsecs'") && err.contains("64KiB"), "{err}");
        let err = bytes::<u32>("8GiB").expect_err("too large for u32");
        assert!(err.contains("too large"), "{err}");
        let err = bytes::<i32>("4294967296").expect_err("too large for i32");
        assert!(err.contains("too large"), "{err}");
        assert!(bytes::<u64>("1.2.3KiB").is_err());
        assert!(seconds("").is_err());
        assert!(seconds("inf").is_err());
        assert!(bytes::<u64>("NaN").is_err());
    }
}
