//! `any`: every core of the machine, in hwloc's logical order; memory unbound.

use super::policy::{CoreOrder, MemPolicy, PlacementPolicy};
use crate::error::UsageError;
use crate::topo::Machine;

/// The `any` policy.
pub struct Any;

impl PlacementPolicy for Any {
    fn order(&self, m: &Machine, _cpus: Option<usize>) -> Result<CoreOrder, UsageError> {
        Ok(CoreOrder { cores: (0..m.core_list.len()).collect(), mems: MemPolicy::All })
    }
}
