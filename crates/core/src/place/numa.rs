//! Policies by NUMA node: `numa-local` (one node, memory bound to it) and `spread` (round-robin over nodes).

use super::policy::{CoreOrder, MemPolicy, PlacementPolicy};
use crate::error::UsageError;
use crate::topo::Machine;

/// All PUs from one NUMA node: the first node (by OS index) with enough PUs.
pub struct NumaLocal;
/// Cores taken round-robin over the NUMA nodes (first core of each node, then the second…).
pub struct Spread;

/// Cores of each NUMA node (in the order of [`Machine::numa`]), each list in logical order.
fn cores_by_node(m: &Machine) -> Vec<Vec<usize>> {
    let mut by_node = vec![Vec::new(); m.numa.len().max(1)];
    for (i, core) in m.core_list.iter().enumerate() {
        by_node[core.numa.unwrap_or(0)].push(i);
    }
    by_node
}

fn pus_of(m: &Machine, cores: &[usize]) -> usize {
    cores.iter().map(|&c| m.core_list[c].pus.len()).sum()
}

impl PlacementPolicy for NumaLocal {
    fn order(&self, m: &Machine, cpus: Option<usize>) -> Result<CoreOrder, UsageError> {
        let by_node = cores_by_node(m);
        let wanted = cpus.unwrap_or(1);
        let cores = by_node.iter().find(|cores| pus_of(m, cores) >= wanted).cloned().ok_or_else(|| {
            let largest = by_node.iter().map(|c| pus_of(m, c)).max().unwrap_or(0);
            UsageError::new(format!(
                "--cpus {wanted}: policy numa-local needs one NUMA node with {wanted} PU(s), the largest has {largest}"
            ))
        })?;
        Ok(CoreOrder { cores, mems: MemPolicy::Local })
    }
}

impl PlacementPolicy for Spread {
    fn order(&self, m: &Machine, _cpus: Option<usize>) -> Result<CoreOrder, UsageError> {
        let by_node = cores_by_node(m);
        let depth = by_node.iter().map(Vec::len).max().unwrap_or(0);
        let cores = (0..depth).flat_map(|i| by_node.iter().filter_map(move |node| node.get(i).copied())).collect();
        Ok(CoreOrder { cores, mems: MemPolicy::Local })
    }
}
