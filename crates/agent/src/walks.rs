//! A job's cgroup tree as the sampler walks it: within its bounds per look ([`lockstep_cgroup::JOB_TREE`] but for a
//! Slurm job's), and no more often than what a look
//! costs allows, so that a tree however wide costs the agent at most [`SHARE`] of a CPU. A delegated tree is its
//! user's to grow (cgroup v1 sets no limit), and a walk reads every cgroup's `cgroup.procs` and directory: 5,000
//! empty cgroups took the sampler 7 % of a CPU at one walk a second. A job whose walks are spaced out past the
//! sampling interval is said once; processes that appear in its tree are found at its next walk.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use lockstep_cgroup::procfs::thread_cpu;
use lockstep_cgroup::{procs_within, Bounds, Walk};
use lockstep_core::ident::JobKey;

/// The share of one CPU the walks of one job's tree may take: a walk that took the sampler's thread `t` of CPU
/// time is not followed by the next for `t / SHARE` (a walk of a job's one cgroup, some 50 µs, every 10 ms).
pub(crate) const SHARE: f64 = 0.005;

/// When each job's tree may be walked next.
#[derive(Default)]
pub(crate) struct Paced {
    jobs: HashMap<JobKey, Pace>,
}

/// One job's pace.
struct Pace {
    /// When its tree may be walked again.
    next: Instant,
    /// Whether its walks are spaced out past the sampling interval (its tree is costly to walk).
    spaced: bool,
    /// Whether that was said.
    said: bool,
}

impl Paced {
    /// Walks job `name`'s tree below `dirs` within `bounds`, unless its last walk was too recent for what it
    /// cost (`None`: walk it later). `interval`: how often the caller samples, to say once when the job's walks
    /// are spaced out past it.
    pub(crate) fn walk(
        &mut self,
        name: &JobKey,
        dirs: &[PathBuf],
        bounds: Bounds,
        interval: Option<Duration>,
    ) -> Option<Walk> {
        let now = Instant::now();
        if !self.due(name, now) {
            return None;
        }
        let before = thread_cpu();
        let walk = procs_within(dirs, bounds);
        self.walked(name, now, thread_cpu().saturating_sub(before), interval);
        Some(walk)
    }

    /// Whether job `name`'s tree may be walked at `now`.
    fn due(&self, name: &JobKey, now: Instant) -> bool {
        self.jobs.get(name).is_none_or(|p| now >= p.next)
    }

    /// Notes that job `name`'s tree was walked at `at` for `cost` of CPU time: the next walk waits `cost / SHARE`
    /// from `at`. Said once when that is longer than `interval`.
    fn walked(&mut self, name: &JobKey, at: Instant, cost: Duration, interval: Option<Duration>) {
        let wait = cost.div_f64(SHARE);
        let pace = self.jobs.entry(name.clone()).or_insert(Pace { next: at, spaced: false, said: false });
        pace.next = at + wait;
        pace.spaced = interval.is_some_and(|i| wait > i);
        if pace.spaced && !pace.said {
            pace.said = true;
            log::info!(
                "job {name}: a walk of its cgroup tree took {:.1} ms of CPU: it is walked at most every {:.1} s \
                 ({} % of a CPU), and processes that appear in it are found that much later",
                cost.as_secs_f64() * 1e3,
                wait.as_secs_f64(),
                SHARE * 100.0
            );
        }
    }

    /// Whether job `name`'s walks are spaced out past the sampling interval: its tree costs too much to walk at
    /// every look (whoever looks).
    pub(crate) fn spaced(&self, name: &JobKey) -> bool {
        self.jobs.get(name).is_some_and(|p| p.spaced)
    }

    /// Forgets job `name` (it is no longer sampled): if it comes again, it is walked at once.
    pub(crate) fn forget(&mut self, name: &JobKey) {
        self.jobs.remove(name);
    }
}

#[cfg(test)]
mod tests {
    /// Job `name` as the walks key it.
    fn key(name: &str) -> JobKey {
        name.parse().unwrap()
    }

    use super::*;

    #[test]
    fn a_walk_is_not_repeated_before_its_cost_over_the_share_has_passed() {
        let mut paced = Paced::default();
        let t0 = Instant::now();
        assert!(paced.due(&key("wide"), t0), "a job never walked is walked at once");
        // 20 ms of CPU per walk: the next after 4 s (0.5 %), past a 1 s sampling interval (said).
        paced.walked(&key("wide"), t0, Duration::from_millis(20), Some(Duration::from_secs(1)));
        assert!(!paced.due(&key("wide"), t0 + Duration::from_millis(3_999)));
        assert!(paced.due(&key("wide"), t0 + Duration::from_secs(4)));
        assert!(paced.spaced(&key("wide")) && paced.jobs[&key("wide")].said);
        // A job's one cgroup: walked at every sample, never said.
        paced.walked(&key("small"), t0, Duration::from_micros(50), Some(Duration::from_secs(1)));
        assert!(paced.due(&key("small"), t0 + Duration::from_millis(10)));
        assert!(!paced.spaced(&key("small")) && !paced.jobs[&key("small")].said);
        // Forgotten (the job went): walked at once when it comes again.
        paced.forget(&key("wide"));
        assert!(paced.due(&key("wide"), t0) && !paced.spaced(&key("wide")));
    }

    #[test]
    fn a_walk_finds_the_processes_of_the_tree_and_then_waits_its_turn() {
        let t = lockstep_scratch::tempdir().unwrap();
        let top = t.path().join("job");
        std::fs::create_dir_all(top.join("child")).unwrap();
        std::fs::write(top.join("cgroup.procs"), "7\n").unwrap();
        std::fs::write(top.join("child/cgroup.procs"), "8\n").unwrap();
        let mut paced = Paced::default();
        let walk = paced.walk(&key("j"), &[top], lockstep_cgroup::JOB_TREE, None).expect("a first walk");
        assert_eq!(walk.procs, [7, 8]);
        // Its pace is kept from now on: the next walk waits for what this one cost.
        assert!(paced.jobs.contains_key(&key("j")));
    }
}
