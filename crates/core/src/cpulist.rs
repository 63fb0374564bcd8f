//! Linux cpulist notation (`0-3,8,10-11`), as used by `/sys/devices/system/cpu/online`,
//! `cpuset.cpus` and `Cpus_allowed_list`.

use std::collections::BTreeSet;
use std::fmt;

/// Indexes a cpulist may hold: below this.
pub const MAX_INDEX: usize = 1 << 16;

/// An ordered set of CPU (or NUMA node) OS indexes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CpuList(BTreeSet<usize>);

/// A string that is not valid cpulist notation.
#[derive(Debug, thiserror::Error)]
#[error("invalid cpu list {input:?}: {reason} (expected e.g. \"0-3,8\")")]
pub struct ParseError {
    input: String,
    reason: &'static str,
}

impl CpuList {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// The PUs online on this machine (`/sys/devices/system/cpu/online`); empty when unreadable.
    pub fn online() -> Self {
        std::fs::read_to_string("/sys/devices/system/cpu/online")
            .ok()
            .and_then(|t| Self::parse(t.trim()).ok())
            .unwrap_or_default()
    }

    /// Parses cpulist notation; an empty (or all-whitespace) string is the empty list. Indexes are below
    /// [`MAX_INDEX`] (Linux's own limit on CPUs is far lower), so that no list can ask for billions of entries.
    pub fn parse(input: &str) -> Result<Self, ParseError> {
        let err = |reason| ParseError { input: input.to_string(), reason };
        let mut set = BTreeSet::new();
        for part in input.trim().split(',').filter(|p| !p.is_empty()) {
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (a, b),
                None => (part, part),
            };
            let lo: usize = lo.trim().parse().map_err(|_| err("not a number"))?;
            let hi: usize = hi.trim().parse().map_err(|_| err("not a number"))?;
            if hi < lo {
                return Err(err("range end before its start"));
            }
            if hi >= MAX_INDEX {
                return Err(err("index too large (CPU and node numbers are below 65536)"));
            }
            set.extend(lo..=hi);
        }
        Ok(Self(set))
    }

    /// Adds one index.
    pub fn insert(&mut self, idx: usize) {
        self.0.insert(idx);
    }

    /// Whether `idx` is in the list.
    pub fn contains(&self, idx: usize) -> bool {
        self.0.contains(&idx)
    }

    /// Number of indexes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Indexes in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().copied()
    }

    /// Whether every index of `self` is also in `other`.
    pub fn is_subset(&self, other: &CpuList) -> bool {
        self.0.is_subset(&other.0)
    }

    /// Whether `self` and `other` share an index.
    pub fn intersects(&self, other: &CpuList) -> bool {
        !self.0.is_disjoint(&other.0)
    }
}

impl FromIterator<usize> for CpuList {
    fn from_iter<I: IntoIterator<Item = usize>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut iter = self.0.iter().copied().peekable();
        let mut first = true;
        while let Some(start) = iter.next() {
            let mut end = start;
            while iter.peek() == Some(&(end + 1)) {
                end = iter.next().unwrap_or(end);
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for s in ["", "0", "0-11,16", "0,2,4", "1-3,5-7,9"] {
            assert_eq!(CpuList::parse(s).unwrap().to_string(), s);
        }
        assert_eq!(CpuList::parse("3,1,2").unwrap().to_string(), "1-3");
        assert_eq!(CpuList::parse("0-1\n").unwrap().to_string(), "0-1");
    }

    #[test]
    fn rejects_garbage() {
        assert!(CpuList::parse("a").is_err());
        assert!(CpuList::parse("3-1").is_err());
        assert!(CpuList::parse("1-").is_err());
    }

    #[test]
    fn a_range_of_billions_is_refused_at_once() {
        // Found by fuzzing: the list was expanded index by index.
        let e = CpuList::parse("0-11169881698").unwrap_err();
        assert!(e.to_string().contains("too large"), "{e}");
        assert!(CpuList::parse("0-65535").is_ok());
    }
}
