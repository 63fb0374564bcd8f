//! The spec of scale experiments, read and checked: what [`super`] runs and reports.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::harness::spec::raw_spec;
use crate::harness::spec::{PolicyConfig, Progress, PROGRESS};
use lockstep_core::error::UsageError;

/// Most nodes `tests/cluster/up` makes.
pub const MAX_NODES: u32 = 64;

/// A parsed, validated scale spec.
#[derive(Clone, Debug)]
pub struct ScaleSpec {
    /// Experiment name.
    pub name: String,
    /// What it measures.
    pub description: String,
    /// Cluster sizes, in nodes.
    pub nodes: Vec<u32>,
    /// Jobs in each case's stream.
    pub jobs: u32,
    /// Nodes (= ranks) a job may span; each job draws one.
    pub sizes: Vec<u32>,
    /// Mean time between submissions (exponentially distributed).
    pub arrival: Duration,
    /// Seed of the stream: every case of a cluster size gets the same jobs at the same times.
    pub seed: u64,
    /// MPI progress mode of the ranks.
    pub progress: Progress,
    /// The programs jobs run (each job draws one), as `build/bin/` commands.
    pub workloads: Vec<Vec<String>>,
    /// Policies to compare.
    pub policies: Vec<ScalePolicy>,
    /// How long a case's stream may take before its jobs are cancelled.
    pub deadline: Duration,
    /// Scrape every agent with Prometheus at this interval (`None`: no Prometheus).
    pub scrape: Option<Duration>,
}

/// One policy of a scale experiment.
#[derive(Clone, Debug)]
pub struct ScalePolicy {
    /// The scheduler and slot.
    pub config: PolicyConfig,
    /// How the controller's prolog gives rows: `cluster` or `node`.
    pub rows: &'static str,
}

impl ScalePolicy {
    /// The label reports and the store use: `gang/500ms`, `gang/500ms rows=node`.
    pub fn label(&self) -> String {
        match self.rows {
            "node" => format!("{} rows=node", self.config.label()),
            _ => self.config.label(),
        }
    }
}

