//! The spec of counters experiments, read and checked: what [`super`] runs and reports.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::harness::spec::raw_spec;
use lockstep_core::error::UsageError;

/// A parsed, validated counters spec.
#[derive(Clone, Debug)]
pub struct CountersSpec {
    /// Experiment name.
    pub name: String,
    /// What it reproduces.
    pub description: String,
    /// MPI ranks per job.
    pub ranks: u32,
    /// Repetitions of every case.
    pub repetitions: u32,
    /// Seed of the random case order.
    pub seed: u64,
    /// The event sets (name, `-e` list).
    pub event_sets: Vec<(String, String)>,
    /// Overhead target of each event set, in percent, if any.
    pub targets: Vec<Option<f64>>,
    /// Sampling intervals (`None`: counts read only at the end).
    pub intervals: Vec<Option<Duration>>,
    /// Counting tools: `lockstep` and/or `perf`.
    pub tools: Vec<String>,
    /// Workloads by name.
    pub workloads: BTreeMap<String, Workload>,
}

/// One workload: a program of `build/bin/`, run `repeat` times in a row as one job.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Program and arguments, e.g. `["ep", "--class", "B"]`.
    pub command: Vec<String>,
    /// Runs per job (to reach a job length of 10–60 s with kernels whose largest class is shorter).
    #[serde(default = "crate::harness::spec::one")]
    pub repeat: u32,
}

/// One way of counting a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// `lockstep` or `perf`; `None`: not counted (the baseline).
    pub tool: Option<String>,
    /// Index of the event set.
    pub set: usize,
    /// Sampling interval.
    pub interval: Option<Duration>,
}

impl Config {
    /// `none`, or `TOOL/SET/INTERVAL` (`lockstep/2 events/1s`).
    pub fn label(&self, spec: &CountersSpec) -> String {
        match &self.tool {
            None => "none".into(),
            Some(tool) => format!("{tool}/{}/{}", spec.event_sets[self.set].0, interval_text(self.interval)),
        }
    }
}

/// `none`, `5s`, `1s`, `500ms`.
pub fn interval_text(i: Option<Duration>) -> String {
    match i {
        None => "none".into(),
        Some(d) if d.subsec_nanos() == 0 => format!("{}s", d.as_secs()),
        Some(d) => format!("{}ms", d.as_millis()),
    }
}

