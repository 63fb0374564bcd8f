//! The report's first picture: one short window of the same case under `cfs` and under `gang`, recorded by the
//! private agent while the case runs (which job's ranks ran on which CPU, and each job's co-scheduled fraction over
//! the window), stored with the experiment's runs and drawn one above the other (crate::harness::timeline).
//!
//! The case is the first mix of two measured jobs, in its first repetition (the first progress mode and place of
//! ranks), under the first `cfs` policy and the first `gang` policy of the spec.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::harness::timeline::{draw, record, Panel};
use lockstep_core::cosched::PolicySpec;
use lockstep_proto::protocol::Timeline;
use lockstep_store::{ExperimentRun, Store, TimelineRecord};

/// How long each look at whether every job's ranks run records: the window begins once one of them has seen each
/// job's ranks run (the ranks are up and the agent has taken the job on).
const LOOK_MS: u64 = 200;

/// The longest a recording waits for every job's ranks to run (ranks in containers take seconds to start).
const MAX_WAIT: Duration = Duration::from_mins(1);

/// The least time between every job's ranks running and the window: `gang` slices a job it took on once its demand
/// is measured, at a slot boundary (two slots of the case's policy where they are longer).
const SETTLE: Duration = Duration::from_millis(500);

/// The window's length.
const WINDOW_MS: u64 = 1000;

/// The policies recorded, in the order the report draws them.
const POLICIES: [PolicySpec; 2] = [PolicySpec::Cfs, PolicySpec::Gang];

/// Which cases are recorded: the first at two measured jobs, first repetition, under each of [`POLICIES`].
#[derive(Default)]
pub struct Chooser {
    done: BTreeSet<String>,
}

impl Chooser {
    /// Whether to record the case of `mpl` measured jobs in repetition `repetition` under `policy` (once per
    /// policy: a later case under the same policy is not).
    pub fn wants(&mut self, policy: PolicySpec, mpl: usize, repetition: u32) -> bool {
        mpl == 2 && repetition == 1 && POLICIES.contains(&policy) && self.done.insert(policy.to_string())
    }
}

/// A recording under way, on a thread of its own while the case's jobs run. Dropped unfinished (the case's run
/// failed), it lets the thread give up at its next look.
pub struct Recorder {
    /// The thread, until the recording is finished.
    thread: Option<JoinHandle<anyhow::Result<Timeline>>>,
    /// Set once the case's jobs have ended: a recording still waiting for their ranks to run, or for its window,
    /// gives up.
    over: Arc<AtomicBool>,
}

impl Recorder {
    /// Records a window of [`WINDOW_MS`] of the case whose measured jobs, named `jobs`, the agent at `socket` runs
    /// under a policy of slots of `slot` (`None`: one without slots): it looks every [`LOOK_MS`] until it has seen
    /// a rank of each one run (for at most [`MAX_WAIT`]), then lets the policy take effect ([`SETTLE`], or two
    /// slots where they are longer) and records the window. A fixed delay missed short jobs: `make demo`'s lu W and
    /// ep A end about 3 s after they start under `gang`, where the window began 3 s after the case did, and its
    /// report had no timeline in two of three runs on 2026-12-07.
    pub fn start(socket: &Path, jobs: Vec<String>, slot: Option<Duration>) -> Self {
        let socket = socket.to_path_buf();
        let over = Arc::new(AtomicBool::new(false));
        let ended = Arc::clone(&over);
        let thread = std::thread::spawn(move || {
            let since = Instant::now();
            let mut waiting: BTreeSet<String> = jobs.into_iter().collect();
            while !waiting.is_empty() {
                anyhow::ensure!(
                    !ended.load(Ordering::Relaxed),
                    "the case ended before the agent saw every job's ranks run"
                );
                anyhow::ensure!(
                    since.elapsed() < MAX_WAIT,
                    "not every job's ranks ran within {} s of its start",
                    MAX_WAIT.as_secs()
                );
                let look = record(&socket, LOOK_MS)?;
                for job in running(&look) {
                    waiting.remove(&job);
                }
            }
            std::thread::sleep(SETTLE.max(slot.unwrap_or_default() * 2));
            anyhow::ensure!(!ended.load(Ordering::Relaxed), "the case ended before its window began");
            let window = record(&socket, WINDOW_MS)?;
            anyhow::ensure!(window.cpus.iter().any(|l| !l.segments.is_empty()), "no rank ran in it (the jobs ended)");
            Ok(window)
        });
        Self { thread: Some(thread), over }
    }

    /// Waits for the recording of a case that failed and drops it: the case's failure is what the run reports,
    /// and a window of jobs that did not run their course shows nothing worth a picture.
    pub fn discard(self) {
        let _ = self.finish();
    }

    /// Waits for the recording and stores it as session `session`'s timeline of the case (`experiment`, its
    /// policy label, mix and repetition). A recording that failed, or in which no rank ran (the jobs ended
    /// first), is said on stderr and not stored: the report then has no timeline, and the runs stand.
    pub fn store(self, store: &Store, mut record: TimelineRecord) -> anyhow::Result<()> {
        match self.finish() {
            Ok(t) => {
                record.data = serde_json::to_string(&t)?;
                store.add_timeline(&record)?;
            }
            Err(e) => eprintln!(
                "lockstep: no timeline of {} {} #{}: {e:#} (the report shows none)",
                record.policy, record.mix, record.repetition
            ),
        }
        Ok(())
    }

