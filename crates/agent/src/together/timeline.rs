//! A timeline: which job's ranks ran on which CPU over a short window, recorded by the `together` program's
//! switch events (bpf/together.bpf.c, `timeline` ring buffer) and turned into segments per CPU, with each job's
//! co-scheduled fraction over the same window from the program's integrated times.
//!
//! A recording is served on a thread of its own at normal priority, never the daemon's loop: [`serve`] asks the
//! sampler's thread, which owns the program, to start and to end it (map operations), drains the ring every few
//! milliseconds meanwhile, and makes the segments after. The daemon's loop takes part in none of it. One recording
//! runs at a time; its length is bounded ([`TIMELINE_MILLIS`]) and so are the events it keeps ([`MAX_EVENTS`]).

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use libbpf_rs::{Iter, MapCore, MapFlags, MapHandle, RingBufferBuilder};

use super::{types, Reading, Together};
use crate::bpf::{bytes_of, read_as};
use lockstep_core::error::UsageError;
use lockstep_core::ident::JobKey;
use lockstep_proto::protocol::{CpuLane, Segment, Timeline, TimelineJob, TIMELINE_MILLIS};

/// Most events one recording keeps; those beyond count as lost. Each makes at most one segment, some 120 bytes
/// of JSON with a job name of the longest: the answer stays within what the client reads (`MAX_ANSWER`, 16 MiB).
const MAX_EVENTS: usize = 100_000;

/// How often the ring buffer is drained while the window passes.
const DRAIN_EVERY: Duration = Duration::from_millis(5);

/// A switch the program saw (`struct timeline_event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Event {
    /// When (CLOCK_MONOTONIC ns).
    pub ns: u64,
    /// On which CPU.
    pub cpu: u32,
    /// The job slot of the rank.
    pub slot: u32,
    /// Switched onto the CPU (else off it).
    pub on: bool,
}

/// A recording under way: the program records while this lives (dropping it turns recording off and frees the
/// agent for the next one).
pub(crate) struct Recording {
    ring: MapHandle,
    ctl: MapHandle,
    /// When the window started and, once it has, ended (CLOCK_MONOTONIC ns).
    start_ns: u64,
    end_ns: u64,
    /// Each job's slot and reading as the window started.
    before: BTreeMap<JobKey, (u32, Reading)>,
    /// Held while recording: one at a time.
    busy: Arc<AtomicBool>,
    events: Vec<Event>,
    /// Events lost: left out of `events` for want of room, or dropped by the program (a full ring).
    lost: u64,
    /// Once ended: the jobs measured over the whole window, and the slot of each.
    jobs: Vec<TimelineJob>,
    names: HashMap<u32, JobKey>,
}

impl Drop for Recording {
    fn drop(&mut self) {
        let _ = set_ctl(&self.ctl, false);
        self.busy.store(false, Ordering::Release);
    }
}

/// Writes `timeline_ctl` (on or off, no drops counted).
fn set_ctl(ctl: &MapHandle, on: bool) -> anyhow::Result<()> {
    let value = types::timeline_ctl { on: u32::from(on), ..Default::default() };
    ctl.update(&0u32.to_ne_bytes(), bytes_of(&value), MapFlags::ANY)?;
    Ok(())
}

impl Together {
    /// Starts recording: turns the program's recording on and notes each job's reading. An error when another
    /// recording runs. Map operations and one pass of the task iterator: short, on the sampler's thread.
    pub(crate) fn start_timeline(&self) -> anyhow::Result<Recording> {
        let (ring, ctl) = (MapHandle::try_from(&self.timeline)?, MapHandle::try_from(&self.timeline_ctl)?);
        if self.recording.swap(true, Ordering::AcqRel) {
            return Err(UsageError::new("the agent is recording a timeline already (one at a time; try again)").into());
        }
        // From here, dropping the recording frees the agent again.
        let mut recording = Recording {
            ring,
            ctl,
            start_ns: 0,
            end_ns: 0,
            before: BTreeMap::new(),
            busy: self.recording.clone(),
            events: Vec::new(),
            lost: 0,
            jobs: Vec::new(),
            names: HashMap::new(),
        };
        // What an earlier recording left in the ring is not of this window.
        recording.drain(u64::MAX)?;
        recording.events.clear();
        recording.lost = 0;
        recording.start_ns = crate::bpf::ktime_ns();
        set_ctl(&recording.ctl, true)?;
        // The ranks on a CPU now: they switch on no CPU until they are switched off.
        Iter::new(&self.timeline_look)?.read_to_end(&mut Vec::new())?;
        recording.before =
            self.jobs.iter().filter_map(|(name, job)| Some((name.clone(), (job.slot, self.read(name)?)))).collect();
        Ok(recording)
    }

