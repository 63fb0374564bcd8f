//! Rows of the Ousterhout matrix: jobs that share PUs get different rows. A row pinned from outside (`--row`,
//! a Slurm prolog) is kept as given, so that agents on different nodes agree; the others are placed greedily in
//! the order of a stable hash of their names, each in the lowest row no PU-sharing job holds.

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
    /// Job name (the hash key).
    pub name: &'a str,
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
    order.sort_by_key(|&i| (stable_hash(entries[i].name), entries[i].name));
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
