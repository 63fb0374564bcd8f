//! `auto`: for each set of jobs that share PUs, try `gang` and then `cfs` for a short window each, measure how
//! fast every job progresses under each, and keep the one under which the jobs progress fastest. `gang` goes
//! first: ranks that spin while their partner waits for a CPU lose several times their speed under `cfs`, while
//! jobs that `gang` does not help lose a few percent under it. Where the two measure within [`MARGIN`] of each
//! other the trial is even, which is no evidence: jobs still setting up (before their first exchange) measure
//! even whatever they will need, so a group's first even trial keeps what is in force (`gang`, the first
//! candidate) and tries again soon ([`EVEN_EXPLOIT`]); a second even trial in a row leaves the jobs to the kernel.
//! Nor does one clear trial take `gang` away: one trial's windows of a few hundred ms stray by about 12 % from the
//! next, so that a trial against `gang` in force keeps it and tries again soon; a second trial in a row against it
//! changes it. A trial for `gang` is acted on at once (the costs are lopsided, as above).
//! Re-decided when the set of jobs changes (except that a set succeeding by one job, or on the same PUs, a group
//! that held `gang`, or was checking it in a trial, keeps it or goes on with the trial: [`INHERIT_WITHIN`]), when
//! the measured progress drifts (in two windows in a row, more once drifts turned out to be the jobs' own
//! variation: [`MAX_SETTLED`]), and at least every [`MAX_EXPLOIT`] (longer as trials confirm the choice).
//! docs/policies/auto.md gives the rule and the data behind it.
//!
//! A job's progress is the rate of the MPI calls that move data or synchronise (the PMPI profiler's live count,
//! when every rank of the job publishes it): a rank that spins in `MPI_Wait` burns CPU without progress, but still
//! completes the same calls per iteration. A job of several ranks whose calls are not counted (started without the
//! profiler) progresses by its co-scheduled time instead: the rank-seconds in which all its ranks on the node ran
//! at once (measured in the kernel by the agent), because a rank that spins waiting for a partner that is off its
//! CPU burns CPU time too. That favours `gang` for jobs whose ranks never wait for each other (they run together
//! more under it without going faster), at the cost of `gang`'s switching, where CPU time would miss the
//! several-fold loss of spinning ranks under `cfs`. A job of one rank, or without that count, progresses by the CPU
//! time its processes get.
//!
//! No trial window counts while a job of the group is still starting (some of its ranks that preload the profiler
//! do not publish yet: they are in `MPI_Init`, or not yet started), for at most [`MAX_STARTUP`] from the group's
//! forming: a job that has not begun to work would measure as a job that gets nothing from any policy. Nor while
//! a job's demand is not measured yet ([`JobView::starting`]): `gang` runs it in every slot until it is.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::cfs::Cfs;
use super::gang::Gang;
use super::policy::{Desired, JobView, Policy};
use super::sharing::groups;
use super::spec::PolicySpec;
use crate::ident::JobKey;

/// The policies `auto` tries, in the order it tries them.
pub const CANDIDATES: [PolicySpec; 2] = [PolicySpec::Gang, PolicySpec::Cfs];

/// The least time a window under `gang`, and a window checking a choice for drift, lasts (it is a whole number of
/// rounds of the group's rows, so that every job has had its slots).
pub const MIN_WINDOW: Duration = Duration::from_millis(400);

/// The least time the trial of `cfs` lasts: it has no rounds, and is the costly trial for spinning ranks.
pub const MIN_CFS_WINDOW: Duration = Duration::from_millis(200);

/// How far apart, on the mean over the jobs, the candidates' progress must be for a trial to be clear: `gang` is
/// chosen when it makes the jobs progress more than this much faster than `cfs`; within it the trial is even.
pub const MARGIN: f64 = 0.05;

/// A mean change of the chosen policy's progress rates, against what was measured when choosing it, beyond which
/// `auto` tries again, when it shows in [`DRIFT_WINDOWS`] windows in a row.
pub const DRIFT: f64 = 0.30;

/// The windows in a row that must show a [`DRIFT`] for a trial: one window of a few hundred ms drifts by more
/// than 30 % every few seconds on NPB kernels' phases (experiments/auto.toml, 2026-11-29: 3–6 trials per pair
/// in 25 s, each a window under the loser), where a new phase of the jobs lasts.
pub const DRIFT_WINDOWS: u32 = 2;

/// How many times, at most, the windows in a row that a drift must show double ([`DRIFT_WINDOWS`]: 2, 4, 8, then
/// 16). A drift whose trial clearly confirms the policy in force was the jobs' own variation, not a new phase, and
/// doubles them; a trial that changes the policy, or is even or against it, starts over at [`DRIFT_WINDOWS`]. Seen
/// on experiments/mpl-quick-ab.toml on 2026-12-04: two lu class A jobs of spinning ranks under `gang` drifted by
/// 31–132 % every few seconds, their phases' call rates differing that much; 16 of the 17 drift trials in the mix's
/// 4 minutes (`auto` in force for about half of them) confirmed `gang`, each with a window under `cfs` at about a
/// third of `gang`'s speed. What a group has learnt so goes with its choice, or its trial, to a set that succeeds it
/// (the same programs run again) and stays through a change of its jobs' processes; only a trial that is not a
/// clear confirmation starts it over. Timed trials still come.
pub const MAX_SETTLED: u32 = 3;
const _: () = assert!(MAX_SETTLED < 16, "DRIFT_WINDOWS << MAX_SETTLED must fit a u32");

/// Calls a communicating job must make in a window for its rate to be read from them: is class B makes ~4 calls
/// per iteration and rank, so that 160 calls over 2 ranks are 20 iterations, a whole iteration more or less
/// ±5 %.
pub const MIN_CALLS: u64 = 160;

/// The fewest calls a job's busiest window must count for its calls to measure its progress: half of
/// [`MIN_CALLS`]. A job that makes fewer (is: a few all-to-all exchanges per second, long sorts between them)
/// counts them in bursts of one exchange, so that its count says which side of a burst a window ended on more than
/// how fast it went, and may be none just because the window fell between two exchanges, which would read as a
/// stall; its co-scheduled time measures it instead (its CPU time without eBPF). Seen in experiments/auto.toml on
/// 2026-11-29: is beside mg counted 0 calls under `gang`, and `auto` ruled `gang` out on the four runs of that mix,
/// where `gang` was the best policy by 17 %; with a floor of 16 calls, is then counted 16 calls in `gang`'s 1.6 s
/// and 18 in `cfs`'s 0.8 s, read as 0.44x under `gang`, while its ranks ran together 94 % of the time under `gang`
/// and 45 % under `cfs`.
pub const MIN_READABLE_CALLS: u64 = MIN_CALLS / 2;

