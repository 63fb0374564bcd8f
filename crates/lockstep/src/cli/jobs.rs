//! `lockstep jobs [--all] [--json]`.

use std::path::Path;

use lockstep_jobs::reconcile::{liveness, reconcile, Liveness};
use lockstep_store::Store;

/// Arguments of `lockstep jobs`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Include jobs that have ended.
    #[arg(long)]
    all: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `lockstep jobs`.
pub fn exec(args: &Args, store: &Path) -> anyhow::Result<i32> {
    let store = Store::open(store)?;
    reconcile(&store)?;
    let jobs = store.jobs(args.all)?;
    let state = |j: &lockstep_store::JobRow| {
        if j.state == "running" && liveness(j) == Liveness::Orphaned {
            "orphaned".to_string()
        } else {
            j.state.clone()
        }
    };
    if args.json {
        let rows: Vec<serde_json::Value> = jobs
            .iter()
            .map(|j| {
                let mut v = serde_json::to_value(j).expect("job row serializes");
                v["state"] = state(j).into();
                v
            })
            .collect();
        println!("{}", serde_json::Value::Array(rows));
        return Ok(0);
    }
    println!(
        "{:<20} {:>8} {:<9} {:<11} {:<12} {:<6} {:>6} {:>5}  COMMAND",
        "JOB", "PID", "STATE", "POLICY", "PUS", "MEMS", "WEIGHT", "EXIT"
    );
    for j in &jobs {
        let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
        println!(
            "{:<20} {:>8} {:<9} {:<11} {:<12} {:<6} {:>6} {:>5}  {}",
            j.name,
            opt(j.pid.map(|p| p.to_string())),
            state(j),
            j.policy,
            j.pus,
            j.mems,
            opt(j.weight.map(|w| w.to_string())),
            opt(j.exit_status.map(|s| s.to_string())),
            j.command.join(" ")
        );
    }
    Ok(0)
}
