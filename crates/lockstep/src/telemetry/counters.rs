//! Counters for a set of threads through perf_event_open (perf-event2): one counter per event and thread,
//! inherited by children, read with the times enabled and running so that multiplexed counts can be scaled.

use std::io;

use perf_event::{Builder, Counter, Group};

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

/// One thread's kernel group: the dummy leader and the members.
type ThreadGroup = (Group, Vec<Counter>);

/// How one `-e` group is counted.
enum Counting {
    /// A lone event: one counter per thread, or `None` when this machine cannot count it.
    Single(Option<Vec<Counter>>),
    /// A `{a,b}` group: per thread one kernel group (a dummy leader and the members), read in one `read()`;
    /// `None` when a member cannot be counted here.
    Group(Option<Vec<ThreadGroup>>),
}

/// The counters of every event.
pub struct Counters {
    /// Events in `-e` order.
    pub events: Vec<EventSpec>,
    /// One entry per `-e` group, in order.
    groups: Vec<(usize, Counting)>,
}

/// A counter of `kind` on thread `tid`: inherited by children, kernel side included (as perf stat does for
/// root; user space only where perf_event_paranoid forbids it).
fn builder(kind: Kind, tid: i32) -> Builder<'static> {
    let mut b = match kind {
        Kind::Hardware(h) => Builder::new(h),
        Kind::Software(s) => Builder::new(s),
        Kind::Tracepoint(id) => Builder::new(perf_event::events::Tracepoint::with_id(id)),
    };
    b.observe_pid(tid).any_cpu().inherit(true).include_kernel();
    b
}

/// Opens with `open`; on EACCES/EPERM retries without kernel counts. Maps the errors a user can cause.
fn build<T>(
    e: &EventSpec,
    tid: i32,
    b: &mut Builder<'static>,
    mut open: impl FnMut(&Builder<'static>) -> io::Result<T>,
) -> anyhow::Result<Option<T>> {
    let first = open(b).or_else(|err| match err.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => open(b.exclude_kernel(true)),
        _ => Err(err),
    });
    match first {
        Ok(t) => Ok(Some(t)),
        Err(err) => match err.raw_os_error() {
            Some(libc::ESRCH) => Err(UsageError::new(format!("process/thread {tid} is gone")).into()),
            Some(libc::EACCES) | Some(libc::EPERM) => Err(UsageError::new(format!(
                "no permission to count {} on {tid} (run as root or lower kernel.perf_event_paranoid)",
                e.name
            ))
            .into()),
            _ if matches!(e.kind, Kind::Hardware(_)) => Ok(None),
            _ => Err(io::Error::other(format!("cannot count {}: {err}", e.name)).into()),
        },
    }
}

const TIMES: perf_event::ReadFormat =
    perf_event::ReadFormat::TOTAL_TIME_ENABLED.union(perf_event::ReadFormat::TOTAL_TIME_RUNNING);

impl Counters {
    /// Opens every event on every thread in `tids`. With `enable_on_exec` the counters start when the thread
    /// execs (`-- CMD`), else at once (`-p`).
    pub fn open(groups: &[Vec<EventSpec>], tids: &[i32], enable_on_exec: bool) -> anyhow::Result<Self> {
        let mut out = Vec::new();
        let mut first = 0;
        for g in groups {
            let counting = if g.len() == 1 {
                let mut per_thread = Some(Vec::new());
                for &tid in tids {
                    let mut b = builder(g[0].kind, tid);
                    b.enable_on_exec(enable_on_exec).read_format(TIMES);
                    match build(&g[0], tid, &mut b, |b| b.build())? {
                        Some(mut c) => {
                            if !enable_on_exec {
                                c.enable()?;
                            }
                            per_thread.as_mut().expect("still counting").push(c);
                        }
                        None => {
                            per_thread = None;
                            break;
                        }
                    }
                }
                Counting::Single(per_thread)
            } else {
                Counting::Group(open_group(g, tids, enable_on_exec)?)
            };
            out.push((first, counting));
            first += g.len();
        }
        Ok(Self { events: groups.iter().flatten().cloned().collect(), groups: out })
    }

    /// Current totals of every event (`None`: not supported here).
    pub fn read(&mut self) -> io::Result<Vec<Option<Reading>>> {
        let mut out = vec![None; self.events.len()];
        for (first, counting) in &mut self.groups {
            match counting {
                Counting::Single(Some(list)) => {
                    let mut r = Reading::default();
                    for c in list.iter_mut() {
                        let d = c.read_full()?;
                        r.value += d.count();
                        r.enabled += d.time_enabled().map_or(0, |t| t.as_nanos() as u64);
                        r.running += d.time_running().map_or(0, |t| t.as_nanos() as u64);
                    }
                    out[*first] = Some(r);
                }
                Counting::Group(Some(per_thread)) => {
                    let n = per_thread.first().map_or(0, |(_, m)| m.len());
                    let mut sums = vec![Reading::default(); n];
                    for (group, members) in per_thread.iter_mut() {
                        // One read() for the whole group: every member over the same enabled/running time.
                        let data = group.read()?;
                        let enabled = data.time_enabled().map_or(0, |t| t.as_nanos() as u64);
                        let running = data.time_running().map_or(0, |t| t.as_nanos() as u64);
                        for (sum, member) in sums.iter_mut().zip(members.iter()) {
                            sum.value += data.get(member).map_or(0, |e| e.value());
                            sum.enabled += enabled;
                            sum.running += running;
                        }
                    }
                    for (i, r) in sums.into_iter().enumerate() {
                        out[*first + i] = Some(r);
                    }
                }
                _ => {}
            }
        }
        Ok(out)
    }
}

/// A kernel group per thread: a dummy leader carrying inheritance and enable-on-exec, the members following it.
fn open_group(g: &[EventSpec], tids: &[i32], enable_on_exec: bool) -> anyhow::Result<Option<Vec<ThreadGroup>>> {
    let mut per_thread = Vec::new();
    for &tid in tids {
        let mut leader = Group::builder();
        leader.observe_pid(tid).any_cpu().inherit(true).include_kernel().enable_on_exec(enable_on_exec);
        let Some(mut group) = build(&g[0], tid, &mut leader, |b| b.build_group())? else {
            return Ok(None);
        };
        let mut members = Vec::new();
        for e in g {
            let mut b = builder(e.kind, tid);
            b.enabled(true);
            match build(e, tid, &mut b, |b| b.build_with_group(&mut group))? {
                Some(c) => members.push(c),
                None => return Ok(None),
            }
        }
        if !enable_on_exec {
            group.enable()?;
        }
        per_thread.push((group, members));
    }
    Ok(Some(per_thread))
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