/// How many times its least length a window may stretch to collect [`MIN_CALLS`].
pub const MAX_STRETCH: u64 = 4;

/// The longest a choice is kept without trying again, at first: each trial that then confirms it doubles the
/// time to the next, up to [`MAX_CONFIRMED`] doublings (a clear winner is not thrown away every 30 s; a drift of
/// its progress still brings a trial at once, and starts the doubling over).
pub const MAX_EXPLOIT: Duration = Duration::from_secs(30);

/// The most times the time to the next trial doubles: 30, 60, 120, then every 240 s.
pub const MAX_CONFIRMED: u32 = 3;

/// The time an even trial's choice is kept before the next trial, at first (doubling as [`MAX_EXPLOIT`] does).
/// Jobs that are still setting up (cg builds its matrix, lu its grid: no exchanges yet) measure even; on
/// experiments/auto.toml on 2026-11-29, most first trials after the jobs' start measured 0.98–1.00x, and the
/// `cfs` chosen from them was kept until a drift or for up to 30 s, where `gang` was the best policy by 15–20 %.
pub const EVEN_EXPLOIT: Duration = Duration::from_secs(5);

/// The longest a new group's trial waits for its jobs to finish starting (ranks that preload the profiler but
/// cannot publish, for one, would otherwise hold it forever).
pub const MAX_STARTUP: Duration = Duration::from_secs(30);

/// How long a group whose set of jobs changed is remembered for the set that succeeds it. A set that differs from
/// a group gone within this time by one job (one left, one joined, or one in place of another: a job array's next
/// task, a run started again), or as many jobs on the same PUs with none in common (every one started again),
/// keeps that group's choice of a policy other than `cfs` instead of trying the candidates afresh, until the gone
/// group's next timed trial (at most [`MAX_EXPLOIT`] on for a set with no job in common); a set that succeeds a
/// group in a timed or a drift trial of such a choice goes on with that trial. Seen on
/// experiments/mpl-quick-ab3.toml on 2026-12-02: three lu jobs each run again every ~15 s made 13 new sets in ~60 s
/// under `auto`, each trying `cfs` for 200 ms at a third of `gang`'s speed, and `auto` took 1.09 times `gang`'s time.
/// A choice of `cfs` is not passed on: a new job whose ranks spin would lose several times its speed under it
/// until the next trial, where a trial costs a few hundred ms.
pub const INHERIT_WITHIN: Duration = Duration::from_secs(10);

/// Where `cfs` is among the [`CANDIDATES`]: the baseline every other is compared with.
const CFS: usize = 1;

/// What the agent reads of one job at a slot boundary: running totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// When it was read (monotonic clock, ns).
    pub at_ns: u64,
    /// CPU time the job's processes have had (ns).
    pub cpu_ns: u64,
    /// MPI calls that make progress (all but the polling ones), summed over the processes that publish the
    /// count; `None` when none does.
    pub calls: Option<u64>,
    /// How many of the job's processes publish it.
    pub publishers: u32,
    /// How many of its ranks will publish it once started: those that preload the profiler (0 when none does, or
    /// the agent cannot tell).
    #[serde(default)]
    pub profiled: u32,
    /// Nanoseconds in which all of its ranks on the node were on a CPU at once, since they were first seen; `None`
    /// when the agent does not measure it.
    #[serde(default)]
    pub together_ns: Option<u64>,
    /// How many ranks that time counts (the job's ranks on the node).
    #[serde(default)]
    pub ranks: u32,
}

impl Sample {
    /// Whether the job is still starting: fewer of its processes publish their MPI calls than will.
    pub fn starting(&self) -> bool {
        self.publishers < self.profiled
    }
}

/// One job's progress over a window.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    /// MPI calls per second (when counted at both ends).
    pub calls_s: Option<f64>,
    /// The MPI calls counted in the window (when counted at both ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<u64>,
    /// CPU seconds per second.
    pub cpu_s: f64,
    /// Rank-seconds per second in which all the job's ranks ran at once (when measured at both ends, for a job of
    /// several ranks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub together_s: Option<f64>,
}

impl Rate {
    /// The rate between two samples; `None` when the window is empty or a count went backwards (a process of
    /// the job restarted).
    fn between(a: &Sample, b: &Sample) -> Option<Self> {
        let dt = b.at_ns.checked_sub(a.at_ns).filter(|&d| d > 0)? as f64 / 1e9;
        let cpu = b.cpu_ns.checked_sub(a.cpu_ns)? as f64 / 1e9;
        let calls = match (a.calls, b.calls) {
            (Some(x), Some(y)) => Some(y.checked_sub(x)?),
            _ => None,
        };
        let calls_s = calls.map(|c| c as f64 / dt);
        let together_s = match (a.together_ns, b.together_ns) {
            // A count that went backwards: the job's ranks were counted afresh (one left); no rate this window.
            (Some(x), Some(y)) if b.ranks > 1 && a.ranks == b.ranks => {
                y.checked_sub(x).map(|d| d as f64 / 1e9 / dt * f64::from(b.ranks))
            }
            _ => None,
        };
        Some(Self { calls_s, calls, cpu_s: cpu / dt, together_s })
    }
}

/// A job of a group that `auto` chose for, as a [`Choice`] names it: the job, or, in what another user reads,
/// one of someone else's, unnamed. Written as the job's key or as [`Member::UNNAMED`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Member {
    /// The job.
    Job(JobKey),
    /// Another user's job, in what a user who is not root reads.
    Unnamed,
}

impl Member {
    /// How an unnamed member is written.
    pub const UNNAMED: &'static str = "(another user's job)";
}

impl std::fmt::Display for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Job(key) => key.fmt(f),
            Self::Unnamed => f.pad(Self::UNNAMED),
        }
    }
}

impl Serialize for Member {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Member {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if text == Self::UNNAMED {
            return Ok(Self::Unnamed);
        }
        text.parse().map(Self::Job).map_err(serde::de::Error::custom)
    }
}

/// What `auto` chose for a group of jobs, and why: said in `lockstep status` and kept in the store.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    /// The jobs of the group (other users' unnamed in what a user who is not root reads).
    pub jobs: Vec<Member>,
    /// The policy in force for them now.
    pub policy: String,
    /// Whether it is being tried (`true`) or was chosen.
    pub trying: bool,
    /// One line: why.
    pub why: String,
    /// The measurements behind a choice: per candidate, per job (in `jobs` order), the rates.
    pub rates: BTreeMap<String, Vec<Rate>>,
}

