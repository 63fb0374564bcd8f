//! Counters through perf_event_open (perf-event2) on threads (inherited by their children, as `perf stat -p`)
//! or on a cgroup per CPU (as `perf stat -G`), read with the times enabled and running so that multiplexed
//! counts can be scaled, summed over every target.

use std::fs::File;
use std::io;

use perf_event::{Builder, Counter, Group};

use super::events::{EventSpec, Kind};
use crate::error::{Error, Result};

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
    #[must_use]
    pub fn since(&self, earlier: &Reading) -> Reading {
        Reading {
            value: self.value.saturating_sub(earlier.value),
            enabled: self.enabled.saturating_sub(earlier.enabled),
            running: self.running.saturating_sub(earlier.running),
        }
    }
}

/// What one set of counters observes.
#[derive(Clone, Copy, Debug)]
pub enum Target<'a> {
    /// One thread; with `inherit`, also the children it starts (their counts arrive when they exit).
    Thread {
        /// Thread id.
        tid: i32,
        /// Whether children inherit the counters.
        inherit: bool,
    },
    /// Every task of a cgroup, while it runs on one CPU (perf's `-G`).
    Cgroup {
        /// The cgroup directory, opened.
        cgroup: &'a File,
        /// The CPU.
        cpu: usize,
    },
}

/// One `-e` group opened on one target.
enum Opened {
    /// A lone event.
    Single(Counter),
    /// A kernel group: a dummy leader, read in one `read()`, and the members.
    Group(Group, Vec<Counter>),
}

/// The counters of every event, on any number of targets, summed.
pub struct Counters {
    /// Events in `-e` order.
    pub events: Vec<EventSpec>,
    /// The `-e` groups.
    groups: Vec<Vec<EventSpec>>,
    /// Whether each group can be counted here (false once a hardware event of it was refused).
    supported: Vec<bool>,
    /// Counters start at the target's exec (`-- CMD`) rather than at once.
    enable_on_exec: bool,
    /// Per target key: one entry per group (`None` when not supported).
    targets: Vec<(i64, Vec<Option<Opened>>)>,
    /// Final counts of detached targets, per event.
    retired: Vec<Reading>,
}

/// A counter of `kind` on `target`, kernel and hypervisor sides included (as perf stat does for root; some PMUs,
/// such as msr, refuse any exclusion), user space only where perf_event_paranoid forbids more.
fn builder(kind: Kind, target: Target<'_>) -> Builder<'_> {
    let mut b = match kind {
        Kind::Hardware(h) => Builder::new(h),
        Kind::Software(s) => Builder::new(s),
        Kind::Tracepoint(id) => Builder::new(perf_event::events::Tracepoint::with_id(id)),
        Kind::Pmu(raw) => Builder::new(raw),
        Kind::Absent => unreachable!("events without a PMU here are never opened"),
    };
    observe(&mut b, target);
    b.include_kernel().include_hv();
    b
}

fn observe<'a>(b: &mut Builder<'a>, target: Target<'a>) {
    match target {
        Target::Thread { tid, inherit } => b.observe_pid(tid).any_cpu().inherit(inherit),
        Target::Cgroup { cgroup, cpu } => b.observe_cgroup(cgroup).one_cpu(cpu),
    };
}

fn describe(target: Target) -> String {
    match target {
        Target::Thread { tid, .. } => format!("thread {tid}"),
        Target::Cgroup { cpu, .. } => format!("the cgroup on CPU {cpu}"),
    }
}

