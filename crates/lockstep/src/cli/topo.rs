//! `lockstep topo [--xml FILE] [--json]`.

use std::path::PathBuf;

use crate::topo::Machine;

/// Arguments of `lockstep topo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Read the topology from an hwloc XML file instead of this machine.
    #[arg(long, value_name = "FILE")]
    xml: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `lockstep topo`.
pub fn exec(args: &Args) -> anyhow::Result<i32> {
    let m = Machine::load(args.xml.as_deref())?;
    if args.json {
        println!("{}", m.to_json());
    } else {
        print!("{}", m.render());
    }
    Ok(0)
}
