//! Rows of the Ousterhout matrix.
//!
//! On one node, jobs that share PUs get different rows. A row pinned from outside (`--row`) is kept as given; the
//! others are placed greedily in the order of a stable hash of their names, each in the lowest row no PU-sharing
//! job holds. Each set of jobs joined by shared PUs cycles through its own rows ([`cycles`]): slot `k` favours the
//! job of row `k mod c`, `c` the set's count, so a set of two beside a set of three is sliced in every slot. A set
//! with a row given from outside cycles through the node's rows, as every node of its jobs is told to.
//!
//! Across nodes a job has a [`Place`] instead: row `r` of period `P` (a power of two), favoured in the slots `k`
//! with `k mod P == r` on every node, whatever else each node runs. The controller gives places such that jobs
//! sharing a node have disjoint slots (docs/policies/gang.md); a change of place takes effect at a wall-clock
//! time ([`Schedule`]) that every node of the job reads alike.

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuList;
use crate::error::UsageError;

/// Rows a node can have: a row given from outside must be below it. (With more jobs sharing PUs than this, each
/// would run for less than a thousandth of the time anyway.)
pub const MAX_ROWS: u32 = 1024;

/// Checks a row given from outside (`--row`, a request, a Slurm prolog).
pub fn check(row: Option<u32>) -> Result<(), UsageError> {
    match row {
        Some(r) if r >= MAX_ROWS => {
            Err(UsageError::new(format!("row {r} is out of range (expected 0 to {})", MAX_ROWS - 1)))
        }
        _ => Ok(()),
    }
}

/// One job to place in a row.
#[derive(Clone, Copy, Debug)]
pub struct Entry<'a> {
    /// The job (its text, `lu` or `slurm-42`, is the hash key).
    pub name: &'a crate::ident::JobKey,
    /// PUs the job may run on.
    pub pus: &'a CpuList,
    /// A row given from outside.
    pub pinned: Option<u32>,
}

