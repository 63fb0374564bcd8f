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
    /// The name users type (`p-only`, …).
    fn name(&self) -> &'static str;
    /// Eligible cores in the order to take them, for a request of `cpus` PUs (all eligible if `None`).
    fn order(&self, m: &Machine, cpus: Option<usize>) -> Result<CoreOrder, UsageError>;
}

/// Names of every placement policy, for help and error messages.
pub const POLICY_NAMES: [&str; 6] = ["p-only", "e-only", "mixed", "numa-local", "spread", "any"];

/// Looks a policy up by name.
pub fn policy(name: &str) -> Result<Box<dyn PlacementPolicy>, UsageError> {
    Ok(match name {
        "p-only" => Box::new(kinds::POnly),
        "e-only" => Box::new(kinds::EOnly),
        "mixed" => Box::new(kinds::Mixed),
        "numa-local" => Box::new(numa::NumaLocal),
        "spread" => Box::new(numa::Spread),
        "any" => Box::new(any::Any),
        other => {
            return Err(UsageError::new(format!(
                "unknown placement policy {other:?} (expected one of: {})",
                POLICY_NAMES.join(", ")
            )))
        }
    })
}

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

/// Places a job of `cpus` PUs (all the policy allows if `None`) with the policy named `name`.
pub fn place(m: &Machine, name: &str, cpus: Option<usize>) -> Result<Placement, UsageError> {
    let policy = policy(name)?;
    if cpus == Some(0) {
        return Err(UsageError::new("--cpus 0: a job needs at least one PU"));
    }
    let order = policy.order(m, cpus)?;
    let available: usize = order.cores.iter().map(|&c| m.core_list[c].pus.len()).sum();
    let wanted = cpus.unwrap_or(available);
    if wanted > available {
        return Err(UsageError::new(format!(
            "--cpus {wanted}: policy {} offers only {available} PU(s) on this topology",
            policy.name()
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
    Ok(Placement { policy: policy.name().to_string(), pus, mems, cores })
}

#[cfg(test)]
mod tests;
