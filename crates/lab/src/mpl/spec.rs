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
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    name: String,
    slot: Option<String>,
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
    let (header, raw) = read::<Raw>(path, text, "mpl")?;
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
    let labels: Vec<String> = policies.iter().map(PolicyConfig::label).collect();
    distinct("[[policies]]", &labels, "each policy and slot once").map_err(bad)?;
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
    })
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