impl Choice {
    /// The group's jobs, separated by spaces, as the log and `lockstep status` say them.
    pub fn members(&self) -> String {
        self.jobs.iter().map(ToString::to_string).collect::<Vec<_>>().join(" ")
    }
}

/// Where a group is.
#[derive(Debug)]
enum Phase {
    /// Trying `CANDIDATES[next]` since the window's start; `by_drift` when a drift brought the trial.
    Explore { next: usize, rates: Vec<Vec<Rate>>, by_drift: bool },
    /// Keeping the choice until slot `until`; `explored` is its rates when chosen (`None` for a choice a group
    /// took over from the one it succeeds, until its first window with every job at work measures them);
    /// `drifted` the windows in a row that showed a drift.
    Exploit { until: u64, explored: Option<Vec<Rate>>, drifted: u32 },
}

/// One set of jobs that share PUs.
#[derive(Debug)]
struct Group {
    phase: Phase,
    /// The policy in force.
    policy: PolicySpec,
    /// The window's first slot and the samples there.
    start: (u64, Vec<Sample>),
    /// The slot its trial (re)started in: the waiting for its jobs to start counts from here.
    formed: u64,
    /// Whether it waited in the last slot: for a job to start (a trial), or for a job's demand to be measured (a
    /// choice taken over).
    waited: bool,
    why: String,
    rates: BTreeMap<String, Vec<Rate>>,
    /// The policy a timed trial checks (the one it interrupted), and how many timed trials in a row chose it.
    checking: Option<PolicySpec>,
    confirmed: u32,
    /// Whether the last trial was even (the candidates within [`MARGIN`]).
    even: bool,
    /// The policy in force before this trial (the one a timed or a drift trial checks), which one clear trial
    /// against it does not overturn; `None` for a new group, whose first candidate stands.
    held: Option<PolicySpec>,
    /// Whether the last trial went clearly against the policy it held (which was kept, and is tried again soon).
    doubted: bool,
    /// Where its jobs run: each job's PUs, in order ([`place_of`]).
    place: Vec<Vec<usize>>,
    /// The last slot its set of jobs was seen in, in force or followed ([`Auto::follow`]).
    seen: u64,
    /// Drift trials in a row that clearly confirmed the policy they checked (at most [`MAX_SETTLED`]): a drift
    /// must show in [`DRIFT_WINDOWS`] doubled this many times windows in a row. Back to 0 with any trial that is
    /// not a clear confirmation, and for a group formed afresh.
    settled: u32,
}

impl Group {
    /// The rows a window of the group's current phase goes round: none for the trial of `cfs`.
    fn rounds(&self, rows: u32) -> u32 {
        match self.phase {
            Phase::Explore { next, .. } if CANDIDATES[next] == PolicySpec::Cfs => 0,
            _ => rows,
        }
    }

    /// Whether it holds a choice taken over from the set before whose baseline for drifts is not measured yet.
    fn awaits_baseline(&self) -> bool {
        matches!(self.phase, Phase::Exploit { explored: None, .. })
    }

    /// Whether the window begun at `self.start` is over in slot `slot` (samples `now`): it has lasted its least
    /// length, and every job that communicates made [`MIN_CALLS`] calls in it — or would have at the rate it
    /// showed before, so that fewer is itself the measurement (a stall) — or the window has lasted
    /// [`MAX_STRETCH`] times its least length. It stretches by whole least lengths (whole rounds of the rows).
    fn window_done(&self, slot: u64, rows: u32, slot_len: Duration, now: &[Sample]) -> bool {
        let least = window_slots(self.rounds(rows), slot_len);
        let elapsed = slot.saturating_sub(self.start.0);
        if elapsed < least || elapsed >= least * MAX_STRETCH {
            return elapsed >= least;
        }
        if !elapsed.is_multiple_of(least) {
            return false;
        }
        let known: Vec<&Vec<Rate>> = match &self.phase {
            Phase::Explore { rates, .. } => rates.iter().collect(),
            Phase::Exploit { explored, .. } => explored.iter().collect(),
        };
        self.start.1.iter().zip(now).enumerate().all(|(j, (a, b))| {
            let (Some(x), Some(y)) = (a.calls, b.calls) else { return true };
            let got = y.saturating_sub(x);
            let before = known.iter().filter_map(|w| w.get(j)?.calls_s).fold(0.0, f64::max);
            let seconds = b.at_ns.saturating_sub(a.at_ns) as f64 / 1e9;
            got >= MIN_CALLS || before * seconds >= MIN_CALLS as f64 || (got == 0 && before == 0.0)
        })
    }

    /// How the processes behind samples `now` compare with those at the window's start: the processes that
    /// publish calls, and the ranks the co-scheduled time counts.
    fn sources(&self, now: &[Sample]) -> Sources {
        let pairs = || self.start.1.iter().zip(now);
        if pairs().all(|(a, b)| a.publishers == b.publishers && a.ranks == b.ranks) {
            Sources::Same
        } else if pairs().all(|(a, b)| a.publishers >= b.publishers && a.ranks >= b.ranks) {
            Sources::Fewer
        } else {
            Sources::Other
        }
    }

    fn explore(slot: u64, samples: Vec<Sample>, why: &str) -> Self {
        Self {
            phase: Phase::Explore { next: 0, rates: Vec::new(), by_drift: false },
            policy: CANDIDATES[0],
            start: (slot, samples),
            formed: slot,
            waited: false,
            why: why.to_string(),
            rates: BTreeMap::new(),
            checking: None,
            confirmed: 0,
            even: false,
            held: None,
            doubted: false,
            place: Vec::new(),
            seen: slot,
            settled: 0,
        }
    }

    /// The windows in a row a drift must show for a trial: [`DRIFT_WINDOWS`], doubled for each drift trial in a
    /// row that confirmed the choice.
    fn drift_windows(&self) -> u32 {
        DRIFT_WINDOWS << self.settled
    }

    /// Slots the choice in force is kept, from slot boundaries of `slot_len`: [`MAX_EXPLOIT`] ([`EVEN_EXPLOIT`]
    /// after an even trial or one against it), doubled for each trial in a row that confirmed it.
    fn keep_slots(&self, slot_len: Duration) -> u64 {
        let base = if self.even || self.doubted { EVEN_EXPLOIT } else { MAX_EXPLOIT };
        slots_in(base * (1 << self.confirmed.min(MAX_CONFIRMED)), slot_len)
    }

