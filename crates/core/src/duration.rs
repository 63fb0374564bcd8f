//! Durations as users type them: a number and a unit, `ms`, `s`, `m`, `h` or `d` (`200ms`, `2s`, `0.5s`,
//! `7d`).

use std::time::Duration;

/// Parses `text`; `None` when it is not a non-negative number followed by one of the units.
pub fn parse(text: &str) -> Option<Duration> {
    let text = text.trim();
    let units: [(&str, f64); 5] = [("ms", 1e-3), ("s", 1.0), ("m", 60.0), ("h", 3600.0), ("d", 86400.0)];
    let (number, scale) = units.iter().find_map(|(u, scale)| Some((text.strip_suffix(u)?, *scale)))?;
    let value: f64 = number.trim().parse().ok()?;
    (value.is_finite() && value >= 0.0).then(|| Duration::from_secs_f64(value * scale))
}

#[cfg(test)]
mod tests {
    use super::parse;
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
}
