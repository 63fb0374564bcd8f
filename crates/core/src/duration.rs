//! Durations as users type them: a number and a unit, `ms`, `s`, `m`, `h` or `d` (`200ms`, `2s`, `0.5s`,
//! `7d`). Every duration a flag, a configuration key or a spec takes is read by [`within`], with its own range,
//! so no input reaches an arithmetic overflow and every refusal reads the same.

use std::ops::RangeInclusive;
use std::time::Duration;

use crate::error::UsageError;

/// The units, with their length in seconds; the longest suffix first (`ms` before `s`).
const UNITS: [(&str, f64); 5] = [("ms", 1e-3), ("s", 1.0), ("m", 60.0), ("h", 3600.0), ("d", 86400.0)];

/// Parses `text`; `None` when it is not a non-negative number followed by one of the units, or is longer than
/// a [`Duration`] holds.
pub fn parse(text: &str) -> Option<Duration> {
    let text = text.trim();
    let (number, scale) = UNITS.iter().find_map(|(u, scale)| Some((text.strip_suffix(u)?, *scale)))?;
    let value: f64 = number.trim().parse().ok()?;
    if !value.is_finite() || value < 0.0 {
        return None;
    }
    Duration::try_from_secs_f64(value * scale).ok()
}

/// Parses `text`, the value of `what` (a flag, a key), as a duration in `range`; the error names the field, the
/// value and the range: `bad --slot "1e20s" (expected a duration from 10ms to 1m, e.g. 200ms)`.
pub fn within(what: &str, text: &str, range: RangeInclusive<Duration>) -> Result<Duration, UsageError> {
    parse(text).filter(|d| range.contains(d)).ok_or_else(|| {
        UsageError::new(format!(
            "bad {what} {text:?} (expected a duration from {} to {}, e.g. {})",
            format(*range.start()),
            format(*range.end()),
            format(range.start().max(&Duration::from_millis(1)).mul_f64(10.0).min(*range.end()))
        ))
    })
}

/// Formats `d` the way [`parse`] reads it, in the largest unit that holds it whole (`90s`, `2m`, `7d`, `250ms`);
/// below a millisecond, a fraction of one.
pub fn format(d: Duration) -> String {
    let ms = d.as_millis();
    if !d.as_nanos().is_multiple_of(1_000_000) {
        return format!("{}ms", d.as_secs_f64() * 1e3);
    }
    for (unit, per) in [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)] {
        if ms >= per && ms.is_multiple_of(per) {
            return format!("{}{unit}", ms / per);
        }
    }
    format!("{ms}ms")
}

#[cfg(test)]
mod tests {
    use super::{format, parse, within};
    use std::time::Duration;

    #[test]
    fn units() {
        assert_eq!(parse("200ms"), Some(Duration::from_millis(200)));
        assert_eq!(parse("0.5s"), Some(Duration::from_millis(500)));
        assert_eq!(parse("2m"), Some(Duration::from_mins(2)));
        assert_eq!(parse("1h"), Some(Duration::from_hours(1)));
        assert_eq!(parse("7d"), Some(Duration::from_hours(168)));
        for bad in ["", "5", "s", "-1s", "1x", "nans", "1 day"] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    /// The extremes of every kind of input: none panics, none is taken.
    #[test]
    fn extremes_are_refused_not_panics() {
        let range = Duration::from_millis(10)..=Duration::from_mins(1);
        for bad in [
            "0s",
            "-0.1s",
            "-1s",
            "NaNs",
            "nan ms",
            "infs",
            "-infs",
            "1e20s",
            "1e300d",
            "1e309s",
            "18446744073709551616s",
            "",
            " ",
            "s",
            "ms",
            "١s",
            "2秒",
            "1e-20s",
            "0x10s",
            "1_000ms",
            "\u{0}s",
            "9ms",
            "61s",
        ] {
            let e = within("--slot", bad, range.clone()).expect_err(bad).to_string();
            assert!(
                e.starts_with("bad --slot ") && e.ends_with("(expected a duration from 10ms to 1m, e.g. 100ms)"),
                "{e}"
            );
            assert!(!e.contains('\n'), "{e}");
        }
        assert_eq!(within("--slot", "60s", range.clone()).unwrap(), Duration::from_mins(1));
        assert_eq!(within("--slot", "10ms", range).unwrap(), Duration::from_millis(10));
        assert_eq!(parse("1e20s"), None);
    }

    #[test]
    fn format_reads_back() {
        for (d, text) in [
            (Duration::from_millis(250), "250ms"),
            (Duration::from_secs(90), "90s"),
            (Duration::from_mins(2), "2m"),
            (Duration::from_hours(168), "7d"),
            (Duration::ZERO, "0ms"),
            (Duration::from_micros(500), "0.5ms"),
        ] {
            assert_eq!(format(d), text);
            assert_eq!(parse(text), Some(d));
        }
    }
}
