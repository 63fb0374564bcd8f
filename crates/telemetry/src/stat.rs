//! `perf stat`'s counting loop, over any source of readings (counters of processes, of a command, or the sums of
//! several nodes' agents): interval lines while it runs, and the summary at the end — of one run, or the means
//! of `-r N` runs with their noise — in `perf stat`'s formats.

use std::time::{Duration, Instant};

use crate::counters::Reading;
use crate::events::EventSpec;
use crate::format::{line, Style};

/// What one count measured.
#[derive(Clone, Debug)]
pub struct Run {
    /// The final readings, in the order of the events (`None`: not supported).
    pub readings: Vec<Option<Reading>>,
    /// Wall-clock seconds from start to end.
    pub elapsed: f64,
}

/// CPU time the counted command used, from its resource usage: perf's `seconds user` / `seconds sys` lines.
#[derive(Clone, Copy, Debug)]
pub struct CpuTimes {
    /// Seconds in user mode.
    pub user: f64,
    /// Seconds in the kernel.
    pub sys: f64,
}

/// Counts `events` with `read` (cumulative readings, in the order of `events`) until `done(wait)` says the target
/// ended; every `interval` milliseconds prints the deltas on stderr as `perf stat -I` does. `done` waits up to
/// `wait` (50 ms, or the interval when shorter) for the end, so that the elapsed time is the target's, not the
/// polling's. Returns the final readings, or the first error of `read`; [`summary`] prints them.
pub fn count<E>(
    events: &[EventSpec],
    mut read: impl FnMut() -> Result<Vec<Option<Reading>>, E>,
    interval: Option<u64>,
    style: &Style,
    mut done: impl FnMut(Duration) -> bool,
) -> Result<Run, E> {
    let start = Instant::now();
    let tick = Duration::from_millis(interval.unwrap_or(50).min(50));
    let mut last: Vec<Option<Reading>> = events.iter().map(|_| Some(Reading::default())).collect();
    let mut next = interval.map(|ms| start + Duration::from_millis(ms));
    while !done(tick) {
        if let (Some(at), Some(ms)) = (next, interval) {
            if Instant::now() >= at {
                let now = read()?;
                let stamp = start.elapsed().as_secs_f64();
                for (i, e) in events.iter().enumerate() {
                    let delta = now[i].zip(last[i]).map(|(n, l)| n.since(&l));
                    eprintln!("{}", line(style, Some(stamp), e, delta.as_ref(), None));
                }
                last = now;
                next = Some(at + Duration::from_millis(ms));
            }
        }
    }
    let readings = read()?;
    Ok(Run { readings, elapsed: start.elapsed().as_secs_f64() })
}

/// Prints on stderr, as `perf stat` does, the summary of `runs` (one, or the `-r N` repeats: then each count is
/// the mean over the runs, followed by its noise, the standard error of the mean relative to it) for `target`;
/// `times` adds the `seconds user` / `seconds sys` lines of a single run of a command.
pub fn summary(events: &[EventSpec], runs: &[Run], style: &Style, target: &str, times: Option<CpuTimes>) {
    let human = style.csv.is_none() && !style.json;
    let repeated = runs.len() > 1;
    if human {
        let count = if repeated { format!(" ({} runs)", runs.len()) } else { String::new() };
        eprintln!("\n Performance counter stats for '{target}'{count}:\n");
    }
    for (i, e) in events.iter().enumerate() {
        let per_run: Option<Vec<Reading>> = runs.iter().map(|r| r.readings[i]).collect();
        let (mean, noise) = match per_run {
            Some(rs) if repeated => {
                let scaled: Vec<f64> = rs.iter().map(Reading::scaled).collect();
                let avg = |f: fn(&Reading) -> u64| rs.iter().map(|r| f(r) as f64).sum::<f64>() / rs.len() as f64;
                let reading = Reading {
                    value: avg(|r| r.value).round() as u64,
                    enabled: avg(|r| r.enabled).round() as u64,
                    running: avg(|r| r.running).round() as u64,
                };
                (Some(reading), Some(noise_percent(&scaled)))
            }
            Some(rs) => (rs.first().copied(), None),
            None => (None, None),
        };
        eprintln!("{}", line(style, None, e, mean.as_ref(), noise));
    }
    if !human {
        return;
    }
    let elapsed: Vec<f64> = runs.iter().map(|r| r.elapsed).collect();
    if repeated {
        let (avg, sem) = mean_and_error(&elapsed);
        // As perf: two digits beyond the first significant one of the error.
        let precision = if sem > 1.0 || sem <= 0.0 { 2 } else { (-sem.log10()).ceil() as usize + 2 }.min(9);
        eprintln!(
            "\n {avg:>17.precision$} +- {sem:.precision$} seconds time elapsed  ( +- {:5.2}% )\n",
            noise_percent(&elapsed)
        );
    } else {
        eprintln!("\n {:>17.9} seconds time elapsed\n", elapsed.first().copied().unwrap_or_default());
        if let Some(t) = times {
            eprintln!(" {:>17.9} seconds user\n {:>17.9} seconds sys\n", t.user, t.sys);
        }
    }
}

/// The mean of `xs` and its standard error (the sample standard deviation over √n; 0 for fewer than 2 values).
fn mean_and_error(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n.max(1.0);
    if xs.len() < 2 {
        return (mean, 0.0);
    }
    let variance = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, (variance / n).sqrt())
}

/// The standard error of the mean of `xs` as a percentage of the mean (0 when the mean is 0).
fn noise_percent(xs: &[f64]) -> f64 {
    let (mean, sem) = mean_and_error(xs);
    if mean == 0.0 {
        0.0
    } else {
        100.0 * sem / mean
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_is_the_standard_error_relative_to_the_mean() {
        // Sample sd of 1, 2, 3 is 1, over √3: 0.577…, which is 28.87 % of the mean 2.
        let (mean, sem) = mean_and_error(&[1.0, 2.0, 3.0]);
        assert!((mean - 2.0).abs() < 1e-12 && (sem - 1.0 / 3f64.sqrt()).abs() < 1e-12);
        assert!((noise_percent(&[1.0, 2.0, 3.0]) - 28.867_513).abs() < 1e-5);
        assert!(noise_percent(&[5.0]).abs() < f64::EPSILON);
        assert!(noise_percent(&[0.0, 0.0]).abs() < f64::EPSILON);
    }
}