/// FNV-1a of the name: stable across runs, machines and builds (unlike `std`'s hasher).
pub fn stable_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Assigns rows; returns each entry's row (in input order) and the number of rows.
pub fn assign(entries: &[Entry<'_>]) -> (Vec<u32>, u32) {
    // A pinned row out of range (a store written before rows were checked) counts as no pin.
    let mut rows: Vec<Option<u32>> = entries.iter().map(|e| e.pinned.filter(|&r| r < MAX_ROWS)).collect();
    let mut order: Vec<usize> = (0..entries.len()).filter(|&i| rows[i].is_none()).collect();
    let names: Vec<String> = entries.iter().map(|e| e.name.to_string()).collect();
    order.sort_by_key(|&i| (stable_hash(&names[i]), &names[i]));
    for i in order {
        let taken: Vec<u32> = (0..entries.len())
            .filter(|&j| j != i && entries[j].pus.intersects(entries[i].pus))
            .filter_map(|j| rows[j])
            .collect();
        // Among the `taken.len() + 1` lowest rows one is free.
        rows[i] = (0..=taken.len() as u32).find(|r| !taken.contains(r));
    }
    let rows: Vec<u32> = rows.into_iter().map(|r| r.expect("every row assigned")).collect();
    let count = rows.iter().max().map_or(1, |m| m + 1);
    (rows, count)
}

/// Each entry's cycle, in input order, `rows` and `count` as [`assign`] gives them: one more than the highest row
/// among the entries joined to it by shared PUs, directly or through others (its set). Two sets that share no PU
/// do not wait on each other's rows: with one cycle for the node, a set of two beside a set of three would have no
/// favoured job, and run unsliced, one slot in three. A set that holds a row given from outside cycles through
/// the node's `count`, as before sets had cycles of their own: rows given to a job for all its nodes agree across
/// them where the nodes' counts do, whatever each node's jobs share.
pub fn cycles(entries: &[Entry<'_>], rows: &[u32], count: u32) -> Vec<u32> {
    let pus: Vec<&CpuList> = entries.iter().map(|e| e.pus).collect();
    let mut out = vec![1; entries.len()];
    for set in super::sharing::sets(&pus) {
        // As in `assign`, a row out of range counts as none given.
        let given = set.iter().any(|&i| entries[i].pinned.is_some_and(|r| r < MAX_ROWS));
        let cycle = if given { count } else { set.iter().map(|&i| rows[i] + 1).max().unwrap_or(1) };
        for i in set {
            out[i] = cycle;
        }
    }
    out
}

/// A job's place in the cluster-wide matrix: favoured in the slots `k` with `k mod period == row`. The period is a
/// power of two, so two places share slots exactly when their rows agree modulo the smaller period.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Place {
    /// The row, below `period`.
    pub row: u32,
    /// Slots in the place's cycle: a power of two up to [`MAX_ROWS`].
    pub period: u32,
}

impl Place {
    /// The whole cycle: every slot.
    pub const ALL: Place = Place { row: 0, period: 1 };

    /// Whether slot `k` is the place's.
    pub fn holds(self, k: u64) -> bool {
        k % u64::from(self.period) == u64::from(self.row)
    }

    /// Whether the two places share a slot.
    pub fn overlaps(self, other: Place) -> bool {
        let m = self.period.min(other.period);
        self.row % m == other.row % m
    }

    /// The share of slots the place holds.
    pub fn share(self) -> f64 {
        1.0 / f64::from(self.period)
    }

    /// The two halves of the place (period doubled).
    pub fn halves(self) -> [Place; 2] {
        let period = self.period * 2;
        [Place { row: self.row, period }, Place { row: self.row + self.period, period }]
    }

    /// The place of which this one is a half, unless it is the whole cycle.
    pub fn parent(self) -> Option<Place> {
        (self.period > 1).then(|| Place { row: self.row % (self.period / 2), period: self.period / 2 })
    }

    /// The other half of the parent.
    pub fn sibling(self) -> Option<Place> {
        let parent = self.parent()?;
        Some(Place { row: (self.row + parent.period) % self.period, period: self.period })
    }
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.row, self.period)
    }
}

impl std::str::FromStr for Place {
    type Err = UsageError;

    /// `ROW/PERIOD`, the period a power of two up to [`MAX_ROWS`], the row below it.
    fn from_str(text: &str) -> Result<Self, UsageError> {
        let bad = |why: &str| UsageError::new(format!("bad place {text:?} ({why}; expected ROW/PERIOD, e.g. 1/4)"));
        let (row, period) = text.split_once('/').ok_or_else(|| bad("no '/'"))?;
        let row: u32 = row.parse().map_err(|_| bad("the row is not a number"))?;
        let period: u32 = period.parse().map_err(|_| bad("the period is not a number"))?;
        if !period.is_power_of_two() || period > MAX_ROWS {
            return Err(bad(&format!("the period must be a power of two up to {MAX_ROWS}")));
        }
        if row >= period {
            return Err(bad("the row must be below the period"));
        }
        Ok(Place { row, period })
    }
}

// Places arrive as text (`ROW/PERIOD`) and are checked like any other.
crate::serde_by_text!(Place);

/// A job's place and its pending change: `place` from `from_ms` (milliseconds since the Unix epoch) on, `before`
/// until then. Every node of the job switches at the first slot that starts at or after `from_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    /// The place from `from_ms` on.
    pub place: Place,
    /// When `place` takes effect (0: always).
    pub from_ms: u64,
    /// The place until `from_ms`; `None` when the job had none (it arrived with this change).
    pub before: Option<Place>,
}

impl Schedule {
    /// The place in force at `t_ms` (a job with no place before its first one has the whole cycle then, which
    /// no job's disjointness depends on: it overlaps whoever runs, as under `cfs`).
    pub fn at(&self, t_ms: u64) -> Place {
        if t_ms >= self.from_ms {
            self.place
        } else {
            self.before.unwrap_or(Place::ALL)
        }
    }
}
