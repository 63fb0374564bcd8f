//! `lockstep jobs [--all] [--json]`: the jobs `lockstep run` started on this node, and the jobs the agent manages
//! otherwise (adopted, or Slurm's), with the names `lockstep status` uses.

use lockstep_core::job::JobOrigin;
use std::path::Path;

use lockstep_jobs::reconcile::{liveness, reconcile, Liveness};
use lockstep_store::Store;

/// Arguments of `lockstep jobs`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Include jobs that have ended (those `lockstep run` started; the agent forgets the others when they end).
    #[arg(long)]
    all: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `lockstep jobs`.
pub fn exec(args: &Args, path: &Path) -> anyhow::Result<i32> {
    // A listing creates no store: none at the path is said, and a file that is not lockstep's is refused. It
    // reads through a read-only connection; only a job whose supervisor died is written, marked lost.
    let store = Store::open_existing(path)?;
    if store.jobs(false)?.iter().any(|j| liveness(j) == Liveness::Lost) {
        reconcile(&Store::open_existing_to_write(path)?)?;
    }
    let jobs = store.jobs(args.all)?;
    let state = |j: &lockstep_store::JobRow| {
        if j.state == "running" && liveness(j) == Liveness::Orphaned {
            "orphaned".to_string()
        } else {
            j.state.clone()
        }
    };
    let others = managed_elsewhere(&store)?;
    if args.json {
        let rows: Vec<serde_json::Value> = jobs
            .iter()
            .map(|j| {
                let mut v = serde_json::to_value(j).expect("job row serializes");
                v["state"] = state(j).into();
                v["origin"] = "run".into();
                v
            })
            .chain(others.iter().map(|m| {
                serde_json::json!({
                    "name": m.name, "state": "managed", "origin": m.origin, "pus": m.pus, "owner": m.owner,
                })
            }))
            .collect();
        println!("{}", serde_json::Value::Array(rows));
        return Ok(0);
    }
    println!(
        "{:<20} {:>8} {:<9} {:<7} {:<11} {:<12} {:<6} {:>6} {:>5}  COMMAND",
        "JOB", "PID", "STATE", "ORIGIN", "PLACE", "PUS", "MEMS", "WEIGHT", "EXIT"
    );
    for j in &jobs {
        let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
        println!(
            "{:<20} {:>8} {:<9} {:<7} {:<11} {:<12} {:<6} {:>6} {:>5}  {}",
            j.name,
            opt(j.pid.map(|p| p.to_string())),
            state(j),
            "run",
            j.policy,
            j.pus,
            j.mems,
            opt(j.weight.map(|w| w.to_string())),
            opt(j.exit_status.map(|s| s.to_string())),
            j.command.join(" ")
        );
    }
    for m in &others {
        println!(
            "{:<20} {:>8} {:<9} {:<7} {:<11} {:<12} {:<6} {:>6} {:>5}  (lockstep status shows its cgroups)",
            m.name, "-", "managed", m.origin, "-", m.pus, "-", "-", "-"
        );
    }
    Ok(0)
}

/// The jobs the agent manages that `lockstep run` did not start (adopted, or Slurm's).
fn managed_elsewhere(store: &Store) -> anyhow::Result<Vec<lockstep_store::ManagedJob>> {
    Ok(store.managed_jobs()?.into_iter().filter(|m| m.origin != JobOrigin::Run).collect())
}