    /// Starts the trial again in slot `slot` (samples `samples`), saying `why`, still counting the wait for its
    /// jobs to start from when it formed, and still checking the choice a timed or a drift trial checks.
    fn restart(&mut self, slot: u64, samples: Vec<Sample>, why: &str) {
        let by_drift = matches!(self.phase, Phase::Explore { by_drift: true, .. });
        *self = Self {
            phase: Phase::Explore { next: 0, rates: Vec::new(), by_drift },
            formed: self.formed,
            checking: self.checking,
            confirmed: self.confirmed,
            even: self.even,
            held: self.held,
            doubted: self.doubted,
            settled: self.settled,
            ..Self::explore(slot, samples, why)
        };
    }

    /// A group of jobs `names` formed in slot `slot` (samples `now`) that succeeds `before` (jobs `was`). When
    /// `before` holds a choice, it keeps it with what the trials in a row that confirmed it earned (its next timed
    /// trial comes when `before`'s would have), and its rates are measured in its first window with every job at
    /// work, the baseline of its drift.
    /// When `before` was checking its choice (a timed or a drift trial), the new set goes on with that trial
    /// from its first candidate, so that what it decides still counts as a confirmation. `None` when `before`
    /// holds no choice and checks none.
    fn succeed(
        before: &Self,
        was: &[JobKey],
        names: &[JobKey],
        slot: u64,
        now: Vec<Sample>,
        slot_len: Duration,
    ) -> Option<Self> {
        let (left, joined) = changed(was, names);
        // A set with no job in common (its jobs all started again on the same PUs) keeps none of what the trials
        // of the jobs before it learnt: it is checked within the first time between trials, and a drift of its
        // own must show in as few windows as for a new set.
        let common = names.len() > joined.len();
        let cap = if common { u64::MAX } else { slot + slots_in(MAX_EXPLOIT, slot_len) };
        let mut moved = String::new();
        for (what, jobs) in [("left", left), ("joined", joined)] {
            if !jobs.is_empty() {
                let _ = write!(moved, ", {} {what}", jobs.join(", "));
            }
        }
        let carried = Self {
            policy: before.policy,
            checking: before.checking,
            confirmed: if common { before.confirmed } else { 0 },
            even: before.even,
            held: before.held,
            doubted: before.doubted,
            settled: if common { before.settled } else { 0 },
            ..Self::explore(slot, now, "")
        };
        match before.phase {
            Phase::Exploit { until, .. } => {
                let until = until.min(cap);
                let next = until.saturating_sub(slot) as f64 * slot_len.as_secs_f64();
                Some(Self {
                    phase: Phase::Exploit { until, explored: None, drifted: 0 },
                    held: Some(before.policy),
                    why: format!("{} kept from the set before{moved}; next trial in {next:.0} s", before.policy.name()),
                    ..carried
                })
            }
            Phase::Explore { by_drift, .. } => {
                let checked = before.held?;
                let first = CANDIDATES[0];
                Some(Self {
                    phase: Phase::Explore { next: 0, rates: Vec::new(), by_drift },
                    policy: first,
                    why: format!(
                        "trial of {} carried on from the set before{moved}: trying {}",
                        checked.name(),
                        first.name()
                    ),
                    ..carried
                })
            }
        }
    }

    /// Whether this group holds a choice that may pass to a set that succeeds it, one other than `cfs`, or checks
    /// one in a trial (timed or by a drift) that the set may go on with.
    fn may_pass(&self) -> bool {
        match self.phase {
            Phase::Exploit { .. } => self.policy != PolicySpec::Cfs,
            Phase::Explore { .. } => self.held.is_some_and(|held| held != PolicySpec::Cfs),
        }
    }

    /// Whether this group's choice may pass to a set `names` at `place` in slot `slot` that succeeds it (jobs
    /// `was`), and how: it [may pass](Self::may_pass), and the sets differ by one job at most on each side, with
    /// one in common (the same set back, after a job of it was halted for a while, takes its own choice up again);
    /// or, the group [recent](Self::recent), the set is as many jobs on the same PUs with none in common (each of
    /// them started again, one while the other's next run had not begun: two jobs are no group while one is
    /// alone).
    fn passes_to(&self, was: &[JobKey], names: &[JobKey], at: (&[Vec<usize>], u64, Duration)) -> Option<Passing> {
        let (left, joined) = changed(was, names);
        let (place, slot, slot_len) = at;
        if !self.may_pass() {
            None
        } else if left.len() <= 1 && joined.len() <= 1 && names.len() > joined.len() {
            Some(Passing::ByOne)
        } else if joined.len() == names.len() && self.place == place && self.recent(slot, slot_len) {
            Some(Passing::OnTheSamePus)
        } else {
            None
        }
    }

    /// Measures again from slot `slot` (samples `now`), a job's processes having changed: a trial still checks what
    /// it checked; a choice is checked as a drift's trial checks it (held against one clear trial, without
    /// counting as a confirmation).
    fn processes_changed(&mut self, slot: u64, now: Vec<Sample>) {
        if matches!(self.phase, Phase::Explore { .. }) {
            self.restart(slot, now, CHANGED);
        } else {
            let (held, doubted, settled) = (Some(self.policy), self.doubted, self.settled);
            *self = Self { held, doubted, settled, ..Self::explore(slot, now, CHANGED) };
        }
    }

    /// Whether its set of jobs was last seen within [`INHERIT_WITHIN`] of slot `slot`.
    fn recent(&self, slot: u64, slot_len: Duration) -> bool {
        slot.saturating_sub(self.seen) <= inherit_slots(slot_len)
    }

    /// Takes the group up again in slot `slot` (samples `now`) after `away` slots under another policy: its window
    /// starts here, and its deadlines move on by `away`.
    fn resume(&mut self, slot: u64, now: Vec<Sample>, away: u64) {
        self.start = (slot, now);
        self.formed = self.formed.saturating_add(away);
        self.postpone(away);
    }

    /// Moves the next timed trial on by `away` slots (spent under another policy).
    fn postpone(&mut self, away: u64) {
        if let Phase::Exploit { until, .. } = &mut self.phase {
            *until = until.saturating_add(away);
        }
    }

