//! Policies by core kind (the hybrid-CPU paper's container groups): `p-only` (Cp), `e-only` (Ce), `mixed` (Cm).

use super::kind::PlacementKind;
use super::policy::{CoreOrder, MemPolicy, PlacementPolicy};
use crate::error::UsageError;
use crate::topo::Machine;

/// Cores of the most performant kind.
pub struct POnly;
/// Cores of every other kind, E before LP-E.
pub struct EOnly;
/// Equal numbers of performance and efficiency cores, alternating P, E, P, E….
pub struct Mixed;

/// Cores whose kind index satisfies `keep`, ordered by kind (most performant first) then logical index.
fn cores_of(m: &Machine, keep: impl Fn(usize) -> bool) -> Vec<usize> {
    let mut cores: Vec<usize> = (0..m.core_list.len()).filter(|&c| keep(m.core_list[c].kind)).collect();
    cores.sort_by_key(|&c| m.core_list[c].kind);
    cores
}

fn need_two_kinds(m: &Machine, policy: PlacementKind) -> Result<(), UsageError> {
    if m.kinds.len() < 2 {
        return Err(UsageError::new(format!(
            "policy {policy} needs efficiency cores, but this topology has one core kind (try p-only or any)"
        )));
    }
    Ok(())
}

impl PlacementPolicy for POnly {
    fn order(&self, m: &Machine, _cpus: Option<usize>) -> Result<CoreOrder, UsageError> {
        Ok(CoreOrder { cores: cores_of(m, |k| k == 0), mems: MemPolicy::Local })
    }
}

impl PlacementPolicy for EOnly {
    fn order(&self, m: &Machine, _cpus: Option<usize>) -> Result<CoreOrder, UsageError> {
        need_two_kinds(m, PlacementKind::EOnly)?;
        Ok(CoreOrder { cores: cores_of(m, |k| k > 0), mems: MemPolicy::Local })
    }
}

impl PlacementPolicy for Mixed {
    /// Pairs the i-th performance core with the i-th efficiency core, as many pairs as the scarcer side has,
    /// so that any prefix of whole pairs holds as many cores of each side.
    fn order(&self, m: &Machine, _cpus: Option<usize>) -> Result<CoreOrder, UsageError> {
        need_two_kinds(m, PlacementKind::Mixed)?;
        let p = cores_of(m, |k| k == 0);
        let e = cores_of(m, |k| k > 0);
        let cores = p.iter().zip(&e).flat_map(|(&a, &b)| [a, b]).collect();
        Ok(CoreOrder { cores, mems: MemPolicy::Local })
    }
}
