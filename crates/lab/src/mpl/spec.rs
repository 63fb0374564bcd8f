//! The spec of mpl experiments, read and checked: what [`super`] runs and reports.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::harness::spec::{
    check_command, check_ranks, check_repetitions, distinct, policy_config, raw_spec, read, PolicyConfig, Progress,
    RanksIn, PROGRESS, RANKS_IN,
};
use lockstep_core::error::UsageError;
use lockstep_core::place::PlacementKind;

/// A parsed, validated spec.
#[derive(Clone, Debug)]
pub struct Spec {
    /// The file it was read from (messages name it).
    pub path: PathBuf,
    /// Experiment name (report directory, store key).
    pub name: String,
    /// One line saying what it reproduces.
    pub description: String,
    /// MPI ranks per job.
    pub ranks: u32,
    /// Repetitions of every case.
    pub repetitions: u32,
    /// Placement policy of every job.
    pub placement: PlacementKind,
    /// MPI progress modes.
    pub progress: Vec<Progress>,
    /// Where ranks run.
    pub ranks_in: Vec<RanksIn>,
    /// Nodes of the test cluster each job spans (`ranks_in = ["slurm"]`; 1 otherwise).
    pub nodes: u32,
    /// Workloads by name.
    pub workloads: BTreeMap<String, Workload>,
    /// Co-scheduling policies to compare.
    pub policies: Vec<PolicyConfig>,
    /// The cases: the workloads that run together.
    pub mixes: Vec<Vec<String>>,
    /// Whether single-workload mixes also run under every policy (what a policy costs on an unloaded node), not
    /// only as the dedicated baseline.
    pub unloaded: bool,
    /// The paired comparison (`[ab]`): the policies take turns over one long run of each mix instead of whole
    /// runs one after another (the `ab` module).
    pub ab: Option<Ab>,
}

/// How a paired comparison (`[ab]`) runs: each mix's jobs run for as many rounds of the `[[policies]]`' windows of
/// `window` as `duration` holds, an even number (A B, B A, …: every other round in reverse order), restarted as they
/// end; the first `settle` of each window is the switch's and is not counted.
#[derive(Clone, Debug, PartialEq)]
pub struct Ab {
    /// Each policy's window.
    pub window: std::time::Duration,
    /// The start of each window that is not counted.
    pub settle: std::time::Duration,
    /// How long each mix runs, in each progress mode.
    pub duration: std::time::Duration,
    /// The confidence of the intervals reported (0.95).
    pub confidence: f64,
    /// Per entry of `policies`, in order: its label and handicap.
    pub arms: Vec<Arm>,
    /// What each job's progress is read by.
    pub by: By,
}

impl Ab {
    /// The rounds each mix runs: as many of every policy's window as `duration` holds, an even number.
    pub fn rounds(&self) -> u32 {
        // In whole nanoseconds, as the spec's check: 9.6 s holds two rounds of 3 windows of 1.6 s exactly, where
        // floating point made it 1.999….
        let round = self.window.as_nanos() * self.arms.len() as u128;
        u32::try_from(self.duration.as_nanos() / round.max(1) / 2 * 2).unwrap_or(u32::MAX)
    }

    /// How long each mix runs: its [rounds](Self::rounds) of every policy's window (`duration`, less what is
    /// short of a pair of rounds).
    pub fn length(&self) -> std::time::Duration {
        self.window * (self.rounds() * self.arms.len() as u32)
    }
}

/// What a paired comparison reads each job's progress by (`[ab] measure`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum By {
    /// `"rate"`: its rate while every job of the mix is at work (MPI calls, co-scheduled time or CPU time per
    /// second).
    Rate,
    /// `"runs"`: its whole runs, the wall time of those that began and ended within one window's counted part, start
    /// and end included (runs that straddle a switch are left out): for jobs of a few seconds, whose starts and ends
    /// are much of their time, and whose rate while every job is at work is read from a second or two per window.
    Runs,
}

