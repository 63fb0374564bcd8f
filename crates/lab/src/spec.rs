//! Experiment specs (TOML): workloads, MPL levels or explicit mixes, co-scheduling policies, MPI progress modes,
//! repetitions.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use lockstep_core::cosched::{slot, PolicySpec};
use lockstep_core::error::UsageError;
use lockstep_core::names::Names;
use lockstep_core::place::PlacementKind;

/// A parsed, validated spec.
#[derive(Clone, Debug)]
pub struct Spec {
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
}

impl Workload {
    /// The progress mode its ranks run in, in a case of mode `case`.
    pub fn progress_in(&self, case: Progress) -> Progress {
        self.progress.as_deref().and_then(|p| PROGRESS.parse(p)).unwrap_or(case)
    }
}

/// MPI progress mode of a case's ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Ranks yield the CPU while they wait (`mpi_yield_when_idle`).
    Yield,
    /// Ranks poll without yielding.
    Busy,
}

/// The names of [`Progress`].
pub const PROGRESS: Names<Progress> = Names(&[("yield", Progress::Yield), ("busy", Progress::Busy)]);

/// Where a job's ranks run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RanksIn {
    /// Bare processes under `lockstep run`, in the job's cgroup.
    Process,
    /// One podman container per rank, the containers adopted as the job.
    Container,
    /// One Charliecloud container (`ch-run`) per rank, the containers adopted as the job.
    Charliecloud,
    /// A Slurm batch job (`srun`) on the test cluster of `tests/cluster/up`.
    Slurm,
}

/// The names of [`RanksIn`].
pub const RANKS_IN: Names<RanksIn> = Names(&[
    ("process", RanksIn::Process),
    ("container", RanksIn::Container),
    ("charliecloud", RanksIn::Charliecloud),
    ("slurm", RanksIn::Slurm),
]);

/// What schedules a case's jobs: a lockstep policy, or Slurm's own gang scheduling with the agents at `cfs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheduler {
    /// The agents' policy.
    Lockstep(PolicySpec),
    /// Slurm's `PreemptMode=GANG`, its `SchedulerTimeSlice` the case's slot.
    SlurmGang,
}

/// The name of Slurm's gang scheduling in specs and reports.
pub const SLURM_GANG: &str = "slurm-gang";

impl Scheduler {
    /// The name a spec gives it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Lockstep(p) => p.name(),
            Self::SlurmGang => SLURM_GANG,
        }
    }

    /// The policy the agents run: `cfs` under Slurm's gang scheduling.
    pub fn agents(self) -> PolicySpec {
        match self {
            Self::Lockstep(p) => p,
            Self::SlurmGang => PolicySpec::Cfs,
        }
    }
}

lockstep_core::display_by_name!(Progress => PROGRESS, RanksIn => RANKS_IN);

/// One policy setting to compare.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PolicyConfig {
    /// What schedules the jobs.
    pub scheduler: Scheduler,
    /// Slot length (for the policies that have slots, and Slurm's time slice).
    pub slot: Duration,
}

impl PolicyConfig {
    /// `cfs`, `boost/2s`, `gang/200ms`, `dcs:weight`, `dcs+boost:weight/200ms`, `slurm-gang/5s`: the slot where
    /// the policy has slots.
    pub fn label(&self) -> String {
        match self.scheduler {
            Scheduler::Lockstep(p) if !p.slotted() => p.name().to_string(),
            s => format!("{}/{}", s.name(), lockstep_core::duration::format(self.slot)),
        }
    }

    /// The slot length to send to the agents (`None`: leave it, the policy has no slots).
    pub fn agent_slot_ms(&self) -> Option<u64> {
        self.scheduler.agents().slotted().then_some(self.slot.as_millis() as u64)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(default = "mpl")]
    kind: String,
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default = "two")]
    ranks: u32,
    #[serde(default = "one")]
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
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    name: String,
    slot: Option<String>,
}

