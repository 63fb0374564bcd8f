//! Counters for a set of threads through perf_event_open (perf-event2): one counter per event and thread,
//! inherited by children, read with the times enabled and running so that multiplexed counts can be scaled.

use std::io;

use perf_event::{Builder, Counter};

use super::events::{EventSpec, Kind};
use crate::error::UsageError;

/// One reading of an event summed over its threads.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Reading {
    /// Raw count.
    pub value: u64,
    /// Nanoseconds the event was enabled.
    pub enabled: u64,
    /// Nanoseconds it was actually counting.
    pub running: u64,
}

impl Reading {
    /// The count scaled for multiplexing: `value × enabled / running` (perf's estimate).
    pub fn scaled(&self) -> f64 {
        if self.running == 0 || self.running >= self.enabled {
            self.value as f64
        } else {
            self.value as f64 * self.enabled as f64 / self.running as f64
        }
    }

    /// Share of the enabled time the counter ran, in percent (100 when not multiplexed).
    pub fn percent_running(&self) -> f64 {
        if self.enabled == 0 {
            100.0
        } else {
            (self.running as f64 / self.enabled as f64 * 100.0).min(100.0)
        }
    }

    /// The difference from an earlier reading.
    pub fn since(&self, earlier: &Reading) -> Reading {
        Reading {
            value: self.value.saturating_sub(earlier.value),
            enabled: self.enabled.saturating_sub(earlier.enabled),
            running: self.running.saturating_sub(earlier.running),
        }
    }
}

/// The counters of every event.
pub struct Counters {
    /// Events in `-e` order.
    pub events: Vec<EventSpec>,
    /// Per event, its counters (one per thread), or `None` when this machine cannot count it.
    counters: Vec<Option<Vec<Counter>>>,
}

fn builder(kind: Kind) -> Builder<'static> {
    match kind {
        Kind::Hardware(h) => Builder::new(h),
        Kind::Software(s) => Builder::new(s),
        Kind::Tracepoint(id) => Builder::new(perf_event::events::Tracepoint::with_id(id)),
    }
}

impl Counters {
    /// Opens every event on every thread in `tids`. With `enable_on_exec` the counters start when the thread
    /// execs (`-- CMD`), else at once (`-p`).
    pub fn open(groups: &[Vec<EventSpec>], tids: &[i32], enable_on_exec: bool) -> anyhow::Result<Self> {
        let events: Vec<EventSpec> = groups.iter().flatten().cloned().collect();
        let mut counters = Vec::new();
        for e in &events {
            let mut per_thread = Vec::new();
            let mut supported = true;
            for &tid in tids {
                let mut b = builder(e.kind);
                // Kernel-side counts too, as perf stat does for root (the crate's default leaves them out).
                b.observe_pid(tid).any_cpu().inherit(true).enable_on_exec(enable_on_exec).include_kernel().read_format(
                    perf_event::ReadFormat::TOTAL_TIME_ENABLED | perf_event::ReadFormat::TOTAL_TIME_RUNNING,
                );
                // Where perf_event_paranoid forbids kernel counts, fall back to user space only (perf's `:u`).
                let built = b.build().or_else(|err| match err.raw_os_error() {
                    Some(libc::EACCES) | Some(libc::EPERM) => b.exclude_kernel(true).build(),
                    _ => Err(err),
                });
                match built {
                    Ok(mut c) => {
                        if !enable_on_exec {
                            c.enable()?;
                        }
                        per_thread.push(c);
                    }
                    Err(err) => match err.raw_os_error() {
                        Some(libc::ESRCH) => {
                            return Err(UsageError::new(format!("process/thread {tid} is gone")).into());
                        }
                        Some(libc::EACCES) | Some(libc::EPERM) => {
                            return Err(UsageError::new(format!(
                                "no permission to count {} on {tid} (run as root or lower kernel.perf_event_paranoid)",
                                e.name
                            ))
                            .into())
                        }
                        _ if matches!(e.kind, Kind::Hardware(_)) => {
                            supported = false;
                            break;
                        }
                        _ => return Err(io::Error::other(format!("cannot count {}: {err}", e.name)).into()),
                    },
                }
            }
            counters.push(supported.then_some(per_thread));
        }
        Ok(Self { events, counters })
    }

    /// Current totals of every event (`None`: not supported here).
    pub fn read(&mut self) -> io::Result<Vec<Option<Reading>>> {
        let mut out = Vec::new();
        for per_thread in &mut self.counters {
            let Some(list) = per_thread else {
                out.push(None);
                continue;
            };
            let mut r = Reading::default();
            for c in list.iter_mut() {
                let d = c.read_full()?;
                r.value += d.count();
                r.enabled += d.time_enabled().map_or(0, |t| t.as_nanos() as u64);
                r.running += d.time_running().map_or(0, |t| t.as_nanos() as u64);
            }
            out.push(Some(r));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::Reading;

    #[test]
    fn multiplexed_counts_are_scaled_like_perf() {
        // Counted 400 events while running 25 % of the 2 ms it was enabled: perf estimates 1600.
        let r = Reading { value: 400, enabled: 2_000_000, running: 500_000 };
        assert_eq!(r.scaled(), 1600.0);
        assert_eq!(r.percent_running(), 25.0);
        let full = Reading { value: 400, enabled: 1000, running: 1000 };
        assert_eq!(full.scaled(), 400.0);
        assert_eq!(full.percent_running(), 100.0);
        let never = Reading { value: 0, enabled: 1000, running: 0 };
        assert_eq!(never.scaled(), 0.0);
        let later = Reading { value: 1000, enabled: 3_000_000, running: 1_000_000 };
        assert_eq!(later.since(&r), Reading { value: 600, enabled: 1_000_000, running: 500_000 });
    }
}