/// One entry of `[[policies]]` in a paired comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct Arm {
    /// Its name in the report: `label` if given, else the policy's label, with its handicap (`gang/200ms stopped
    /// 10%`).
    pub label: String,
    /// The share of every [`PERIOD`] in which every process of every job is stopped (SIGSTOP) under
    /// it: a known waste, which the comparison must find at its size (0: none).
    pub handicap: f64,
}

/// One workload: a program of `build/bin/` and its arguments.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Program and arguments, e.g. `["lu", "--class", "B"]`.
    pub command: Vec<String>,
    /// Whether it counts as communication-heavy in the summary.
    #[serde(default)]
    pub communication: bool,
    /// Background load: started first, stopped when the case's other jobs end, never measured (e.g. CPU hogs).
    #[serde(default)]
    pub background: bool,
    /// The MPI progress mode of this workload's ranks in every case (`yield` or `busy`), whatever the case's:
    /// for mixes of a busy-polling job beside a yielding one.
    #[serde(default)]
    pub progress: Option<String>,
    /// Whether the PMPI profiler is preloaded into its ranks (the default). `false` runs the program as users run
    /// third-party MPI programs, without it: `auto` counts no calls for it, and its rows have no communication
    /// share.
    #[serde(default = "profiled")]
    pub profiler: bool,
}

impl Spec {
    /// Whether `auto` is among its policies (its runs then have `auto`'s records to read).
    pub fn runs_auto(&self) -> bool {
        self.policies.iter().any(|p| p.scheduler.agents() == lockstep_core::cosched::PolicySpec::Auto)
    }
}

impl Workload {
    /// The progress mode its ranks run in, in a case of mode `case`.
    pub fn progress_in(&self, case: Progress) -> Progress {
        self.progress.as_deref().and_then(|p| PROGRESS.parse(p)).unwrap_or(case)
    }
}

