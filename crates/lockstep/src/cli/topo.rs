//! `lockstep topo [--xml FILE] [--json]`.

use std::path::PathBuf;

use lockstep_core::topo::Machine;

/// Where a topology comes from and how to print the result; shared by `topo` and `place`.
#[derive(Debug, clap::Args)]
pub struct Source {
    /// Read the topology from an hwloc XML file instead of this machine.
    #[arg(long, value_name = "FILE")]
    pub xml: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

impl Source {
    /// Loads the topology this source names.
    pub fn machine(&self) -> anyhow::Result<Machine> {
        Ok(Machine::load(self.xml.as_deref())?)
    }
}

/// Arguments of `lockstep topo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    source: Source,
}

/// Runs `lockstep topo`.
pub fn exec(args: &Args) -> anyhow::Result<i32> {
    let m = args.source.machine()?;
    if args.source.json {
        println!("{}", m.to_json());
    } else {
        print!("{}", m.render());
    }
    Ok(0)
}
