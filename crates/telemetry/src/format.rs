//! `perf stat` output: the human table, `-x SEP` CSV, `-I` interval lines, and JSON lines.

use super::counters::Reading;
use super::events::EventSpec;

/// How to print.
#[derive(Clone, Debug, Default)]
pub struct Style {
    /// `-x SEP`.
    pub csv: Option<String>,
    /// `--json`.
    pub json: bool,
}

/// `1234567` → `1,234,567`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Value and unit as perf shows them: clocks in msec with two decimals.
fn value_unit(e: &EventSpec, r: &Reading, grouping: bool) -> (String, &'static str) {
    let v = r.scaled();
    if e.is_clock() {
        let ms = v / 1e6;
        let text = if grouping {
            format!("{}.{:02}", grouped(ms.trunc() as u64), ((ms.fract() * 100.0).round() as u64).min(99))
        } else {
            format!("{ms:.2}")
        };
        (text, "msec")
    } else if grouping {
        (grouped(v.round() as u64), "")
    } else {
        (format!("{}", v.round() as u64), "")
    }
}

/// One event's line. `interval` is the time stamp for `-I` output; `noise` the relative standard error of the
/// mean in percent, when the count is the mean of `-r N` runs (perf's `( +- 1.23% )`).
pub fn line(style: &Style, interval: Option<f64>, e: &EventSpec, r: Option<&Reading>, noise: Option<f64>) -> String {
    let stamp = interval.map(|t| format!("{t:.9}"));
    if style.json {
        let (value, unit, runtime, pct) = match r {
            Some(r) => {
                let (v, u) = value_unit(e, r, false);
                (format!("\"{v}\""), u, r.running, r.percent_running())
            }
            None => ("\"<not supported>\"".to_string(), "", 0, 0.0),
        };
        let interval = stamp.map_or(String::new(), |s| format!("\"interval\" : {s}, "));
        let variance = noise.map_or(String::new(), |n| format!("\"variance\" : {n:.2}, "));
        return format!(
            "{{{interval}\"counter-value\" : {value}, \"unit\" : \"{unit}\", \"event\" : \"{}\", {variance}\
             \"event-runtime\" : {runtime}, \"pcnt-running\" : {pct:.2}}}",
            e.name
        );
    }
    if let Some(sep) = &style.csv {
        let mut fields = match r {
            Some(r) => {
                let (v, u) = value_unit(e, r, false);
                vec![v, u.to_string(), e.name.clone(), r.running.to_string(), format!("{:.2}", r.percent_running())]
            }
            None => vec!["<not supported>".into(), String::new(), e.name.clone(), "0".into(), "100.00".into()],
        };
        if let Some(n) = noise {
            fields.insert(3, format!("{n:.2}%"));
        }
        let row = fields.join(sep) + sep + sep;
        return match stamp {
            Some(s) => format!("{s}{sep}{row}"),
            None => row,
        };
    }
    let body = match r {
        Some(r) => {
            let (v, u) = value_unit(e, r, true);
            let multiplexed =
                if r.running < r.enabled { format!("  ({:.2}%)", r.percent_running()) } else { String::new() };
            let noise = noise.map_or(String::new(), |n| format!("  ( +- {n:5.2}% )"));
            format!("{v:>18} {u:<4} {:<32}{multiplexed}{noise}", e.name)
        }
        None => format!("{:>18} {:<4} {}", "<not supported>", "", e.name),
    };
    match stamp {
        Some(s) => format!("{s:>15} {}", body.trim_end()),
        None => body.trim_end().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::parse_event;

    #[test]
    fn lines_look_like_perf_stat() {
        let pf = parse_event("page-faults").unwrap();
        let tc = parse_event("task-clock").unwrap();
        let r = Reading { value: 1_234_567, enabled: 10, running: 10 };
        assert_eq!(line(&Style::default(), None, &pf, Some(&r), None), "         1,234,567      page-faults");
        let clock = Reading { value: 1_234_560_000, enabled: 10, running: 10 };
        assert_eq!(line(&Style::default(), None, &tc, Some(&clock), None), "          1,234.56 msec task-clock");
        let csv = Style { csv: Some(",".into()), json: false };
        assert_eq!(line(&csv, None, &pf, Some(&r), None), "1234567,,page-faults,10,100.00,,");
        assert_eq!(line(&csv, None, &pf, None, None), "<not supported>,,page-faults,0,100.00,,");
        let half = Reading { value: 100, enabled: 20, running: 10 };
        assert!(line(&Style::default(), None, &pf, Some(&half), None)
            .ends_with("page-faults                       (50.00%)"));
        assert!(line(&Style::default(), Some(1.5), &pf, Some(&r), None).starts_with("    1.500000000 "));
        // The mean of `-r N` runs carries its noise, where perf puts it.
        assert_eq!(
            line(&Style::default(), None, &pf, Some(&r), Some(3.634)),
            "         1,234,567      page-faults                       ( +-  3.63% )"
        );
        assert_eq!(line(&csv, None, &pf, Some(&r), Some(7.63)), "1234567,,page-faults,7.63%,10,100.00,,");
        let json = Style { csv: None, json: true };
        assert!(
            line(&json, None, &pf, Some(&r), Some(2.03)).contains("\"event\" : \"page-faults\", \"variance\" : 2.03, ")
        );
    }
}