raw_spec! {
    struct Raw {
        #[serde(default = "crate::harness::spec::two")]
        ranks: u32,
        #[serde(default = "crate::harness::spec::one")]
        repetitions: u32,
        #[serde(default = "any")]
        placement: String,
        #[serde(default = "yield_only")]
        progress: Vec<String>,
        #[serde(default = "process_only")]
        ranks_in: Vec<String>,
        nodes: Option<u32>,
        workloads: BTreeMap<String, Workload>,
        policies: Vec<RawPolicy>,
        #[serde(default)]
        mpl: Vec<u32>,
        #[serde(default)]
        mixes: Vec<Vec<String>>,
        #[serde(default)]
        unloaded: bool,
        ab: Option<RawAb>,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    name: String,
    slot: Option<String>,
    /// `[ab]` only: its name in the report.
    label: Option<String>,
    /// `[ab]` only: the share of time every job is stopped under it.
    handicap: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAb {
    window: Option<String>,
    settle: Option<String>,
    duration: String,
    confidence: Option<f64>,
    measure: Option<String>,
}

fn any() -> String {
    "any".into()
}
fn yield_only() -> Vec<String> {
    vec!["yield".into()]
}
fn process_only() -> Vec<String> {
    vec!["process".into()]
}
fn profiled() -> bool {
    true
}

/// Highest MPL level (jobs sharing the node at once).
const MAX_MPL: u32 = 16;

/// Validates a spec, `text` as read from `path` (which messages name); every problem is one usage error.
pub fn parse(path: &Path, text: &str) -> Result<Spec, UsageError> {
    let bad = crate::harness::spec::bad(path);
    let (header, raw) = read::<Raw>(path, text)?;
    check_ranks(raw.ranks).map_err(bad)?;
    check_repetitions(raw.repetitions, 1).map_err(bad)?;
    let placement: PlacementKind =
        raw.placement.parse().map_err(|_| bad(format!("unknown placement {:?}", raw.placement)))?;
    let progress = raw
        .progress
        .iter()
        .map(|p| PROGRESS.parse(p).ok_or_else(|| bad(format!("progress mode {p:?} (expected yield or busy)"))))
        .collect::<Result<Vec<_>, _>>()?;
    distinct("progress", &raw.progress, "one or both of \"yield\", \"busy\"").map_err(bad)?;
    distinct("ranks_in", &raw.ranks_in, "one or more of \"process\", \"container\", \"charliecloud\", \"slurm\"")
        .map_err(bad)?;
    let ranks_in = raw
        .ranks_in
        .iter()
        .map(|r| {
            RANKS_IN
                .parse(r)
                .ok_or_else(|| bad(format!("ranks_in {r:?} (expected process, container, charliecloud or slurm)")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let slurm = ranks_in.contains(&RanksIn::Slurm);
    if slurm && raw.ranks_in.len() > 1 {
        return Err(bad("ranks_in = [\"slurm\"] runs on its own test cluster: give it alone".into()));
    }
    let nodes = match (slurm, raw.nodes) {
        (false, None | Some(1)) => 1,
        (false, Some(_)) => return Err(bad("nodes is for ranks_in = [\"slurm\"] (the test cluster)".into())),
        (true, n) => n.unwrap_or(2),
    };
    if !(1..=4).contains(&nodes) || !raw.ranks.is_multiple_of(nodes) {
        return Err(bad(format!("nodes = {nodes} (expected 1 to 4, dividing ranks = {})", raw.ranks)));
    }
    if raw.workloads.is_empty() {
        return Err(bad("no [workloads]".into()));
    }
    for (name, w) in &raw.workloads {
        check_command(name, &w.command).map_err(bad)?;
        if let Some(p) = w.progress.as_deref().filter(|p| PROGRESS.parse(p).is_none()) {
            return Err(bad(format!("workload {name}: progress {p:?} (expected yield or busy)")));
        }
    }
    let mut policies = Vec::new();
    for p in &raw.policies {
        policies.push(policy_config(&p.name, p.slot.as_deref(), slurm).map_err(bad)?);
    }
    if policies.is_empty() {
        return Err(bad("no [[policies]]".into()));
    }
    if raw.ab.is_none() && raw.policies.iter().any(|p| p.label.is_some() || p.handicap.is_some()) {
        return Err(bad("a policy's label and handicap are for paired comparisons (add [ab])".into()));
    }
    let ab = raw.ab.as_ref().map(|ab| paired(ab, &raw.policies, &policies, &ranks_in)).transpose().map_err(bad)?;
    if let Some(ab) = &ab {
        if raw.repetitions != 1 {
            return Err(bad(format!(
                "repetitions = {} is for whole runs (expected none with [ab]: its duration is how long it measures)",
                raw.repetitions
            )));
        }
        whole_rounds(ab, &policies, &mixes(&raw).map_err(bad)?).map_err(bad)?;
    }
    let labels: Vec<String> = match &ab {
        Some(ab) => ab.arms.iter().map(|a| a.label.clone()).collect(),
        None => policies.iter().map(PolicyConfig::label).collect(),
    };
    let expected = if ab.is_some() { "each label once" } else { "each policy and slot once" };
    distinct("[[policies]]", &labels, expected).map_err(bad)?;
    let mixes = mixes(&raw).map_err(bad)?;
    if placement != PlacementKind::Any && !ranks_in.contains(&RanksIn::Process) {
        return Err(bad(format!(
            "placement = {:?} places bare processes only (expected ranks_in with \"process\", or placement = \"any\")",
            placement.name()
        )));
    }
    Ok(Spec {
        path: path.to_path_buf(),
        name: header.name,
        description: header.description,
        ranks: raw.ranks,
        repetitions: raw.repetitions,
        placement,
        progress,
        ranks_in,
        nodes,
        workloads: raw.workloads,
        policies,
        mixes,
        unloaded: raw.unloaded,
        ab,
    })
}

/// How often a paired comparison reads the jobs' progress, and the period a handicap stops a share of: windows
/// and settles are whole multiples of it.
pub const PERIOD: std::time::Duration = std::time::Duration::from_millis(200);

/// Checks that the counted part of every window of `ab` (after its settle) is a whole number of rounds of every
/// slotted policy of `policies` with every mix of `mixes` (slot × the mix's jobs, one row each): then every job has
/// its slots in every window, wherever the agent's slot clock stands when it starts.
fn whole_rounds(ab: &Ab, policies: &[PolicyConfig], mixes: &[Vec<String>]) -> Result<(), String> {
    let counted = ab.window.saturating_sub(ab.settle);
    for p in policies.iter().filter(|p| p.scheduler.agents().slotted()) {
        for mix in mixes {
            let round = p.slot * mix.len() as u32;
            if !counted.as_nanos().is_multiple_of(round.as_nanos()) {
                return Err(format!(
                    "[ab] window = {:?} and settle = {:?} count {} of each window, not whole rounds of {} with mix \
                     {} ({} each: expected a multiple of it)",
                    lockstep_core::duration::format(ab.window),
                    lockstep_core::duration::format(ab.settle),
                    lockstep_core::duration::format(counted),
                    p.label(),
                    mix.join("+"),
                    lockstep_core::duration::format(round)
                ));
            }
        }
    }
    Ok(())
}

/// The most a handicap may waste of every period.
const MAX_HANDICAP: f64 = 0.5;

/// The shortest window of a paired comparison: every policy's slots have turned in it.
const MIN_WINDOW: std::time::Duration = std::time::Duration::from_secs(1);

/// The paired comparison `[ab]` asks for, with its `[[policies]]` (as written, `raw`, and read, `policies`), checked
/// whole.
fn paired(ab: &RawAb, raw: &[RawPolicy], policies: &[PolicyConfig], ranks_in: &[RanksIn]) -> Result<Ab, String> {
    use lockstep_core::duration::{format, within};
    use std::time::Duration;
    let time = |field: &str, text: Option<&str>, default: &str, range: std::ops::RangeInclusive<Duration>| {
        within(&format!("[ab] {field}"), text.unwrap_or(default), range).map_err(|e| e.to_string())
    };
    let window = time("window", ab.window.as_deref(), "4s", MIN_WINDOW..=Duration::from_mins(10))?;
    let settle = time("settle", ab.settle.as_deref(), "400ms", Duration::ZERO..=Duration::from_mins(1))?;
    let duration = time("duration", Some(&ab.duration), "", Duration::from_secs(1)..=Duration::from_hours(24 * 7))?;
    if ranks_in != [RanksIn::Process] {
        return Err("[ab] runs bare processes under a private agent (expected ranks_in = [\"process\"])".into());
    }
    if policies.len() < 2 {
        return Err("[ab] compares policies: give two or more [[policies]]".into());
    }
    let period = PERIOD;
    if [window, settle].iter().any(|d| !d.as_nanos().is_multiple_of(period.as_nanos())) {
        return Err(format!(
            "[ab] window = {:?}, settle = {:?} (expected whole multiples of {}, the period the jobs are read at)",
            format(window),
            format(settle),
            format(period)
        ));
    }
    if settle < period {
        return Err(format!(
            "[ab] settle = {:?} (expected at least {period}: the first period after a switch is the switch's)",
            format(settle),
            period = format(period)
        ));
    }
    if settle >= window {
        return Err(format!("[ab] settle = {:?} (expected less than the window, {})", format(settle), format(window)));
    }
    let slowest = policies.iter().filter(|p| p.scheduler.agents().slotted()).map(|p| p.slot).max().unwrap_or_default();
    let counted = window.saturating_sub(settle);
    if counted < slowest * 2 {
        return Err(format!(
            "[ab] window = {:?} counts {} after its settle: expected at least two slots of every policy ({} each)",
            format(window),
            format(counted),
            format(slowest)
        ));
    }
    let round = window * policies.len() as u32;
    if duration < round * 2 {
        return Err(format!(
            "[ab] duration = {:?} (expected at least two rounds of every policy's window: {})",
            format(duration),
            format(round * 2)
        ));
    }
    let confidence = ab.confidence.unwrap_or(0.95);
    if !(0.5..1.0).contains(&confidence) {
        return Err(format!("[ab] confidence = {confidence} (expected at least 0.5 and below 1, e.g. 0.95)"));
    }
    let mut arms = Vec::new();
    for (r, p) in raw.iter().zip(policies) {
        let handicap = r.handicap.unwrap_or(0.0);
        if !(0.0..=MAX_HANDICAP).contains(&handicap) {
            return Err(format!("policy {}: handicap = {handicap} (expected 0 to {MAX_HANDICAP})", p.label()));
        }
        let label = match &r.label {
            Some(l) => {
                let fits = (1..=32).contains(&l.len()) && l.chars().all(|c| c.is_ascii_graphic() || c == ' ');
                if !fits || l.contains(['<', '>', '&', '"', '|', '`']) {
                    return Err(format!(
                        "policy {}: label {l:?} (expected 1 to 32 printable ASCII characters, none of <>&\"|`)",
                        p.label()
                    ));
                }
                l.clone()
            }
            None if handicap > 0.0 => format!("{} stopped {:.0}%", p.label(), handicap * 100.0),
            None => p.label(),
        };
        arms.push(Arm { label, handicap });
    }
    let by = match ab.measure.as_deref() {
        None | Some("rate") => By::Rate,
        Some("runs") => By::Runs,
        Some(other) => return Err(format!("[ab] measure = {other:?} (expected \"rate\" or \"runs\")")),
    };
    Ok(Ab { window, settle, duration, confidence, arms, by })
}

/// The spec's mixes: its explicit `mixes`, or each workload at each `mpl` level; checked whole (each mix known
/// workloads, something to measure in each, something compared, every workload in some mix).
fn mixes(raw: &Raw) -> Result<Vec<Vec<String>>, String> {
    if !raw.mpl.is_empty() && !raw.mixes.is_empty() {
        return Err("both mpl and mixes given (expected one: mpl levels of each workload, or explicit mixes)".into());
    }
    let mixes: Vec<Vec<String>> = if raw.mixes.is_empty() {
        if raw.mpl.is_empty() || raw.mpl.iter().any(|m| !(1..=MAX_MPL).contains(m)) {
            return Err(format!("give mpl = [levels from 1 to {MAX_MPL}] or mixes = [[workloads…]]"));
        }
        distinct("mpl", &raw.mpl, "each level once")?;
        raw.workloads.keys().flat_map(|w| raw.mpl.iter().map(move |&m| vec![w.clone(); m as usize])).collect()
    } else {
        distinct("mixes", &raw.mixes, "each mix once")?;
        raw.mixes.clone()
    };
    for mix in &mixes {
        if mix.len() > MAX_MPL as usize {
            return Err(format!("mix {mix:?} has more than {MAX_MPL} workloads"));
        }
        if let Some(w) = mix.iter().find(|w| !raw.workloads.contains_key(*w)) {
            return Err(format!("mix names unknown workload {w:?}"));
        }
        if !mix.iter().any(|w| !raw.workloads[w].background) {
            return Err(format!("mix {mix:?} has no workload to measure (all are background)"));
        }
    }
    // A mix of one job is run alone only, as the baseline: with nothing else, nothing is compared with it.
    if !raw.unloaded && mixes.iter().all(|m| m.len() < 2) {
        return Err(format!(
            "{} compares nothing: every mix is one workload, which runs alone only (expected a mix of two or more \
             workloads, or unloaded = true to run each alone under every policy too)",
            if raw.mixes.is_empty() { format!("mpl = {:?}", raw.mpl) } else { format!("mixes = {:?}", raw.mixes) }
        ));
    }
    if let Some(w) = raw.workloads.keys().find(|w| !mixes.iter().any(|m| m.contains(w))) {
        return Err(format!("workload {w} is in no mix (add it to mixes, or remove it)"));
    }
    Ok(mixes)
}

#[cfg(test)]
pub(super) mod tests {
    /// Reads a spec file as the CLI does.
    fn load(path: &std::path::Path) -> Result<super::Spec, lockstep_core::error::UsageError> {
        super::parse(path, &std::fs::read_to_string(path).unwrap())
    }

    /// The spec the integration test runs too.
    pub(in crate::mpl) const GOOD: &str = include_str!("../../../../fixtures/specs/mpl-small.toml");

    /// The spec `text` says, parsed from a file of its own.
    pub(in crate::mpl) fn parse(text: &str) -> Result<super::Spec, String> {
        let dir = lockstep_scratch::tempdir().unwrap();
        let path = dir.path().join("spec.toml");
        std::fs::write(&path, text).unwrap();
        load(&path).map_err(|e| e.to_string())
    }

    #[test]
    fn mpl_levels_become_homogeneous_mixes() {
        let spec = parse(GOOD).unwrap();
        assert_eq!(spec.mixes.len(), 4);
        assert!(spec.mixes.contains(&vec!["lu".to_string(), "lu".to_string()]));
        assert_eq!(spec.policies[1].label(), "gang/200ms");
        assert_eq!(spec.policies[0].label(), "cfs");
        assert_eq!(spec.progress, [super::Progress::Yield]);
    }

    #[test]
    fn explicit_mixes_are_kept() {
        let spec = parse(&GOOD.replace("mpl = [1, 2]", r#"mixes = [["lu", "ep"]]"#)).unwrap();
        assert_eq!(spec.mixes, vec![vec!["lu".to_string(), "ep".to_string()]]);
    }

    #[test]
    fn slurm_specs_span_nodes_and_take_slurm_gang() {
        let text = GOOD.replace("ranks = 2", "ranks = 2\nranks_in = [\"slurm\"]")
            + "[[policies]]\nname = \"slurm-gang\"\nslot = \"5s\"\n";
        let spec = parse(&text).unwrap();
        assert_eq!(spec.nodes, 2);
        assert!(spec
            .policies
            .iter()
            .any(|p| p.scheduler == crate::harness::spec::Scheduler::SlurmGang && p.slot.as_secs() == 5));
        assert_eq!(parse(GOOD).unwrap().nodes, 1);
        let err = parse(&text.replace("slot = \"5s\"", "slot = \"2s\"")).unwrap_err();
        assert!(err.contains("SchedulerTimeSlice"), "{err}");
    }

    #[test]
    fn background_workloads_need_a_measured_one() {
        let spec = GOOD.replace("mpl = [1, 2]", "mixes = [[\"lu\", \"hog\"], [\"ep\"]]")
            + "[workloads.hog]\ncommand = [\"pi\"]\nbackground = true\n";
        let s = parse(&spec).unwrap();
        assert!(s.workloads["hog"].background && !s.unloaded);
        let only = spec.replace("[\"lu\", \"hog\"]", "[\"lu\"], [\"hog\"]");
        assert!(parse(&only).unwrap_err().contains("no workload to measure"));
    }

    #[test]
    fn one_workload_mixes_compare_something_only_when_run_under_every_policy() {
        let spec = parse(&GOOD.replace("mpl = [1, 2]", "mpl = [1]\nunloaded = true")).unwrap();
        assert_eq!(spec.mixes.len(), 2);
    }

    #[test]
    fn a_placement_this_machine_cannot_give_is_refused_naming_what_it_has() {
        use crate::harness::Kind as _;
        let machine = lockstep_core::topo::Machine::live().unwrap();
        let spec = parse(&GOOD.replace("ranks = 2", "ranks = 2\nplacement = \"e-only\"")).unwrap();
        match (machine.kinds.len(), spec.check_machine()) {
            (1, Err(e)) => {
                let e = e.to_string();
                assert!(e.contains("placement = \"e-only\" on this machine (cores by kind: P ×"), "{e}");
                assert!(e.contains("one core kind") && e.lines().count() == 1, "{e}");
            }
            (1, Ok(())) => panic!("e-only accepted on a machine with one core kind"),
            (_, result) => assert!(result.is_ok(), "{result:?}"),
        }
        assert!(parse(GOOD).unwrap().check_machine().is_ok());
    }

    #[test]
    fn a_paired_comparison_runs_the_even_rounds_its_duration_holds_counted_in_whole_nanoseconds() {
        let ab = |duration: &str, window: &str| {
            let text = GOOD.to_string() + &format!("[ab]\nduration = {duration:?}\nwindow = {window:?}\n");
            let ab = parse(&text).unwrap().ab.unwrap();
            (ab.rounds(), ab.length())
        };
        // 7.5 rounds of two windows of 4 s: 6.
        assert_eq!(ab("1m", "4s"), (6, std::time::Duration::from_secs(48)));
        assert_eq!(ab("48s", "4s"), (6, std::time::Duration::from_secs(48)));
        // 1.6 s × 2 × 6 is 19.2 s exactly (in floating point 6 rounds came to 5.999…, and 4 were run).
        assert_eq!(ab("19.2s", "1.6s"), (6, std::time::Duration::from_millis(19_200)));
    }

    #[test]
    fn a_paired_comparison_is_checked_whole() {
        let good = GOOD.to_string() + "[ab]\nduration = \"1m\"\n";
        let spec = parse(&good).unwrap();
        let ab = spec.ab.unwrap();
        assert_eq!((ab.window.as_secs(), ab.settle.as_millis(), ab.confidence, ab.by), (4, 400, 0.95, super::By::Rate));
        let runs = parse(&good.replace("duration = \"1m\"", "duration = \"1m\"\nmeasure = \"runs\"")).unwrap();
        assert_eq!(runs.ab.unwrap().by, super::By::Runs);
        assert_eq!(ab.arms.iter().map(|a| a.label.as_str()).collect::<Vec<_>>(), ["cfs", "gang/200ms"]);
        for (change, needle) in [
            (("duration = \"1m\"", "duration = \"10s\""), "at least two rounds of every policy's window: 16s"),
            (("duration = \"1m\"", "duration = \"1m\"\nwindow = \"1.1s\""), "whole multiples of 200ms"),
            (("duration = \"1m\"", "duration = \"1m\"\nsettle = \"4s\""), "less than the window"),
            (("duration = \"1m\"", "duration = \"1m\"\nwindow = \"1s\"\nsettle = \"800ms\""), "two slots"),
            (("duration = \"1m\"", "duration = \"1e30s\""), "bad [ab] duration"),
            (("duration = \"1m\"", "duration = \"1m\"\nconfidence = 1.0"), "confidence = 1"),
            (("duration = \"1m\"", "duration = \"1m\"\nmeasure = \"calls\""), "measure = \"calls\" (expected \"rate\""),
            (("duration = \"1m\"", "window = \"4s\""), "missing field `duration`"),
            (("slot = \"200ms\"", "slot = \"200ms\"\nhandicap = 0.9"), "handicap = 0.9 (expected 0 to 0.5)"),
            (("slot = \"200ms\"", "slot = \"200ms\"\nlabel = \"a<b\""), "label \"a<b\""),
            (
                ("slot = \"200ms\"", "slot = \"200ms\"\nlabel = \"cfs\""),
                "names \"cfs\" twice (expected each label once)",
            ),
            (("ranks = 2", "ranks = 2\nranks_in = [\"container\"]"), "ranks_in = [\"process\"]"),
            (
                ("duration = \"1m\"", "duration = \"1m\"\nsettle = \"600ms\""),
                "not whole rounds of gang/200ms with mix ep+ep (400ms each",
            ),
            (("duration = \"1m\"", "duration = \"1m\"\nsettle = \"0s\""), "settle = \"0ms\" (expected at least 200ms"),
            (("ranks = 2", "ranks = 2\nrepetitions = 3"), "repetitions = 3 is for whole runs"),
            (("[[policies]]\nname = \"gang\"\nslot = \"200ms\"\n", ""), "two or more [[policies]]"),
        ] {
            let err = parse(&good.replace(change.0, change.1)).unwrap_err();
            assert!(err.contains(needle), "{change:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
        // Two entries of one policy are a comparison of it with itself, told apart by label.
        let aa = good.replace(
            "slot = \"200ms\"",
            "slot = \"200ms\"\n[[policies]]\nname = \"gang\"\nslot = \"200ms\"\nlabel = \"B\"",
        );
        assert_eq!(parse(&aa).unwrap().ab.unwrap().arms[2].label, "B");
        let err = parse(&GOOD.replace("slot = \"200ms\"", "slot = \"200ms\"\nhandicap = 0.1")).unwrap_err();
        assert!(err.contains("label and handicap are for paired comparisons (add [ab])"), "{err}");
    }

    #[test]
    fn bad_specs_name_the_problem() {
        for (change, needle) in [
            (("name = \"cfs\"", "name = \"rr\""), "unknown co-scheduling policy"),
            (("slot = \"200ms\"", "slot = \"5ms\""), "bad slot \"5ms\""),
            (("ranks = 2", "ranks = 3"), "power of two"),
            (("mpl = [1, 2]", "mixes = [[\"lu\", \"bt\"]]"), "unknown workload"),
            (("mpl = [1, 2]", "mpl = [0]"), "mpl"),
            (("mpl = [1, 2]", "mpl = [4294967295]"), "mpl"),
            (("[\"lu\", \"--class\"", "[\"../../bin/sh\", \"--class\""), "without a path"),
            (("ranks = 2", "ranks = 2\nrepetitions = 4294967295"), "repetitions"),
            (("ranks = 2", "ranks = 2\nprogress = [\"spin\"]"), "progress mode"),
            (("ranks = 2", "ranks = 2\nranks_in = [\"vm\"]"), "ranks_in"),
            (("ranks = 2", "ranks = [2"), "bad experiment spec"),
            (("ranks = 2", "ranks = 2\ncolour = 1"), "unknown field"),
            (("ranks = 2", "ranks = 2\nnodes = 2"), "nodes is for"),
            (("ranks = 2", "ranks = 2\nranks_in = [\"slurm\", \"process\"]"), "alone"),
            (("ranks = 2", "ranks = 2\nranks_in = [\"slurm\"]\nnodes = 4"), "dividing ranks"),
            (("name = \"cfs\"", "name = \"slurm-gang\""), "needs ranks_in"),
            (("name = \"it-experiment\"", "name = \"it-experiment-with-a-very-long-name\""), "1 to 32"),
            (("[workloads.lu]", "[workloads.lu-with-a-long-name]"), "workload name"),
            (("ranks = 2", "ranks = 2\nprogress = []"), "progress = [] (expected one or both of"),
            (("ranks = 2", "ranks = 2\nprogress = [\"busy\", \"busy\"]"), "progress names \"busy\" twice"),
            (("ranks = 2", "ranks = 2\nranks_in = []"), "ranks_in = []"),
            (("ranks = 2", "ranks = 2\nrepetitions = 0"), "repetitions = 0"),
            (("mpl = [1, 2]", "mpl = [1, 2]\nmixes = [[\"lu\", \"ep\"]]"), "both mpl and mixes"),
            (("mpl = [1, 2]", "mpl = [2, 2]"), "mpl names 2 twice"),
            (("mpl = [1, 2]", "mpl = [1]"), "mpl = [1] compares nothing"),
            (("mpl = [1, 2]", "mixes = [[\"lu\"], [\"ep\"]]"), "compares nothing"),
            (("mpl = [1, 2]", "mixes = [[\"lu\", \"ep\"], [\"lu\", \"ep\"]]"), "twice"),
            (("mpl = [1, 2]", "mixes = [[\"lu\", \"lu\"]]"), "workload ep is in no mix"),
            (("mpl = [1, 2]", "mixes = [[]]"), "no workload to measure"),
            (("name = \"gang\"", "name = \"cfs\""), "[[policies]] names \"cfs\" twice"),
            (("ranks = 2", "ranks = 2\nplacement = \"e-only\"\nranks_in = [\"container\"]"), "bare processes only"),
        ] {
            let err = parse(&GOOD.replace(change.0, change.1)).unwrap_err();
            assert!(err.contains(needle), "{change:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
    }
}
