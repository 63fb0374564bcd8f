//! Placement policies: turn (topology, request) into the PUs and memory nodes of a job.
//!
//! Every policy orders the machine's cores (and may restrict which are eligible); the common part then takes
//! whole cores in that order until the request is met, so a job never shares a core with another placement
//! unless it asked for fewer PUs than a core has. Without `--cpus` a policy takes every eligible core.

mod any;
mod kind;
mod kinds;
mod numa;
mod policy;

pub use kind::{PlacementKind, PLACEMENTS};
pub use policy::{CoreOrder, MemPolicy, PlacementPolicy};

use serde::Serialize;

use crate::cpulist::CpuList;
use crate::error::UsageError;
use crate::topo::Machine;

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
    let policy = policy_of(kind);
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

/// The core order of placement policy `kind`.
fn policy_of(kind: PlacementKind) -> Box<dyn PlacementPolicy> {
    match kind {
        PlacementKind::POnly => Box::new(kinds::POnly),
        PlacementKind::EOnly => Box::new(kinds::EOnly),
        PlacementKind::Mixed => Box::new(kinds::Mixed),
        PlacementKind::NumaLocal => Box::new(numa::NumaLocal),
        PlacementKind::Spread => Box::new(numa::Spread),
        PlacementKind::Any => Box::new(any::Any),
    }
}

#[cfg(test)]
mod tests;
