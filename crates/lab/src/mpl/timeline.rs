//! The report's first picture: one short window of the same case under `cfs` and under `gang`, recorded by the
//! private agent while the case runs (which job's ranks ran on which CPU, and each job's co-scheduled fraction over
//! the window), stored with the experiment's runs and drawn one above the other (crate::harness::timeline).
//!
//! The case is the first mix of two measured jobs, in its first repetition (the first progress mode and place of
//! ranks), under the first `cfs` policy and the first `gang` policy of the spec.

use std::collections::BTreeSet;
use std::path::Path;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::harness::timeline::{draw, Panel};
use lockstep_core::cosched::PolicySpec;
use lockstep_proto::client::{call, check};
use lockstep_proto::protocol::{Request, Timeline};
use lockstep_store::{ExperimentRun, Store, TimelineRecord};

/// How long after its jobs start a case's window begins: the ranks are up and the agent has seen them.
const DELAY: Duration = Duration::from_secs(3);

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

/// A recording under way, on a thread of its own while the case's jobs run.
pub struct Recorder(JoinHandle<anyhow::Result<Timeline>>);

impl Recorder {
    /// Asks the agent at `socket`, [`DELAY`] from now, for a window of [`WINDOW_MS`].
    pub fn start(socket: &Path) -> Self {
        let socket = socket.to_path_buf();
        Self(std::thread::spawn(move || {
            std::thread::sleep(DELAY);
            let answer = check(call(&socket, &Request::Timeline { millis: WINDOW_MS })?)?;
            answer.timeline.ok_or_else(|| anyhow::anyhow!("the agent answered with no timeline"))
        }))
    }

    /// Waits for the recording of a case that failed and drops it: the case's failure is what the run reports,
    /// and a window of jobs that did not run their course shows nothing worth a picture.
    pub fn discard(self) {
        let _ = self.0.join();
    }

    /// Waits for the recording and stores it as session `session`'s timeline of the case (`experiment`, its
    /// policy label, mix and repetition). A recording that failed, or in which no rank ran (the jobs ended
    /// first), is said on stderr and not stored: the report then has no timeline, and the runs stand.
    pub fn store(self, store: &Store, mut record: TimelineRecord) -> anyhow::Result<()> {
        let timeline = self.0.join().unwrap_or_else(|_| Err(anyhow::anyhow!("the recording thread panicked")));
        let timeline = timeline.and_then(|t| {
            let ran = t.cpus.iter().any(|l| !l.segments.is_empty());
            anyhow::ensure!(ran, "no rank ran in it (did the jobs end within {} s?)", DELAY.as_secs());
            Ok(t)
        });
        match timeline {
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
        "<h2>Which job ran where: {} under {}</h2><p>One window of {ms:.0} ms, {} s into the case (repetition {}, \
         MPI progress {}), \
         recorded by the agent's eBPF program from the scheduler's switches: each CPU of the node, and the job \
         whose rank ran on it (blank: another task, or none). Co-scheduled: the share of the time some rank of a job ran in which all its ranks \
         did, over the window (the heading: the mean over the jobs).</p>{svg}",
        crate::harness::report::escape(&case.mix),
        crate::harness::report::escape(&panels.iter().map(|p| p.label.as_str()).collect::<Vec<_>>().join(" and ")),
        DELAY.as_secs(),
        case.repetition,
        crate::harness::report::escape(progress)
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