    /// Why the trial waits in slot `slot` (samples `now` of jobs `names`, `unmeasured` whether each is
    /// [starting](JobView::starting) for `gang`) rather than measure: a job still starting, within [`MAX_STARTUP`]
    /// of the trial's start. A job whose demand is not measured yet counts as starting too: `gang` runs it in every
    /// slot until it is, so that a window of `gang` then would measure neither `gang` nor the job. `None` when it
    /// measures.
    fn waits(
        &self,
        slot: u64,
        slot_len: Duration,
        names: &[JobKey],
        now: &[Sample],
        unmeasured: &[bool],
    ) -> Option<String> {
        let limit = slots_in(MAX_STARTUP, slot_len);
        if !matches!(self.phase, Phase::Explore { .. }) || slot.saturating_sub(self.formed) >= limit {
            return None;
        }
        let first = CANDIDATES[0].name();
        if let Some((name, s)) = names.iter().zip(now).find(|(_, s)| s.starting()) {
            return Some(format!(
                "waiting for {name} to start ({} of its {} profiled ranks publish): trying {first}",
                s.publishers, s.profiled
            ));
        }
        let (name, _) = names.iter().zip(unmeasured).find(|(_, u)| **u)?;
        Some(format!("waiting for {name}'s demand to be measured: trying {first}"))
    }
}

/// How a job's processes changed since a window's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sources {
    /// The same processes publish calls and the same ranks are counted.
    Same,
    /// Fewer of either, none more: ranks ending (their job is about to).
    Fewer,
    /// Others: a rank began to publish, the agent counts a new rank, or a process restarted.
    Other,
}

/// Why a trial starts over when a job's processes change.
const CHANGED: &str = "a job's processes changed: trying again";

/// The `auto` policy's state: a [`Group`] per set of jobs that share PUs, keyed by its jobs (in the order planned).
#[derive(Debug, Default)]
pub struct Auto {
    groups: BTreeMap<Vec<JobKey>, Group>,
    /// The policy in force for each job of a group, as of the last [`Auto::observe`].
    in_force: BTreeMap<JobKey, PolicySpec>,
    /// The slot of the last [`Auto::observe`].
    last_slot: u64,
    /// Whether another policy was in force since then ([`Auto::resume`]).
    resumed: bool,
    /// Groups whose set of jobs changed and whose choice may pass on (`gang`), with the slot they were last seen
    /// in: passed on to a set that succeeds them within [`INHERIT_WITHIN`] (time under another policy not
    /// counted).
    gone: BTreeMap<Vec<JobKey>, (u64, Group)>,
}

/// Slots of length `slot` that `span` takes, the last one begun counting whole.
fn slots_in(span: Duration, slot: Duration) -> u64 {
    (span.as_nanos() as u64).div_ceil((slot.as_nanos() as u64).max(1))
}

/// The jobs of set `was` not in set `names` (they left), and those of `names` not in `was` (they joined).
fn changed(was: &[JobKey], names: &[JobKey]) -> (Vec<String>, Vec<String>) {
    let only = |a: &[JobKey], b: &[JobKey]| a.iter().filter(|n| !b.contains(n)).map(JobKey::to_string).collect();
    (only(was, names), only(names, was))
}

/// How a set of jobs succeeds a group ([`Group::passes_to`]), the first the better.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Passing {
    /// One job apart.
    ByOne,
    /// As many jobs on the same PUs, none in common.
    OnTheSamePus,
}

/// Of `groups` (each with its set of jobs), the one whose choice passes to the set `names` at `at` (its PUs, the
/// slot and the slot's length): one a job apart before one on the same PUs.
fn successor<'a>(
    groups: impl Iterator<Item = (&'a Vec<JobKey>, &'a Group)>,
    names: &[JobKey],
    at: (&[Vec<usize>], u64, Duration),
) -> Option<Vec<JobKey>> {
    groups
        .filter_map(|(was, g)| Some((g.passes_to(was, names, at)?, was)))
        .min_by_key(|&(how, _)| how)
        .map(|(_, was)| was.clone())
}

/// Where the jobs `members` of `jobs` run: each one's PUs, sorted (what two sets on the same PUs have alike,
/// whatever their jobs' names).
fn place_of(jobs: &[JobView<'_>], members: &[usize]) -> Vec<Vec<usize>> {
    let mut place: Vec<Vec<usize>> = members.iter().map(|&i| jobs[i].pus.iter().collect()).collect();
    place.sort();
    place
}

/// Slots of length `slot_len` in [`INHERIT_WITHIN`].
fn inherit_slots(slot_len: Duration) -> u64 {
    INHERIT_WITHIN.as_nanos() as u64 / (slot_len.as_nanos() as u64).max(1)
}

/// The keys of the groups `sets` of `jobs`: each group's job keys, in the order planned.
fn keys_of(jobs: &[JobView<'_>], sets: &[Vec<usize>]) -> Vec<Vec<JobKey>> {
    sets.iter().map(|m| m.iter().map(|&i| jobs[i].name.clone()).collect()).collect()
}

/// Slots in a measurement window for a group whose jobs hold `rows` rows: whole rounds of the rows, at least
/// [`MIN_WINDOW`].
pub fn window_slots(rows: u32, slot: Duration) -> u64 {
    if rows == 0 {
        // No rounds (cfs's trial).
        return slots_in(MIN_CFS_WINDOW, slot).max(1);
    }
    let round = u64::from(rows.max(1));
    let round_ns = (slot.as_nanos() as u64).max(1) * round;
    round * (MIN_WINDOW.as_nanos() as u64).div_ceil(round_ns).max(1)
}

/// What a job's progress is read from, the same in every window of a decision.
#[derive(Clone, Copy)]
enum Measure {
    Calls,
    Together,
    Cpu,
}

/// Each job's progress rate in every window: calls per second where every window counted calls and the busiest
/// counted at least [`MIN_READABLE_CALLS`] (a window with none is then a stall: spinning ranks can complete no
/// call at all while their partners wait for a CPU); for a job whose calls no window counted (no profiler), or
/// too few to read, co-scheduled rank-seconds per second where every window measured them and one saw some; else
/// CPU seconds per second (a job of one rank, or a profiled job that makes no calls: it does not communicate, so
/// its ranks do not wait for each other). `windows[c][j]` is job `j` under candidate `c`.
fn progress(windows: &[Vec<Rate>]) -> Vec<Vec<f64>> {
    let jobs = windows.first().map_or(0, Vec::len);
    let counted = |j: usize, of: fn(&Rate) -> Option<f64>| {
        windows.iter().all(|w| of(&w[j]).is_some()) && windows.iter().any(|w| of(&w[j]).is_some_and(|c| c > 0.0))
    };
    let measures: Vec<Measure> = (0..jobs)
        .map(|j| {
            let busiest = windows.iter().filter_map(|w| w[j].calls).max();
            let sparse = busiest.is_some_and(|c| c > 0 && c < MIN_READABLE_CALLS);
            if counted(j, |r| r.calls_s) && !sparse {
                Measure::Calls
            } else if (sparse || windows.iter().all(|w| w[j].calls_s.is_none())) && counted(j, |r| r.together_s) {
                Measure::Together
            } else {
                Measure::Cpu
            }
        })
        .collect();
    windows
        .iter()
        .map(|w| {
            w.iter()
                .zip(&measures)
                .map(|(r, m)| match m {
                    Measure::Calls => r.calls_s.unwrap_or(0.0),
                    Measure::Together => r.together_s.unwrap_or(0.0),
                    Measure::Cpu => r.cpu_s,
                })
                .collect()
        })
        .collect()
}

/// What the windows of one trial say.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The candidate they choose (index in [`CANDIDATES`]).
    pub chosen: usize,
    /// Whether the trial was even: the best candidate's mean slowdown relative to `cfs` within [`MARGIN`] of 1
    /// (then `chosen` is `cfs`, and the trial's history decides: [`EVEN_EXPLOIT`]).
    pub even: bool,
    /// Whether a job made no progress at all under the best candidate other than `cfs`: a stall, which rules it
    /// out at once.
    pub stalled: bool,
    /// One line: why.
    pub why: String,
}

/// The decision on measured windows (`windows[c]` under `CANDIDATES[c]`): the candidate under which the jobs'
/// mean slowdown relative to `cfs` is lowest, if it is below `1 - MARGIN`; `cfs` otherwise.
pub fn decide(names: &[JobKey], windows: &[Vec<Rate>]) -> Decision {
    let rates = progress(windows);
    let base = &rates[CFS];
    // Mean over the jobs of (rate under cfs / rate under c): c's slowdown relative to cfs.
    let relative: Vec<f64> = rates
        .iter()
        .map(|r| {
            let each = base.iter().zip(r).map(|(&b, &x)| if x > 0.0 { b / x } else { f64::INFINITY });
            each.sum::<f64>() / base.len().max(1) as f64
        })
        .collect();
    let (best, &score) = relative
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != CFS)
        .min_by(|a, b| a.1.total_cmp(b.1))
        .expect("more than one candidate");
    let mut why = String::new();
    let even = (score - 1.0).abs() <= MARGIN;
    let chosen = if score < 1.0 - MARGIN { best } else { CFS };
    let _ = write!(
        why,
        "{} progress {:.2}x of cfs's",
        CANDIDATES[best].name(),
        if score > 0.0 { 1.0 / score } else { 0.0 }
    );
    for (j, name) in names.iter().enumerate() {
        let x = rates[best][j];
        let _ = write!(
            why,
            "{}{name} {:.2}x",
            if j == 0 { " (" } else { ", " },
            if base[j] > 0.0 { x / base[j] } else { 0.0 }
        );
    }
    let _ = write!(why, "); margin {:.0} %", MARGIN * 100.0);
    if even {
        why.push_str(": even");
    }
    Decision { chosen, even, stalled: score.is_infinite(), why }
}