    /// Ends the window of `recording`: turns recording off, takes the drops and each job's reading (the jobs
    /// measured over the whole window, each in the slot it had). Map operations only: on the sampler's thread.
    pub(crate) fn end_timeline(&self, recording: &mut Recording) -> anyhow::Result<()> {
        recording.end_ns = crate::bpf::ktime_ns();
        // Read before turning off, which clears the count.
        let raw = recording.ctl.lookup(&0u32.to_ne_bytes(), MapFlags::ANY)?.unwrap_or_default();
        recording.lost += read_as::<types::timeline_ctl>(&raw).map_or(0, |c| c.dropped);
        set_ctl(&recording.ctl, false)?;
        for (name, (slot, before)) in &recording.before {
            let (Some(job), Some(after)) = (self.jobs.get(name), self.read(name)) else { continue };
            if job.slot != *slot {
                continue;
            }
            recording.names.insert(*slot, name.clone());
            let active = after.active.saturating_sub(before.active);
            let together = after.together.saturating_sub(before.together);
            let coscheduled = (active > 0).then(|| together.min(active) as f64 / active as f64);
            recording.jobs.push(TimelineJob { name: name.clone(), ranks: after.ranks, coscheduled });
        }
        Ok(())
    }
}

impl Recording {
    /// The timeline of a recording ended ([`Together::end_timeline`]): what is left in the ring, then the segments
    /// (no lock needed).
    fn into_timeline(mut self) -> anyhow::Result<Timeline> {
        self.drain(self.end_ns)?;
        let cpus = lanes(&self.events, self.start_ns, self.end_ns, &self.names, cpu_count());
        let jobs = std::mem::take(&mut self.jobs);
        Ok(Timeline { window_ns: self.end_ns.saturating_sub(self.start_ns), dropped: self.lost, cpus, jobs })
    }

    /// Takes every event in the ring (those after `until` ns are of no window and left out); past
    /// [`MAX_EVENTS`] an event is counted as lost, not kept, so what a drain holds is bounded however fast the
    /// ring fills.
    fn drain(&mut self, until: u64) -> anyhow::Result<()> {
        let room = MAX_EVENTS.saturating_sub(self.events.len());
        let (events, lost) = (&mut self.events, &mut self.lost);
        let mut taken = 0;
        let mut builder = RingBufferBuilder::new();
        builder.add(&self.ring, |data: &[u8]| {
            if let Some(e) = read_as::<types::timeline_event>(data).filter(|e| e.ns <= until) {
                if taken < room {
                    events.push(Event { ns: e.ns, cpu: e.cpu, slot: u32::from(e.job), on: e.kind != 0 });
                    taken += 1;
                } else {
                    *lost += 1;
                }
            }
            0
        })?;
        builder.build()?.consume()?;
        Ok(())
    }
}

/// CPUs the node may have (the lanes of a timeline, idle ones too).
fn cpu_count() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    u32::try_from(n).unwrap_or(1).max(1)
}

/// The segments per CPU that `events` (switches, in any order) make over the window `start_ns..end_ns`, for the
/// jobs in `names` (others left out), on `cpus` lanes (an event of a CPU past them left out). A rank switched off
/// a CPU with no switch on seen before ran there since the window's start; one still on at the end runs to its
/// end; a switch on while another rank was on (its switch off lost) ends that one.
pub(crate) fn lanes(
    events: &[Event],
    start_ns: u64,
    end_ns: u64,
    names: &HashMap<u32, JobKey>,
    cpus: u32,
) -> Vec<CpuLane> {
    // A CPU number past the node's is no CPU's: left out, so that no event can size the lanes.
    let mut sorted: Vec<Event> =
        events.iter().filter(|e| names.contains_key(&e.slot) && e.cpu < cpus).copied().collect();
    sorted.sort_by_key(|e| e.ns);
    let count = cpus;
    let mut lanes: Vec<CpuLane> = (0..count).map(|cpu| CpuLane { cpu, segments: Vec::new() }).collect();
    // Per CPU: the rank on it (its job slot, since when), and whether anything was seen on it yet.
    let mut open: Vec<Option<(u32, u64)>> = vec![None; count as usize];
    let mut seen = vec![false; count as usize];
    let rel = |ns: u64| ns.clamp(start_ns, end_ns) - start_ns;
    let push = |lane: &mut CpuLane, slot: u32, from: u64, to: u64| {
        if to > from {
            lane.segments.push(Segment { start_ns: from, end_ns: to, job: names[&slot].clone() });
        }
    };
    for e in &sorted {
        let i = e.cpu as usize;
        let now = rel(e.ns);
        match (e.on, open[i]) {
            (true, running) => {
                if let Some((slot, since)) = running {
                    push(&mut lanes[i], slot, since, now);
                }
                open[i] = Some((e.slot, now));
            }
            (false, Some((slot, since))) if slot == e.slot => {
                push(&mut lanes[i], slot, since, now);
                open[i] = None;
            }
            (false, None) if !seen[i] => push(&mut lanes[i], e.slot, 0, now),
            (false, _) => {}
        }
        seen[i] = true;
    }
    for (i, running) in open.into_iter().enumerate() {
        if let Some((slot, since)) = running {
            push(&mut lanes[i], slot, since, end_ns - start_ns);
        }
    }
    lanes
}