    /// The recording, once the case's jobs have ended.
    fn finish(mut self) -> anyhow::Result<Timeline> {
        self.over.store(true, Ordering::Relaxed);
        let thread = self.thread.take().ok_or_else(|| anyhow::anyhow!("the recording was finished before"))?;
        thread.join().unwrap_or_else(|_| Err(anyhow::anyhow!("the recording thread panicked")))
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.over.store(true, Ordering::Relaxed);
    }
}

/// The jobs some of whose ranks ran in `t`.
fn running(t: &Timeline) -> impl Iterator<Item = String> + '_ {
    t.jobs.iter().filter(|j| j.ranks > 0 && j.coscheduled.is_some()).map(|j| j.name.to_string())
}

/// The report's timeline section for the session of `runs` (whose first MPI progress mode, `progress`, the
/// recorded cases ran in): the SVG (also written to `dir`) under its heading; empty when the session recorded none.
pub fn section(store: &Store, runs: &[ExperimentRun], progress: &str, dir: &Path) -> anyhow::Result<String> {
    let Some(first) = runs.first() else { return Ok(String::new()) };
    let records = store.timelines(&first.experiment, first.session)?;
    let mut timelines = Vec::new();
    for r in &records {
        let t: Timeline = serde_json::from_str(&r.data)
            .map_err(|e| anyhow::anyhow!("the stored timeline of {} {} is not one ({e})", r.policy, r.mix))?;
        timelines.push((r, t));
    }
    let Some((case, _)) = timelines.first() else { return Ok(String::new()) };
    let panels: Vec<Panel<'_>> =
        timelines.iter().map(|(r, t)| Panel { label: r.policy.clone(), timeline: t }).collect();
    let svg = draw(&panels);
    std::fs::write(dir.join("timeline.svg"), &svg)?;
    let ms = timelines.iter().map(|(_, t)| t.window_ns).max().unwrap_or(0) as f64 / 1e6;
    Ok(format!(
        "<h2>Which job ran where: {} under {}</h2><p>One window of {ms:.0} ms of the case (repetition {}, MPI \
         progress {}), once a rank of every job had run and the policy had had at least {} ms (two slots, where \
         they are longer) to take effect, recorded by the agent's eBPF program from the scheduler's switches: each \
         CPU of the node, and the job whose rank ran on it (blank: another task, or none). Co-scheduled: the share \
         of the time some rank of a job ran in which all its ranks did, over the window (the heading: the mean \
         over the jobs).</p>{svg}",
        crate::harness::report::escape(&case.mix),
        crate::harness::report::escape(&panels.iter().map(|p| p.label.as_str()).collect::<Vec<_>>().join(" and ")),
        case.repetition,
        crate::harness::report::escape(progress),
        SETTLE.as_millis()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_case_of_two_jobs_in_the_first_repetition_is_recorded_under_cfs_and_gang_once_each() {
        let mut c = Chooser::default();
        assert!(!c.wants(PolicySpec::Cfs, 1, 1), "a job alone shows no sharing");
        assert!(!c.wants(PolicySpec::Cfs, 2, 2), "a later repetition");
        assert!(!c.wants(PolicySpec::Auto, 2, 1));
        assert!(c.wants(PolicySpec::Cfs, 2, 1));
        assert!(!c.wants(PolicySpec::Cfs, 2, 1), "once");
        assert!(c.wants(PolicySpec::Gang, 2, 1));
    }

    #[test]
    fn the_section_draws_the_sessions_timelines_in_order_and_none_is_no_section() {
        use lockstep_proto::protocol::{CpuLane, Segment, TimelineJob};
        let dir = lockstep_scratch::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        let run = ExperimentRun { experiment: "e".into(), session: 2.0, ..ExperimentRun::default() };
        assert_eq!(section(&store, std::slice::from_ref(&run), "busy", dir.path()).unwrap(), "");
        let timeline = |job: &str, share| Timeline {
            window_ns: 1_000_000_000,
            dropped: 0,
            cpus: vec![CpuLane {
                cpu: 0,
                segments: vec![Segment { start_ns: 0, end_ns: 500_000_000, job: job.parse().unwrap() }],
            }],
            jobs: vec![TimelineJob { name: job.parse().unwrap(), ranks: 2, coscheduled: Some(share) }],
        };
        for (session, policy, share) in [(1.0, "cfs", 0.1), (2.0, "cfs", 0.2), (2.0, "gang/200ms", 0.9)] {
            let data = serde_json::to_string(&timeline("e-lu-0", share)).unwrap();
            let record = TimelineRecord {
                experiment: "e".into(),
                session,
                policy: policy.into(),
                mix: "lu+ep".into(),
                repetition: 1,
                data,
            };
            store.add_timeline(&record).unwrap();
        }
        let html = section(&store, &[run], "busy", dir.path()).unwrap();
        assert!(html.starts_with("<h2>Which job ran where: lu+ep under cfs and gang/200ms</h2>"), "{html}");
        let (cfs, gang) = (html.find("cfs — co-scheduled 0.20").unwrap(), html.find("gang/200ms — co-scheduled 0.90"));
        assert!(gang.is_some_and(|g| cfs < g), "cfs first, then gang, this session's only: {html}");
        assert!(std::fs::read_to_string(dir.path().join("timeline.svg")).unwrap().starts_with("<svg"));
    }
}
