//! The spec of locks experiments, read and checked: what [`super`] runs and reports.

use std::path::Path;

use serde::Deserialize;

use crate::harness::spec::raw_spec;
use lockstep_core::error::UsageError;

/// Every lock of liblockstep-locks (`lockbench --list`).
pub const LOCKS: &[&str] = &["pthread", "ttas", "ticket", "mcs", "cna", "mcs-pt", "cna-pt", "shfl"];

/// numactl memory policies a scenario may run under.
pub const NUMA_POLICIES: &[&str] = &["default", "bind", "preferred", "interleave"];

/// A parsed, validated locks spec.
#[derive(Clone, Debug)]
pub struct LocksSpec {
    /// Experiment name.
    pub name: String,
    /// What it reproduces.
    pub description: String,
    /// Length of one run, in seconds.
    pub duration_s: f64,
    /// Repetitions of every case.
    pub repetitions: u32,
    /// Locks compared.
    pub locks: Vec<String>,
    /// Scenarios, in spec order.
    pub scenarios: Vec<Scenario>,
    /// Run every case inside qemu guests instead of on the host (`[guests]`).
    pub guests: Option<Guests>,
}

/// `[guests]`: every case runs in 1, 2, … guests at once (tests/vm/up), lockbench in each guest at the same time,
/// threads per CPU counted in the guest's vCPUs.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Guests {
    /// Numbers of guests run at once (each from 1 to 8).
    pub counts: Vec<u32>,
    /// vCPUs of each guest.
    #[serde(default = "crate::harness::spec::two")]
    pub vcpus: u32,
    /// Virtual NUMA nodes of each guest (dividing `vcpus`).
    #[serde(default = "crate::harness::spec::one")]
    pub numa: u32,
    /// Memory of each guest, MiB.
    #[serde(default = "guest_mem")]
    pub mem_mib: u32,
}

/// One scenario: a workload and the axes it is run over.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Name, shown in the report.
    pub name: String,
    /// `counter`, `rename` or `rename-user`.
    pub workload: String,
    /// Critical section: loop iterations on shared data.
    #[serde(default = "hundred")]
    pub cs: u64,
    /// Critical section: cache lines written.
    #[serde(default)]
    pub cs_lines: u64,
    /// Critical section (`counter` only): how the holder leaves its CPU inside it, lockbench's `--cs-block`:
    /// `none`, `yield`, `sleep:MICROSECONDS`, `write` or `fault`.
    #[serde(default = "no_block")]
    pub cs_block: String,
    /// Non-critical section: loop iterations of private work.
    #[serde(default = "hundred")]
    pub ncs: u64,
    /// Threads, as multiples of the machine's CPUs (at least one thread).
    pub threads_per_cpu: Vec<f64>,
    /// Co-runner processes, as multiples of the CPUs (0: none).
    #[serde(default = "no_corunners")]
    pub corunners_per_cpu: Vec<f64>,
    /// `real`, or `emulated-N`: the CPUs split into N nodes in order.
    #[serde(default = "real")]
    pub numa: Vec<String>,
    /// numactl memory policies.
    #[serde(default = "default_policy")]
    pub numa_policies: Vec<String>,
}

/// One run of lockbench.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    /// Index of the scenario.
    pub scenario: usize,
    /// Lock name (`kernel` for `rename`).
    pub lock: String,
    /// Threads per CPU.
    pub threads_per_cpu: f64,
    /// Co-runners per CPU.
    pub corunners_per_cpu: f64,
    /// `real` or `emulated-N`.
    pub numa: String,
    /// numactl memory policy.
    pub policy: String,
    /// Repetition, from 1.
    pub repetition: u32,
    /// Guests run at once (0: on the host).
    pub guests: u32,
}

raw_spec! {
    struct Raw {
        duration_s: f64,
        #[serde(default = "crate::harness::spec::one")]
        repetitions: u32,
        #[serde(default)]
        locks: Option<Vec<String>>,
        scenarios: Vec<Scenario>,
        #[serde(default)]
        guests: Option<Guests>,
    }
}