/// What records a window: the thread that owns the eBPF program (the sampler's) starts and ends it.
pub(crate) trait Recorder: Clone + Send + 'static {
    /// Starts recording a timeline, on the thread that owns the program.
    fn start_timeline(&self) -> anyhow::Result<Recording>;

    /// Ends the window of `recording`, on that thread.
    fn end_timeline(&self, recording: Recording) -> anyhow::Result<Recording>;
}

/// Serves a `timeline` request of user `uid` for `millis` ms: root only, within [`TIMELINE_MILLIS`], on a thread
/// of its own (see [`record`]).
pub(crate) fn serve(sampler: &impl Recorder, uid: u32, millis: u64) -> anyhow::Result<Timeline> {
    if uid == 0 {
        check(millis).and_then(|()| {
            let sampler = sampler.clone();
            std::thread::Builder::new()
                .name("lockstep-timeline".into())
                .spawn(move || record(&sampler, millis))?
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("the timeline's recording failed")))
        })
    } else {
        Err(lockstep_core::error::Denied::new(format!("only root may record a timeline (UID {uid} asked)")).into())
    }
}

/// Whether a window of `millis` ms may be recorded.
fn check(millis: u64) -> anyhow::Result<()> {
    if TIMELINE_MILLIS.contains(&millis) {
        return Ok(());
    }
    Err(UsageError::new(format!(
        "timeline window {millis} ms refused (expected {} to {} ms)",
        TIMELINE_MILLIS.start(),
        TIMELINE_MILLIS.end()
    ))
    .into())
}

/// Records a window of `millis` ms at normal priority: the sampler's thread starts and ends it (it owns the
/// program), and this one drains the ring meanwhile.
fn record(sampler: &impl Recorder, millis: u64) -> anyhow::Result<Timeline> {
    let mut recording = sampler.start_timeline()?;
    let deadline = Instant::now() + Duration::from_millis(millis);
    while let Some(left) = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) {
        std::thread::sleep(left.min(DRAIN_EVERY));
        recording.drain(u64::MAX)?;
    }
    sampler.end_timeline(recording)?.into_timeline()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ns: u64, cpu: u32, slot: u32, on: bool) -> Event {
        Event { ns, cpu, slot, on }
    }

    fn seg(start_ns: u64, end_ns: u64, job: &str) -> Segment {
        Segment { start_ns, end_ns, job: job.parse().unwrap() }
    }

    #[test]
    fn switches_make_segments_per_cpu_from_the_windows_start_to_its_end() {
        let names = HashMap::from([(1, "a".parse().unwrap()), (2, "b".parse().unwrap())]);
        let events = [
            // CPU 0: a ran since before the window, b from 150 to 300, a again to the end.
            ev(1150, 0, 2, true),
            ev(1100, 0, 1, false),
            ev(1300, 0, 2, false),
            ev(1300, 0, 1, true),
            // CPU 1: a job the agent does not know, then b whose switch off was lost, then a.
            ev(1200, 1, 9, true),
            ev(1400, 1, 2, true),
            ev(1500, 1, 1, true),
            ev(1600, 1, 1, false),
        ];
        let lanes = lanes(&events, 1000, 2000, &names, 3);
        assert_eq!(lanes.len(), 3, "an idle CPU has its lane");
        assert_eq!(lanes[0].segments, [seg(0, 100, "a"), seg(150, 300, "b"), seg(300, 1000, "a")]);
        assert_eq!(lanes[1].segments, [seg(400, 500, "b"), seg(500, 600, "a")]);
        assert!(lanes[2].segments.is_empty());
    }

    #[test]
    fn an_event_of_a_cpu_past_the_nodes_is_left_out_and_sizes_nothing() {
        let names = HashMap::from([(1, "a".parse().unwrap())]);
        let events = [ev(1100, u32::MAX, 1, true), ev(1200, 2, 1, true), ev(1300, 1, 1, true)];
        let lanes = lanes(&events, 1000, 2000, &names, 2);
        assert_eq!(lanes.len(), 2, "lanes as the node has CPUs, whatever an event says");
        assert!(lanes[0].segments.is_empty());
        assert_eq!(lanes[1].segments, [seg(300, 1000, "a")]);
    }

    #[test]
    fn a_window_out_of_range_is_refused_as_bad_input() {
        for millis in [0, 9, 5001, u64::MAX] {
            let e = check(millis).unwrap_err();
            assert!(e.is::<UsageError>() && e.to_string().contains(&format!("{millis} ms")), "{e}");
        }
        assert!(check(10).is_ok() && check(5000).is_ok());
    }
}