/// Opens with `open`; on EACCES/EPERM retries without kernel counts. Maps the errors a user can cause;
/// `Ok(None)`: a hardware event this machine cannot count.
fn build<'a, T>(
    e: &EventSpec,
    target: Target<'a>,
    b: &mut Builder<'a>,
    mut open: impl FnMut(&Builder<'a>) -> io::Result<T>,
) -> Result<Option<T>> {
    let first = open(b).or_else(|err| match err.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => open(b.exclude_kernel(true).exclude_hv(true)),
        _ => Err(err),
    });
    match first {
        Ok(t) => Ok(Some(t)),
        Err(err) => match err.raw_os_error() {
            Some(libc::ESRCH) => {
                Err(Error::Gone(lockstep_core::error::UsageError::new(format!("process/{} is gone", describe(target)))))
            }
            Some(libc::EACCES | libc::EPERM) => Err(Error::usage(format!(
                "no permission to count {} on {} (run as root or lower kernel.perf_event_paranoid)",
                e.name,
                describe(target)
            ))),
            _ if matches!(e.kind, Kind::Hardware(_) | Kind::Pmu(_)) => Ok(None),
            _ => Err(Error::Kernel { event: e.name.clone(), why: err }),
        },
    }
}

const TIMES: perf_event::ReadFormat =
    perf_event::ReadFormat::TOTAL_TIME_ENABLED.union(perf_event::ReadFormat::TOTAL_TIME_RUNNING);

fn nanos(t: Option<std::time::Duration>) -> u64 {
    t.map_or(0, |t| t.as_nanos() as u64)
}

impl Counters {
    /// Counters for `groups` on no target yet. With `enable_on_exec` thread counters start when the thread
    /// execs (`-- CMD`), else at once.
    pub fn new(groups: &[Vec<EventSpec>], enable_on_exec: bool) -> Self {
        let events: Vec<EventSpec> = groups.iter().flatten().cloned().collect();
        Self {
            retired: vec![Reading::default(); events.len()],
            events,
            groups: groups.to_vec(),
            supported: vec![true; groups.len()],
            enable_on_exec,
            targets: Vec::new(),
        }
    }

    /// Opens every event on every thread in `tids`, children inherited (`perf stat -p` / `-- CMD`). A thread that
    /// exits between being listed and being opened (the kernel's ESRCH, a zombie's too) is left out, as perf stat
    /// -p does; an error only if every thread is gone.
    pub fn open(groups: &[Vec<EventSpec>], tids: &[i32], enable_on_exec: bool) -> Result<Self> {
        let mut counters = Self::new(groups, enable_on_exec);
        let mut gone = None;
        for &tid in tids {
            match counters.attach(i64::from(tid), Target::Thread { tid, inherit: true }) {
                Err(e @ Error::Gone(_)) => gone = Some(e),
                other => other?,
            }
        }
        match gone {
            Some(e) if counters.targets.is_empty() => Err(e),
            _ => Ok(counters),
        }
    }

    /// Opens every group on `target`, known from now on as `key`.
    pub fn attach(&mut self, key: i64, target: Target) -> Result<()> {
        let mut opened = Vec::with_capacity(self.groups.len());
        for (g, supported) in self.groups.iter().zip(self.supported.iter_mut()) {
            let one = if !*supported || g.iter().any(|e| e.kind == Kind::Absent) {
                None
            } else if g.len() == 1 {
                let mut b = builder(g[0].kind, target);
                b.enable_on_exec(self.enable_on_exec).read_format(TIMES);
                build(&g[0], target, &mut b, perf_event::Builder::build)?.map(Opened::Single)
            } else {
                open_group(g, target, self.enable_on_exec)?
            };
            if let Some(mut o) = one {
                if !self.enable_on_exec {
                    match &mut o {
                        Opened::Single(c) => c.enable()?,
                        Opened::Group(leader, _) => leader.enable()?,
                    }
                }
                opened.push(Some(o));
            } else {
                *supported = false;
                opened.push(None);
            }
        }
        self.targets.push((key, opened));
        Ok(())
    }