fn mpl() -> String {
    "mpl".into()
}
fn two() -> u32 {
    2
}
fn one() -> u32 {
    1
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

/// A `[[policies]]` entry: `name` a lockstep policy or `slurm-gang` (only when jobs run under Slurm, `slurm`),
/// `slot` its slot length (Slurm's time slice: whole seconds, at least 5).
pub(crate) fn policy_config(name: &str, slot: Option<&str>, slurm: bool) -> Result<PolicyConfig, String> {
    let scheduler = if name == SLURM_GANG {
        if !slurm {
            return Err(format!("policy {SLURM_GANG} needs ranks_in = [\"slurm\"]"));
        }
        Scheduler::SlurmGang
    } else {
        Scheduler::Lockstep(name.parse().map_err(|e: UsageError| e.to_string())?)
    };
    let slot = match slot {
        Some(s) => slot::parse("slot", s).map_err(|e| e.to_string())?,
        None => slot::DEFAULT,
    };
    if scheduler == Scheduler::SlurmGang && (slot.subsec_nanos() != 0 || slot.as_secs() < 5) {
        return Err(format!(
            "policy {SLURM_GANG}: slot {} is Slurm's SchedulerTimeSlice (expected whole seconds, at least 5s)",
            lockstep_core::duration::format(slot)
        ));
    }
    Ok(PolicyConfig { scheduler, slot })
}

/// Most repetitions of a case a spec may ask for.
pub(crate) const MAX_REPETITIONS: u32 = 1000;

/// Highest MPL level (jobs sharing the node at once).
const MAX_MPL: u32 = 16;

/// Checks a repetition count: from `min` to [`MAX_REPETITIONS`].
pub(crate) fn check_repetitions(repetitions: u32, min: u32) -> Result<(), String> {
    if (min..=MAX_REPETITIONS).contains(&repetitions) {
        Ok(())
    } else {
        Err(format!("repetitions = {repetitions} (expected {min} to {MAX_REPETITIONS})"))
    }
}

/// Longest name of a spec. A job's name (`<spec>-<workload>-<position>`, at most 64 characters for the agent) is
/// made of it and of a workload's name.
const MAX_NAME: usize = 32;

/// Longest name of a workload.
const MAX_WORKLOAD_NAME: usize = 16;

/// Whether `name` is 1 to `max` letters, digits, '-' and '_'.
fn is_short_name(name: &str, max: usize) -> bool {
    (1..=max).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Checks a workload: its name, and its command (a program of `build/bin` by its file name, no path, and its
/// arguments).
pub(crate) fn check_command(workload: &str, command: &[String]) -> Result<(), String> {
    if !is_short_name(workload, MAX_WORKLOAD_NAME) {
        return Err(format!(
            "workload name {workload:?} (expected 1 to {MAX_WORKLOAD_NAME} letters, digits, '-', '_')"
        ));
    }
    match command.first().map(String::as_str) {
        None => Err(format!("workload {workload} has an empty command")),
        Some(p) if p.is_empty() || p.contains('/') || p == "." || p == ".." => Err(format!(
            "workload {workload}: program {p:?} (expected the name of a program in build/bin, without a path)"
        )),
        Some(_) => Ok(()),
    }
}

/// Checks what every kind of spec has: its `kind`, a name usable as a directory and store key, and a rank count
/// the kernels accept.
pub(crate) fn check_common(kind: &str, expected: &str, name: &str, ranks: u32) -> Result<(), String> {
    if kind != expected {
        return Err(format!("kind = {kind:?} (expected {expected:?})"));
    }
    if !is_short_name(name, MAX_NAME) {
        return Err(format!("name {name:?} (expected 1 to {MAX_NAME} letters, digits, '-', '_')"));
    }
    if !(1..=16).contains(&ranks) || !ranks.is_power_of_two() {
        return Err(format!("ranks = {ranks} (expected a power of two from 1 to 16)"));
    }
    Ok(())
}

/// Validates a spec, `text` as read from `path` (which messages name); every problem is one usage error.
pub fn parse(path: &Path, text: &str) -> Result<Spec, UsageError> {
    let bad = |what: String| UsageError::new(format!("bad experiment spec {}: {what}", path.display()));
    let raw: Raw = toml::from_str(text).map_err(|e| bad(lockstep_core::error::toml_message(text, &e)))?;
    check_common(&raw.kind, "mpl", &raw.name, raw.ranks).map_err(bad)?;
    check_repetitions(raw.repetitions, 1).map_err(bad)?;
    let placement: PlacementKind =
        raw.placement.parse().map_err(|_| bad(format!("unknown placement {:?}", raw.placement)))?;
    let progress = raw
        .progress
        .iter()
        .map(|p| PROGRESS.parse(p).ok_or_else(|| bad(format!("progress mode {p:?} (expected yield or busy)"))))
        .collect::<Result<Vec<_>, _>>()?;
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
    let mixes: Vec<Vec<String>> = if raw.mixes.is_empty() {
        if raw.mpl.is_empty() || raw.mpl.iter().any(|m| !(1..=MAX_MPL).contains(m)) {
            return Err(bad(format!("give mpl = [levels from 1 to {MAX_MPL}] or mixes = [[workloads…]]")));
        }
        raw.workloads.keys().flat_map(|w| raw.mpl.iter().map(move |&m| vec![w.clone(); m as usize])).collect()
    } else {
        raw.mixes.clone()
    };
    for mix in &mixes {
        if mix.len() > MAX_MPL as usize {
            return Err(bad(format!("mix {mix:?} has more than {MAX_MPL} workloads")));
        }
        if let Some(w) = mix.iter().find(|w| !raw.workloads.contains_key(*w)) {
            return Err(bad(format!("mix names unknown workload {w:?}")));
        }
        if !mix.iter().any(|w| !raw.workloads[w].background) {
            return Err(bad(format!("mix {mix:?} has no workload to measure (all are background)")));
        }
    }
    Ok(Spec {
        name: raw.name,
        description: raw.description,
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
    })
}

#[cfg(test)]
mod tests {
    /// Reads a spec file as the CLI does.
    fn load(path: &std::path::Path) -> Result<super::Spec, lockstep_core::error::UsageError> {
        super::parse(path, &std::fs::read_to_string(path).unwrap())
    }

    /// The spec the integration test runs too.
    const GOOD: &str = include_str!("../../../fixtures/specs/mpl-small.toml");

    fn parse(text: &str) -> Result<super::Spec, String> {
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
        assert!(spec.policies.iter().any(|p| p.scheduler == super::Scheduler::SlurmGang && p.slot.as_secs() == 5));
        assert_eq!(parse(GOOD).unwrap().nodes, 1);
        let err = parse(&text.replace("slot = \"5s\"", "slot = \"2s\"")).unwrap_err();
        assert!(err.contains("SchedulerTimeSlice"), "{err}");
    }

    #[test]
    fn background_workloads_need_a_measured_one() {
        let spec = GOOD.replace("mpl = [1, 2]", "mixes = [[\"lu\", \"hog\"]]")
            + "[workloads.hog]\ncommand = [\"pi\"]\nbackground = true\n";
        let s = parse(&spec).unwrap();
        assert!(s.workloads["hog"].background && !s.unloaded);
        let only = spec.replace("[[\"lu\", \"hog\"]]", "[[\"hog\"]]");
        assert!(parse(&only).unwrap_err().contains("no workload to measure"));
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
        ] {
            let err = parse(&GOOD.replace(change.0, change.1)).unwrap_err();
            assert!(err.contains(needle), "{change:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
    }
}
