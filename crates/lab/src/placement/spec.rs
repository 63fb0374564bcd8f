//! The spec of placement experiments, read and checked: what [`super`] runs and reports.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::harness::spec::raw_spec;
use crate::harness::spec::{Progress, RanksIn, PROGRESS, RANKS_IN};
use lockstep_core::error::UsageError;
use lockstep_core::place::{place, PlacementKind};
use lockstep_core::topo::Machine;

/// S000's CG class D times, P-only 446.47 s and E-only 880.47 s: how much slower its E cores ran the job.
pub const PAPER_E_SPEED: f64 = 446.47 / 880.47;

/// The bandwidth period of the emulation's limits unless the spec names one: the kernel's default. Measured with
/// NPB CG class B on 2 ranks (docs/experiments.md): a 10 ms period let one of two E ranks sharing a limit take
/// most of each period's quota and left e-only 4× slower than p-only, against 1.9× with 100 ms.
pub const DEFAULT_PERIOD: Duration = Duration::from_millis(100);

/// A parsed, validated placement spec.
#[derive(Clone, Debug)]
pub struct PlacementSpec {
    /// Experiment name.
    pub name: String,
    /// What it reproduces.
    pub description: String,
    /// MPI ranks (or benchmark copies) per job, one PU each.
    pub ranks: u32,
    /// Repetitions of every case.
    pub repetitions: u32,
    /// Placement policies to compare.
    pub policies: Vec<PlacementKind>,
    /// Where ranks run: bare processes, podman or Charliecloud containers.
    pub ranks_in: Vec<RanksIn>,
    /// MPI progress mode of the ranks.
    pub progress: Progress,
    /// Workloads by name.
    pub workloads: BTreeMap<String, Workload>,
    /// The hybrid topology the placements are chosen on when this machine has one core kind (read and checked
    /// with the spec).
    pub emulate_topology: Machine,
    /// Speed of every slower kind relative to the fastest, for the bandwidth limit that emulates it.
    pub e_speed: f64,
    /// The bandwidth period of that limit, in microseconds.
    pub period_us: u64,
}

/// One workload: a program of `build/bin/` run as `ranks` copies under `mpirun`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Program and arguments, e.g. `["cg", "--class", "B"]` or `["corebench", "--mode", "single"]`.
    pub command: Vec<String>,
}

