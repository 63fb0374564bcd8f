//! `lockstep run --job NAME --place POLICY [--cpus N] [--weight W] [--mem-limit BYTES] -- CMD [ARGS…]`.

use lockstep_core::cosched::rows::MAX_ROWS;
use std::path::Path;

use lockstep_core::ident::JobName;
use lockstep_core::place::place;
use lockstep_core::topo::Machine;
use lockstep_jobs::launch::{self, Request};
use lockstep_store::Store;

/// Arguments of `lockstep run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Job name (unique among running jobs of this node).
    #[arg(long, value_name = "NAME")]
    job: JobName,
    /// Placement policy (see `lockstep place`).
    #[arg(long, value_name = "POLICY")]
    place: String,
    /// Number of PUs; all the policy allows if absent.
    #[arg(long, value_name = "N")]
    cpus: Option<usize>,
    /// CPU weight, cgroup v2 scale 1-10000 (100 is the default share; v1 cpu.shares = W*1024/100).
    #[arg(long, value_name = "W", value_parser = clap::value_parser!(u64).range(1..=10000))]
    weight: Option<u64>,
    /// Memory limit in bytes; K, M, G, T suffixes (powers of 1024) accepted.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    mem_limit: Option<u64>,
    /// Row in the agent's co-scheduling matrix (the same on every node of the job); a name hash otherwise.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(..i64::from(MAX_ROWS)))]
    row: Option<u32>,
    /// The command and its arguments (after `--`, or from the first word that is not an option on, as `srun`
    /// and `perf stat` take them).
    #[arg(trailing_var_arg = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

/// The least `--mem-limit`.
const MIN_MEM_LIMIT: u64 = 4 << 20;

/// Parses `123`, `64K`, `512M`, `4G`, `1T`: a byte count of at least [`MIN_MEM_LIMIT`].
fn parse_bytes(s: &str) -> Result<u64, String> {
    let (digits, shift) = match s.as_bytes().last().map(u8::to_ascii_uppercase) {
        Some(b'K') => (&s[..s.len() - 1], 10),
        Some(b'M') => (&s[..s.len() - 1], 20),
        Some(b'G') => (&s[..s.len() - 1], 30),
        Some(b'T') => (&s[..s.len() - 1], 40),
        _ => (s, 0),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| format!("{s:?} is not a byte count (expected e.g. 1073741824, 512M, 4G)"))
        .and_then(|n| {
            // Below a few MiB no program starts: the job would only be OOM-killed.
            (n >= MIN_MEM_LIMIT).then_some(n).ok_or_else(|| format!("{s:?} is below the least memory limit, 4M"))
        })
}

/// Runs `lockstep run`; returns the command's exit status.
pub fn exec(args: &Args, store: &Path, socket: &Path) -> anyhow::Result<i32> {
    let placement = place(&Machine::live()?, args.place.parse()?, args.cpus)?;
    // Refused before the store exists: bad input changes nothing.
    launch::resolve_command(&args.command[0])?;
    let mut store = Store::open(store)?;
    Ok(launch::run(
        &mut store,
        &Request {
            name: args.job.clone(),
            placement,
            requested_cpus: args.cpus,
            weight: args.weight,
            mem_limit: args.mem_limit,
            command: args.command.clone(),
            row: args.row,
            socket: socket.to_path_buf(),
        },
    )?)
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn byte_counts() {
        assert_eq!(parse_bytes("4194304"), Ok(4 << 20));
        assert!(parse_bytes("4096").unwrap_err().contains("least memory limit"));
        assert_eq!(parse_bytes("512M"), Ok(512 << 20));
        assert_eq!(parse_bytes("4g"), Ok(4 << 30));
        assert!(parse_bytes("x").is_err());
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("-1K").is_err());
    }
}