fn guest_mem() -> u32 {
    1024
}
fn hundred() -> u64 {
    100
}
fn no_block() -> String {
    "none".into()
}
fn no_corunners() -> Vec<f64> {
    vec![0.0]
}
fn real() -> Vec<String> {
    vec!["real".into()]
}
fn default_policy() -> Vec<String> {
    vec!["default".into()]
}

/// Nodes of an `emulated-N` label (N from 2 to 64), `None` for `real`, an error otherwise.
pub fn emulated_nodes(numa: &str) -> Result<Option<usize>, String> {
    if numa == "real" {
        return Ok(None);
    }
    numa.strip_prefix("emulated-")
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|n| (2..=64).contains(n))
        .map(Some)
        .ok_or_else(|| format!("numa {numa:?} (expected real, or emulated-N with N from 2 to 64)"))
}

/// A `LOCKSTEP_NUMA_MAP` that splits `cpus` (in order) into `nodes` nodes of nearly equal size.
pub fn numa_map(cpus: &[usize], nodes: usize) -> String {
    let per = cpus.len().div_ceil(nodes).max(1);
    cpus.chunks(per)
        .enumerate()
        .map(|(node, chunk)| {
            format!("{node}:{}", chunk.iter().map(std::string::ToString::to_string).collect::<Vec<_>>().join(","))
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// Whether `b` is a value of lockbench's `--cs-block` (or `none`).
fn cs_block_valid(b: &str) -> bool {
    match b.strip_prefix("sleep:") {
        Some(us) => us.parse::<u64>().is_ok_and(|us| (1..=1_000_000).contains(&us)),
        None => ["none", "yield", "write", "fault"].contains(&b),
    }
}

/// Validates a locks spec, `text` as read from `path` (which messages name); every problem is one usage error.
pub fn parse(path: &Path, text: &str) -> Result<LocksSpec, UsageError> {
    use crate::harness::spec::distinct;
    let bad = crate::harness::spec::bad(path);
    let (header, raw) = crate::harness::spec::read::<Raw>(path, text)?;
    if !(raw.duration_s > 0.0 && raw.duration_s <= 600.0) {
        return Err(bad(format!("duration_s = {} (expected seconds, more than 0, at most 600)", raw.duration_s)));
    }
    crate::harness::spec::check_repetitions(raw.repetitions, 1).map_err(bad)?;
    let locks = raw.locks.unwrap_or_else(|| LOCKS.iter().map(std::string::ToString::to_string).collect());
    if let Some(l) = locks.iter().find(|l| !LOCKS.contains(&l.as_str())) {
        return Err(bad(format!("lock {l:?} (expected some of {})", LOCKS.join(", "))));
    }
    if locks.is_empty() || raw.scenarios.is_empty() {
        return Err(bad("locks and [[scenarios]] must be non-empty".into()));
    }
    distinct("locks", &locks, "each lock once").map_err(bad)?;
    let names: Vec<&String> = raw.scenarios.iter().map(|s| &s.name).collect();
    distinct("[[scenarios]]", &names, "each scenario's name once").map_err(bad)?;
    if let Some(g) = &raw.guests {
        if g.counts.is_empty() || g.counts.iter().any(|c| !(1..=8).contains(c)) {
            return Err(bad("[guests] counts must be non-empty, each from 1 to 8".into()));
        }
        distinct("[guests] counts", &g.counts, "each count once").map_err(bad)?;
        if !(1..=64).contains(&g.vcpus) || g.numa == 0 || g.numa > 8 || g.vcpus % g.numa != 0 {
            return Err(bad(format!(
                "[guests] vcpus = {}, numa = {} (expected 1 to 64 vCPUs in 1 to 8 nodes that divide them)",
                g.vcpus, g.numa
            )));
        }
        if !(256..=65536).contains(&g.mem_mib) {
            return Err(bad(format!("[guests] mem_mib = {} (expected 256 to 65536)", g.mem_mib)));
        }
    }
    for s in &raw.scenarios {
        let what = |w: String| bad(format!("scenario {:?}: {w}", s.name));
        if !["counter", "rename", "rename-user"].contains(&s.workload.as_str()) {
            return Err(what(format!("workload {:?} (expected counter, rename or rename-user)", s.workload)));
        }
        if s.threads_per_cpu.is_empty() || s.threads_per_cpu.iter().any(|t| !(*t > 0.0 && *t <= 64.0)) {
            return Err(what("threads_per_cpu must be non-empty, each more than 0 and at most 64".into()));
        }
        if s.corunners_per_cpu.is_empty() || s.corunners_per_cpu.iter().any(|c| !(*c >= 0.0 && *c <= 16.0)) {
            return Err(what("corunners_per_cpu must be non-empty, each from 0 to 16".into()));
        }
        if !cs_block_valid(&s.cs_block) {
            return Err(what(format!(
                "cs_block {:?} (expected none, yield, sleep:MICROSECONDS with 1 to 1000000, write or fault)",
                s.cs_block
            )));
        }
        if s.cs_block != "none" && s.workload != "counter" {
            return Err(what("cs_block applies only to workload counter".into()));
        }
        if s.cs_lines > 4096 {
            return Err(what(format!("cs_lines = {} (at most 4096)", s.cs_lines)));
        }
        for n in &s.numa {
            emulated_nodes(n).map_err(what)?;
        }
        if s.numa.is_empty() || s.numa_policies.is_empty() {
            return Err(what("numa and numa_policies must be non-empty".into()));
        }
        distinct("threads_per_cpu", &s.threads_per_cpu, "each once").map_err(what)?;
        distinct("corunners_per_cpu", &s.corunners_per_cpu, "each once").map_err(what)?;
        distinct("numa", &s.numa, "each once").map_err(what)?;
        distinct("numa_policies", &s.numa_policies, "each once").map_err(what)?;
        if let Some(p) = s.numa_policies.iter().find(|p| !NUMA_POLICIES.contains(&p.as_str())) {
            return Err(what(format!("numa policy {p:?} (expected some of {})", NUMA_POLICIES.join(", "))));
        }
        if raw.guests.is_some() && (s.numa != real() || s.numa_policies != default_policy() || s.workload == "rename") {
            return Err(what(
                "with [guests], numa must be real, the memory policy default, and rename (the host \
                             kernel's directory lock) is not run"
                    .into(),
            ));
        }
    }
    Ok(LocksSpec {
        name: header.name,
        description: header.description,
        duration_s: raw.duration_s,
        repetitions: raw.repetitions,
        locks,
        scenarios: raw.scenarios,
        guests: raw.guests,
    })
}

/// Every run, repetition by repetition; within a repetition scenario by scenario, every configuration with the
/// locks side by side (so that slow drifts of the machine hit every lock alike). With `[guests]`, all that once per
/// number of guests (booted once for all its cases).
pub fn plan(spec: &LocksSpec) -> Vec<Case> {
    let counts = spec.guests.as_ref().map_or(vec![0], |g| g.counts.clone());
    counts.into_iter().flat_map(|guests| plan_on(spec, guests)).collect()
}

/// The cases of `plan` on `guests` guests (0: the host).
fn plan_on(spec: &LocksSpec, guests: u32) -> Vec<Case> {
    let mut cases = Vec::new();
    for repetition in 1..=spec.repetitions {
        for (i, s) in spec.scenarios.iter().enumerate() {
            let locks: Vec<String> = if s.workload == "rename" { vec!["kernel".into()] } else { spec.locks.clone() };
            for numa in &s.numa {
                for policy in &s.numa_policies {
                    for &corunners_per_cpu in &s.corunners_per_cpu {
                        for &threads_per_cpu in &s.threads_per_cpu {
                            for lock in &locks {
                                cases.push(Case {
                                    scenario: i,
                                    lock: lock.clone(),
                                    threads_per_cpu,
                                    corunners_per_cpu,
                                    numa: numa.clone(),
                                    policy: policy.clone(),
                                    repetition,
                                    guests,
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    cases
}

/// `count` × `cpus`, rounded, at least `min`.
pub fn per_cpu(count: f64, cpus: usize, min: u32) -> u32 {
    ((count * cpus as f64).round() as u32).max(min)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads a spec file as the CLI does.
    fn load(path: &Path) -> Result<LocksSpec, UsageError> {
        parse(path, &std::fs::read_to_string(path).unwrap())
    }

    fn write(text: &str) -> (lockstep_scratch::TempDir, std::path::PathBuf) {
        let dir = lockstep_scratch::tempdir().unwrap();
        let path = dir.path().join("l.toml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    /// The spec the integration test runs too.
    const SPEC: &str = include_str!("../../../../fixtures/specs/locks-small.toml");

    #[test]
    fn plan_covers_every_axis_and_rename_runs_once_per_configuration() {
        let (_d, path) = write(&SPEC.replace("duration_s = 0.2", "duration_s = 0.2\nrepetitions = 2"));
        let spec = load(&path).unwrap();
        let cases = plan(&spec);
        // counter: 2 numa × 1 policy × 2 corunners × 2 threads × 2 locks; rename: 1 policy × the kernel;
        // rename-user: 2 policies × 2 locks; all twice.
        assert_eq!(cases.len(), 2 * (2 * 2 * 2 * 2 + 1 + 2 * 2));
        assert!(cases.iter().filter(|c| c.scenario == 1).all(|c| c.lock == "kernel"));
        assert_eq!(cases.iter().filter(|c| c.repetition == 2).count(), cases.len() / 2);
        assert_eq!(cases[0].lock, "mcs");
        assert_eq!(cases[1].lock, "cna-pt");
    }

    #[test]
    fn bad_values_are_named() {
        for (from, to, says) in [
            ("\"cna-pt\"]", "\"cna-xx\"]", "lock \"cna-xx\""),
            ("\"cna-pt\"]", "\"mcs\"]", "locks names \"mcs\" twice"),
            ("name = \"rename-user\"", "name = \"rename\"", "[[scenarios]] names \"rename\" twice"),
            ("numa = [\"real\", \"emulated-2\"]", "numa = [\"real\", \"real\"]", "numa names \"real\" twice"),
            ("threads_per_cpu = [1, 2]", "threads_per_cpu = [2, 2]", "threads_per_cpu names 2.0 twice"),
            ("\"emulated-2\"", "\"emulated-1\"", "emulated-N"),
            ("\"interleave\"", "\"spread\"", "numa policy \"spread\""),
            ("workload = \"rename\"", "workload = \"move\"", "workload \"move\""),
            ("duration_s = 0.2", "duration_s = 0", "duration_s"),
            ("workload = \"counter\"", "workload = \"counter\"\ncs_block = \"sleep:0\"", "cs_block \"sleep:0\""),
            ("workload = \"rename\"", "workload = \"rename\"\ncs_block = \"yield\"", "only to workload counter"),
            ("cna-pt\"]\n", "cna-pt\"]\n[guests]\ncounts = [9]\n", "counts must be"),
            ("cna-pt\"]\n", "cna-pt\"]\n[guests]\ncounts = [2]\nvcpus = 3\nnuma = 2\n", "vcpus = 3"),
            ("cna-pt\"]\n", "cna-pt\"]\n[guests]\ncounts = [2]\n", "with [guests], numa must be real"),
        ] {
            let (_d, path) = write(&SPEC.replace(from, to));
            let err = load(&path).unwrap_err().to_string();
            assert!(err.contains(says), "{err}");
        }
    }

    #[test]
    fn emulated_map_splits_the_cpus_in_order() {
        assert_eq!(numa_map(&[0, 1, 2, 3], 2), "0:0,1;1:2,3");
        assert_eq!(numa_map(&[0, 1], 2), "0:0;1:1");
        assert_eq!(numa_map(&[0, 1, 2], 2), "0:0,1;1:2");
        assert_eq!(emulated_nodes("real"), Ok(None));
        assert_eq!(emulated_nodes("emulated-4"), Ok(Some(4)));
        assert_eq!(per_cpu(0.5, 2, 1), 1);
        assert_eq!(per_cpu(0.0, 2, 0), 0);
        assert_eq!(per_cpu(0.25, 2, 1), 1);
    }
}