impl Auto {
    /// Takes `auto` up again after another policy was in force for a while (a paired comparison's turns): at the
    /// next [`Auto::observe`], every group's window starts afresh (what its jobs did meanwhile was not under what
    /// it measures), and the slots it was away do not count towards its next trial or its wait for jobs to start.
    pub fn resume(&mut self) {
        self.resumed = true;
    }

    /// Reads the samples of the jobs that share PUs with another (`sample(i)` for job `i` of `jobs`; a job alone
    /// is not read) in slot `slot` (at its boundary, or when jobs came or went), moves every group's trial on, and
    /// returns the choices made or started now (to be logged). [`Policy::plan`] then applies them to the same jobs.
    pub fn observe(
        &mut self,
        slot: u64,
        slot_len: Duration,
        jobs: &[JobView<'_>],
        mut sample: impl FnMut(usize) -> Sample,
    ) -> Vec<Choice> {
        let mut said = Vec::new();
        let mut kept = BTreeMap::new();
        let resumed = std::mem::take(&mut self.resumed);
        let away = if resumed { slot.saturating_sub(self.last_slot) } else { 0 };
        self.last_slot = slot;
        let sets: Vec<Vec<usize>> = groups(jobs);
        let keys = keys_of(jobs, &sets);
        self.retire(slot, slot_len, away, &keys);
        for (members, names) in sets.into_iter().zip(keys) {
            let place = place_of(jobs, &members);
            let now: Vec<Sample> = members.iter().map(|&i| sample(i)).collect();
            let unmeasured: Vec<bool> = members.iter().map(|&i| jobs[i].starting).collect();
            // Slots in one round of the group's cycles.
            let rows = members.iter().map(|&i| jobs[i].round).max().unwrap_or(1);
            let mut group = if let Some(mut g) = self.groups.remove(&names) {
                if resumed {
                    g.resume(slot, now, away);
                    // A job found while another policy was in force may not be measured yet (as below).
                    g.waited = g.awaits_baseline() && unmeasured.contains(&true);
                } else if g.awaits_baseline() && (unmeasured.contains(&true) || g.waited) {
                    // A choice taken over while a new job's demand is not measured: `gang` runs that job in every
                    // slot until it is, so the window that measures the baseline of the choice's drift starts in the
                    // first slot after (the agent measures a job within `demand::STARTING` of finding it).
                    g.start = (slot, now);
                    g.waited = unmeasured.contains(&true);
                } else if let Some(why) = g.waits(slot, slot_len, &names, &now, &unmeasured) {
                    // Measured from scratch once every job has started; said when what it waits for changes.
                    let said_before = g.why.ends_with(&why);
                    g.restart(slot, now, &why);
                    g.waited = true;
                    if !said_before {
                        said.push(choice(&names, &g));
                    }
                } else if g.waited {
                    // The first window starts now, with every job started (or past the wait's limit).
                    let why = match names.iter().zip(&now).find(|(_, s)| s.starting()) {
                        Some((name, _)) => format!(
                            "{name} not started after {} s: trying {} anyway",
                            MAX_STARTUP.as_secs(),
                            CANDIDATES[0].name()
                        ),
                        None => format!("every job started: trying {}", CANDIDATES[0].name()),
                    };
                    g.restart(slot, now, &why);
                    said.push(choice(&names, &g));
                } else if matches!(g.phase, Phase::Explore { .. }) && g.sources(&now) != Sources::Same {
                    // Mid-trial (the agent began to count a job's ranks, a rank began to publish): measured from
                    // here at once, not from the end of a window that no longer compares. Seen on
                    // experiments/mpl-quick.toml on 2026-11-29: 11 of 48 trials restarted this way at the end of
                    // their first window, 0.4 s, or 1.6 s for is, of jobs that ran 5 s.
                    g.processes_changed(slot, now);
                    said.push(choice(&names, &g));
                } else if g.window_done(slot, rows, slot_len, &now) {
                    said.extend(step(&mut g, slot, slot_len, &now, &names));
                }
                g
            } else if let Some(mut g) = self
                .successor_of(&names, &place, slot, slot_len)
                .and_then(|(was, (_, before))| Group::succeed(&before, &was, &names, slot, now.clone(), slot_len))
            {
                // A choice's drift's baseline waits for a new job's demand to be measured, a trial for every job to
                // start (as above).
                g.waited = if g.awaits_baseline() {
                    unmeasured.contains(&true)
                } else if let Some(wait) = g.waits(slot, slot_len, &names, &now, &unmeasured) {
                    // Said with the succession, not again at the next slot (below).
                    let trying = format!(": trying {}", CANDIDATES[0].name());
                    g.why = format!("{}; {wait}", g.why.strip_suffix(&trying).unwrap_or(&g.why));
                    true
                } else {
                    false
                };
                said.push(choice(&names, &g));
                g
            } else {
                let mut g = Group::explore(slot, now.clone(), "new set of jobs: trying gang");
                if let Some(why) = g.waits(slot, slot_len, &names, &now, &unmeasured) {
                    (g.why, g.waited) = (why, true);
                }
                said.push(choice(&names, &g));
                g
            };
            (group.place, group.seen) = (place, slot);
            kept.insert(names, group);
        }
        self.in_force = kept.iter().flat_map(|(names, g)| names.iter().map(|n| (n.clone(), g.policy))).collect();
        self.groups = kept;
        said
    }

    /// Follows the sets of jobs `jobs` (sharing PUs as [`Auto::observe`] groups them) in slot `slot` while another
    /// policy is in force, measuring nothing: a group whose set changes passes its choice on to each set
    /// that succeeds it, as it would in force, so that when `auto` is taken up again ([`Auto::resume`]) the set it
    /// finds keeps the choice and is not tried afresh. Seen on experiments/mpl-demo-ab-auto.toml on 2026-12-04: of
    /// 77 sets `auto` tried afresh in 7.5 minutes in force, 47 shared no job with the set it had last seen, both
    /// jobs having been started again, one after the other, under gang.
    pub fn follow(&mut self, slot: u64, slot_len: Duration, jobs: &[JobView<'_>]) {
        let sets = groups(jobs);
        let keys = keys_of(jobs, &sets);
        for (names, members) in keys.iter().zip(&sets) {
            let place = place_of(jobs, members);
            if let Some(g) = self.groups.get_mut(names) {
                (g.place, g.seen) = (place, slot);
                continue;
            }
            let ended = self.groups.iter().filter(|(was, _)| !keys.contains(was));
            let was = successor(ended, names, (&place, slot, slot_len));
            let Some((was, before)) = was.and_then(|k| self.groups.remove_entry(&k)) else {
                continue;
            };
            // Its window starts when `auto` is taken up again (Group::resume), with that slot's samples.
            if let Some(mut g) = Group::succeed(&before, &was, names, self.last_slot, Vec::new(), slot_len) {
                (g.place, g.seen) = (place, slot);
                self.groups.insert(names.clone(), g);
            }
        }
    }

    /// Moves the groups whose set is not among `keys` (this slot's) to [`Auto::gone`] when their choice [may
    /// pass](Group::may_pass) on, and forgets those gone longer than [`INHERIT_WITHIN`] ago (slots away under another
    /// policy not counted).
    fn retire(&mut self, slot: u64, slot_len: Duration, away: u64, keys: &[Vec<JobKey>]) {
        for (seen, g) in self.gone.values_mut() {
            *seen = seen.saturating_add(away);
            g.postpone(away);
        }
        // A group that ended while another policy was in force was last seen as it left: now, the time away not
        // counted.
        let ended: Vec<Vec<JobKey>> = self.groups.keys().filter(|k| !keys.contains(k)).cloned().collect();
        for names in ended {
            if let Some(mut g) = self.groups.remove(&names).filter(Group::may_pass) {
                g.postpone(away);
                self.gone.insert(names, (slot, g));
            }
        }
        let within = inherit_slots(slot_len);
        self.gone.retain(|_, (seen, _)| slot.saturating_sub(*seen) <= within);
    }

    /// The gone group whose choice passes to the new set `names` at `place` in slot `slot`, taken out of
    /// [`Auto::gone`].
    fn successor_of(
        &mut self,
        names: &[JobKey],
        place: &[Vec<usize>],
        slot: u64,
        slot_len: Duration,
    ) -> Option<(Vec<JobKey>, (u64, Group))> {
        let was = successor(self.gone.iter().map(|(was, (_, g))| (was, g)), names, (place, slot, slot_len))?;
        self.gone.remove_entry(&was)
    }

    /// What is in force for every group, and why.
    pub fn choices(&self) -> Vec<Choice> {
        self.groups.iter().map(|(names, g)| choice(names, g)).collect()
    }

    /// The policy in force for every job (`cfs` for a job that shares PUs with nobody).
    fn policy_of(&self, jobs: &[JobView<'_>]) -> Vec<PolicySpec> {
        jobs.iter().map(|j| self.in_force.get(j.name).copied().unwrap_or(PolicySpec::Cfs)).collect()
    }
}

/// The record of `g`'s state.
fn choice(names: &[JobKey], g: &Group) -> Choice {
    Choice {
        jobs: names.iter().cloned().map(Member::Job).collect(),
        policy: g.policy.name().to_string(),
        trying: matches!(g.phase, Phase::Explore { .. }),
        why: g.why.clone(),
        rates: g.rates.clone(),
    }
}

/// Ends `g`'s window at `slot` with samples `now`: records the rates, and tries the next candidate, decides, or
/// checks the choice for drift. Returns the record when the policy in force changes or is confirmed.
fn step(g: &mut Group, slot: u64, slot_len: Duration, now: &[Sample], names: &[JobKey]) -> Option<Choice> {
    let rates: Option<Vec<Rate>> = g.start.1.iter().zip(now).map(|(a, b)| Rate::between(a, b)).collect();
    let sources = g.sources(now);
    if let Phase::Exploit { until, explored: baseline @ None, .. } = &mut g.phase {
        // A choice taken over from the set before: its first window with the same processes throughout and no job
        // still starting measures the baseline of its drift; until then a change of processes (the new job's
        // ranks beginning to publish) only starts the window again (and `Auto::observe` starts it again until
        // every job's demand is measured).
        if slot >= *until {
            timed_trial(g, slot, slot_len, now);
            return Some(choice(names, g));
        }
        // Nor while a job that counts its calls made too few to read (set up, but not yet exchanging: lu builds its
        // grid after MPI_Init), which would read as a drift once it does.
        let readable = |r: &Vec<Rate>| r.iter().all(|r| r.calls.is_none_or(|c| c >= MIN_READABLE_CALLS));
        if sources == Sources::Same && !now.iter().any(Sample::starting) {
            *baseline = rates.filter(readable);
        }
        g.start = (slot, now.to_vec());
        return None;
    }
    let Some(rates) = rates.filter(|_| sources == Sources::Same) else {
        if sources == Sources::Fewer && matches!(g.phase, Phase::Exploit { .. }) {
            // Ranks ending (their job is about to): the choice stands, the next window starts here.
            g.start = (slot, now.to_vec());
            return None;
        }
        // A job's processes changed (started publishing, ranks seen, restarted): measure again from here.
        g.processes_changed(slot, now.to_vec());
        return Some(choice(names, g));
    };
    g.start = (slot, now.to_vec());
    let windows = g.drift_windows();
    match &mut g.phase {
        Phase::Explore { next, rates: measured, by_drift } => {
            g.rates.insert(CANDIDATES[*next].name().to_string(), rates.clone());
            measured.push(rates);
            *next += 1;
            if *next < CANDIDATES.len() {
                g.policy = CANDIDATES[*next];
                g.why = format!("trying {}", g.policy.name());
                return Some(choice(names, g));
            }
            let Decision { mut chosen, even, stalled, mut why } = decide(names, measured);
            // What is in force: what the timed or drift trial checks, else the candidate a group starts under.
            let held = CANDIDATES.iter().position(|&c| Some(c) == g.held).unwrap_or(0);
            // One clear trial against `gang` is a doubt, not a verdict (a stall excepted): kept, and tried again
            // soon. Against `cfs` it is acted on at once: the costs are lopsided (a few per cent for jobs `gang`
            // does not help, several times the time for spinning ranks left under `cfs`).
            let doubt = !even
                && !stalled
                && !g.doubted
                && CANDIDATES[held] == PolicySpec::Gang
                && CANDIDATES[chosen] == PolicySpec::Cfs;
            if doubt {
                let name = CANDIDATES[held].name();
                let _ = write!(why, ": a first trial against {name}, {name} kept");
                chosen = held;
            } else if even && !g.even {
                // No evidence, the first time: what is in force is kept.
                chosen = held;
                let _ = write!(why, ", {} kept", CANDIDATES[chosen].name());
            } else if even {
                why.push_str(" again: left to the kernel");
            }
            let (explored, by_drift) = (measured[chosen].clone(), *by_drift);
            // A drift that a clear trial finds the policy in force still best at was the jobs' own variation: the
            // next must last twice as many windows. A trial of any kind that is not such a clear confirmation (the
            // policy changed, or the trial was even or against it) starts that over.
            let clear = g.held == Some(CANDIDATES[chosen]) && !even && !doubt;
            if !clear {
                g.settled = 0;
            } else if by_drift {
                g.settled = (g.settled + 1).min(MAX_SETTLED);
                let next = g.drift_windows();
                let _ = write!(why, "; a drift that changed nothing: the next must last {next} windows");
            }
            g.policy = CANDIDATES[chosen];
            // Confirmed: the same policy, and as sure of it as before (an even trial after a clear one starts
            // over, at the even trials' shorter keep; a doubt is no confirmation).
            let same = g.checking == Some(g.policy) && g.even == even && !doubt;
            g.confirmed = if same { (g.confirmed + 1).min(MAX_CONFIRMED) } else { 0 };
            (g.even, g.doubted) = (even, doubt);
            let keep = g.keep_slots(slot_len);
            let next = keep as f64 * slot_len.as_secs_f64();
            if g.confirmed > 0 {
                let times = if g.confirmed == 1 { "once".to_string() } else { format!("{} times", g.confirmed) };
                let _ = write!(why, "; confirmed {times}: next trial in {next:.0} s");
            } else if even || doubt {
                let _ = write!(why, "; next trial in {next:.0} s");
            }
            g.why = why;
            g.phase = Phase::Exploit { until: slot + keep, explored: Some(explored), drifted: 0 };
            Some(choice(names, g))
        }
        Phase::Exploit { until, explored, drifted } => {
            // The baseline is there: a choice taken over without one returned above.
            let drift = explored.as_ref().map_or(0.0, |explored| {
                let was = progress(&[explored.clone(), rates.clone()]);
                was[0].iter().zip(&was[1]).map(|(&a, &b)| if a > 0.0 { (b / a - 1.0).abs() } else { 1.0 }).sum::<f64>()
                    / was[0].len().max(1) as f64
            });
            *drifted = if drift > DRIFT { *drifted + 1 } else { 0 };
            if *drifted >= windows {
                let why = format!("progress under {} drifted by {:.0} %: trying again", g.policy.name(), drift * 100.0);
                let (held, doubted, settled) = (Some(g.policy), g.doubted, g.settled);
                let phase = Phase::Explore { next: 0, rates: Vec::new(), by_drift: true };
                *g = Group { phase, held, doubted, settled, ..Group::explore(slot, now.to_vec(), &why) };
            } else if slot >= *until {
                timed_trial(g, slot, slot_len, now);
            } else {
                return None;
            }
            Some(choice(names, g))
        }
    }
}

/// Starts `g`'s timed trial in slot `slot` (samples `now`): the choice in force is checked against the candidates,
/// and held unless they show it wrong.
fn timed_trial(g: &mut Group, slot: u64, slot_len: Duration, now: &[Sample]) {
    let kept = g.keep_slots(slot_len) as f64 * slot_len.as_secs_f64();
    let why = format!("{kept:.0} s since the last trial: trying again");
    let (checking, confirmed, even, held, doubted, settled) =
        (Some(g.policy), g.confirmed, g.even, Some(g.policy), g.doubted, g.settled);
    *g = Group { checking, confirmed, even, held, doubted, settled, ..Group::explore(slot, now.to_vec(), &why) };
}

impl Policy for Auto {
    fn plan(&self, jobs: &[JobView<'_>]) -> Vec<Desired> {
        let policies = self.policy_of(jobs);
        let gang = Gang.plan(jobs);
        let cfs = Cfs.plan(jobs);
        policies.iter().enumerate().map(|(i, p)| if *p == PolicySpec::Gang { gang[i] } else { cfs[i] }).collect()
    }
}
