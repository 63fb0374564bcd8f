//! Slurm hostlist expressions (`n[1-3,7],gpu01`, `rack[1-2]-n[01-04]`) expanded to host names, the way
//! `scontrol show hostnames` does.

use lockstep_core::error::UsageError;

/// Most host names one expression may expand to (Slurm's largest clusters have tens of thousands of nodes).
pub const MAX_HOSTS: usize = 1 << 16;

/// Expands a hostlist expression; ranges keep their zero padding (`n[08-10]` → n08 n09 n10).
pub fn expand(list: &str) -> Result<Vec<String>, UsageError> {
    let bad = |why: &str| UsageError::new(format!("bad hostlist {list:?}: {why} (expected e.g. n[1-4,7],login1)"));
    let mut hosts = Vec::new();
    for item in split_top(list).map_err(&bad)? {
        if item.is_empty() {
            return Err(bad("empty host name"));
        }
        let mut names = vec![String::new()];
        let mut rest = item;
        while let Some(open) = rest.find('[') {
            let close = rest[open..].find(']').ok_or_else(|| bad("unclosed '['"))? + open;
            let prefix = &rest[..open];
            let mut next = Vec::new();
            let suffixes = ranges(&rest[open + 1..close]).ok_or_else(|| bad("bad range"))?;
            if names.len().saturating_mul(suffixes.len()) + hosts.len() > MAX_HOSTS {
                return Err(bad(&format!("more than {MAX_HOSTS} hosts")));
            }
            for n in &names {
                for s in &suffixes {
                    next.push(format!("{n}{prefix}{s}"));
                }
            }
            names = next;
            rest = &rest[close + 1..];
        }
        if rest.contains(']') {
            return Err(bad("unmatched ']'"));
        }
        hosts.extend(names.into_iter().map(|n| n + rest));
    }
    Ok(hosts)
}

/// Splits at the commas outside brackets.
fn split_top(list: &str) -> Result<Vec<&str>, &'static str> {
    let (mut depth, mut start, mut out) = (0i32, 0, Vec::new());
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(list[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err("unbalanced brackets");
        }
    }
    out.push(list[start..].trim());
    Ok(out)
}

/// `1-3,07,10-11` → `1 2 3 07 10 11`; `None` when malformed or longer than [`MAX_HOSTS`].
fn ranges(spec: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for part in spec.split(',') {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let width = lo.len();
        let (a, b): (u64, u64) = (lo.parse().ok()?, hi.parse().ok()?);
        if a > b || b - a > 65_536 {
            return None;
        }
        if out.len() as u64 + (b - a) >= MAX_HOSTS as u64 {
            return None;
        }
        out.extend((a..=b).map(|n| format!("{n:0width$}")));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::expand;

    #[test]
    fn expands_like_scontrol() {
        assert_eq!(expand("n1").unwrap(), ["n1"]);
        assert_eq!(expand("n[1-3],login").unwrap(), ["n1", "n2", "n3", "login"]);
        assert_eq!(expand("n[08-10,12]").unwrap(), ["n08", "n09", "n10", "n12"]);
        assert_eq!(expand("r[1-2]-n[1-2]").unwrap(), ["r1-n1", "r1-n2", "r2-n1", "r2-n2"]);
    }

    #[test]
    fn rejects_malformed() {
        for bad in ["n[1-", "n1]", "n[3-1]", "n[a]", "n1,,n2", ""] {
            assert!(expand(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn expansions_past_the_largest_cluster_are_refused() {
        // Found by fuzzing: nested ranges multiplied into gigabytes of names.
        assert!(expand("n[0-141][1-22][1-122][0-99]").unwrap_err().to_string().contains("hosts"));
        assert!(expand(&format!("n[{}]", ["0-65000"; 8].join(","))).is_err());
        assert_eq!(expand("n[1-200][1-300]").unwrap().len(), 60_000);
    }
}
