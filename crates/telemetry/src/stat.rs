//! `perf stat`'s counting loop, over any source of readings (counters of processes, of a command, or the sums of
//! several nodes' agents): interval lines while it runs, the summary at the end, in `perf stat`'s formats.

use std::time::{Duration, Instant};

use crate::counters::Reading;
use crate::events::EventSpec;
use crate::format::{line, Style};

/// Counts `events` with `read` (cumulative readings, in the order of `events`) until `done()`: every `interval`
/// milliseconds the deltas as `perf stat -I` prints them, else at the end the summary for `target` as `perf stat`
/// prints it, all on stderr. `done` is asked every 50 ms (or every interval, when shorter).
pub fn count(
    events: &[EventSpec],
    mut read: impl FnMut() -> anyhow::Result<Vec<Option<Reading>>>,
    interval: Option<u64>,
    style: &Style,
    target: &str,
    mut done: impl FnMut() -> bool,
) -> anyhow::Result<()> {
    let start = Instant::now();
    let tick = Duration::from_millis(interval.unwrap_or(50).min(50));
    let mut last: Vec<Option<Reading>> = events.iter().map(|_| Some(Reading::default())).collect();
    let mut next = interval.map(|ms| start + Duration::from_millis(ms));
    while !done() {
        std::thread::sleep(tick);
        if let (Some(at), Some(ms)) = (next, interval) {
            if Instant::now() >= at {
                let now = read()?;
                let stamp = start.elapsed().as_secs_f64();
                for (i, e) in events.iter().enumerate() {
                    let delta = now[i].zip(last[i]).map(|(n, l)| n.since(&l));
                    eprintln!("{}", line(style, Some(stamp), e, delta.as_ref()));
                }
                last = now;
                next = Some(at + Duration::from_millis(ms));
            }
        }
    }
    let total = read()?;
    let elapsed = start.elapsed().as_secs_f64();
    if interval.is_some() {
        return Ok(());
    }
    let human = style.csv.is_none() && !style.json;
    if human {
        eprintln!("\n Performance counter stats for '{target}':\n");
    }
    for (e, r) in events.iter().zip(&total) {
        eprintln!("{}", line(style, None, e, r.as_ref()));
    }
    if human {
        eprintln!("\n {elapsed:>17.9} seconds time elapsed\n");
    }
    Ok(())
}