raw_spec! {
    struct Raw {
        #[serde(default = "crate::harness::spec::two")]
        ranks: u32,
        #[serde(default = "crate::harness::spec::one")]
        repetitions: u32,
        #[serde(default)]
        seed: u64,
        event_sets: Vec<RawSet>,
        intervals: Vec<String>,
        tools: Vec<String>,
        workloads: BTreeMap<String, Workload>,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSet {
    name: String,
    events: String,
    target_percent: Option<f64>,
}

/// Validates a counters spec, `text` as read from `path` (which messages name); every problem is one usage
/// error. Event names are resolved here, so that a bad one stops the experiment before it starts.
pub fn parse(path: &Path, text: &str) -> Result<CountersSpec, UsageError> {
    use crate::harness::spec::distinct;
    let bad = crate::harness::spec::bad(path);
    let (header, raw) = crate::harness::spec::read::<Raw>(path, text)?;
    crate::harness::spec::check_ranks(raw.ranks).map_err(bad)?;
    // At least two: a confidence interval needs two.
    crate::harness::spec::check_repetitions(raw.repetitions, 2).map_err(bad)?;
    if raw.event_sets.is_empty() || raw.intervals.is_empty() || raw.tools.is_empty() || raw.workloads.is_empty() {
        return Err(bad("event_sets, intervals, tools and [workloads] must all be non-empty".into()));
    }
    let names: Vec<&String> = raw.event_sets.iter().map(|s| &s.name).collect();
    distinct("event_sets", &names, "each set's name once").map_err(bad)?;
    distinct("intervals", &raw.intervals, "each interval once").map_err(bad)?;
    distinct("tools", &raw.tools, "lockstep, perf or both, once each").map_err(bad)?;
    for set in &raw.event_sets {
        if let Some(t) = set.target_percent.filter(|t| !(0.0..=100.0).contains(t)) {
            return Err(bad(format!("event set {:?}: target_percent = {t} (expected 0 to 100)", set.name)));
        }
        lockstep_telemetry::events::parse_list(&set.events)
            .map_err(|e| bad(format!("event set {:?}: {e}", set.name)))?;
    }
    let mut intervals = Vec::new();
    for i in &raw.intervals {
        intervals.push(match i.as_str() {
            "none" => None,
            t => Some(
                lockstep_core::duration::within("interval", t, Duration::from_millis(10)..=Duration::from_hours(24))
                    .map_err(|e| bad(format!("{e}, or none")))?,
            ),
        });
    }
    if let Some(t) = raw.tools.iter().find(|t| *t != "lockstep" && *t != "perf") {
        return Err(bad(format!("tool {t:?} (expected lockstep or perf)")));
    }
    for (name, w) in &raw.workloads {
        crate::harness::spec::check_command(name, &w.command).map_err(bad)?;
        if !(1..=crate::harness::spec::MAX_REPETITIONS).contains(&w.repeat) {
            return Err(bad(format!("workload {name}: repeat = {} (expected 1 to 1000)", w.repeat)));
        }
    }
    Ok(CountersSpec {
        name: header.name,
        description: header.description,
        ranks: raw.ranks,
        repetitions: raw.repetitions,
        seed: raw.seed,
        targets: raw.event_sets.iter().map(|s| s.target_percent).collect(),
        event_sets: raw.event_sets.into_iter().map(|s| (s.name, s.events)).collect(),
        intervals,
        tools: raw.tools,
        workloads: raw.workloads,
    })
}

/// Every configuration: the uncounted baseline, then each tool × event set × interval.
pub fn configs(spec: &CountersSpec) -> Vec<Config> {
    let mut out = vec![Config { tool: None, set: 0, interval: None }];
    for tool in &spec.tools {
        for set in 0..spec.event_sets.len() {
            for &interval in &spec.intervals {
                out.push(Config { tool: Some(tool.clone()), set, interval });
            }
        }
    }
    out
}

/// The cases, repetition by repetition, each repetition's (workload, configuration) pairs in a random order
/// (xorshift64* seeded by the spec, so a rerun has the same order).
pub fn plan(spec: &CountersSpec) -> Vec<(u32, String, Config)> {
    let configs = configs(spec);
    let mut state = spec.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let mut cases = Vec::new();
    for repetition in 1..=spec.repetitions {
        let mut round: Vec<(u32, String, Config)> = spec
            .workloads
            .keys()
            .flat_map(|w| configs.iter().map(move |c| (repetition, w.clone(), c.clone())))
            .collect();
        for i in (1..round.len()).rev() {
            round.swap(i, (next() % (i as u64 + 1)) as usize);
        }
        cases.extend(round);
    }
    cases
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads a spec file as the CLI does.
    fn load(path: &Path) -> Result<CountersSpec, UsageError> {
        parse(path, &std::fs::read_to_string(path).unwrap())
    }

    fn spec() -> CountersSpec {
        spec_changed("", "").unwrap()
    }

    /// The test's spec with `from` replaced by `to`, read as the CLI does.
    fn spec_changed(from: &str, to: &str) -> Result<CountersSpec, UsageError> {
        let dir = lockstep_scratch::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        let text = r#"kind = "counters"
name = "c"
repetitions = 3
seed = 7
intervals = ["none", "5s", "1s"]
tools = ["lockstep", "perf"]
[[event_sets]]
name = "2 events"
events = "task-clock,page-faults"
[workloads.ep]
command = ["ep", "--class", "S"]
[workloads.is]
command = ["is", "--class", "S"]
repeat = 3
"#;
        std::fs::write(&path, if from.is_empty() { text.to_string() } else { text.replace(from, to) }).unwrap();
        load(&path)
    }

    #[test]
    fn a_list_that_names_something_twice_is_refused() {
        for (from, to, says) in [
            (r#"tools = ["lockstep", "perf"]"#, r#"tools = ["perf", "perf"]"#, "tools names \"perf\" twice"),
            (r#"["none", "5s", "1s"]"#, r#"["none", "1s", "1s"]"#, "intervals names \"1s\" twice"),
            (
                "name = \"2 events\"",
                "name = \"2 events\"\ntarget_percent = -1",
                "target_percent = -1 (expected 0 to 100)",
            ),
        ] {
            let err = spec_changed(from, to).unwrap_err().to_string();
            assert!(err.contains(says) && err.lines().count() == 1, "{err}");
        }
    }

    #[test]
    fn every_case_once_per_repetition_in_a_seeded_random_order() {
        let s = spec();
        let configs = configs(&s);
        assert_eq!(configs.len(), 1 + 2 * 3);
        assert_eq!(configs[0].label(&s), "none");
        assert_eq!(configs[1].label(&s), "lockstep/2 events/none");
        let cases = plan(&s);
        assert_eq!(cases.len(), 3 * 2 * configs.len());
        for rep in 1..=3 {
            let round: Vec<_> = cases.iter().filter(|c| c.0 == rep).collect();
            assert_eq!(round.len(), 2 * configs.len());
            for w in ["ep", "is"] {
                for c in &configs {
                    assert_eq!(round.iter().filter(|r| r.1 == w && r.2 == *c).count(), 1);
                }
            }
        }
        assert_eq!(cases, plan(&s), "same seed, same order");
        let ordered: Vec<_> = cases.iter().filter(|c| c.0 == 1).map(|c| (c.1.clone(), c.2.clone())).collect();
        let sorted: Vec<_> =
            s.workloads.keys().flat_map(|w| configs.iter().map(move |c| (w.clone(), c.clone()))).collect();
        assert_ne!(ordered, sorted, "the order is shuffled");
    }
}
