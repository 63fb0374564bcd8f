//! What a placement policy is: an order of the machine's cores to take ([`CoreOrder`]), and how memory binds.

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
    /// Eligible cores in the order to take them, for a request of `cpus` PUs (all eligible if `None`).
    fn order(&self, m: &Machine, cpus: Option<usize>) -> Result<CoreOrder, UsageError>;
}