raw_spec! {
    struct Raw {
        nodes: Vec<u32>,
        jobs: u32,
        sizes: Vec<u32>,
        arrival: String,
        #[serde(default)]
        seed: u64,
        #[serde(default = "yield_mode")]
        progress: String,
        workloads: Vec<Vec<String>>,
        policies: Vec<RawPolicy>,
        #[serde(default = "ten_minutes")]
        deadline: String,
        scrape: Option<String>,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    name: String,
    slot: Option<String>,
    #[serde(default = "cluster")]
    rows: String,
}

fn yield_mode() -> String {
    "yield".into()
}
fn ten_minutes() -> String {
    "10m".into()
}
fn cluster() -> String {
    "cluster".into()
}

/// Validates a scale spec, `text` as read from `path` (which messages name); every problem is one usage error.
pub fn parse(path: &Path, text: &str) -> Result<ScaleSpec, UsageError> {
    use crate::harness::spec::distinct;
    let bad = crate::harness::spec::bad(path);
    let (header, raw) = crate::harness::spec::read::<Raw>(path, text)?;
    if raw.nodes.is_empty() || raw.nodes.iter().any(|n| !(2..=MAX_NODES).contains(n)) {
        return Err(bad(format!("nodes = {:?} (expected cluster sizes from 2 to {MAX_NODES})", raw.nodes)));
    }
    let smallest = *raw.nodes.iter().min().expect("non-empty");
    if raw.sizes.is_empty() || raw.sizes.iter().any(|s| *s < 1 || *s > smallest) {
        return Err(bad(format!("sizes = {:?} (expected job sizes from 1 to {smallest} nodes)", raw.sizes)));
    }
    distinct("nodes", &raw.nodes, "each cluster size once").map_err(bad)?;
    if !(1..=10_000).contains(&raw.jobs) {
        return Err(bad(format!("jobs = {} (expected 1 to 10000)", raw.jobs)));
    }
    let duration = |key: &str, text: &str, range: std::ops::RangeInclusive<Duration>| {
        lockstep_core::duration::within(key, text, range).map_err(|e| bad(e.to_string()))
    };
    let arrival = duration("arrival", &raw.arrival, Duration::from_millis(10)..=Duration::from_mins(10))?;
    let deadline = duration("deadline", &raw.deadline, Duration::from_secs(10)..=Duration::from_hours(24))?;
    let scrape = raw
        .scrape
        .as_deref()
        .map(|s| duration("scrape", s, Duration::from_millis(100)..=Duration::from_mins(1)))
        .transpose()?;
    let progress = PROGRESS
        .parse(&raw.progress)
        .ok_or_else(|| bad(format!("progress {:?} (expected yield or busy)", raw.progress)))?;
    if raw.workloads.is_empty() {
        return Err(bad("workloads must name at least one command".into()));
    }
    for (i, w) in raw.workloads.iter().enumerate() {
        crate::harness::spec::check_command(&format!("w{i}"), w).map_err(bad)?;
    }
    let mut policies = Vec::new();
    for p in &raw.policies {
        let config = crate::harness::spec::policy_config(&p.name, p.slot.as_deref(), true).map_err(bad)?;
        let rows = match p.rows.as_str() {
            "cluster" => "cluster",
            "node" => "node",
            other => return Err(bad(format!("policy {}: rows {other:?} (expected cluster or node)", p.name))),
        };
        policies.push(ScalePolicy { config, rows });
    }
    if policies.is_empty() {
        return Err(bad("no [[policies]]".into()));
    }
    let labels: Vec<String> = policies.iter().map(|p| format!("{} rows {}", p.config.label(), p.rows)).collect();
    distinct("[[policies]]", &labels, "each policy, slot and rows once").map_err(bad)?;
    Ok(ScaleSpec {
        name: header.name,
        description: header.description,
        nodes: raw.nodes,
        jobs: raw.jobs,
        sizes: raw.sizes,
        arrival,
        seed: raw.seed,
        progress,
        workloads: raw.workloads,
        policies,
        deadline,
        scrape,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scale::common::stream;

    const SPEC: &str = r#"
kind = "scale"
name = "s"
nodes = [16, 32]
jobs = 50
sizes = [2, 4, 16]
arrival = "1s"
seed = 7
workloads = [["cg", "--class", "A"], ["is", "--class", "A"]]
scrape = "1s"
[[policies]]
name = "gang"
slot = "500ms"
[[policies]]
name = "gang"
slot = "500ms"
rows = "node"
[[policies]]
name = "slurm-gang"
slot = "5s"
"#;

    #[test]
    fn a_spec_parses_and_its_stream_is_reproducible() {
        let spec = parse(Path::new("s.toml"), SPEC).unwrap();
        assert_eq!(spec.policies.len(), 3);
        assert_eq!(spec.policies[1].label(), "gang/500ms rows=node");
        let a = stream(&spec, 16);
        assert_eq!(a, stream(&spec, 16));
        assert_ne!(a, stream(&spec, 32));
        assert_eq!(a.len(), 50);
        for j in &a {
            assert!(spec.sizes.contains(&(j.nodes.len() as u32)));
            assert!(j.nodes.windows(2).all(|w| w[0] < w[1]) && j.nodes.iter().all(|n| (1..=16).contains(n)));
        }
        let mean_gap = a.last().unwrap().at / 49.0;
        assert!((0.6..1.5).contains(&mean_gap), "{mean_gap}");
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        for (from, to, says) in [
            ("nodes = [16, 32]", "nodes = [16, 65]", "cluster sizes"),
            ("nodes = [16, 32]", "nodes = [16, 16]", "nodes names 16 twice"),
            ("sizes = [2, 4, 16]", "sizes = [2, 32]", "job sizes"),
            ("arrival = \"1s\"", "arrival = \"1ms\"", "arrival"),
            ("rows = \"node\"", "rows = \"global\"", "rows"),
            ("name = \"slurm-gang\"\nslot = \"5s\"", "name = \"slurm-gang\"\nslot = \"1s\"", "SchedulerTimeSlice"),
        ] {
            let text = SPEC.replace(from, to);
            let e = parse(Path::new("s.toml"), &text).unwrap_err().to_string();
            assert!(e.contains(says), "{to}: {e}");
        }
    }
}
