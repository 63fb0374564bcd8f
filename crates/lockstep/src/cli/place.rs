//! `lockstep place --policy POLICY [--cpus N] [--xml FILE] [--json]`.

use super::topo::Source;
use lockstep_core::place::{place, PLACEMENTS};

/// Arguments of `lockstep place`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Placement policy.
    #[arg(long, value_name = "POLICY", help = format!("Placement policy: {}", PLACEMENTS.list()))]
    policy: String,
    /// Number of PUs (whole cores are filled first); all the policy allows if absent.
    #[arg(long, value_name = "N")]
    cpus: Option<usize>,
    #[command(flatten)]
    source: Source,
}

/// Runs `lockstep place`.
pub fn exec(args: &Args) -> anyhow::Result<i32> {
    let m = args.source.machine()?;
    let p = place(&m, args.policy.parse()?, args.cpus)?;
    if args.source.json {
        println!("{}", serde_json::to_string(&p)?);
    } else {
        println!("policy {}\npus    {}\nmems   {}\ncores  {}", p.policy, p.pus, p.mems, p.cores);
    }
    Ok(0)
}
