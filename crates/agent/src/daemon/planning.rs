//! What plans each slot: the policy in force and its planner, and `auto`'s state while another policy is in force.

use std::time::{Duration, Instant};

use lockstep_core::cosched::auto::{Auto, Choice};
use lockstep_core::cosched::{Desired, JobView, Planner, PolicySpec};

/// How long `auto`'s state is kept while another policy is in force: longer than a paired comparison's windows
/// (seconds), shorter than what an admin switching policies means as a fresh start.
const AUTO_KEPT: Duration = Duration::from_mins(1);

/// Whether `auto`'s state, left at `since`, is still to be taken up again ([`AUTO_KEPT`]).
fn still_kept(since: Instant) -> bool {
    since.elapsed() <= AUTO_KEPT
}

/// The policy in force and what plans its slots.
pub(super) struct Planning {
    /// The policy in force.
    policy: PolicySpec,
    /// Its slot planner.
    planner: Planner,
    /// `auto`'s state while another policy is in force, and since when: taken up again if `auto` comes back within
    /// [`AUTO_KEPT`].
    auto_away: Option<(Auto, Instant)>,
    /// Whether the plan must be redone at once (policy change, new or released job), not at the next boundary.
    replan: bool,
}

impl Planning {
    /// Planning under `policy`.
    pub(super) fn new(policy: PolicySpec) -> Self {
        Self { policy, planner: policy.build(), auto_away: None, replan: false }
    }

    /// Asks for the plan to be redone at once, not at the next boundary.
    pub(super) fn replan(&mut self) {
        self.replan = true;
    }

    /// Whether the plan must be redone at once; asked, the request is taken.
    pub(super) fn take_replan(&mut self) -> bool {
        std::mem::take(&mut self.replan)
    }

    /// The policy in force.
    pub(super) fn policy(&self) -> PolicySpec {
        self.policy
    }

    /// Puts `policy` in force with a planner of its own, except that `auto` left for another policy (as a paired
    /// comparison does) keeps what it measured and chose, and takes it up again if it comes back within
    /// [`AUTO_KEPT`]; and `auto` put in force again while it is (the same request twice: a paired comparison's
    /// balanced order gives `auto` two windows in a row; a reload), at the slot length it had (`same_slot`), goes on
    /// as it was. Seen on experiments/mpl-quick-ab3.toml on 2026-12-03: `auto` tried every group afresh, `cfs`
    /// for 200 ms included, once a round of the comparison (every 27.6 s).
    pub(super) fn switch(&mut self, policy: PolicySpec, same_slot: bool) {
        let before = std::mem::replace(&mut self.planner, policy.build());
        match (before, &mut self.planner) {
            (Planner::Auto(auto), Planner::Fixed(_)) => self.auto_away = Some((auto, Instant::now())),
            (Planner::Auto(auto), Planner::Auto(now)) if same_slot => *now = auto,
            (_, Planner::Auto(auto)) => {
                if let Some((mut kept, _)) = self.auto_away.take().filter(|(_, since)| still_kept(*since)) {
                    kept.resume();
                    *auto = kept;
                }
            }
            _ => {}
        }
        self.policy = policy;
    }

    /// `auto`, when it is in force: it measures the jobs at slot boundaries.
    pub(super) fn measuring(&mut self) -> Option<&mut Auto> {
        self.planner.measuring()
    }

    /// `auto`'s state while another policy is in force and it may be taken up again: it follows the sets of jobs
    /// ([`Auto::follow`]). Forgotten once away longer than [`AUTO_KEPT`], so that a policy put in force for good
    /// leaves no work behind at every slot.
    pub(super) fn away(&mut self) -> Option<&mut Auto> {
        if self.auto_away.as_ref().is_some_and(|(_, since)| !still_kept(*since)) {
            self.auto_away = None;
        }
        self.auto_away.as_mut().map(|(auto, _)| auto)
    }

    /// The desired state of every job of `jobs` in this slot.
    pub(super) fn plan(&self, jobs: &[JobView<'_>]) -> Vec<Desired> {
        self.planner.plan(jobs)
    }

    /// What `auto` chose for each group of jobs, when it is in force.
    pub(super) fn choices(&self) -> Vec<Choice> {
        self.planner.choices()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Planning;
    use lockstep_core::cosched::auto::Sample;
    use lockstep_core::cosched::{JobView, PolicySpec};
    use lockstep_core::cpulist::CpuList;

    /// `auto` in force with a group of two jobs that share their PUs under trial.
    fn with_a_group() -> Planning {
        let pus = CpuList::parse("0-1").unwrap();
        let (x, y) = ("x".parse().unwrap(), "y".parse().unwrap());
        let jobs = [
            JobView { name: &x, favoured: true, round: 2, pus: &pus, demand: None, starting: false },
            JobView { name: &y, favoured: false, round: 2, pus: &pus, demand: None, starting: false },
        ];
        let mut planning = Planning::new(PolicySpec::Auto);
        let auto = planning.measuring().expect("auto measures");
        auto.observe(0, Duration::from_millis(200), &jobs, |_| Sample::default());
        assert_eq!(planning.choices().len(), 1);
        planning
    }

    #[test]
    fn auto_set_again_goes_on_as_it_was_at_the_same_slot_length_and_starts_over_at_another() {
        let mut again = with_a_group();
        again.switch(PolicySpec::Auto, true);
        assert_eq!(again.choices().len(), 1, "the group's trial goes on");
        let mut other = with_a_group();
        other.switch(PolicySpec::Auto, false);
        assert!(other.choices().is_empty(), "a new slot length: measured afresh");
        let mut away = with_a_group();
        away.switch(PolicySpec::Gang, true);
        away.switch(PolicySpec::Auto, true);
        assert_eq!(away.choices().len(), 1, "taken up again after another policy");
    }
}