    /// Keys of the targets attached.
    pub fn keys(&self) -> impl Iterator<Item = i64> + '_ {
        self.targets.iter().map(|(k, _)| *k)
    }

    /// Takes the final counts of target `key` into the totals and closes its counters (a thread that exited).
    pub fn detach(&mut self, key: i64) -> io::Result<()> {
        let Some(i) = self.targets.iter().position(|(k, _)| *k == key) else { return Ok(()) };
        let (_, mut opened) = self.targets.swap_remove(i);
        let mut finals = vec![None; self.events.len()];
        read_target(&self.groups, &mut opened, &mut finals)?;
        for (sum, r) in self.retired.iter_mut().zip(finals) {
            if let Some(r) = r {
                sum.add(&r);
            }
        }
        Ok(())
    }

    /// Current totals of every event over all targets, detached ones included (`None`: not supported here).
    pub fn read(&mut self) -> io::Result<Vec<Option<Reading>>> {
        let mut out: Vec<Option<Reading>> = self.retired.iter().map(|r| Some(*r)).collect();
        for (_, opened) in &mut self.targets {
            read_target(&self.groups, opened, &mut out)?;
        }
        let mut first = 0;
        for (g, supported) in self.groups.iter().zip(&self.supported) {
            if !supported {
                out[first..first + g.len()].fill(None);
            }
            first += g.len();
        }
        Ok(out)
    }
}

impl Reading {
    /// Adds another reading (of another target) to this one.
    pub fn add(&mut self, other: &Reading) {
        self.value += other.value;
        self.enabled += other.enabled;
        self.running += other.running;
    }
}

/// Adds one target's counts to `out` (indexed by event).
fn read_target(
    groups: &[Vec<EventSpec>],
    opened: &mut [Option<Opened>],
    out: &mut [Option<Reading>],
) -> io::Result<()> {
    let mut first = 0;
    for (g, o) in groups.iter().zip(opened.iter_mut()) {
        match o {
            Some(Opened::Single(c)) => {
                let d = c.read_full()?;
                let r =
                    Reading { value: d.count(), enabled: nanos(d.time_enabled()), running: nanos(d.time_running()) };
                out[first].get_or_insert_with(Reading::default).add(&r);
            }
            Some(Opened::Group(leader, members)) => {
                // One read() for the whole group: every member over the same enabled/running time.
                let data = leader.read()?;
                let (enabled, running) = (nanos(data.time_enabled()), nanos(data.time_running()));
                for (i, member) in members.iter().enumerate() {
                    let value = data.get(member).map_or(0, |e| e.value());
                    out[first + i].get_or_insert_with(Reading::default).add(&Reading { value, enabled, running });
                }
            }
            None => {}
        }
        first += g.len();
    }
    Ok(())
}

/// A kernel group on `target`: a dummy leader carrying inheritance and enable-on-exec, the members following
/// it. `None` when a member cannot be counted here.
fn open_group(g: &[EventSpec], target: Target, enable_on_exec: bool) -> Result<Option<Opened>> {
    let mut leader = Group::builder();
    observe(&mut leader, target);
    leader.include_kernel().include_hv().enable_on_exec(enable_on_exec);
    let Some(mut group) = build(&g[0], target, &mut leader, perf_event::Builder::build_group)? else {
        return Ok(None);
    };
    let mut members = Vec::new();
    for e in g {
        let mut b = builder(e.kind, target);
        b.enabled(true);
        match build(e, target, &mut b, |b| b.build_with_group(&mut group))? {
            Some(c) => members.push(c),
            None => return Ok(None),
        }
    }
    Ok(Some(Opened::Group(group, members)))
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // the scaled values are exact in binary
mod tests {
    use super::{Counters, Reading};
    use crate::events::parse_list;

    #[test]
    fn a_thread_gone_before_it_is_opened_is_left_out_unless_all_are() {
        let groups = parse_list("task-clock,page-faults").unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id() as i32;
        child.wait().unwrap();
        let me = std::process::id() as i32;
        let counters = Counters::open(&groups, &[gone, me], false).unwrap();
        assert_eq!(counters.keys().collect::<Vec<_>>(), [i64::from(me)]);
        let err = Counters::open(&groups, &[gone], false).err().expect("every thread gone");
        assert!(err.to_string().contains(&format!("thread {gone} is gone")), "{err}");
        assert!(matches!(err, crate::Error::Gone(_)), "a usage error (exit 2 in a command-line tool): {err}");
    }

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
