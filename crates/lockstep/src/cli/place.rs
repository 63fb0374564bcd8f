//! `lockstep place --policy POLICY [--cpus N] [--xml FILE] [--json]`.

use std::path::PathBuf;

use crate::place::{place, POLICY_NAMES};
use crate::topo::Machine;

/// Arguments of `lockstep place`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Placement policy.
    #[arg(long, value_name = "POLICY", help = format!("Placement policy: {}", POLICY_NAMES.join(", ")))]
    policy: String,
    /// Number of PUs (whole cores are filled first); all the policy allows if absent.
    #[arg(long, value_name = "N")]
    cpus: Option<usize>,
    /// Place on the topology of an hwloc XML file instead of this machine.
    #[arg(long, value_name = "FILE")]
    xml: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `lockstep place`.
pub fn exec(args: &Args) -> anyhow::Result<i32> {
    let m = Machine::load(args.xml.as_deref())?;
    let p = place(&m, &args.policy, args.cpus)?;
    if args.json {
        println!("{}", serde_json::to_string(&p)?);
    } else {
        println!("policy {}\npus    {}\nmems   {}\ncores  {}", p.policy, p.pus, p.mems, p.cores);
    }
    Ok(0)
}