raw_spec! {
    struct Raw {
        #[serde(default = "crate::harness::spec::two")]
        ranks: u32,
        #[serde(default = "crate::harness::spec::one")]
        repetitions: u32,
        policies: Vec<String>,
        ranks_in: Vec<String>,
        #[serde(default = "busy")]
        progress: String,
        workloads: BTreeMap<String, Workload>,
        emulate: RawEmulate,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEmulate {
    topology: PathBuf,
    e_speed: Option<f64>,
    period: Option<String>,
}

fn busy() -> String {
    "busy".into()
}

/// Validates a placement spec, `text` as read from `path` (which messages name; the emulation topology is
/// relative to its directory); every problem is one usage error. Every policy is placed on the emulation
/// topology here, so that one it cannot satisfy stops the experiment before it starts.
pub fn parse(path: &Path, text: &str) -> Result<PlacementSpec, UsageError> {
    let bad = crate::harness::spec::bad(path);
    let (header, raw) = crate::harness::spec::read::<Raw>(path, text)?;
    crate::harness::spec::check_ranks(raw.ranks).map_err(bad)?;
    crate::harness::spec::check_repetitions(raw.repetitions, 1).map_err(bad)?;
    if raw.policies.is_empty() || raw.ranks_in.is_empty() || raw.workloads.is_empty() {
        return Err(bad("policies, ranks_in and [workloads] must all be non-empty".into()));
    }
    let policies = raw
        .policies
        .iter()
        .map(|p| p.parse::<PlacementKind>().map_err(|e| bad(e.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    crate::harness::spec::distinct("policies", &raw.policies, "each placement policy once").map_err(bad)?;
    crate::harness::spec::distinct("ranks_in", &raw.ranks_in, "each place ranks run once").map_err(bad)?;
    let mut ranks_in = Vec::new();
    for r in &raw.ranks_in {
        match RANKS_IN.parse(r) {
            Some(RanksIn::Slurm) | None => {
                return Err(bad(format!("ranks_in {r:?} (expected process, container or charliecloud)")))
            }
            Some(r) => ranks_in.push(r),
        }
    }
    let progress = PROGRESS
        .parse(&raw.progress)
        .ok_or_else(|| bad(format!("progress {:?} (expected yield or busy)", raw.progress)))?;
    for (name, w) in &raw.workloads {
        crate::harness::spec::check_command(name, &w.command).map_err(bad)?;
    }
    let e_speed = raw.emulate.e_speed.unwrap_or(PAPER_E_SPEED);
    if !(e_speed > 0.0 && e_speed <= 1.0) {
        return Err(bad(format!("emulate.e_speed = {e_speed} (expected a speed ratio above 0, at most 1)")));
    }
    let period = match &raw.emulate.period {
        None => DEFAULT_PERIOD,
        Some(p) => {
            lockstep_core::duration::within("emulate.period", p, Duration::from_millis(1)..=Duration::from_secs(1))
                .map_err(|e| bad(e.to_string()))?
        }
    };
    let topology = path.parent().unwrap_or(Path::new(".")).join(&raw.emulate.topology);
    let m = Machine::load(Some(&topology))
        .map_err(|e| bad(format!("emulate.topology {}: {e:#}", raw.emulate.topology.display())))?;
    if m.kinds.len() < 2 {
        return Err(bad(format!(
            "emulate.topology {} has one core kind (expected a hybrid CPU's)",
            topology.display()
        )));
    }
    for &p in &policies {
        place(&m, p, Some(raw.ranks as usize))
            .map_err(|e| bad(format!("policy {p} on {}: {e}", topology.display())))?;
    }
    Ok(PlacementSpec {
        name: header.name,
        description: header.description,
        ranks: raw.ranks,
        repetitions: raw.repetitions,
        policies,
        ranks_in,
        progress,
        workloads: raw.workloads,
        emulate_topology: m,
        e_speed,
        period_us: period.as_micros() as u64,
    })
}

/// Where one rank runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Seat {
    /// The PU of this machine it is pinned to.
    pub pu: usize,
    /// The label of its core kind (`P`, `E`, `LP-E`).
    pub kind: String,
    /// Its CPU bandwidth limit in CPUs (emulated slower kinds), `None` for full speed.
    pub limit: Option<f64>,
}

/// How the core kinds are had on this machine.
#[derive(Clone, Debug)]
pub enum Hybrid {
    /// The machine's own kinds.
    Native(Machine),
    /// Kinds of another topology mapped onto this machine's PUs (`pus`, one per core first), slower kinds at
    /// `e_speed`.
    Emulated {
        /// The hybrid topology.
        topology: Machine,
        /// This machine's PUs in the order they stand in for the topology's.
        pus: Vec<usize>,
        /// Speed of the slower kinds.
        e_speed: f64,
        /// The bandwidth period of their limit, in microseconds.
        period_us: u64,
    },
}

impl Hybrid {
    /// Native when `live` has several core kinds, emulated over `live`'s PUs otherwise.
    pub fn new(spec: &PlacementSpec, live: Machine) -> anyhow::Result<Self> {
        if live.kinds.len() > 1 {
            return Ok(Self::Native(live));
        }
        let rounds = live.core_list.iter().map(|c| c.pus.len()).max().unwrap_or(0);
        let pus: Vec<usize> =
            (0..rounds).flat_map(|i| live.core_list.iter().filter_map(move |c| c.pus.get(i).copied())).collect();
        if pus.len() < spec.ranks as usize {
            return Err(UsageError::new(format!(
                "emulated hybrid placement needs a PU per rank: ranks = {}, this machine has {} PU(s)",
                spec.ranks,
                pus.len()
            ))
            .into());
        }
        Ok(Self::Emulated {
            topology: spec.emulate_topology.clone(),
            pus,
            e_speed: spec.e_speed,
            period_us: spec.period_us,
        })
    }

    /// The label reports carry on every row: `native`, or `emulated: <topology> kinds over PUs <list>, slower
    /// kinds at <speed> of P (cpu bandwidth, <period> ms period)`.
    pub fn label(&self) -> String {
        match self {
            Self::Native(_) => "native".into(),
            Self::Emulated { topology, pus, e_speed, period_us } => {
                let name = Path::new(&topology.source)
                    .file_name()
                    .map_or_else(|| topology.source.clone(), |n| n.to_string_lossy().into_owned());
                let list: Vec<String> = pus.iter().map(usize::to_string).collect();
                format!(
                    "emulated: {name} kinds over PUs {}, slower kinds at {e_speed:.3} of P (cpu bandwidth, {} ms \
                     period)",
                    list.join(","),
                    *period_us as f64 / 1000.0
                )
            }
        }
    }

    /// Each rank's seat under `policy`: the placement's PUs in order, rank `i` on the `i`-th.
    pub fn seats(&self, policy: PlacementKind, ranks: u32) -> anyhow::Result<Vec<Seat>> {
        let m = match self {
            Self::Native(m) | Self::Emulated { topology: m, .. } => m,
        };
        let placement = place(m, policy, Some(ranks as usize))?;
        let kind_of = |pu: usize| m.core_list.iter().find(|c| c.pus.contains(&pu)).map_or(0, |c| c.kind);
        Ok(placement
            .pus
            .iter()
            .enumerate()
            .map(|(i, pu)| {
                let kind = kind_of(pu);
                match self {
                    Self::Native(_) => Seat { pu, kind: m.kinds[kind].label.clone(), limit: None },
                    Self::Emulated { pus, e_speed, .. } => {
                        Seat { pu: pus[i], kind: m.kinds[kind].label.clone(), limit: (kind > 0).then_some(*e_speed) }
                    }
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/topology").join(name)
    }

    const SPEC: &str = r#"kind = "placement"
name = "pl"
policies = ["p-only", "mixed", "e-only"]
ranks_in = ["process", "container"]
[workloads.cg]
command = ["cg", "--class", "S"]
[emulate]
topology = "nvidia-gb10.xml"
"#;

    fn parse_in_fixtures(text: &str) -> Result<PlacementSpec, String> {
        parse(&fixture("spec.toml"), text).map_err(|e| e.to_string())
    }

    /// A machine of one kind: the first `n` cores (2 PUs each) of a Xeon.
    fn one_kind(n: usize) -> Machine {
        let mut m = Machine::load(Some(&fixture("xeon-2numa-24pu.xml"))).unwrap();
        m.core_list.truncate(n);
        m
    }

    #[test]
    fn emulated_seats_map_the_topologys_kinds_onto_this_machines_pus() {
        let spec = parse_in_fixtures(SPEC).unwrap();
        assert!((spec.e_speed - PAPER_E_SPEED).abs() < 1e-12);
        assert_eq!(spec.progress, Progress::Busy);
        let live = one_kind(4);
        let first: Vec<usize> = live.core_list.iter().map(|c| c.pus[0]).collect();
        let hybrid = Hybrid::new(&spec, live).unwrap();
        assert!(hybrid.label().starts_with("emulated: nvidia-gb10.xml kinds over PUs "), "{}", hybrid.label());
        let seats = |p: &str| hybrid.seats(p.parse().unwrap(), 2).unwrap();
        let p = seats("p-only");
        assert!(p.iter().all(|s| s.kind == "P" && s.limit.is_none()));
        let e = seats("e-only");
        assert!(e.iter().all(|s| s.kind == "E" && s.limit == Some(PAPER_E_SPEED)));
        let mixed = seats("mixed");
        let mut kinds: Vec<&str> = mixed.iter().map(|s| s.kind.as_str()).collect();
        kinds.sort_unstable();
        assert_eq!(kinds, ["E", "P"]);
        for seats in [p, e, mixed] {
            // One core per rank, the same PUs of this machine whatever the policy.
            assert_eq!(seats.iter().map(|s| s.pu).collect::<Vec<_>>(), first[..2]);
        }
    }

    #[test]
    fn a_hybrid_machine_is_used_as_it_is() {
        let spec = parse_in_fixtures(SPEC).unwrap();
        let rpl = Machine::load(Some(&fixture("intel-raptorlake-i7-1370p.xml"))).unwrap();
        let hybrid = Hybrid::new(&spec, rpl).unwrap();
        assert_eq!(hybrid.label(), "native");
        let e = hybrid.seats("e-only".parse().unwrap(), 2).unwrap();
        assert_eq!(e, [12, 13].map(|pu| Seat { pu, kind: "E".into(), limit: None }));
    }

    #[test]
    fn too_few_pus_to_emulate_is_a_usage_error() {
        let spec = parse_in_fixtures(&SPEC.replace("kind = ", "ranks = 4\nkind = ")).unwrap();
        let err = Hybrid::new(&spec, one_kind(1)).unwrap_err();
        assert!(err.to_string().contains("needs a PU per rank: ranks = 4"), "{err}");
    }

    #[test]
    fn bad_specs_are_one_clear_error() {
        for (change, expected) in [
            (("nvidia-gb10.xml", "xeon-2numa-24pu.xml"), "has one core kind"),
            (("nvidia-gb10.xml", "missing.xml"), "emulate.topology missing.xml"),
            (("\"e-only\"]", "\"e-only\", \"fastest\"]"), "fastest"),
            (("\"container\"]", "\"slurm\"]"), "expected process, container or charliecloud"),
            (("[emulate]", "[emulate]\ne_speed = 1.5"), "e_speed = 1.5"),
            (("[emulate]", "[emulate]\nperiod = \"2s\""), "emulate.period \"2s\""),
            (("kind = ", "ranks = 32\nkind = "), "ranks = 32"),
            (("[workloads.cg]", "[workloads.cg]\nrepeat = 2"), "repeat"),
        ] {
            let err = parse_in_fixtures(&SPEC.replace(change.0, change.1)).unwrap_err();
            assert!(err.contains(expected), "{change:?}: {err}");
            assert!(!err.contains('\n'), "one line: {err}");
        }
    }
}
