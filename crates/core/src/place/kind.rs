//! Placement policies as users name them (`--place`, `--policy`, experiment specs).

use crate::error::UsageError;
use crate::names::Names;

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
}

impl std::str::FromStr for PlacementKind {
    type Err = UsageError;

    fn from_str(name: &str) -> Result<Self, UsageError> {
        PLACEMENTS.parse_or_usage("placement policy", name)
    }
}

crate::display_by_name!(PlacementKind => PLACEMENTS);
