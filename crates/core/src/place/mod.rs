//! Placement policies: turn (topology, request) into the PUs and memory nodes of a job.
//!
//! Every policy orders the machine's cores (and may restrict which are eligible); the common part then takes
//! whole cores in that order until the request is met, so a job never shares a core with another placement
//! unless it asked for fewer PUs than a core has. Without `--cpus` a policy takes every eligible core.

mod any;
mod kinds;
mod numa;

use serde::Serialize;

use crate::cpulist::CpuList;
use crate::error::UsageError;
use crate::names::Names;
use crate::topo::Machine;

/// How a policy binds memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemPolicy {
    /// The NUMA nodes local to the chosen PUs.
    Local,
    /// Every NUMA node of the machine.
    All,
}

/// What a placement policy hands to the common part.
#[derive(Clone, Debug)]
pub struct CoreOrder {
    /// Indexes into [`Machine::core_list`], in the order they are to be taken.
    pub cores: Vec<usize>,
    /// Memory binding.
    pub mems: MemPolicy,
}

/// One placement policy.
pub trait PlacementPolicy {
    /// Eligible cores in the order to take them, for a request of `cpus` PUs (all eligible if `None`).
    fn order(&self, m: &Machine, cpus: Option<usize>) -> Result<CoreOrder, UsageError>;
}

/// A placement policy as users name it (`--place`, `--policy`, experiment specs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlacementKind {
    /// All PUs of the most performant core kind.
    POnly,
    /// The other kinds, E before LP-E.
    EOnly,
    /// Equal numbers of P cores and efficiency cores.
    Mixed,
    /// All PUs of one NUMA node.
    NumaLocal,
    /// Cores round-robin over NUMA nodes.
    Spread,
    /// Every PU.
    Any,
}

/// Every placement policy's name.
pub const PLACEMENTS: Names<PlacementKind> = Names(&[
    ("p-only", PlacementKind::POnly),
    ("e-only", PlacementKind::EOnly),
    ("mixed", PlacementKind::Mixed),
    ("numa-local", PlacementKind::NumaLocal),
    ("spread", PlacementKind::Spread),
    ("any", PlacementKind::Any),
]);

impl PlacementKind {
    /// The name users type.
    pub fn name(self) -> &'static str {
        PLACEMENTS.name(self)
    }

    /// The policy's core order.
    fn policy(self) -> Box<dyn PlacementPolicy> {
        match self {
            Self::POnly => Box::new(kinds::POnly),
            Self::EOnly => Box::new(kinds::EOnly),
            Self::Mixed => Box::new(kinds::Mixed),
            Self::NumaLocal => Box::new(numa::NumaLocal),
            Self::Spread => Box::new(numa::Spread),
            Self::Any => Box::new(any::Any),
        }
    }
}

impl std::str::FromStr for PlacementKind {
    type Err = UsageError;

    fn from_str(name: &str) -> Result<Self, UsageError> {
        PLACEMENTS.parse_or_usage("placement policy", name)
    }
}

crate::display_by_name!(PlacementKind => PLACEMENTS);

/// The PUs and memory nodes a job gets.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Placement {
    /// Policy name.
    pub policy: String,
    /// PUs, as a cpulist.
    #[serde(serialize_with = "as_string")]
    pub pus: CpuList,
    /// NUMA nodes for memory, as a cpulist of node OS indexes.
    #[serde(serialize_with = "as_string")]
    pub mems: CpuList,
    /// Number of distinct cores the PUs belong to.
    pub cores: usize,
}

fn as_string<S: serde::Serializer>(list: &CpuList, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(list)
}

/// Places a job of `cpus` PUs (all the policy allows if `None`) with policy `kind`.
pub fn place(m: &Machine, kind: PlacementKind, cpus: Option<usize>) -> Result<Placement, UsageError> {
    let policy = kind.policy();
    if cpus == Some(0) {
        return Err(UsageError::new("--cpus 0: a job needs at least one PU"));
    }
    let order = policy.order(m, cpus)?;
    let available: usize = order.cores.iter().map(|&c| m.core_list[c].pus.len()).sum();
    let wanted = cpus.unwrap_or(available);
    if wanted > available {
        return Err(UsageError::new(format!(
            "--cpus {wanted}: policy {kind} offers only {available} PU(s) on this topology"
        )));
    }
    let mut pus = CpuList::new();
    let mut cores = 0;
    for &c in &order.cores {
        if pus.len() == wanted {
            break;
        }
        cores += 1;
        for &pu in m.core_list[c].pus.iter().take(wanted - pus.len()) {
            pus.insert(pu);
        }
    }
    let mems = match order.mems {
        MemPolicy::All => m.numa.iter().map(|n| n.os_index).collect(),
        MemPolicy::Local => m.numa.iter().filter(|n| n.pus.intersects(&pus)).map(|n| n.os_index).collect(),
    };
    Ok(Placement { policy: kind.name().to_string(), pus, mems, cores })
}

#[cfg(test)]
mod tests;
